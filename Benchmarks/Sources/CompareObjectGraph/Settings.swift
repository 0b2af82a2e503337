/// Sizes of the object-graph comparison (issue 8): Strata through ObjectGraph beside SQLite
/// through GRDB.
///
/// ``standard`` uses the sizes; ``quick`` is small enough that the whole level runs in
/// well under 30 seconds on two cores.
public struct ObjectGraphComparisonSettings: Sendable {
    /// Objects of the one-save bulk insert (about: one product in 100, customers with four
    /// orders each for the rest). The later graph workloads run on what it saved.
    public var objects: Int
    /// Saves of 10 objects (two customers with four orders each) under full durability.
    public var saves: Int
    /// Objects (customers and orders) faulted in by ID, cold then warm.
    public var faults: Int
    /// Fetches with a predicate on indexed attributes (stops early after ``budget``).
    public var indexedFetches: Int
    /// Fetches with the same predicate on unindexed attributes (stops early after ``budget``).
    public var unindexedFetches: Int
    /// The fetch limit of both fetches.
    public var fetchLimit: Int
    /// Counts of each kind (stops early after ``budget``).
    public var counts: Int
    /// Customers whose orders are traversed.
    public var traversals: Int
    /// Fraction of the customers and of the orders updated in one save.
    public var updateFraction: Double
    /// Fraction of the customers deleted (with their orders) in one save.
    public var deleteFraction: Double
    /// Rows (customers and orders) of the store that is reopened.
    public var reopenRows: Int
    /// Rows a save (a transaction in SQLite) while building the store that is reopened.
    public var reopenBatch: Int
    /// Reopens measured; the row reports the median.
    public var reopens: Int
    /// Threads that save concurrently into one store while another context merges their
    /// saves (the concurrent-saves rows).
    public var concurrentWriters: Int
    /// Saves each of those threads makes (10 inserted objects and 2 updated ones each).
    public var concurrentSaves: Int
    /// Customers (each with its orders) the merging context holds loaded before the writers
    /// start; each writer updates its share of them, 2 a save.
    public var mergedCustomers: Int
    /// The workloads to run, a subset of ``allWorkloads`` (the rows of the others are left out).
    public var workloads: [String]
    /// Seconds after which a repeated measurement (fetches, counts) stops early.
    public var budget: Double
    /// Whether to check that both systems return the same answers (fetched names, counts,
    /// faulted values, traversal sums, counts after updates and deletes) and throw an
    /// ``ObjectGraphComparisonError`` naming the operation when they differ.
    public var verify: Bool
    /// The seed of the one generator both systems' data comes from.
    public var seed: UInt64

    /// Settings with every size given; see each property.
    public init(
        objects: Int, saves: Int, faults: Int, indexedFetches: Int, unindexedFetches: Int, fetchLimit: Int = 100,
        counts: Int, traversals: Int, updateFraction: Double = 0.1, deleteFraction: Double = 0.1, reopenRows: Int,
        reopenBatch: Int = 50_000, reopens: Int = 3, concurrentWriters: Int = 4, concurrentSaves: Int = 250,
        mergedCustomers: Int = 80, workloads: [String] = Self.allWorkloads, budget: Double, verify: Bool = true,
        seed: UInt64 = 0x0B1E_C7
    ) {
        self.objects = objects
        self.saves = saves
        self.faults = faults
        self.indexedFetches = indexedFetches
        self.unindexedFetches = unindexedFetches
        self.fetchLimit = fetchLimit
        self.counts = counts
        self.traversals = traversals
        self.updateFraction = updateFraction
        self.deleteFraction = deleteFraction
        self.reopenRows = reopenRows
        self.reopenBatch = reopenBatch
        self.reopens = reopens
        self.concurrentWriters = concurrentWriters
        self.concurrentSaves = concurrentSaves
        self.mergedCustomers = mergedCustomers
        self.workloads = workloads
        self.budget = budget
        self.verify = verify
        self.seed = seed
    }

    /// The workloads, in the order they run: `graph` (the bulk insert, then faults, fetches,
    /// counts, traversal, update and delete on what it saved), `saves` (many small durable
    /// saves), `concurrent` (concurrent saves with a merging context), `reopen`, `binary`
    /// (the binary atomic store beside SQLite and StrataStore, issue 16), and `migration`
    /// (opening a store of ``reopenRows`` rows after a model change, issue 17).
    public static let allWorkloads = ["graph", "saves", "concurrent", "reopen", "binary", "migration"]

    /// Tiny sizes for a smoke run: 10k objects, 100 saves, 2k faults, 20k reopen rows, 4
    /// concurrent writers of 50 saves each; verifies.
    public static let quick = Self(
        objects: 10_000, saves: 100, faults: 2_000, indexedFetches: 50, unindexedFetches: 5, counts: 200,
        traversals: 200, reopenRows: 20_000, reopenBatch: 10_000, reopens: 3, concurrentSaves: 50, budget: 0.5,
        verify: true)

    /// The sizes: 100k objects in one save, 1k saves, 10k faults, 1k traversals, a
    /// store of 1M rows to reopen, 4 concurrent writers of 250 saves each; verifies.
    public static let standard = Self(
        objects: 100_000, saves: 1_000, faults: 10_000, indexedFetches: 200, unindexedFetches: 20, counts: 2_000,
        traversals: 1_000, reopenRows: 1_000_000, reopenBatch: 50_000, reopens: 3, budget: 3, verify: true)
}

/// A failure of the object-graph comparison: an operation that failed or, when
/// ``ObjectGraphComparisonSettings/verify`` is on, answers that differ between the systems.
public struct ObjectGraphComparisonError: Error, CustomStringConvertible {
    /// The operation, e.g. "fetch, indexed predicate" or "open SQLite".
    public let operation: String
    /// What went wrong.
    public let detail: String

    /// An error about `operation`.
    public init(_ operation: String, _ detail: String) {
        self.operation = operation
        self.detail = detail
    }

    /// "object graph comparison, <operation>: <detail>".
    public var description: String { "object graph comparison, \(operation): \(detail)" }
}

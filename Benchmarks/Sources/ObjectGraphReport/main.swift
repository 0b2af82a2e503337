// objectgraph-report: the object-graph workload (issue 6) on StrataStore and on InMemoryStore,
// side by side, in one run and one temporary directory. See Benchmarks/README.md.

import BenchmarkSupport
import Foundation
import Glibc
import Strata

/// How many objects of each kind the big insert makes.
struct Shape {
    /// Products (shared by the orders): one object in 100.
    let products: Int
    /// Customers; each has ``Shop/ordersPerCustomer`` orders.
    let customers: Int
    /// Every object.
    var total: Int { products + customers * Shop.objectsPerCustomer }

    /// About `objects` objects in all.
    init(objects: Int) {
        products = max(1, objects / 100)
        customers = max(1, (objects - products) / Shop.objectsPerCustomer)
    }
}

/// Sizes and places, from the command line (see `usage`).
struct Settings {
    var objects = 100_000
    var saves = 1_000
    var faults = 10_000
    var fetches = 200
    var unindexedFetches = 20
    var fetchLimit = 100
    var counts = 2_000
    var reopenRows = 200_000
    var reopenBatch = 50_000
    var reopens = 3
    /// Seconds after which the repeated fetches and counts stop early.
    var budget = 4.0
    var parent = "/tmp"

    var shape: Shape { Shape(objects: objects) }

    static let usage = """
        usage: objectgraph-report [--quick] [--objects N] [--saves N] [--faults N] [--fetches N]
                                  [--counts N] [--reopen-rows N] [--dir PATH]

          --quick          20k objects, 200 saves, 2k faults, 50 fetches, 500 counts,
                           50k reopen rows (under 30 s)
          --objects N      objects of the one-save insert (default 100000)
          --saves N        saves of 10 objects, durability full (default 1000)
          --faults N       objects faulted in by ID (default 10000)
          --fetches N      indexed fetches (default 200; a tenth of it, at least 5, unindexed)
          --counts N       counts of a whole entity (default 2000)
                           (fetches and counts stop early after 4 s, 1 s with --quick)
          --reopen-rows N  rows of the store that is reopened (default 200000; DESIGN's target
                           is about --reopen-rows 1000000)
          --dir PATH       where the temporary directory goes (default /tmp)
        """

    init(arguments: [String]) throws {
        var reader = ArgumentReader(arguments, usage: Self.usage)
        while let flag = reader.nextFlag() {
            switch flag {
            case "--quick":
                objects = 20_000
                saves = 200
                faults = 2_000
                fetches = 50
                counts = 500
                reopenRows = 50_000
                reopenBatch = 25_000
                budget = 1
            case "--objects": objects = try reader.positiveInteger(for: flag)
            case "--saves": saves = try reader.positiveInteger(for: flag)
            case "--faults": faults = try reader.positiveInteger(for: flag)
            case "--fetches": fetches = try reader.positiveInteger(for: flag)
            case "--counts": counts = try reader.positiveInteger(for: flag)
            case "--reopen-rows": reopenRows = try reader.positiveInteger(for: flag)
            case "--dir": parent = try reader.value(for: flag)
            case "-h", "--help":
                print(Self.usage)
                exit(0)
            default: throw BenchmarkError("unknown argument \(flag)\n\(Self.usage)")
            }
        }
        unindexedFetches = max(5, fetches / 10)
        faults = min(faults, shape.customers * Shop.objectsPerCustomer)
        reopenRows = max(Shop.objectsPerCustomer, reopenRows)
    }
}

/// One line of the table: what each store did, and in how many seconds.
struct Line {
    /// What was measured, and its unit in parentheses.
    var operation: String
    /// StrataStore's figures.
    var strata: Measure
    /// InMemoryStore's figures.
    var inMemory: Measure

    /// `ops` operations in the seconds each store took.
    init(operation: String, ops: Int, strata: Double, inMemory: Double) {
        self.init(operation: operation, strata: Measure(ops: ops, seconds: strata), inMemory: Measure(ops: ops, seconds: inMemory))
    }

    /// Operations that may differ between the stores (repeated until a time limit).
    init(operation: String, strata: Measure, inMemory: Measure) {
        self.operation = operation
        self.strata = strata
        self.inMemory = inMemory
    }
}

/// The table: operation, ops, then per store ops/s and seconds, then the ratio of ops/s.
func render(_ lines: [Line]) -> String {
    let header = ["operation", "ops", "Strata ops/s", "Strata s", "InMemory ops/s", "InMemory s", "Strata/InMem"]
    let rows = lines.map { line -> [String] in
        let strataRate = Double(line.strata.ops) / line.strata.seconds
        let memoryRate = Double(line.inMemory.ops) / line.inMemory.seconds
        func rate(_ value: Double) -> String { value >= 100 ? fixed(value, 0) : fixed(value, 2) }
        let ops = line.strata.ops == line.inMemory.ops ? "\(line.strata.ops)" : "\(line.strata.ops)/\(line.inMemory.ops)"
        return [
            line.operation, ops, rate(strataRate), fixed(line.strata.seconds, 3), rate(memoryRate),
            fixed(line.inMemory.seconds, 3), fixed(strataRate / memoryRate, 2),
        ]
    }
    let all = [header] + rows
    let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
    func format(_ cells: [String]) -> String {
        cells.indices.map { column -> String in
            let fill = String(repeating: " ", count: widths[column] - cells[column].count)
            return column == 0 ? cells[column] + fill : fill + cells[column]
        }.joined(separator: "  ")
    }
    let rule = String(repeating: "-", count: widths.reduce(0, +) + 2 * (widths.count - 1))
    return ([format(header), rule] + rows.map(format)).joined(separator: "\n")
}

/// Prints a progress line at once, even when the output goes to a file or a pipe.
func progress(_ line: String) {
    print(line)
    fflush(nil)
}

/// A one-line summary of a StrataStore's engine.
func describe(_ stats: EngineStats?) -> String {
    guard let stats else { return "no engine statistics" }
    return "\(stats.keyCount) keys, \(stats.segments.count) segment(s), \(stats.wals.count) WAL(s), "
        + "\(fixed(Double(stats.diskBytes) / 1e6, 1)) MB on disk, index \(fixed(Double(stats.indexMemoryBytes) / 1e6, 1)) MB"
}

/// Runs every phase on both stores and prints the table and the notes.
func runReport(_ settings: Settings) throws {
    StrataStore.register()
    let model = try Shop.model()
    let directory = try TemporaryDirectory(in: settings.parent, prefix: "strata-objectgraph-")
    defer { directory.remove() }
    let shape = settings.shape
    print(
        "objectgraph-report: \(shape.total) objects (\(shape.customers) customers, \(shape.customers * Shop.ordersPerCustomer) "
            + "orders, \(shape.products) products) in \(directory.path)")
    progress("load average at start: \(loadAverage())\n")

    var graph: [StoreKind: GraphFigures] = [:]
    var saves: [StoreKind: Double] = [:]
    var reopen: [StoreKind: ReopenFigures] = [:]
    for kind in StoreKind.allCases {
        graph[kind] = try runGraph(kind, settings, model: model, directory: directory)
        saves[kind] = try runSaves(kind, settings, model: model, directory: directory)
        reopen[kind] = try runReopen(kind, settings, model: model, directory: directory)
    }
    guard let strata = graph[.strata], let memory = graph[.inMemory], let strataSaves = saves[.strata],
        let memorySaves = saves[.inMemory], let strataReopen = reopen[.strata], let memoryReopen = reopen[.inMemory],
        let strataFirst = strataReopen.reopens.first, let memoryFirst = memoryReopen.reopens.first
    else { throw BenchmarkError("a store's figures are missing") }

    let faults = settings.faults
    let lines = [
        Line(operation: "insert with relationships, one save (objects)", ops: shape.total, strata: strata.insert, inMemory: memory.insert),
        Line(operation: "  of which the save", ops: shape.total, strata: strata.insertSave, inMemory: memory.insertSave),
        Line(operation: "saves of 10 objects, durability full (saves)", ops: settings.saves, strata: strataSaves, inMemory: memorySaves),
        Line(operation: "fault by ID, random, cold (faults)", ops: faults, strata: strata.cold, inMemory: memory.cold),
        Line(operation: "fault by ID, warm: same context (faults)", ops: faults, strata: strata.warm, inMemory: memory.warm),
        Line(operation: "fault by ID after reset() (faults)", ops: faults, strata: strata.refault, inMemory: memory.refault),
        Line(operation: "fetch indexed, sorted, limit \(settings.fetchLimit) (fetches)", strata: strata.indexed, inMemory: memory.indexed),
        Line(operation: "  same, conjuncts swapped: name first (fetches)", strata: strata.swapped, inMemory: memory.swapped),
        Line(operation: "fetch same, unindexed attributes (fetches)", strata: strata.unindexed, inMemory: memory.unindexed),
        Line(operation: "count Order, no predicate (counts)", strata: strata.count, inMemory: memory.count),
        Line(operation: "reopen \(settings.reopenRows) rows + 1st object, first", ops: 1, strata: strataFirst, inMemory: memoryFirst),
        Line(
            operation: "reopen \(settings.reopenRows) rows + 1st object, best of \(settings.reopens)", ops: 1,
            strata: strataReopen.reopens.min() ?? strataFirst, inMemory: memoryReopen.reopens.min() ?? memoryFirst),
    ]
    print("\n" + render(lines) + "\n")

    let names = [strata.indexedNames, strata.swappedNames, strata.unindexedNames]
    let same = names == [memory.indexedNames, memory.swappedNames, memory.unindexedNames] && Set(names).count == 1
    print("predicates: tier == 3 AND name BEGINSWITH 'C' sorted by name (indexed; StrataStore's plan uses the first")
    print("  indexed conjunct, so the swapped one reads the name index); level == 3 AND label BEGINSWITH 'C' sorted by")
    print(
        "  label (unindexed copies); \(strata.indexedNames.count) results; the same in every fetch and both stores: "
            + (same ? "yes" : "NO"))
    print("InMemoryStore has no durability: its saves write nothing to disk.")
    print(
        "cold faults: a new coordinator on the closed store (StrataStore: engine reopened, OS page cache warm; "
            + "InMemoryStore: rows shared by URL); addPersistentStore took \(fixed(strata.coldOpen * 1000, 1)) ms "
            + "and \(fixed(memory.coldOpen * 1000, 1)) ms")
    print("StrataStore after the insert: \(describe(strata.stats))")
    print(
        "reopen store built in \(fixed(strataReopen.build, 1)) s (StrataStore, durability none) and "
            + "\(fixed(memoryReopen.build, 1)) s (InMemoryStore); all reopens, ms: Strata "
            + strataReopen.reopens.map { fixed($0 * 1000, 1) }.joined(separator: ", ") + "; InMemory "
            + memoryReopen.reopens.map { fixed($0 * 1000, 1) }.joined(separator: ", "))
    print("StrataStore at its first reopen: \(describe(strataReopen.stats))")
    print(
        "load average at end: \(loadAverage()) (on \(ProcessInfo.processInfo.activeProcessorCount) cores; "
            + "other work skews results)")
}

do {
    try runReport(try Settings(arguments: Array(CommandLine.arguments.dropFirst())))
} catch {
    FileHandle.standardError.write(Data("objectgraph-report: \(error)\n".utf8))
    exit(2)
}

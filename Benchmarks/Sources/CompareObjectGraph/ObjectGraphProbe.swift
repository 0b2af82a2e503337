import BenchmarkSupport
import CHeapStats
import Foundation
import Strata

/// One phase of the object-graph comparison, run alone so that a profiler can count it
/// (issue 12's instructions per object): `valgrind --tool=callgrind --collect-atstart=no
/// --toggle-collect='*probePhase*'` counts only ``ObjectGraphProbe/probePhase(_:)``.
///
/// The setup (data, the store a read phase reads) runs outside the counted function.
public struct ObjectGraphProbe {
    /// What the counted function does.
    public enum Phase: String, CaseIterable, Sendable {
        /// Insert every object of the shop graph with its relationships, one save.
        case insert
        /// Fault in `count` random customers and orders by ID from a just-reopened store.
        case fault
        /// `count` fetches of `tier == 3 AND name BEGINSWITH "C"`, sorted by name, limit 100.
        case fetchIndexed = "fetch-indexed"
        /// `count` fetches of the same predicate on the unindexed copies (a scan).
        case fetchUnindexed = "fetch-unindexed"
        /// Heap bytes per registered object (`count` objects faulted in and kept) and per
        /// fetched row (every customer fetched, kept as objects): measured, not counted.
        case memory
        /// Delete one customer in 10 (random; the model cascades to their orders and takes
        /// them out of their products), one save: the comparison's delete row. Strata only.
        case delete
        /// Change one customer in 10 (city, unindexed) and one order in 10 (status, indexed),
        /// random, each read first, one save: the comparison's update row. Strata only.
        case update
        /// `count` random customers from a just-reopened store, each faulted in, its orders
        /// followed and every order's total read: the comparison's traverse row. Strata only.
        case traverse
        /// `count` saves of two customers with four orders each into a new store, full
        /// durability, one context throughout: the comparison's durable-saves row (instructions
        /// only: the time spent waiting for the disk is not counted).
        case saves
        /// Reopen the store of the graph (inserted, then closed): a new coordinator, the
        /// store's open (the engine's recovery and index build) and a count of the orders.
        /// Strata only: DESIGN.md's open target.
        case open
        /// Open the store an `open` phase left in the directory, `count` times (each: a new
        /// coordinator, the store's open and a count of the orders, then a close), building
        /// nothing first: a profile of the open alone. Strata only.
        case reopen
        /// Move an entity out of its hierarchy: a store of the graph's customers and orders
        /// (in saves of `--per-save` rows, 10,000 by default) under a model where Refund is a
        /// subentity of Order, given one refund per ten orders, is added under the model where
        /// Refund is a root of its own (the migration's in-place split, [MIG-1]); counted: the
        /// open with the migration and a count of the orders (the close after it is not).
        /// Strata only: the comparison's split row.
        case split
        /// Add a uniqueness constraint: a store of the graph's customers and orders (in saves
        /// of `--per-save` rows, 10,000 by default) is added under a model where
        /// `Customer.label` is unique; counted: the open, which builds the label's index
        /// entries before it returns ([SAVE-4]), and a count of the orders. Strata only: the
        /// comparison's constraint row, alone.
        case constraint
    }

    /// Which system runs the phase.
    public enum System: String, Sendable {
        case strata, sqlite
    }

    public var phase: Phase
    public var system: System
    /// Objects of the graph (one product in 100, customers with four orders each).
    public var objects: Int
    /// Faults or fetches of the read phases.
    public var count: Int
    /// A directory for the stores (emptied first).
    public var directory: String
    /// For the open phase: build the store in saves of this many rows (customers and their
    /// orders, as the comparison's reopen rows do) instead of one save of the graph.
    public var perSave: Int?

    public init(phase: Phase, system: System, objects: Int, count: Int, directory: String, perSave: Int? = nil) {
        self.perSave = perSave
        self.phase = phase
        self.system = system
        self.objects = objects
        self.count = count
        self.directory = directory
    }

    /// Units of work the phase did, for "per object" and "per row" figures.
    public struct Work: Sendable {
        /// Objects inserted, objects faulted, or fetches run.
        public var operations: Int
        /// Rows the phase's store had to consider (objects for insert and fault, rows of the
        /// scanned entity for an unindexed fetch, result rows for an indexed one).
        public var rows: Int
    }

    /// Runs the setup, then the counted phase; returns what the phase did.
    public func run() throws -> Work {
        if phase == .reopen { return try reopenExisting() }
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        StrataStore.register()
        if phase == .saves { return try saves() }
        if phase == .split { return try split() }
        if phase == .constraint { return try constraint() }
        let data = ShopData.graph(objects: objects, seed: 42)
        switch system {
        case .strata:
            let shop = try StrataShop(path: directory + "/strata", model: try Shop.model(), durability: "normal")
            if phase == .insert {
                try probePhase { _ = try shop.insert(data) }
                try shop.close()
                return Work(operations: data.objectCount, rows: data.objectCount)
            }
            if phase == .open, let perSave {
                // As the comparison's reopen and migration stores are built: customers with
                // their orders, in saves of `perSave` rows, the context reset after each.
                try shop.close()
                let built = try StrataShop(path: directory + "/strata", model: try Shop.model(), durability: "normal")
                let customers = max(1, objects / Shop.objectsPerCustomer)
                try built.insertInSaves(
                    ShopData.customers(0..<customers, seed: 42), perSave: max(1, perSave / Shop.objectsPerCustomer), resetting: true)
                try built.close()
                var orders = 0
                try probePhase { orders = try built.openAgainAndCount() }
                try built.close()
                return Work(operations: customers * Shop.objectsPerCustomer, rows: orders)
            }
            try shop.insert(data)
            if phase == .open {
                try shop.close()
                var orders = 0
                try probePhase { orders = try shop.openAgainAndCount() }
                try shop.close()
                return Work(operations: data.objectCount, rows: orders)
            }
            try shop.reopen()
            if phase == .memory { return try memory(data, shop) }
            if phase == .delete {
                var random = SplitMix64(seed: 7)
                let picks = Array((0..<data.customers.count).shuffled(using: &random).prefix(max(1, data.customers.count / 10)))
                let picked = Set(picks)
                let orders = data.orders.filter { picked.contains($0.customer) }.count
                try probePhase { try shop.delete(customers: picks) }
                try shop.close()
                return Work(operations: picks.count + orders, rows: picks.count + orders)
            }
            if phase == .update {
                var random = SplitMix64(seed: 7)
                let customers = Array((0..<data.customers.count).shuffled(using: &random).prefix(max(1, data.customers.count / 10)))
                let orders = Array((0..<data.orders.count).shuffled(using: &random).prefix(max(1, data.orders.count / 10)))
                try probePhase { try shop.update(customers: customers, orders: orders) }
                try shop.close()
                return Work(operations: customers.count + orders.count, rows: customers.count + orders.count)
            }
            if phase == .traverse {
                var random = SplitMix64(seed: 7)
                let picks = Array((0..<data.customers.count).shuffled(using: &random).prefix(count))
                var children = 0
                try probePhase { children = try shop.traverse(picks).children }
                try shop.close()
                return Work(operations: picks.count, rows: children)
            }
            let work = try readPhase(data, fault: { try shop.fault($0).values.count }, fetch: { try shop.fetch($0).count })
            try shop.close()
            return work
        case .sqlite:
            let shop = try SQLiteShop(path: directory + "/sqlite.db", synchronous: "NORMAL")
            if phase == .insert {
                try probePhase { try shop.insert(data) }
                try shop.close()
                return Work(operations: data.objectCount, rows: data.objectCount)
            }
            try shop.insert(data)
            try shop.analyze()
            try shop.reopen()
            let far = ContinuousClock.now + .seconds(3600)
            let work = try readPhase(
                data, fault: { try shop.fault($0).count }, fetch: { try shop.fetch($0, times: 1, until: far).names.count })
            try shop.close()
            return work
        }
    }

    /// The durable-saves phase: `count` saves, each of two customers and their orders.
    private func saves() throws -> Work {
        let perSave = 2
        let data = ShopData.customers(0..<count * perSave, seed: 42 ^ 0x5A7E5)
        switch system {
        case .strata:
            let shop = try StrataShop(path: directory + "/strata", model: try Shop.model(), durability: "full")
            try probePhase { try shop.insertInSaves(data, perSave: perSave) }
            try shop.close()
        case .sqlite:
            let shop = try SQLiteShop(path: directory + "/sqlite.db", synchronous: "FULL")
            try probePhase { try shop.insertInSaves(data, perSave: perSave) }
            try shop.close()
        }
        return Work(operations: count, rows: count * perSave * Shop.objectsPerCustomer)
    }

    /// The constraint phase (see ``Phase/constraint``).
    private func constraint() throws -> Work {
        let (url, customers) = try migrationStore(model: try ShopModel.make())
        let (orders, milliseconds) = try openMigrating(url, model: try ShopModel.make(labelUnique: true))
        print("constraint: \(milliseconds) ms, \(customers) customers, \(orders) orders")
        return Work(operations: customers, rows: orders)
    }

    /// The split phase (see ``Phase/split``).
    private func split() throws -> Work {
        let before = try ShopModel.make(refunds: true)
        let (url, customers) = try migrationStore(model: before)
        let refunds = max(1, customers * Shop.ordersPerCustomer / 10)
        try ShopModel.insertRefunds(refunds, model: before, at: url)
        let (orders, milliseconds) = try openMigrating(url, model: try ShopModel.make(refundsApart: true))
        print("split: \(milliseconds) ms, \(refunds) refunds moved, \(orders) orders")
        return Work(operations: refunds, rows: orders + refunds)
    }

    /// A closed StrataStore of `model` holding the graph's customers and their orders, saved
    /// in saves of `--per-save` rows (10,000 by default): its URL and its customers.
    private func migrationStore(model: ManagedObjectModel) throws -> (url: URL, customers: Int) {
        let url = URL(fileURLWithPath: directory + "/strata")
        let customers = max(1, objects / Shop.objectsPerCustomer)
        let built = try StrataShop(path: url.path, model: model, durability: "normal")
        try built.insertInSaves(
            ShopData.customers(0..<customers, seed: 42), perSave: max(1, (perSave ?? 10_000) / Shop.objectsPerCustomer), resetting: true)
        try built.close()
        return (url, customers)
    }

    /// Adds the store at `url` under `model` with the migration options and counts its orders,
    /// inside `probePhase`; then removes it (the close writes the log out: not counted, as in
    /// the comparison). The count, and the milliseconds the add and the count took.
    private func openMigrating(_ url: URL, model: ManagedObjectModel) throws -> (orders: Int, milliseconds: Int) {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        var store: PersistentStore?
        var orders = 0
        let start = ContinuousClock.now
        try probePhase {
            store = try coordinator.addPersistentStore(type: .strata, at: url, options: [
                StrataStore.durabilityOption: .string("normal"),
                PersistentStore.migratePersistentStoresAutomaticallyOption: .bool(true),
                PersistentStore.inferMappingModelAutomaticallyOption: .bool(true),
            ])
            orders = try ManagedObjectContext(persistentStoreCoordinator: coordinator).count(for: FetchRequest(entityName: "Order"))
        }
        let elapsed = (ContinuousClock.now - start).components
        if let store { try coordinator.remove(store) }
        return (orders, Int((Double(elapsed.seconds) * 1000 + Double(elapsed.attoseconds) / 1e15).rounded()))
    }

    /// Heap bytes per registered object and per fetched row, printed; the objects stay alive
    /// while measured.
    private func memory(_ data: ShopData, _ shop: StrataShop) throws -> Work {
        func heap() -> Int { Int(strata_heap_bytes_in_use()) }
        var random = SplitMix64(seed: 7)
        let everything = (0..<data.customers.count).map(ObjectRef.customer) + (0..<data.orders.count).map(ObjectRef.order)
        let picks = Array(everything.shuffled(using: &random).prefix(count))
        let before = heap()
        let (objects, _) = try shop.fault(picks)
        let registered = heap() - before
        shop.resetContext()
        let fetchedBefore = heap()
        let rows = try shop.fetchAllCustomers()
        let fetched = heap() - fetchedBefore
        print("memory: \(registered / max(1, objects.count)) bytes per registered object (\(objects.count) objects), \(fetched / max(1, rows.count)) bytes per fetched row (\(rows.count) rows)")
        withExtendedLifetime((objects, rows)) {}
        return Work(operations: objects.count + rows.count, rows: objects.count + rows.count)
    }

    /// The `reopen` phase: the store an `open` phase left, opened `count` times.
    private func reopenExisting() throws -> Work {
        StrataStore.register()
        let path = directory + "/strata"
        guard FileManager.default.fileExists(atPath: path) else {
            throw ObjectGraphComparisonError("reopen", "no store at \(path): run the open phase with the same --dir first")
        }
        let shop = try StrataShop(path: path, model: try Shop.model(), durability: "normal")
        try shop.close()
        var orders = 0
        var seconds: [Double] = []
        try probePhase {
            for _ in 0..<count {
                let start = ContinuousClock.now
                orders = try shop.openAgainAndCount()
                let elapsed = (ContinuousClock.now - start).components
                seconds.append(Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18)
                try shop.close()
            }
        }
        print("reopen: \(seconds.map { String(Int(($0 * 1000).rounded())) + " ms" }.joined(separator: ", "))")
        return Work(operations: count, rows: orders)
    }

    private func readPhase(_ data: ShopData, fault: ([ObjectRef]) throws -> Int, fetch: (CustomerQuery) throws -> Int) throws -> Work {
        switch phase {
        case .insert, .memory, .delete, .update, .traverse, .saves, .open, .reopen, .split, .constraint:
            return Work(operations: 0, rows: 0)
        case .fault:
            var random = SplitMix64(seed: 7)
            let everything = (0..<data.customers.count).map(ObjectRef.customer) + (0..<data.orders.count).map(ObjectRef.order)
            let picks = Array(everything.shuffled(using: &random).prefix(count))
            var faulted = 0
            try probePhase { faulted = try fault(picks) }
            return Work(operations: faulted, rows: faulted)
        case .fetchIndexed, .fetchUnindexed:
            let query = CustomerQuery(indexed: phase == .fetchIndexed, tier: 3, prefix: "C", limit: 100)
            var results = 0
            try probePhase { for _ in 0..<count { results += try fetch(query) } }
            return Work(operations: count, rows: phase == .fetchIndexed ? results : count * data.customers.count)
        }
    }
}

/// The counted function: callgrind's `--toggle-collect='*probePhase*'` matches its symbol.
@inline(never)
func probePhase(_ body: () throws -> Void) throws {
    try body()
}

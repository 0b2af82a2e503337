// The object-graph level of `compare` (issue 8): the shop model in StrataStore, driven through
// ObjectGraph as an app drives Core Data, beside the same data in SQLite through GRDB, set up
// as a careful SQLite user would. Every row measures both in the same run.

import BenchmarkSupport
import Comparison
import Foundation
import GRDB
import Strata

/// Runs the object-graph workloads on Strata (ObjectGraph + StrataStore) and on SQLite (GRDB)
/// in `directory`, and returns one row per workload, level `"object graph"`, with results
/// for `"Strata"` and `"SQLite"`.
///
/// Both systems get the same data from one seeded generator. Saves use StrataStore's
/// durability `normal` and SQLite's `synchronous=NORMAL` (WAL), except the many-small-saves and
/// concurrent-saves rows, which use `full` and `FULL`; each row's note says which. Only the
/// workloads of ``ObjectGraphComparisonSettings/workloads`` run. `log` receives progress lines.
///
/// - Throws: ``ObjectGraphComparisonError`` when an operation fails or, with
///   ``ObjectGraphComparisonSettings/verify``, when the systems' answers differ; or the store's
///   or GRDB's error.
public func runObjectGraphComparison(
    _ settings: ObjectGraphComparisonSettings, directory: String, log: (String) -> Void
) throws -> [ComparisonRow] {
    let sizes = [
        ("objects", settings.objects), ("saves", settings.saves), ("faults", settings.faults),
        ("indexedFetches", settings.indexedFetches), ("unindexedFetches", settings.unindexedFetches),
        ("fetchLimit", settings.fetchLimit), ("counts", settings.counts), ("traversals", settings.traversals),
        ("reopenRows", settings.reopenRows), ("reopenBatch", settings.reopenBatch), ("reopens", settings.reopens),
        ("concurrentWriters", settings.concurrentWriters), ("concurrentSaves", settings.concurrentSaves),
        ("mergedCustomers", settings.mergedCustomers),
    ]
    for (name, value) in sizes where value < 1 {
        throw ObjectGraphComparisonError("settings", "\(name) is \(value); it must be at least 1")
    }
    guard settings.objects >= 1_000, (0...1).contains(settings.updateFraction), (0...1).contains(settings.deleteFraction) else {
        throw ObjectGraphComparisonError(
            "settings", "objects must be at least 1000 (is \(settings.objects)) and the fractions within 0...1")
    }
    let unknown = settings.workloads.filter { !ObjectGraphComparisonSettings.allWorkloads.contains($0) }
    guard unknown.isEmpty, !settings.workloads.isEmpty else {
        throw ObjectGraphComparisonError(
            "settings", "workloads \(settings.workloads.joined(separator: ",")): expected a subset of \(ObjectGraphComparisonSettings.allWorkloads.joined(separator: ","))")
    }
    StrataStore.register()
    BinaryStore.register()
    return try withoutActuallyEscaping(log) { log in
        var run = try ObjectGraphRun(settings: settings, directory: directory, log: log)
        let workloads = Set(settings.workloads)
        if workloads.contains("graph") { try run.graph() }
        if workloads.contains("saves") { try run.smallSaves() }
        if workloads.contains("concurrent") { try run.concurrentSaves() }
        if workloads.contains("reopen") { try run.reopen() }
        if workloads.contains("binary") { try run.binaryStore() }
        if workloads.contains("migration") { try run.migration() }
        return run.rows
    }
}

/// One run of the comparison: the workloads in order, collecting rows.
struct ObjectGraphRun {
    let settings: ObjectGraphComparisonSettings
    let directory: String
    let log: (String) -> Void
    let model: ManagedObjectModel
    var rows: [ComparisonRow] = []

    init(settings: ObjectGraphComparisonSettings, directory: String, log: @escaping (String) -> Void) throws {
        self.settings = settings
        self.directory = directory
        self.log = log
        model = try Shop.model()
    }

    /// Strata's durability and SQLite's synchronous setting outside the durable-saves row.
    static let normal = "Strata durability normal; SQLite WAL, synchronous=NORMAL"

    /// Appends a row.
    mutating func add(
        _ operation: String, unit: String, higherIsBetter: Bool = true, strata: Double, sqlite: Double, note: String
    ) {
        let row = ComparisonRow(
            level: "object graph", operation: operation, unit: unit, higherIsBetter: higherIsBetter,
            results: ["Strata": strata, "SQLite": sqlite], note: note)
        rows.append(row)
        let ratio = row.strataRatio(to: "SQLite").map { fixed($0, 2) } ?? "-"
        log("  \(operation): Strata \(format(strata)) \(unit), SQLite \(format(sqlite)) \(unit), Strata/SQLite \(ratio)")
    }

    /// Throws when `strata` and `sqlite` differ and verification is on.
    func check<T: Equatable>(_ operation: String, strata: T, sqlite: T) throws {
        guard settings.verify, strata != sqlite else { return }
        throw ObjectGraphComparisonError(operation, "Strata answered \(describe(strata)), SQLite \(describe(sqlite))")
    }

    // MARK: The graph workloads (1, 3–9)

    /// The bulk insert, then on what it saved: faults, fetches, counts, traversal, update and
    /// delete.
    mutating func graph() throws {
        let data = ShopData.graph(objects: settings.objects, seed: settings.seed)
        let links = data.orders.reduce(0) { $0 + $1.products.count }
        log("object graph: \(data.objectCount) objects (\(data.customers.count) customers, \(data.orders.count) orders, \(data.products.count) products, \(links) order–product links)")

        // 1. Bulk insert, one save / one transaction.
        let strata = try StrataShop(path: directory + "/og-strata-graph", model: model, durability: "normal")
        let (strataSave, strataInsert) = try timed { try strata.insert(data) }
        let sqlite = try SQLiteShop(path: directory + "/og-sqlite-graph.db", synchronous: "NORMAL")
        let (_, sqliteInsert) = try timed { try sqlite.insert(data) }
        try sqlite.analyze()
        add(
            "insert \(thousands(data.objectCount)) objects with relationships, one save", unit: "objects/s",
            strata: Double(data.objectCount) / strataInsert, sqlite: Double(data.objectCount) / sqliteInsert,
            note: "\(data.customers.count) customers 1—* \(data.orders.count) orders *—* \(data.products.count) products (\(links) links). Strata: insertNewObject + setValue for every object, then one save (the save alone \(fixed(strataSave, 2)) s). SQLite: one transaction of cached INSERTs, ids from lastInsertedRowID, foreign keys enforced. \(Self.normal).")

        // 3. Fault in by ID, cold (just reopened) and warm (second pass, same context or
        // connection).
        var random = SplitMix64(seed: settings.seed ^ 0xFA17)
        let everything = (0..<data.customers.count).map(ObjectRef.customer) + (0..<data.orders.count).map(ObjectRef.order)
        let picks = Array(everything.shuffled(using: &random).prefix(settings.faults))
        let (_, strataOpen) = try timed { try strata.reopen() }
        let ((objects, strataCold), strataColdTime) = try timed { try strata.fault(picks) }
        let ((again, strataWarm), strataWarmTime) = try timed { try strata.fault(picks) }
        guard again.elementsEqual(objects, by: ===) else {
            throw ObjectGraphComparisonError("fault in by ID, warm (Strata)", "the warm pass made new objects")
        }
        let (_, sqliteOpen) = try timed { try sqlite.reopen() }
        let (sqliteCold, sqliteColdTime) = try timed { try sqlite.fault(picks) }
        let (sqliteWarm, sqliteWarmTime) = try timed { try sqlite.fault(picks) }
        try check("fault in by ID, cold", strata: strataCold, sqlite: sqliteCold)
        try check("fault in by ID, warm", strata: strataWarm, sqlite: sqliteWarm)
        let faultCount = Double(picks.count)
        add(
            "fault in \(thousands(picks.count)) objects by ID, random order, cold", unit: "objects/s",
            strata: faultCount / strataColdTime, sqlite: faultCount / sqliteColdTime,
            note: "Customers and orders. Strata: store just reopened, new coordinator and context, existingObject(with:) and one attribute read (reopen \(fixed(strataOpen, 3)) s, not counted). SQLite: new connection (\(fixed(sqliteOpen, 3)) s, not counted), SELECT by INTEGER PRIMARY KEY into a struct. OS page cache warm for both. \(Self.normal).")
        add(
            "fault in \(thousands(picks.count)) objects by ID, random order, warm", unit: "objects/s",
            strata: faultCount / strataWarmTime, sqlite: faultCount / sqliteWarmTime,
            note: "Second pass. Strata: same context, objects still registered (uniquing returns them loaded). SQLite: same connection and cached statements, SELECT by primary key again into a struct. \(Self.normal).")
        withExtendedLifetime(objects) {}
        strata.resetContext()

        // 4, 5. Fetches.
        let tier: Int64 = 3
        for indexed in [true, false] {
            let query = CustomerQuery(indexed: indexed, tier: tier, prefix: "C", limit: settings.fetchLimit)
            let times = indexed ? settings.indexedFetches : settings.unindexedFetches
            let operation = indexed
                ? "fetch, predicate on indexed attributes, sorted, limit \(settings.fetchLimit)"
                : "fetch, predicate on unindexed attributes, sorted, limit \(settings.fetchLimit)"
            let strataRuns = try repeatedRuns(times, budget: settings.budget) { try strata.fetch(query) }
            strata.resetContext()
            let ((sqliteRuns, sqliteNames), sqliteTime) = try timed {
                try sqlite.fetch(query, times: times, until: .now + .milliseconds(Int(settings.budget * 1000)))
            }
            try check(operation, strata: strataRuns.first, sqlite: sqliteNames)
            if strataRuns.first.isEmpty {
                throw ObjectGraphComparisonError(operation, "the fetch matched nothing; the data set is too small")
            }
            let sql = indexed
                ? "WHERE tier = 3 AND name >= 'C' AND name < 'D' ORDER BY name LIMIT \(settings.fetchLimit)"
                : "WHERE level = 3 AND label >= 'C' AND label < 'D' ORDER BY label LIMIT \(settings.fetchLimit)"
            add(
                operation, unit: "fetches/s",
                strata: Double(strataRuns.runs) / strataRuns.seconds, sqlite: Double(sqliteRuns) / sqliteTime,
                note: "Customers \(query.format), \(strataRuns.first.count) results, each name read. SQLite: \(sql) into structs\(indexed ? " (single-column indexes on name and tier, as Strata's; ANALYZE run)" : " (full scan)"). Strata \(strataRuns.runs) runs, SQLite \(sqliteRuns). \(Self.normal).")
        }

        // 6. Counts.
        try counts(strata: strata, sqlite: sqlite, orders: data.orders.count, tier: tier, label: "")

        // 7. Traverse a to-many relationship.
        strata.resetContext()
        let parents = Array((0..<data.customers.count).shuffled(using: &random).prefix(settings.traversals))
        let (strataWalk, strataWalkTime) = try timed { try strata.traverse(parents) }
        let (sqliteWalk, sqliteWalkTime) = try timed { try sqlite.traverse(parents) }
        try check("traverse a to-many relationship", strata: [strataWalk.children, Int(strataWalk.cents)], sqlite: [sqliteWalk.children, Int(sqliteWalk.cents)])
        add(
            "traverse to-many for \(thousands(parents.count)) parents", unit: "parents/s",
            strata: Double(parents.count) / strataWalkTime, sqlite: Double(parents.count) / sqliteWalkTime,
            note: "Random customers; each: fault in by ID, follow orders, read every order's total (\(strataWalk.children) orders). Strata: fresh context (relationship fault, then each order's fault). SQLite: SELECT the customer by primary key, then SELECT its orders by the indexed foreign key into structs. \(Self.normal).")

        // 8. Update 10 % of the customers and orders, one save.
        strata.resetContext()
        let updatedCustomers = Array(
            (0..<data.customers.count).shuffled(using: &random).prefix(Int(Double(data.customers.count) * settings.updateFraction)))
        let updatedOrders = Array(
            (0..<data.orders.count).shuffled(using: &random).prefix(Int(Double(data.orders.count) * settings.updateFraction)))
        let updated = Double(updatedCustomers.count + updatedOrders.count)
        let (_, strataUpdate) = try timed { try strata.update(customers: updatedCustomers, orders: updatedOrders) }
        let (_, sqliteUpdate) = try timed { try sqlite.update(customers: updatedCustomers, orders: updatedOrders) }
        strata.resetContext()
        for status in Shop.statuses {
            try check(
                "update: orders with status \(status)", strata: try strata.countOrders(status: status),
                sqlite: try sqlite.count("SELECT COUNT(*) FROM orders WHERE status = ?", arguments: [status]))
        }
        try check(
            "update: customers in Lyon", strata: try strata.countCustomers(city: "Lyon"),
            sqlite: try sqlite.count("SELECT COUNT(*) FROM customers WHERE city = ?", arguments: ["Lyon"]))
        add(
            "update \(Int(settings.updateFraction * 100))% of objects, one save", unit: "objects/s",
            strata: updated / strataUpdate, sqlite: updated / sqliteUpdate,
            note: "\(updatedCustomers.count) customers (city, unindexed) and \(updatedOrders.count) orders (status, indexed), random; each read then changed. Strata: fresh context, existingObject + setValue, one save. SQLite: one transaction, SELECT by primary key then UPDATE by primary key. \(Self.normal).")

        // 9. Delete 10 % of the customers, cascading to their orders, one save.
        strata.resetContext()
        let deleted = Array(
            (0..<data.customers.count).shuffled(using: &random).prefix(Int(Double(data.customers.count) * settings.deleteFraction)))
        let removed = Double(deleted.count * Shop.objectsPerCustomer)
        let (_, strataDelete) = try timed { try strata.delete(customers: deleted) }
        let (_, sqliteDelete) = try timed { try sqlite.delete(customers: deleted) }
        strata.resetContext()
        try check(
            "delete: customers left", strata: try strata.countCustomers(),
            sqlite: try sqlite.count("SELECT COUNT(*) FROM customers"))
        try check(
            "delete: orders left", strata: try strata.countOrders(),
            sqlite: try sqlite.count("SELECT COUNT(*) FROM orders"))
        if settings.verify {
            for product in [0, data.products.count / 2, data.products.count - 1] {
                try check(
                    "delete: orders of product \(product)", strata: try strata.ordersOfProduct(product),
                    sqlite: try sqlite.ordersOfProduct(product))
            }
        }
        add(
            "delete \(Int(settings.deleteFraction * 100))% of customers with cascade, one save", unit: "objects/s",
            strata: removed / strataDelete, sqlite: removed / sqliteDelete,
            note: "\(deleted.count) random customers and their \(deleted.count * Shop.ordersPerCustomer) orders (objects counted: both), and the orders' product links. Strata: existingObject + delete, cascade delete rule, inverse to-many of each product updated, one save. SQLite: one transaction of DELETE FROM customers WHERE id = ?, ON DELETE CASCADE foreign keys remove the orders and order_products rows. \(Self.normal).")

        try strata.close()
        try sqlite.close()
    }

    /// Row 6: counts of a whole entity and with an indexed predicate; `label` names the store
    /// in the operation ("" for the graph store).
    mutating func counts(strata: StrataShop, sqlite: SQLiteShop, orders: Int, tier: Int64, label: String) throws {
        let budget = settings.budget
        let deadline = { ContinuousClock.now + .milliseconds(Int(budget * 1000)) }
        let strataAll = try repeatedRuns(settings.counts, budget: settings.budget) { try strata.countOrders() }
        let ((sqliteAllRuns, sqliteAll), sqliteAllTime) = try timed {
            try sqlite.count("SELECT COUNT(*) FROM orders", times: settings.counts, until: deadline())
        }
        try check("count orders\(label)", strata: strataAll.first, sqlite: sqliteAll)
        try check("count orders\(label)", strata: strataAll.first, sqlite: orders)
        add(
            "count orders, no predicate\(label)", unit: "counts/s",
            strata: Double(strataAll.runs) / strataAll.seconds, sqlite: Double(sqliteAllRuns) / sqliteAllTime,
            note: "\(thousands(orders)) orders. Strata: context.count(for:) with no predicate. SQLite: SELECT COUNT(*) FROM orders (scans the smallest index). \(Self.normal).")
        guard label.isEmpty else { return }
        let strataTier = try repeatedRuns(settings.counts, budget: settings.budget) { try strata.countCustomers(tier: tier) }
        let ((sqliteTierRuns, sqliteTier), sqliteTierTime) = try timed {
            try sqlite.count("SELECT COUNT(*) FROM customers WHERE tier = ?", arguments: [tier], times: settings.counts, until: deadline())
        }
        try check("count customers with tier == \(tier)", strata: strataTier.first, sqlite: sqliteTier)
        add(
            "count customers, indexed predicate", unit: "counts/s",
            strata: Double(strataTier.runs) / strataTier.seconds, sqlite: Double(sqliteTierRuns) / sqliteTierTime,
            note: "tier == \(tier): \(strataTier.first) customers. SQLite: SELECT COUNT(*) FROM customers WHERE tier = ? (covered by the tier index). \(Self.normal).")
    }

    // MARK: 2. Many small durable saves

    /// `settings.saves` saves of two customers with four orders each, full durability.
    mutating func smallSaves() throws {
        let perSave = 2
        let data = ShopData.customers(0..<settings.saves * perSave, seed: settings.seed ^ 0x5A7E5)
        let strata = try StrataShop(path: directory + "/og-strata-saves", model: model, durability: "full")
        let (_, strataTime) = try timed { try strata.insertInSaves(data, perSave: perSave) }
        let strataCustomers = try strata.countCustomers()
        try strata.close()
        let sqlite = try SQLiteShop(path: directory + "/og-sqlite-saves.db", synchronous: "FULL")
        let (_, sqliteTime) = try timed { try sqlite.insertInSaves(data, perSave: perSave) }
        let sqliteCustomers = try sqlite.count("SELECT COUNT(*) FROM customers")
        try sqlite.close()
        try check("small saves: customers saved", strata: strataCustomers, sqlite: sqliteCustomers)
        add(
            "\(thousands(settings.saves)) saves of \(perSave * Shop.objectsPerCustomer) objects, full durability", unit: "saves/s",
            strata: Double(settings.saves) / strataTime, sqlite: Double(settings.saves) / sqliteTime,
            note: "One thread; each save: \(perSave) customers with \(Shop.ordersPerCustomer) orders each. Strata: durability full (synced before save returns). SQLite: WAL, synchronous=FULL, one transaction per save.")
    }

    // MARK: 11. Concurrent saves with a merging context

    /// `settings.concurrentWriters` threads each making `settings.concurrentSaves` saves of 10
    /// inserted objects and 2 updated ones into one store at full durability, while another
    /// context (SQLite: a reader) takes in every save: three rows, the saves per second and the
    /// merge latency's median and 99th percentile.
    mutating func concurrentSaves() throws {
        let plan = try ConcurrentSavesPlan(
            writers: settings.concurrentWriters, savesPerWriter: settings.concurrentSaves,
            seededCustomers: settings.mergedCustomers, seed: settings.seed ^ 0xC0_5A7E)
        let strata = try runStrataConcurrentSaves(
            plan, path: directory + "/og-strata-concurrent", model: model, durability: "full", verify: settings.verify)
        let sqlite = try runSQLiteConcurrentSaves(plan, path: directory + "/og-sqlite-concurrent.db", synchronous: "FULL")
        let expected = plan.finalCities
        try check("concurrent saves: cities the merging context holds", strata: strata.cities, sqlite: sqlite.cities)
        try check("concurrent saves: cities after every save", strata: strata.cities, sqlite: expected)
        try check("concurrent saves: customers saved", strata: strata.customers, sqlite: sqlite.customers)
        try check(
            "concurrent saves: customers saved", strata: strata.customers,
            sqlite: plan.seeded.customers.count + plan.inserted.customers.count)

        let held = plan.seeded.customers.count * Shop.objectsPerCustomer
        let shape = "\(plan.writers) writer threads × \(plan.savesPerWriter) saves into one store, each save \(ConcurrentSavesPlan.customersPerSave) customers with \(Shop.ordersPerCustomer) orders each inserted and \(ConcurrentSavesPlan.updatesPerSave) of the \(held) seeded objects (customers, each writer its own share) updated"
        let strataSide = "Strata: a private-queue context per writer (insert, update, save in one performAndWait), one coordinator; a private-queue context with automaticallyMergesChangesFromParent holds every seeded customer and order loaded and merges each save (refreshes the updated objects from the store, registers the inserted ones as faults)"
        let sqliteSide = "SQLite: one DatabasePool (WAL), every writer through its one writer connection (pool.write, one transaction a save); each commit (from GRDB's afterNextTransaction, before pool.write returns, as a Strata save enqueues its merges before save() returns) has a serial reader queue read its new and updated rows by primary key in a read transaction (pool.read) into the reader's copy of the seeded rows"
        let durability = "Strata durability full; SQLite WAL, synchronous=FULL"
        func drain(_ result: ConcurrentSavesResult) -> String { fixed(result.drainSeconds * 1000, 1) + " ms" }
        add(
            "\(plan.writers) writers' saves of 10 objects + 2 updates, merged into a context", unit: "saves/s",
            strata: Double(plan.saves) / strata.seconds, sqlite: Double(plan.saves) / sqlite.seconds,
            note: "\(shape); all saves over the wall time from the writers' start until the last save returned (Strata \(fixed(strata.seconds, 2)) s, SQLite \(fixed(sqlite.seconds, 2)) s). \(strataSide). \(sqliteSide). Merging after the last save returned: Strata \(drain(strata)), SQLite \(drain(sqlite)). \(durability).")
        for (label, fraction) in [("p50", 0.5), ("p99", 0.99)] {
            add(
                "merge latency \(label), \(plan.writers) writers' saves into a merging context", unit: "ms",
                higherIsBetter: false, strata: strata.latency(fraction) * 1000, sqlite: sqlite.latency(fraction) * 1000,
                note: "The same run (\(plan.saves) saves). From a save's commit, timed in its writer where the save hands itself over (Strata: in its didSaveObjectIDs notification, which save() posts once the save is durable, just before it hands the save to the merging context and returns; SQLite: in the commit's afterNextTransaction block, before pool.write returns) until the merging context had applied it (Strata: its objectsDidChange notification naming the save's inserted objects, posted on its queue at the end of the merge) or the reader had read its rows (SQLite). Max: Strata \(fixed((strata.latencies.last ?? 0) * 1000, 2)) ms, SQLite \(fixed((sqlite.latencies.last ?? 0) * 1000, 2)) ms. \(durability).")
        }
    }

    // MARK: 10. Reopen a big store

    /// Builds a store of `settings.reopenRows` rows in each system, closes it, then reopens it
    /// `settings.reopens` times: open, count the customers and fault in one customer.
    /// Two stores of ``ObjectGraphComparisonSettings/reopenRows`` rows (customers with their
    /// orders), built in saves of ``ObjectGraphComparisonSettings/reopenBatch`` rows and closed:
    /// what the reopen and migration rows open.
    struct BuiltStores {
        var customers: Int
        var rowCount: Int
        var perSave: Int
        var data: ShopData
        var strataPath: String
        var sqlitePath: String
        var strataRefs: [ReferenceObject]
        var sqliteIDs: [Int64]
        var strataSeconds: Double
        var sqliteSeconds: Double
        /// The Strata build's close, which writes its log out as a segment ([MAN-6]).
        var strataCloseSeconds: Double
    }

    func buildStores(_ name: String, seed: UInt64) throws -> BuiltStores {
        let customers = max(1, settings.reopenRows / Shop.objectsPerCustomer)
        let data = ShopData.customers(0..<customers, seed: settings.seed ^ seed)
        let perSave = max(1, settings.reopenBatch / Shop.objectsPerCustomer)
        log("\(name): building two stores of \(thousands(customers * Shop.objectsPerCustomer)) rows")
        let strataPath = directory + "/og-strata-\(name)", sqlitePath = directory + "/og-sqlite-\(name).db"
        let builder = try StrataShop(path: strataPath, model: model, durability: "normal")
        let (_, strataBuild) = try timed { try builder.insertInSaves(data, perSave: perSave, resetting: true) }
        let strataRefs = builder.customerRefs
        let (_, strataClose) = try timed { try builder.close() }
        let sqliteBuilder = try SQLiteShop(path: sqlitePath, synchronous: "NORMAL")
        let (_, sqliteBuild) = try timed { try sqliteBuilder.insertInSaves(data, perSave: perSave) }
        let sqliteIDs = sqliteBuilder.customerIDs
        try sqliteBuilder.analyze()
        try sqliteBuilder.close()
        log("  built in \(fixed(strataBuild, 1)) s (Strata), \(fixed(sqliteBuild, 1)) s (SQLite)")
        return BuiltStores(
            customers: customers, rowCount: customers * Shop.objectsPerCustomer, perSave: perSave, data: data,
            strataPath: strataPath, sqlitePath: sqlitePath, strataRefs: strataRefs, sqliteIDs: sqliteIDs,
            strataSeconds: strataBuild, sqliteSeconds: sqliteBuild, strataCloseSeconds: strataClose)
    }

    mutating func reopen() throws {
        let built = try buildStores("reopen", seed: 0xE0E0)
        let customers = built.customers, rowCount = built.rowCount, data = built.data, perSave = built.perSave
        let probe = customers / 2
        let strataPath = built.strataPath, sqlitePath = built.sqlitePath
        let strataRefs = built.strataRefs, sqliteIDs = built.sqliteIDs
        let strataBuild = built.strataSeconds, sqliteBuild = built.sqliteSeconds

        // Each attempt: [open, count, fetch] seconds.
        var strataSteps: [[Double]] = [], sqliteSteps: [[Double]] = []
        for attempt in 0..<settings.reopens {
            var clock = StepClock()
            let strata = try StrataShop(path: strataPath, model: model, durability: "normal", customerRefs: strataRefs)
            clock.step()
            let strataCount = try strata.countCustomers()
            clock.step()
            let strataName = try strata.customerName(probe)
            clock.step()
            strataSteps.append(clock.steps)

            clock = StepClock()
            let sqlite = try SQLiteShop(path: sqlitePath, synchronous: "NORMAL", existingCustomerIDs: sqliteIDs)
            clock.step()
            let sqliteCount = try sqlite.count("SELECT COUNT(*) FROM customers")
            clock.step()
            let sqliteName = try sqlite.customerName(probe)
            clock.step()
            sqliteSteps.append(clock.steps)

            try check("reopen: customers counted", strata: strataCount, sqlite: sqliteCount)
            try check("reopen: customers counted", strata: strataCount, sqlite: customers)
            try check("reopen: customer \(probe)'s name", strata: strataName, sqlite: sqliteName)
            try check("reopen: customer \(probe)'s name", strata: strataName, sqlite: data.customers[probe].name)
            if attempt == settings.reopens - 1 {
                try counts(
                    strata: strata, sqlite: sqlite, orders: customers * Shop.ordersPerCustomer, tier: 0,
                    label: " (\(thousands(rowCount))-row store)")
            }
            try strata.close()
            try sqlite.close()
        }
        func breakdown(_ steps: [[Double]]) -> String {
            let parts = (0..<3).map { step in fixed(median(steps.map { $0[step] }) * 1000, 1) }
            return "open \(parts[0]) ms, count \(parts[1]) ms, fetch \(parts[2]) ms"
        }
        add(
            "open a store of \(thousands(rowCount)) rows, first count and fetch", unit: "s", higherIsBetter: false,
            strata: median(strataSteps.map { $0.reduce(0, +) }), sqlite: median(sqliteSteps.map { $0.reduce(0, +) }),
            note: "Median of \(settings.reopens) reopens. \(customers) customers and \(customers * Shop.ordersPerCustomer) orders, built in saves of \(perSave * Shop.objectsPerCustomer) rows (Strata \(fixed(strataBuild, 1)) s, SQLite \(fixed(sqliteBuild, 1)) s, not counted; Strata's close after the build, which writes a log of 4 MiB or more out as a segment so that the open replays none, SPEC [MAN-6], \(fixed(built.strataCloseSeconds, 2)) s, not counted). Timed: new coordinator + addPersistentStore / new connection with WAL and PRAGMAs; count of customers; one customer faulted in by ID. Strata \(breakdown(strataSteps)); SQLite \(breakdown(sqliteSteps)). OS page cache warm for both. \(Self.normal).")
    }
}

// MARK: The binary store (issue 16)

extension ObjectGraphRun {
    /// Appends a row of the binary-store level: the binary store under "Strata", beside
    /// SQLite and StrataStore.
    mutating func addBinary(
        _ operation: String, unit: String, higherIsBetter: Bool = true, binary: Double, sqlite: Double, strataStore: Double, note: String
    ) {
        let row = ComparisonRow(
            level: "object graph, binary store", operation: operation, unit: unit, higherIsBetter: higherIsBetter,
            results: ["Strata": binary, "SQLite": sqlite, "StrataStore": strataStore],
            note: "Strata here is BinaryStore, the binary atomic store; StrataStore and SQLite hold the same data. " + note)
        rows.append(row)
        let ratio = row.strataRatio(to: "SQLite").map { fixed($0, 2) } ?? "-"
        log("  \(operation): binary \(format(binary)), SQLite \(format(sqlite)), StrataStore \(format(strataStore)) \(unit), binary/SQLite \(ratio)")
    }

    /// The rows that suit an atomic store, for a store of 10k objects and one of ``settings``'
    /// objects: open it and answer a first fetch, repeated indexed fetches, a save after a
    /// small change, and the file's size, each beside SQLite and StrataStore holding the same
    /// data. Saves are durable on all three (the binary store syncs its new file and the
    /// directory at every save; StrataStore `full`; SQLite `synchronous=FULL`).
    mutating func binaryStore() throws {
        let sizes = Array(Set([min(10_000, settings.objects), settings.objects])).sorted()
        for size in sizes {
            let data = ShopData.graph(objects: size, seed: settings.seed ^ 0xB1)
            let label = thousands(data.objectCount)
            log("binary store: \(label) objects")
            let binaryPath = directory + "/og-binary-\(size).strata-binary"
            let binary = try StrataShop(path: binaryPath, model: model, durability: "full", type: .binary)
            try binary.insert(data)
            let strata = try StrataShop(path: directory + "/og-strata-atomic-\(size)", model: model, durability: "full")
            try strata.insert(data)
            let sqlitePath = directory + "/og-sqlite-atomic-\(size).db"
            let sqlite = try SQLiteShop(path: sqlitePath, synchronous: "FULL")
            try sqlite.insert(data)
            try sqlite.analyze()
            let durable = "Durable saves on all three: the binary store syncs its new file and the directory; StrataStore durability full; SQLite WAL, synchronous=FULL."

            // Open the store and answer a first fetch: an atomic store reads its whole file.
            let query = CustomerQuery(indexed: true, tier: 3, prefix: "C", limit: settings.fetchLimit)
            func opened(_ shop: StrataShop) throws -> (names: [String], seconds: Double) {
                try shop.close()
                let ((_, names), seconds) = try timed { () throws -> (Int, [String]) in (try shop.openAgainAndCount(), try shop.fetch(query)) }
                return (names, seconds)
            }
            let binaryOpen = try opened(binary), strataOpen = try opened(strata)
            let (sqliteNames, sqliteOpen) = try timed { () throws -> [String] in
                try sqlite.reopen()
                return try sqlite.fetch(query, times: 1, until: .now + .seconds(60)).names
            }
            try check("open and first fetch (binary)", strata: binaryOpen.names, sqlite: sqliteNames)
            try check("open and first fetch (StrataStore)", strata: strataOpen.names, sqlite: sqliteNames)
            addBinary(
                "open a store of \(label) objects and fetch 100 customers", unit: "s", higherIsBetter: false,
                binary: binaryOpen.seconds, sqlite: sqliteOpen, strataStore: strataOpen.seconds,
                note: "A new coordinator adds the store (the binary store reads, checks and decodes its whole file into cache nodes), counts the orders and runs the indexed fetch below once; SQLite opens a connection and runs the same SELECT. \(durable)")

            // Indexed fetches, warm: the binary store answers from its nodes (no index).
            let binaryRuns = try repeatedRuns(settings.indexedFetches, budget: settings.budget) { try binary.fetch(query) }
            binary.resetContext()
            let strataRuns = try repeatedRuns(settings.indexedFetches, budget: settings.budget) { try strata.fetch(query) }
            strata.resetContext()
            let ((sqliteRuns, _), sqliteTime) = try timed {
                try sqlite.fetch(query, times: settings.indexedFetches, until: .now + .milliseconds(Int(settings.budget * 1000)))
            }
            try check("fetch (binary)", strata: binaryRuns.first, sqlite: strataRuns.first)
            addBinary(
                "fetch, predicate on indexed attributes, sorted, limit \(settings.fetchLimit) (\(label) objects)", unit: "fetches/s",
                binary: Double(binaryRuns.runs) / binaryRuns.seconds, sqlite: Double(sqliteRuns) / sqliteTime,
                strataStore: Double(strataRuns.runs) / strataRuns.seconds,
                note: "Customers \(query.format). The binary store evaluates the predicate over every customer's node (an atomic store keeps no index); StrataStore and SQLite use their indexes on name and tier. \(durable)")

            // A save after a small change: the binary store writes its whole file again.
            let saves = max(3, min(20, settings.saves / 20))
            func smallSaves(_ update: (Int) throws -> Void) throws -> Double {
                try timed { for round in 0..<saves { try update(round) } }.1
            }
            let customers = data.customers.count, orders = data.orders.count
            func picks(_ round: Int) -> (customers: [Int], orders: [Int]) {
                ((0..<2).map { (round * 7 + $0 * 13) % customers }, (0..<8).map { (round * 11 + $0 * 17) % orders })
            }
            let binarySaves = try smallSaves { try binary.update(customers: picks($0).customers, orders: picks($0).orders) }
            let strataSaves = try smallSaves { try strata.update(customers: picks($0).customers, orders: picks($0).orders) }
            let sqliteSaves = try smallSaves { try sqlite.update(customers: picks($0).customers, orders: picks($0).orders) }
            addBinary(
                "save after changing 10 objects (\(label) objects)", unit: "saves/s",
                binary: Double(saves) / binarySaves, sqlite: Double(saves) / sqliteSaves, strataStore: Double(saves) / strataSaves,
                note: "\(saves) saves, each after moving 2 customers to another city and 8 orders to another status. The binary store writes, syncs and renames a new file of the whole graph at each save. \(durable)")

            // The size on disk.
            try binary.close()
            try strata.close()
            try sqlite.close()
            func megabytes(_ path: String) -> Double {
                var total: UInt64 = 0
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
                    for name in (try? FileManager.default.subpathsOfDirectory(atPath: path)) ?? [] {
                        total += ((try? FileManager.default.attributesOfItem(atPath: path + "/" + name)[.size]) as? NSNumber)?.uint64Value ?? 0
                    }
                } else {
                    for file in [path, path + "-wal", path + "-shm"] {
                        total += ((try? FileManager.default.attributesOfItem(atPath: file)[.size]) as? NSNumber)?.uint64Value ?? 0
                    }
                }
                return Double(total) / 1_000_000
            }
            addBinary(
                "size on disk, \(label) objects", unit: "MB", higherIsBetter: false,
                binary: megabytes(binaryPath), sqlite: megabytes(sqlitePath), strataStore: megabytes(directory + "/og-strata-atomic-\(size)"),
                note: "After the saves above, every store closed: the binary file; SQLite's database with its -wal and -shm files; StrataStore's directory (WAL and segments, before compaction).")
        }
    }
}

// MARK: Helpers

/// Runs `body` `times` times, or fewer once `budget` seconds have passed (at least once);
/// returns the runs, the seconds, and the first run's result. Every run must return the same.
private func repeatedRuns<T: Equatable>(_ times: Int, budget: Double, _ body: () throws -> T) throws
    -> (runs: Int, seconds: Double, first: T)
{
    let start = ContinuousClock.now
    let deadline = start + .milliseconds(Int(budget * 1000))
    let first = try body()
    var runs = 1
    while runs < times && ContinuousClock.now < deadline {
        let result = try body()
        if result != first {
            throw ObjectGraphComparisonError("repeated run", "returned \(first), then \(result)")
        }
        runs += 1
    }
    return (runs, seconds(ContinuousClock.now - start), first)
}

/// Seconds between successive calls of ``step()``, from its creation.
struct StepClock {
    private var last = ContinuousClock.now
    /// The seconds of each step so far.
    private(set) var steps: [Double] = []

    /// Ends a step.
    mutating func step() {
        let now = ContinuousClock.now
        steps.append(seconds(now - last))
        last = now
    }
}

/// The median of `values` (0 for none).
func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

/// `count` as "100k", "1M" or the plain number.
func thousands(_ count: Int) -> String {
    if count >= 1_000_000, count % 1_000_000 == 0 { return "\(count / 1_000_000)M" }
    if count >= 1_000, count % 1_000 == 0 { return "\(count / 1_000)k" }
    return "\(count)"
}

/// A figure with sensible digits.
private func format(_ value: Double) -> String {
    value >= 100 ? fixed(value, 0) : value >= 1 ? fixed(value, 2) : fixed(value, 4)
}

/// A value for an error message, cut to 300 characters.
private func describe<T>(_ value: T) -> String {
    let text = String(describing: value)
    return text.count > 300 ? String(text.prefix(300)) + "…" : text
}

// The concurrent-saves workload of the object-graph comparison: N writers each saving small
// batches into one store while another context (Strata) or a reader (SQLite) takes in every
// save. Strata: one private-queue context per writer on one coordinator, and a private-queue
// context that merges their saves (`automaticallyMergesChangesFromParent`). SQLite: one
// `DatabasePool` (WAL), every writer through its one writer connection, and a serial reader
// queue that reads what each commit wrote.

import BenchmarkSupport
import Dispatch
import Foundation
import GRDB
import Strata
import Synchronization

/// What the writers do, the same in both systems: writer `w`'s save `s` inserts customers
/// ``batch(writer:save:)`` of ``inserted`` (each with its orders: 10 objects a save) and moves
/// the seeded customers ``updated(writer:save:)`` to the next city; each writer updates only
/// seeded customers of its own share, so no two saves conflict.
struct ConcurrentSavesPlan: Sendable {
    /// Writer threads.
    let writers: Int
    /// Saves per writer.
    let savesPerWriter: Int
    /// The customers (with their orders) in the store before the writers start, which the
    /// merging context (the reader) holds loaded.
    let seeded: ShopData
    /// The customers (with their orders) the writers insert, in order of writer then save.
    let inserted: ShopData

    /// Customers inserted by one save (each with ``Shop/ordersPerCustomer`` orders).
    static let customersPerSave = 2
    /// Seeded customers updated by one save.
    static let updatesPerSave = 2

    /// A plan of `writers` × `savesPerWriter` saves over `seededCustomers` seeded customers.
    ///
    /// - Throws: ``ObjectGraphComparisonError`` when a writer's share of the seeded customers
    ///   would be smaller than ``updatesPerSave``.
    init(writers: Int, savesPerWriter: Int, seededCustomers: Int, seed: UInt64) throws {
        guard writers >= 1, savesPerWriter >= 1, seededCustomers / max(1, writers) >= Self.updatesPerSave else {
            throw ObjectGraphComparisonError(
                "settings", "concurrent saves need at least 1 writer and 1 save and \(Self.updatesPerSave) merged customers a writer (writers \(writers), saves \(savesPerWriter), customers \(seededCustomers))")
        }
        self.writers = writers
        self.savesPerWriter = savesPerWriter
        seeded = ShopData.customers(0..<seededCustomers, seed: seed)
        inserted = ShopData.customers(
            seededCustomers..<seededCustomers + writers * savesPerWriter * Self.customersPerSave, seed: seed ^ 0xC0C0)
    }

    /// Every writer's saves.
    var saves: Int { writers * savesPerWriter }

    /// The seeded customers writer `writer` updates (a contiguous share; the remainder of the
    /// division is updated by nobody).
    func share(_ writer: Int) -> Range<Int> {
        let size = seeded.customers.count / writers
        return writer * size..<(writer + 1) * size
    }

    /// The customers of ``inserted`` that save `save` of writer `writer` inserts.
    func batch(writer: Int, save: Int) -> Range<Int> {
        let first = (writer * savesPerWriter + save) * Self.customersPerSave
        return first..<first + Self.customersPerSave
    }

    /// The seeded customers save `save` of writer `writer` moves to the next city: the next
    /// ``updatesPerSave`` of its share, round.
    func updated(writer: Int, save: Int) -> [Int] {
        let share = share(writer)
        return (0..<Self.updatesPerSave).map { share.lowerBound + (save * Self.updatesPerSave + $0) % share.count }
    }

    /// The city of every seeded customer after every save.
    var finalCities: [String] {
        var cities = seeded.customers.map(\.city)
        for writer in 0..<writers {
            for save in 0..<savesPerWriter {
                for index in updated(writer: writer, save: save) { cities[index] = nextCity(after: cities[index]) }
            }
        }
        return cities
    }
}

/// What one system's concurrent-saves run measured.
struct ConcurrentSavesResult {
    /// Seconds from the writers' start until the last of them returned from its last save.
    var seconds: Double
    /// Per save, the seconds from the save's commit in its writer until the merging context
    /// (the reader) had applied it; sorted.
    var latencies: [Double]
    /// Seconds from the last writer's end until every save was applied.
    var drainSeconds: Double
    /// The seeded customers' cities as the merging context (the reader) holds them at the end.
    var cities: [String]
    /// The customers in the store at the end.
    var customers: Int

    /// The `fraction` quantile of ``latencies`` (nearest rank), in seconds.
    func latency(_ fraction: Double) -> Double {
        guard !latencies.isEmpty else { return 0 }
        let rank = Int((fraction * Double(latencies.count)).rounded(.up))
        return latencies[min(latencies.count - 1, max(0, rank - 1))]
    }
}

// MARK: Strata

/// Runs `plan` on a new StrataStore at `path` with `durability`: one private-queue context per
/// writer thread and one private-queue context that merges their saves automatically, holding
/// every seeded customer and order loaded.
///
/// The merge latency of a save runs from the writer's clock reading in its own
/// ``ManagedObjectContext/didSaveObjectIDsNotification`` to the merging context posting the
/// ``ManagedObjectContext/objectsDidChangeNotification`` whose inserted objects include one of
/// the save's inserts.
///
/// The start: `save()` posts that notification on the writer's queue once the save is
/// committed (durable), then hands the save to the merging contexts and returns; reading the
/// clock after `save()` returned instead would race the merge, which the merging context's
/// queue often finished first (on two cores, for up to two thirds of the saves), so those would
/// count as 0. The end: that notification ends the merge (posted after the save's updates were
/// refreshed and its inserts registered) and is what an app's UI observes; a marker block
/// enqueued on the merging context after the save would also wait for the merges of later saves
/// enqueued in between, and measure the queue rather than the merge. (One merge block may merge
/// several saves that arrived meanwhile, one after the other, each ending with its own
/// notification.)
///
/// - Throws: ``ObjectGraphComparisonError`` when a save is never merged or, with `verify`, when
///   the merged values are not the saved ones; or the store's error.
func runStrataConcurrentSaves(_ plan: ConcurrentSavesPlan, path: String, model: ManagedObjectModel, durability: String, verify: Bool) throws
    -> ConcurrentSavesResult
{
    let shop = try StrataShop(path: path, model: model, durability: durability)
    try shop.insertInSaves(plan.seeded, perSave: plan.seeded.customers.count)
    shop.resetContext()
    let result = try strataConcurrentSaves(plan, shop: shop, verify: verify)
    try shop.close()
    return result
}

/// The run of ``runStrataConcurrentSaves(_:path:model:durability:verify:)`` on `shop`'s
/// seeded store; every context it makes is gone when it returns.
private func strataConcurrentSaves(_ plan: ConcurrentSavesPlan, shop: StrataShop, verify: Bool) throws
    -> ConcurrentSavesResult
{
    let coordinator = shop.persistentStoreCoordinator
    let seededIDs = plan.seeded.customers.indices.map(shop.customerID)

    // The merging context, holding every seeded customer and order loaded (`held`).
    let merger = ManagedObjectContext(concurrencyType: .privateQueue)
    merger.name = "merging"
    merger.persistentStoreCoordinator = coordinator
    merger.automaticallyMergesChangesFromParent = true
    let held = try merger.performAndWait { () throws -> [ManagedObject] in
        let customers = try merger.fetch(FetchRequest(entityName: "Customer"))
        let orders = try merger.fetch(FetchRequest(entityName: "Order"))
        for customer in customers {
            for key in ["name", "city", "tier"] { _ = try customer.value(forKey: key) }
        }
        for order in orders {
            for key in ["total", "status"] { _ = try order.value(forKey: key) }
        }
        return customers + orders
    }
    let seededObjects = plan.seeded.customers.count * Shop.objectsPerCustomer
    guard held.count == seededObjects else {
        throw ObjectGraphComparisonError(
            "concurrent saves (Strata)", "the merging context fetched \(held.count) objects, expected \(seededObjects)")
    }

    // When the merging context announced each inserted object, and when each save was
    // committed (by one of its inserted objects).
    let applied = Mutex<[ManagedObjectID: ContinuousClock.Instant]>([:])
    let committed = Mutex<[(id: ManagedObjectID, at: ContinuousClock.Instant)]>([])
    applied.withLock { $0.reserveCapacity(plan.saves * ConcurrentSavesPlan.customersPerSave * Shop.objectsPerCustomer) }
    // Runs on the merging context's queue, inside the merge that posts it (queue nil).
    let observer = NotificationCenter.default.addObserver(
        forName: ManagedObjectContext.objectsDidChangeNotification, object: merger, queue: nil
    ) { notification in
        let now = ContinuousClock.now
        let key = ManagedObjectContext.NotificationKey.insertedObjects.rawValue
        guard let inserted = notification.userInfo?[key] as? Set<ManagedObject>, !inserted.isEmpty else { return }
        let ids = inserted.map(\.objectID)
        applied.withLock { applied in
            for id in ids { applied[id] = now }
        }
    }
    defer { NotificationCenter.default.removeObserver(observer) }

    let writeSeconds = try onThreads(
        plan.writers,
        setup: { writer -> StrataWriter in
            let context = ManagedObjectContext(concurrencyType: .privateQueue)
            context.name = "writer \(writer)"
            context.persistentStoreCoordinator = coordinator
            let share = try context.performAndWait { () throws -> [Int: ManagedObject] in
                var share: [Int: ManagedObject] = [:]
                for index in plan.share(writer) {
                    let customer = try context.existingObject(with: seededIDs[index])
                    _ = try customer.value(forKey: "city")
                    share[index] = customer
                }
                return share
            }
            // Runs on the writer's queue, inside save() (queue nil).
            let observer = NotificationCenter.default.addObserver(
                forName: ManagedObjectContext.didSaveObjectIDsNotification, object: context, queue: nil
            ) { notification in
                let now = ContinuousClock.now
                let key = ManagedObjectContext.NotificationKey.insertedObjectIDs.rawValue
                guard let inserted = notification.userInfo?[key] as? Set<ManagedObjectID>, let id = inserted.first else { return }
                committed.withLock { $0.append((id, now)) }
            }
            return StrataWriter(context: context, share: share, observer: observer)
        },
        work: { writer, state in
            let context = state.context
            defer { NotificationCenter.default.removeObserver(state.observer) }
            for save in 0..<plan.savesPerWriter {
                try context.performAndWait { () throws in
                    _ = try StrataShop.insertCustomers(
                        plan.inserted, plan.batch(writer: writer, save: save), products: [], into: context)
                    for index in plan.updated(writer: writer, save: save) {
                        guard let customer = state.share[index], case .string(let city) = try customer.value(forKey: "city") else {
                            throw ObjectGraphComparisonError("concurrent saves (Strata)", "writer \(writer) has no city for customer \(index)")
                        }
                        try customer.setValue(.string(nextCity(after: city)), forKey: "city")
                    }
                    try context.save()
                }
            }
        })

    // Every merge was enqueued on the merging context's queue before its save returned: a
    // block enqueued now runs after all of them.
    let (_, drainSeconds) = timed { merger.performAndWait {} }
    let appliedAt = applied.withLock { $0 }
    var latencies: [Double] = []
    latencies.reserveCapacity(plan.saves)
    for save in committed.withLock({ $0 }) {
        guard let at = appliedAt[save.id] else {
            throw ObjectGraphComparisonError(
                "concurrent saves (Strata)", "the merging context never announced the insert of \(save.id)")
        }
        latencies.append(seconds(at - save.at))
    }
    guard latencies.count == plan.saves else {
        throw ObjectGraphComparisonError("concurrent saves (Strata)", "\(latencies.count) saves committed, expected \(plan.saves)")
    }

    // The seeded customers as the merging context holds them (refreshed by the merges, not
    // faulted in again: a stale value would show here).
    let cities = try merger.performAndWait { () throws -> [String] in
        try seededIDs.map { id in
            guard let customer = merger.registeredObject(for: id) else {
                throw ObjectGraphComparisonError("concurrent saves (Strata)", "the merging context lost \(id)")
            }
            if verify, customer.isFault {
                throw ObjectGraphComparisonError("concurrent saves (Strata)", "a merge turned \(id) into a fault")
            }
            guard case .string(let city) = try customer.value(forKey: "city") else {
                throw ObjectGraphComparisonError("concurrent saves (Strata)", "\(id) has no city")
            }
            return city
        }
    }
    let customers = try merger.performAndWait { try merger.count(for: FetchRequest(entityName: "Customer")) }
    withExtendedLifetime(held) {}
    return ConcurrentSavesResult(
        seconds: writeSeconds, latencies: latencies.sorted(), drainSeconds: drainSeconds, cities: cities,
        customers: customers)
}

/// One Strata writer thread's context, the seeded customers it updates (by index), loaded, and
/// its did-save observer. Made and used on that thread only.
private struct StrataWriter {
    let context: ManagedObjectContext
    let share: [Int: ManagedObject]
    let observer: any NSObjectProtocol
}

// MARK: SQLite

/// Runs `plan` on a new SQLite database at `path` (the shop's schema, ``SQLiteShop/schema``)
/// through a GRDB `DatabasePool` (WAL) with `synchronous` on its writer connection: each
/// writer thread commits its saves through the pool's one writer (`pool.write`, one
/// transaction a save). Each commit hands its new and updated rows' IDs to a serial reader
/// queue (from GRDB's `afterNextTransaction`, on the writer connection's queue before
/// `pool.write` returns, as a Strata save hands itself to the merging contexts before `save()`
/// returns), which reads those rows in a read transaction of the pool (one of its reader
/// connections) into its copy of the seeded rows, as an app's main thread would refresh what
/// it shows.
///
/// The latency of a commit is the time from the writer's clock reading in that
/// `afterNextTransaction` block (the commit is durable; Strata's start is the same point of its
/// save) to the reader having read the commit's rows.
///
/// - Throws: ``ObjectGraphComparisonError`` when the reader does not find a committed row; or
///   GRDB's error.
func runSQLiteConcurrentSaves(_ plan: ConcurrentSavesPlan, path: String, synchronous: String) throws
    -> ConcurrentSavesResult
{
    let pool = try openSQLitePool(path, synchronous: synchronous)
    let seeded = try pool.write { db -> [Int64] in
        var customerIDs: [Int64] = [], orderIDs: [Int64] = []
        try SQLiteShop.insertCustomers(
            db, plan.seeded, plan.seeded.customers.indices, productIDs: [], customerIDs: &customerIDs, orderIDs: &orderIDs)
        return customerIDs
    }
    let reader = SQLiteReader()
    try pool.read { db in
        let customers = try CustomerRow.fetchAll(db, sql: "SELECT \(CustomerRow.columns) FROM customers")
        let orders = try OrderRow.fetchAll(db, sql: "SELECT \(OrderRow.columns) FROM orders")
        reader.state.withLock { state in
            for row in customers { state.customers[row.id] = row }
            for row in orders { state.orders[row.id] = row }
        }
    }
    let queue = DispatchQueue(label: "SQLite reader")

    let writeSeconds = try onThreads(
        plan.writers, setup: { _ in () },
        work: { writer, _ in
            for save in 0..<plan.savesPerWriter {
                try pool.write { db in
                    var commit = SQLiteCommit()
                    try SQLiteShop.insertCustomers(
                        db, plan.inserted, plan.batch(writer: writer, save: save), productIDs: [],
                        customerIDs: &commit.customers, orderIDs: &commit.orders)
                    let select = try db.cachedStatement(sql: "SELECT \(CustomerRow.columns) FROM customers WHERE id = ?")
                    let update = try db.cachedStatement(sql: "UPDATE customers SET city = ? WHERE id = ?")
                    for index in plan.updated(writer: writer, save: save) {
                        guard let row = try CustomerRow.fetchOne(select, arguments: [seeded[index]]) else {
                            throw ObjectGraphComparisonError("concurrent saves (SQLite)", "no customer \(seeded[index])")
                        }
                        try update.execute(arguments: [nextCity(after: row.city), row.id])
                        commit.updated.append(row.id)
                    }
                    let committed = commit
                    db.afterNextTransaction { _ in
                        let now = ContinuousClock.now
                        queue.async { reader.take(committed, committedAt: now, from: pool) }
                    }
                }
            }
        })

    let (_, drainSeconds) = timed { queue.sync {} }
    let (latencies, failure, cities) = reader.state.withLock { state in
        (state.latencies, state.failure, seeded.map { state.customers[$0]?.city ?? "" })
    }
    if let failure { throw failure }
    guard latencies.count == plan.saves else {
        throw ObjectGraphComparisonError("concurrent saves (SQLite)", "the reader took \(latencies.count) commits, expected \(plan.saves)")
    }
    let customers = try pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM customers") ?? 0 }
    try pool.close()
    return ConcurrentSavesResult(
        seconds: writeSeconds, latencies: latencies.sorted(), drainSeconds: drainSeconds, cities: cities,
        customers: customers)
}

/// The rows one SQLite commit inserted and updated.
private struct SQLiteCommit: Sendable {
    var customers: [Int64] = []
    var orders: [Int64] = []
    var updated: [Int64] = []
}

/// The SQLite side's reader: its copy of the rows it has read, and what it measured.
/// Used on the reader queue only while the writers run (then read once they are done); behind
/// a `Mutex` because the queue's blocks are made on the writer connection's queue.
private final class SQLiteReader: Sendable {
    /// The reader's rows and measurements.
    struct State {
        var customers: [Int64: CustomerRow] = [:]
        var orders: [Int64: OrderRow] = [:]
        /// Seconds from each commit until the reader had read it.
        var latencies: [Double] = []
        /// The first error the reader met.
        var failure: (any Error)?
    }

    let state = Mutex(State())

    /// Reads the rows of `commit` (committed at `committedAt`) from `pool` into the copy and
    /// records the latency; records an error when a row is missing.
    func take(_ commit: SQLiteCommit, committedAt: ContinuousClock.Instant, from pool: DatabasePool) {
        do {
            let (customers, orders) = try pool.read { db -> ([CustomerRow], [OrderRow]) in
                let customer = try db.cachedStatement(sql: "SELECT \(CustomerRow.columns) FROM customers WHERE id = ?")
                let order = try db.cachedStatement(sql: "SELECT \(OrderRow.columns) FROM orders WHERE id = ?")
                let customers = try (commit.customers + commit.updated).map { id in
                    guard let row = try CustomerRow.fetchOne(customer, arguments: [id]) else {
                        throw ObjectGraphComparisonError("concurrent saves (SQLite)", "the reader found no customer \(id) after its commit")
                    }
                    return row
                }
                let orders = try commit.orders.map { id in
                    guard let row = try OrderRow.fetchOne(order, arguments: [id]) else {
                        throw ObjectGraphComparisonError("concurrent saves (SQLite)", "the reader found no order \(id) after its commit")
                    }
                    return row
                }
                return (customers, orders)
            }
            let latency = seconds(ContinuousClock.now - committedAt)
            state.withLock { state in
                for row in customers { state.customers[row.id] = row }
                for row in orders { state.orders[row.id] = row }
                state.latencies.append(latency)
            }
        } catch {
            state.withLock { state in
                if state.failure == nil { state.failure = error }
            }
        }
    }
}

/// Opens a `DatabasePool` (WAL) on a new database at `path` with the shop's schema, foreign keys
/// on, the page cache of ``SQLiteShop`` on every connection, and `synchronous` (`"FULL"` or
/// `"NORMAL"`) on the writer connection, the one that commits.
private func openSQLitePool(_ path: String, synchronous: String) throws -> DatabasePool {
    let pool = try DatabasePool(path: path, configuration: SQLiteShop.configuration())
    try pool.writeWithoutTransaction { db in
        // GRDB sets synchronous = NORMAL when it turns WAL mode on.
        try SQLiteShop.useWAL(db, path: path, synchronous: synchronous, set: false)
        try db.execute(sql: SQLiteShop.schema)
    }
    return pool
}

// MARK: Threads

/// Runs `count` OS threads (not tasks: they block on a context's queue or on GRDB's writer, and
/// the cooperative pool has one thread per core). Thread `i` runs `setup(i)`, waits until every
/// thread has set up, then runs `work(i, state)` with what its setup returned. Returns the
/// seconds from the start of the work until every thread finished it.
///
/// - Throws: The first error a thread met, in its setup or its work (a thread whose setup
///   failed does no work).
private func onThreads<State>(
    _ count: Int, setup: @escaping @Sendable (Int) throws -> State, work: @escaping @Sendable (Int, State) throws -> Void
) throws -> Double {
    let failure = Mutex<(any Error)?>(nil)
    let ready = DispatchGroup(), done = DispatchGroup()
    let start = DispatchSemaphore(value: 0)
    for index in 0..<count {
        ready.enter()
        done.enter()
        let thread = Thread {
            defer { done.leave() }
            var state: State? = nil
            do {
                state = try setup(index)
            } catch {
                failure.withLock { if $0 == nil { $0 = error } }
            }
            ready.leave()
            start.wait()
            guard let state else { return }
            do {
                try work(index, state)
            } catch {
                failure.withLock { if $0 == nil { $0 = error } }
            }
        }
        thread.start()
    }
    ready.wait()
    let began = ContinuousClock.now
    for _ in 0..<count { start.signal() }
    done.wait()
    let elapsed = seconds(ContinuousClock.now - began)
    if let error = failure.withLock({ $0 }) { throw error }
    return elapsed
}

import BenchmarkSupport
import Foundation
import Strata

/// Seconds one store took for each measurement of the graph phases (insert, faults, fetches,
/// counts), with what the report checks across stores.
struct GraphFigures {
    /// Inserting every object into the context and the one save.
    var insert = 0.0
    /// The save alone.
    var insertSave = 0.0
    /// New coordinator and `addPersistentStore` before the cold faults.
    var coldOpen = 0.0
    /// Faults of the picked objects, cold, warm (same context) and again after `reset()`.
    var cold = 0.0, warm = 0.0, refault = 0.0
    /// The fetches on indexed attributes (tier first, then name first) and on unindexed ones.
    var indexed = Measure(), swapped = Measure(), unindexed = Measure()
    /// Names the first indexed, swapped and unindexed fetches returned, in order.
    var indexedNames: [String] = [], swappedNames: [String] = [], unindexedNames: [String] = []
    /// The counts.
    var count = Measure()
    /// Engine statistics after the insert (StrataStore only).
    var stats: EngineStats?
}

/// Phases 1, 3, 4 and 5 on one store: the big insert, then (after a reopen) faults, fetches
/// and counts on what it saved.
func runGraph(_ kind: StoreKind, _ settings: Settings, model: ManagedObjectModel, directory: TemporaryDirectory) throws
    -> GraphFigures
{
    var figures = GraphFigures()
    let url = try kind.url("graph", in: directory)
    var random = SplitMix64(seed: 0x0B1E_C7)
    let shape = settings.shape

    // 1. Every object into one context, then one save.
    var saved: [SavedObject] = []
    do {
        let session = try Session(kind, at: url, model: model)
        var objects: [ManagedObject] = []
        (_, figures.insert) = try timed { () throws in
            let products = try Shop.insertProducts(shape.products, into: session.context, &random)
            objects = try Shop.insertCustomers(0..<shape.customers, products: products, into: session.context, &random)
            (_, figures.insertSave) = try timed { try session.context.save() }
        }
        saved = try objects.map { try SavedObject($0, in: session.store) }
        figures.stats = session.engineStats()
        objects = []
        try session.close()
    }
    progress("  \(kind.name): inserted \(shape.total) objects in \(fixed(figures.insert, 2)) s (save \(fixed(figures.insertSave, 2)) s)")

    // 3. Faults by ID in a random order: cold (new coordinator), warm (same context), and
    // again after reset() (the context forgot them; the store's caches did not).
    saved.shuffle(using: &random)
    let picks = Array(saved.prefix(settings.faults))
    let (session, open) = try timed { try Session(kind, at: url, model: model) }
    figures.coldOpen = open
    let ids = picks.map { (session.objectID($0), $0.entity.name == "Customer" ? "name" : "status") }
    func faultAll() throws -> [ManagedObject] {
        try ids.map { id, key in
            let object = try session.context.existingObject(with: id)
            guard case .string = try object.value(forKey: key) else { throw BenchmarkError("\(id) has no \(key)") }
            return object
        }
    }
    // The cold pass's objects stay alive (the context holds unchanged objects weakly), so the
    // warm pass finds them registered: the same instances, already loaded.
    let (loaded, cold) = try timed { try faultAll() }
    let (again, warm) = try timed { try faultAll() }
    guard again.elementsEqual(loaded, by: ===) else { throw BenchmarkError("\(kind.name): the warm pass made new objects") }
    session.context.reset()
    let (refaulted, refault) = try timed { try faultAll() }
    guard refaulted.count == ids.count else { throw BenchmarkError("\(kind.name): \(refaulted.count) objects after reset") }
    session.context.reset()
    (figures.cold, figures.warm, figures.refault) = (cold, warm, refault)
    progress("  \(kind.name): \(ids.count) faults cold \(fixed(figures.cold, 3)) s, warm \(fixed(figures.warm, 3)) s")

    // 4. Fetches: indexed attributes, then the same values in unindexed attributes.
    func fetchRepeatedly(_ format: String, sortKey: String, times: Int) throws -> (Measure, [String]) {
        var request = FetchRequest(entityName: "Customer")
        request.predicate = try FetchPredicate(format: format)
        request.sortDescriptors = [FetchSortDescriptor(keyPath: sortKey)]
        request.fetchLimit = settings.fetchLimit
        let first = try session.context.fetch(request)
        let names = try first.map { object -> String in
            guard case .string(let name) = try object.value(forKey: "name") else { throw BenchmarkError("no name") }
            return name
        }
        session.context.reset()
        let measure = try repeated(times, seconds: settings.budget) {
            let results = try session.context.fetch(request)
            guard results.count == names.count else { throw BenchmarkError("fetch returned \(names.count), then \(results.count)") }
        }
        session.context.reset()
        return (measure, names)
    }
    (figures.indexed, figures.indexedNames) = try fetchRepeatedly(
        "tier == 3 AND name BEGINSWITH 'C'", sortKey: "name", times: settings.fetches)
    (figures.swapped, figures.swappedNames) = try fetchRepeatedly(
        "name BEGINSWITH 'C' AND tier == 3", sortKey: "name", times: settings.fetches)
    (figures.unindexed, figures.unindexedNames) = try fetchRepeatedly(
        "level == 3 AND label BEGINSWITH 'C'", sortKey: "label", times: settings.unindexedFetches)
    progress("  \(kind.name): \(figures.indexed.ops) indexed fetches \(fixed(figures.indexed.seconds, 3)) s")

    // 5. Counts of a whole entity.
    let orders = FetchRequest(entityName: "Order")
    let expected = shape.customers * Shop.ordersPerCustomer
    figures.count = try repeated(settings.counts, seconds: settings.budget) {
        let counted = try session.context.count(for: orders)
        guard counted == expected else { throw BenchmarkError("\(kind.name) counted \(counted) orders, expected \(expected)") }
    }
    try session.close()
    return figures
}

/// Phase 2: `settings.saves` saves of 10 objects (two customers with four orders each), with
/// StrataStore's durability `full`. Returns the seconds.
func runSaves(_ kind: StoreKind, _ settings: Settings, model: ManagedObjectModel, directory: TemporaryDirectory) throws
    -> Double
{
    let session = try Session(kind, at: try kind.url("saves", in: directory), model: model, durability: "full")
    var random = SplitMix64(seed: 0x5A7E5)
    let perSave = 2
    let (_, elapsed) = try timed { () throws in
        for save in 0..<settings.saves {
            _ = try Shop.insertCustomers(save * perSave..<(save + 1) * perSave, products: [], into: session.context, &random)
            try session.context.save()
        }
    }
    let customers = try session.context.count(for: FetchRequest(entityName: "Customer"))
    guard customers == settings.saves * perSave else {
        throw BenchmarkError("\(kind.name): \(customers) customers after the saves, expected \(settings.saves * perSave)")
    }
    try session.close()
    progress("  \(kind.name): \(settings.saves) saves of \(perSave * Shop.objectsPerCustomer) objects in \(fixed(elapsed, 2)) s")
    return elapsed
}

/// What phase 6 measured on one store.
struct ReopenFigures {
    /// Building the store: saves of ``Settings/reopenBatch`` objects, durability `none`.
    var build = 0.0
    /// Each reopen: new coordinator, `addPersistentStore`, `existingObject` of one object.
    var reopens: [Double] = []
    /// Engine statistics after the first reopen (StrataStore only).
    var stats: EngineStats?
}

/// Phase 6: builds a store of `settings.reopenRows` rows (customers and orders), closes it,
/// then reopens it `settings.reopens` times: new coordinator, `addPersistentStore` and the
/// first `existingObject`.
func runReopen(_ kind: StoreKind, _ settings: Settings, model: ManagedObjectModel, directory: TemporaryDirectory) throws
    -> ReopenFigures
{
    var figures = ReopenFigures()
    let url = try kind.url("reopen", in: directory)
    var random = SplitMix64(seed: 0xE0E0)
    let customers = settings.reopenRows / Shop.objectsPerCustomer
    let perSave = max(1, settings.reopenBatch / Shop.objectsPerCustomer)
    var probe: SavedObject?
    (_, figures.build) = try timed { () throws in
        let session = try Session(kind, at: url, model: model, durability: "none")
        var first = 0
        while first < customers {
            let range = first..<min(customers, first + perSave)
            let objects = try Shop.insertCustomers(range, products: [], into: session.context, &random)
            try session.context.save()
            if probe == nil, let middle = objects.dropFirst(objects.count / 2).first {
                probe = try SavedObject(middle, in: session.store)
            }
            session.context.reset()
            first = range.upperBound
        }
        try session.close()
    }
    guard let probe else { throw BenchmarkError("nothing was built to reopen") }
    progress("  \(kind.name): built \(customers * Shop.objectsPerCustomer) rows in \(fixed(figures.build, 1)) s")
    for attempt in 0..<settings.reopens {
        let (session, elapsed) = try timed { () throws -> Session in
            let session = try Session(kind, at: url, model: model)
            _ = try session.context.existingObject(with: session.objectID(probe)).value(forKey: "name")
            return session
        }
        figures.reopens.append(elapsed)
        if attempt == 0 {
            figures.stats = session.engineStats()
            let rows = try session.context.count(for: FetchRequest(entityName: "Customer"))
                + session.context.count(for: FetchRequest(entityName: "Order"))
            guard rows == customers * Shop.objectsPerCustomer else {
                throw BenchmarkError("\(kind.name) reopened with \(rows) rows, expected \(customers * Shop.objectsPerCustomer)")
            }
        }
        try session.close()
    }
    return figures
}

/// Operations done and the seconds they took.
struct Measure {
    /// Operations done.
    var ops = 0
    /// Wall-clock seconds.
    var seconds = 0.0
}

/// Runs `body` `times` times, or fewer if `seconds` have passed (at least once).
func repeated(_ times: Int, seconds limit: Double, _ body: () throws -> Void) throws -> Measure {
    let start = ContinuousClock.now
    let deadline = start + .milliseconds(Int(limit * 1000))
    var done = 0
    repeat {
        try body()
        done += 1
    } while done < times && ContinuousClock.now < deadline
    return Measure(ops: done, seconds: seconds(ContinuousClock.now - start))
}

import Foundation

/// Routing of requests, faults and registrations to the right store.
extension PersistentStoreCoordinator {
    /// Executes a request against the stores that hold its entity (or its
    /// ``PersistentStoreRequest/affectedStores``), combining their results.
    ///
    /// - Throws: ``ObjectGraphError/Code/noPersistentStore`` when no store can serve it.
    public func execute(_ request: any PersistentStoreRequest, with context: ManagedObjectContext?) throws -> PersistentStoreResult {
        if var fetch = request as? FetchRequest {
            // The save generation before the store reads anything: a save that lands during
            // the fetch makes the faults it returns read their rows again when they fire.
            let outer = context?.fetchGeneration
            context?.fetchGeneration = saveGeneration.load(ordering: .acquiring)
            defer { context?.fetchGeneration = outer }
            if fetch.entity == nil { fetch.entity = try managedObjectModel.entity(named: fetch.entityName) }
            let stores = try incrementalStores(for: fetch)
            let required = fetch.requiredCapabilities
            if fetch.resultType == .dictionary,
                stores.count > 1 || !stores[0].fetchCapabilities.isSuperset(of: required)
            {
                return .dictionaries(try mergedDictionaries(fetch, from: stores, with: context))
            }
            if stores.count == 1 { return try stores[0].execute(fetch, with: context) }
            var objects: [ManagedObject] = []
            var ids: [ManagedObjectID] = []
            var rows: [[String: FetchValue]] = []
            var count = 0
            for store in stores {
                switch try store.execute(fetch, with: context) {
                case .objects(let found): objects += found
                case .objectIDs(let found): ids += found
                case .dictionaries(let found): rows += found
                case .count(let found): count += found
                case .saved: break
                }
            }
            switch fetch.resultType {
            case .managedObject: return ids.isEmpty ? .objects(objects) : .objectIDs(objects.map { $0.objectID } + ids)
            case .managedObjectID: return .objectIDs(objects.map { $0.objectID } + ids)
            case .dictionary: return .dictionaries(rows)
            case .count: return .count(count)
            }
        }
        let stores = (request.affectedStores ?? persistentStores).compactMap { $0 as? IncrementalStore }
        guard !stores.isEmpty else {
            throw ObjectGraphError(.noPersistentStore, "The coordinator has no store to execute a \(request.requestType) request.")
        }
        var last = PersistentStoreResult.saved
        for store in stores { last = try store.execute(request, with: context) }
        return last
    }

    /// A dictionary fetch over several stores, or over a store that lacks a capability
    /// the request needs: each store returns the raw values of every key path involved
    /// for its matching rows, and the request's in-memory emulation groups, aggregates,
    /// filters, sorts and pages the union (so groups and aggregates span the stores).
    private func mergedDictionaries(
        _ fetch: FetchRequest, from stores: [IncrementalStore], with context: ManagedObjectContext?
    ) throws -> [[String: FetchValue]] {
        let properties = fetch.entity.map(fetch.fetchedProperties) ?? fetch.propertiesToFetch ?? []
        let resultNames = Set(properties.map(\.name))
        var keyPaths: Set<String> = []
        for property in properties + (fetch.propertiesToGroupBy ?? []) {
            keyPaths.formUnion(property.keyPaths)
            // An expression may read the object itself (`count:(SELF)`): fetch its ID too.
            if case .expression = property { keyPaths.insert("self") }
        }
        for descriptor in fetch.sortDescriptors where !resultNames.contains(descriptor.keyPath) {
            keyPaths.insert(FetchExpression.strippingOperators(descriptor.keyPath))
        }
        var raw = fetch
        raw.propertiesToFetch = keyPaths.sorted().map(FetchProperty.keyPath)
        raw.propertiesToGroupBy = nil
        raw.havingPredicate = nil
        raw.returnsDistinctResults = false
        raw.sortDescriptors = []
        raw.fetchLimit = 0
        raw.fetchOffset = 0
        var rows: [FetchValueRow] = []
        for store in stores {
            guard case .dictionaries(let found) = try store.execute(raw, with: context) else {
                throw ObjectGraphError(.invalidFetchRequest, "Store \(store.identifier) returned no dictionaries for a dictionary fetch.", entityName: fetch.entityName)
            }
            rows += found.map(FetchValueRow.init)
        }
        var merged = fetch
        merged.propertiesToFetch = properties
        return try merged.dictionaries(from: rows)
    }

    /// The incremental stores a fetch goes to.
    func incrementalStores(for request: FetchRequest) throws -> [IncrementalStore] {
        if request.affectedStores == nil, let stores = state.withLock({ $0.wholeModelStores }), !stores.isEmpty { return stores }
        let entity = try request.entity ?? managedObjectModel.entity(named: request.entityName)
        let candidates = request.affectedStores ?? persistentStores
        let stores = candidates.filter { $0.holds(entity) }.compactMap { $0 as? IncrementalStore }
        guard !stores.isEmpty else {
            throw ObjectGraphError(
                .noPersistentStore,
                persistentStores.isEmpty
                    ? "The coordinator has no persistent store; add one before fetching \(entity.name)."
                    : "No persistent store of the coordinator holds entity \(entity.name).",
                entityName: entity.name)
        }
        return stores
    }

    /// The store an object ID belongs to.
    func incrementalStore(for objectID: ManagedObjectID) throws -> IncrementalStore {
        // The ID's own store, when it is still added here: no search by identifier.
        if let store = objectID.home.store?.incrementalStore,
            state.withLock({ $0.stores.contains { $0 === store } })
        {
            return store
        }
        guard let identifier = objectID.storeIdentifier else {
            throw ObjectGraphError(.invalidArgument, "\(objectID) is temporary and belongs to no store yet.", objectID: objectID)
        }
        guard let store = persistentStore(withIdentifier: identifier) as? IncrementalStore else {
            throw ObjectGraphError(
                .noPersistentStore, "The store \(identifier) of \(objectID) is not part of this coordinator.",
                entityName: objectID.entityName, objectID: objectID)
        }
        return store
    }

    /// The store a newly inserted object will be saved to: its assigned store, or the
    /// first writable store that holds its entity.
    func incrementalStore(forInserting object: ManagedObject) throws -> IncrementalStore {
        if let assigned = object.assignedStore as? IncrementalStore { return assigned }
        let stores = persistentStores.filter { $0.holds(object.entity) }
        guard let store = (stores.first { !$0.isReadOnly } ?? stores.first) as? IncrementalStore else {
            throw ObjectGraphError(
                .noPersistentStore,
                persistentStores.isEmpty
                    ? "The coordinator has no persistent store to save \(object.entity.name) to."
                    : "No persistent store of the coordinator holds entity \(object.entity.name).",
                entityName: object.entity.name, objectID: object.objectID)
        }
        return store
    }

    /// Sends each store its save request; each save bumps ``saveGeneration``, so rows cached
    /// by objects before it (``ManagedObject/faultRow``) are read again. Stores save one
    /// after another: with several stores a failure can leave earlier stores saved (there is
    /// no cross-store transaction yet).
    func executeSave(_ requests: [(store: IncrementalStore, request: SaveChangesRequest)], in context: ManagedObjectContext) throws {
        for (store, request) in requests {
            defer { saveGeneration.add(1, ordering: .releasing) }
            _ = try store.execute(request, with: context)
        }
    }

    /// Loads an object's values from its store (the object keeps the row it loaded).
    func newValues(forObjectWith id: ManagedObjectID, in context: ManagedObjectContext) throws -> IncrementalStoreNode {
        try incrementalStore(for: id).newValuesForObject(with: id, with: context)
    }

    func newValue(
        forRelationship relationship: RelationshipDescription, forObjectWith id: ManagedObjectID, in context: ManagedObjectContext
    ) throws -> RelationshipValue {
        try incrementalStore(for: id).newValue(forRelationship: relationship, forObjectWith: id, with: context)
    }

    /// A to-many relationship's destinations with the rows their store read with them
    /// (``MemberRowsSource``), or `nil` when the store does not read them that way.
    func destinationsWithRows(
        of relationship: RelationshipDescription, forObjectWith id: ManagedObjectID
    ) throws -> (ids: [ManagedObjectID], rows: [IncrementalStoreNode?])? {
        guard let source = try incrementalStore(for: id) as? MemberRowsSource else { return nil }
        return try source.destinationsWithRows(of: relationship, for: id)
    }

    /// The rows of `ids` as their store reads them in one go (``MemberRowsSource/rows(of:)``),
    /// or `nil` when the IDs are not all of one store of this coordinator or the store does not
    /// read them that way.
    func rows(of ids: [ManagedObjectID]) throws -> [IncrementalStoreNode?]? {
        guard let source = soleStore(of: ids) as? MemberRowsSource else { return nil }
        return try source.rows(of: ids)
    }

    /// A context started using rows: tell each store once (stores keep the register counts
    /// of the contract; the coordinator keeps none).
    func contextDidRegister(_ ids: [ManagedObjectID]) {
        if let store = soleStore(of: ids) { return store.managedObjectContextDidRegisterObjects(with: ids) }
        let groups = state.withLock { state in Self.group(ids, stores: state.stores) }
        for (store, group) in groups { store.managedObjectContextDidRegisterObjects(with: group) }
    }

    /// A context stopped using rows: tell each store once.
    func contextDidUnregister(_ ids: [ManagedObjectID]) {
        if let store = soleStore(of: ids) { return store.managedObjectContextDidUnregisterObjects(with: ids) }
        let groups = state.withLock { state in Self.group(ids, stores: state.stores) }
        for (store, group) in groups { store.managedObjectContextDidUnregisterObjects(with: group) }
    }

    /// The store of every ID in `ids`, when they share one that is still this coordinator's
    /// (the usual case, and every deallocation): no grouping, no array.
    private func soleStore(of ids: [ManagedObjectID]) -> IncrementalStore? {
        guard let first = ids.first?.home.store else { return nil }
        for id in ids.dropFirst() where id.home.store !== first { return nil }
        guard let store = first.incrementalStore else { return nil }
        return state.withLock { state in state.stores.contains { $0 === store } } ? store : nil
    }

    /// `ids` by store, among `stores` (the coordinator's, read under its lock).
    private static func group(_ ids: [ManagedObjectID], stores: [PersistentStore]) -> [(IncrementalStore, [ManagedObjectID])] {
        var order: [String] = []
        var groups: [String: [ManagedObjectID]] = [:]
        for id in ids {
            guard let identifier = id.storeIdentifier else { continue }
            if groups[identifier] == nil { order.append(identifier) }
            groups[identifier, default: []].append(id)
        }
        return order.compactMap { identifier in
            guard let store = stores.first(where: { $0.identifier == identifier }) as? IncrementalStore,
                let ids = groups[identifier]
            else { return nil }
            return (store, ids)
        }
    }
}

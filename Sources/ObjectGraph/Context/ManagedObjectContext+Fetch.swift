import Foundation

extension ManagedObjectContext {
    /// The objects matching a request, registered in this context.
    ///
    /// Pending changes are honoured as Core Data does: matching unsaved inserts are
    /// returned, pending deletes are not, changed objects are matched on their in-memory
    /// values, and objects already in the context are returned as they are in memory.
    /// The request's ``FetchRequest/resultType`` is ignored (objects are returned).
    ///
    /// - Throws: ``ObjectGraphError/Code/noPersistentStore`` when no store holds the
    ///   entity, ``ObjectGraphError/Code/unknownEntity``, ``ObjectGraphError/Code/unknownKey``
    ///   for a key path the entity does not have, or a store's error.
    public func fetch(_ request: FetchRequest) throws -> [ManagedObject] {
        var request = request
        request.resultType = .managedObject
        let (resolved, stores) = try prepare(request)
        let results = try withRegistrationBatch { () throws -> [ManagedObject] in
            if usesInMemoryEvaluation(resolved, stores: stores) {
                return try evaluateInMemory(resolved)
            }
            return try objects(from: try coordinatorExecute(resolved))
        }
        attachBatches(results, size: resolved.fetchBatchSize)
        try finish(results, for: resolved)
        return results
    }

    /// With a batch size, the faults after the first batch keep no row: each belongs to its
    /// batch of `size` results, and the first of them to fire loads the rows of its whole
    /// batch (``FaultBatch``). Objects already loaded, inserted or changed are left as they are.
    private func attachBatches(_ objects: [ManagedObject], size: Int) {
        guard size > 0, objects.count > size else { return }
        let batch = FaultBatch(ids: objects.map { $0.objectID }, size: size)
        for index in size..<objects.count {
            let object = objects[index]
            guard object.isFault, !object.hasPendingValues else { continue }
            object.faultRow = nil
            object.faultBatch = batch
        }
    }

    /// Gives the faults of `batch` around position `index` the rows they will need, read
    /// together (the object at `index` reads its own row as any fault does). A row that
    /// cannot be read is left to its object, which reports the error when it fires.
    func loadBatch(_ batch: FaultBatch, around index: Int) {
        guard !isChild, let coordinator else { return }
        let generation = coordinator.saveGeneration.load(ordering: .acquiring)
        var faults: [ManagedObject] = []
        for position in batch.range(around: index) where position != index {
            guard let object = registry[batch.ids[position]]?.object, object.faultBatch === batch,
                object.isFault, object.faultRow == nil
            else { continue }
            object.faultBatch = nil
            faults.append(object)
        }
        // Read by their store in one go where it can, else one by one.
        if faults.isEmpty || giveRows(to: faults) { return }
        for object in faults {
            guard let node = try? coordinator.newValues(forObjectWith: object.objectID, in: self) else { continue }
            object.faultRow = ObjectSnapshot(node: node, entity: object.entity, generation: generation, loadedAt: readTime)
        }
    }

    /// Fetches objects of a subclass, typed.
    ///
    /// - Throws: ``ObjectGraphError/Code/wrongValueType`` if a result is not a `T`.
    public func fetch<T: ManagedObject>(_ request: FetchRequest, as type: T.Type) throws -> [T] {
        try fetch(request).map { object in
            guard let typed = object as? T else {
                throw ObjectGraphError(.wrongValueType, "Fetched \(object.entity.name) is a \(Swift.type(of: object)), not \(T.self).", entityName: object.entity.name)
            }
            return typed
        }
    }

    /// The IDs of the objects matching a request, honouring pending changes like ``fetch(_:)-(FetchRequest)``.
    public func fetchObjectIDs(_ request: FetchRequest) throws -> [ManagedObjectID] {
        var request = request
        request.resultType = .managedObjectID
        let (resolved, stores) = try prepare(request)
        if usesInMemoryEvaluation(resolved, stores: stores) {
            if resolved.sortDescriptors.isEmpty {
                // Nothing to compare, so no objects need to be made for the stored rows.
                let (storeIDs, changed) = try pendingAwareMatches(resolved)
                return resolved.page(storeIDs + changed.map { $0.objectID })
            }
            return try withRegistrationBatch { try evaluateInMemory(resolved).map { $0.objectID } }
        }
        switch try coordinatorExecute(resolved) {
        case .objectIDs(let ids): return ids
        case .objects(let objects): return objects.map { $0.objectID }
        default: throw unexpectedResult(resolved)
        }
    }

    /// Dictionaries of property values for the matching objects, as stored (pending
    /// changes are not applied to dictionary results).
    public func fetchDictionaries(_ request: FetchRequest) throws -> [[String: FetchValue]] {
        var request = request
        request.resultType = .dictionary
        let (resolved, _) = try prepare(request)
        guard case .dictionaries(let rows) = try coordinatorExecute(resolved) else { throw unexpectedResult(resolved) }
        return rows
    }

    /// The number of objects ``fetch(_:)-(FetchRequest)`` would return, without registering them.
    public func count(for request: FetchRequest) throws -> Int {
        var request = request
        request.resultType = .count
        let (resolved, stores) = try prepare(request)
        if usesInMemoryEvaluation(resolved, stores: stores) {
            return try countInMemory(resolved)
        }
        switch try coordinatorExecute(resolved) {
        case .count(let count): return count
        case .objectIDs(let ids): return ids.count
        default: throw unexpectedResult(resolved)
        }
    }

    /// Executes a fetch for whatever its ``FetchRequest/resultType`` asks.
    public func execute(_ request: FetchRequest) throws -> PersistentStoreResult {
        switch request.resultType {
        case .managedObject: return .objects(try fetch(request))
        case .managedObjectID: return .objectIDs(try fetchObjectIDs(request))
        case .dictionary: return .dictionaries(try fetchDictionaries(request))
        case .count: return .count(try count(for: request))
        }
    }

    // MARK: Steps

    /// Resolves the entity, checks key paths, finds the stores, and ends the event.
    /// The checks of a predicate against the model: its depth, every key path from `entity`,
    /// every comparison's operands.
    private static func check(_ predicate: FetchPredicate, from entity: EntityDescription) throws {
        try predicate.checkDepth()
        try predicate.forEachKeyPath { try checkKeyPath($0, from: entity) }
        try predicate.checkComparisons(against: entity)
    }

    private func prepare(_ request: FetchRequest) throws -> (FetchRequest, [IncrementalStore]) {
        checkQueue("fetch")
        let coordinator = try requireCoordinator()
        var request = request
        let entity = try request.entity ?? coordinator.managedObjectModel.entity(named: request.entityName)
        request.entity = entity
        request.entityName = entity.name
        // Every key path the request names is checked against the model (each as often as it
        // appears: no set is built per fetch).
        if let predicate = request.predicate {
            if case .comparison(.keyPath(let key), _, .constant, _, _) = predicate, key != "self", key != "SELF",
                !key.utf8.contains(where: { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "@") })
            {
                // One key against a constant, the everyday shape: resolving the key for the
                // comparison's check is the key's check too.
                try predicate.checkComparisons(against: entity)
            } else if EntityPredicate.isCheapKey(predicate) {
                // Once per shape: the checks depend on the predicate and the entity alone, and the
                // model keeps the shapes that passed (a lookup costs less than resolving key paths
                // through relationships; for the shape above, or a predicate holding objects, it
                // would cost more than the checks).
                let shape = EntityPredicate(entity, predicate)
                let model = coordinator.managedObjectModel
                if model.checkedPredicates.withLock({ $0[shape] }) == nil {
                    try Self.check(predicate, from: entity)
                    model.checkedPredicates.withLock { $0.insert((), for: shape) }
                }
            } else {
                try Self.check(predicate, from: entity)
            }
        }
        try request.havingPredicate?.checkDepth()
        // A dictionary fetch may sort by the name of a fetched expression.
        let resultNames = request.resultType == .dictionary ? Set((request.propertiesToFetch ?? []).map(\.name)) : []
        for descriptor in request.sortDescriptors where !resultNames.contains(descriptor.keyPath) {
            try Self.checkKeyPath(FetchExpression.strippingOperators(descriptor.keyPath), from: entity)
        }
        for keyPath in request.relationshipKeyPathsForPrefetching { try Self.checkKeyPath(keyPath, from: entity) }
        if request.propertiesToGroupBy != nil || request.havingPredicate != nil {
            // Core Data: grouping needs dictionary results, and HAVING needs a GROUP BY.
            guard request.resultType == .dictionary || request.resultType == .count else {
                throw ObjectGraphError(
                    .invalidFetchRequest, "propertiesToGroupBy and havingPredicate need the dictionary result type; use fetchDictionaries(_:).",
                    entityName: entity.name)
            }
            guard request.propertiesToGroupBy != nil else {
                throw ObjectGraphError(
                    .invalidFetchRequest, "havingPredicate filters groups: set propertiesToGroupBy too.", entityName: entity.name)
            }
        }
        if request.resultType == .dictionary {
            for property in (request.propertiesToFetch ?? []) + (request.propertiesToGroupBy ?? []) {
                for keyPath in property.keyPaths { try Self.checkKeyPath(keyPath, from: entity) }
                if case .keyPath(let keyPath) = property { try Self.checkNoToMany(keyPath, from: entity) }
            }
        }
        let stores = try coordinator.incrementalStores(for: request)
        endEvent()
        return (request, stores)
    }

    /// A property a dictionary fetches or groups by as a plain key path has one value per row:
    /// Core Data rejects a to-many relationship on the way ("Invalid to many relationship in
    /// setPropertiesToFetch"); fetch an aggregate or `@count` of it instead.
    static func checkNoToMany(_ keyPath: String, from entity: EntityDescription) throws {
        var current = entity
        // (The key path was checked already: each name is a property.)
        for key in keyPath.keyPathComponents {
            guard let property = try? current.property(named: key), property.slotKind != .attribute,
                let relationship = property as? RelationshipDescription
            else { return }
            if relationship.isToMany {
                throw ObjectGraphError(
                    .invalidFetchRequest,
                    "\(keyPath) goes through the to-many relationship \(current.name).\(relationship.name), which has no single value per row; fetch an aggregate of it or its @count instead.",
                    entityName: entity.name, key: keyPath)
            }
            guard let destination = relationship.destinationEntity else { return }
            current = destination
        }
    }

    static func checkKeyPath(_ keyPath: String, from entity: EntityDescription) throws {
        if !keyPath.containsByte(UInt8(ascii: ".")) {
            // One key, the common case: no splitting.
            if keyPath != "self" && keyPath != "SELF" { _ = try entity.property(named: keyPath) }
            return
        }
        var current = entity
        var components = keyPath.keyPathComponents[...]
        while let key = components.popFirst() {
            if key == "self" || key == "SELF" { continue }
            let property = try current.property(named: key)
            guard let relationship = property as? RelationshipDescription else {
                if !components.isEmpty {
                    throw ObjectGraphError(
                        .unknownKey, "Key path \"\(keyPath)\" continues past attribute \(current.name).\(key).",
                        entityName: entity.name, key: keyPath)
                }
                return
            }
            guard let destination = relationship.destinationEntity else { return }
            current = destination
        }
    }

    /// Whether the context must evaluate the request itself: its pending changes touch
    /// the entity, or several stores must be merged.
    private func usesInMemoryEvaluation(_ request: FetchRequest, stores: [IncrementalStore]) -> Bool {
        if stores.count > 1 { return true }
        guard request.includesPendingChanges, !(insertedInOrder.isEmpty && updatedSet.isEmpty && deletedSet.isEmpty) else { return false }
        let names = request.matchingEntityNames()
        return insertedInOrder.contains { names.contains($0.entity.name) }
            || updatedSet.contains { names.contains($0.entity.name) }
            || deletedSet.contains { names.contains($0.entity.name) }
    }

    /// The seed-003 rules: stored matches minus pending deletes and changed objects, plus
    /// inserted and changed objects matching in memory; then sorted and paged in memory.
    private func evaluateInMemory(_ request: FetchRequest) throws -> [ManagedObject] {
        let (storeIDs, changed) = try pendingAwareMatches(request)
        var results = storeIDs.map { object(with: $0) } + changed
        results = try FetchSortDescriptor.sort(results, by: request.sortDescriptors)
        return request.page(results)
    }

    /// The count of ``evaluateInMemory(_:)``'s results, without making objects for rows.
    private func countInMemory(_ request: FetchRequest) throws -> Int {
        let (storeIDs, changed) = try pendingAwareMatches(request)
        var count = max(0, storeIDs.count + changed.count - request.fetchOffset)
        if request.fetchLimit > 0 { count = min(count, request.fetchLimit) }
        return count
    }

    /// The IDs the stores match, less those of objects with pending changes, and the
    /// inserted or changed objects that match in memory.
    /// The stores are asked for every match, unsorted: sorting and paging happen here.
    private func pendingAwareMatches(_ request: FetchRequest) throws -> ([ManagedObjectID], [ManagedObject]) {
        var storeRequest = request
        storeRequest.resultType = .managedObjectID
        storeRequest.fetchLimit = 0
        storeRequest.fetchOffset = 0
        storeRequest.sortDescriptors = []
        let storeIDs: [ManagedObjectID]
        switch try coordinatorExecute(storeRequest) {
        case .objectIDs(let ids): storeIDs = ids
        case .objects(let objects): storeIDs = objects.map(\.objectID)
        default: throw unexpectedResult(request)
        }
        var seen: Set<ManagedObjectID> = []
        var unchanged: [ManagedObjectID] = []
        for id in storeIDs {
            // Changed objects are matched again below, on their in-memory values.
            if request.includesPendingChanges, registry[id]?.object.hasChanges ?? false { continue }
            if seen.insert(id).inserted { unchanged.append(id) }
        }
        var changed: [ManagedObject] = []
        if request.includesPendingChanges {
            let names = request.matchingEntityNames()
            for object in insertedInOrder + Array(updatedSet) where !object.deleted && names.contains(object.entity.name) {
                guard seen.insert(object.objectID).inserted else { continue }
                if try request.predicate?.evaluate(with: object) ?? true { changed.append(object) }
            }
        }
        return (unchanged, changed)
    }

    /// Runs a fetch against the stores, or, for a child context, against its parent (which
    /// counts its own unsaved changes).
    private func coordinatorExecute(_ request: FetchRequest) throws -> PersistentStoreResult {
        if isChild, let parent = parentContext { return try parent.performAndWait { try parent.executeForChild(request) } }
        return try requireCoordinator().execute(request, with: self)
    }

    private func objects(from result: PersistentStoreResult) throws -> [ManagedObject] {
        switch result {
        // The objects a store made with `objects(for:in:returnsObjectsAsFaults:)` are
        // registered here already: their own slot says so without a lookup.
        case .objects(let objects): return objects.map { registry.holds($0) ? $0 : registry[$0.objectID]?.object ?? $0 }
        case .objectIDs(let ids):
            reserveRegistrations(ids.count)
            return ids.map { object(with: $0) }
        default: throw ObjectGraphError(.invalidFetchRequest, "A store returned \(result) for an object fetch.")
        }
    }

    private func unexpectedResult(_ request: FetchRequest) -> ObjectGraphError {
        ObjectGraphError(.invalidFetchRequest, "A store returned an unexpected result type for a \(request.resultType) fetch.", entityName: request.entityName)
    }

    /// Applies the result-shaping hints: fulfil faults, prefetch, refresh refetched objects.
    private func finish(_ objects: [ManagedObject], for request: FetchRequest) throws {
        if request.shouldRefreshRefetchedObjects {
            for object in objects where !object.isFault && !object.inserted { refresh(object, mergeChanges: true) }
        }
        // With a batch size, only the first batch is loaded and prefetched now; later
        // batches load as they are reached.
        let loaded = request.fetchBatchSize > 0 ? Array(objects.prefix(request.fetchBatchSize)) : objects
        if !request.returnsObjectsAsFaults {
            if isChild { loadFromParent(loaded) }
            for object in loaded { try object.fulfillFault() }
        }
        guard !request.relationshipKeyPathsForPrefetching.isEmpty else { return }
        // The destinations' registrations go to their stores in one call.
        try withRegistrationBatch {
            for keyPath in request.relationshipKeyPathsForPrefetching {
                var level = loaded
                for key in keyPath.keyPathComponents {
                    level = try prefetch(key, of: level)
                }
            }
        }
    }

    /// Prefetches one relationship of `objects`: each destination once, the faults among them
    /// loaded by one fetch per destination entity (`SELF IN` their IDs), as Core Data
    /// prefetches; each object then holds its destinations (as a loaded relationship does in
    /// Core Data), so reading them makes no object again. Returns the destinations.
    private func prefetch(_ key: String, of objects: [ManagedObject]) throws -> [ManagedObject] {
        var next: [ManagedObject] = []
        var seen = Set<ObjectIdentifier>(minimumCapacity: objects.count)
        var faults: [(destination: EntityDescription, objects: [ManagedObject])] = []
        // The relationship of the last entity met, looked up once per entity (a fetch's objects
        // are of one entity, or of a few in turn), not by name per object.
        var lastEntity: ObjectIdentifier? = nil
        var lastRelationship: (relationship: RelationshipDescription, destination: EntityDescription)? = nil
        for source in objects {
            if ObjectIdentifier(source.entity) != lastEntity {
                lastEntity = ObjectIdentifier(source.entity)
                lastRelationship = source.entity.relationshipsByName[key].flatMap { relationship in
                    relationship.destinationEntity.map { (relationship, $0) }
                }
            }
            guard let (relationship, destination) = lastRelationship else { continue }
            /// The object of `id`, noted as next to load (once) and as a fault to read.
            func hold(_ id: ManagedObjectID) -> ManagedObject {
                let object = self.object(with: id)
                guard seen.insert(ObjectIdentifier(object)).inserted else { return object }
                next.append(object)
                guard object.isFault, object.faultRow == nil else { return object }
                if let index = faults.firstIndex(where: { $0.destination === destination }) {
                    faults[index].objects.append(object)
                } else {
                    faults.append((destination, [object]))
                }
                return object
            }
            // The held objects made in one array of their final size (not appended to a
            // variable the nested function captures, which grew it object by object).
            let held: [ManagedObject]
            switch try source.currentValue(for: relationship).relationshipValue {
            case .toOne(let id?)?:
                held = [hold(id)]
            case .toMany(let ids)?:
                held = ids.map(hold)
            default:
                held = []
            }
            if source.prefetchedDestinations.isEmpty {
                source.prefetchedDestinations = held
            } else {
                // Prefetched again (another key path through the same relationship): each once.
                let present = Set(source.prefetchedDestinations.map(ObjectIdentifier.init))
                source.prefetchedDestinations += held.filter { !present.contains(ObjectIdentifier($0)) }
            }
        }
        if isChild {
            loadFromParent(next)
        } else {
            for (destination, faulted) in faults where faulted.count > 1 {
                // The rows read by their store in one go, else fetched.
                if !giveRows(to: faulted) { try prefetchRows(of: faulted.map(\.objectID), entity: destination) }
            }
        }
        for object in next { try object.fulfillFault() }
        // The rows stay with the context too: an object refreshed, or released with its
        // sources, comes back as a fault holding its row.
        if prefetchedRows.count + next.count > Self.prefetchedRowLimit { prefetchedRows.removeAll() }
        prefetchedRows.reserveCapacity(prefetchedRows.count + next.count)
        for object in next {
            if let row = object.snapshot?.asFaultRow(of: object.entity) { prefetchedRows[object.objectID] = row }
        }
        return next
    }

    /// Gives the faults among `objects` their values from the parent, in one block of the
    /// parent (a child's faults otherwise fire one parent block each). An object the parent
    /// cannot give is left to fire, and report its error, on its own.
    private func loadFromParent(_ objects: [ManagedObject]) {
        guard let parent = parentContext else { return }
        let faults = objects.filter { $0.isFault && $0.faultRow == nil }
        guard !faults.isEmpty else { return }
        let ids = faults.map(\.objectID)
        let nodes = parent.performAndWait { ids.map { try? parent.nodeForChild($0) } }
        let generation = coordinator?.saveGeneration.load(ordering: .acquiring) ?? 0
        for (object, node) in zip(faults, nodes) {
            guard let node else { continue }
            object.faultRow = ObjectSnapshot(node: node, entity: object.entity, generation: generation, loadedAt: readTime)
        }
    }

    /// Gives the faults among `objects` the rows their store reads for them in one go
    /// (``MemberRowsSource/rows(of:)``), each kept as a fetch's row is (with the save generation
    /// before the read and the read time); `false` when the store does not read them so, or
    /// cannot read now (the caller then fetches them, and any error is reported when a fault
    /// fires).
    private func giveRows(to objects: [ManagedObject]) -> Bool {
        guard let coordinator else { return false }
        let generation = coordinator.saveGeneration.load(ordering: .acquiring)
        guard let rows = (try? coordinator.rows(of: objects.map(\.objectID))) ?? nil, rows.count == objects.count else { return false }
        let loadedAt = readTime
        for (object, node) in zip(objects, rows) {
            guard let node, object.isFault, object.faultRow == nil else { continue }
            object.faultRow = ObjectSnapshot(node: node, entity: object.entity, generation: generation, loadedAt: loadedAt)
        }
        return true
    }

    /// Loads the rows of the faults `ids` (objects of `entity` or its subentities) in one fetch:
    /// the stores hand the rows to the registered faults. A row that cannot be read is left to
    /// its fault, which reports the error when it fires.
    private func prefetchRows(of ids: [ManagedObjectID], entity: EntityDescription) throws {
        var fetch = FetchRequest(entityName: entity.name)
        fetch.entity = entity
        fetch.predicate = .comparison(.evaluatedObject, .in, .constant(.collection(ids.map(FetchValue.object))), modifier: .direct, options: [])
        fetch.returnsObjectsAsFaults = false
        _ = try? coordinatorExecute(fetch)
    }
}

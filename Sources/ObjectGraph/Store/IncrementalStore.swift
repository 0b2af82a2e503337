import Foundation

/// A store that loads data on demand (Core Data's `NSIncrementalStore`): subclass it to
/// put the object graph on any storage.
///
/// The coordinator calls, in order: ``PersistentStore/loadMetadata()`` once; then
/// ``execute(_:with:)`` for fetches and saves, preceded before a save with inserts by
/// ``obtainPermanentIDs(for:)``; ``newValuesForObject(with:with:)`` and
/// ``newValue(forRelationship:forObjectWith:with:)`` when faults fire; and
/// ``managedObjectContextDidRegisterObjects(with:)`` /
/// ``managedObjectContextDidUnregisterObjects(with:)`` as contexts start and stop
/// using objects, balanced over each context's life.
///
/// A minimal store:
///
/// ```swift
/// final class ArrayStore: IncrementalStore, @unchecked Sendable {
///     override func execute(_ request: any PersistentStoreRequest,
///                           with context: ManagedObjectContext?) throws -> PersistentStoreResult {
///         guard let fetch = request as? FetchRequest else {
///             throw ObjectGraphError(.unsupportedRequest, "Only fetches.")
///         }
///         return .objectIDs(…)
///     }
///     override func newValuesForObject(with objectID: ManagedObjectID,
///                                      with context: ManagedObjectContext) throws -> IncrementalStoreNode { … }
/// }
/// ```
///
/// Thread safety: `@unchecked Sendable` because an open class cannot be checked;
/// subclasses must protect their own state.
open class IncrementalStore: PersistentStore, @unchecked Sendable {
    /// The parts of dictionary fetches this store computes itself; the coordinator
    /// emulates the rest in memory (see ``FetchCapabilities``). The default is none: a
    /// store only has to return plain rows of key-path values.
    open var fetchCapabilities: FetchCapabilities { [] }

    /// Executes a fetch or save request.
    ///
    /// - A fetch returns objects (from `context.object(with:)`) or IDs, dictionaries, or a
    ///   count, as its ``FetchRequest/resultType`` says.
    /// - A save records the request's changes and returns ``PersistentStoreResult/saved``;
    ///   a request whose sets are all `nil` asks to save metadata.
    /// - Any other request throws ``ObjectGraphError/Code/unsupportedRequest``.
    open func execute(_ request: any PersistentStoreRequest, with context: ManagedObjectContext?) throws -> PersistentStoreResult {
        throw ObjectGraphError(.unsupportedRequest, "\(type) does not handle \(request.requestType) requests.")
    }

    /// The stored values of an object: every attribute, and optionally to-one relationships.
    ///
    /// - Throws: ``ObjectGraphError/Code/objectNotFound`` if the store has no such object.
    open func newValuesForObject(with objectID: ManagedObjectID, with context: ManagedObjectContext) throws -> IncrementalStoreNode {
        throw ObjectGraphError(.unsupportedRequest, "\(type) does not implement newValuesForObject(with:with:).", objectID: objectID)
    }

    /// The destinations of one relationship of an object: an ID or `nil` for a to-one,
    /// the IDs for a to-many.
    open func newValue(
        forRelationship relationship: RelationshipDescription, forObjectWith objectID: ManagedObjectID,
        with context: ManagedObjectContext?
    ) throws -> RelationshipValue {
        throw ObjectGraphError(
            .unsupportedRequest, "\(type) does not implement newValue(forRelationship:forObjectWith:with:).",
            key: relationship.name, objectID: objectID)
    }

    /// Permanent IDs for newly inserted objects, in the same order as `objects`.
    ///
    /// Called before ``execute(_:with:)`` with a save request that inserts objects; the
    /// IDs never change afterwards.
    open func obtainPermanentIDs(for objects: [ManagedObject]) throws -> [ManagedObjectID] {
        throw ObjectGraphError(.unsupportedRequest, "\(type) does not implement obtainPermanentIDs(for:).")
    }

    /// An object ID of this store for an entity and a reference. Do not override.
    public final func newObjectID(for entity: EntityDescription, referenceObject: ReferenceObject) -> ManagedObjectID {
        ManagedObjectID(entity: entity, store: idToken, kind: .permanent(referenceObject))
    }

    /// The reference an ID of this store was made with. Do not override.
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidArgument`` if the ID is temporary or from another store.
    public final func referenceObject(for objectID: ManagedObjectID) throws -> ReferenceObject {
        // The ID's own store (a weak load, no lock) in the common case; else by identifier.
        guard let reference = objectID.referenceObject,
            objectID.home.store?.store === self || objectID.storeIdentifier == identifier
        else {
            throw ObjectGraphError(
                .invalidArgument, "\(objectID) was not created by store \(identifier).", objectID: objectID)
        }
        return reference
    }

    /// The objects of a fetch's results, with the values the fetch already read handed over,
    /// so that no object is read from the store a second time.
    ///
    /// Call it from ``execute(_:with:)`` for a ``FetchRequestResultType/managedObject``
    /// fetch, with one node per result in order (instead of `context.object(with:)` for
    /// each). With `returnsObjectsAsFaults` false, objects that are faults get the node's
    /// values at once; otherwise they stay faults, as Core Data returns them, each keeping
    /// its node, so firing the fault reads no row (unless a save through the coordinator
    /// came first, or the node is older than the context's ``ManagedObjectContext/stalenessInterval``:
    /// then the fault reads the store). Objects already loaded in `context` keep their values.
    ///
    /// For example:
    ///
    /// ```swift
    /// let nodes = matches.map { IncrementalStoreNode(objectID: $0.id, valuesByOrdinal: $0.values, version: $0.version) }
    /// return .objects(objects(for: nodes, in: context, returnsObjectsAsFaults: request.returnsObjectsAsFaults))
    /// ```
    public final func objects(
        for nodes: consuming [IncrementalStoreNode], in context: ManagedObjectContext, returnsObjectsAsFaults: Bool
    ) -> [ManagedObject] {
        context.reserveRegistrations(nodes.count)
        // Each fault keeps the row it was fetched with (its cached row), used when it fires
        // unless a save through the coordinator came since the fetch began or the context's
        // staleness interval says the row is too old.
        let generation = context.fetchGeneration ?? persistentStoreCoordinator?.saveGeneration.load(ordering: .acquiring) ?? 0
        let loadedAt = context.stalenessInterval < 0 ? Double.nan : Date.timeIntervalSinceReferenceDate
        /// The object of one node, which it consumes (its row moves into the object's
        /// snapshot: no copy retained and the node's released).
        func object(of node: consuming IncrementalStoreNode) -> ManagedObject {
            let id = node.objectID
            let probe = context.registry.probe(id)
            guard let slot = probe.found, let registered = context.registry.registration(at: slot)?.object else {
                // A new fault, made with its row, in the slot the lookup found for it.
                let row = ObjectSnapshot(node: node, entity: id.entity, generation: generation, loadedAt: loadedAt)
                return context.makeFault(for: id, row: row, loaded: !returnsObjectsAsFaults, probe: probe)
            }
            // A registered object keeps its values; a fault among them gets the row.
            if registered.isFault {
                let row = ObjectSnapshot(node: node, entity: registered.entity, generation: generation, loadedAt: loadedAt)
                if returnsObjectsAsFaults { registered.faultRow = row } else { registered.fulfill(with: row) }
            }
            return registered
        }
        return context.withRegistrationBatch {
            // The nodes taken from the end (each moved out of the array, not copied), the
            // objects put back in the nodes' order (an ID given twice gets one object).
            var objects: [ManagedObject] = []
            objects.reserveCapacity(nodes.count)
            while let node = nodes.popLast() { objects.append(object(of: node)) }
            objects.reverse()
            return objects
        }
    }

    /// A context started using these objects: add one to each ID's register count.
    /// The default does nothing.
    open func managedObjectContextDidRegisterObjects(with objectIDs: [ManagedObjectID]) {}

    /// A context stopped using these objects: subtract one from each ID's register count.
    /// The default does nothing.
    open func managedObjectContextDidUnregisterObjects(with objectIDs: [ManagedObjectID]) {}
}

extension IncrementalStore {
    /// A fetch answered by a store that evaluates it in memory (InMemoryStore, AtomicStore):
    /// the request gets its entity, `evaluate` applies it to the store's candidates of the
    /// matching entity names, and IDs become the context's objects for an object result.
    func answerInMemory(
        _ request: FetchRequest, with context: ManagedObjectContext?,
        evaluate: (_ request: FetchRequest, _ entityNames: Set<String>, _ model: ManagedObjectModel) throws -> PersistentStoreResult
    ) throws -> PersistentStoreResult {
        guard let model = persistentStoreCoordinator?.managedObjectModel else {
            throw ObjectGraphError(.noPersistentStore, "The store is not part of a coordinator.")
        }
        var request = request
        if request.entity == nil { request.entity = try model.entity(named: request.entityName) }
        let result = try evaluate(request, request.matchingEntityNames(), model)
        if request.resultType == .managedObject, let context, case .objectIDs(let ids) = result {
            return .objects(ids.map { context.object(with: $0) })
        }
        return result
    }
}

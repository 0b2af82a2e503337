import Foundation

/// A store that holds all its objects in memory, as cache nodes, and reads and writes its
/// file whole (Core Data's `NSAtomicStore`): the way to give a custom file format (a
/// document, a JSON or CSV export, a configuration file) to a coordinator.
///
/// A subclass overrides ``load()``, which reads the file at ``PersistentStore/url`` and
/// registers one ``AtomicStoreCacheNode`` per object with ``addCacheNodes(_:)`` (IDs from
/// ``objectID(for:withReferenceObject:)``), and ``save()``, which writes every node of
/// ``cacheNodes()`` and the ``PersistentStore/metadata`` back. The coordinator does the rest:
/// fetches are answered from the nodes in memory, with every predicate, sort and result type
/// the fetch language has; faults read the nodes; and a context's save calls, in order:
///
/// 1. ``newReferenceObject(for:)`` once per inserted object (while it still has its
///    temporary ID), for its permanent ID;
/// 2. ``newCacheNode(for:)`` once per inserted object (the node is registered for you);
/// 3. ``updateCacheNode(_:from:)`` once per updated object;
/// 4. ``willRemoveCacheNodes(_:)`` with the nodes of the deleted objects, which are then
///    dropped;
/// 5. ``save()``.
///
/// If ``save()`` throws, the nodes are put back as they were before the save, and the context
/// keeps its changes. Saves are checked for conflicts (optimistic locking, uniqueness
/// constraints) as on the incremental stores, and the merge policies work the same.
///
/// The default implementations of ``newReferenceObject(for:)`` (integers counting up from the
/// largest integer reference loaded), ``newCacheNode(for:)`` and ``updateCacheNode(_:from:)``
/// (every stored property copied into the node) suit a store that writes its nodes' values and
/// references as they are; ``load()`` and ``save()`` have none.
///
/// A store is created with a URL (an atomic store has a file); a missing file is created empty
/// (a *reservation file*), which ``load()`` must accept as a new, empty store, and which is
/// deleted again if the store is removed from its coordinator before its first save.
///
/// Thread safety: every node of the store and every call above runs under the store's
/// recursive lock, so a subclass reads and changes its nodes from those methods without locks
/// of its own (``cacheNode(for:)`` and ``addCacheNodes(_:)`` may be called from them).
open class AtomicStore: IncrementalStore, @unchecked Sendable {
    // @unchecked: an IncrementalStore subclass cannot be checked; the mutable state below and
    // every node is protected by `lock` (recursive: a subclass calls back into the store from
    // the methods the store calls).
    private let lock = NSRecursiveLock()
    // Protected by `lock`: the registered nodes, the stand-ins for objects inserted by the save
    // in progress, the sequence that orders nodes, the next default reference, and whether the
    // store created its file and has saved since.
    private var nodesByID: [ManagedObjectID: AtomicStoreCacheNode] = [:]
    private var standIns: [ManagedObjectID: AtomicStoreCacheNode] = [:]
    private var nextSequence: UInt64 = 0
    private var nextDefaultReference: Int64?
    private var createdReservationFile = false
    private var hasSaved = false

    /// Creates an atomic store for the file at `url`, creating an empty (reservation) file
    /// there if none exists. The coordinator calls it; call `super` when you override it, and
    /// read the file's metadata there or in ``load()`` (set ``PersistentStore/metadata``).
    public required init(
        persistentStoreCoordinator: PersistentStoreCoordinator?, configurationName: String?,
        at url: URL?, options: [String: AttributeValue] = [:]
    ) {
        super.init(persistentStoreCoordinator: persistentStoreCoordinator, configurationName: configurationName, at: url, options: options)
        if let url, url.isFileURL, !FileManager.default.fileExists(atPath: url.path) {
            createdReservationFile = FileManager.default.createFile(atPath: url.path, contents: Data())
        }
    }

    // MARK: What a subclass overrides

    /// Reads the file at ``PersistentStore/url`` and registers a node per object with
    /// ``addCacheNodes(_:)``, respecting ``PersistentStore/configurationName`` and
    /// ``PersistentStore/options``; a zero-length file is a new, empty store. Set
    /// ``PersistentStore/metadata`` from the file here (or in the initializer).
    ///
    /// The coordinator calls it once, when the store is added. Override it: the default
    /// throws ``ObjectGraphError/Code/unsupportedRequest``.
    open func load() throws {
        throw ObjectGraphError(.unsupportedRequest, "\(type) does not override load(); an atomic store must.")
    }

    /// Writes every node of ``cacheNodes()`` and the ``PersistentStore/metadata`` to the file
    /// at ``PersistentStore/url``. A store that can be interrupted should write a new file and
    /// move it over the old one, so that a crash leaves one or the other whole.
    ///
    /// The coordinator calls it at the end of each context save. Override it: the default
    /// throws ``ObjectGraphError/Code/unsupportedRequest``.
    open func save() throws {
        throw ObjectGraphError(.unsupportedRequest, "\(type) does not override save(); an atomic store must.")
    }

    /// The reference object of a newly inserted object's permanent ID, called once per object,
    /// while the object still has its temporary ID. It must be unique in the entity's
    /// inheritance hierarchy in this store, and stable: written with the data, or derived from
    /// the object's values.
    ///
    /// The default counts up from the largest integer reference among the loaded nodes.
    open func newReferenceObject(for managedObject: ManagedObject) throws -> ReferenceObject {
        lock.lock()
        defer { lock.unlock() }
        let next = nextDefaultReference ?? nodesByID.keys.reduce(Int64(0)) { largest, id in
            if case .int64(let reference)? = id.referenceObject { return max(largest, reference) }
            return largest
        } + 1
        nextDefaultReference = next + 1
        return .int64(next)
    }

    /// A node for a newly inserted object, with its values; called once per inserted object
    /// during a save (the store registers the node). Its ``AtomicStoreCacheNode/objectID``
    /// must be the object's.
    ///
    /// During the save, ``cacheNode(for:)`` returns a node for every object the save inserts,
    /// so a relationship to one inserted later can be set; the store points such references
    /// at the node registered for it at the end.
    ///
    /// The default fills the node ``cacheNode(for:)`` gives for the object with every stored
    /// property (attributes as they are, relationships as nodes; a destination that has no
    /// node, deleted while a `noAction` rule kept this reference, as a node of its own that is
    /// not registered).
    open func newCacheNode(for managedObject: ManagedObject) throws -> AtomicStoreCacheNode {
        let node = cacheNode(for: managedObject.objectID) ?? AtomicStoreCacheNode(objectID: managedObject.objectID)
        try copyValues(of: managedObject, into: node)
        return node
    }

    /// Updates a node from an updated object; called once per updated object during a save.
    ///
    /// The default copies every stored property into the node.
    open func updateCacheNode(_ node: AtomicStoreCacheNode, from managedObject: ManagedObject) throws {
        try copyValues(of: managedObject, into: node)
    }

    /// Called during a save, before ``save()``, with the nodes of the objects the save
    /// deletes; the store drops them afterwards. Do not call it yourself.
    open func willRemoveCacheNodes(_ cacheNodes: Set<AtomicStoreCacheNode>) {}

    // MARK: Utilities

    /// Registers nodes with the store (from ``load()``, usually): fetches and faults see
    /// them. A node replaces one registered before for the same object ID.
    public final func addCacheNodes(_ cacheNodes: Set<AtomicStoreCacheNode>) {
        addCacheNodes(inOrder: Self.inIDOrder(Array(cacheNodes)) { $0.objectID })
    }

    /// `items` in an order of their object IDs that is the same in every run: by entity name,
    /// then reference (integers first, in order; then the others by their text), each key
    /// taken once per item rather than per comparison.
    package static func inIDOrder<Item>(_ items: [Item], _ id: (Item) -> ManagedObjectID) -> [Item] {
        var keyed: [(entity: String, integer: Int64, text: String, item: Item)] = []
        keyed.reserveCapacity(items.count)
        for item in items {
            let objectID = id(item)
            switch objectID.referenceObject {
            case .int64(let reference)?: keyed.append((objectID.entity.name, reference, "", item))
            case .string(let text)?: keyed.append((objectID.entity.name, .max, text, item))
            case .uuid(let uuid)?: keyed.append((objectID.entity.name, .max, "~" + uuid.uuidString, item))
            case nil: keyed.append((objectID.entity.name, .max, objectID.uriRepresentation().absoluteString, item))
            }
        }
        keyed.sort { ($0.entity, $0.integer, $0.text) < ($1.entity, $1.integer, $1.text) }
        return keyed.map(\.item)
    }

    /// Registers nodes in the order given (a file's order, which fetches then follow).
    package final func addCacheNodes(inOrder cacheNodes: [AtomicStoreCacheNode]) {
        lock.lock()
        defer { lock.unlock() }
        nodesByID.reserveCapacity(nodesByID.count + cacheNodes.count)
        for node in cacheNodes { register(node) }
    }

    /// The nodes registered with the store.
    public final func cacheNodes() -> Set<AtomicStoreCacheNode> {
        lock.lock()
        defer { lock.unlock() }
        return Set(nodesByID.values)
    }

    /// The node registered for an object ID, or, during a save, the node standing in for an
    /// object the save inserts; `nil` for an ID the store has no node for.
    public final func cacheNode(for objectID: ManagedObjectID) -> AtomicStoreCacheNode? {
        lock.lock()
        defer { lock.unlock() }
        return nodesByID[objectID] ?? standIns[objectID]
    }

    /// The object ID of this store for an entity and a reference object (from the file, when
    /// loading). Do not override.
    public final func objectID(for entity: EntityDescription, withReferenceObject data: ReferenceObject) -> ManagedObjectID {
        newObjectID(for: entity, referenceObject: data)
    }

    /// Registers `node`, numbered after the nodes before it. Called with the lock held.
    private func register(_ node: AtomicStoreCacheNode) {
        if node.version == 0 { node.version = 1 }
        nextSequence += 1
        node.sequence = nextSequence
        nodesByID[node.objectID] = node
    }

    /// Copies every stored property of `object` into `node`: attributes as they are, to-one
    /// and to-many relationships as the nodes of their destinations in this store.
    private func copyValues(of object: ManagedObject, into node: AtomicStoreCacheNode) throws {
        for property in object.entity.properties where !property.isTransient {
            switch property {
            case let relationship as RelationshipDescription:
                // A destination without a node (deleted while a noAction rule left this
                // object pointing at it) stays referenced, through a node not registered.
                let nodes = try object.objectIDs(forRelationshipNamed: relationship.name).map {
                    cacheNode(for: $0) ?? AtomicStoreCacheNode(objectID: $0)
                }
                node.setValue(relationship.isToMany ? .toMany(nodes) : .toOne(nodes.first), forKey: relationship.name)
            default:
                node.setValue(.attribute(try object.value(forKey: property.name)), forKey: property.name)
            }
        }
    }

    // MARK: Adding and removing

    /// Loads the store: ``load()``, under the store's lock. An atomic store needs a URL. If
    /// loading fails, a reservation file the initializer created is removed again.
    public final override func loadMetadata() throws {
        guard url != nil else {
            throw ObjectGraphError(.invalidArgument, "An atomic store (\(type)) needs the URL of its file; none was given.")
        }
        lock.lock()
        defer { lock.unlock() }
        do {
            try load()
        } catch {
            removeReservationFile()
            throw error
        }
    }

    /// Removes the reservation file when the store leaves its coordinator before it was ever
    /// saved (the file is still empty). Call `super` when you override it.
    open override func willRemove(from coordinator: PersistentStoreCoordinator) {
        super.willRemove(from: coordinator)
        lock.lock()
        defer { lock.unlock() }
        if !hasSaved { removeReservationFile() }
    }

    /// Deletes the file the initializer created, if it is still empty.
    private func removeReservationFile() {
        guard createdReservationFile, let url else { return }
        createdReservationFile = false
        let size = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.intValue
        if size == 0 { try? FileManager.default.removeItem(at: url) }
    }

    // MARK: The incremental-store contract, answered from the nodes

    /// Everything the fetch language has is answered from the nodes.
    open override var fetchCapabilities: FetchCapabilities { .all }

    /// Answers fetches from the nodes, and saves (see the class's documentation). A save that
    /// carries only metadata writes nothing: the metadata goes out with the next ``save()``.
    public final override func execute(_ request: any PersistentStoreRequest, with context: ManagedObjectContext?) throws -> PersistentStoreResult {
        switch request {
        case let fetch as FetchRequest: return try execute(fetch, with: context)
        case let save as SaveChangesRequest: return try execute(save)
        default:
            throw ObjectGraphError(.unsupportedRequest, "\(type) does not handle \(request.requestType) requests.")
        }
    }

    private func execute(_ request: FetchRequest, with context: ManagedObjectContext?) throws -> PersistentStoreResult {
        try answerInMemory(request, with: context) { request, names, _ in
            try withLock {
                let views = nodesByID.values.filter { names.contains($0.objectID.entity.name) }
                    .sorted { $0.sequence < $1.sequence }
                    .map { NodeView(node: $0, store: self) }
                return try request.apply(to: views, objectID: \.objectID)
            }
        }
    }

    /// The object's attributes (converted to their types) and to-one destinations, with the
    /// node's version.
    ///
    /// - Throws: ``ObjectGraphError/Code/objectNotFound`` without a node;
    ///   ``ObjectGraphError/Code/wrongValueType`` for a value the node holds that does not fit
    ///   the property.
    public final override func newValuesForObject(with objectID: ManagedObjectID, with context: ManagedObjectContext) throws -> IncrementalStoreNode {
        try withLock { try storedNode(existingNode(objectID)) }
    }

    /// The destinations of one relationship, from the node.
    public final override func newValue(
        forRelationship relationship: RelationshipDescription, forObjectWith objectID: ManagedObjectID,
        with context: ManagedObjectContext?
    ) throws -> RelationshipValue {
        try withLock {
            let node = try existingNode(objectID)
            return try Self.propertyValue(of: node, for: relationship).relationshipValue ?? (relationship.isToMany ? .toMany([]) : .toOne(nil))
        }
    }

    /// Permanent IDs from ``newReferenceObject(for:)``, once per object.
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidArgument`` when a reference is already taken
    ///   in the entity's hierarchy (by a node or by another object of the batch).
    public final override func obtainPermanentIDs(for objects: [ManagedObject]) throws -> [ManagedObjectID] {
        try withLock {
            var ids: [ManagedObjectID] = []
            ids.reserveCapacity(objects.count)
            var taken = Set<ManagedObjectID>()
            for object in objects {
                let id = newObjectID(for: object.entity, referenceObject: try newReferenceObject(for: object))
                if nodesByID[id] != nil || !taken.insert(id).inserted {
                    throw ObjectGraphError(
                        .invalidArgument,
                        "\(type).newReferenceObject(for:) returned \(id.referenceObject.map { "\($0)" } ?? "?") for a \(object.entity.name), a reference already taken in \(object.entity.rootEntity.name)'s hierarchy.",
                        entityName: object.entity.name, objectID: id)
                }
                ids.append(id)
            }
            return ids
        }
    }

    /// A save: checks, then the calls of the class's documentation in order, then ``save()``;
    /// if anything throws, the nodes are put back as they were.
    private func execute(_ request: SaveChangesRequest) throws -> PersistentStoreResult {
        if request.isMetadataSave { return .saved }
        guard !isReadOnly else { throw ObjectGraphError(.invalidArgument, "The atomic store \(identifier) is read-only.") }
        func ordered(_ objects: Set<ManagedObject>?) -> [ManagedObject] {
            Self.inIDOrder(Array(objects ?? [])) { $0.objectID }
        }
        let inserted = ordered(request.insertedObjects), updated = ordered(request.updatedObjects)
        let deleted = ordered(request.deletedObjects), locked = ordered(request.lockedObjects)
        let uniqueness = try UniquenessCheck(request)
        return try withLock {
            // Optimistic locking: each updated, deleted and locked object's node must still be
            // the version its context read (a fault read none).
            var conflicts: [(ManagedObject, AtomicStoreCacheNode?)] = []
            for object in updated + deleted + locked {
                let node = nodesByID[object.objectID]
                if node == nil || object.committedVersion.map({ $0 != node?.version }) == true { conflicts.append((object, node)) }
            }
            if !conflicts.isEmpty {
                throw ObjectGraphError.mergeConflicts(try conflicts.map { object, node in
                    MergeConflict(sourceObject: object, storedRow: try node.map { try storedNode($0) })
                })
            }
            if !uniqueness.isEmpty {
                let duplicates = try uniqueness.findings(holders: holders)
                if !duplicates.isEmpty { throw ObjectGraphError.constraintConflicts(uniqueness.conflicts(duplicates)) }
            }
            let registered = nodesByID, sequence = nextSequence
            var previous: [(node: AtomicStoreCacheNode, values: [String: AtomicStoreCacheNode.Value]?, version: UInt64)] = []
            do {
                for object in inserted { standIns[object.objectID] = AtomicStoreCacheNode(objectID: object.objectID) }
                var created: [AtomicStoreCacheNode] = []
                for object in inserted {
                    let node = try newCacheNode(for: object)
                    guard node.objectID == object.objectID else {
                        throw ObjectGraphError(
                            .invalidArgument, "\(type).newCacheNode(for:) returned a node of \(node.objectID) for \(object.objectID).",
                            objectID: object.objectID)
                    }
                    node.version = 0
                    register(node)
                    created.append(node)
                }
                standIns = [:]
                // References to stand-ins become references to the registered nodes.
                for node in created { node.replaceStandIns { nodesByID[$0] } }
                for object in updated {
                    guard let node = nodesByID[object.objectID] else { continue }
                    previous.append((node, node.propertyCache, node.version))
                    try updateCacheNode(node, from: object)
                    node.replaceStandIns { nodesByID[$0] }
                    node.version += 1
                }
                let removed = Set(deleted.compactMap { nodesByID[$0.objectID] })
                if !removed.isEmpty {
                    willRemoveCacheNodes(removed)
                    for node in removed { nodesByID[node.objectID] = nil }
                }
                try save()
                hasSaved = true
                return .saved
            } catch {
                standIns = [:]
                nodesByID = registered
                nextSequence = sequence
                for (node, values, version) in previous {
                    node.propertyCache = values
                    node.version = version
                }
                throw error
            }
        }
    }

    // MARK: Reading nodes

    /// Runs `body` with the store's lock held.
    private func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    /// The registered node of `objectID`, or ``ObjectGraphError/Code/objectNotFound``.
    private func existingNode(_ objectID: ManagedObjectID) throws -> AtomicStoreCacheNode {
        guard let node = nodesByID[objectID] else {
            throw ObjectGraphError(.objectNotFound, "\(objectID) is not in the store.", entityName: objectID.entityName, objectID: objectID)
        }
        return node
    }

    /// A node as a store node: attributes and to-one destinations, with its version.
    private func storedNode(_ node: AtomicStoreCacheNode) throws -> IncrementalStoreNode {
        let entity = node.objectID.entity
        var values = [PropertyValue?](filling: nil, count: entity.properties.count)
        for property in entity.storedProperties where property.slotKind != .toMany {
            values[property.ordinal] = try Self.propertyValue(of: node, for: property)
        }
        return IncrementalStoreNode(objectID: node.objectID, valuesByOrdinal: values, version: node.version)
    }

    /// Under the lock: the nodes of a constraint's scope that hold a probe's values.
    private func holders(_ probe: UniquenessCheck.Probe) throws -> [IncrementalStoreNode] {
        var holders: [IncrementalStoreNode] = []
        for node in nodesByID.values.sorted(by: { $0.sequence < $1.sequence }) where node.objectID.entity.isKind(of: probe.constraint.scope) {
            let values = try probe.constraint.values { try Self.propertyValue(of: node, for: $0).attributeValue ?? .null }
            if values == probe.values { holders.append(try storedNode(node)) }
        }
        return holders
    }

    /// A node's value for a property, as the object graph holds it: an attribute converted to
    /// its type (null when the node has none), a to-one's destination ID, a to-many's IDs.
    package static func propertyValue(of node: AtomicStoreCacheNode, for property: PropertyDescription) throws -> PropertyValue {
        let entity = node.objectID.entity
        let value = node.value(forKey: property.name)
        func wrong(_ expected: String) -> ObjectGraphError {
            ObjectGraphError(
                .wrongValueType, "The cache node of \(node.objectID) holds \(value.map { "\($0)" } ?? "nothing") for \(entity.name).\(property.name), which takes \(expected).",
                entityName: entity.name, key: property.name, objectID: node.objectID)
        }
        switch property {
        case let attribute as AttributeDescription:
            switch value {
            case nil: return .attribute(.null)
            case .attribute(let stored)?:
                guard let converted = stored.converted(to: attribute.attributeType) else { throw wrong("\(attribute.attributeType)") }
                return .attribute(converted)
            default: throw wrong("\(attribute.attributeType)")
            }
        case let relationship as RelationshipDescription where relationship.isToMany:
            switch value {
            case nil: return .relationship(.toMany([]))
            case .toMany(let nodes)?: return .relationship(.toMany(nodes.map(\.objectID)))
            default: throw wrong("a list of nodes")
            }
        default:
            switch value {
            case nil, .toOne(nil)?: return .relationship(.toOne(nil))
            case .toOne(let destination?)?: return .relationship(.toOne(destination.objectID))
            default: throw wrong("a node")
            }
        }
    }
}

extension AtomicStore {
    /// A node seen through ``FetchEvaluable``, following relationships to other nodes.
    struct NodeView: FetchEvaluable {
        let node: AtomicStoreCacheNode
        let store: AtomicStore

        var objectID: ManagedObjectID { node.objectID }

        func fetchValue(forKeyPath keyPath: String) throws -> FetchValue {
            let (head, rest) = ManagedObject.split(keyPath)
            if head == "self" || head == "SELF" {
                return rest == nil ? .object(objectID) : try fetchValue(forKeyPath: rest ?? "")
            }
            let entity = node.objectID.entity
            let property = try entity.property(named: head)
            if property.isTransient, property is AttributeDescription {
                throw ObjectGraphError(
                    .unknownKey, "Transient attribute \(entity.name).\(head) is not stored and cannot be fetched on.",
                    entityName: entity.name, key: keyPath)
            }
            switch try AtomicStore.propertyValue(of: node, for: property) {
            case .attribute(let value):
                if let rest {
                    throw ObjectGraphError(
                        .unknownKey, "\(entity.name).\(head) is an attribute; key path continues with \"\(rest)\".",
                        entityName: entity.name, key: keyPath)
                }
                return .attribute(value)
            case .relationship(.toOne(let id)):
                guard let id else { return .null }
                guard let rest else { return .object(id) }
                return try view(of: id)?.fetchValue(forKeyPath: rest) ?? .null
            case .relationship(.toMany(let ids)):
                guard let rest else { return .collection(ids.map(FetchValue.object)) }
                return .collection(try ids.compactMap { try view(of: $0)?.fetchValue(forKeyPath: rest) })
            }
        }

        func fetchValue(forKeyPath keyPath: String, ofObject objectID: ManagedObjectID) throws -> FetchValue {
            try view(of: objectID)?.fetchValue(forKeyPath: keyPath) ?? .null
        }

        private func view(of id: ManagedObjectID) -> NodeView? {
            store.cacheNode(for: id).map { NodeView(node: $0, store: store) }
        }
    }
}

/// One object of an ``AtomicStore``, in memory (Core Data's `NSAtomicStoreCacheNode`): its
/// ID and its values by property name, attributes as values, to-one relationships as the
/// destination's node, to-many relationships as the members' nodes.
///
/// A store makes nodes in ``AtomicStore/load()`` (or the store makes them for inserted objects
/// with ``AtomicStore/newCacheNode(for:)``). Subclass it to hold values your own way: the
/// store reads values through ``value(forKey:)`` only.
///
/// Nodes are compared by identity. They belong to their store and are used under its lock
/// (in the methods the store calls), so `@unchecked Sendable`.
open class AtomicStoreCacheNode: Hashable, @unchecked Sendable, CustomStringConvertible {
    // @unchecked: read and changed only under the owning store's lock (see AtomicStore).

    /// A value a node holds for a property.
    public enum Value: Hashable, Sendable, CustomStringConvertible {
        /// An attribute's value; a value of another numeric or text type is converted to the
        /// attribute's type when read, and one that cannot be is an error.
        case attribute(AttributeValue)
        /// A to-one relationship's destination, or `nil`.
        case toOne(AtomicStoreCacheNode?)
        /// A to-many relationship's members, in order for an ordered relationship.
        case toMany([AtomicStoreCacheNode])

        /// The value, with destinations as object IDs.
        public var description: String {
            switch self {
            case .attribute(let value): return "\(value)"
            case .toOne(let node): return node.map { "\($0.objectID)" } ?? "nil"
            case .toMany(let nodes): return "[" + nodes.map { "\($0.objectID)" }.joined(separator: ", ") + "]"
            }
        }
    }

    /// The object the node holds.
    public let objectID: ManagedObjectID
    /// The values by property name; `nil` until one is set (Core Data's `propertyCache`).
    public var propertyCache: [String: Value]?
    /// The version optimistic locking compares: 1 when registered, one more per save of it.
    var version: UInt64 = 0
    /// The order nodes were registered in, which fetches follow.
    var sequence: UInt64 = 0

    /// A node for an object ID, with no values.
    public init(objectID: ManagedObjectID) {
        self.objectID = objectID
    }

    /// The value for a property name, or `nil`.
    open func value(forKey key: String) -> Value? { propertyCache?[key] }

    /// Sets (or, with `nil`, removes) the value for a property name.
    open func setValue(_ value: Value?, forKey key: String) {
        if propertyCache == nil { propertyCache = [:] }
        propertyCache?[key] = value
    }

    /// Points every reference to a node that is not `registered(id)` at the registered node
    /// for its ID (a stand-in, made during a save, replaced by the object's own node).
    func replaceStandIns(_ registered: (ManagedObjectID) -> AtomicStoreCacheNode?) {
        guard let cache = propertyCache else { return }
        for (key, value) in cache {
            switch value {
            case .toOne(let node?):
                if let final = registered(node.objectID), final !== node { propertyCache?[key] = .toOne(final) }
            case .toMany(let nodes):
                if nodes.contains(where: { node in registered(node.objectID).map { $0 !== node } ?? false }) {
                    propertyCache?[key] = .toMany(nodes.map { registered($0.objectID) ?? $0 })
                }
            default:
                break
            }
        }
    }

    /// Nodes are equal when they are the same node.
    public static func == (lhs: AtomicStoreCacheNode, rhs: AtomicStoreCacheNode) -> Bool { lhs === rhs }
    /// The node's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    /// The object ID and the values.
    public var description: String {
        let values = (propertyCache ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
        return "AtomicStoreCacheNode(\(objectID); \(values))"
    }
}

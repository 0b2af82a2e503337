import Foundation
import StrataSync
import Synchronization

/// A scratch pad of managed objects (Core Data's `NSManagedObjectContext`): it fetches
/// objects from its coordinator's stores, keeps one object per ID, tracks changes, and
/// saves or discards them.
///
/// For example:
///
/// ```swift
/// let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
/// let person = try context.insertNewObject(forEntityName: "Person")
/// try person.setValue("Ada", forKey: "name")
/// try context.save()
/// let people = try context.fetch(FetchRequest(entityName: "Person"))
/// ```
///
/// Threads: a queue context (``ConcurrencyType/privateQueue``, ``ConcurrencyType/mainQueue``)
/// is `Sendable` by confinement to its queue: pass it anywhere, use it inside
/// ``perform(_:)``, ``performAndWait(_:)`` or `await context.perform { … }`. Its managed
/// objects are not `Sendable`: pass their ``ManagedObjectID``s to other contexts instead. A
/// ``ConcurrencyType/confinement`` context (``init(persistentStoreCoordinator:)``) is used by
/// one thread at a time, which its user ensures.
public final class ManagedObjectContext: @unchecked Sendable {
    // @unchecked: every mutable field is confined to the context's queue (or, for a
    // confinement context, to the one thread its user allows at a time); the fields other
    // threads touch (the merge inbox, the list of children) are behind `Locked`.

    /// How the context is confined to threads.
    public let concurrencyType: ConcurrencyType
    /// The queue the context's blocks run on: the main queue, or a serial queue of its own
    /// (a confinement context's is made when a block is first performed: most never are, and
    /// making a queue costs more than a small fetch).
    var executionQueue: DispatchQueue {
        if let fixedQueue { return fixedQueue }
        return shared.withLock { shared in
            if let queue = shared.confinementQueue { return queue }
            let made = DispatchQueue(label: "ObjectGraph.ManagedObjectContext")
            shared.confinementQueue = made
            return made
        }
    }
    /// The queue of a main-queue or private-queue context, made with it.
    private let fixedQueue: DispatchQueue?
    /// What other threads touch, behind one lock: one object and one mutex for the context,
    /// where a lock each cost three of each at every context's creation and release. No body
    /// run under it takes another lock of a context.
    struct Shared {
        /// A confinement context's queue, once made (any thread may perform a block).
        var confinementQueue: DispatchQueue?
        /// The child contexts, held weakly: each is handed this context's saves (see
        /// ``ManagedObjectContext/deliverSave(_:)``); touched from the children's queues.
        var children: [WeakContext] = []
        /// Saves of other contexts waiting to be merged here
        /// (``ManagedObjectContext/mergeReceivedSaves()``); filled from the saving context's queue.
        var mergeInbox: [SavedChanges] = []
        /// The lock of ``ManagedObjectContext/lock()``, made when first used (most contexts
        /// never are).
        var recursiveLock: NSRecursiveLock?
    }
    /// See ``Shared``.
    let shared = Locked(Shared())

    /// The coordinator that provides the model and the stores; a child context's is its
    /// parent's. Setting it makes the context a root context on that coordinator (and
    /// forgets every registered object, as ``reset()`` does).
    public var persistentStoreCoordinator: PersistentStoreCoordinator? {
        get { coordinator }
        set {
            detachFromParentAndCoordinator()
            coordinator = newValue
            attachForMerging()
        }
    }
    @exclusivity(unchecked) var coordinator: PersistentStoreCoordinator?
    /// The parent context, for a child context (see ``parent``).
    @exclusivity(unchecked) var parentContext: ManagedObjectContext? {
        didSet { isChild = parentContext != nil }
    }
    /// Whether ``parentContext`` is set: what hot paths test (a flag, where reading the
    /// reference would retain and release it).
    @exclusivity(unchecked) private(set) var isChild = false
    /// See ``automaticallyMergesChangesFromParent``; read by the contexts that deliver saves
    /// here, from their queues.
    let mergesAutomaticallyFlag = Atomic<Bool>(false)
    var mergesAutomatically: Bool { mergesAutomaticallyFlag.load(ordering: .relaxed) }
    /// Whether ``mergeReceivedSaves()`` is running (a merge ends an event, which calls it).
    @exclusivity(unchecked) var isMergingReceivedSaves = false
    /// The coordinator rows are registered with: a root context's; a child registers none
    /// (its values come from its parent).
    var registrar: PersistentStoreCoordinator? { isChild ? nil : coordinator }
    /// A name for debugging.
    public var name: String?
    /// Whether deletes propagate along delete rules at the end of each event; when false
    /// they propagate during ``save()``.
    ///
    /// There is no run loop: an event ends when ``processPendingChanges()`` runs, which
    /// every fetch and save does first.
    public var propagatesDeletesAtEndOfEvent = true
    /// How long, in seconds, loaded values may be reused when a fault fires again;
    /// negative for forever, 0 for never.
    @exclusivity(unchecked) public var stalenessInterval: TimeInterval = -1

    /// Whether a row read earlier is fresh enough, by ``stalenessInterval``, to fulfil a fault.
    func accepts(loadedAt: Double) -> Bool {
        if stalenessInterval < 0 { return true }
        guard stalenessInterval > 0, !loadedAt.isNaN else { return false }
        return Date.timeIntervalSinceReferenceDate - loadedAt <= stalenessInterval
    }

    /// When a row read now is read, as a row kept by an object records it: the time, for a
    /// context that bounds staleness; NaN otherwise (the clock is not read per object).
    var readTime: Double { stalenessInterval < 0 ? .nan : Date.timeIntervalSinceReferenceDate }
    /// How the conflicts a save finds are resolved (see ``MergePolicy``); ``MergePolicy/error``,
    /// the default, makes the save throw them.
    @exclusivity(unchecked) public var mergePolicy: MergePolicy = .error
    /// See ``undoManager``.
    @exclusivity(unchecked) var contextUndoManager: ManagedUndoManager?
    /// Unchanged objects whose rows the next save checks (``detectConflicts(for:)``).
    @exclusivity(unchecked) var lockedObjects: Set<ManagedObject> = []
    /// Whether every registered object is held strongly; by default only objects with
    /// unsaved changes are, and unchanged objects go away when nothing else holds them.
    @exclusivity(unchecked) public var retainsRegisteredObjects = false {
        didSet {
            if retainsRegisteredObjects {
                for (id, entry) in registry.entries { retainedObjects[id] = entry.object }
            } else {
                retainedObjects = [:]
            }
        }
    }

    /// Whether each property change is recorded in the event (for undo, which turns it on);
    /// off by default.
    @exclusivity(unchecked) var recordsPropertyChanges = false

    /// The object registry, the context's only one: one object per ID (uniquing), and
    /// whether the ID's row is registered with its store. Owned by the context's thread.
    let registry = ObjectRegistry()
    @exclusivity(unchecked) var retainedObjects: [ManagedObjectID: ManagedObject] = [:]
    /// Rows a fetch prefetched (``FetchRequest/relationshipKeyPathsForPrefetching``), by ID:
    /// a fault made later for one of them (its object was released in between) starts with
    /// the row, so firing it reads nothing, within the rules every cached row follows (no save
    /// through the coordinator since, the staleness interval). At most
    /// ``prefetchedRowLimit``; emptied by ``reset()``.
    @exclusivity(unchecked) var prefetchedRows: [ManagedObjectID: ObjectSnapshot] = [:]
    /// The most rows ``prefetchedRows`` keeps.
    static let prefetchedRowLimit = 8_192
    /// Store registrations collected by ``withRegistrationBatch(_:)``, not yet sent.
    @exclusivity(unchecked) var pendingStoreRegistrations: [ManagedObjectID] = []
    /// The buffer of one-ID (un)registrations sent at once (``withSingleID(_:_:)``), empty
    /// between them.
    @exclusivity(unchecked) var singleIDBuffer: [ManagedObjectID] = []
    /// The buffer the next batch of ``pendingStoreUnregistrations`` takes, empty between
    /// batches (``flushStoreUnregistrations(keepingCapacity:)``).
    @exclusivity(unchecked) var spareStoreUnregistrations: [ManagedObjectID] = []
    @exclusivity(unchecked) var registrationBatchDepth = 0
    /// Rows whose objects were deallocated, not yet unregistered with
    /// their stores: sent in one call per store when a fetch, save, reset or
    /// ``processPendingChanges()`` begins, when the context goes, or once
    /// ``unregistrationBatch`` are waiting (as Core Data processes deallocated objects in
    /// batches, not one deallocation at a time). Objects a context removes itself (reset,
    /// rollback, a refetch that replaces them) are unregistered at once.
    @exclusivity(unchecked) var pendingStoreUnregistrations: [ManagedObjectID] = []
    /// The most deallocated objects whose rows wait to be unregistered with their stores.
    public static let unregistrationBatch = 256
    /// The coordinator's save generation when the fetch being executed began (`nil` outside
    /// a fetch): the faults it returns keep their nodes only while no save came after it.
    @exclusivity(unchecked) var fetchGeneration: UInt64?

    // Change tracking (changed objects are held strongly by these collections).
    var insertedInOrder: [ManagedObject] = []
    var updatedSet: Set<ManagedObject> = []
    var deletedSet: Set<ManagedObject> = []
    var deletesToPropagate: [ManagedObject] = []
    var event = ChangeEvent()

    /// What the context's objects hold to reach it (``ManagedObject/managedObjectContext``).
    let link = ContextLink()

    /// Creates a context of a concurrency type, without a coordinator or parent: set
    /// ``persistentStoreCoordinator`` or ``parent`` before using it.
    public init(concurrencyType: ConcurrencyType) {
        self.concurrencyType = concurrencyType
        switch concurrencyType {
        case .mainQueue: fixedQueue = .main
        case .privateQueue: fixedQueue = DispatchQueue(label: "ObjectGraph.ManagedObjectContext")
        case .confinement: fixedQueue = nil
        }
        link.context = self
    }

    /// Creates a confinement context on a coordinator (see ``ConcurrencyType/confinement``).
    public convenience init(persistentStoreCoordinator: PersistentStoreCoordinator?) {
        self.init(concurrencyType: .confinement)
        coordinator = persistentStoreCoordinator
    }

    deinit {
        // Objects that outlive the context see none from here on (as a weak reference would).
        link.context = nil
        flushStoreRegistrations(keepingCapacity: false)
        // (Most contexts outlive none of their objects: nothing more to do.)
        guard registry.count > 0 else { return }
        let entries = registry.entries
        let ids = entries.compactMap { $0.registration.inStore ? $0.id : nil }
        if !ids.isEmpty { registrar?.contextDidUnregister(ids) }
        // Objects that prefetched each other would keep each other alive past the context:
        // each lets go of its prefetched destinations (held here while it does).
        let holders = entries.map(\.registration.object).filter(\.holdsPrefetchedDestinations)
        for holder in holders { holder.prefetchedDestinations = [] }
    }

    // MARK: Change sets

    /// The objects inserted and not yet saved, in insertion order.
    public var insertedObjects: Set<ManagedObject> { Set(insertedInOrder.filter { !$0.deleted }) }
    /// The registered objects with unsaved changes (neither inserted nor deleted).
    public var updatedObjects: Set<ManagedObject> { updatedSet }
    /// The objects whose deletion the next save makes (not inserted ones).
    public var deletedObjects: Set<ManagedObject> { deletedSet.filter { !$0.inserted } }
    /// Every object registered in the context.
    public var registeredObjects: Set<ManagedObject> { Set(registry.entries.map(\.registration.object)) }
    /// Whether there are unsaved changes.
    public var hasChanges: Bool { !insertedInOrder.isEmpty || !updatedSet.isEmpty || !deletedSet.isEmpty }

    // MARK: Registering objects

    /// The object for an ID: the registered one, or a new fault. Never fails; if the
    /// store has no such object, the fault throws when its values are first read.
    public func object(with objectID: ManagedObjectID) -> ManagedObject {
        checkQueue("object(with:)")
        // One probe: the entry, or the slot a new fault takes.
        let probe = registry.probe(objectID)
        if let slot = probe.found, let object = registry.registration(at: slot)?.object { return object }
        return makeFault(for: objectID, probe: probe)
    }

    /// A new fault for an ID that has no registered object, registered here; with `row`, the
    /// fault keeps the row a fetch read for it (or, `loaded`, has its values at once).
    /// `probe`, when given, is the registry's probe for `objectID` that found it absent.
    func makeFault(
        for objectID: ManagedObjectID, row: consuming ObjectSnapshot? = nil, loaded: Bool = false, probe: ObjectRegistry.Probe? = nil
    ) -> ManagedObject {
        var row = row
        if row == nil, !prefetchedRows.isEmpty { row = prefetchedRows[objectID] }
        // A subclass's initializer may have set values: a fault starts without any.
        let object = objectID.entity.managedObjectClass.init(entity: objectID.entity, insertInto: nil)
        object.objectID = objectID
        object.discardChanges()
        if object.hasTransientValues { object.transientValues.removeAll() }
        object.managedObjectContext = self
        // A temporary ID in a child context is an object its parent has (inserted there):
        // the fault loads its values from the parent.
        if isChild, objectID.isTemporaryID { object.existsUpstream = true }
        register(object, probe: probe)
        if let row {
            if loaded { object.fulfill(with: row) } else { object.faultRow = row }
        }
        return object
    }

    /// The object for an ID with its values loaded; never a fault.
    ///
    /// - Throws: ``ObjectGraphError/Code/objectNotFound`` if the object does not exist, or
    ///   for a temporary ID that names no object of this context (another context's insert,
    ///   saved or not; a child context's parent's inserts are its own).
    public func existingObject(with objectID: ManagedObjectID) throws -> ManagedObject {
        checkQueue("existingObject(with:)")
        let probe = registry.probe(objectID)
        let registered = probe.found.flatMap { registry.registration(at: $0)?.object }
        let wasRegistered = registered != nil
        // A temporary ID this context has no object for names another context's insert (or
        // one saved since, under a permanent ID): no store has it, and a fault of it would
        // read as an empty new object. Core Data fails the same way.
        if !wasRegistered, objectID.isTemporaryID, !isChild {
            throw ObjectGraphError(
                .objectNotFound,
                "\(objectID.entity.name) \(objectID) is a temporary ID this context has no object for (another context's insert; after its save, use the object's permanent ID).",
                entityName: objectID.entity.name, objectID: objectID)
        }
        let object = registered ?? makeFault(for: objectID, probe: probe)
        do {
            try object.fulfillFault()
        } catch {
            if !wasRegistered { unregister(object) }
            throw error
        }
        return object
    }

    /// The object registered for an ID, if any; never loads anything.
    public func registeredObject(for objectID: ManagedObjectID) -> ManagedObject? {
        registry[objectID]?.object
    }

    /// Registers an object to be inserted by the next save; it gets a temporary ID and
    /// its attributes' default values, then ``ManagedObject/awakeFromInsert()`` is called.
    /// An object deleted before that save is simply dropped.
    ///
    /// - Throws: ``ObjectGraphError/Code/wrongContext`` if the object belongs to another
    ///   context, ``ObjectGraphError/Code/invalidArgument`` if it was already saved.
    public func insert(_ object: ManagedObject) throws {
        checkQueue("insert(_:)")
        if object.managedObjectContext === self { return }
        if object.managedObjectContext != nil {
            throw ObjectGraphError(
                .wrongContext, "\(object.entity.name) \(object.objectID) belongs to another context.",
                entityName: object.entity.name, objectID: object.objectID)
        }
        if !object.objectID.isTemporaryID {
            throw ObjectGraphError(
                .invalidArgument, "\(object.entity.name) \(object.objectID) was already saved; fetch it instead of inserting it.",
                entityName: object.entity.name, objectID: object.objectID)
        }
        adopt(object)
    }

    /// Inserts an object known to be new and free.
    func adopt(_ object: ManagedObject) {
        object.managedObjectContext = self
        object.inserted = true
        object.deleted = false
        object.snapshot = nil
        object.applyDefaultValues()
        insertedInOrder.append(object)
        register(object)
        event.inserted.insert(object)
        object.awakeFromInsert()
    }

    /// Inserts a new object of the named entity.
    ///
    /// - Throws: ``ObjectGraphError/Code/unknownEntity``, or
    ///   ``ObjectGraphError/Code/noPersistentStore`` without a coordinator.
    public func insertNewObject(forEntityName name: String) throws -> ManagedObject {
        checkQueue("insertNewObject(forEntityName:)")
        let entity = try requireCoordinator().managedObjectModel.entity(named: name)
        return entity.managedObjectClass.init(entity: entity, insertInto: self)
    }

    /// Marks an object for deletion by the next save; delete rules are applied at the end
    /// of the event (or at save when ``propagatesDeletesAtEndOfEvent`` is false).
    ///
    /// Objects of other contexts, and objects already deleted, are left alone.
    public func delete(_ object: ManagedObject) {
        checkQueue("delete(_:)")
        guard object.managedObjectContext === self, !object.deleted else { return }
        object.deleted = true
        deletedSet.insert(object)
        updatedSet.remove(object)
        deletesToPropagate.append(object)
        event.deleted.insert(object)
    }

    /// Gives objects permanent IDs now, from the stores they will be saved to. Objects
    /// that already have one are left alone; the objects stay inserted.
    ///
    /// In a child context the IDs come from the stores too, and the parents that already
    /// have the objects (saved into them with temporary IDs) take the new IDs.
    public func obtainPermanentIDs(for objects: [ManagedObject]) throws {
        checkQueue("obtainPermanentIDs(for:)")
        _ = try obtainPermanentIDsReplacing(objects)
    }

    /// ``obtainPermanentIDs(for:)``, returning the IDs it replaced.
    func obtainPermanentIDsReplacing(_ objects: [ManagedObject]) throws -> [ManagedObjectID: ManagedObjectID] {
        let coordinator = try requireCoordinator()
        // The objects by store, in the order their stores were first met: a store or two, so
        // a list searched by identity.
        var groups: [(store: IncrementalStore, objects: [ManagedObject])] = []
        // The store of an entity is looked up once per entity (objects assigned to a store
        // with assign(_:to:) go there); the last entity's is at hand.
        var storeOfEntity: [ObjectIdentifier: IncrementalStore] = [:]
        var last: (entity: ObjectIdentifier, group: Int)? = nil
        for object in objects where object.objectID.isTemporaryID {
            let entity = ObjectIdentifier(object.entity)
            if object.assignedStore == nil, let last, last.entity == entity {
                groups[last.group].objects.append(object)
                continue
            }
            let store: IncrementalStore
            if object.assignedStore == nil, let known = storeOfEntity[entity] {
                store = known
            } else {
                store = try coordinator.incrementalStore(forInserting: object)
                if object.assignedStore == nil { storeOfEntity[entity] = store }
            }
            let group: Int
            if let index = groups.firstIndex(where: { $0.store === store }) {
                group = index
            } else {
                group = groups.count
                groups.append((store, []))
                groups[group].objects.reserveCapacity(objects.count)
            }
            groups[group].objects.append(object)
            last = object.assignedStore == nil ? (entity, group) : nil
        }
        var replaced: [ManagedObjectID: ManagedObjectID] = [:]
        replaced.reserveCapacity(objects.count)
        for (store, batch) in groups {
            let ids = try store.obtainPermanentIDs(for: batch)
            guard ids.count == batch.count else {
                throw ObjectGraphError(
                    .invalidArgument, "Store \(store.identifier) returned \(ids.count) permanent IDs for \(batch.count) objects.")
            }
            for (object, id) in zip(batch, ids) {
                guard !id.isTemporaryID, id.entity.name == object.entity.name else {
                    throw ObjectGraphError(
                        .invalidArgument, "Store \(store.identifier) returned \(id) for a \(object.entity.name).",
                        entityName: object.entity.name, objectID: id)
                }
                replaced[object.objectID] = id
            }
        }
        guard !replaced.isEmpty else { return replaced }
        replaceIDs(replaced, everywhere: parentContext != nil)
        replaceIDsInAncestors(replaced)
        return replaced
    }

    /// Parents that hold objects under IDs a child replaced (saved into them earlier) re-key
    /// them too, and so on up the chain, each in a block of its own.
    private func replaceIDsInAncestors(_ replaced: [ManagedObjectID: ManagedObjectID]) {
        guard let parent = parentContext else { return }
        parent.performAndWait {
            parent.replaceIDs(replaced, everywhere: parent.parentContext != nil)
            parent.replaceIDsInAncestors(replaced)
        }
    }

    /// Chooses the store a newly inserted object is saved to, when several stores hold
    /// its entity.
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidArgument`` if the object is not inserted
    ///   or the store does not hold its entity.
    public func assign(_ object: ManagedObject, to store: PersistentStore) throws {
        guard object.inserted, object.managedObjectContext === self else {
            throw ObjectGraphError(.invalidArgument, "Only objects inserted in this context can be assigned to a store.", objectID: object.objectID)
        }
        guard persistentStoreCoordinator?.persistentStores.contains(where: { $0 === store }) ?? false, store.holds(object.entity) else {
            throw ObjectGraphError(
                .invalidArgument, "Store \(store.identifier) does not hold entity \(object.entity.name).",
                entityName: object.entity.name, objectID: object.objectID)
        }
        object.assignedStore = store
    }

    // MARK: Locking

    /// Blocks until the context's lock is acquired.
    public func lock() { recursiveLock.lock() }
    /// Releases the context's lock.
    public func unlock() { recursiveLock.unlock() }
    /// Acquires the context's lock if it is free; returns whether it did.
    public func tryLock() -> Bool { recursiveLock.try() }

    /// The context's lock, made on first use under ``shared``'s lock (any thread may lock).
    private var recursiveLock: NSRecursiveLock {
        shared.withLock { shared in
            if let lock = shared.recursiveLock { return lock }
            let made = NSRecursiveLock()
            shared.recursiveLock = made
            return made
        }
    }

    // MARK: Internal bookkeeping

    func register(_ object: ManagedObject, probe: ObjectRegistry.Probe? = nil) {
        let id = object.objectID
        // A permanent ID's row is registered with its store with the entry, in one lookup; a
        // replaced entry's registration carries over to the new object. A child context
        // registers nothing with the stores.
        let permanent = !id.isTemporaryID && !isChild
        let replaced: Registration?
        if let probe, probe.found == nil {
            // The fetch's lookup found no entry and chose the slot: no second probe.
            registry.insert(Registration(object, inStore: permanent), for: id, at: probe)
            replaced = nil
        } else {
            replaced = registry.update(Registration(object, inStore: permanent), for: id)
        }
        if retainsRegisteredObjects { retainedObjects[id] = object }
        guard permanent, replaced?.inStore != true else { return }
        if registrationBatchDepth > 0 {
            pendingStoreRegistrations.append(id)
        } else {
            withSingleID(id) { registrar?.contextDidRegister($0) }
        }
    }

    /// Removes an object from the context: it keeps its values but no longer belongs here.
    func unregister(_ object: ManagedObject) {
        let id = object.objectID
        var inStore = false
        let slot = Int(object.registrySlot)
        if let registration = registry.registration(at: slot), registration.holds(object) {
            inStore = registry.remove(at: slot).inStore
        }
        retainedObjects[id] = nil
        object.managedObjectContext = nil
        if inStore { storeUnregister(id) }
    }

    /// Loads a fault's values through the coordinator.
    func fulfill(_ id: ManagedObjectID) throws -> IncrementalStoreNode {
        if isChild, let parent = parentContext { return try parent.performAndWait { try parent.nodeForChild(id) } }
        return try requireCoordinator().newValues(forObjectWith: id, in: self)
    }

    /// Loads a relationship's destinations through the coordinator.
    func fulfillRelationship(_ relationship: RelationshipDescription, of id: ManagedObjectID) throws -> RelationshipValue {
        if isChild, let parent = parentContext { return try parent.performAndWait { try parent.relationshipForChild(relationship, of: id) } }
        return try requireCoordinator().newValue(forRelationship: relationship, forObjectWith: id, in: self)
    }

    /// A to-many relationship's destinations with the rows their store read along
    /// (``MemberRowsSource``), each row kept as a fetch's is (with the save generation before the
    /// read and the read time); `nil` for a child context, or when the store does not read them so.
    func fulfillToManyWithRows(
        _ relationship: RelationshipDescription, of id: ManagedObjectID
    ) throws -> (ids: [ManagedObjectID], rows: [ObjectSnapshot?])? {
        guard !isChild, let coordinator else { return nil }
        let generation = coordinator.saveGeneration.load(ordering: .acquiring)
        guard let found = try coordinator.destinationsWithRows(of: relationship, forObjectWith: id), found.rows.count == found.ids.count else {
            return nil
        }
        let loadedAt = readTime
        var rows: [ObjectSnapshot?] = []
        rows.reserveCapacity(found.rows.count)
        for node in found.rows {
            rows.append(node.map { ObjectSnapshot(node: $0, entity: $0.objectID.entity, generation: generation, loadedAt: loadedAt) })
        }
        return (found.ids, rows)
    }

    /// The objects of `ids` (`rows` has one entry per ID), in order and registered with their
    /// stores in one call: a registered object as it is (a fault among them that holds no row
    /// gets its row), a new fault with its row.
    func objects(for ids: [ManagedObjectID], rows: [ObjectSnapshot?]) -> [ManagedObject] {
        checkQueue("objects(forKey:)")
        return withRegistrationBatch {
            reserveRegistrations(ids.count)
            var objects: [ManagedObject] = []
            objects.reserveCapacity(ids.count)
            for index in ids.indices {
                let id = ids[index]
                let probe = registry.probe(id)
                if let slot = probe.found, let registered = registry.registration(at: slot)?.object {
                    if registered.isFault, registered.faultRow == nil, let row = rows[index] { registered.faultRow = row }
                    objects.append(registered)
                } else {
                    objects.append(makeFault(for: id, row: rows[index], probe: probe))
                }
            }
            return objects
        }
    }

    /// Records one property change in the event, for the undo manager; objects call it only
    /// while ``recordsPropertyChanges`` is on, so the change is never built otherwise.
    func recordChange(of object: ManagedObject, _ property: PropertyDescription, _ kind: PropertyChange.Kind) {
        event.propertyChanges.append(PropertyChange(object: object, property: property, kind: kind))
    }

    /// Called by an object after a property changed.
    ///
    /// A primitive change (`notify` false) is not tracked: not recorded, no notification, and
    /// the object is not counted as updated for it. A transient change makes it updated.
    func objectDidChange(_ object: ManagedObject, property: PropertyDescription, notify: Bool) {
        // A primitive change is not tracked (Core Data's primitive setters): the object is not
        // counted as updated for it.
        guard notify, !object.inserted, !object.deleted else { return }
        // A change back to the committed value is still a change observers hear of.
        event.updated.insert(object)
        if property.isTransient {
            // A transient change makes the object updated, with nothing stored changed.
            object.transientChanged = true
            updatedSet.insert(object)
        } else if !object.hasPendingValues && !object.transientChanged {
            updatedSet.remove(object)
        } else {
            updatedSet.insert(object)
        }
    }

    /// Called when an object's row turned out to be gone from its store.
    func objectWasInvalidated(_ object: ManagedObject) {
        event.invalidated.insert(object)
    }

    /// The coordinator, or the error every operation that needs one throws.
    func requireCoordinator() throws -> PersistentStoreCoordinator {
        guard let coordinator else {
            throw ObjectGraphError(
                .noPersistentStore, "The context has no persistent store coordinator or parent; create it with one, or set one.")
        }
        return coordinator
    }
}

/// A registry entry: the object without a reference count, and whether its row is
/// registered with its store.
///
/// Unretained, not weak: a weak reference gives every object a side table (an allocation
/// and a free per fetched object). It is safe because an entry never outlives its object:
/// a registered object removes its entry first thing in its `deinit`
/// (``ManagedObjectContext/objectDidDeallocate(_:_:)``), and an object leaving the context
/// (``ManagedObjectContext/unregister(_:)``, ``ManagedObjectContext/reset()``) loses its
/// context and its entry together.
struct Registration {
    private let unmanaged: Unmanaged<ManagedObject>
    /// Whether the ID's row is registered with its store (the ID is permanent and the
    /// store was told); unregistered exactly once when the entry goes.
    var inStore = false

    init(_ object: ManagedObject, inStore: Bool = false) {
        unmanaged = .passUnretained(object)
        self.inStore = inStore
    }

    /// The entry of the object at `pointer` (a registered object's address).
    init(pointer: UnsafeMutableRawPointer, inStore: Bool) {
        unmanaged = .fromOpaque(pointer)
        self.inStore = inStore
    }

    /// The registered object.
    var object: ManagedObject { unmanaged.takeUnretainedValue() }
    /// The object's address, compared without retaining it (its `deinit` may be running).
    var pointer: UnsafeMutableRawPointer { unmanaged.toOpaque() }
    /// Whether the entry is `object`'s.
    func holds(_ object: ManagedObject) -> Bool { pointer == Unmanaged.passUnretained(object).toOpaque() }
}

/// A context as its objects hold it: each registered object keeps the link strongly and
/// reads the context through it, which costs a load and a retain where a weak reference
/// costs a side-table load and a slow release (measured at ~140 instructions per read, at
/// each fault fired and each object deallocated). The context sets ``context`` when it is
/// made and clears it first thing in its `deinit`, so an object that outlives its context
/// sees `nil`, as through a weak reference.
///
/// Thread safety: ``context`` is written by the context's initializer and `deinit` and read
/// by its objects on the context's thread (objects are not `Sendable`); a context being
/// deinitialized is referenced by nobody who could read it meanwhile.
final class ContextLink: @unchecked Sendable {
    /// The context, until its `deinit` begins.
    @exclusivity(unchecked) unowned(unsafe) var context: ManagedObjectContext?
}

import Foundation
import StrataSync

/// What one save changed, by object ID: what a context merges from another's save.
struct SavedChanges: Sendable {
    var inserted: [ManagedObjectID] = []
    var updated: [ManagedObjectID] = []
    var deleted: [ManagedObjectID] = []
    /// Temporary IDs the save replaced with permanent ones (objects a child saved into its
    /// parent keep their temporary IDs until the parent saves them to a store).
    var permanentIDs: [ManagedObjectID: ManagedObjectID] = [:]

    /// Only the IDs' replacements: what a context that does not merge still applies.
    var idsOnly: SavedChanges { SavedChanges(permanentIDs: permanentIDs) }
    var isEmpty: Bool { inserted.isEmpty && updated.isEmpty && deleted.isEmpty && permanentIDs.isEmpty }
}

/// A context held without a reference count of its own.
struct WeakContext: Sendable {
    weak var context: ManagedObjectContext?
}

/// One child context's save, as its parent takes it in.
struct ChildSave: Sendable {
    /// Inserted objects: the ID (temporary, or permanent if obtained in the child) and
    /// every stored value by ordinal (`nil` for transient properties).
    var inserted: [(id: ManagedObjectID, values: [PropertyValue?])] = []
    /// Updated objects and their changed values by ordinal.
    var updated: [(id: ManagedObjectID, changes: [(ordinal: Int, value: PropertyValue)])] = []
    var deleted: [ManagedObjectID] = []
}

extension ManagedObjectContext {
    // MARK: Parent and child contexts

    /// The context this one saves into and reads through, if it is a child context (Core
    /// Data's `parent`); `nil` for a context on a coordinator.
    ///
    /// A child sees its parent's objects with their unsaved changes (inserted, updated and
    /// deleted objects count in its fetches); its ``save()`` pushes its changes into the
    /// parent, and nothing reaches a store until the root of the chain saves. Setting it
    /// forgets every registered object (as ``reset()`` does) and makes the context use the
    /// parent's coordinator.
    public var parent: ManagedObjectContext? {
        get { parentContext }
        set {
            detachFromParentAndCoordinator()
            parentContext = newValue
            coordinator = newValue?.persistentStoreCoordinator
            attachForMerging()
        }
    }

    /// Whether the context merges the saves of its parent automatically (Core Data's
    /// `automaticallyMergesChangesFromParent`): a child merges each save of its parent; a
    /// context on a coordinator merges the saves of the other contexts on it. The merge runs
    /// on the context's queue after the save returns, as ``mergeChanges(fromContextDidSave:)``
    /// does; a confinement context merges when it next ends an event
    /// (``processPendingChanges()``, which every fetch and save does first).
    public var automaticallyMergesChangesFromParent: Bool {
        get { mergesAutomatically }
        set {
            guard newValue != mergesAutomatically else { return }
            detachForMerging()
            mergesAutomaticallyFlag.store(newValue, ordering: .relaxed)
            attachForMerging()
        }
    }

    /// Leaves the parent's list of children and the coordinator's list of merging contexts,
    /// and forgets every object if there are any (they belong to the old parent or store).
    func detachFromParentAndCoordinator() {
        if registry.count > 0 || hasChanges { reset() }
        detachForMerging()
    }

    private func detachForMerging() {
        let me = ObjectIdentifier(self)
        func leave(_ list: inout [WeakContext]) {
            list.removeAll { entry in
                guard let context = entry.context else { return true }
                return ObjectIdentifier(context) == me
            }
        }
        parentContext?.shared.withLock { leave(&$0.children) }
        coordinator?.mergingContexts.withLock { leave(&$0) }
    }

    /// Joins the lists that deliver saves to this context: its parent's children (every
    /// child, for the IDs a parent's save makes permanent), and, for a root context that
    /// merges automatically, the coordinator's merging contexts.
    func attachForMerging() {
        if let parentContext {
            parentContext.shared.withLock {
                $0.children.removeAll { $0.context == nil }
                $0.children.append(WeakContext(context: self))
            }
        } else if mergesAutomatically, let coordinator {
            coordinator.mergingContexts.withLock {
                $0.removeAll { $0.context == nil }
                $0.append(WeakContext(context: self))
            }
        }
    }

    /// Hands a finished save to the contexts that take it: this context's children (all of
    /// its changes to those that merge automatically, the permanent IDs to the others), and,
    /// for a root context, the other root contexts on the coordinator that merge automatically.
    /// `makeChanges` runs only if some context takes the save.
    func deliverSave(_ makeChanges: () -> SavedChanges) {
        let children = shared.withLock { $0.children.compactMap { $0.context } }
        let me = ObjectIdentifier(self)
        let others = isChild
            ? [] : coordinator?.mergingContexts.withLock { $0.compactMap { $0.context } }.filter { ObjectIdentifier($0) != me } ?? []
        guard !children.isEmpty || !others.isEmpty else { return }
        let changes = makeChanges()
        for child in children {
            child.receive(child.mergesAutomatically ? changes : changes.idsOnly)
        }
        // Another root context never held this one's temporary IDs.
        var shared = changes
        shared.permanentIDs = [:]
        for other in others { other.receive(shared) }
    }

    /// Queues a save to merge: a queue context merges it in a block enqueued now; a
    /// confinement context at its next ``processPendingChanges()``.
    private func receive(_ changes: SavedChanges) {
        guard !changes.isEmpty else { return }
        shared.withLock { $0.mergeInbox.append(changes) }
        guard concurrencyType != .confinement else { return }
        executionQueue.async { [self] in
            withHold { mergeReceivedSaves() }
        }
    }

    /// Merges the saves received since the last call, one at a time in the order they were
    /// made. Not re-entrant: a merge ends an event, which would merge the next save in the
    /// middle of this one; the loop takes it next instead.
    func mergeReceivedSaves() {
        guard !isMergingReceivedSaves else { return }
        isMergingReceivedSaves = true
        defer { isMergingReceivedSaves = false }
        while let changes = shared.withLock({ $0.mergeInbox.isEmpty ? nil : $0.mergeInbox.removeFirst() }) { merge(changes) }
    }

    // MARK: Merging

    /// Merges another context's save, from its ``didSaveObjectsNotification`` (or
    /// ``didSaveObjectIDsNotification``), into this context (seed 003): registered objects it
    /// updated are refreshed, keeping their unsaved changes on top; objects it inserted are
    /// registered as faults; registered objects it deleted leave the context. Then posts
    /// ``objectsDidChangeNotification`` with the objects affected here (merged updates
    /// under ``NotificationKey/refreshedObjects``).
    ///
    /// Use it on this context's queue. The notification's object IDs are read, so it may
    /// come from a context on another queue.
    public func mergeChanges(fromContextDidSave notification: Notification) {
        checkQueue("mergeChanges(fromContextDidSave:)")
        merge(SavedChanges(notification.userInfo ?? [:]))
    }

    /// Merges changes made elsewhere (another coordinator, another process) into each of
    /// `contexts`, on each one's queue: the dictionary maps ``NotificationKey/insertedObjects``,
    /// ``NotificationKey/updatedObjects`` and ``NotificationKey/deletedObjects`` (or the
    /// object-ID keys) to arrays or sets of ``ManagedObjectID`` or of their URI
    /// representations (Core Data's `mergeChanges(fromRemoteContextSave:into:)`). IDs whose
    /// URIs name no store of a context's coordinator are skipped.
    public static func mergeChanges(fromRemoteContextSave changes: [AnyHashable: Any], into contexts: [ManagedObjectContext]) {
        for context in contexts {
            let resolved = SavedChanges(changes, resolvingURIsWith: context.persistentStoreCoordinator)
            context.performAndWait { context.merge(resolved) }
        }
    }

    /// Refreshes every registered object: objects without unsaved changes turn into faults,
    /// the others reload their stored values under their changes (Core Data's
    /// `refreshAllObjects()`).
    public func refreshAllObjects() {
        checkQueue("refreshAllObjects()")
        for entry in registry.entries {
            let object = entry.registration.object
            refresh(object, mergeChanges: object.hasChanges)
        }
        endEvent()
    }

    /// An object whose row another save deleted leaves the context: its changes (its own
    /// insert or delete too) are dropped and observers are told it is deleted.
    func forgetDeletedElsewhere(_ object: ManagedObject) {
        if object.inserted { insertedInOrder.removeAll { $0 === object } }
        updatedSet.remove(object)
        deletedSet.remove(object)
        if object.deleted { deletesToPropagate.removeAll { $0 === object } }
        lockedObjects.remove(object)
        object.discardChanges()
        object.inserted = false
        object.deleted = false
        event.deleted.insert(object)
        unregister(object)
    }

    /// Applies one save made elsewhere (see ``mergeChanges(fromContextDidSave:)``).
    func merge(_ changes: SavedChanges) {
        if !changes.permanentIDs.isEmpty {
            replaceIDs(changes.permanentIDs, everywhere: true)
            // This context's children hold the same temporary IDs.
            let children = shared.withLock { $0.children.compactMap { $0.context } }
            for child in children { child.receive(changes.idsOnly) }
        }
        for id in changes.deleted {
            if let object = registry[id]?.object { forgetDeletedElsewhere(object) }
        }
        for id in changes.updated {
            guard let object = registry[id]?.object, !object.inserted else { continue }
            if object.isFault {
                // Its row, if it keeps one, is from before the save.
                object.faultRow = nil
            } else {
                refresh(object, mergeChanges: true)
            }
        }
        for id in changes.inserted where registry[id] == nil {
            event.inserted.insert(object(with: id))
        }
        endEvent()
    }

    /// Gives registered objects the permanent IDs `replaced` names for their temporary ones,
    /// and every reference to them too: in changed objects only (`everywhere` false: a root
    /// context's committed values never name a temporary ID), or in every registered object
    /// (a child's saved values may).
    func replaceIDs(_ replaced: [ManagedObjectID: ManagedObjectID], everywhere: Bool) {
        var newlyRegistered: [ManagedObjectID] = []
        newlyRegistered.reserveCapacity(replaced.count)
        for (old, new) in replaced {
            guard let object = registry.removeValue(forKey: old)?.object else { continue }
            object.objectID = new
            registry.update(Registration(object), for: new)
            if retainsRegisteredObjects {
                retainedObjects[old] = nil
                retainedObjects[new] = object
            }
            newlyRegistered.append(new)
        }
        // The objects' relationship values rewritten through a table of the temporary IDs'
        // homes: one probe per destination, no hashing.
        let replacements = IDReplacements(replaced)
        if !replacements.isEmpty {
            if everywhere {
                for entry in registry.entries { entry.registration.object.replaceReferences(replacements) }
            } else {
                for object in insertedInOrder { object.replaceReferences(replacements) }
                for object in updatedSet { object.replaceReferences(replacements) }
                for object in deletedSet { object.replaceReferences(replacements) }
            }
        }
        storeRegister(newlyRegistered)
    }

    // MARK: A child's reads and saves, answered by its parent

    /// The values of an object as this context has them now (its unsaved changes applied),
    /// for a child context's fault.
    ///
    /// - Throws: ``ObjectGraphError/Code/objectNotFound`` if the object is deleted here or is
    ///   an insert this context does not have; the store's error if it cannot be loaded.
    func nodeForChild(_ id: ManagedObjectID) throws -> IncrementalStoreNode {
        let object = registry[id]?.object ?? makeFault(for: id)
        if object.deleted || (object.isNew && !object.inserted) {
            throw ObjectGraphError(.objectNotFound, "\(id) is deleted in, or unknown to, the parent context.", entityName: id.entity.name, objectID: id)
        }
        let values = try object.storedValues(skippingUnloadedRelationships: true)
        return IncrementalStoreNode(objectID: id, valuesByOrdinal: values, version: object.snapshot?.version ?? 0)
    }

    /// A relationship's destinations as this context has them now, for a child context.
    func relationshipForChild(_ relationship: RelationshipDescription, of id: ManagedObjectID) throws -> RelationshipValue {
        let object = registry[id]?.object ?? makeFault(for: id)
        guard let value = try object.currentValue(for: relationship).relationshipValue else {
            throw ObjectGraphError(.wrongValueType, "\(id.entity.name).\(relationship.name) holds no relationship value.", objectID: id)
        }
        return value
    }

    /// A fetch of a child context, answered here with this context's pending changes
    /// counted (as a store would answer it for this context).
    func executeForChild(_ request: FetchRequest) throws -> PersistentStoreResult {
        switch request.resultType {
        case .managedObject:
            let objects = try fetch(request)
            return .objectIDs(objects.map(\.objectID))
        case .managedObjectID: return .objectIDs(try fetchObjectIDs(request))
        case .dictionary: return .dictionaries(try fetchDictionaries(request))
        case .count: return .count(try count(for: request))
        }
    }

    /// Takes in a child's save as unsaved changes of this context: its inserts are inserted
    /// here (with their IDs; ``ManagedObject/awakeFromInsert()`` is called, as Core Data
    /// does), its changed values set, its deletes deleted. Then ends the event.
    func absorb(_ save: ChildSave) {
        for (id, values) in save.inserted where registry[id] == nil {
            let object = id.entity.managedObjectClass.init(entity: id.entity, insertInto: nil)
            object.objectID = id
            adopt(object)
            for property in id.entity.storedProperties {
                if let value = values[property.ordinal] { object.absorb(value, for: property) }
            }
        }
        for (id, changes) in save.updated {
            let object = self.object(with: id)
            for (ordinal, value) in changes { object.absorb(value, for: id.entity.properties[ordinal]) }
            if !object.inserted, !object.deleted, object.hasPendingValues {
                updatedSet.insert(object)
                event.updated.insert(object)
            }
        }
        for id in save.deleted { delete(object(with: id)) }
        endEvent()
    }

    /// A child's save: pushes its changes into the parent, in one block of the parent.
    func pushToParent(_ parent: ManagedObjectContext, inserted: [ManagedObject], updated: [ManagedObject], deleted: [ManagedObject]) throws {
        var save = ChildSave()
        save.inserted.reserveCapacity(inserted.count)
        for object in inserted {
            save.inserted.append((object.objectID, try object.storedValues(skippingUnloadedRelationships: false)))
        }
        for object in updated {
            var changes: [(ordinal: Int, value: PropertyValue)] = []
            object.changes.forEachChange { ordinal, value in
                if !object.entity.properties[ordinal].isTransient { changes.append((ordinal, value)) }
            }
            save.updated.append((object.objectID, changes))
        }
        save.deleted = deleted.map(\.objectID)
        let pushed = save
        parent.performAndWait { parent.absorb(pushed) }
    }
}

extension ManagedObject {
    /// Sets a value a child context saved, as an unsaved change (no comparison with the
    /// committed value, so no fault fires).
    func absorb(_ value: PropertyValue, for property: PropertyDescription) {
        changes.reserve(entity.properties.count)
        changes.set(value, for: property)
    }
}

extension SavedChanges {
    /// The changes a save's user info names, under each of the object-ID keys or, without
    /// it, the matching object key: sets or arrays of object IDs, of objects (a did-save
    /// notification's) or of URI representations (a remote save's; resolved with
    /// `coordinator`, and skipped where it names no store of it).
    init(_ info: [AnyHashable: Any], resolvingURIsWith coordinator: PersistentStoreCoordinator? = nil) {
        typealias Key = ManagedObjectContext.NotificationKey
        func ids(_ idKey: Key, _ objectKey: Key) -> [ManagedObjectID] {
            guard let value = info[idKey.rawValue] ?? info[objectKey.rawValue] else { return [] }
            if let ids = value as? Set<ManagedObjectID> { return Array(ids) }
            if let objects = value as? Set<ManagedObject> { return objects.map(\.objectID) }
            let items = (value as? [Any]) ?? (value as? Set<URL>).map { Array($0) } ?? []
            return items.compactMap { item in
                if let id = item as? ManagedObjectID { return id }
                if let object = item as? ManagedObject { return object.objectID }
                guard let uri = item as? URL else { return nil }
                return coordinator?.managedObjectID(forURIRepresentation: uri)
            }
        }
        inserted = ids(.insertedObjectIDs, .insertedObjects)
        updated = ids(.updatedObjectIDs, .updatedObjects)
        deleted = ids(.deletedObjectIDs, .deletedObjects)
        permanentIDs = info[Key.permanentObjectIDs.rawValue] as? [ManagedObjectID: ManagedObjectID] ?? [:]
    }
}

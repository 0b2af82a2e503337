import Foundation

extension ManagedObjectContext {
    /// Commits the unsaved changes to the stores.
    ///
    /// In order: ends the event (applying delete rules), posts
    /// ``willSaveObjectsNotification``, calls ``ManagedObject/willSave()``, validates every
    /// inserted, updated and deleted object (all failures are collected), obtains permanent
    /// IDs for inserted objects, sends one ``SaveChangesRequest`` per store, then calls
    /// ``ManagedObject/didSave()`` and posts ``didSaveObjectsNotification``.
    ///
    /// - Throws: a validation error (``ObjectGraphError/Code/multipleValidationErrors``
    ///   when there are several, ``ObjectGraphError/Code/deleteDenied`` for a deny rule),
    ///   ``ObjectGraphError/Code/noPersistentStore``, or a store's error. After a failure
    ///   the changes are still pending.
    ///
    /// A child context saves into its parent instead: the parent takes the changes as its
    /// own unsaved changes (inserted objects keep their IDs, temporary or not), and nothing
    /// reaches a store until the parent (or the root of the chain) saves. After a save, the
    /// context's children that merge automatically merge it, and so do, for a context on a
    /// coordinator, the coordinator's other contexts that do.
    public func save() throws {
        checkQueue("save()")
        let coordinator = try requireCoordinator()
        flushStoreRegistrations()
        endEventForSave()
        guard hasChanges else { return }
        NotificationCenter.default.post(name: Self.willSaveObjectsNotification, object: self)
        for object in insertedInOrder + Array(updatedSet) + Array(deletedSet) { object.willSave() }
        endEventForSave()
        guard hasChanges else { return }

        try validatePendingChanges()

        var inserted = insertedInOrder
        var updated = Array(updatedSet)
        var deleted = Array(deletedSet)
        if let parent = parentContext {
            try pushToParent(parent, inserted: inserted, updated: updated, deleted: deleted)
            for object in inserted { object.existsUpstream = true }
            finishSave(inserted: inserted, updated: updated, deleted: deleted, permanentIDs: [:])
            return
        }
        for object in updated + deleted where try coordinator.incrementalStore(for: object.objectID).isReadOnly {
            throw ObjectGraphError(
                .invalidArgument, "The store of \(object.objectID) is read-only; the save was refused.",
                entityName: object.entity.name, objectID: object.objectID)
        }
        var permanentIDs = try obtainPermanentIDsReplacing(inserted)
        if try saveToStores(coordinator, permanentIDs: &permanentIDs) {
            // The merge policy changed, discarded or deleted objects, or forgot objects whose
            // rows went: the save reports what it wrote.
            inserted = insertedInOrder
            updated = Array(updatedSet)
            deleted = Array(deletedSet)
            let insertedIDs = Set(inserted.map(\.objectID))
            permanentIDs = permanentIDs.filter { insertedIDs.contains($0.value) }
        }
        lockedObjects = []
        finishSave(inserted: inserted, updated: updated, deleted: deleted, permanentIDs: permanentIDs)
    }

    /// The most times a save is tried again after its merge policy resolved its conflicts
    /// (new conflicts can come from saves made meanwhile).
    static let mergeRounds = 8

    /// Sends one ``SaveChangesRequest`` per store. A store that reports conflicts
    /// (``ObjectGraphError/Code/mergeConflict`` or ``ObjectGraphError/Code/constraintConflict``)
    /// hands them to ``mergePolicy``, and the requests of the stores not saved yet are made
    /// again from the objects as it left them (after a constraint resolution, which deletes
    /// and changes objects, the event is ended and the changes validated again; objects it
    /// inserted get permanent IDs, added to `permanentIDs`). Returns whether the merge policy
    /// resolved conflicts.
    private func saveToStores(_ coordinator: PersistentStoreCoordinator, permanentIDs: inout [ManagedObjectID: ManagedObjectID]) throws -> Bool {
        var saved = Set<ObjectIdentifier>()
        var rounds = 0
        while true {
            var conflict: ObjectGraphError?
            for (store, request) in try requestsByStore(coordinator, inserted: insertedInOrder) where !saved.contains(ObjectIdentifier(store)) {
                do {
                    try coordinator.executeSave([(store, request)], in: self)
                    saved.insert(ObjectIdentifier(store))
                } catch let error as ObjectGraphError
                    where (error.code == .mergeConflict && !error.conflicts.isEmpty) || (error.code == .constraintConflict && !error.constraintConflicts.isEmpty) {
                    conflict = error
                    break
                }
            }
            guard let conflict else { return rounds > 0 }
            rounds += 1
            guard rounds <= Self.mergeRounds else { throw conflict }
            if conflict.code == .mergeConflict {
                try mergePolicy.resolve(mergeConflicts: conflict.conflicts)
            } else {
                attachDatabaseObjects(conflict.constraintConflicts)
                try mergePolicy.resolve(constraintConflicts: conflict.constraintConflicts)
                endEventForSave()
                try validatePendingChanges()
                permanentIDs.merge(try obtainPermanentIDsReplacing(insertedInOrder)) { first, _ in first }
            }
        }
    }

    /// The save's changes grouped by store, in the order stores are first met: the inserted
    /// objects, and the updated, deleted and locked (``detectConflicts(for:)``) ones as they
    /// are now.
    private func requestsByStore(
        _ coordinator: PersistentStoreCoordinator, inserted: [ManagedObject]
    ) throws -> [(store: IncrementalStore, request: SaveChangesRequest)] {
        // The stores in the order first met, with their groups at the same positions: a store
        // or two, found by identity (the last one met at hand), so that grouping an object
        // hashes nothing.
        var stores: [IncrementalStore] = []
        var groups: [(inserted: [ManagedObject], updated: [ManagedObject], deleted: [ManagedObject], locked: [ManagedObject])] = []
        var last = -1
        func group(of object: ManagedObject) throws -> Int {
            let store = try coordinator.incrementalStore(for: object.objectID)
            if last >= 0, stores[last] === store { return last }
            if let index = stores.firstIndex(where: { $0 === store }) {
                last = index
            } else {
                stores.append(store)
                groups.append(([], [], [], []))
                last = stores.count - 1
            }
            return last
        }
        for object in inserted { groups[try group(of: object)].inserted.append(object) }
        for object in updatedSet { groups[try group(of: object)].updated.append(object) }
        for object in deletedSet { groups[try group(of: object)].deleted.append(object) }
        for object in lockedObjects
        where object.managedObjectContext === self && !object.hasChanges && object.committedVersion != nil {
            groups[try group(of: object)].locked.append(object)
        }
        var requests: [(store: IncrementalStore, request: SaveChangesRequest)] = []
        for (store, changes) in zip(stores, groups) {
            if store.isReadOnly {
                throw ObjectGraphError(.invalidArgument, "Store \(store.identifier) is read-only; the save was refused.")
            }
            var request = SaveChangesRequest(
                inserted: Set(changes.inserted), updated: Set(changes.updated), deleted: Set(changes.deleted),
                locked: Set(changes.locked))
            request.affectedStores = [store]
            requests.append((store, request))
        }
        return requests
    }

    /// After the changes reached the stores (or the parent): commits them in the objects,
    /// posts ``didSaveObjectsNotification`` and ``didSaveObjectIDsNotification``, and hands
    /// the save to the contexts that merge it.
    private func finishSave(
        inserted: [ManagedObject], updated: [ManagedObject], deleted: [ManagedObject],
        permanentIDs: [ManagedObjectID: ManagedObjectID]
    ) {
        for object in inserted + updated { object.commitChanges() }
        insertedInOrder = []
        updatedSet = []
        deletedSet = []
        func ids(_ objects: [ManagedObject]) -> Set<ManagedObjectID> {
            var ids = Set<ManagedObjectID>(minimumCapacity: objects.count)
            for object in objects { ids.insert(object.objectID) }
            return ids
        }
        let insertedIDs = ids(inserted), updatedIDs = ids(updated), deletedIDs = ids(deleted)
        for object in deleted {
            object.deleted = false
            unregister(object)
        }
        for object in inserted + updated + deleted { object.didSave() }
        // Sized for every key at once: the dictionaries never grow.
        var ids = [AnyHashable: Any](minimumCapacity: 4)
        ids[NotificationKey.insertedObjectIDs.rawValue] = insertedIDs
        ids[NotificationKey.updatedObjectIDs.rawValue] = updatedIDs
        ids[NotificationKey.deletedObjectIDs.rawValue] = deletedIDs
        if !permanentIDs.isEmpty { ids[NotificationKey.permanentObjectIDs.rawValue] = permanentIDs }
        var info = [AnyHashable: Any](minimumCapacity: 7)
        info.merge(ids) { first, _ in first }
        info[NotificationKey.insertedObjects.rawValue] = Set(inserted)
        info[NotificationKey.updatedObjects.rawValue] = Set(updated)
        info[NotificationKey.deletedObjects.rawValue] = Set(deleted)
        NotificationCenter.default.post(name: Self.didSaveObjectsNotification, object: self, userInfo: info)
        NotificationCenter.default.post(name: Self.didSaveObjectIDsNotification, object: self, userInfo: ids)
        deliverSave {
            SavedChanges(
                inserted: Array(insertedIDs), updated: Array(updatedIDs), deleted: Array(deletedIDs), permanentIDs: permanentIDs)
        }
    }

    /// Ends the event, applying delete rules even when they are deferred to the save.
    private func endEventForSave() {
        if !propagatesDeletesAtEndOfEvent { propagateDeletes() }
        endEvent()
    }

    /// Validates every pending change and throws all failures at once.
    func validatePendingChanges() throws {
        var errors: [ObjectGraphError] = []
        func collect(_ check: () throws -> Void) {
            do {
                try check()
            } catch let error as ObjectGraphError {
                errors += error.code == .multipleValidationErrors ? error.detailedErrors : [error]
            } catch {
                errors.append(ObjectGraphError(.invalidArgument, "Validation failed: \(error)."))
            }
        }
        for object in insertedInOrder { collect(object.validateForInsert) }
        for object in updatedSet { collect(object.validateForUpdate) }
        for object in deletedSet { collect(object.validateForDelete) }
        // A relationship this save writes must not point at an object this save deletes:
        // delete rules have run, so what is left is a noAction (or inverse-less) reference.
        // Only changed relationship values are looked at, so no fault fires.
        for object in insertedInOrder + Array(updatedSet) where !object.deleted {
            for relationship in object.entity.relationships {
                // (A change recorded without loading the members brings only the members added.)
                guard object.hasChange(atOrdinal: relationship.ordinal),
                    let ids = object.membersAddedWithoutLoading(atOrdinal: relationship.ordinal)
                        ?? (try? object.currentValue(for: relationship).relationshipValue)?.objectIDs
                else { continue }
                // Deleted in this context, or never saved and no longer registered (an object
                // inserted and deleted before any save has nowhere to point to; in a child, a
                // temporary ID may be an object of its parent).
                for id in ids where (registry[id]?.object).map({ $0.deleted }) ?? (id.isTemporaryID && !isChild) {
                    errors.append(ObjectGraphError(
                        .danglingReference,
                        "\(object.entity.name).\(relationship.name) of \(object.objectID) refers to \(id), which this save deletes; clear the relationship or use a nullify or cascade delete rule.",
                        entityName: object.entity.name, key: relationship.name, objectID: object.objectID))
                }
            }
        }
        if let error = ObjectGraphError.combining(errors) { throw error }
    }
}

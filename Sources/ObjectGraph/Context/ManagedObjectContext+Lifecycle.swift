import Foundation

extension ManagedObjectContext {
    /// Ends the current event: applies delete rules (when
    /// ``propagatesDeletesAtEndOfEvent`` is set), drops objects inserted and deleted in
    /// the same session, registers the event's changes with the ``undoManager`` (one undo
    /// action, in the group the event closes), and posts ``objectsDidChangeNotification`` if
    /// anything changed.
    ///
    /// It also tells the stores about the rows of objects the context forgot since the last
    /// fetch or save (``IncrementalStore/managedObjectContextDidUnregisterObjects(with:)``).
    public func processPendingChanges() {
        checkQueue("processPendingChanges()")
        endEvent()
    }

    /// ``processPendingChanges()``, for the context's own operations (checked already).
    func endEvent() {
        mergeReceivedSaves()
        flushStoreRegistrations()
        if propagatesDeletesAtEndOfEvent { propagateDeletes() }
        dropInsertedAndDeleted()
        guard let undoManager = contextUndoManager else { return postObjectsDidChange() }
        registerUndo(with: undoManager)
        postObjectsDidChange()
        undoManager.endEvent()
    }

    /// Applies every pending deletion's delete rules.
    func propagateDeletes() {
        // (Most events delete nothing: no empty array stored again.)
        guard !deletesToPropagate.isEmpty else { return }
        var next = 0
        defer { deletesToPropagate = [] }
        while next < deletesToPropagate.count {
            let object = deletesToPropagate[next]
            next += 1
            object.prepareForDeletion()
            for relationship in object.entity.relationships {
                guard let value = try? object.currentValue(for: relationship).relationshipValue else { continue }
                switch relationship.deleteRule {
                case .nullify:
                    for id in value.objectIDs { try? object.inverseRemove(id, relationship) }
                case .cascade:
                    for id in value.objectIDs {
                        let destination = self.object(with: id)
                        if (try? destination.fulfillFault()) != nil || destination.inserted {
                            delete(destination)
                        }
                    }
                case .deny, .noAction:
                    break
                }
            }
        }
    }

    /// Objects inserted then deleted before a save never reach a store: forget them. One
    /// inserted in this event is in neither of its sets; one inserted in an earlier event (whose
    /// notification reported it) is reported deleted, so observers let go of it too.
    func dropInsertedAndDeleted() {
        guard !insertedInOrder.isEmpty else { return }
        let dropped = insertedInOrder.filter(\.deleted)
        guard !dropped.isEmpty else { return }
        insertedInOrder.removeAll(where: \.deleted)
        for object in dropped {
            deletedSet.remove(object)
            if event.inserted.remove(object) != nil { event.deleted.remove(object) }
            unregister(object)
        }
    }

    func postObjectsDidChange() {
        // An event that changed nothing (a fetch's) posts nothing: no new event made.
        if event.isEmpty && event.propertyChanges.isEmpty { return }
        let finished = event
        event = ChangeEvent()
        guard !finished.isEmpty else { return }
        var info: [AnyHashable: Any] = [:]
        if !finished.inserted.isEmpty { info[NotificationKey.insertedObjects.rawValue] = finished.inserted }
        let updated = finished.updated.subtracting(finished.deleted).filter { !$0.inserted }
        if !updated.isEmpty { info[NotificationKey.updatedObjects.rawValue] = updated }
        if !finished.deleted.isEmpty { info[NotificationKey.deletedObjects.rawValue] = finished.deleted }
        if !finished.refreshed.isEmpty { info[NotificationKey.refreshedObjects.rawValue] = finished.refreshed }
        if !finished.invalidated.isEmpty { info[NotificationKey.invalidatedObjects.rawValue] = finished.invalidated }
        NotificationCenter.default.post(name: Self.objectsDidChangeNotification, object: self, userInfo: info)
    }

    /// Discards every unsaved change: inserted objects leave the context, deleted ones
    /// come back, updated ones return to their last committed values, and the
    /// ``undoManager`` loses every action. Nothing is read from the stores.
    public func rollback() {
        checkQueue("rollback()")
        let inserted = insertedInOrder
        let updated = updatedSet
        let deleted = deletedSet
        insertedInOrder = []
        updatedSet = []
        deletedSet = []
        deletesToPropagate = []
        lockedObjects = []
        event = ChangeEvent()
        contextUndoManager?.removeAllActions()
        for object in inserted {
            object.discardChanges()
            object.inserted = false
            object.deleted = false
            unregister(object)
        }
        for object in updated.union(deleted) where !object.inserted {
            object.discardChanges()
            object.transientChanged = false
            object.deleted = false
        }
    }

    /// Forgets every object: registered objects leave the context (and their rows are
    /// unregistered from the stores), unsaved changes are lost. Posts
    /// ``objectsDidChangeNotification`` with the IDs of every object it forgot under
    /// ``NotificationKey/invalidatedAllObjects``.
    public func reset() {
        checkQueue("reset()")
        flushStoreRegistrations()
        let entries = registry.entries
        let objects = entries.map(\.registration.object)
        let ids = entries.map(\.id)
        let registered = entries.compactMap { $0.registration.inStore ? $0.id : nil }
        insertedInOrder = []
        updatedSet = []
        deletedSet = []
        deletesToPropagate = []
        lockedObjects = []
        event = ChangeEvent()
        contextUndoManager?.removeAllActions()
        for object in objects {
            object.managedObjectContext = nil
            object.inserted = false
            object.deleted = false
            object.prefetchedDestinations = []
        }
        registry.removeAll()
        retainedObjects = [:]
        prefetchedRows = [:]
        if !registered.isEmpty { registrar?.contextDidUnregister(registered) }
        NotificationCenter.default.post(
            name: Self.objectsDidChangeNotification, object: self,
            userInfo: [NotificationKey.invalidatedAllObjects.rawValue: ids])
    }

    /// Updates an object with its store's latest values.
    ///
    /// - Parameters:
    ///   - object: A registered object.
    ///   - mergeChanges: `false` turns the object into a fault and discards its pending
    ///     changes (and transient values); `true` reloads the stored values and reapplies
    ///     the pending changes over them, keeping transient values.
    ///
    /// Values cached by the coordinator are reused while they are younger than
    /// ``stalenessInterval``. Inserted objects are not affected.
    public func refresh(_ object: ManagedObject, mergeChanges: Bool) {
        checkQueue("refresh(_:mergeChanges:)")
        guard object.managedObjectContext === self, !object.inserted else { return }
        if mergeChanges {
            guard !object.isFault else { return }
            let pending = object.changes
            let transient = object.transientValues
            // Reloaded from the row the values came from while it is fresh enough (Core
            // Data: "from the persistent store or the last cached state"), else the store;
            // a child's from its parent, always.
            object.keepRowAsFault()
            if isChild { object.faultRow = nil }
            object.changes.removeAll()
            if (try? object.fulfillFault()) == nil {
                // The row is gone or unreachable: keep what the object had.
                object.changes = pending
                event.invalidated.insert(object)
                return
            }
            object.transientValues = transient
            pending.forEachChange { ordinal, value in
                let property = object.entity.properties[ordinal]
                if let committed = try? object.committedValue(for: property), sameValue(committed, value, for: property) { return }
                object.changes.set(value, for: property)
            }
            if object.changes.isEmpty && !object.transientChanged && !object.deleted { updatedSet.remove(object) }
        } else {
            object.turnIntoFault()
            // A child's fault fires from its parent's current values, not the row it had.
            if isChild { object.faultRow = nil }
            updatedSet.remove(object)
            if object.deleted {
                object.deleted = false
                deletedSet.remove(object)
                deletesToPropagate.removeAll { $0 === object }
            }
        }
        event.refreshed.insert(object)
    }
}

import Foundation

/// What one event of a context changed, as its undo action replays it backwards: the
/// property changes in the order they were made, and the objects inserted and deleted.
struct UndoRecord {
    let changes: [PropertyChange]
    let inserted: [ManagedObject]
    let deleted: [ManagedObject]
}

extension ManagedObjectContext {
    /// The undo manager that records this context's changes, one undo group per event (see
    /// ``ManagedUndoManager``); `nil` by default, as on iOS: a context without one records
    /// nothing and pays nothing.
    ///
    /// For example:
    ///
    /// ```swift
    /// context.undoManager = ManagedUndoManager()
    /// try person.setValue("Ada", forKey: "name")
    /// context.processPendingChanges()      // ends the event: one undo group
    /// try context.undo()                    // the name is back to what it was
    /// try context.redo()
    /// ```
    ///
    /// Each ``processPendingChanges()`` (which every fetch and save runs first) registers the
    /// event's changes as one undo action: attribute and relationship changes (both ends of a
    /// relationship, as the context changed them), inserts, and deletes with what their delete
    /// rules did. Undoing them makes new changes, which the next save writes, also after a
    /// save. ``rollback()`` and ``reset()`` remove every action. Changes made through primitive
    /// setters, and values merged from other contexts, are not recorded (as in Core Data).
    public var undoManager: ManagedUndoManager? {
        get { contextUndoManager }
        set {
            checkQueue("undoManager")
            contextUndoManager = newValue
            recordsPropertyChanges = newValue != nil
            if newValue == nil { event.propertyChanges = [] }
        }
    }

    /// Reverts the latest group of changes of ``undoManager``, first ending the current event
    /// (its changes are the latest group). Does nothing without an undo manager.
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidArgument`` when the undo manager has an
    ///   explicit undo group open.
    public func undo() throws {
        checkQueue("undo()")
        endEvent()
        try contextUndoManager?.undo()
    }

    /// Replays the latest group ``undo()`` reverted. Does nothing without an undo manager.
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidArgument`` when the undo manager has an
    ///   explicit undo group open.
    public func redo() throws {
        checkQueue("redo()")
        endEvent()
        try contextUndoManager?.redo()
    }

    /// Registers the event's changes with the undo manager (called at the end of each event,
    /// before its notification).
    func registerUndo(with undoManager: ManagedUndoManager) {
        let record = UndoRecord(changes: event.propertyChanges, inserted: Array(event.inserted), deleted: Array(event.deleted))
        guard !record.changes.isEmpty || !record.inserted.isEmpty || !record.deleted.isEmpty else { return }
        // Throws only when the manager groups nothing by event and no group is open: the
        // application chose to group by hand and has not; there is no group to record into.
        try? undoManager.registerUndo(withTarget: self) { context in context.applyUndo(record) }
    }

    /// Replays an event backwards, as one event of its own (whose changes the undo manager
    /// records as the redo): deleted objects come back, property changes are reverted from
    /// the last to the first, inserted objects go.
    private func applyUndo(_ record: UndoRecord) {
        for object in record.deleted { restoreDeleted(object) }
        var touched: Set<ManagedObject> = []
        for change in record.changes.reversed() {
            let object = change.object
            guard object.managedObjectContext === self else { continue }
            touched.insert(object)
            switch change.kind {
            case .value(let old, _):
                _ = try? object.record(old, for: change.property)
            case .members(let added, let removed):
                guard let relationship = change.property as? RelationshipDescription else { continue }
                for id in added.reversed() { _ = try? object.changeMember(id, of: relationship, adding: false) }
                for id in removed.reversed() { _ = try? object.changeMember(id, of: relationship, adding: true) }
            }
        }
        // A to-many relationship put back as committed is no change any more (the setters keep
        // a changed to-many pending, as it usually is not back).
        for object in touched where object.dropPendingValuesEqualToCommitted() && !object.transientChanged && !object.inserted && !object.deleted {
            updatedSet.remove(object)
        }
        for object in record.inserted { removeInserted(object) }
        endEvent()
    }

    /// Brings back an object whose deletion is undone: still here and marked deleted, it is
    /// unmarked; gone (an insert dropped when it was deleted, or a delete saved since), it is
    /// inserted again with the values it had, under its ID.
    private func restoreDeleted(_ object: ManagedObject) {
        if object.managedObjectContext === self {
            guard object.deleted else { return }
            object.deleted = false
            deletedSet.remove(object)
            deletesToPropagate.removeAll { $0 === object }
            if !object.inserted && object.hasPendingValues { updatedSet.insert(object) }
            event.inserted.insert(object)
            return
        }
        guard object.managedObjectContext == nil, registry[object.objectID] == nil else { return }
        if object.snapshot != nil {
            // Deleted after a save: its committed values become the values it is inserted with.
            object.changes.reserve(object.entity.properties.count)
            for property in object.entity.storedProperties where !object.hasChange(atOrdinal: property.ordinal) {
                if let value = try? object.committedValue(for: property) { object.changes.set(value, for: property) }
            }
        }
        object.managedObjectContext = self
        object.inserted = true
        object.deleted = false
        insertedInOrder.append(object)
        register(object)
        event.inserted.insert(object)
    }

    /// Takes back an insert: an object not saved yet leaves at the end of the event (as one
    /// inserted and deleted does); one saved since is deleted, and the next save deletes it.
    private func removeInserted(_ object: ManagedObject) {
        guard object.managedObjectContext === self, !object.deleted else { return }
        if object.inserted {
            object.deleted = true
            deletedSet.insert(object)
            event.deleted.insert(object)
        } else {
            delete(object)
        }
    }
}

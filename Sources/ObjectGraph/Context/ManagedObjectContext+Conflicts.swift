import Foundation

extension ManagedObjectContext {
    /// Marks an unchanged object for optimistic locking: the next ``save()`` fails (or, with a
    /// resolving ``mergePolicy``, resolves the conflict) if the object's row changed or went
    /// in its store since this context read it. Changed and deleted objects are always
    /// checked.
    ///
    /// The object's values are loaded now, so the check compares the version read now. The
    /// mark lasts until the next save succeeds, or ``rollback()`` or ``reset()``. Objects of
    /// other contexts, and inserted objects, are left alone.
    public func detectConflicts(for object: ManagedObject) {
        checkQueue("detectConflicts(for:)")
        guard object.managedObjectContext === self, !object.inserted, !object.objectID.isTemporaryID else { return }
        // A row that cannot be read is found missing by the save, as a conflict.
        try? object.fulfillFault()
        lockedObjects.insert(object)
    }

    /// Resolves one conflict by a policy of type `type` (anything but
    /// ``MergePolicy/MergeType/error``): see ``MergePolicy`` for what each does.
    func resolve(_ conflict: MergeConflict, by type: MergePolicy.MergeType) throws {
        let object = conflict.sourceObject
        guard type != .error else { return }
        if conflict.isDeletedInStore {
            forgetDeletedElsewhere(object)
            return
        }
        if type == .rollback {
            // The object's changes (its delete too) are discarded; it fires from the store's
            // current row.
            refresh(object, mergeChanges: false)
            object.faultRow = nil
            lockedObjects.remove(object)
            return
        }
        // Before the store's values replace the committed ones: each property's committed
        // value and pending change (a to-many relationship neither loaded nor changed is
        // left to the store: neither side of this context knows it).
        var before: [(property: PropertyDescription, committed: PropertyValue?, pending: PropertyValue?)] = []
        if !object.deleted {
            for property in object.entity.storedProperties {
                let pending = object.changes[property.ordinal]
                if property.slotKind == .toMany, pending == nil, object.hasFault(forRelationship: unsafeDowncast(property, to: RelationshipDescription.self)) {
                    continue
                }
                before.append((property, try? object.committedValue(for: property), pending))
            }
        }
        do {
            try reloadFromStore(object)
        } catch let error as ObjectGraphError where error.code == .objectNotFound {
            forgetDeletedElsewhere(object)
            return
        }
        // A delete is saved at the store's version; a locked object is checked at it.
        guard !object.deleted else { return }
        for (property, committed, pending) in before {
            let stored = try object.committedValue(for: property)
            let merged: PropertyValue?
            switch type {
            case .overwrite:
                merged = pending ?? committed
            case .mergeByPropertyObjectTrump:
                guard let pending else { continue }
                merged = property.slotKind == .toMany
                    ? Self.mergeMembers(stored: stored, ours: pending, base: committed, oursWin: true) : pending
            case .mergeByPropertyStoreTrump:
                guard let pending else { continue }
                if property.slotKind == .toMany {
                    merged = Self.mergeMembers(stored: stored, ours: pending, base: committed, oursWin: false)
                } else {
                    // The store changed the property since this context read it: its value stays.
                    let storeChanged = committed.map { !sameValue($0, stored, for: property) } ?? true
                    merged = storeChanged ? nil : pending
                }
            case .error, .rollback:
                merged = nil
            }
            if let merged, !sameValue(merged, stored, for: property) {
                object.changes.reserve(object.entity.properties.count)
                object.changes.set(merged, for: property)
            }
        }
        if object.changes.isEmpty {
            updatedSet.remove(object)
        } else if !object.inserted {
            updatedSet.insert(object)
        }
    }

    /// Reads an object's row from its store again (never a row it kept), dropping its pending
    /// changes: the caller took them.
    ///
    /// - Throws: ``ObjectGraphError/Code/objectNotFound`` when the row is gone.
    private func reloadFromStore(_ object: ManagedObject) throws {
        object.discardChanges()
        object.keepRowAsFault()
        object.faultRow = nil
        try object.fulfillFault()
    }

    /// A to-many relationship merged member by member: `stored` is the store's members now,
    /// `ours` this context's, `base` what this context read (`nil`: unknown, taken as the
    /// store's). A member only one side added or removed follows that side; one both sides
    /// changed differently follows `ours` when `oursWin`, else the store. The store's order
    /// comes first, then the members only `ours` has, in its order.
    static func mergeMembers(stored: PropertyValue, ours: PropertyValue, base: PropertyValue?, oursWin: Bool) -> PropertyValue {
        let storedIDs = stored.relationshipValue?.objectIDs ?? []
        let ourIDs = ours.relationshipValue?.objectIDs ?? []
        let inStore = Set(storedIDs), inOurs = Set(ourIDs)
        let inBase = base.map { Set($0.relationshipValue?.objectIDs ?? []) } ?? inStore
        func keeps(_ id: ManagedObjectID) -> Bool {
            let storeChanged = inStore.contains(id) != inBase.contains(id)
            let ourChanged = inOurs.contains(id) != inBase.contains(id)
            if storeChanged && ourChanged { return oursWin ? inOurs.contains(id) : inStore.contains(id) }
            return ourChanged ? inOurs.contains(id) : inStore.contains(id)
        }
        var merged = storedIDs.filter(keeps)
        merged += ourIDs.filter { !inStore.contains($0) && keeps($0) }
        return .relationship(.toMany(merged))
    }
}

import Foundation

// What a store reads to save an object: its values by ordinal, the changed ones, and what
// changed in a to-many relationship one member at a time.
extension ManagedObject {
    /// The members added to the to-many relationship at `ordinal` when its change was
    /// recorded without loading its committed members (``UnloadedMembers``); `nil` otherwise.
    func membersAddedWithoutLoading(atOrdinal ordinal: Int) -> [ManagedObjectID]? {
        pending.unloadedMembers(at: ordinal)?.added.ids
    }

    /// What changed in the to-many relationship at `ordinal` (``PropertyDescription/ordinal``)
    /// since its committed members, when its pending members were made from them and changed
    /// one at a time (as inverse maintenance and `mutableSetValue` changes do), few enough to
    /// be kept, and the committed values are still those of the row the members were read
    /// with (no refresh or merge brought another version since): the members added and those
    /// removed. `nil` otherwise: a store saving the object then compares the committed members
    /// with the pending ones.
    ///
    /// Inverse maintenance changes a relationship whose members were never loaded without
    /// loading them (an object deleted leaves each of its inverse to-manys); this gives those
    /// changes without loading the members either. Reading the relationship's value (through
    /// ``changedValues()``, ``changedStoredValues()``, ``storedValues(skippingUnloadedRelationships:)``
    /// or a key) loads them and applies the changes.
    public func memberChanges(atOrdinal ordinal: Int) -> (added: [ManagedObjectID], removed: [ManagedObjectID])? {
        if let members = pending.unloadedMembers(at: ordinal) {
            guard let committed = snapshot, committed.version == members.baseVersion else { return nil }
            return (members.added.ids, members.removed.ids)
        }
        guard let journal = pending.journal(at: ordinal), let committed = snapshot, committed.version == journal.baseVersion else {
            return nil
        }
        return (journal.added, journal.removed)
    }

    /// The values a store saves for this object, in the order of its entity's
    /// ``EntityDescription/properties`` (by ``PropertyDescription/ordinal``): the pending
    /// value of each stored property, else its committed one; `nil` for transient
    /// properties and, with `skippingUnloadedRelationships`, for relationships whose
    /// destinations were never loaded or changed (an update leaves those as stored).
    ///
    /// Stores call it from ``IncrementalStore/execute(_:with:)`` for a save request's
    /// objects; it reads no name and builds no dictionary.
    ///
    /// - Throws: the store's error if a fault must be fulfilled and cannot be.
    public func storedValues(skippingUnloadedRelationships: Bool) throws -> [PropertyValue?] {
        var values = [PropertyValue?](filling: nil, count: entity.properties.count)
        for property in entity.storedProperties {
            if skippingUnloadedRelationships, property.slotKind != .attribute, !pending.contains(property.ordinal), !isNew,
                snapshot?.isLoaded(property.ordinal) != true
            {
                continue
            }
            values[property.ordinal] = try currentValue(for: property)
        }
        return values
    }

    /// The uncommitted values of the object's stored properties by ordinal
    /// (``PropertyDescription/ordinal``), `nil` for every property without one: what an update
    /// changes in the row it read (``committedVersion``). A store that writes the object over
    /// that very version of its row takes the other fields from the row as they are, decoding
    /// nothing of the object's. Reads no value and fires no fault.
    public func changedStoredValues() -> [PropertyValue?] { changedStoredValues(leavingUnloadedMembers: false) }

    /// ``changedStoredValues()``; with `leavingUnloadedMembers`, a relationship whose member
    /// changes were recorded without loading its committed members gets no value (`nil`, as if
    /// unchanged, though ``hasChange(atOrdinal:)`` says it changed) and loads nothing: for a
    /// store that writes those changes from ``memberChanges(atOrdinal:)``, which gives them
    /// whenever they are based on the row version the object holds (when one is not, the
    /// members are loaded here and the relationship gets its value).
    package func changedStoredValues(leavingUnloadedMembers: Bool) -> [PropertyValue?] {
        if pending.hasUnloadedMembers {
            // Changes based on another row version than the object's cannot be written as changes.
            var based = leavingUnloadedMembers
            if based { pending.forEachChange({ _, _ in }, unloaded: { based = based && memberChanges(atOrdinal: $0) != nil }) }
            if !based { loadUnloadedMembers() }
        }
        var values = [PropertyValue?](filling: nil, count: entity.properties.count)
        pending.forEachChange({ ordinal, value in
            if !entity.properties[ordinal].isTransient { values[ordinal] = value }
        }, unloaded: { _ in })
        return values
    }
}

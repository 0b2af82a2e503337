import Foundation

/// One change of one property, as recorded during an event.
///
/// Recorded for changes made through the public setters while
/// ``ManagedObjectContext/recordsPropertyChanges`` is on, which a context with an undo
/// manager turns on: its undo actions replay them backwards. Off by default, so a bulk
/// insert records nothing per property.
struct PropertyChange {
    /// How a property changed.
    enum Kind {
        /// The whole value was replaced.
        case value(old: PropertyValue, new: PropertyValue)
        /// Destinations were added to or removed from a to-many relationship (kept as a
        /// delta so that building a large relationship records O(1) per step).
        case members(added: [ManagedObjectID], removed: [ManagedObjectID])
    }

    /// The object that changed.
    let object: ManagedObject
    /// The property that changed.
    let property: PropertyDescription
    /// What changed.
    let kind: Kind
}

/// What happened in a context since the last ``ManagedObjectContext/processPendingChanges()``:
/// the objects of the next objects-did-change notification, and each property change.
struct ChangeEvent {
    var inserted: Set<ManagedObject> = []
    var updated: Set<ManagedObject> = []
    var deleted: Set<ManagedObject> = []
    var refreshed: Set<ManagedObject> = []
    var invalidated: Set<ManagedObject> = []
    var propertyChanges: [PropertyChange] = []

    var isEmpty: Bool {
        inserted.isEmpty && updated.isEmpty && deleted.isEmpty && refreshed.isEmpty && invalidated.isEmpty
    }
}

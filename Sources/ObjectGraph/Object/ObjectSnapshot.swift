import Foundation

/// The last committed (fetched or saved) values of an object, with the version they
/// belong to: one slot per property ordinal of the object's entity.
///
/// A snapshot is a value with copy-on-write storage: the node a store returns, the
/// coordinator's cached row and every context's object share one buffer until one of them
/// changes it. That is what the features built on it compare: conflict detection and merge
/// policies put the object's snapshot, the cached row and the stored row side by side;
/// a child context's objects start from the parent's snapshot; undo restores slots.
struct ObjectSnapshot {
    /// Committed values by property ordinal; `nil` where nothing is loaded (a relationship
    /// not fetched yet, a transient property). A `nil` attribute slot reads as null.
    var slots: [PropertyValue?]
    /// The store version these values belong to (0 for an object never saved).
    var version: UInt64

    /// An empty snapshot for an entity (every slot unloaded).
    init(entity: EntityDescription) {
        slots = Array(repeating: nil, count: entity.properties.count)
        version = 0
    }

    /// The values of a store's node; shares the node's slots when they are in this
    /// entity's layout.
    init(node: IncrementalStoreNode, entity: EntityDescription) {
        version = node.version
        slots = node.slots(in: entity)
    }

    /// The committed value of a property, if loaded (attributes are always "loaded":
    /// a missing attribute is null).
    func value(for property: PropertyDescription) -> PropertyValue? {
        if let value = slots[property.ordinal] { return value }
        return property.slotKind == .attribute ? .attribute(.null) : nil
    }

    /// Whether the relationship at `ordinal` has its destinations loaded.
    func isLoaded(_ ordinal: Int) -> Bool { slots[ordinal] != nil }

    /// Stores a value as committed.
    mutating func set(_ value: PropertyValue, at ordinal: Int) {
        slots[ordinal] = value
    }
}

/// Whether two values of one property are the same, ignoring order for unordered
/// to-many relationships.
func sameValue(_ a: PropertyValue, _ b: PropertyValue, for property: PropertyDescription) -> Bool {
    if case .relationship(.toMany(let x)) = a, case .relationship(.toMany(let y)) = b {
        guard x.count == y.count else { return false }
        if let relationship = property as? RelationshipDescription, !relationship.isOrdered {
            return x == y || Set(x) == Set(y)
        }
        return x == y
    }
    return a == b
}

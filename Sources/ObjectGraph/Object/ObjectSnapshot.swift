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
    /// not fetched yet, a transient property). A `nil` attribute slot reads as null. Empty
    /// until a value is set when ``lazyValues`` holds the values (no array per fetched
    /// object); read through ``slot(_:)``.
    var slots: [PropertyValue?]
    /// The store version these values belong to (0 for an object never saved).
    var version: UInt64
    /// Committed values not decoded yet: the row a store read. An attribute is decoded from
    /// it at each read (row bytes are immutable, and most are read once), and so is a to-one
    /// destination; a to-many one is decoded once and kept in `slots`. Its values never hold
    /// temporary IDs.
    var lazyValues: (any LazyNodeValues)?
    /// The entity's property count: the length of `slots` once it has any.
    let propertyCount: Int
    /// For values read from a store row: the coordinator's save generation before the read
    /// and when it happened (see ``init(node:entity:generation:loadedAt:)``), so the row can be kept when the object turns
    /// into a fault. `nil` once the snapshot holds saved values.
    var readAt: (generation: UInt64, loadedAt: Double)?

    /// An empty snapshot for an entity (every slot unloaded).
    init(entity: EntityDescription) {
        propertyCount = entity.properties.count
        slots = Array(filling: nil, count: propertyCount)
        version = 0
    }

    /// Committed values `slots` (one per property of `entity`) at `version`, made by a save.
    init(entity: EntityDescription, slots: [PropertyValue?], version: UInt64) {
        propertyCount = entity.properties.count
        self.slots = slots
        self.version = version
    }

    /// The values of a row a store read for an object, with when they were read: the
    /// coordinator's save `generation` before the read, and the time (`loadedAt`, seconds since
    /// the reference date; NaN for a context that does not bound staleness, so that the clock
    /// is not read per object). Shares the node's slots or row.
    init(node: consuming IncrementalStoreNode, entity: EntityDescription, generation: UInt64, loadedAt: Double) {
        self.init(node: node, entity: entity)
        readAt = (generation, loadedAt)
    }

    /// These values as the row a fault of `entity` keeps (``ManagedObject/faultRow``), or `nil`
    /// when they are not a store's row (values a save committed): the row's bytes, version and
    /// when it was read. To-many destinations are dropped (firing the fault again leaves them to
    /// load, as Core Data's refreshed objects do), and so is every value decoded from the row's
    /// bytes; a node's values without row bytes stay, as they are the row.
    func asFaultRow(of entity: EntityDescription) -> ObjectSnapshot? {
        guard readAt != nil else { return nil }
        if slots.isEmpty { return self }
        var row = self
        if lazyValues != nil {
            row.slots = []
        } else {
            for relationship in entity.relationships where relationship.isToMany && relationship.ordinal < row.slots.count {
                row.slots[relationship.ordinal] = nil
            }
        }
        return row
    }

    /// The values of a store's node; shares the node's slots (or its row) when they are in
    /// this entity's layout.
    init(node: consuming IncrementalStoreNode, entity: EntityDescription) {
        version = node.version
        propertyCount = entity.properties.count
        if entity === node.objectID.entity, let lazy = node.lazyValues {
            slots = node.slots
            lazyValues = lazy
        } else {
            slots = node.slots(in: entity)
        }
    }

    /// The value set in the slot at `ordinal`, if any (not one still in ``lazyValues``).
    func slot(_ ordinal: Int) -> PropertyValue? {
        ordinal < slots.count ? slots[ordinal] : nil
    }

    /// The committed value of a property, if loaded (attributes are always "loaded":
    /// a missing attribute is null), decoding it from the store's row when it is still there.
    ///
    /// - Throws: the store's error when the stored value does not decode.
    mutating func value(for property: PropertyDescription) throws -> PropertyValue? {
        let ordinal = property.ordinal
        if let value = slot(ordinal) { return value }
        if let lazyValues, let value = try lazyValues.value(atOrdinal: ordinal) {
            // A to-one destination is a reference in the row, decoded again at each read like
            // an attribute (cheaper than the slot array a first kept value would allocate);
            // a to-many one is kept.
            if property.slotKind == .toMany { set(value, at: ordinal) }
            return value
        }
        return property.slotKind == .attribute ? .attribute(.null) : nil
    }

    /// The committed value of the attribute at `ordinal` (null when nothing holds it),
    /// decoded from the store's row when it is still there: ``value(for:)`` for an attribute.
    ///
    /// - Throws: the store's error when the stored value does not decode.
    func attribute(at ordinal: Int) throws -> AttributeValue {
        if let value = slot(ordinal) { return value.attributeValue ?? .null }
        return try lazyValues?.attribute(atOrdinal: ordinal) ?? .null
    }

    /// Whether the relationship at `ordinal` has its destinations loaded.
    func isLoaded(_ ordinal: Int) -> Bool { slot(ordinal) != nil || lazyValues?.holds(ordinal: ordinal) == true }

    /// Forgets the committed value at `ordinal` (a to-many relationship a save changed
    /// without loading it): the next read loads it from the store.
    mutating func unload(at ordinal: Int) {
        if ordinal < slots.count { slots[ordinal] = nil }
    }

    /// Stores a value as committed.
    mutating func set(_ value: PropertyValue, at ordinal: Int) {
        if slots.count < propertyCount { slots += repeatElement(nil, count: propertyCount - slots.count) }
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

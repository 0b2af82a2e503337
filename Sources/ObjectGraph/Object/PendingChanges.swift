import Foundation

/// The destinations of a to-many relationship while it is being changed: an ordered list
/// with constant-time membership, appending and (for unordered relationships) removal, so
/// that building a relationship of n objects one at a time costs O(n), not O(n²).
///
/// Short lists (most relationships) are searched linearly; a position table is built only
/// once a list past ``indexedCount`` is changed, so small lists hash nothing, and a list
/// whose IDs were replaced (a save's temporary IDs, just before its changes are committed)
/// builds none until it changes again.
struct ObjectIDList: Equatable {
    private(set) var ids: [ManagedObjectID] = []
    /// Position of each ID, kept only while ``indexed``.
    private var positions: [ManagedObjectID: Int] = [:]
    /// Whether ``positions`` holds every ID's position; only lists longer than
    /// ``indexedCount`` are indexed, and only once they change.
    private var indexed = false
    /// Whether removal must keep the order (ordered relationships).
    let ordered: Bool

    /// The length above which membership goes through a position table.
    static let indexedCount = 16

    init(_ ids: [ManagedObjectID], ordered: Bool) {
        self.ordered = ordered
        self.ids.reserveCapacity(ids.count)
        for id in ids { append(id) }
    }

    /// A list of IDs known to be distinct (a one-to-one mapping of another list's IDs); its
    /// position table is built when it first changes.
    init(distinct ids: [ManagedObjectID], ordered: Bool) {
        self.ordered = ordered
        self.ids = ids
    }

    /// The list with each ID replaced by its image in `map` (temporary to permanent).
    func replacing(_ map: [ManagedObjectID: ManagedObjectID]) -> ObjectIDList {
        ObjectIDList(distinct: ids.map { map[$0] ?? $0 }, ordered: ordered)
    }

    static func == (a: ObjectIDList, b: ObjectIDList) -> Bool { a.ordered == b.ordered && a.ids == b.ids }

    private func position(of id: ManagedObjectID) -> Int? {
        indexed ? positions[id] : ids.firstIndex(of: id)
    }

    /// Builds the position table of a long list that has none.
    private mutating func index() {
        guard !indexed, ids.count > Self.indexedCount else { return }
        positions.reserveCapacity(ids.count * 2)
        for (index, member) in ids.enumerated() { positions[member] = index }
        indexed = true
    }

    func contains(_ id: ManagedObjectID) -> Bool { position(of: id) != nil }

    /// Appends `id` unless present; returns whether it was added.
    @discardableResult
    mutating func append(_ id: ManagedObjectID) -> Bool {
        index()
        guard position(of: id) == nil else { return false }
        ids.append(id)
        if indexed {
            positions[id] = ids.count - 1
        } else {
            index()
        }
        return true
    }

    /// Removes `id` if present; returns whether it was removed. Unordered lists move
    /// their last element into the gap.
    @discardableResult
    mutating func remove(_ id: ManagedObjectID) -> Bool {
        index()
        guard let index = indexed ? positions.removeValue(forKey: id) : ids.firstIndex(of: id) else { return false }
        if ordered {
            ids.remove(at: index)
            if indexed { for position in index..<ids.count { positions[ids[position]] = position } }
        } else {
            let last = ids.removeLast()
            if index < ids.count {
                ids[index] = last
                if indexed { positions[last] = index }
            }
        }
        if indexed && ids.count <= Self.indexedCount {
            positions = [:]
            indexed = false
        }
        return true
    }
}

/// An object's uncommitted values, one slot per property ordinal (allocated at the first
/// change): attribute and to-one values as given, to-many relationships as
/// ``ObjectIDList``s that change one member at a time. The committed value of a changed
/// slot stays in the object's ``ObjectSnapshot``, so old and new sit side by side.
struct PendingChanges {
    private enum Slot {
        case value(PropertyValue)
        case members(ObjectIDList)

        var value: PropertyValue {
            switch self {
            case .value(let value): return value
            case .members(let list): return .relationship(.toMany(list.ids))
            }
        }
    }

    private var slots: [Slot?] = []
    /// How many slots hold a change.
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// The pending value of the property at `ordinal`, if it has one.
    subscript(ordinal: Int) -> PropertyValue? {
        guard ordinal < slots.count, let slot = slots[ordinal] else { return nil }
        return slot.value
    }

    /// Whether the property at `ordinal` has a pending value.
    func contains(_ ordinal: Int) -> Bool { ordinal < slots.count && slots[ordinal] != nil }

    /// Calls `body` with each pending value and its ordinal, in order (no array of ordinals
    /// made, no empty slot copied).
    func forEachChange(_ body: (_ ordinal: Int, _ value: PropertyValue) throws -> Void) rethrows {
        for ordinal in slots.indices {
            if case let slot? = slots[ordinal] { try body(ordinal, slot.value) }
        }
    }

    /// Every pending value, by property name.
    func all(in entity: EntityDescription) -> [String: PropertyValue] {
        var result: [String: PropertyValue] = [:]
        for ordinal in slots.indices { if let slot = slots[ordinal] { result[entity.properties[ordinal].name] = slot.value } }
        return result
    }

    /// Makes the slots for an entity of `count` properties before the first change, so
    /// later changes never grow the table one property at a time.
    mutating func reserve(_ count: Int) {
        if slots.count < count { slots.append(contentsOf: repeatElement(nil, count: count - slots.count)) }
    }

    /// Sets (or, with `nil`, clears) the pending value of a property.
    mutating func set(_ value: PropertyValue?, for property: PropertyDescription) {
        let ordinal = property.ordinal
        if ordinal >= slots.count {
            guard value != nil else { return }
            slots.append(contentsOf: repeatElement(nil, count: ordinal + 1 - slots.count))
        }
        let had = slots[ordinal] != nil
        if let value {
            // The slot kind says which properties are to-many: no dynamic cast per change.
            if property.slotKind == .toMany, case .relationship(.toMany(let ids)) = value {
                let relationship = unsafeDowncast(property, to: RelationshipDescription.self)
                slots[ordinal] = .members(ObjectIDList(ids, ordered: relationship.isOrdered))
            } else {
                slots[ordinal] = .value(value)
            }
            if !had { count += 1 }
        } else {
            slots[ordinal] = nil
            if had { count -= 1 }
        }
    }

    /// Changes the members of a to-many relationship in place; the relationship must
    /// already have a pending value. Returns what `body` returns.
    mutating func updateMembers(of relationship: RelationshipDescription, _ body: (inout ObjectIDList) -> Bool) -> Bool {
        let ordinal = relationship.ordinal
        if ordinal >= slots.count { slots.append(contentsOf: repeatElement(nil, count: ordinal + 1 - slots.count)) }
        // Taking the list out of its slot leaves it uniquely referenced, so `body` mutates
        // it without copying.
        var list: ObjectIDList
        switch slots[ordinal] {
        case .members(let existing)?: list = existing
        case .value(.relationship(.toMany(let ids)))?: list = ObjectIDList(ids, ordered: relationship.isOrdered)
        default:
            list = ObjectIDList([], ordered: relationship.isOrdered)
            count += 1
        }
        slots[ordinal] = nil
        let changed = body(&list)
        slots[ordinal] = .members(list)
        return changed
    }

    mutating func removeAll() {
        slots = []
        count = 0
    }

    /// Replaces object IDs (temporary to permanent) in every pending relationship value.
    mutating func replaceReferences(_ map: [ManagedObjectID: ManagedObjectID]) {
        for ordinal in slots.indices {
            switch slots[ordinal] {
            case .value(.relationship(.toOne(let id?)))?:
                if let new = map[id] { slots[ordinal] = .value(.relationship(.toOne(new))) }
            case .value(.relationship(.toMany(let ids)))?:
                slots[ordinal] = .value(.relationship(.toMany(ids.map { map[$0] ?? $0 })))
            case .members(let list)?:
                slots[ordinal] = .members(list.replacing(map))
            default:
                break
            }
        }
    }
}

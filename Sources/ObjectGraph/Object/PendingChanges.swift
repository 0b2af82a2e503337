import Foundation

/// The destinations of a to-many relationship while it is being changed: an ordered list
/// with constant-time membership, appending and (for unordered relationships) removal, so
/// that building a relationship of n objects one at a time costs O(n), not O(n²).
struct ObjectIDList: Equatable {
    private(set) var ids: [ManagedObjectID] = []
    private var positions: [ManagedObjectID: Int] = [:]
    /// Whether removal must keep the order (ordered relationships).
    let ordered: Bool

    init(_ ids: [ManagedObjectID], ordered: Bool) {
        self.ordered = ordered
        self.ids.reserveCapacity(ids.count)
        for id in ids { append(id) }
    }

    func contains(_ id: ManagedObjectID) -> Bool { positions[id] != nil }

    /// Appends `id` unless present; returns whether it was added.
    @discardableResult
    mutating func append(_ id: ManagedObjectID) -> Bool {
        guard positions[id] == nil else { return false }
        positions[id] = ids.count
        ids.append(id)
        return true
    }

    /// Removes `id` if present; returns whether it was removed. Unordered lists move
    /// their last element into the gap.
    @discardableResult
    mutating func remove(_ id: ManagedObjectID) -> Bool {
        guard let index = positions.removeValue(forKey: id) else { return false }
        if ordered {
            ids.remove(at: index)
            for position in index..<ids.count { positions[ids[position]] = position }
        } else {
            let last = ids.removeLast()
            if index < ids.count {
                ids[index] = last
                positions[last] = index
            }
        }
        return true
    }
}

/// An object's uncommitted values: attribute and to-one values as given, to-many
/// relationships as ``ObjectIDList``s that can change one member at a time.
struct PendingChanges {
    private var values: [String: PropertyValue] = [:]
    private var members: [String: ObjectIDList] = [:]

    var isEmpty: Bool { values.isEmpty && members.isEmpty }

    /// The pending value of a property, if it has one.
    subscript(key: String) -> PropertyValue? {
        if let list = members[key] { return .relationship(.toMany(list.ids)) }
        return values[key]
    }

    /// Every pending value, by property name.
    var all: [String: PropertyValue] {
        var result = values
        for (key, list) in members { result[key] = .relationship(.toMany(list.ids)) }
        return result
    }

    /// Sets (or, with `nil`, clears) the pending value of a property.
    mutating func set(_ value: PropertyValue?, for property: PropertyDescription) {
        let key = property.name
        if let relationship = property as? RelationshipDescription, relationship.isToMany {
            if case .relationship(.toMany(let ids))? = value {
                members[key] = ObjectIDList(ids, ordered: relationship.isOrdered)
            } else {
                members[key] = nil
            }
        } else {
            values[key] = value
        }
    }

    /// Whether a property has a pending value.
    func contains(_ key: String) -> Bool { values[key] != nil || members[key] != nil }

    /// Changes the members of a to-many relationship in place; the relationship must
    /// already have a pending value. Returns what `body` returns.
    mutating func updateMembers(of relationship: RelationshipDescription, _ body: (inout ObjectIDList) -> Bool) -> Bool {
        // Taking the list out of the dictionary leaves it uniquely referenced, so `body`
        // mutates it without copying.
        var list = members.removeValue(forKey: relationship.name) ?? ObjectIDList([], ordered: relationship.isOrdered)
        let changed = body(&list)
        members[relationship.name] = list
        return changed
    }

    mutating func removeAll() {
        values = [:]
        members = [:]
    }

    /// Replaces object IDs (temporary to permanent) in every pending relationship value.
    mutating func replaceReferences(_ map: [ManagedObjectID: ManagedObjectID]) {
        values = values.mapValues { value in
            if case .relationship(.toOne(let id?)) = value { return .relationship(.toOne(map[id] ?? id)) }
            return value
        }
        members = members.mapValues { list in
            ObjectIDList(list.ids.map { map[$0] ?? $0 }, ordered: list.ordered)
        }
    }
}

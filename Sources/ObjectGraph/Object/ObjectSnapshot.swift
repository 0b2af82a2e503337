import Foundation

/// The last committed (fetched or saved) values of an object, with the version they
/// belong to. The context compares current values against it to know what changed;
/// merge policies and conflict detection will compare its version with the store's.
struct ObjectSnapshot {
    /// Attribute values by name (stored attributes only).
    var attributes: [String: AttributeValue] = [:]
    /// To-one destinations by name; a missing key means "not loaded yet".
    var toOne: [String: ManagedObjectID?] = [:]
    /// To-many destinations by name; a missing key means the relationship is a fault.
    var toMany: [String: [ManagedObjectID]] = [:]
    /// The store version these values belong to (0 for an object never saved).
    var version: UInt64 = 0

    init() {}

    init(node: IncrementalStoreNode, entity: EntityDescription) {
        version = node.version
        for (key, value) in node.values {
            switch value {
            case .attribute(let attribute):
                if entity.attributesByName[key] != nil { attributes[key] = attribute }
            case .relationship(.toOne(let id)):
                toOne[key] = .some(id)
            case .relationship(.toMany(let ids)):
                toMany[key] = ids
            }
        }
    }

    /// The committed value of a property, if loaded.
    func value(for property: PropertyDescription) -> PropertyValue? {
        if let attribute = property as? AttributeDescription {
            return .attribute(attributes[attribute.name] ?? .null)
        }
        guard let relationship = property as? RelationshipDescription else { return nil }
        if relationship.isToMany { return toMany[relationship.name].map { .relationship(.toMany($0)) } }
        return toOne[relationship.name].map { .relationship(.toOne($0)) }
    }

    /// Stores a value as committed.
    mutating func set(_ value: PropertyValue, for key: String) {
        switch value {
        case .attribute(let attribute): attributes[key] = attribute
        case .relationship(.toOne(let id)): toOne[key] = .some(id)
        case .relationship(.toMany(let ids)): toMany[key] = ids
        }
    }
}

/// Whether two values of one property are the same, ignoring order for unordered
/// to-many relationships.
func sameValue(_ a: PropertyValue, _ b: PropertyValue, for property: PropertyDescription) -> Bool {
    if case .relationship(.toMany(let x)) = a, case .relationship(.toMany(let y)) = b, x.count != y.count {
        return false
    }
    if let relationship = property as? RelationshipDescription, relationship.isToMany, !relationship.isOrdered,
        case .relationship(.toMany(let x)) = a, case .relationship(.toMany(let y)) = b
    {
        return x.count == y.count && Set(x) == Set(y)
    }
    return a == b
}

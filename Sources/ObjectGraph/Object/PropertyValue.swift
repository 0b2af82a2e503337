import Foundation

/// The value of a relationship as a store sees it: destination IDs.
public enum RelationshipValue: Sendable, Hashable {
    /// A to-one destination, or `nil` for none.
    case toOne(ManagedObjectID?)
    /// To-many destinations, in order for ordered relationships.
    case toMany([ManagedObjectID])

    /// The destinations as a list (empty or one element for to-one).
    public var objectIDs: [ManagedObjectID] {
        switch self {
        case .toOne(let id): return id.map { [$0] } ?? []
        case .toMany(let ids): return ids
        }
    }
}

/// The value of any property as the object graph stores it: an attribute value or
/// relationship destinations by ID.
///
/// Used by ``IncrementalStoreNode``, ``ManagedObject/changedValues()`` and
/// ``ManagedObject/committedValues(forKeys:)``.
public enum PropertyValue: Sendable, Hashable, CustomStringConvertible {
    /// An attribute value.
    case attribute(AttributeValue)
    /// A relationship's destinations.
    case relationship(RelationshipValue)

    /// The attribute value, if this is one.
    public var attributeValue: AttributeValue? {
        if case .attribute(let value) = self { return value } else { return nil }
    }

    /// The relationship value, if this is one.
    public var relationshipValue: RelationshipValue? {
        if case .relationship(let value) = self { return value } else { return nil }
    }

    /// A short rendering.
    public var description: String {
        switch self {
        case .attribute(let value): return value.description
        case .relationship(.toOne(let id)): return id?.description ?? "nil"
        case .relationship(.toMany(let ids)): return "[" + ids.map(\.description).joined(separator: ", ") + "]"
        }
    }
}

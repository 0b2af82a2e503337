import Foundation

/// A value a predicate or sort descriptor reads through a key path: an attribute
/// value, a related object's ID, or the values of a to-many key path.
public enum FetchValue: Sendable, Hashable, CustomStringConvertible {
    /// An attribute value (``AttributeValue/null`` for a missing to-one destination).
    case attribute(AttributeValue)
    /// The ID of a related object.
    case object(ManagedObjectID)
    /// The values reached through a to-many relationship, or the constants of an `IN` list.
    case collection([FetchValue])

    /// No value.
    public static let null = FetchValue.attribute(.null)

    /// The attribute value, if this is one.
    public var attributeValue: AttributeValue? {
        if case .attribute(let value) = self { return value } else { return nil }
    }

    /// The object ID, if this is one.
    public var objectID: ManagedObjectID? {
        if case .object(let id) = self { return id } else { return nil }
    }

    /// Whether this is null.
    public var isNull: Bool { attributeValue?.isNull ?? false }

    /// A short rendering.
    public var description: String {
        switch self {
        case .attribute(let value): return value.description
        case .object(let id): return id.description
        case .collection(let values): return "[" + values.map(\.description).joined(separator: ", ") + "]"
        }
    }
}

extension FetchValue {
    /// The value with nested collections flattened into one collection (a key path
    /// through two to-many relationships yields a collection of collections).
    public var flattened: FetchValue {
        guard case .collection(let members) = self, members.contains(where: { if case .collection = $0 { true } else { false } }) else {
            return self
        }
        var result: [FetchValue] = []
        func add(_ value: FetchValue) {
            if case .collection(let inner) = value { inner.forEach(add) } else { result.append(value) }
        }
        members.forEach(add)
        return .collection(result)
    }

    /// The elements of a collection, or the value alone.
    var elements: [FetchValue] {
        if case .collection(let members) = flattened { return members }
        return [self]
    }
}

import Foundation

/// A value a predicate or sort descriptor reads through a key path: an attribute
/// value, a related object's ID, or the values of a to-many key path.
public indirect enum FetchValue: Sendable, Hashable, CustomStringConvertible {
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

/// Something a ``FetchPredicate`` can be evaluated against and a
/// ``FetchSortDescriptor`` can order: a managed object, a store's raw row, or a
/// dictionary of values.
///
/// Adopters resolve dotted key paths themselves (`department.name`), following
/// to-one relationships to a single value and to-many relationships to a
/// ``FetchValue/collection(_:)``.
public protocol FetchEvaluable {
    /// The value at `keyPath`, or an ``ObjectGraphError/Code/unknownKey`` error.
    func fetchValue(forKeyPath keyPath: String) throws -> FetchValue
}

extension Dictionary: FetchEvaluable where Key == String, Value == AttributeValue {
    /// The value stored under the whole key path; unknown keys throw.
    public func fetchValue(forKeyPath keyPath: String) throws -> FetchValue {
        guard let value = self[keyPath] else {
            throw ObjectGraphError(.unknownKey, "No value for key path \"\(keyPath)\".", key: keyPath)
        }
        return .attribute(value)
    }
}

/// A row of named fetch values, as returned by dictionary-result fetches.
public struct FetchValueRow: FetchEvaluable, Sendable, Hashable {
    /// The values by property name.
    public var values: [String: FetchValue]
    /// Wraps a dictionary.
    public init(_ values: [String: FetchValue]) { self.values = values }
    /// The value stored under the whole key path; unknown keys throw.
    public func fetchValue(forKeyPath keyPath: String) throws -> FetchValue {
        guard let value = values[keyPath] else {
            throw ObjectGraphError(.unknownKey, "No value for key path \"\(keyPath)\".", key: keyPath)
        }
        return value
    }
}

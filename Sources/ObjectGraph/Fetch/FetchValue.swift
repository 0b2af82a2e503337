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
    /// The value at `keyPath` of another object the subject can reach (a relationship
    /// destination), for subqueries and variables such as `$x.name`.
    ///
    /// The default implementation throws ``ObjectGraphError/Code/unsupportedRequest``.
    func fetchValue(forKeyPath keyPath: String, ofObject objectID: ManagedObjectID) throws -> FetchValue
    /// The subject itself (`SELF`): an object's ID for objects and rows.
    ///
    /// The default implementation reads the key path `self`.
    func fetchValueOfSelf() throws -> FetchValue
}

extension FetchEvaluable {
    /// Throws ``ObjectGraphError/Code/unsupportedRequest``: this subject cannot follow object IDs.
    public func fetchValue(forKeyPath keyPath: String, ofObject objectID: ManagedObjectID) throws -> FetchValue {
        throw ObjectGraphError(
            .unsupportedRequest, "\(type(of: self)) cannot read \"\(keyPath)\" of \(objectID); subqueries and variables need a subject that follows object IDs.",
            key: keyPath, objectID: objectID)
    }

    /// The value of the key path `self`.
    public func fetchValueOfSelf() throws -> FetchValue { try fetchValue(forKeyPath: "self") }
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

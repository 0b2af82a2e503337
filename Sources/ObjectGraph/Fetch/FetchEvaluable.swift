import Foundation

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
    /// The number of values at `keyPath` (`keyPath.@count`) when the subject can count them
    /// without reading them (a store counting a relationship's keys), else `nil`, and the
    /// values are read and counted.
    ///
    /// The default implementation returns `nil`.
    func fetchCount(forKeyPath keyPath: String) throws -> Int?
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

    /// `nil`: the values are read and counted.
    public func fetchCount(forKeyPath keyPath: String) throws -> Int? { nil }
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

import Foundation

/// The parts of a dictionary fetch a store computes itself; ObjectGraph emulates the
/// others in memory for that store, as the Incremental Store Programming Guide allows.
///
/// A store that lacks a capability the request needs receives, instead of the request,
/// a plain dictionary fetch of every key path involved (a to-many key path yields the
/// destinations' IDs, or their values for `projects.budget`), with the same predicate
/// and no grouping, having, distinct, sorting or paging; the coordinator then applies
/// ``FetchRequest/dictionaries(from:)`` to the rows. For example:
///
/// ```swift
/// final class KeyValueStore: IncrementalStore, @unchecked Sendable {
///     // Plain rows only: grouping, having, distinct and expressions are emulated.
///     override var fetchCapabilities: FetchCapabilities { [] }
/// }
/// ```
public struct FetchCapabilities: OptionSet, Sendable, Hashable {
    /// The capabilities' bits.
    public let rawValue: Int
    /// Creates capabilities from bits.
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// `propertiesToGroupBy`, `havingPredicate` and aggregate expressions.
    public static let grouping = FetchCapabilities(rawValue: 1)
    /// `returnsDistinctResults`.
    public static let distinct = FetchCapabilities(rawValue: 2)
    /// Non-aggregate expression descriptions in `propertiesToFetch`.
    public static let expressions = FetchCapabilities(rawValue: 4)
    /// Everything.
    public static let all: FetchCapabilities = [.grouping, .distinct, .expressions]
}

extension FetchRequest {
    /// The capabilities a store needs to answer this request natively.
    public var requiredCapabilities: FetchCapabilities {
        guard resultType == .dictionary else { return [] }
        var required: FetchCapabilities = []
        let properties = (propertiesToFetch ?? []) + (propertiesToGroupBy ?? [])
        if propertiesToGroupBy != nil || havingPredicate != nil || properties.contains(where: \.isAggregate) {
            required.insert(.grouping)
        }
        if returnsDistinctResults { required.insert(.distinct) }
        if properties.contains(where: { if case .expression = $0 { !$0.isAggregate } else { false } }) {
            required.insert(.expressions)
        }
        return required
    }
}

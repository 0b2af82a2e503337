import Foundation

/// A fetch predicate: a tree of comparisons joined by AND, OR and NOT (Core Data's
/// `NSPredicate`, as a typed value that stores can inspect and translate).
///
/// Build one in Swift or parse Core Data's format syntax:
///
/// ```swift
/// let adults = FetchPredicate.greaterThanOrEqual("age", 18)
///     && .beginsWith("name", "A", options: .caseInsensitive)
///     && !.equal("department.name", "Sales")
/// let same = try FetchPredicate(format: "age >= %d AND name BEGINSWITH[c] %@ AND NOT department.name == 'Sales'", 18, "A")
/// ```
///
/// Evaluation uses two-valued logic with Core Data's in-memory null rules: `nil == nil`
/// is true, `x != nil` is true exactly when `x` has a value, and every ordering or string
/// comparison involving null is false (so `NOT (age > 5)` is true when `age` is null,
/// unlike SQL). A comparison between values that cannot be ordered (a string against a
/// number) is false when evaluated; a fetch refuses it beforehand where the model tells
/// the kinds (``checkComparisons(against:)``), and any predicate nested deeper than
/// ``maximumDepth``. Reading a key path the subject does not have throws
/// ``ObjectGraphError/Code/unknownKey``. See the "Fetch Language" article for the grammar.
public indirect enum FetchPredicate: Sendable, Hashable {
    /// A constant: `TRUEPREDICATE` or `FALSEPREDICATE`.
    case value(Bool)
    /// Compares two expressions.
    case comparison(
        FetchExpression, FetchComparisonOperator, FetchExpression,
        modifier: FetchComparisonModifier = .direct, options: ComparisonOptions = [])
    /// True when all of the predicates are (true when empty).
    case and([FetchPredicate])
    /// True when any of the predicates is (false when empty).
    case or([FetchPredicate])
    /// True when the predicate is false.
    case not(FetchPredicate)

    // MARK: Building

    /// `keyPath op value` for any operator.
    public static func compare(
        _ keyPath: String, _ op: FetchComparisonOperator, _ value: FetchValue,
        modifier: FetchComparisonModifier = .direct, options: ComparisonOptions = []
    ) -> FetchPredicate {
        .comparison(.keyPath(keyPath), op, .constant(value), modifier: modifier, options: options)
    }
    /// `keyPath == value`
    public static func equal(_ keyPath: String, _ value: AttributeValue, options: ComparisonOptions = []) -> FetchPredicate {
        compare(keyPath, .equal, .attribute(value), options: options)
    }
    /// `keyPath == object` (a to-one relationship's destination); `nil` tests for no destination.
    public static func equal(_ keyPath: String, object: ManagedObjectID?) -> FetchPredicate {
        compare(keyPath, .equal, object.map(FetchValue.object) ?? .null)
    }
    /// `keyPath != value`
    public static func notEqual(_ keyPath: String, _ value: AttributeValue, options: ComparisonOptions = []) -> FetchPredicate {
        compare(keyPath, .notEqual, .attribute(value), options: options)
    }
    /// `keyPath < value`
    public static func lessThan(_ keyPath: String, _ value: AttributeValue) -> FetchPredicate {
        compare(keyPath, .lessThan, .attribute(value))
    }
    /// `keyPath <= value`
    public static func lessThanOrEqual(_ keyPath: String, _ value: AttributeValue) -> FetchPredicate {
        compare(keyPath, .lessThanOrEqual, .attribute(value))
    }
    /// `keyPath > value`
    public static func greaterThan(_ keyPath: String, _ value: AttributeValue) -> FetchPredicate {
        compare(keyPath, .greaterThan, .attribute(value))
    }
    /// `keyPath >= value`
    public static func greaterThanOrEqual(_ keyPath: String, _ value: AttributeValue) -> FetchPredicate {
        compare(keyPath, .greaterThanOrEqual, .attribute(value))
    }
    /// `keyPath BETWEEN {lower, upper}`
    public static func between(_ keyPath: String, _ lower: AttributeValue, _ upper: AttributeValue) -> FetchPredicate {
        .comparison(.keyPath(keyPath), .between, .aggregate([.constant(.attribute(lower)), .constant(.attribute(upper))]))
    }
    /// `keyPath IN values`
    public static func isIn(_ keyPath: String, _ values: [AttributeValue]) -> FetchPredicate {
        compare(keyPath, .in, .collection(values.map(FetchValue.attribute)))
    }
    /// `keyPath IN objects`
    public static func isIn(_ keyPath: String, objects: [ManagedObjectID]) -> FetchPredicate {
        compare(keyPath, .in, .collection(objects.map(FetchValue.object)))
    }
    /// `keyPath BEGINSWITH prefix`
    public static func beginsWith(_ keyPath: String, _ prefix: String, options: ComparisonOptions = []) -> FetchPredicate {
        compare(keyPath, .beginsWith, .attribute(.string(prefix)), options: options)
    }
    /// `keyPath ENDSWITH suffix`
    public static func endsWith(_ keyPath: String, _ suffix: String, options: ComparisonOptions = []) -> FetchPredicate {
        compare(keyPath, .endsWith, .attribute(.string(suffix)), options: options)
    }
    /// `keyPath CONTAINS value`: a substring, or a member of a to-many key path.
    public static func contains(_ keyPath: String, _ value: AttributeValue, options: ComparisonOptions = []) -> FetchPredicate {
        compare(keyPath, .contains, .attribute(value), options: options)
    }
    /// `keyPath LIKE pattern` (`*` and `?` wildcards).
    public static func like(_ keyPath: String, _ pattern: String, options: ComparisonOptions = []) -> FetchPredicate {
        compare(keyPath, .like, .attribute(.string(pattern)), options: options)
    }
    /// `keyPath MATCHES regex` (the whole string must match).
    public static func matches(_ keyPath: String, _ regex: String, options: ComparisonOptions = []) -> FetchPredicate {
        compare(keyPath, .matches, .attribute(.string(regex)), options: options)
    }
    /// `ANY keyPath op value`
    public static func any(_ keyPath: String, _ op: FetchComparisonOperator, _ value: AttributeValue, options: ComparisonOptions = []) -> FetchPredicate {
        compare(keyPath, op, .attribute(value), modifier: .any, options: options)
    }
    /// `ALL keyPath op value`
    public static func all(_ keyPath: String, _ op: FetchComparisonOperator, _ value: AttributeValue, options: ComparisonOptions = []) -> FetchPredicate {
        compare(keyPath, op, .attribute(value), modifier: .all, options: options)
    }
    /// `NONE keyPath op value` (that is, `NOT ANY`).
    public static func none(_ keyPath: String, _ op: FetchComparisonOperator, _ value: AttributeValue, options: ComparisonOptions = []) -> FetchPredicate {
        .not(any(keyPath, op, value, options: options))
    }

    /// Both predicates.
    public static func && (lhs: FetchPredicate, rhs: FetchPredicate) -> FetchPredicate {
        if case .and(let parts) = lhs { return .and(parts + [rhs]) }
        return .and([lhs, rhs])
    }
    /// Either predicate.
    public static func || (lhs: FetchPredicate, rhs: FetchPredicate) -> FetchPredicate {
        if case .or(let parts) = lhs { return .or(parts + [rhs]) }
        return .or([lhs, rhs])
    }
    /// The negation.
    public static prefix func ! (predicate: FetchPredicate) -> FetchPredicate { .not(predicate) }

    // MARK: Inspecting

    /// The key paths the predicate reads from the evaluated object, with collection
    /// operators removed (`employees.@count` reads `employees`). Key paths inside a
    /// subquery's predicate are relative to the collection's elements and are not listed.
    public var keyPaths: Set<String> {
        switch self {
        case .value: return []
        case .comparison(let lhs, _, let rhs, _, _): return lhs.keyPaths.union(rhs.keyPaths)
        case .and(let parts), .or(let parts): return parts.reduce(into: []) { $0.formUnion($1.keyPaths) }
        case .not(let inner): return inner.keyPaths
        }
    }

    /// Calls `body` with each key path of ``keyPaths`` (a path met twice, twice), without
    /// building the set: a fetch checks its predicate's key paths on every call.
    func forEachKeyPath(_ body: (String) throws -> Void) rethrows {
        switch self {
        case .value: return
        case .comparison(let lhs, _, let rhs, _, _):
            try lhs.forEachKeyPath(body)
            try rhs.forEachKeyPath(body)
        case .and(let parts), .or(let parts): for part in parts { try part.forEachKeyPath(body) }
        case .not(let inner): try inner.forEachKeyPath(body)
        }
    }

    /// The variables the predicate reads that no subquery binds.
    public var freeVariables: Set<String> {
        switch self {
        case .value: return []
        case .comparison(let lhs, _, let rhs, _, _): return lhs.freeVariables.union(rhs.freeVariables)
        case .and(let parts), .or(let parts): return parts.reduce(into: []) { $0.formUnion($1.freeVariables) }
        case .not(let inner): return inner.freeVariables
        }
    }

    /// The predicate with `$variables` replaced by values (Core Data's
    /// `withSubstitutionVariables(_:)`); variables without a value stay.
    public func substituting(_ variables: [String: FetchValue]) -> FetchPredicate {
        substituting { variables[$0] }
    }

    /// The predicate with each variable replaced by `value(name)`, where that is not `nil`
    /// (variables a subquery binds are left to it).
    func substituting(_ value: (String) -> FetchValue?) -> FetchPredicate {
        switch self {
        case .value: return self
        case .comparison(let lhs, let op, let rhs, let modifier, let options):
            return .comparison(lhs.substituting(value), op, rhs.substituting(value), modifier: modifier, options: options)
        case .and(let parts): return .and(parts.map { $0.substituting(value) })
        case .or(let parts): return .or(parts.map { $0.substituting(value) })
        case .not(let inner): return .not(inner.substituting(value))
        }
    }

    /// The predicate with every variable replaced, or an error naming the first one missing.
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidFetchRequest`` naming an unbound variable.
    public func substitutingAll(_ variables: [String: FetchValue]) throws -> FetchPredicate {
        let result = substituting(variables)
        if let missing = result.freeVariables.sorted().first {
            throw ObjectGraphError(.invalidFetchRequest, "No value for variable $\(missing) in \(self).", key: missing)
        }
        return result
    }
}

import Foundation

/// One conjunct of a predicate that a store may serve from an index: a plain key path
/// compared with a constant (`age >= 18`, `name BEGINSWITH "A"`, `id IN {…}`).
public struct FetchConstraint: Sendable, Hashable, CustomStringConvertible {
    /// The key path (no collection operators; it may go through relationships).
    public var keyPath: String
    /// The comparison, oriented as `keyPath op value`.
    public var op: FetchComparisonOperator
    /// The constant: a single value, or a collection for `IN` and `BETWEEN`.
    public var value: FetchValue
    /// String options of the comparison.
    public var options: ComparisonOptions

    /// Creates a constraint.
    public init(keyPath: String, op: FetchComparisonOperator, value: FetchValue, options: ComparisonOptions = []) {
        self.keyPath = keyPath
        self.op = op
        self.value = value
        self.options = options
    }

    /// The constraint in format syntax.
    public var description: String {
        "\(FetchExpression.formatKeyPath(keyPath)) \(op.rawValue)\(options.formatFlags) \(FetchExpression.literal(value))"
    }
}

extension FetchPredicate {
    /// The constraints every match must meet that have the form `keyPath op constant`:
    /// the comparisons among the predicate's top-level `AND` (or the predicate itself),
    /// with a constant on either side (`5 < age` is returned as `age > 5`).
    ///
    /// A store can intersect index lookups for these and evaluate the whole predicate on
    /// the candidates it finds: the predicate implies every listed constraint. Comparisons
    /// with `ANY`/`ALL`, collection operators, variables or subqueries are left out.
    ///
    /// For example:
    ///
    /// ```swift
    /// let p = try FetchPredicate(format: "age >= 18 AND 'A' == name AND (x == 1 OR y == 2)")
    /// p.conjunctiveConstraints  // [age >= 18, name == "A"]
    /// ```
    public var conjunctiveConstraints: [FetchConstraint] {
        switch self {
        case .and(let parts): return parts.flatMap(\.conjunctiveConstraints)
        case .comparison(let lhs, let op, let rhs, .direct, let options):
            if case .keyPath(let path) = lhs, !path.containsByte(UInt8(ascii: "@")), let value = Self.constantValue(rhs) {
                return [FetchConstraint(keyPath: path, op: op, value: value, options: options)]
            }
            if case .keyPath(let path) = rhs, !path.containsByte(UInt8(ascii: "@")), let value = Self.constantValue(lhs), let flipped = op.flipped {
                return [FetchConstraint(keyPath: path, op: flipped, value: value, options: options)]
            }
            return []
        default: return []
        }
    }

    /// The value of a constant expression: a constant, or a list of constants (`{1, 2}`).
    static func constantValue(_ expression: FetchExpression) -> FetchValue? {
        switch expression {
        case .constant(let value): return value
        case .aggregate(let parts):
            var values: [FetchValue] = []
            for part in parts {
                guard case .constant(let value) = part else { return nil }
                values.append(value)
            }
            return .collection(values)
        default: return nil
        }
    }
}

extension FetchComparisonOperator {
    /// The operator with its operands swapped (`<` becomes `>`), when one exists.
    var flipped: FetchComparisonOperator? {
        switch self {
        case .equal, .notEqual: return self
        case .lessThan: return .greaterThan
        case .lessThanOrEqual: return .greaterThanOrEqual
        case .greaterThan: return .lessThan
        case .greaterThanOrEqual: return .lessThanOrEqual
        case .contains: return .in
        case .in: return .contains
        default: return nil
        }
    }
}

import Foundation

/// The comparison a ``FetchPredicate/comparison(_:_:_:options:)`` performs.
public enum FetchComparisonOperator: String, Sendable, Hashable, CaseIterable {
    /// `==`
    case equal = "=="
    /// `!=`
    case notEqual = "!="
    /// `<`
    case lessThan = "<"
    /// `<=`
    case lessThanOrEqual = "<="
    /// `>`
    case greaterThan = ">"
    /// `>=`
    case greaterThanOrEqual = ">="
    /// `IN`: the key path's value is one of the constant collection's values.
    case `in` = "IN"
    /// `BEGINSWITH`: the string starts with the constant.
    case beginsWith = "BEGINSWITH"
    /// `ENDSWITH`: the string ends with the constant.
    case endsWith = "ENDSWITH"
    /// `CONTAINS`: the string contains the constant, or the collection contains the value.
    case contains = "CONTAINS"
}

/// A fetch predicate: a tree of key-path comparisons joined by AND, OR and NOT
/// (Core Data's `NSPredicate`, as a typed value).
///
/// For example:
///
/// ```swift
/// let adults = FetchPredicate.greaterThanOrEqual("age", 18)
///     && .beginsWith("name", "A", options: .caseInsensitive)
///     && !.equal("department.name", "Sales")
/// ```
///
/// A comparison whose key path goes through a to-many relationship matches when any
/// of the reached values matches. A comparison between values that cannot be ordered
/// (a string against a number, or anything against `null` except with `==` and `!=`)
/// is false. Evaluating a key path the subject does not have throws
/// ``ObjectGraphError/Code/unknownKey``.
public indirect enum FetchPredicate: Sendable, Hashable, CustomStringConvertible {
    /// A constant: `TRUEPREDICATE` or `FALSEPREDICATE`.
    case value(Bool)
    /// Compares the value at a key path with a constant.
    case comparison(String, FetchComparisonOperator, FetchValue, options: ComparisonOptions = [])
    /// True when all of the predicates are (true when empty).
    case and([FetchPredicate])
    /// True when any of the predicates is (false when empty).
    case or([FetchPredicate])
    /// True when the predicate is false.
    case not(FetchPredicate)

    // MARK: Building

    /// `keyPath == value`
    public static func equal(_ keyPath: String, _ value: AttributeValue, options: ComparisonOptions = []) -> FetchPredicate {
        .comparison(keyPath, .equal, .attribute(value), options: options)
    }
    /// `keyPath == object` (a to-one relationship's destination); `nil` tests for no destination.
    public static func equal(_ keyPath: String, object: ManagedObjectID?) -> FetchPredicate {
        .comparison(keyPath, .equal, object.map(FetchValue.object) ?? .null)
    }
    /// `keyPath != value`
    public static func notEqual(_ keyPath: String, _ value: AttributeValue, options: ComparisonOptions = []) -> FetchPredicate {
        .comparison(keyPath, .notEqual, .attribute(value), options: options)
    }
    /// `keyPath < value`
    public static func lessThan(_ keyPath: String, _ value: AttributeValue) -> FetchPredicate {
        .comparison(keyPath, .lessThan, .attribute(value))
    }
    /// `keyPath <= value`
    public static func lessThanOrEqual(_ keyPath: String, _ value: AttributeValue) -> FetchPredicate {
        .comparison(keyPath, .lessThanOrEqual, .attribute(value))
    }
    /// `keyPath > value`
    public static func greaterThan(_ keyPath: String, _ value: AttributeValue) -> FetchPredicate {
        .comparison(keyPath, .greaterThan, .attribute(value))
    }
    /// `keyPath >= value`
    public static func greaterThanOrEqual(_ keyPath: String, _ value: AttributeValue) -> FetchPredicate {
        .comparison(keyPath, .greaterThanOrEqual, .attribute(value))
    }
    /// `keyPath IN values`
    public static func isIn(_ keyPath: String, _ values: [AttributeValue]) -> FetchPredicate {
        .comparison(keyPath, .in, .collection(values.map(FetchValue.attribute)))
    }
    /// `keyPath IN objects`
    public static func isIn(_ keyPath: String, objects: [ManagedObjectID]) -> FetchPredicate {
        .comparison(keyPath, .in, .collection(objects.map(FetchValue.object)))
    }
    /// `keyPath BEGINSWITH prefix`
    public static func beginsWith(_ keyPath: String, _ prefix: String, options: ComparisonOptions = []) -> FetchPredicate {
        .comparison(keyPath, .beginsWith, .attribute(.string(prefix)), options: options)
    }
    /// `keyPath ENDSWITH suffix`
    public static func endsWith(_ keyPath: String, _ suffix: String, options: ComparisonOptions = []) -> FetchPredicate {
        .comparison(keyPath, .endsWith, .attribute(.string(suffix)), options: options)
    }
    /// `keyPath CONTAINS value`: a substring, or a member of a to-many key path.
    public static func contains(_ keyPath: String, _ value: AttributeValue, options: ComparisonOptions = []) -> FetchPredicate {
        .comparison(keyPath, .contains, .attribute(value), options: options)
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

    // MARK: Evaluating

    /// Evaluates the predicate against a managed object, a store row or a dictionary.
    public func evaluate(with subject: some FetchEvaluable) throws -> Bool {
        switch self {
        case .value(let constant):
            return constant
        case .and(let parts):
            for part in parts where try !part.evaluate(with: subject) { return false }
            return true
        case .or(let parts):
            for part in parts where try part.evaluate(with: subject) { return true }
            return false
        case .not(let inner):
            return try !inner.evaluate(with: subject)
        case .comparison(let keyPath, let op, let constant, let options):
            return Self.compare(try subject.fetchValue(forKeyPath: keyPath), op, constant, options)
        }
    }

    /// The key paths the predicate reads.
    public var keyPaths: Set<String> {
        switch self {
        case .value: return []
        case .comparison(let keyPath, _, _, _): return [keyPath]
        case .and(let parts), .or(let parts): return parts.reduce(into: []) { $0.formUnion($1.keyPaths) }
        case .not(let inner): return inner.keyPaths
        }
    }

    static func compare(_ lhs: FetchValue, _ op: FetchComparisonOperator, _ rhs: FetchValue, _ options: ComparisonOptions) -> Bool {
        switch (op, lhs) {
        case (.contains, .collection(let members)):
            return members.contains { FetchValue.matches($0, rhs, options: options) }
        case (.notEqual, .collection(let members)):
            return !members.contains { FetchValue.matches($0, rhs, options: options) }
        case (_, .collection(let members)):
            return members.contains { compare($0, op, rhs, options) }
        default:
            break
        }
        switch op {
        case .equal: return FetchValue.matches(lhs, rhs, options: options)
        case .notEqual: return !FetchValue.matches(lhs, rhs, options: options)
        case .in:
            guard case .collection(let members) = rhs else { return FetchValue.matches(lhs, rhs, options: options) }
            return members.contains { FetchValue.matches(lhs, $0, options: options) }
        case .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual:
            guard let a = lhs.attributeValue, let b = rhs.attributeValue, !a.isNull, !b.isNull,
                let order = AttributeValue.compare(a, b, options: options)
            else { return false }
            switch op {
            case .lessThan: return order == .orderedAscending
            case .lessThanOrEqual: return order != .orderedDescending
            case .greaterThan: return order == .orderedDescending
            default: return order != .orderedAscending
            }
        case .beginsWith, .endsWith, .contains:
            guard let a = lhs.attributeValue?.stringValue, let b = rhs.attributeValue?.stringValue else { return false }
            let (x, y) = (options.normalize(a), options.normalize(b))
            switch op {
            case .beginsWith: return x.hasPrefix(y)
            case .endsWith: return x.hasSuffix(y)
            default: return y.isEmpty || x.contains(y)
            }
        }
    }

    /// The predicate in Core Data's format syntax, for messages.
    public var description: String {
        switch self {
        case .value(let constant): return constant ? "TRUEPREDICATE" : "FALSEPREDICATE"
        case .comparison(let keyPath, let op, let constant, let options):
            var flags = ""
            if !options.isEmpty {
                flags = "[" + (options.contains(.caseInsensitive) ? "c" : "") + (options.contains(.diacriticInsensitive) ? "d" : "") + "]"
            }
            return "\(keyPath) \(op.rawValue)\(flags) \(constant)"
        case .and(let parts): return "(" + parts.map(\.description).joined(separator: " AND ") + ")"
        case .or(let parts): return "(" + parts.map(\.description).joined(separator: " OR ") + ")"
        case .not(let inner): return "NOT \(inner)"
        }
    }
}

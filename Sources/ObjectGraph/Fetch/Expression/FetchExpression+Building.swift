import Foundation

/// A small Swift-side builder for predicates over expressions, without format strings.
///
/// For example:
///
/// ```swift
/// let busy = FetchExpression.key("projects").subquery("p", where: .variable("p", "budget") > .value(300)).count > .value(0)
/// let named = FetchExpression.key("name").matches(.value("[A-Z].*"), options: .caseInsensitive)
/// ```
///
/// Inside ``subquery(_:where:)`` the element is the evaluated object, so `.key("budget")`
/// and `.variable("p", "budget")` both read the element's budget.
extension FetchExpression {
    /// A key path of the evaluated object (use ``variable(_:_:)`` for `$p.budget`).
    public static func key(_ path: String) -> FetchExpression { .keyPath(path) }

    /// A constant from any format argument (numbers, strings, dates, objects, arrays …).
    public static func value(_ argument: some FetchArgument) -> FetchExpression { .constant(argument.fetchArgumentValue) }

    /// The number of elements (`[SIZE]`).
    public var count: FetchExpression { .index(self, .size) }

    /// The elements of this collection for which `predicate` holds, bound to `$variable`.
    public func subquery(_ variable: String, where predicate: FetchPredicate) -> FetchExpression {
        .subquery(self, variable: variable, predicate)
    }

    /// `self op other` with the given options and quantifier.
    public func compare(
        _ op: FetchComparisonOperator, _ other: FetchExpression,
        modifier: FetchComparisonModifier = .direct, options: ComparisonOptions = []
    ) -> FetchPredicate {
        .comparison(self, op, other, modifier: modifier, options: options)
    }

    /// `self == other`.
    public func isEqual(to other: FetchExpression, options: ComparisonOptions = []) -> FetchPredicate { compare(.equal, other, options: options) }
    /// `self != other`.
    public func isNotEqual(to other: FetchExpression, options: ComparisonOptions = []) -> FetchPredicate { compare(.notEqual, other, options: options) }
    /// `self IN other`.
    public func isIn(_ other: FetchExpression, options: ComparisonOptions = []) -> FetchPredicate { compare(.in, other, options: options) }
    /// `self CONTAINS other`.
    public func contains(_ other: FetchExpression, options: ComparisonOptions = []) -> FetchPredicate { compare(.contains, other, options: options) }
    /// `self BEGINSWITH other`.
    public func beginsWith(_ other: FetchExpression, options: ComparisonOptions = []) -> FetchPredicate { compare(.beginsWith, other, options: options) }
    /// `self ENDSWITH other`.
    public func endsWith(_ other: FetchExpression, options: ComparisonOptions = []) -> FetchPredicate { compare(.endsWith, other, options: options) }
    /// `self LIKE other`.
    public func like(_ other: FetchExpression, options: ComparisonOptions = []) -> FetchPredicate { compare(.like, other, options: options) }
    /// `self MATCHES other`.
    public func matches(_ other: FetchExpression, options: ComparisonOptions = []) -> FetchPredicate { compare(.matches, other, options: options) }
    /// `self BETWEEN {lower, upper}`.
    public func between(_ lower: FetchExpression, and upper: FetchExpression) -> FetchPredicate {
        compare(.between, .aggregate([lower, upper]))
    }

    /// `lhs < rhs`.
    public static func < (lhs: FetchExpression, rhs: FetchExpression) -> FetchPredicate { lhs.compare(.lessThan, rhs) }
    /// `lhs <= rhs`.
    public static func <= (lhs: FetchExpression, rhs: FetchExpression) -> FetchPredicate { lhs.compare(.lessThanOrEqual, rhs) }
    /// `lhs > rhs`.
    public static func > (lhs: FetchExpression, rhs: FetchExpression) -> FetchPredicate { lhs.compare(.greaterThan, rhs) }
    /// `lhs >= rhs`.
    public static func >= (lhs: FetchExpression, rhs: FetchExpression) -> FetchPredicate { lhs.compare(.greaterThanOrEqual, rhs) }
}

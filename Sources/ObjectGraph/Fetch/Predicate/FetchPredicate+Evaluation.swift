import Foundation

extension FetchPredicate {
    /// Evaluates the predicate against a managed object (firing faults as needed), a
    /// store row or a dictionary.
    ///
    /// - Parameters:
    ///   - subject: the evaluated object (`SELF`).
    ///   - variables: values for `$variables` that were not substituted.
    /// - Throws: ``ObjectGraphError/Code/unknownKey`` for a key path the subject does not
    ///   have; ``ObjectGraphError/Code/invalidFetchRequest`` for an unbound variable or a
    ///   malformed regular expression.
    ///   ``ObjectGraphError/Code/invalidFetchRequest`` too for a predicate nested deeper than
    ///   ``maximumDepth`` (built in code: the parser refuses one).
    public func evaluate<S: FetchEvaluable>(with subject: S, variables: [String: FetchValue] = [:]) throws -> Bool {
        try evaluate(with: subject, variables: variables, depth: 1)
    }

    /// ``evaluate(with:variables:)`` at nesting `depth`, which bounds the recursion.
    func evaluate<S: FetchEvaluable>(with subject: S, variables: [String: FetchValue], depth: Int) throws -> Bool {
        guard depth <= Self.maximumDepth else { throw Self.tooDeep() }
        switch self {
        case .value(let constant):
            return constant
        case .and(let parts):
            for part in parts where try !part.evaluate(with: subject, variables: variables, depth: depth + 1) { return false }
            return true
        case .or(let parts):
            for part in parts where try part.evaluate(with: subject, variables: variables, depth: depth + 1) { return true }
            return false
        case .not(let inner):
            return try !inner.evaluate(with: subject, variables: variables, depth: depth + 1)
        case .comparison(.keyPath(let path), let op, .constant(let right), .direct, let options)
            where !path.containsByte(UInt8(ascii: "@")) && path != "self" && path != "SELF":
            // The common `keyPath op constant` shape, without the general expression walk.
            return try Self.compare(try subject.fetchValue(forKeyPath: path).flattened, op, right, modifier: .direct, options: options)
        case .comparison(let lhs, let op, let rhs, let modifier, let options):
            let left = try lhs.evaluate(with: subject, variables: variables, depth: depth + 1)
            let right = try rhs.evaluate(with: subject, variables: variables, depth: depth + 1)
            return try Self.compare(left, op, right, modifier: modifier, options: options)
        }
    }

    /// Compares two evaluated values as a comparison predicate does.
    static func compare(
        _ lhs: FetchValue, _ op: FetchComparisonOperator, _ rhs: FetchValue,
        modifier: FetchComparisonModifier, options: ComparisonOptions
    ) throws -> Bool {
        switch modifier {
        case .any:
            for element in lhs.indexableElements where try scalar(element, op, rhs, options) { return true }
            return false
        case .all:
            for element in lhs.indexableElements where try !scalar(element, op, rhs, options) { return false }
            return true
        case .direct:
            guard case .collection(let members) = lhs else { return try scalar(lhs, op, rhs, options) }
            switch op {
            case .contains:
                return members.contains { equal($0, rhs, options) }
            case .notEqual:
                return !members.contains { equal($0, rhs, options) }
            default:
                for member in members where try scalar(member, op, rhs, options) { return true }
                return false
            }
        }
    }

    /// One comparison between a single left value and the right value.
    static func scalar(_ lhs: FetchValue, _ op: FetchComparisonOperator, _ rhs: FetchValue, _ options: ComparisonOptions) throws -> Bool {
        switch op {
        case .equal:
            return equal(lhs, rhs, options)
        case .notEqual:
            return !equal(lhs, rhs, options)
        case .lessThan:
            return order(lhs, rhs, options) == .orderedAscending
        case .lessThanOrEqual:
            return order(lhs, rhs, options).map { $0 != .orderedDescending } ?? false
        case .greaterThan:
            return order(lhs, rhs, options) == .orderedDescending
        case .greaterThanOrEqual:
            return order(lhs, rhs, options).map { $0 != .orderedAscending } ?? false
        case .between:
            guard case .collection(let bounds) = rhs, bounds.count == 2,
                let low = order(lhs, bounds[0], options), let high = order(lhs, bounds[1], options)
            else { return false }
            return low != .orderedAscending && high != .orderedDescending
        case .in:
            switch rhs {
            case .collection(let members):
                return members.contains { equal(lhs, $0, options) }
            case .attribute(.string(let haystack)):
                guard case .attribute(.string(let needle)) = lhs else { return false }
                return needle.isEmpty || options.normalize(haystack).contains(options.normalize(needle))
            case .attribute(.null):
                return false
            default:
                return equal(lhs, rhs, options)
            }
        case .contains:
            guard let text = lhs.attributeValue?.stringValue, let part = rhs.attributeValue?.stringValue else {
                return equal(lhs, rhs, options) && !lhs.isNull
            }
            return part.isEmpty || options.normalize(text).contains(options.normalize(part))
        case .beginsWith, .endsWith, .like, .matches:
            guard let text = lhs.attributeValue?.stringValue, let pattern = rhs.attributeValue?.stringValue else { return false }
            switch op {
            case .beginsWith: return options.normalize(text).hasPrefix(options.normalize(pattern))
            case .endsWith: return options.normalize(text).hasSuffix(options.normalize(pattern))
            case .like: return StringMatching.like(options.normalize(text), options.normalize(pattern))
            default:
                let subject = options.contains(.diacriticInsensitive) ? text.folding(options: .diacriticInsensitive, locale: nil) : text
                return try StringMatching.matches(subject, pattern, caseInsensitive: options.contains(.caseInsensitive))
            }
        }
    }

    /// Equality for predicates: the same object, attribute values that compare the same
    /// (numbers across widths, strings under the options), or equal collections.
    static func equal(_ lhs: FetchValue, _ rhs: FetchValue, _ options: ComparisonOptions) -> Bool {
        switch (lhs, rhs) {
        case (.collection(let a), .collection(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { equal($0, $1, options) }
        default:
            return FetchValue.matches(lhs, rhs, options: options)
        }
    }

    /// The order of two non-null attribute values, or `nil` when they cannot be ordered.
    private static func order(_ lhs: FetchValue, _ rhs: FetchValue, _ options: ComparisonOptions) -> ComparisonResult? {
        guard case .attribute(let a) = lhs, case .attribute(let b) = rhs, !a.isNull, !b.isNull else { return nil }
        return AttributeValue.compare(a, b, options: options)
    }
}

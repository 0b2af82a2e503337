import Foundation

extension AttributeValue {
    /// Orders two values of comparable kinds: any two numbers, two strings, two dates,
    /// and so on. Returns `nil` when the kinds cannot be compared (including `null`
    /// against a non-null value).
    public static func compare(
        _ lhs: AttributeValue, _ rhs: AttributeValue, options: ComparisonOptions = []
    ) -> ComparisonResult? {
        func order<T: Comparable>(_ a: T, _ b: T) -> ComparisonResult {
            a < b ? .orderedAscending : (a == b ? .orderedSame : .orderedDescending)
        }
        switch (lhs, rhs) {
        case (.null, .null): return .orderedSame
        case (.null, _), (_, .null): return nil
        case (.string(let a), .string(let b)):
            if options.isEmpty { return order(a, b) }
            let (x, y) = (options.normalize(a), options.normalize(b))
            return options.contains(.numeric) ? StringMatching.numericOrder(x, y) : order(x, y)
        case (.bool(let a), .bool(let b)): return order(a ? 1 : 0, b ? 1 : 0)
        // Core Data stores Booleans as the numbers 0 and 1, so they compare with numbers.
        case (.bool(let a), _) where rhs.doubleValue != nil: return compare(.int64(a ? 1 : 0), rhs)
        case (_, .bool(let b)) where lhs.doubleValue != nil: return compare(lhs, .int64(b ? 1 : 0))
        case (.date(let a), .date(let b)): return order(a, b)
        case (.uuid(let a), .uuid(let b)): return order(a.uuidString, b.uuidString)
        case (.uri(let a), .uri(let b)): return order(a.absoluteString, b.absoluteString)
        case (.data(let a), .data(let b)), (.transformable(let a), .transformable(let b)):
            if a == b { return .orderedSame }
            return a.lexicographicallyPrecedes(b) ? .orderedAscending : .orderedDescending
        default:
            break
        }
        if let a = lhs.integerValue, let b = rhs.integerValue { return order(a, b) }
        if lhs.floatingValue?.isNaN == true || rhs.floatingValue?.isNaN == true { return nil }
        if let a = lhs.integerValue, let b = rhs.floatingValue { return exactOrder(a, b) }
        if let a = lhs.floatingValue, let b = rhs.integerValue {
            switch exactOrder(b, a) {
            case .orderedAscending: return .orderedDescending
            case .orderedDescending: return .orderedAscending
            case .orderedSame: return .orderedSame
            }
        }
        if case .decimal(let a) = lhs, let b = rhs.decimalApproximation { return order(a, b) }
        if case .decimal(let b) = rhs, let a = lhs.decimalApproximation { return order(a, b) }
        if let a = lhs.doubleValue, let b = rhs.doubleValue { return order(a, b) }
        return nil
    }

    /// A double or a float, widened.
    var floatingValue: Double? {
        switch self {
        case .double(let v): return v
        case .float(let v): return Double(v)
        default: return nil
        }
    }

    /// Orders an integer against a non-NaN double exactly, without rounding the integer
    /// to the nearest double (2⁵³ + 1 is greater than 2⁵³ as a double).
    private static func exactOrder(_ integer: Int64, _ double: Double) -> ComparisonResult {
        // 2⁶³ is exactly representable; every Int64 is below it and at or above -2⁶³.
        if double >= 9_223_372_036_854_775_808.0 { return .orderedAscending }
        if double < -9_223_372_036_854_775_808.0 { return .orderedDescending }
        let whole = double.rounded(.towardZero)
        let truncated = Int64(whole)  // in range: checked above
        if integer != truncated { return integer < truncated ? .orderedAscending : .orderedDescending }
        let fraction = double - whole
        return fraction > 0 ? .orderedAscending : (fraction < 0 ? .orderedDescending : .orderedSame)
    }

    private var decimalApproximation: Decimal? {
        switch self {
        case .decimal(let v): return v
        case .double(let v): return Decimal(v)
        case .float(let v): return Decimal(Double(v))
        default: return integerValue.map { Decimal($0) }
        }
    }
}

extension FetchValue {
    /// Whether two values are equal for a predicate: the same object, or attribute
    /// values that compare the same.
    static func matches(_ lhs: FetchValue, _ rhs: FetchValue, options: ComparisonOptions) -> Bool {
        switch (lhs, rhs) {
        case (.object(let a), .object(let b)): return a == b
        case (.attribute(let a), .attribute(let b)): return AttributeValue.compare(a, b, options: options) == .orderedSame
        default: return false
        }
    }

    /// A total order for sorting: nulls first, then values of one kind in their natural
    /// order; values of different kinds order by kind so that sorting is deterministic.
    static func sortOrder(_ lhs: FetchValue, _ rhs: FetchValue, options: ComparisonOptions) -> ComparisonResult {
        // Two strings without options, the common sort key: one equality test and one
        // ordering, without the general comparison's switch over every pair of kinds.
        if options.isEmpty, case .attribute(.string(let a)) = lhs, case .attribute(.string(let b)) = rhs {
            return a == b ? .orderedSame : (a < b ? .orderedAscending : .orderedDescending)
        }
        switch (lhs, rhs) {
        case (.attribute(let a), .attribute(let b)):
            if a.isNull || b.isNull { return a.isNull == b.isNull ? .orderedSame : (a.isNull ? .orderedAscending : .orderedDescending) }
            if let result = AttributeValue.compare(a, b, options: options) { return result }
            // NaN compares with nothing; sort it after every other number so the order stays total.
            let (nanA, nanB) = (a.floatingValue?.isNaN == true, b.floatingValue?.isNaN == true)
            if nanA || nanB { return nanA == nanB ? .orderedSame : (nanA ? .orderedDescending : .orderedAscending) }
            let (x, y) = (a.typeName, b.typeName)
            return x < y ? .orderedAscending : (x == y ? .orderedSame : .orderedDescending)
        case (.object(let a), .object(let b)):
            let (x, y) = (a.description, b.description)
            return x < y ? .orderedAscending : (x == y ? .orderedSame : .orderedDescending)
        default:
            return lhs.kindRank < rhs.kindRank ? .orderedAscending : (lhs.kindRank == rhs.kindRank ? .orderedSame : .orderedDescending)
        }
    }

    private var kindRank: Int {
        switch self {
        case .attribute(let value): return value.isNull ? 0 : 1
        case .object: return 2
        case .collection: return 3
        }
    }
}

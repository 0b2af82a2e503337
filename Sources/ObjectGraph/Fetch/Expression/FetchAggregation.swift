import Foundation

/// The arithmetic behind collection operators, aggregate functions and grouped
/// dictionary results, shared so that every path computes the same figures.
///
/// Nulls are skipped. Sums of integers stay integers (falling back to doubles on
/// overflow); a sum or mean that involves a decimal and no floating-point value is a
/// decimal; otherwise doubles are used. Non-numeric values are ignored by the numeric
/// functions; `min:` and `max:` order any comparable kind.
public enum FetchAggregation {
    /// Applies a function to values.
    public static func apply(_ function: FetchFunction, to values: [FetchValue]) -> FetchValue {
        // Sums and means skip nulls themselves (they are not numbers): no filtered copy.
        switch function {
        case .sum: return sum(values)
        case .average: return average(values)
        default: break
        }
        let present = values.filter { !$0.isNull }
        switch function {
        case .count: return .attribute(.int64(Int64(present.count)))
        case .sum: return sum(present)
        case .min: return extreme(present, smallest: true)
        case .max: return extreme(present, smallest: false)
        case .average: return average(present)
        case .median:
            let numbers = present.compactMap { $0.attributeValue?.doubleValue }.sorted()
            guard !numbers.isEmpty else { return .null }
            let middle = numbers.count / 2
            return .attribute(.double(numbers.count % 2 == 1 ? numbers[middle] : (numbers[middle - 1] + numbers[middle]) / 2))
        case .stddev:
            let numbers = present.compactMap { $0.attributeValue?.doubleValue }
            guard !numbers.isEmpty else { return .null }
            let mean = numbers.reduce(0, +) / Double(numbers.count)
            let variance = numbers.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(numbers.count)
            return .attribute(.double(variance.squareRoot()))
        }
    }

    /// Applies a collection operator to values.
    public static func apply(_ op: FetchCollectionOperator, to values: [FetchValue]) -> FetchValue {
        switch op {
        case .count: return .attribute(.int64(Int64(values.count)))
        case .sum: return apply(FetchFunction.sum, to: values)
        case .avg: return apply(FetchFunction.average, to: values)
        case .min: return apply(FetchFunction.min, to: values)
        case .max: return apply(FetchFunction.max, to: values)
        case .distinctUnionOfObjects:
            var seen: Set<FetchValue> = []
            return .collection(values.filter { !$0.isNull && seen.insert($0).inserted })
        }
    }

    private static func sum(_ values: [FetchValue]) -> FetchValue {
        // One pass: the integer sum while every number is an integer or a Boolean (and it
        // does not overflow), the double sum, and which kinds were seen; the decimal sum only
        // when a decimal and no floating-point value is among them.
        var integer: Int64 = 0
        var integers = true
        var total = 0.0
        var decimal = false, floating = false
        for value in values {
            guard case .attribute(let number) = value else { continue }
            let asInteger: Int64?
            switch number {
            case .int16, .int32, .int64: asInteger = number.integerValue
            case .bool(let flag): asInteger = flag ? 1 : 0
            case .double, .float:
                asInteger = nil
                floating = true
            case .decimal:
                asInteger = nil
                decimal = true
            default: continue
            }
            if integers {
                if let asInteger {
                    let (result, overflow) = integer.addingReportingOverflow(asInteger)
                    if overflow { integers = false } else { integer = result }
                } else {
                    integers = false
                }
            }
            total += number.doubleValue ?? 0
        }
        if integers { return .attribute(.int64(integer)) }
        if decimal, !floating, let exact = decimalSum(numbers(values) { $0.doubleValue != nil || $0.boolValue != nil }) {
            return .attribute(.decimal(exact))
        }
        return .attribute(.double(total))
    }

    private static func average(_ values: [FetchValue]) -> FetchValue {
        var count = 0
        var total = 0.0
        var decimal = false, floating = false
        for value in values {
            guard case .attribute(let number) = value, let double = number.doubleValue else { continue }
            count += 1
            total += double
            switch number {
            case .decimal: decimal = true
            case .double, .float: floating = true
            default: break
            }
        }
        guard count > 0 else { return .null }
        if decimal, !floating, let exact = decimalSum(numbers(values) { $0.doubleValue != nil }) {
            return .attribute(.decimal(exact / Decimal(count)))
        }
        return .attribute(.double(total / Double(count)))
    }

    /// The attribute values among `values` that `include` keeps.
    private static func numbers(_ values: [FetchValue], _ include: (AttributeValue) -> Bool) -> [AttributeValue] {
        values.compactMap { value in
            guard case .attribute(let number) = value, include(number) else { return nil }
            return number
        }
    }

    /// The exact decimal sum when some value is a decimal and none is floating point.
    private static func decimalSum(_ numbers: [AttributeValue]) -> Decimal? {
        // Decimal arithmetic only when a decimal is there to keep exact (it costs far more
        // than integer or double addition).
        guard numbers.contains(where: { if case .decimal = $0 { return true } else { return false } }) else { return nil }
        var total = Decimal(0)
        for number in numbers {
            switch number {
            case .decimal(let v): total += v
            case .double, .float: return nil
            default: total += Decimal(number.integerValue ?? 0)
            }
        }
        return total
    }

    private static func extreme(_ values: [FetchValue], smallest: Bool) -> FetchValue {
        var best: FetchValue?
        for value in values {
            guard let current = best else { best = value; continue }
            let order = FetchValue.sortOrder(value, current, options: [])
            if (smallest && order == .orderedAscending) || (!smallest && order == .orderedDescending) { best = value }
        }
        return best ?? .null
    }
}

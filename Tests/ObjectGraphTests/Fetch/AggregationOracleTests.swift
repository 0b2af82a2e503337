import Foundation
import Testing

@testable import ObjectGraph

/// `sum:` and `average:` (and `@sum`, `@avg`) over random mixes of values, against the rules
/// FetchAggregation documents, written the plain way: nulls and non-numbers are skipped; a
/// sum of integers and Booleans stays an integer unless it overflows; a sum or mean with a
/// decimal and no floating-point value is a decimal (Booleans count as 0 there); otherwise
/// doubles, added in order.
@Suite struct AggregationOracleTests {
    static func referenceSum(_ values: [FetchValue]) -> FetchValue {
        let numbers = values.filter { !$0.isNull }.compactMap(\.attributeValue).filter { $0.doubleValue != nil || $0.boolValue != nil }
        var integer: Int64 = 0
        var allIntegers = true
        for number in numbers {
            guard let value = number.integerValue ?? number.boolValue.map({ $0 ? 1 : 0 }) else { allIntegers = false; break }
            let (result, overflow) = integer.addingReportingOverflow(value)
            if overflow { allIntegers = false; break }
            integer = result
        }
        if allIntegers { return .attribute(.int64(integer)) }
        if let decimal = referenceDecimalSum(numbers) { return .attribute(.decimal(decimal)) }
        return .attribute(.double(numbers.reduce(0) { $0 + ($1.doubleValue ?? 0) }))
    }

    static func referenceAverage(_ values: [FetchValue]) -> FetchValue {
        let numbers = values.filter { !$0.isNull }.compactMap(\.attributeValue).filter { $0.doubleValue != nil }
        guard !numbers.isEmpty else { return .null }
        if let decimal = referenceDecimalSum(numbers) { return .attribute(.decimal(decimal / Decimal(numbers.count))) }
        return .attribute(.double(numbers.reduce(0) { $0 + ($1.doubleValue ?? 0) } / Double(numbers.count)))
    }

    static func referenceDecimalSum(_ numbers: [AttributeValue]) -> Decimal? {
        guard numbers.contains(where: { if case .decimal = $0 { true } else { false } }) else { return nil }
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

    static func randomValue(_ rng: inout RandomizedConformance.SeededGenerator) -> FetchValue {
        switch rng.next() % 11 {
        case 0: return .null
        case 1: return .attribute(.null)
        case 2: return .attribute(.int16(Int16(truncatingIfNeeded: rng.next())))
        case 3: return .attribute(.int32(Int32(truncatingIfNeeded: rng.next() % 1000)))
        case 4: return .attribute(.int64(rng.next() % 3 == 0 ? Int64.max - Int64(rng.next() % 5) : Int64(rng.next() % 100) - 50))
        case 5: return .attribute(.bool(rng.next() % 2 == 0))
        case 6: return .attribute(.double(Double(Int(rng.next() % 2000)) / 8 - 100))
        case 7: return .attribute(.float(Float(Int(rng.next() % 100)) / 4))
        case 8: return .attribute(.decimal(Decimal(Int(rng.next() % 10_000)) / 100))
        case 9: return .attribute(.string("s\(rng.next() % 10)"))
        default: return .attribute(.date(Date(timeIntervalSinceReferenceDate: Double(rng.next() % 100))))
        }
    }

    @Test func sumsAndMeansFollowTheRulesForEveryMixOfKinds() {
        var rng = RandomizedConformance.SeededGenerator(state: 0x5EED)
        var decimals = 0, overflows = 0, integers = 0, doubles = 0
        for _ in 0..<3000 {
            let values = (0..<Int(rng.next() % 9)).map { _ in Self.randomValue(&rng) }
            let sum = FetchAggregation.apply(FetchFunction.sum, to: values)
            #expect(sum == Self.referenceSum(values), "sum of \(values)")
            #expect(FetchAggregation.apply(FetchFunction.average, to: values) == Self.referenceAverage(values), "average of \(values)")
            #expect(FetchAggregation.apply(FetchCollectionOperator.sum, to: values) == sum)
            switch sum {
            case .attribute(.decimal): decimals += 1
            case .attribute(.int64): integers += 1
            case .attribute(.double):
                doubles += 1
                if values.contains(where: { $0 == .attribute(.int64(Int64.max)) }) { overflows += 1 }
            default: break
            }
        }
        // Every rule was exercised.
        #expect(decimals > 50 && integers > 50 && doubles > 50 && overflows > 5)
    }
}

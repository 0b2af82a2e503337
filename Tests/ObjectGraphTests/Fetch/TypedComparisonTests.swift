import Foundation
import Testing

@testable import ObjectGraph

/// A compiled comparison of a number or date with a constant of its kind answers on the plain
/// values; wherever it answers, it must be the general comparison's answer. Every operator,
/// over integers of every width at the extremes, doubles with signed zeros, infinities and
/// NaN, dates, nulls and values of other kinds (for which it must decline).
@Suite struct TypedComparisonTests {
    static let operators: [FetchComparisonOperator] = [.equal, .notEqual, .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual]

    static let values: [AttributeValue] = {
        var values: [AttributeValue] = [.null, .string("1"), .bool(true), .decimal(Decimal(1)), .float(1)]
        for integer: Int64 in [0, 1, -1, 7, Int64(Int16.max), Int64(Int32.min), Int64.max, Int64.min, 1 << 53, (1 << 53) + 1] {
            values.append(.int64(integer))
            if let narrow = Int32(exactly: integer) { values.append(.int32(narrow)) }
            if let narrow = Int16(exactly: integer) { values.append(.int16(narrow)) }
        }
        for double in [0.0, -0.0, 1.0, -1.5, 0.99, 1.99, .infinity, -.infinity, .nan, 9_007_199_254_740_993.0] {
            values.append(.double(double))
        }
        for seconds in [0.0, -1.0, 1e9, .nan] { values.append(.date(Date(timeIntervalSinceReferenceDate: seconds))) }
        return values
    }()

    @Test func typedComparisonsAnswerAsTheGeneralComparison() throws {
        var answered = 0, declined = 0
        for op in Self.operators {
            for constant in Self.values {
                guard let test = FetchPredicate.typedTest(op, .attribute(constant)) else { continue }
                for stored in Self.values {
                    guard let answer = test(stored) else {
                        declined += 1
                        continue
                    }
                    answered += 1
                    let expected = try FetchPredicate.compare(.attribute(stored), op, .attribute(constant), modifier: .direct, options: [])
                    #expect(answer == expected, "\(stored) \(op) \(constant)")
                }
            }
        }
        #expect(answered > 1000 && declined > 1000, "both paths were exercised (\(answered), \(declined))")
        // Only the kinds it knows, and only ordering and equality.
        #expect(FetchPredicate.typedTest(.like, .attribute(.int64(1))) == nil)
        #expect(FetchPredicate.typedTest(.equal, .attribute(.string("a"))) == nil)
        #expect(FetchPredicate.typedTest(.equal, .attribute(.double(.nan))) == nil)
        #expect(FetchPredicate.typedTest(.equal, .null) == nil)
    }

    /// What a store's `fixedWidthBits(atOrdinal:as:)` answers for `stored`: its kind and bits,
    /// `nil` for a null or a value of another kind.
    static func bits(of stored: AttributeValue) -> (FixedWidthKind, UInt64)? {
        switch stored {
        case .int16(let a): return (.integer, UInt64(bitPattern: Int64(a)))
        case .int32(let a): return (.integer, UInt64(bitPattern: Int64(a)))
        case .int64(let a): return (.integer, UInt64(bitPattern: a))
        case .double(let a): return (.double, a.bitPattern)
        case .date(let a): return (.date, a.timeIntervalSinceReferenceDate.bitPattern)
        default: return nil
        }
    }

    /// The same comparisons on stored bits: wherever the bits test answers, it is the general
    /// comparison's answer; it exists exactly where the typed test does.
    @Test func comparisonsOnStoredBitsAnswerAsTheGeneralComparison() throws {
        var answered = 0
        for op in Self.operators + [.like, .contains] {
            for constant in Self.values + [.null] {
                let bitsTest = FetchPredicate.bitsTest(op, .attribute(constant))
                #expect((bitsTest == nil) == (FetchPredicate.typedTest(op, .attribute(constant)) == nil), "\(op) \(constant)")
                guard let (kind, test) = bitsTest else { continue }
                for stored in Self.values {
                    guard let (storedKind, bits) = Self.bits(of: stored), storedKind == kind, let answer = test(bits) else { continue }
                    answered += 1
                    let expected = try FetchPredicate.compare(.attribute(stored), op, .attribute(constant), modifier: .direct, options: [])
                    #expect(answer == expected, "\(stored) \(op) \(constant)")
                }
            }
        }
        #expect(answered > 1000)
    }
}

/// A key path's components, cut from its UTF-8 bytes, are what `split(separator: ".")` gives
/// (empty components skipped), for every path of up to four pieces of dots, ASCII names and
/// names with accents (precomposed, decomposed) and a 16-byte name (a large string).
@Suite struct KeyPathComponentTests {
    @Test func keyPathComponentsAreTheDotSplitOfThePath() {
        let pieces = [".", "a", "é", "e\u{301}", "sixteen_bytes_xx"]
        var paths = [""]
        var level = [""]
        for _ in 0..<4 {
            level = level.flatMap { prefix in pieces.map { prefix + $0 } }
            paths += level
        }
        #expect(paths.count == 781)
        for path in paths {
            #expect(path.keyPathComponents == path.split(separator: ".").map(String.init), "\(path)")
        }
    }
}

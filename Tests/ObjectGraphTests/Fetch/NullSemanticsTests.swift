import Foundation
import ObjectGraph
import Testing

/// The null rules of the fetch language, one test each. ObjectGraph follows Core Data's
/// in-memory (two-valued) evaluation; where SQL's three-valued logic would answer
/// differently, the test says so.
@Suite("Null semantics")
struct NullSemanticsTests {
    let row: [String: AttributeValue] = ["missing": .null, "age": 36, "name": "Ada"]

    private func holds(_ format: String, _ arguments: any FetchArgument...) throws -> Bool {
        try FetchPredicate(format: format, argumentArray: arguments).evaluate(with: row)
    }

    @Test func nullEqualsNull() throws {
        #expect(try holds("missing == nil"))  // SQL: NULL = NULL is unknown
        #expect(try holds("nil == missing"))
        #expect(try !holds("missing != nil"))
    }

    @Test func valueIsNotEqualToNull() throws {
        #expect(try holds("age != nil"))
        #expect(try !holds("age == nil"))
        #expect(try holds("missing != 36"))  // SQL: NULL <> 36 is unknown
    }

    @Test func orderingWithNullIsFalseAndItsNegationTrue() throws {
        #expect(try !holds("missing > 30"))
        #expect(try !holds("missing <= 30"))
        #expect(try holds("NOT missing > 30"))  // SQL and Core Data's SQLite store: unknown, row left out
        #expect(try !holds("age < nil"))
    }

    @Test func stringOperatorsOnNullAreFalse() throws {
        for op in ["BEGINSWITH", "ENDSWITH", "CONTAINS", "LIKE", "MATCHES"] {
            #expect(try !holds("missing \(op) 'a'"), "\(op)")
            #expect(try !holds("name \(op) nil"), "\(op) with a null pattern")
        }
    }

    @Test func membershipAndRangesWithNull() throws {
        #expect(try holds("missing IN {1, nil}"))  // SQL: NULL IN (1, NULL) is unknown
        #expect(try !holds("missing IN {1, 2}"))
        #expect(try !holds("age IN nil"))
        #expect(try !holds("missing BETWEEN {1, 2}"))
        #expect(try !holds("age BETWEEN {nil, 40}"))
    }

    @Test func quantifiersOverEmptyCollections() throws {
        let empty = FetchValueRow(["tags": .collection([])])
        #expect(try !FetchPredicate(format: "ANY tags == 'x'").evaluate(with: empty))
        #expect(try FetchPredicate(format: "ALL tags == 'x'").evaluate(with: empty))
        #expect(try FetchPredicate(format: "NONE tags == 'x'").evaluate(with: empty))
        #expect(try FetchPredicate(format: "tags.@count == 0").evaluate(with: empty))
    }

    @Test func aggregatesSkipNulls() throws {
        let values = FetchValueRow(["v": .collection([.attribute(.int64(2)), .null, .attribute(.int64(4))])])
        #expect(try FetchExpression(format: "v.@count").evaluate(with: values) == .attribute(.int64(3)), "@count counts elements")
        #expect(try FetchExpression(format: "count:(v)").evaluate(with: values) == .attribute(.int64(2)), "count: counts values")
        #expect(try FetchExpression(format: "v.@sum").evaluate(with: values) == .attribute(.int64(6)))
        #expect(try FetchExpression(format: "v.@avg").evaluate(with: values) == .attribute(.double(3)))
        #expect(try FetchExpression(format: "v.@min").evaluate(with: values) == .attribute(.int64(2)))
    }

    @Test func integersAndDoublesCompareExactly() {
        let big = Int64(1) << 53
        #expect(AttributeValue.compare(.int64(big + 1), .double(Double(big))) == .orderedDescending, "no rounding of the integer")
        #expect(AttributeValue.compare(.double(Double(big)), .int64(big + 1)) == .orderedAscending)
        #expect(AttributeValue.compare(.int64(.max), .double(Double(Int64.max))) == .orderedAscending, "Double(Int64.max) is 2^63")
        #expect(AttributeValue.compare(.int16(-3), .double(-3.5)) == .orderedDescending)
        #expect(AttributeValue.compare(.int32(7), .float(7)) == .orderedSame)
        #expect(AttributeValue.compare(.int64(1), .double(.nan)) == nil, "NaN does not compare")
        #expect(AttributeValue.compare(.double(.nan), .double(1)) == nil)
    }

    @Test func mixedKindsDoNotCompare() throws {
        #expect(try !holds("name > 3"))
        #expect(try !holds("name == 3"))
        #expect(try holds("name != 3"))
    }
}

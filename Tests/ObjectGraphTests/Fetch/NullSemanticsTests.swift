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

    @Test func mixedKindsDoNotCompare() throws {
        #expect(try !holds("name > 3"))
        #expect(try !holds("name == 3"))
        #expect(try holds("name != 3"))
    }
}

import Foundation
import ObjectGraph
import Testing

@Suite("Predicates and sorting")
struct PredicateTests {
    let row: [String: AttributeValue] = ["name": "Ada", "age": .int16(36), "score": .double(2.5), "nick": .null]

    @Test func comparisonsAcrossNumericWidths() throws {
        #expect(try FetchPredicate.equal("age", 36).evaluate(with: row))
        #expect(try FetchPredicate.greaterThan("age", .double(35.5)).evaluate(with: row))
        #expect(try FetchPredicate.lessThanOrEqual("score", .int64(3)).evaluate(with: row))
        #expect(try !FetchPredicate.lessThan("age", 36).evaluate(with: row))
        #expect(try FetchPredicate.greaterThanOrEqual("age", 36).evaluate(with: row))
        #expect(try FetchPredicate.notEqual("age", 1).evaluate(with: row))
    }

    @Test func stringOperatorsWithOptions() throws {
        #expect(try FetchPredicate.beginsWith("name", "a", options: .caseInsensitive).evaluate(with: row))
        #expect(try !FetchPredicate.beginsWith("name", "a").evaluate(with: row))
        #expect(try FetchPredicate.contains("name", "d").evaluate(with: row))
        #expect(try FetchPredicate.endsWith("name", "DA", options: .caseInsensitive).evaluate(with: row))
        let accented: [String: AttributeValue] = ["name": "Ádá"]
        #expect(try FetchPredicate.equal("name", "ada", options: [.caseInsensitive, .diacriticInsensitive]).evaluate(with: accented))
    }

    @Test func inAndCompoundPredicates() throws {
        let isIn = FetchPredicate.isIn("name", ["Bob", "Ada"])
        #expect(try isIn.evaluate(with: row))
        #expect(try (isIn && .greaterThan("age", 30)).evaluate(with: row))
        #expect(try !(isIn && .greaterThan("age", 40)).evaluate(with: row))
        #expect(try (FetchPredicate.value(false) || .equal("name", "Ada")).evaluate(with: row))
        #expect(try (!FetchPredicate.value(true)).evaluate(with: row) == false)
        #expect(try FetchPredicate.and([]).evaluate(with: row))
        #expect(try !FetchPredicate.or([]).evaluate(with: row))
    }

    @Test func nullOnlyEqualsNull() throws {
        #expect(try FetchPredicate.equal("nick", nil).evaluate(with: row))
        #expect(try !FetchPredicate.equal("name", nil).evaluate(with: row))
        #expect(try !FetchPredicate.lessThan("nick", 3).evaluate(with: row))
        #expect(try !FetchPredicate.greaterThan("name", 3).evaluate(with: row), "string vs number is false, not an error")
    }

    @Test func unknownKeyThrows() {
        #expect(throws: ObjectGraphError.self) { try FetchPredicate.equal("missing", 1).evaluate(with: row) }
    }

    @Test func collectionKeyPathsMatchAny() throws {
        let members = FetchValueRow(["names": .collection([.attribute("Ada"), .attribute("Bob")])])
        #expect(try FetchPredicate.equal("names", "Bob").evaluate(with: members))
        #expect(try FetchPredicate.contains("names", "Ada").evaluate(with: members))
        #expect(try !FetchPredicate.equal("names", "Cy").evaluate(with: members))
        #expect(try FetchPredicate.notEqual("names", "Cy").evaluate(with: members))
    }

    @Test func sortPutsNullFirstAndKeepsTiesStable() throws {
        let rows: [[String: AttributeValue]] = [
            ["n": "b", "k": 1], ["n": .null, "k": 2], ["n": "a", "k": 3], ["n": "b", "k": 4],
        ]
        let ascending = try FetchSortDescriptor.sort(rows, by: [FetchSortDescriptor(keyPath: "n")])
        #expect(ascending.map { $0["k"] } == [2, 3, 1, 4])
        let descending = try FetchSortDescriptor.sort(rows, by: [FetchSortDescriptor(keyPath: "n", ascending: false), FetchSortDescriptor(keyPath: "k", ascending: false)])
        #expect(descending.map { $0["k"] } == [4, 1, 3, 2])
    }

    @Test func descriptionUsesCoreDataSyntax() {
        let predicate = FetchPredicate.equal("name", "Ada", options: .caseInsensitive) && .greaterThan("age", 3)
        #expect(predicate.description == "(name ==[c] \"Ada\" AND age > 3)")
    }

    @Test func valueConversionsRejectOutOfRangeIntegers() {
        #expect(AttributeValue.int64(70_000).converted(to: .integer16) == nil)
        #expect(AttributeValue.int64(7).converted(to: .integer16) == .int16(7))
        #expect(AttributeValue.string("x").converted(to: .integer64) == nil)
        #expect(AttributeValue.null.converted(to: .date) == .null)
    }

    @Test func transformableRoundTripsCodableValues() throws {
        struct Point: Codable, Equatable { var x: Int, y: Int }
        let value = try AttributeValue.transformable(encoding: Point(x: 1, y: 2))
        #expect(try value.decoded(as: Point.self) == Point(x: 1, y: 2))
        #expect(try AttributeValue.null.decoded(as: Point.self) == nil)
    }
}

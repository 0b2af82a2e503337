import Foundation
import ObjectGraph
import Testing

/// Bad predicates and requests fail with an ``ObjectGraphError`` that names the problem.
@Suite("Fetch language: bad input")
struct FetchBadInputTests {
    private func failure(_ body: () throws -> Void) -> ObjectGraphError? {
        do { try body(); return nil } catch let error as ObjectGraphError { return error } catch { return nil }
    }

    @Test func unknownKeyInAPredicateNamesTheKeyPath() throws {
        let (stack, _) = try FetchGraph.make()
        let error = failure { _ = try stack.context().fetch(FetchRequest.make("Person", try FetchPredicate(format: "department.nmae == 'x'"))) }
        #expect(error?.code == .unknownKey)
        #expect(error?.key == "nmae")
        #expect(error?.entityName == "Department")
    }

    @Test func keyPathContinuingPastAnAttributeIsRejected() throws {
        let (stack, _) = try FetchGraph.make()
        let error = failure { _ = try stack.context().fetch(FetchRequest.make("Person", try FetchPredicate(format: "name.length > 3"))) }
        #expect(error?.code == .unknownKey)
        #expect(error?.message.contains("name.length") == true)
    }

    @Test func invalidRegularExpressionIsReported() {
        let error = failure { _ = try FetchPredicate(format: "name MATCHES '(['").evaluate(with: ["name": "x"] as [String: AttributeValue]) }
        #expect(error?.code == .invalidFetchRequest)
        #expect(error?.message.contains("([") == true)
    }

    @Test func unboundVariableIsReportedAtEvaluation() {
        let error = failure { _ = try FetchPredicate(format: "age > $LIMIT").evaluate(with: ["age": 3] as [String: AttributeValue]) }
        #expect(error?.code == .invalidFetchRequest)
        #expect(error?.key == "LIMIT")
    }

    @Test func unknownCollectionOperatorBuiltInSwiftIsReported() {
        let predicate = FetchPredicate.comparison(.keyPath("tags.@median"), .equal, .constant(.null))
        let error = failure { _ = try predicate.evaluate(with: FetchValueRow(["tags": .collection([])])) }
        #expect(error?.code == .invalidFetchRequest)
        #expect(error?.message.contains("@median") == true)
    }

    @Test func subqueryOnRowsThatCannotFollowIDsSaysSo() throws {
        let row = FetchValueRow(["tags": .collection([.attribute("a")])])
        #expect(try FetchPredicate(format: "SUBQUERY(tags, $t, $t == 'a').@count == 1").evaluate(with: row), "plain values work")
        let id = ManagedObjectID.temporary(for: EntityDescription(name: "Tag"))
        let objects = FetchValueRow(["tags": .collection([.object(id)])])
        let error = failure { _ = try FetchPredicate(format: "SUBQUERY(tags, $t, $t.name == 'a').@count == 1").evaluate(with: objects) }
        #expect(error?.code == .unsupportedRequest)
    }

    @Test func wrongArgumentTypeNamesTheSpecifier() {
        let error = failure { _ = try FetchPredicate(format: "age > %d", "thirty") }
        #expect(error?.code == .malformedPredicate)
        #expect(error?.message.contains("%d needs an integer") == true)
        #expect(error?.offset == 6)
    }
}

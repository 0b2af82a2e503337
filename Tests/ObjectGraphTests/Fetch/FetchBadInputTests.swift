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

    /// A context skips the checks of a predicate shape that passed them before on the same
    /// entity: a shape that failed fails every time, and a shape checked on one entity is
    /// checked again on another.
    @Test func aPredicateThatFailedItsChecksFailsEveryTimeOnEveryEntity() throws {
        let (stack, _) = try FetchGraph.make()
        let context = stack.context()
        for _ in 0..<3 {
            let unknown = failure { _ = try context.fetch(FetchRequest.make("Person", try FetchPredicate(format: "department.nmae == 'x'"))) }
            #expect(unknown?.code == .unknownKey)
            let mismatched = failure { _ = try context.count(for: FetchRequest.make("Person", try FetchPredicate(format: "age == 'old'"))) }
            #expect(mismatched != nil)
        }
        // `name` is a string of Department and of Person; `budget` a decimal of Department and an
        // integer of Project: valid on both. `age` is Person's only.
        for _ in 0..<2 {
            #expect(failure { _ = try context.fetch(FetchRequest.make("Department", try FetchPredicate(format: "name == 'x'"))) } == nil)
            #expect(failure { _ = try context.fetch(FetchRequest.make("Person", try FetchPredicate(format: "age > 3"))) } == nil)
            #expect(failure { _ = try context.fetch(FetchRequest.make("Department", try FetchPredicate(format: "age > 3"))) }?.code == .unknownKey)
            #expect(failure { _ = try context.fetch(FetchRequest.make("Project", try FetchPredicate(format: "age > 3"))) }?.code == .unknownKey)
        }
        // `v` is a number of Meter and a string of Label: `v == 3 OR v == 4` passes on Meter, then
        // is still a mismatch on Label (which only the check reports: the evaluation would say
        // false). (A shape of more than one comparison: the checks a context keeps per shape.)
        let model = try ManagedObjectModel(entities: [
            EntityDescription(name: "Meter", properties: [.attribute("v", .integer64)]),
            EntityDescription(name: "Label", properties: [.attribute("v", .string)]),
        ])
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .inMemory, configuration: nil, at: nil, options: [:])
        let other = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for _ in 0..<2 {
            #expect(failure { _ = try other.fetch(FetchRequest.make("Meter", try FetchPredicate(format: "v == 3 OR v == 4"))) } == nil)
            #expect(failure { _ = try other.fetch(FetchRequest.make("Label", try FetchPredicate(format: "v == 3 OR v == 4"))) } != nil)
        }
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

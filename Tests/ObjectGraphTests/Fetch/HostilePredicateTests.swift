import Foundation
import ObjectGraph
import Synchronization
import Testing

/// Hostile and senseless predicates: deep nesting is refused with an error instead of
/// overflowing the stack, and comparisons that could never hold are errors that name them
/// instead of fetches that silently match nothing.
@Suite("Fetch language: hostile predicates")
struct HostilePredicateTests {
    private func failure(_ body: () throws -> Void) -> ObjectGraphError? {
        do { try body(); return nil } catch let error as ObjectGraphError { return error } catch { return nil }
    }

    /// Runs `body` on a thread with a 2 MiB stack (a quarter of a Linux thread's default),
    /// waiting for it to finish: the deepest predicates must fit in it in a debug build.
    private func onSmallStack(_ body: @escaping @Sendable () -> Void) {
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            body()
            done.signal()
        }
        thread.stackSize = 2 * 1024 * 1024
        thread.start()
        done.wait()
    }

    // MARK: Nesting

    /// Formats nested far past the limit, one per kind of nesting the grammar has.
    static let deepFormats: [(String, String)] = [
        ("parentheses", String(repeating: "(", count: 10_000) + "age == 1" + String(repeating: ")", count: 10_000)),
        ("NOT", String(repeating: "NOT ", count: 100_000) + "age == 1"),
        ("!", String(repeating: "!", count: 100_000) + "age == 1"),
        ("braces", "age IN " + String(repeating: "{", count: 10_000) + "1" + String(repeating: "}", count: 10_000)),
        ("indexes", "tags" + String(repeating: "[0]", count: 10_000) + " == 1"),
        ("functions", String(repeating: "max:(", count: 5_000) + "age" + String(repeating: ")", count: 5_000) + " == 1"),
        ("subqueries", String(repeating: "SUBQUERY(tags, $t, ", count: 2_000) + "TRUEPREDICATE" + String(repeating: ").@count > 0", count: 2_000)),
        ("AND in parentheses", String(repeating: "age == 1 AND (", count: 10_000) + "age == 2" + String(repeating: ")", count: 10_000)),
    ]

    @Test(arguments: deepFormats.map(\.0))
    func deeplyNestedFormatIsAMalformedPredicateNotACrash(kind: String) {
        let format = Self.deepFormats.first { $0.0 == kind }?.1 ?? ""
        let error = failure { _ = try FetchPredicate(format: format) }
        #expect(error?.code == .malformedPredicate, "\(kind)")
        #expect(error?.message.contains("nests deeper than \(FetchPredicate.maximumDepth) levels") == true, "\(kind): \(error?.message.prefix(300) ?? "no error")")
        #expect((error?.message.count ?? 0) < 400, "the message quotes the format around the error, not all of it")
    }

    @Test func deeplyNestedExpressionFormatIsRefused() {
        let error = failure { _ = try FetchExpression(format: String(repeating: "{", count: 5_000) + "1" + String(repeating: "}", count: 5_000)) }
        #expect(error?.code == .malformedPredicate)
    }

    /// The deepest predicates the parser accepts, of several shapes, parse, print, compare,
    /// evaluate and run as fetches against every store on a small stack.
    @Test(arguments: allStoreFixtures)
    func predicatesAtTheNestingLimitWorkOnASmallStack(fixture: any StoreFixture) throws {
        let (stack, _) = try FetchGraph.make(in: fixture)
        let limit = FetchPredicate.maximumDepth
        // NOT chain: each NOT one level, the comparison and its operands two more.
        let nots = String(repeating: "NOT ", count: limit - 2) + "name == 'Ada'"
        // Nested conjunctions: each level an AND node.
        let ands = String(repeating: "age > 0 AND (", count: limit - 3) + "name == 'Ada'" + String(repeating: ")", count: limit - 3)
        // Redundant parentheses: no tree depth, but parser depth.
        let parentheses = String(repeating: "(", count: limit - 2) + "name == 'Ada'" + String(repeating: ")", count: limit - 2)
        let formats = [nots, ands, parentheses]
        let expected: [Set<String>] = [
            limit % 2 == 0 ? ["Ada"] : ["Bob", "Zoë", "José", "Ådne", "Σωκράτης"], ["Ada"], ["Ada"],
        ]
        let coordinator = stack.coordinator
        let results = Results()
        onSmallStack {
            for format in formats {
                do {
                    let predicate = try FetchPredicate(format: format)
                    let printed = predicate.description
                    let reparsed = try FetchPredicate(format: printed)
                    let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
                    let people = try context.fetch(FetchRequest.make("Person", predicate))
                    let names = Set(try people.map { try $0.value(forKey: "name").stringValue ?? "" })
                    let inMemory = try people.filter { try reparsed.evaluate(with: $0) }.count
                    results.append(.success((names, reparsed == predicate, inMemory == people.count, predicate.hashValue == reparsed.hashValue)))
                } catch {
                    results.append(.failure(error))
                }
            }
        }
        let outcomes = results.values
        #expect(outcomes.count == formats.count)
        for (index, outcome) in outcomes.enumerated() {
            switch outcome {
            case .success(let (names, roundTrips, evaluates, hashes)):
                #expect(names == expected[index], "format \(index)")
                #expect(roundTrips && evaluates && hashes, "format \(index)")
            case .failure(let error):
                Issue.record("format \(index): \(error)")
            }
        }
    }

    @Test func oneLevelPastTheLimitIsRefused() {
        let limit = FetchPredicate.maximumDepth
        #expect(failure { _ = try FetchPredicate(format: String(repeating: "NOT ", count: limit - 2) + "age == 1") } == nil)
        #expect(failure { _ = try FetchPredicate(format: String(repeating: "NOT ", count: limit - 1) + "age == 1") }?.code == .malformedPredicate)
        #expect(failure { _ = try FetchPredicate(format: String(repeating: "(", count: limit) + "age == 1" + String(repeating: ")", count: limit)) }?.code == .malformedPredicate)
    }

    /// Built in code past the limit (deep enough to overflow a recursive walk without it):
    /// evaluation throws, printing elides what lies deeper, the fetch refuses it.
    @Test func deepPredicateBuiltInCodeIsRefusedByEvaluationAndPrintedShort() {
        var predicate = FetchPredicate.equal("name", "Ada")
        for _ in 0..<20_000 { predicate = .not(predicate) }
        let row = FetchValueRow(["name": .attribute("Ada")])
        #expect(failure { _ = try predicate.evaluate(with: row) }?.code == .invalidFetchRequest)
        #expect(predicate.description.hasSuffix("NOT …"))
        #expect(predicate.description.count < 1_000)
        var expression = FetchExpression.keyPath("tags")
        for _ in 0..<20_000 { expression = .index(expression, .first) }
        #expect(failure { _ = try expression.evaluate(with: FetchValueRow(["tags": .collection([])])) }?.code == .invalidFetchRequest)
        #expect(expression.description.hasPrefix("…[FIRST]"))
        // Taken apart level by level: dropping a 20,000-deep value recursively could itself
        // overflow the stack of a debug build.
        while case .not(let inner) = predicate { predicate = inner }
        while case .index(let base, _) = expression { expression = base }
    }

    @Test(arguments: allStoreFixtures)
    func deepPredicateBuiltInCodeIsRefusedByTheFetch(fixture: any StoreFixture) throws {
        let (stack, _) = try FetchGraph.make(in: fixture)
        var predicate = FetchPredicate.equal("name", "Ada")
        for _ in 0..<FetchPredicate.maximumDepth { predicate = .not(predicate) }
        let context = stack.context()
        let error = failure { _ = try context.fetch(FetchRequest.make("Person", predicate)) }
        #expect(error?.code == .invalidFetchRequest)
        #expect(error?.message.contains("nests deeper") == true)
        #expect(failure { _ = try context.count(for: FetchRequest.make("Person", predicate)) }?.code == .invalidFetchRequest)
        // Built flat, the same number of conditions is one level.
        let flat = FetchPredicate.or((0..<10_000).map { FetchPredicate.equal("age", .int64(Int64($0))) })
        #expect(try context.count(for: FetchRequest.make("Person", flat)) == 5)
    }

    // MARK: Printing

    /// A combining mark right after the opening quote or an escape would join it into one
    /// character the lexer does not know (found by strata-fuzz): printed, it is escaped too.
    @Test(arguments: ["\u{301}x", "a\r\u{6DC}b", "\\\u{301}", "\"\u{301}", "\u{0}\u{301}", "e\u{301}", "\n\u{20DD}\u{301}", "\u{6DD}\u{6}", "a\u{6DD}", "\u{1D165}x", "\u{E0100}", "😀\r"])
    func stringsWithCombiningMarksPrintAsFormatsThatParseBack(text: String) throws {
        let predicate = FetchPredicate.equal("name", .string(text))
        let printed = predicate.canonicalFormat
        #expect(try FetchPredicate(format: printed) == predicate, "\(printed)")
    }

    @Test func aMarkJoinedToAnEscapeLetterFollowsTheEscape() throws {
        let parsed = try FetchPredicate(format: "name == '\\n\u{301}x'")
        #expect(parsed == .equal("name", .string("\n\u{301}x")))
        #expect(failure { _ = try FetchPredicate(format: "name == '\\u\u{301}0041'") }?.code == .malformedPredicate)
        // A scalar beyond U+FFFF as a surrogate pair; a lone surrogate is an error.
        #expect(try FetchPredicate(format: "name == '\\uD83D\\uDE00'") == .equal("name", "😀"))
        #expect(failure { _ = try FetchPredicate(format: "name == '\\uD83D'") }?.code == .malformedPredicate)
        #expect(failure { _ = try FetchPredicate(format: "name == '\\uDE00'") }?.code == .malformedPredicate)
        #expect(failure { _ = try FetchPredicate(format: "name == '\\uD83D\\u0041'") }?.code == .malformedPredicate)
    }

    // MARK: Comparisons that can never hold

    @Test func numberBeyondADoubleIsMalformed() {
        let error = failure { _ = try FetchPredicate(format: "age == 1e99999999") }
        #expect(error?.code == .malformedPredicate)
        #expect(error?.offset == 7)
        #expect(error?.message.contains("out of range") == true)
        #expect(failure { _ = try FetchPredicate(format: "age == -1e400") }?.code == .malformedPredicate)
        #expect(failure { _ = try FetchPredicate(format: "age < 1e300") } == nil)
    }

    @Test func inWithASingleNumberIsMalformed() {
        let error = failure { _ = try FetchPredicate(format: "name IN 5") }
        #expect(error?.code == .malformedPredicate)
        #expect(error?.offset == 8)
        #expect(failure { _ = try FetchPredicate(format: "name IN 'Ada Lovelace'") } == nil, "IN a string is a substring test")
        // An argument too, whether the format was parsed before or not.
        for _ in 0..<2 {
            let argument = failure { _ = try FetchPredicate(format: "name IN %@", 5) }
            #expect(argument?.code == .malformedPredicate)
            #expect(argument?.message.contains("IN needs a collection") == true)
            #expect(failure { _ = try FetchPredicate(format: "name IN %@", ["Ada"]) } == nil)
        }
    }

    @Test(arguments: allStoreFixtures)
    func inWithASingleNumberBuiltInCodeIsRefusedByTheFetch(fixture: any StoreFixture) throws {
        let (stack, _) = try FetchGraph.make(in: fixture)
        let predicate = FetchPredicate.compare("name", .in, .attribute(.int64(5)))
        let error = failure { _ = try stack.context().fetch(FetchRequest.make("Person", predicate)) }
        #expect(error?.code == .invalidFetchRequest)
        #expect(error?.key == "name")
        #expect(error?.message.contains("IN needs a collection") == true)
    }

    /// Each case names the part of the message that must say what is wrong.
    static let neverHolding: [(entity: String, format: String, arguments: [FetchValue], key: String, says: String)] = [
        ("Person", "age > 'abc'", [], "age", "integer16"),
        ("Person", "'abc' < age", [], "age", "integer16"),
        ("Person", "name == 5", [], "name", "string"),
        ("Person", "born > 'yesterday'", [], "born", "date"),
        ("Person", "age BETWEEN {'a', 'z'}", [], "age", "integer16"),
        ("Person", "age IN {1, 'two'}", [], "age", "integer16"),
        ("Person", "name BEGINSWITH 5", [], "name", "string"),
        ("Person", "ANY name == 'x'", [], "name", "to-many"),
        ("Person", "ALL department.name == 'x'", [], "department.name", "to-many"),
        ("Person", "NONE age > 3", [], "age", "to-many"),
        ("Project", "tags.@avg.name > 1", [], "tags.@avg.name", "@avg needs numbers"),
        ("Project", "tags.@sum.name > 1", [], "tags.@sum.name", "@sum needs numbers"),
        ("Department", "projects.@max > 1", [], "projects.@max", "@max needs an attribute"),
        ("Department", "employees.@count == 'many'", [], "employees.@count", "integer64"),
        ("Department", "employees.@avg.age > 'old'", [], "employees.@avg.age", "double"),
    ]

    @Test(arguments: allStoreFixtures)
    func comparisonsThatCanNeverHoldAreErrorsNamingThem(fixture: any StoreFixture) throws {
        let (stack, _) = try FetchGraph.make(in: fixture)
        let context = stack.context()
        for item in Self.neverHolding {
            let predicate = try FetchPredicate(format: item.format, argumentArray: item.arguments.map { $0 as any FetchArgument })
            let error = failure { _ = try context.fetch(FetchRequest.make(item.entity, predicate)) }
            #expect(error?.code == .invalidFetchRequest, "\(item.format)")
            #expect(error?.entityName == item.entity, "\(item.format)")
            #expect(error?.key == item.key, "\(item.format)")
            #expect(error?.message.contains(item.says) == true, "\(item.format): \(error?.message ?? "no error")")
            #expect(failure { _ = try context.count(for: FetchRequest.make(item.entity, predicate)) }?.code == .invalidFetchRequest)
        }
    }

    /// The neighbours of the refused cases that do hold sometimes still run.
    static let sensible: [(entity: String, format: String, arguments: [FetchValue], count: Int)] = [
        ("Person", "age > 30", [], 3),
        ("Person", "age == nil", [], 1),
        ("Person", "salary > 90", [], 2),
        ("Person", "age IN {25, 36}", [], 2),
        ("Person", "age BETWEEN {20, 30}", [], 2),
        ("Person", "active == 1", [], 3),
        ("Person", "active == YES", [], 3),
        ("Person", "born > %@", [.attribute(.date(Date(timeIntervalSinceReferenceDate: 150)))], 3),
        ("Person", "name IN 'Ada Lovelace'", [], 1),
        ("Person", "name IN %@", [.collection([.attribute("Ada"), .attribute("Bob")])], 2),
        ("Person", "ANY projects.title == 'Atlas'", [], 3),
        ("Person", "NONE projects.budget > 300", [], 4),
        ("Person", "department.budget > 300", [], 2),
        ("Person", "department == nil", [], 2),
        ("Project", "tags.@count == 2", [], 2),
        ("Department", "employees.@avg.age > 30", [], 1),
        ("Department", "projects.@sum.budget >= 200", [], 2),
        ("Department", "employees.@max.name == 'Zoë'", [], 1),
        ("Department", "budget > 300", [], 1),
    ]

    @Test(arguments: allStoreFixtures)
    func sensibleNeighboursStillRun(fixture: any StoreFixture) throws {
        let (stack, _) = try FetchGraph.make(in: fixture)
        let context = stack.context()
        for item in Self.sensible {
            let predicate = try FetchPredicate(format: item.format, argumentArray: item.arguments.map { $0 as any FetchArgument })
            #expect(try context.count(for: FetchRequest.make(item.entity, predicate)) == item.count, "\(item.format)")
        }
    }
}

/// Outcomes handed back from the small-stack thread, in a mutex (written there, read
/// after it finished).
private final class Results: Sendable {
    typealias Outcome = Result<(Set<String>, Bool, Bool, Bool), any Error>
    private let stored = Mutex<[Outcome]>([])
    func append(_ outcome: Outcome) { stored.withLock { $0.append(outcome) } }
    var values: [Outcome] { stored.withLock { $0 } }
}

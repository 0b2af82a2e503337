import Foundation
import ObjectGraph
import Testing

/// An argument of a table case: a value, or objects of the graph by name.
enum TableArgument: Sendable {
    case value(FetchValue)
    case object(String)
    case objects([String])
}

/// One row of the evaluation table: a predicate over one entity of ``FetchGraph`` and
/// the names of the objects it must match.
struct EvaluationCase: Sendable, CustomTestStringConvertible {
    var entity = "Person"
    let format: String
    var arguments: [TableArgument] = []
    var variables: [String: FetchValue]? = nil
    let expected: Set<String>

    var testDescription: String { "\(entity): \(format)" }
}

private func date(_ seconds: Double) -> TableArgument { .value(.attribute(.date(Date(timeIntervalSinceReferenceDate: seconds)))) }
private let everyone: Set<String> = ["Ada", "Bob", "Zoë", "José", "Ådne", "Σωκράτης"]

/// The table. Where Apple's "Predicate Format String Syntax" (Predicate Programming Guide)
/// states the outcome, the comment says so ("Apple:"); "Strata:" marks choices of ours
/// that the DocC article "Fetch Language" documents.
let evaluationTable: [EvaluationCase] = [
    // Numbers, across integer and floating-point widths.
    EvaluationCase(format: "age > 30", expected: ["Ada", "Zoë", "Σωκράτης"]),
    EvaluationCase(format: "age >= 36", expected: ["Ada", "Zoë", "Σωκράτης"]),
    EvaluationCase(format: "age < 30", expected: ["Bob", "José"]),
    EvaluationCase(format: "age <= 29", expected: ["Bob", "José"]),
    EvaluationCase(format: "age =< 29", expected: ["Bob", "José"]),  // Apple: =< is a synonym of <=
    EvaluationCase(format: "age => 41", expected: ["Zoë", "Σωκράτης"]),  // Apple: => is a synonym of >=
    EvaluationCase(format: "age == 36", expected: ["Ada"]),
    EvaluationCase(format: "age = 36", expected: ["Ada"]),  // Apple: = and == are the same
    EvaluationCase(format: "age != 36", expected: ["Bob", "Zoë", "José", "Ådne", "Σωκράτης"]),  // Strata: null != 36
    EvaluationCase(format: "age <> 36", expected: ["Bob", "Zoë", "José", "Ådne", "Σωκράτης"]),  // Apple: <> is !=
    EvaluationCase(format: "age == nil", expected: ["Ådne"]),
    EvaluationCase(format: "age == NULL", expected: ["Ådne"]),  // Apple: NULL and NIL are the same
    EvaluationCase(format: "age != nil", expected: ["Ada", "Bob", "Zoë", "José", "Σωκράτης"]),
    EvaluationCase(format: "nil == age", expected: ["Ådne"]),
    EvaluationCase(format: "NOT age > 30", expected: ["Bob", "José", "Ådne"]),  // Strata: two-valued, null age > 30 is false
    EvaluationCase(format: "age > 30 OR age == nil", expected: ["Ada", "Zoë", "Σωκράτης", "Ådne"]),
    EvaluationCase(format: "age BETWEEN {25, 36}", expected: ["Ada", "Bob", "José"]),  // Apple: BETWEEN includes both bounds
    EvaluationCase(format: "age BETWEEN {30, 30}", expected: []),
    EvaluationCase(format: "age BETWEEN %@", arguments: [.value(.collection([.attribute(.int64(40)), .attribute(.int64(80))]))], expected: ["Zoë", "Σωκράτης"]),
    EvaluationCase(format: "age IN {25, 29, 99}", expected: ["Bob", "José"]),
    EvaluationCase(format: "NOT age IN {25, 29}", expected: ["Ada", "Zoë", "Ådne", "Σωκράτης"]),
    EvaluationCase(format: "age > 35.5", expected: ["Ada", "Zoë", "Σωκράτης"]),
    EvaluationCase(format: "age == 36.0", expected: ["Ada"]),
    EvaluationCase(format: "age > %d", arguments: [.value(.attribute(.int32(40)))], expected: ["Zoë", "Σωκράτης"]),
    EvaluationCase(format: "salary > 90", expected: ["Ada", "José"]),
    EvaluationCase(format: "salary == 80", expected: ["Bob"]),
    EvaluationCase(format: "salary < 0.01", expected: ["Σωκράτης"]),
    EvaluationCase(format: "salary == nil", expected: ["Zoë"]),
    EvaluationCase(format: "salary >= age", expected: ["Ada", "Bob", "José"]),
    EvaluationCase(format: "age < salary", expected: ["Ada", "Bob", "José"]),
    EvaluationCase(format: "salary >= %f", arguments: [.value(.attribute(.float(95.25)))], expected: ["Ada", "José"]),
    // Booleans (stored as 0 and 1 by Core Data, so they compare with numbers).
    EvaluationCase(format: "active == YES", expected: ["Ada", "Zoë", "José"]),
    EvaluationCase(format: "active == TRUE", expected: ["Ada", "Zoë", "José"]),
    EvaluationCase(format: "active == NO", expected: ["Bob", "Ådne"]),
    EvaluationCase(format: "active == nil", expected: ["Σωκράτης"]),
    EvaluationCase(format: "active == 1", expected: ["Ada", "Zoë", "José"]),
    EvaluationCase(format: "active != TRUE", expected: ["Bob", "Ådne", "Σωκράτης"]),
    EvaluationCase(format: "active == %@", arguments: [.value(.attribute(.bool(false)))], expected: ["Bob", "Ådne"]),
    EvaluationCase(format: "TRUEPREDICATE", expected: everyone),
    EvaluationCase(format: "FALSEPREDICATE", expected: []),
    EvaluationCase(format: "NOT FALSEPREDICATE", expected: everyone),
    // Strings, with [c] and [d] (Apple: [c] case-insensitive, [d] diacritic-insensitive).
    EvaluationCase(format: "name == 'Ada'", expected: ["Ada"]),
    EvaluationCase(format: "name ==[c] 'ADA'", expected: ["Ada"]),
    EvaluationCase(format: "name == 'ada'", expected: []),
    EvaluationCase(format: "name BEGINSWITH 'A'", expected: ["Ada"]),
    EvaluationCase(format: "name BEGINSWITH[d] 'A'", expected: ["Ada", "Ådne"]),
    EvaluationCase(format: "name BEGINSWITH[cd] 'a'", expected: ["Ada", "Ådne"]),
    EvaluationCase(format: "name ENDSWITH 'e'", expected: ["Ådne"]),
    EvaluationCase(format: "name ENDSWITH[d] 'e'", expected: ["Zoë", "José", "Ådne"]),
    EvaluationCase(format: "name CONTAINS 'o'", expected: ["Bob", "Zoë", "José"]),
    EvaluationCase(format: "name CONTAINS[c] 'O'", expected: ["Bob", "Zoë", "José"]),
    EvaluationCase(format: "name CONTAINS[cd] 'E'", expected: ["Zoë", "José", "Ådne"]),
    EvaluationCase(format: "name LIKE 'A*'", expected: ["Ada"]),  // Apple: * matches zero or more characters
    EvaluationCase(format: "name LIKE '?o?'", expected: ["Bob", "Zoë"]),  // Apple: ? matches exactly one
    EvaluationCase(format: "name LIKE[c] 'a?a'", expected: ["Ada"]),
    EvaluationCase(format: "name LIKE '*s*'", expected: ["José"]),
    EvaluationCase(format: "name LIKE[d] 'Jose'", expected: ["José"]),
    EvaluationCase(format: "name LIKE[cd] 'zoe'", expected: ["Zoë"]),
    EvaluationCase(format: "name LIKE '*'", expected: everyone),
    EvaluationCase(format: "name MATCHES 'A.*'", expected: ["Ada"]),  // Apple: MATCHES takes an ICU regular expression
    EvaluationCase(format: "name MATCHES '[A-Z][a-z]+'", expected: ["Ada", "Bob"]),
    EvaluationCase(format: "name MATCHES[c] 'b.B'", expected: ["Bob"]),
    EvaluationCase(format: "name MATCHES 'da'", expected: []),  // the whole string must match
    EvaluationCase(format: "name MATCHES[d] 'Jose|Zoe'", expected: ["José", "Zoë"]),
    EvaluationCase(format: "name ==[c] 'σωκράτης'", expected: ["Σωκράτης"]),
    EvaluationCase(format: "name ==[cd] 'ΣΩΚΡΑΤΗΣ'", expected: ["Σωκράτης"]),
    EvaluationCase(format: "name ==[c] 'ÅDNE'", expected: ["Ådne"]),
    EvaluationCase(format: "name ==[d] 'Adne'", expected: ["Ådne"]),
    EvaluationCase(format: "name == %@", arguments: [.value(.attribute(.string("A\u{030A}dne")))], expected: ["Ådne"]),  // canonical equivalence
    EvaluationCase(format: "name IN {'Ada', 'Bob'}", expected: ["Ada", "Bob"]),
    EvaluationCase(format: "name IN[c] {'ada', 'BOB'}", expected: ["Ada", "Bob"]),
    EvaluationCase(format: "'ob' IN name", expected: ["Bob"]),
    EvaluationCase(format: "name IN 'Adam and Bob'", expected: ["Ada", "Bob"]),
    EvaluationCase(format: "email ENDSWITH '.com'", expected: ["Ada", "Zoë"]),
    EvaluationCase(format: "email == nil", expected: ["Bob", "José"]),
    EvaluationCase(format: "email CONTAINS 'example'", expected: ["Ada", "Zoë", "Ådne", "Σωκράτης"]),
    EvaluationCase(format: "NOT email CONTAINS 'example'", expected: ["Bob", "José"]),  // Strata: null CONTAINS is false
    EvaluationCase(format: "email LIKE '*@example.??'", expected: ["Ådne", "Σωκράτης"]),
    EvaluationCase(format: "name BEGINSWITH ''", expected: everyone),
    EvaluationCase(format: "name CONTAINS ''", expected: everyone),
    EvaluationCase(format: "name < 'B'", expected: ["Ada"]),
    EvaluationCase(format: "name > 'Y'", expected: ["Zoë", "Ådne", "Σωκράτης"]),
    EvaluationCase(format: "name BETWEEN {'B', 'K'}", expected: ["Bob", "José"]),
    EvaluationCase(format: "name <[cd] 'b'", expected: ["Ada", "Ådne"]),
    // A string against a number never compares: a fetch refuses it (HostilePredicateTests).
    EvaluationCase(format: "name >= 'Zoë'", expected: ["Zoë", "Ådne", "Σωκράτης"]),
    // Dates, UUIDs, data.
    EvaluationCase(format: "born > %@", arguments: [date(150)], expected: ["Bob", "José", "Ådne"]),
    EvaluationCase(format: "born < %@", arguments: [date(150)], expected: ["Ada", "Σωκράτης"]),
    EvaluationCase(format: "born == nil", expected: ["Zoë"]),
    EvaluationCase(format: "born BETWEEN {%@, %@}", arguments: [date(100), date(300)], expected: ["Ada", "Bob", "José"]),
    EvaluationCase(format: "born >= CAST(300, 'NSDate')", expected: ["José", "Ådne"]),
    EvaluationCase(format: "id == %@", arguments: [.value(.attribute(.uuid(FetchGraph.adaID)))], expected: ["Ada"]),
    EvaluationCase(format: "id != %@", arguments: [.value(.attribute(.uuid(FetchGraph.adaID)))], expected: ["Bob", "Zoë", "José", "Ådne", "Σωκράτης"]),
    EvaluationCase(format: "id == CAST('00000000-0000-0000-0000-00000000000A', 'NSUUID')", expected: ["Ada"]),
    EvaluationCase(format: "photo == %@", arguments: [.value(.attribute(.data(Data([1, 2, 3]))))], expected: ["Ada"]),
    EvaluationCase(format: "photo != nil", expected: ["Ada", "Bob"]),
    EvaluationCase(format: "photo > %@", arguments: [.value(.attribute(.data(Data([5]))))], expected: ["Bob"]),
    // To-one relationships, objects and IDs.
    EvaluationCase(format: "department.name == 'Engineering'", expected: ["Ada", "Zoë"]),
    EvaluationCase(format: "department.name == nil", expected: ["José", "Σωκράτης"]),
    EvaluationCase(format: "department == nil", expected: ["José", "Σωκράτης"]),
    EvaluationCase(format: "department != nil", expected: ["Ada", "Bob", "Zoë", "Ådne"]),
    EvaluationCase(format: "department == %@", arguments: [.object("Engineering")], expected: ["Ada", "Zoë"]),
    EvaluationCase(format: "department != %@", arguments: [.object("Engineering")], expected: ["Bob", "José", "Ådne", "Σωκράτης"]),
    EvaluationCase(format: "department IN %@", arguments: [.objects(["Engineering", "Sales"])], expected: ["Ada", "Bob", "Zoë", "Ådne"]),
    EvaluationCase(format: "department.budget > 500", expected: ["Ada", "Zoë"]),  // decimal against integer
    EvaluationCase(format: "department.budget == 250", expected: ["Bob", "Ådne"]),
    EvaluationCase(format: "department.budget < 1000.6", expected: ["Ada", "Bob", "Zoë", "Ådne"]),  // decimal against double
    EvaluationCase(format: "department.budget == %@", arguments: [.value(.attribute(.decimal(Decimal(string: "1000.5") ?? 0)))], expected: ["Ada", "Zoë"]),
    EvaluationCase(format: "manager.name == 'Ada'", expected: ["Bob", "Zoë"]),
    EvaluationCase(format: "manager.manager.name == 'Ada'", expected: ["José", "Ådne"]),
    EvaluationCase(format: "manager == nil", expected: ["Ada", "Σωκράτης"]),
    EvaluationCase(format: "manager.department.name == 'Engineering'", expected: ["Bob", "Zoë", "José"]),
    EvaluationCase(format: "manager == %@", arguments: [.object("Ada")], expected: ["Bob", "Zoë"]),
    EvaluationCase(format: "SELF == %@", arguments: [.object("Ada")], expected: ["Ada"]),
    EvaluationCase(format: "SELF != %@", arguments: [.object("Ada")], expected: ["Bob", "Zoë", "José", "Ådne", "Σωκράτης"]),
    EvaluationCase(format: "SELF IN %@", arguments: [.objects(["Ada", "Bob"])], expected: ["Ada", "Bob"]),
    EvaluationCase(format: "manager == SELF", expected: []),
    EvaluationCase(format: "%K == %@", arguments: [.value(.attribute(.string("manager.name"))), .value(.attribute(.string("Zoë")))], expected: ["José"]),
    // To-many and many-to-many relationships.
    EvaluationCase(format: "projects.@count == 0", expected: ["Zoë"]),  // Apple: @count is the collection's size
    EvaluationCase(format: "projects.@count >= 2", expected: ["Ada", "Ådne"]),
    EvaluationCase(format: "projects[SIZE] == 1", expected: ["Bob", "José", "Σωκράτης"]),  // Apple: [SIZE] is the size
    EvaluationCase(format: "ANY projects.title == 'Atlas'", expected: ["Ada", "Bob", "Ådne"]),
    EvaluationCase(format: "projects.title == 'Atlas'", expected: ["Ada", "Bob", "Ådne"]),  // Strata: implicit ANY
    EvaluationCase(format: "SOME projects.title == 'Engine'", expected: ["Ada", "José"]),  // Apple: SOME is ANY
    EvaluationCase(format: "ALL projects.title == 'Atlas'", expected: ["Bob", "Zoë"]),  // Strata: ALL of nothing is true
    EvaluationCase(format: "NONE projects.title == 'Atlas'", expected: ["Zoë", "José", "Σωκράτης"]),  // Apple: NONE is NOT ANY
    EvaluationCase(format: "projects.title != 'Atlas'", expected: ["Zoë", "José", "Σωκράτης"]),  // Strata: no element equals
    EvaluationCase(format: "ANY projects.title != 'Atlas'", expected: ["Ada", "José", "Ådne", "Σωκράτης"]),
    EvaluationCase(format: "projects.title CONTAINS 'Cargo'", expected: ["Ådne", "Σωκράτης"]),  // Apple: CONTAINS on a collection tests membership
    EvaluationCase(format: "ANY projects.title CONTAINS 'a'", expected: ["Ada", "Bob", "Ådne", "Σωκράτης"]),
    EvaluationCase(format: "ANY projects.title IN {'Cargo', 'Zeta'}", expected: ["Ådne", "Σωκράτης"]),
    EvaluationCase(format: "ANY projects.budget > 300", expected: ["Ada", "José"]),
    EvaluationCase(format: "ALL projects.budget > 100", expected: ["Ada", "Bob", "Zoë", "José"]),
    EvaluationCase(format: "projects.@sum.budget > 600", expected: ["Ada"]),
    EvaluationCase(format: "projects.@sum.budget == 0", expected: ["Zoë", "Σωκράτης"]),  // Strata: sum of nothing is 0
    EvaluationCase(format: "projects.@avg.budget == 350", expected: ["Ada"]),
    EvaluationCase(format: "projects.@avg.budget == nil", expected: ["Zoë", "Σωκράτης"]),  // Strata: mean of nothing is null
    EvaluationCase(format: "projects.@max.budget == 500", expected: ["Ada", "José"]),
    EvaluationCase(format: "projects.@min.budget == 200", expected: ["Ada", "Bob", "Ådne"]),
    EvaluationCase(format: "projects.@min.title == 'Atlas'", expected: ["Ada", "Bob", "Ådne"]),
    EvaluationCase(format: "projects.@distinctUnionOfObjects.department.@count == 2", expected: ["Ada"]),
    EvaluationCase(format: "%@ IN projects", arguments: [.object("Atlas")], expected: ["Ada", "Bob", "Ådne"]),
    EvaluationCase(format: "projects CONTAINS %@", arguments: [.object("Engine")], expected: ["Ada", "José"]),
    EvaluationCase(format: "ANY projects == %@", arguments: [.object("Cargo")], expected: ["Ådne", "Σωκράτης"]),
    EvaluationCase(format: "ANY projects.tags.name == 'core'", expected: ["Ada", "Bob", "José", "Ådne"]),
    EvaluationCase(format: "ANY projects.tags.name == 'maps'", expected: ["Ada", "Bob", "Ådne"]),
    EvaluationCase(format: "projects.tags.@count >= 3", expected: ["Ada"]),
    EvaluationCase(format: "projects.department.name CONTAINS 'Sales'", expected: ["Ada", "Bob", "Ådne"]),
    EvaluationCase(format: "ANY projects.department == nil", expected: ["Ådne", "Σωκράτης"]),
    EvaluationCase(format: "reports.@count == 2", expected: ["Ada"]),
    EvaluationCase(format: "ANY reports.reports.name == 'José'", expected: ["Ada"]),
    EvaluationCase(format: "ANY reports.age > 40", expected: ["Ada"]),
    // Subqueries and functions.
    EvaluationCase(format: "SUBQUERY(projects, $p, $p.budget > 300).@count > 0", expected: ["Ada", "José"]),
    EvaluationCase(format: "SUBQUERY(projects, $p, $p.budget > 100 AND $p.department.name == 'Sales').@count == 1", expected: ["Ada", "Bob", "Ådne"]),
    EvaluationCase(format: "SUBQUERY(projects, $p, title BEGINSWITH 'C')[SIZE] > 0", expected: ["Ådne", "Σωκράτης"]),
    EvaluationCase(format: "SUBQUERY(projects, $p, ANY $p.tags.name == 'fast').@count == 0", expected: ["Bob", "Zoë", "Ådne", "Σωκράτης"]),
    EvaluationCase(format: "SUBQUERY(projects, $p, SUBQUERY($p.members, $m, $m.age > 60).@count > 0).@count > 0", expected: ["Ådne", "Σωκράτης"]),
    EvaluationCase(format: "SUBQUERY(projects, $p, $p.budget > $MIN).@count == 1", variables: ["MIN": .attribute(.int64(400))], expected: ["Ada", "José"]),
    EvaluationCase(format: "count:(projects) == 2", expected: ["Ada", "Ådne"]),
    EvaluationCase(format: "sum:(projects.budget) == 700", expected: ["Ada"]),
    EvaluationCase(format: "max:(projects.budget) > 300", expected: ["Ada", "José"]),
    EvaluationCase(format: "average:(projects.budget) < 300", expected: ["Bob", "Ådne"]),
    EvaluationCase(format: "min:(reports.age) == 25", expected: ["Ada"]),
    // Variables.
    EvaluationCase(format: "age > $MIN", variables: ["MIN": .attribute(.int64(40))], expected: ["Zoë", "Σωκράτης"]),
    EvaluationCase(format: "name IN $NAMES", variables: ["NAMES": .collection([.attribute("Ada"), .attribute("José")])], expected: ["Ada", "José"]),
    // Compounds.
    EvaluationCase(format: "age > 30 AND department.name == 'Engineering'", expected: ["Ada", "Zoë"]),
    EvaluationCase(format: "age > 30 AND (department == nil OR salary == nil)", expected: ["Zoë", "Σωκράτης"]),
    EvaluationCase(format: "(active == YES OR age == nil) AND NOT name BEGINSWITH 'Z'", expected: ["Ada", "José", "Ådne"]),
    EvaluationCase(format: "active == YES && salary > 100 || age > 60", expected: ["Ada", "Σωκράτης"]),
    EvaluationCase(format: "NOT (age > 30 OR salary > 90)", expected: ["Bob", "Ådne"]),
    EvaluationCase(format: "!(email == nil)", expected: ["Ada", "Zoë", "Ådne", "Σωκράτης"]),
    EvaluationCase(format: "age > 20 AND age < 40 AND salary > 50", expected: ["Ada", "Bob", "José"]),
    // Other entities.
    EvaluationCase(entity: "Department", format: "employees.@count == 0", expected: ["Ops"]),
    EvaluationCase(entity: "Department", format: "ANY employees.age > 40", expected: ["Engineering"]),
    EvaluationCase(entity: "Department", format: "ALL employees.active == YES", expected: ["Engineering", "Ops"]),
    EvaluationCase(entity: "Department", format: "employees.@avg.salary > 100", expected: ["Engineering"]),
    EvaluationCase(entity: "Department", format: "budget == nil", expected: ["Ops"]),
    EvaluationCase(entity: "Department", format: "budget > 260.5", expected: ["Engineering"]),
    EvaluationCase(entity: "Department", format: "SUBQUERY(employees, $e, $e.projects.@count > 1).@count > 0", expected: ["Engineering", "Sales"]),
    EvaluationCase(entity: "Department", format: "projects.@count == 1", expected: ["Engineering", "Sales"]),
    EvaluationCase(entity: "Project", format: "ANY members.name == 'Σωκράτης'", expected: ["Cargo"]),
    EvaluationCase(entity: "Project", format: "members.@count == 3", expected: ["Atlas"]),
    EvaluationCase(entity: "Project", format: "ANY tags.name IN {'fast', 'maps'}", expected: ["Engine", "Atlas"]),
    EvaluationCase(entity: "Project", format: "tags.@count == 0", expected: ["Cargo"]),
    EvaluationCase(entity: "Project", format: "department.employees.@count == 2", expected: ["Engine", "Atlas"]),
    EvaluationCase(entity: "Project", format: "budget == nil", expected: ["Cargo"]),
    EvaluationCase(entity: "Project", format: "ALL members.age > 20", expected: ["Engine"]),
    EvaluationCase(entity: "Tag", format: "projects.@count == 0", expected: ["legacy"]),
    EvaluationCase(entity: "Tag", format: "ANY projects.members.name == 'José'", expected: ["core", "fast"]),
    EvaluationCase(entity: "Tag", format: "name MATCHES '[a-z]{4}'", expected: ["core", "fast", "maps"]),
]

@Suite("Evaluation table")
struct EvaluationTableTests {
    @Test func tableHasAtLeast150Cases() {
        #expect(evaluationTable.count >= 150)
    }

    /// Each case is evaluated by each store on its rows (no objects are made) and on
    /// managed objects (firing faults); both must match the expected names.
    @Test(arguments: allStoreFixtures, evaluationTable)
    func predicateMatchesExpectedObjects(fixture: any StoreFixture, _ row: EvaluationCase) throws {
        let (stack, ids) = try FetchGraph.make(in: fixture)
        let arguments: [any FetchArgument] = try row.arguments.map { argument in
            switch argument {
            case .value(let value): return value
            case .object(let name): return try #require(ids[name])
            case .objects(let names): return try names.map { try #require(ids[$0]) }
            }
        }
        let predicate = try FetchPredicate(format: row.format, argumentArray: arguments, substitutionVariables: row.variables)
        let key = FetchGraph.nameKey(row.entity)

        let store = stack.context()
        let fromRows = Set(try store.fetch(FetchRequest.make(row.entity, predicate)).map { try $0.value(forKey: key).stringValue ?? "" })
        #expect(fromRows == row.expected, "evaluated on store rows")

        let objects = stack.context()
        let all = try objects.fetch(FetchRequest(entityName: row.entity))
        let fromObjects = Set(try all.filter { try predicate.evaluate(with: $0) }.map { try $0.value(forKey: key).stringValue ?? "" })
        #expect(fromObjects == row.expected, "evaluated on managed objects")
        withExtendedLifetime((store, objects)) {}
    }
}

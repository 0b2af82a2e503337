import Foundation
import ObjectGraph

// Measurements of the fetch language (not a test; run in release):
//
//     swift build -c release --product fetch-bench && .build/release/fetch-bench
//
// 1. parse 10k predicate format strings;
// 2. evaluate a three-clause predicate over 1M rows, as a store would on its decoded
//    rows (a struct row type), and on 1M dictionary rows;
// 3. an end-to-end count fetch through InMemoryStore (rows, no objects); skipped with
//    `--no-store` (`--parse-only` stops after 1).

/// A decoded store row: what a store's candidate looks like.
struct Row: FetchEvaluable {
    let name: String
    let age: Int16
    let salary: Double
    let department: String?

    func fetchValue(forKeyPath keyPath: String) throws -> FetchValue {
        switch keyPath {
        case "name": return .attribute(.string(name))
        case "age": return .attribute(.int16(age))
        case "salary": return .attribute(.double(salary))
        case "department": return .attribute(department.map(AttributeValue.string) ?? .null)
        default: throw ObjectGraphError(.unknownKey, "No key \(keyPath).", key: keyPath)
        }
    }
}

func seconds(_ body: () throws -> Void) rethrows -> Double {
    let start = DispatchTime.now().uptimeNanoseconds
    try body()
    return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
}

func report(_ label: String, count: Int, unit: String, _ time: Double) {
    let rate = Double(count) / time
    print(String(format: "%-58@ %10.0f %@/s  (%.3f s, %.2f µs each)", label as NSString, rate, unit as NSString, time, time * 1e6 / Double(count)))
}

let formats = [
    "age > 30 AND department == 'Sales' AND name BEGINSWITH[c] 'a'",
    "name ==[cd] 'José' OR salary BETWEEN {1000, 2000}",
    "ANY employees.projects.title LIKE[c] '*atlas*' AND NOT (budget == nil)",
    "SUBQUERY(projects, $p, $p.budget > 300 AND $p.tags.@count > 1).@count > 0",
    "name IN {'Ada', 'Bob', 'Cy', 'Dee'} AND active == YES && age <= 65",
    "manager.department.name MATCHES '[A-Z][a-z]+' OR email ENDSWITH '.org'",
    "projects.@avg.budget >= 250.5 AND reports[SIZE] > 2",
    "(a == 1 OR b == 2) AND (c != 3 OR d < 4) AND NOT e > 5",
]

// 1. Parsing (after a warm-up of 1k parses, so start-up costs are not counted).
for index in 0..<1_000 { _ = try FetchPredicate(format: formats[index % formats.count]) }
var parsed = 0
let parseTime = try seconds {
    for index in 0..<10_000 {
        _ = try FetchPredicate(format: formats[index % formats.count])
        parsed += 1
    }
}
report("parse 10k predicates (8 shapes, 50-80 characters)", count: parsed, unit: "predicates", parseTime)
let withArguments = try seconds {
    for index in 0..<10_000 {
        _ = try FetchPredicate(format: "%K > %d AND department == %@ AND name BEGINSWITH[c] %@", "age", index, "Sales", "a")
    }
}
report("parse 10k predicates with four typed arguments", count: 10_000, unit: "predicates", withArguments)

if CommandLine.arguments.contains("--parse-only") { exit(0) }

// 2. Evaluation over 1M rows.
let departments = ["Sales", "Engineering", "Ops", "Legal"]
let names = ["Ada", "alan", "Bob", "Ágnes", "Cy", "anna", "Dee", "Zoë"]
var generator = SystemRandomNumberGenerator()
let rows = (0..<1_000_000).map { index in
    Row(name: names[index % names.count] + String(index % 97), age: Int16(index % 80),
        salary: Double(index % 5000), department: index % 11 == 0 ? nil : departments[index % departments.count])
}
let predicate = try FetchPredicate(format: "age > 30 AND department == 'Sales' AND name BEGINSWITH[c] 'a'")
var matches = 0
let evaluateTime = try seconds {
    for row in rows where try predicate.evaluate(with: row) { matches += 1 }
}
report("evaluate 3-clause predicate, 1M struct rows (\(matches) match)", count: rows.count, unit: "rows", evaluateTime)

let plain = try FetchPredicate(format: "age > 30 AND department == 'Sales' AND salary < 2500")
var plainMatches = 0
let plainTime = try seconds {
    for row in rows where try plain.evaluate(with: row) { plainMatches += 1 }
}
report("evaluate 3-clause, no string options, 1M struct rows", count: rows.count, unit: "rows", plainTime)

let dictionaries: [[String: AttributeValue]] = rows.map { row in
    ["name": .string(row.name), "age": .int16(row.age), "salary": .double(row.salary), "department": row.department.map(AttributeValue.string) ?? .null]
}
var dictionaryMatches = 0
let dictionaryTime = try seconds {
    for row in dictionaries where try predicate.evaluate(with: row) { dictionaryMatches += 1 }
}
report("evaluate 3-clause predicate, 1M dictionary rows", count: dictionaries.count, unit: "rows", dictionaryTime)
precondition(matches == dictionaryMatches, "struct and dictionary rows must agree")

// 3. End to end through InMemoryStore: a count fetch evaluates on stored rows.
if CommandLine.arguments.contains("--no-store") { exit(0) }
let model = try ManagedObjectModel(entities: [
    EntityDescription(name: "Person", properties: [
        .attribute("name", .string), .attribute("age", .integer16), .attribute("salary", .double), .attribute("department", .string),
    ])
])
let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
try coordinator.addPersistentStore(type: .inMemory)
let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
let stored = 200_000
let insertTime = try seconds {
    for row in rows.prefix(stored) {
        let person = try context.insertNewObject(forEntityName: "Person")
        try person.setValue(.string(row.name), forKey: "name")
        try person.setValue(.int16(row.age), forKey: "age")
        try person.setValue(.double(row.salary), forKey: "salary")
        try person.setValue(row.department.map(AttributeValue.string) ?? .null, forKey: "department")
    }
    try context.save()
}
report("(setup) insert and save \(stored) objects", count: stored, unit: "objects", insertTime)
context.reset()
var request = FetchRequest(entityName: "Person")
request.predicate = predicate
var counted = 0
let countTime = try seconds { counted = try context.count(for: request) }
report("InMemoryStore count fetch, 3-clause predicate (\(counted) match)", count: stored, unit: "rows", countTime)

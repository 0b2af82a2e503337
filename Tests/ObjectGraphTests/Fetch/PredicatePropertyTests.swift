import Foundation
import ObjectGraph
import Testing

/// Random predicates over random graphs: evaluating on store rows, on managed objects,
/// and through the context's pending-change overlay must agree, and every predicate
/// must survive a round trip through its canonical format string. Seeded.
@Suite("Predicates: rows and objects agree")
struct PredicatePropertyTests {
    typealias Generator = RandomizedConformance.SeededGenerator

    /// Fills a fresh store with a random graph.
    private func randomGraph(_ rng: inout Generator, fixture: any StoreFixture) throws -> TestStack {
        let stack = try fixture.makeStack(model: try FetchGraph.model())
        let context = stack.context()
        let words = ["Ada", "ada", "Ádá", "Bob", "Zoë", "zoe", "José", "Σωκράτης", "", "a*b", "file9", "file10"]
        func maybe<T>(_ value: T, _ rng: inout Generator) -> T? { Int.random(in: 0..<5, using: &rng) == 0 ? nil : value }
        var departments: [ManagedObject] = []
        for index in 0..<4 {
            let department = try context.insertNewObject(forEntityName: "Department")
            try department.setValue(.string("D\(index)"), forKey: "name")
            if let budget = maybe(Int.random(in: 0...1000, using: &rng), &rng) { try department.setValue(.decimal(Decimal(budget) / 4), forKey: "budget") }
            departments.append(department)
        }
        var tags: [ManagedObject] = []
        for name in ["core", "fast", "maps", "old"] {
            let tag = try context.insertNewObject(forEntityName: "Tag")
            try tag.setValue(.string(name), forKey: "name")
            tags.append(tag)
        }
        var projects: [ManagedObject] = []
        for index in 0..<6 {
            let project = try context.insertNewObject(forEntityName: "Project")
            try project.setValue(.string(words[Int.random(in: 0..<words.count, using: &rng)] + "\(index)"), forKey: "title")
            if let budget = maybe(Int64.random(in: 0...600, using: &rng), &rng) { try project.setValue(.int64(budget), forKey: "budget") }
            try project.setValue(maybe(departments.randomElement(using: &rng), &rng) ?? nil, forKey: "department")
            try project.setValue(tags.filter { _ in Bool.random(using: &rng) }, forKey: "tags")
            projects.append(project)
        }
        var people: [ManagedObject] = []
        for _ in 0..<20 {
            let person = try context.insertNewObject(forEntityName: "Person")
            if let name = maybe(words[Int.random(in: 0..<words.count, using: &rng)], &rng) { try person.setValue(.string(name), forKey: "name") }
            if let age = maybe(Int16.random(in: 0...80, using: &rng), &rng) { try person.setValue(.int16(age), forKey: "age") }
            if let salary = maybe(Double(Int.random(in: 0...400, using: &rng)) / 4, &rng) { try person.setValue(.double(salary), forKey: "salary") }
            if let active = maybe(Bool.random(using: &rng), &rng) { try person.setValue(.bool(active), forKey: "active") }
            if let email = maybe(words[Int.random(in: 0..<words.count, using: &rng)] + "@x.io", &rng) { try person.setValue(.string(email), forKey: "email") }
            try person.setValue(maybe(departments.randomElement(using: &rng), &rng) ?? nil, forKey: "department")
            try person.setValue(projects.filter { _ in Int.random(in: 0..<3, using: &rng) == 0 }, forKey: "projects")
            people.append(person)
        }
        for person in people where Bool.random(using: &rng) {
            try person.setValue(people.randomElement(using: &rng), forKey: "manager")
        }
        try context.save()
        return stack
    }

    /// A random comparison over the Person entity, as format text.
    private func randomComparison(_ rng: inout Generator, depth: Int) -> String {
        let scalar: [(String, [String])] = [
            ("name", ["'Ada'", "'zoe'", "'Σωκράτης'", "nil", "'file10'"]),
            ("age", ["30", "0", "80", "40.5", "nil"]),
            ("salary", ["50", "25.25", "nil", "100"]),
            ("active", ["YES", "NO", "nil", "1"]),
            ("email", ["'ada@x.io'", "nil", "''"]),
            ("department.name", ["'D1'", "nil", "'D3'"]),
            ("department.budget", ["100", "50.25", "nil"]),
            ("manager.age", ["30", "nil"]),
            ("manager.department.name", ["'D0'", "nil"]),
            ("projects.@count", ["0", "1", "2"]),
            ("reports.@count", ["0", "1"]),
            ("projects.@sum.budget", ["0", "300", "600"]),
            ("projects.@avg.budget", ["300", "nil"]),
            ("projects.@max.title", ["'Bob1'", "nil"]),
        ]
        let collections: [(String, [String])] = [
            ("projects.title", ["'Ada1'", "'zoe2'", "nil"]),
            ("projects.budget", ["100", "300", "nil"]),
            ("projects.tags.name", ["'core'", "'maps'"]),
            ("reports.name", ["'Ada'", "'Bob'"]),
        ]
        let roll = Int.random(in: 0..<10, using: &rng)
        if roll == 0 {
            let bound = Int.random(in: 0...600, using: &rng)
            return "SUBQUERY(projects, $p, $p.budget > \(bound) OR $p.tags.@count == 0).@count \(["==", ">", "<"].randomElement(using: &rng) ?? "==") \(Int.random(in: 0...2, using: &rng))"
        }
        let stringOps = ["BEGINSWITH", "ENDSWITH", "CONTAINS", "LIKE", "MATCHES"]
        let orderOps = ["==", "!=", "<", "<=", ">", ">="]
        let options = ["", "[c]", "[d]", "[cd]"].randomElement(using: &rng) ?? ""
        if roll <= 3 {
            let (path, constants) = collections.randomElement(using: &rng) ?? collections[0]
            let modifier = ["", "ANY ", "ALL ", "NONE "].randomElement(using: &rng) ?? ""
            let op = (orderOps + ["CONTAINS", "IN"]).randomElement(using: &rng) ?? "=="
            let constant = op == "IN" ? "{\(constants.joined(separator: ", "))}" : (constants.randomElement(using: &rng) ?? "nil")
            return "\(modifier)\(path) \(op)\(options) \(constant)"
        }
        let (path, constants) = scalar.randomElement(using: &rng) ?? scalar[0]
        let constant = constants.randomElement(using: &rng) ?? "nil"
        switch Int.random(in: 0..<6, using: &rng) {
        case 0 where constant.hasPrefix("'"):
            let op = stringOps.randomElement(using: &rng) ?? "LIKE"
            let pattern = op == "LIKE" ? "'*a?*'" : (op == "MATCHES" ? "'[A-Za-z]+'" : constant)
            return "\(path) \(op)\(options) \(pattern)"
        case 1:
            return "\(path) IN\(options) {\(constants.joined(separator: ", "))}"
        case 2:
            let sorted = constants.filter { $0 != "nil" }
            return "\(path) BETWEEN {\(sorted.first ?? "0"), \(sorted.last ?? "1")}"
        default:
            return "\(path) \(orderOps.randomElement(using: &rng) ?? "==")\(options) \(constant)"
        }
    }

    private func randomPredicate(_ rng: inout Generator, depth: Int) -> String {
        guard depth > 0 else { return randomComparison(&rng, depth: 0) }
        switch Int.random(in: 0..<5, using: &rng) {
        case 0: return "(\(randomPredicate(&rng, depth: depth - 1)) AND \(randomPredicate(&rng, depth: depth - 1)))"
        case 1: return "(\(randomPredicate(&rng, depth: depth - 1)) OR \(randomPredicate(&rng, depth: depth - 1)))"
        case 2: return "NOT \(randomPredicate(&rng, depth: depth - 1))"
        default: return randomComparison(&rng, depth: depth)
        }
    }

    // Every store: the rows a store matches (StrataStore through predicates compiled to
    // ordinals over rows read in place) are the objects the predicate matches in memory.
    @Test(arguments: allStoreFixtures.map { $0 as any StoreFixture }, [11, 22, 33, 44, 55] as [UInt64])
    func rowsObjectsAndOverlayAgree(fixture: any StoreFixture, seed: UInt64) throws {
        var rng = Generator(state: seed)
        let stack = try randomGraph(&rng, fixture: fixture)
        let objectsContext = stack.context()
        let people = try objectsContext.fetch(FetchRequest(entityName: "Person"))
        // A context with unsaved changes: its fetches mix store rows and in-memory objects.
        let overlay = stack.context()
        let editable = try overlay.fetch(FetchRequest(entityName: "Person"))
        for person in editable where Bool.random(using: &rng) {
            try person.setValue(.int16(Int16.random(in: 0...80, using: &rng)), forKey: "age")
            try person.setValue(.string(["Ada", "zoe", "Bob1"].randomElement(using: &rng) ?? "Ada"), forKey: "name")
        }
        let inserted = try overlay.insertNewObject(forEntityName: "Person")
        try inserted.setValue(.int16(33), forKey: "age")
        try inserted.setValue(.string("Ada"), forKey: "name")

        for _ in 0..<60 {
            let format = randomPredicate(&rng, depth: 3)
            let predicate = try FetchPredicate(format: format)
            #expect(try FetchPredicate(format: predicate.canonicalFormat) == predicate, "round trip of \(format)")

            let request = FetchRequest.make("Person", predicate)
            let fromRows = Set(try stack.context().fetchObjectIDs(request))
            let fromObjects = Set(try people.filter { try predicate.evaluate(with: $0) }.map(\.objectID))
            #expect(fromRows == fromObjects, "\(format)")

            // Seed 003: unchanged objects are matched by the store on saved values, even
            // when objects they point to have unsaved changes; so the overlay equals
            // in-memory evaluation for predicates that read only the object's own attributes.
            let relationships: Set<String> = ["projects", "reports", "department", "manager"]
            guard predicate.keyPaths.allSatisfy({ !$0.contains(".") && !relationships.contains($0) }) else { continue }
            let overlayResult = Set(try overlay.fetch(request).map(\.objectID))
            let overlayExpected = Set(try (editable + [inserted]).filter { try predicate.evaluate(with: $0) }.map(\.objectID))
            #expect(overlayResult == overlayExpected, "overlay: \(format)")
        }
        withExtendedLifetime((objectsContext, overlay)) {}
    }
}

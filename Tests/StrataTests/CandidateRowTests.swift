import Foundation
import ObjectGraph
import Testing
@testable import Strata

/// [FETCH-S7] Candidate rows (from an index plan, a semi-join, `SELF IN`) are tested where the
/// engine holds them, and only the rows the predicate accepts are copied: the answers are a
/// plain evaluation's, with the rows in the log's image and in compressed segments, with
/// residual conjuncts on attributes and on key paths that read other rows per candidate.
@Suite struct CandidateRowTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Person", properties: [
                .attribute("name", .string, indexed: true),
                .attribute("nick", .string),
                .attribute("age", .integer64),
                .toOne("team", "Team", inverse: "members"),
            ]),
            EntityDescription(name: "Team", properties: [
                .attribute("title", .string),
                .toMany("members", "Person", inverse: "team"),
            ]),
        ])
    }

    /// One person as the oracle knows it.
    struct Person {
        let name: String
        let nick: String
        let age: Int64
        let team: Int
    }

    @Test(arguments: [false, true])
    func candidateRowsTestedInPlaceGiveAPlainEvaluationsAnswers(segments: Bool) throws {
        let directory = TemporaryStore()
        let coordinator = try directory.coordinator(model: try Self.model())
        let writer = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var teams: [ManagedObject] = []
        for index in 0..<40 {
            let team = try writer.insertNewObject(forEntityName: "Team")
            try team.setValue(.string("t\(index)"), forKey: "title")
            teams.append(team)
        }
        var people: [Person] = []
        for index in 0..<1200 {
            // A third of them have their team's title as nick; the rest something else.
            let person = Person(name: "p\(index)", nick: index % 3 == 0 ? "t\(index % 40)" : "x\(index)", age: Int64(index % 90), team: index % 40)
            people.append(person)
            let object = try writer.insertNewObject(forEntityName: "Person")
            try object.setValue(.string(person.name), forKey: "name")
            try object.setValue(.string(person.nick), forKey: "nick")
            try object.setValue(.int64(person.age), forKey: "age")
            try object.setValue(teams[person.team], forKey: "team")
        }
        try writer.save()
        if segments {
            let store = try #require(coordinator.persistentStores.first as? StrataStore)
            try #require(store.storageEngine).flush()
        }
        let reader = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        func fetched(_ format: String, _ arguments: any FetchArgument...) throws -> [String] {
            var request = FetchRequest(entityName: "Person")
            request.predicate = try FetchPredicate(format: format, argumentArray: arguments)
            return try reader.fetch(request).map { try $0.value(forKey: "name").stringValue ?? "?" }.sorted()
        }
        func counted(_ format: String, _ arguments: any FetchArgument...) throws -> Int {
            var request = FetchRequest(entityName: "Person")
            request.predicate = try FetchPredicate(format: format, argumentArray: arguments)
            return try reader.count(for: request)
        }
        func expected(_ test: (Person) -> Bool) -> [String] { people.filter(test).map(\.name).sorted() }

        // Index candidates (a prefix of the indexed name) with residuals.
        #expect(try fetched("name BEGINSWITH %@ AND age > %@", "p1", 40) == expected { $0.name.hasPrefix("p1") && $0.age > 40 })
        #expect(try fetched("name BEGINSWITH %@ AND team.title == nick", "p2") == expected { $0.name.hasPrefix("p2") && $0.nick == "t\($0.team)" })
        #expect(try fetched("name BEGINSWITH %@ AND NOT (team.title == nick)", "p3") == expected { $0.name.hasPrefix("p3") && $0.nick != "t\($0.team)" })
        #expect(try counted("name BEGINSWITH %@ AND team.title == nick", "p1") == expected { $0.name.hasPrefix("p1") && $0.nick == "t\($0.team)" }.count)
        // Semi-join candidates (the members of a team found by title) with a residual.
        #expect(try fetched("team.title == %@ AND age < %@", "t7", 30) == expected { $0.team == 7 && $0.age < 30 })
        // No candidate passes; every candidate passes.
        #expect(try fetched("name BEGINSWITH %@ AND age > %@", "p1", 1000).isEmpty)
        #expect(try fetched("name BEGINSWITH %@ AND age >= %@", "p11", 0) == expected { $0.name.hasPrefix("p11") })
    }
}

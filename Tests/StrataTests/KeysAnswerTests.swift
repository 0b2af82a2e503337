import Foundation
import ObjectGraph
import Strata
import Testing

/// [FETCH-S3] A count or an ID fetch whose whole predicate goes through a keyed relationship
/// (`ANY tags.name == "x"`, `owner.name == "x"`) is answered from the relationship's keys. It
/// looks the members' rows up only where a key may outlive its member: a many-to-many whose
/// delete rule on the fetched side is no action. Members are deleted (their owners faults in
/// the deleting context, or loaded) under every delete rule, and the answers are checked
/// against an InMemoryStore holding the same objects.
@Suite struct KeysAnswerTests {
    static func model(_ rule: DeleteRule) throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Tag", properties: [
                .attribute("name", .string, indexed: true),
                .toMany("items", "Item", inverse: "tags", deleteRule: .nullify),
            ]),
            EntityDescription(name: "Owner", properties: [
                .attribute("name", .string, indexed: true),
                .toMany("items", "Item", inverse: "owner", deleteRule: .nullify),
            ]),
            EntityDescription(name: "Item", properties: [
                .attribute("n", .integer64),
                .toMany("tags", "Tag", inverse: "items", deleteRule: rule),
                .toOne("owner", "Owner", inverse: "items", deleteRule: rule == .deny ? .nullify : rule),
            ]),
        ])
    }

    @Test(arguments: [DeleteRule.nullify, .noAction, .cascade])
    func membersDeletedUnderEveryRuleAreNotCounted(rule: DeleteRule) throws {
        let store = TemporaryStore()
        let tagNames = ["a", "b", "c"], ownerNames = ["p", "q"]
        let (reference, strata) = try store.referenceAndStrata(model: try Self.model(rule)) { coordinator in
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            let tags = try tagNames.map { name in
                let tag = try context.insertNewObject(forEntityName: "Tag")
                try tag.setValue(.string(name), forKey: "name")
                return tag
            }
            let owners = try ownerNames.map { name in
                let owner = try context.insertNewObject(forEntityName: "Owner")
                try owner.setValue(.string(name), forKey: "name")
                return owner
            }
            for n in 0..<30 {
                let item = try context.insertNewObject(forEntityName: "Item")
                try item.setValue(.int64(Int64(n)), forKey: "n")
                for (index, tag) in tags.enumerated() where (n >> index) & 1 == 1 { try item.addObject(tag, toRelationship: "tags") }
                if n % 3 != 0 { try item.setValue(owners[n % 2], forKey: "owner") }
            }
            try context.save()
        }
        func answers(_ coordinator: PersistentStoreCoordinator) throws -> [String] {
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            var lines: [String] = []
            for format in ["ANY tags.name == 'a'", "ANY tags.name == 'b'", "owner.name == 'p'", "ANY tags.name IN {'b', 'c'}"] {
                var request = FetchRequest(entityName: "Item")
                request.predicate = try FetchPredicate(format: format)
                lines.append("\(format): \(try context.count(for: request))")
                request.resultType = .managedObjectID
                let ids = try context.fetchObjectIDs(request)
                let numbers = try ids.map { try context.existingObject(with: $0).value(forKey: "n").integerValue ?? -1 }.sorted()
                lines.append("\(format): \(numbers)")
            }
            return lines
        }
        #expect(try answers(reference) == answers(strata))
        // Deleted in two saves: once from a fresh context (every owner a fault), once with the
        // tags and owners loaded first.
        for (round, loadsOwners) in [(0, false), (1, true)] {
            for coordinator in [reference, strata] {
                let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
                if loadsOwners {
                    for entity in ["Tag", "Owner"] {
                        for object in try context.fetch(FetchRequest(entityName: entity)) {
                            _ = try object.objects(forKey: "items")
                        }
                    }
                }
                var request = FetchRequest(entityName: "Item")
                let doomed = Array(stride(from: round, to: 30, by: 4))
                request.predicate = try FetchPredicate(format: "n IN %@", argumentArray: [doomed])
                for item in try context.fetch(request) { context.delete(item) }
                try context.save()
            }
            #expect(try answers(reference) == answers(strata), "after round \(round) of deletes under \(rule)")
        }
    }
}

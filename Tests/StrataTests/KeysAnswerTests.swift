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

/// [FETCH-S12] and [FETCH-S17]: a comparison with an object whose row is gone while rows still
/// name it (the inverse's delete rule is no action, so its keys went with it but its members'
/// to-ones did not) is evaluated on the rows, as the InMemoryStore answers it; an object that
/// is still there is answered from the keys. The owners are alone in their hierarchy, so the
/// index alone says whether an owner's row is there.
@Suite struct DanglingObjectComparisonTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Owner", properties: [
                .attribute("name", .string),
                .toMany("items", "Item", inverse: "owner", deleteRule: .noAction),
            ]),
            EntityDescription(name: "Item", properties: [
                .attribute("n", .integer64),
                .toOne("owner", "Owner", inverse: "items"),
                .toMany("notes", "Note", inverse: "item"),
            ]),
            EntityDescription(name: "Note", properties: [
                .attribute("n", .integer64),
                .toOne("item", "Item", inverse: "notes"),
            ]),
        ])
    }

    @Test func objectsDeletedUnderNoActionStillMatchTheRowsNamingThem() throws {
        let store = TemporaryStore()
        let (reference, strata) = try store.referenceAndStrata(model: try Self.model()) { coordinator in
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            let owners = try ["p", "q", "r"].map { name in
                let owner = try context.insertNewObject(forEntityName: "Owner")
                try owner.setValue(.string(name), forKey: "name")
                return owner
            }
            var items: [ManagedObject] = []
            for n in 0..<60 {
                let item = try context.insertNewObject(forEntityName: "Item")
                try item.setValue(.int64(Int64(n)), forKey: "n")
                if n % 5 != 0 { try item.setValue(owners[n % 3], forKey: "owner") }
                items.append(item)
            }
            for n in 0..<90 {
                let note = try context.insertNewObject(forEntityName: "Note")
                try note.setValue(.int64(Int64(n)), forKey: "n")
                if n % 7 != 0 { try note.setValue(items[(n * 11) % items.count], forKey: "item") }
            }
            try context.save()
        }
        /// The owners' IDs by name, taken before the delete.
        func owners(_ coordinator: PersistentStoreCoordinator) throws -> [String: ManagedObjectID] {
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            var ids: [String: ManagedObjectID] = [:]
            for owner in try context.fetch(FetchRequest(entityName: "Owner")) {
                if case .string(let name) = try owner.value(forKey: "name") { ids[name] = owner.objectID }
            }
            return ids
        }
        let ids = [ObjectIdentifier(reference): try owners(reference), ObjectIdentifier(strata): try owners(strata)]
        for coordinator in [reference, strata] {
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            guard let q = ids[ObjectIdentifier(coordinator)]?["q"] else { throw ObjectGraphError(.objectNotFound, "no owner q") }
            context.delete(try context.existingObject(with: q))
            try context.save()
        }
        func answers(_ coordinator: PersistentStoreCoordinator) throws -> [String] {
            guard let owners = ids[ObjectIdentifier(coordinator)], let p = owners["p"], let q = owners["q"], let r = owners["r"] else {
                throw ObjectGraphError(.objectNotFound, "no owners")
            }
            let cases: [(String, String, any FetchArgument)] = [
                ("Item", "owner == %@", q), ("Item", "owner == %@", p), ("Item", "owner IN %@", [q, r]),
                ("Note", "item.owner == %@", q), ("Note", "item.owner == %@", r), ("Note", "item.owner IN %@", [p, q]),
            ]
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            return try cases.map { entity, format, argument in
                var request = FetchRequest(entityName: entity)
                request.predicate = try FetchPredicate(format: format, argument)
                let numbers = try context.fetch(request).map { try $0.value(forKey: "n").integerValue ?? -1 }.sorted()
                return "\(entity) \(format): \(numbers) (count \(try context.count(for: request)))"
            }
        }
        let expected = try answers(reference)
        #expect(expected[0] != "Item owner == %@: [] (count 0)", "the deleted owner is still named")
        #expect(try answers(strata) == expected)
    }
}

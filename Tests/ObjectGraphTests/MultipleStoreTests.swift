import Foundation
import ObjectGraph
import Testing

@Suite("Multiple stores")
struct MultipleStoreTests {
    private func makeCoordinator() throws -> (PersistentStoreCoordinator, PersistentStore, PersistentStore) {
        let model = try ManagedObjectModel(
            entities: [
                EntityDescription(name: "Log", properties: [.attribute("text", .string), .attribute("n", .integer64)]),
                EntityDescription(name: "Setting", properties: [.attribute("key", .string)]),
            ],
            configurations: ["Logs": ["Log"], "Both": ["Log", "Setting"]])
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let logs = try coordinator.addPersistentStore(type: .inMemory, configuration: "Logs")
        let both = try coordinator.addPersistentStore(type: .inMemory, configuration: "Both")
        return (coordinator, logs, both)
    }

    @Test func insertsGoToTheFirstStoreOrTheAssignedOne() throws {
        let (coordinator, logs, both) = try makeCoordinator()
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let first = try context.insertNewObject(forEntityName: "Log")
        try first.setValue(1, forKey: "n")
        let second = try context.insertNewObject(forEntityName: "Log")
        try second.setValue(2, forKey: "n")
        try context.assign(second, to: both)
        let setting = try context.insertNewObject(forEntityName: "Setting")
        #expect(throws: ObjectGraphError.self) { try context.assign(setting, to: logs) }
        try context.save()
        #expect(first.objectID.storeIdentifier == logs.identifier)
        #expect(second.objectID.storeIdentifier == both.identifier)
        #expect(setting.objectID.storeIdentifier == both.identifier)
    }

    @Test func insertsOfEntitiesInDifferentStoresInterleavedGoToTheirStores() throws {
        let (coordinator, logs, both) = try makeCoordinator()
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var expected: [(ManagedObject, String)] = []
        for n in 0..<12 {
            // Runs of one entity and alternations, so that no object's store is its neighbour's.
            let entity = [0, 1, 4, 5, 6, 9].contains(n) ? "Log" : "Setting"
            let object = try context.insertNewObject(forEntityName: entity)
            expected.append((object, entity == "Log" ? logs.identifier : both.identifier))
        }
        try context.save()
        for (object, identifier) in expected {
            #expect(object.objectID.storeIdentifier == identifier, "\(object.entity.name)")
        }
    }

    @Test func fetchesMergeStoresThenSortAndPage() throws {
        let (coordinator, _, both) = try makeCoordinator()
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for n in [5, 1, 4, 2, 3] {
            let log = try context.insertNewObject(forEntityName: "Log")
            try log.setValue(.int64(Int64(n)), forKey: "n")
            if n.isMultiple(of: 2) { try context.assign(log, to: both) }
        }
        try context.save()
        let reader = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var request = FetchRequest.make("Log", .greaterThan("n", 1), sortedBy: ["n"])
        request.fetchLimit = 3
        #expect(try reader.fetch(request).map { try $0.value(forKey: "n") } == [2, 3, 4])
        #expect(try reader.count(for: FetchRequest(entityName: "Log")) == 5)
        #expect(try reader.fetchObjectIDs(request).count == 3)
    }

    @Test func dictionaryGroupsAndAggregatesSpanStores() throws {
        let (coordinator, _, both) = try makeCoordinator()
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for (text, n) in [("a", 1), ("b", 2), ("a", 3), ("b", 4), ("a", 5)] {
            let log = try context.insertNewObject(forEntityName: "Log")
            try log.setValue(.string(text), forKey: "text")
            try log.setValue(.int64(Int64(n)), forKey: "n")
            if n > 2 { try context.assign(log, to: both) }
        }
        try context.save()
        var request = FetchRequest(entityName: "Log")
        request.propertiesToFetch = ["text", .aggregate(.sum, of: "n", as: "total"), .aggregate(.count, of: "n", as: "logs")]
        request.propertiesToGroupBy = ["text"]
        request.sortDescriptors = [FetchSortDescriptor(keyPath: "text")]
        let rows = try ManagedObjectContext(persistentStoreCoordinator: coordinator).fetchDictionaries(request)
        #expect(rows == [
            ["text": .attribute("a"), "total": .attribute(.int64(9)), "logs": .attribute(.int64(3))],
            ["text": .attribute("b"), "total": .attribute(.int64(6)), "logs": .attribute(.int64(2))],
        ])
        var paged = FetchRequest.make("Log", .greaterThan("n", 1), sortedBy: ["n"])
        paged.propertiesToFetch = ["n"]
        paged.fetchLimit = 2
        paged.fetchOffset = 1
        #expect(try ManagedObjectContext(persistentStoreCoordinator: coordinator).fetchDictionaries(paged).map { $0["n"] }
            == [.attribute(.int64(3)), .attribute(.int64(4))])
    }

    @Test func removedStoreNoLongerServesFetches() throws {
        let (coordinator, logs, both) = try makeCoordinator()
        try coordinator.remove(logs)
        #expect(coordinator.persistentStores.map(\.identifier) == [both.identifier])
        #expect(throws: ObjectGraphError.self) { try coordinator.remove(logs) }
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try context.fetch(FetchRequest(entityName: "Log")).isEmpty)
    }
}

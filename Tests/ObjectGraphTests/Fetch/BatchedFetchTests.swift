import Foundation
import Testing

@testable import ObjectGraph

/// `fetchBatchSize`: every result is returned, but only the first batch arrives with its
/// rows; a later batch is read when the first of its objects fires, all of its rows
/// together, and nothing else is read. Checked on every store, and with a recording store
/// for the exact store calls.
@Suite struct BatchedFetchTests {
    /// Twelve people aged 0…11, saved.
    static func populate(_ context: ManagedObjectContext) throws {
        for age in 0..<12 {
            let person = try context.insertNewObject(forEntityName: "Person")
            try person.setValue(.string("p\(age)"), forKey: "name")
            try person.setValue(.int16(Int16(age)), forKey: "age")
        }
        try context.save()
    }

    static func request(batch: Int) -> FetchRequest {
        var request = FetchRequest(entityName: "Person")
        request.sortDescriptors = [FetchSortDescriptor(keyPath: "age")]
        request.fetchBatchSize = batch
        return request
    }

    @Test(arguments: allStoreFixtures)
    func batchedResultsAreEveryResultWithRowsForTheFirstBatchOnly(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        try stack.read { try Self.populate($0) }
        try stack.read { context in
            let people = try context.fetch(Self.request(batch: 5))
            #expect(people.count == 12)
            #expect(people.allSatisfy { $0.isFault })
            #expect(people.prefix(5).allSatisfy { $0.faultBatch == nil })
            #expect(people.dropFirst(5).allSatisfy { $0.faultRow == nil && $0.faultBatch != nil })
            // Firing the seventh loads its batch (positions 5..<10), and only that.
            #expect(try people[6].value(forKey: "age") == .int16(6))
            #expect(people[5...9].allSatisfy { $0.faultBatch == nil && ($0.faultRow != nil || !$0.isFault) })
            #expect(people[5...9].filter { $0.faultRow != nil }.count == 4, "its batch-mates got their rows")
            #expect(people[10...].allSatisfy { $0.faultRow == nil && $0.faultBatch != nil })
            // Every value is right, batch by batch.
            #expect(try people.map { try $0.value(forKey: "name") } == (0..<12).map { .string("p\($0)") })
        }
        // Without a batch size, and with one larger than the results, every row comes along.
        for batch in [0, 12, 40] {
            try stack.read { context in
                let people = try context.fetch(Self.request(batch: batch))
                #expect(people.count == 12 && people.allSatisfy { $0.faultBatch == nil })
            }
        }
    }

    @Test func aBatchIsReadWithOneCallPerRowWhenItsFirstObjectFires() throws {
        let (coordinator, store) = try RecordingStore.makeStack()
        let writer = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        try Self.populate(writer)
        let reader = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var request = Self.request(batch: 4)
        request.returnsObjectsAsFaults = false
        let people = try reader.fetch(request)
        #expect(people.prefix(4).allSatisfy { !$0.isFault }, "the first batch is loaded")
        #expect(people.dropFirst(4).allSatisfy { $0.isFault })
        store.clear()
        _ = try people[9].value(forKey: "age")
        let read = store.calls.compactMap { call -> ManagedObjectID? in
            if case .newValues(let id) = call { return id } else { return nil }
        }
        #expect(Set(read) == Set(people[8...11].map(\.objectID)), "the batch of position 9, each row once")
        #expect(read.count == 4)
        store.clear()
        _ = try people[10].value(forKey: "name")
        #expect(!store.calls.contains { if case .newValues = $0 { return true } else { return false } }, "already read")
    }

    @Test(arguments: allStoreFixtures)
    func aBatchMateDeletedElsewhereFailsAloneWhenItFires(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        try stack.read { try Self.populate($0) }
        let context = stack.context()
        let people = try context.fetch(Self.request(batch: 3))
        // Another context deletes the object at position 7 and saves.
        try stack.read { other in
            let victim = try other.existingObject(with: people[7].objectID)
            other.delete(victim)
            try other.save()
        }
        #expect(try people[6].value(forKey: "age") == .int16(6))
        #expect(try people[8].value(forKey: "age") == .int16(8))
        #expect(throws: ObjectGraphError.self) { try people[7].value(forKey: "age") }
        withExtendedLifetime(context) {}
    }

    @Test func changedAndInsertedObjectsKeepTheirStateInABatchedFetch() throws {
        let stack = try InMemoryFixture().makeStack(model: try TestModel.make())
        try stack.read { try Self.populate($0) }
        let context = stack.context()
        let loaded = try context.fetch(Self.request(batch: 0))
        try loaded[8].setValue(.string("changed"), forKey: "name")
        let fresh = try context.insertNewObject(forEntityName: "Person")
        try fresh.setValue(.string("new"), forKey: "name")
        try fresh.setValue(.int16(100), forKey: "age")
        let people = try context.fetch(Self.request(batch: 2))
        #expect(people.count == 13)
        #expect(people[8] === loaded[8] && people[8].faultBatch == nil)
        #expect(try people[8].value(forKey: "name") == .string("changed"))
        #expect(people[12] === fresh && fresh.faultBatch == nil)
        #expect(try people.map { try $0.value(forKey: "age") } == (0..<12).map { .int16(Int16($0)) } + [.int16(100)])
    }
}

import Foundation
import ObjectGraph
import Testing

/// The four rules of seed 003 under `executeFetchRequest:error:`.
@Suite("Conformance: fetches honour pending changes")
struct PendingChangesConformance {
    private func stackWithPeople(_ fixture: any StoreFixture) throws -> (TestStack, ManagedObjectContext) {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let writer = stack.context()
        for (name, age) in [("Ada", 36), ("Bob", 20), ("Cy", 50)] { try writer.makePerson(name, age: Int16(age)) }
        try writer.save()
        return (stack, stack.context())
    }

    @Test(arguments: allStoreFixtures)
    func unsavedInsertThatMatchesIsReturned(fixture: any StoreFixture) throws {
        let (_, context) = try stackWithPeople(fixture)
        let dee = try context.makePerson("Dee", age: 40)
        try context.makePerson("Eve", age: 10)
        let request = FetchRequest.make("Person", .greaterThan("age", 30), sortedBy: ["name"])
        let found = try context.fetch(request)
        #expect(try found.map { try $0.value(forKey: "name") } == ["Ada", "Cy", "Dee"])
        #expect(found.contains(dee))
        #expect(try context.count(for: request) == 3)
        #expect(try context.fetchObjectIDs(request).contains(dee.objectID))
    }

    @Test(arguments: allStoreFixtures)
    func pendingDeleteIsNotReturned(fixture: any StoreFixture) throws {
        let (_, context) = try stackWithPeople(fixture)
        let bob = try #require(try context.fetch(.make("Person", .equal("name", "Bob"))).first)
        context.delete(bob)
        #expect(try context.names(.make("Person", sortedBy: ["name"])) == ["Ada", "Cy"])
        #expect(try context.count(for: FetchRequest(entityName: "Person")) == 2)
    }

    @Test(arguments: allStoreFixtures)
    func changedObjectIsMatchedOnItsInMemoryState(fixture: any StoreFixture) throws {
        let (_, context) = try stackWithPeople(fixture)
        let people = try context.fetch(.make("Person", sortedBy: ["name"]))
        try people[1].setValue(99, forKey: "age")  // Bob now matches
        try people[0].setValue(1, forKey: "age")  // Ada no longer matches, though the store says she does
        let request = FetchRequest.make("Person", .greaterThan("age", 30), sortedBy: ["name"])
        #expect(try context.names(request) == ["Bob", "Cy"])
        var byAge = FetchRequest.make("Person")
        byAge.sortDescriptors = [FetchSortDescriptor(keyPath: "age", ascending: false)]
        byAge.fetchLimit = 1
        #expect(try context.names(byAge) == ["Bob"], "sorting and limits use in-memory values")
    }

    @Test(arguments: allStoreFixtures)
    func realisedObjectsAreReturnedAsTheyAreInMemory(fixture: any StoreFixture) throws {
        let (stack, context) = try stackWithPeople(fixture)
        let ada = try #require(try context.fetch(.make("Person", .equal("name", "Ada"))).first)
        #expect(try ada.value(forKey: "age") == .int16(36))

        let other = stack.context()
        let otherAda = try #require(try other.fetch(.make("Person", .equal("name", "Ada"))).first)
        try otherAda.setValue(37, forKey: "age")
        try other.save()

        let again = try context.fetch(.make("Person", .equal("name", "Ada")))
        #expect(again.first === ada)
        #expect(try ada.value(forKey: "age") == .int16(36), "a fetch does not overwrite realised values")

        var refreshing = FetchRequest.make("Person", .equal("name", "Ada"))
        refreshing.shouldRefreshRefetchedObjects = true
        _ = try context.fetch(refreshing)
        #expect(try ada.value(forKey: "age") == .int16(37))
    }

    @Test(arguments: allStoreFixtures)
    func pendingChangesCanBeExcluded(fixture: any StoreFixture) throws {
        let (_, context) = try stackWithPeople(fixture)
        try context.makePerson("Dee", age: 40)
        var request = FetchRequest.make("Person", sortedBy: ["name"])
        request.includesPendingChanges = false
        #expect(try context.names(request) == ["Ada", "Bob", "Cy"])
    }
}

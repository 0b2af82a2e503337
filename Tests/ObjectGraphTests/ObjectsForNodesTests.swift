import Foundation
import ObjectGraph
import Testing

/// An in-memory store whose object fetches hand their rows over as nodes, through
/// `IncrementalStore.objects(for:in:returnsObjectsAsFaults:)`, in an order the test chooses
/// (`arrange`: the matches' nodes in ID order in, the nodes to hand over out).
final class NodeHandingStore: InMemoryStore, @unchecked Sendable {
    // @unchecked: `arrange` is set by one test on one thread before its fetches.
    static let type = StoreType("NodeHanding")
    nonisolated(unsafe) var arrange: ([IncrementalStoreNode]) -> [IncrementalStoreNode] = { $0 }

    override func execute(_ request: any PersistentStoreRequest, with context: ManagedObjectContext?) throws -> PersistentStoreResult {
        guard var fetch = request as? FetchRequest, fetch.resultType == .managedObject, let context else {
            return try super.execute(request, with: context)
        }
        fetch.resultType = .managedObjectID
        guard case .objectIDs(let ids) = try super.execute(fetch, with: nil) else { return .objects([]) }
        let nodes = try ids.map { try newValuesForObject(with: $0, with: context) }
        return .objects(objects(for: arrange(nodes), in: context, returnsObjectsAsFaults: fetch.returnsObjectsAsFaults))
    }

    static func makeStack() throws -> (PersistentStoreCoordinator, NodeHandingStore) {
        PersistentStoreCoordinator.registerStoreClass(NodeHandingStore.self, type: type)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try TestModel.make())
        guard let store = try coordinator.addPersistentStore(type: type) as? NodeHandingStore else {
            throw ObjectGraphError(.invalidArgument, "registered class was not used")
        }
        return (coordinator, store)
    }
}

@Suite("IncrementalStore.objects(for:): nodes become the context's objects")
struct ObjectsForNodesTests {
    /// A store of five people; returns the coordinator, the store and their IDs by name.
    private func stack() throws -> (PersistentStoreCoordinator, NodeHandingStore, [String: ManagedObjectID]) {
        let (coordinator, store) = try NodeHandingStore.makeStack()
        let writer = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let people = try ["Ada", "Bob", "Cy", "Dee", "Eve"].map { try writer.makePerson($0, age: 30) }
        try writer.save()
        var ids: [String: ManagedObjectID] = [:]
        for person in people { ids[try #require(try person.value(forKey: "name").stringValue)] = person.objectID }
        return (coordinator, store, ids)
    }

    @Test(arguments: [true, false])
    func objectsComeInTheNodesOrderAndARepeatedIDIsOneObject(asFaults: Bool) throws {
        let (coordinator, store, _) = try stack()
        // Reversed, with the first node given again at the end.
        store.arrange = { nodes in nodes.reversed() + [nodes[0]] }
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var request = FetchRequest(entityName: "Person")
        request.returnsObjectsAsFaults = asFaults
        let objects = try context.fetch(request)
        store.arrange = { $0 }
        let expected = try context.fetch(FetchRequest(entityName: "Person"))  // the same context: the same objects
        #expect(objects.count == 6)
        #expect(objects.prefix(5).map(ObjectIdentifier.init) == expected.reversed().map(ObjectIdentifier.init))
        #expect(objects[5] === objects[4], "the repeated node is the object of its first occurrence")
        #expect(objects.allSatisfy { $0.isFault == false || asFaults })
        #expect(try objects.map { try $0.value(forKey: "name").stringValue ?? "" } == ["Eve", "Dee", "Cy", "Bob", "Ada", "Ada"])
        #expect(context.registeredObjects.count == 5)
    }

    @Test func registeredObjectsKeepTheirValuesAndFaultsTakeTheRow() throws {
        let (coordinator, store, ids) = try stack()
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        // Bob loaded with an unsaved change; Cy a fault made from its ID.
        let bob = try context.existingObject(with: try #require(ids["Bob"]))
        try bob.setValue(.int16(99), forKey: "age")
        let cy = context.object(with: try #require(ids["Cy"]))
        #expect(cy.isFault)
        store.arrange = { $0 }
        let objects = try context.fetch(FetchRequest(entityName: "Person"))
        #expect(objects.contains { $0 === bob } && objects.contains { $0 === cy })
        #expect(try bob.value(forKey: "age") == .int16(99) && bob.isUpdated)
        #expect(try cy.value(forKey: "name") == "Cy")
        #expect(context.registeredObjects.count == 5)
    }
}

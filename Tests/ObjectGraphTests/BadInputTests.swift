import Foundation
import ObjectGraph
import Testing

@Suite("Bad input")
struct BadInputTests {
    private func code(_ body: () throws -> Void) -> ObjectGraphError.Code? {
        do {
            try body()
            return nil
        } catch let error as ObjectGraphError {
            #expect(!error.message.isEmpty)
            return error.code
        } catch {
            return nil
        }
    }

    private func stack() throws -> TestStack { try InMemoryFixture().makeStack(model: try TestModel.make()) }

    @Test func unknownEntityThrows() throws {
        let context = try stack().context()
        #expect(code { _ = try context.insertNewObject(forEntityName: "Ghost") } == .unknownEntity)
        #expect(code { _ = try context.fetch(FetchRequest(entityName: "Ghost")) } == .unknownEntity)
        #expect(code { _ = try context.count(for: FetchRequest(entityName: "Ghost")) } == .unknownEntity)
    }

    @Test func unknownKeyThrowsNamingEntityAndKey() throws {
        let context = try stack().context()
        let ada = try context.makePerson("Ada")
        do {
            try ada.setValue("x", forKey: "shoeSize")
            Issue.record("unknown key accepted")
        } catch let error as ObjectGraphError {
            #expect(error.code == .unknownKey && error.entityName == "Person" && error.key == "shoeSize")
        }
        #expect(code { _ = try ada.value(forKey: "shoeSize") } == .unknownKey)
        #expect(code { _ = try context.fetch(.make("Person", .equal("shoeSize", 1))) } == .unknownKey)
        #expect(code { _ = try context.fetch(.make("Person", sortedBy: ["department.floor"])) } == .unknownKey)
        #expect(code { _ = try context.fetch(.make("Person", .equal("name.length", 1))) } == .unknownKey)
    }

    @Test func relationshipAndAttributeAccessorsAreNotInterchangeable() throws {
        let context = try stack().context()
        let ada = try context.makePerson("Ada")
        #expect(code { _ = try ada.value(forKey: "department") } == .wrongValueType)
        #expect(code { _ = try ada.object(forKey: "name") } == .wrongValueType)
        #expect(code { _ = try ada.object(forKey: "notes") } == .wrongValueType)
        #expect(code { try ada.setValue([ada], forKey: "department") } == .wrongValueType)
    }

    @Test func fetchOrSaveWithoutAStoreThrows() throws {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try TestModel.make())
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(code { _ = try context.fetch(FetchRequest(entityName: "Person")) } == .noPersistentStore)
        try context.makePerson("Ada")
        #expect(code { try context.save() } == .noPersistentStore)
        let orphan = ManagedObjectContext(persistentStoreCoordinator: nil)
        #expect(code { _ = try orphan.fetch(FetchRequest(entityName: "Person")) } == .noPersistentStore)
        #expect(code { _ = try orphan.insertNewObject(forEntityName: "Person") } == .noPersistentStore)
    }

    @Test func entityOutsideTheStoresConfigurationCannotBeFetchedOrSaved() throws {
        let model = try ManagedObjectModel(
            entities: [EntityDescription(name: "A", properties: [.attribute("x", .string)]), EntityDescription(name: "B")],
            configurations: ["OnlyA": ["A"]])
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .inMemory, configuration: "OnlyA")
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        _ = try context.fetch(FetchRequest(entityName: "A"))
        #expect(code { _ = try context.fetch(FetchRequest(entityName: "B")) } == .noPersistentStore)
        _ = try context.insertNewObject(forEntityName: "B")
        #expect(code { try context.save() } == .noPersistentStore)
        #expect(code { try coordinator.addPersistentStore(type: .inMemory, configuration: "Nope") } == .invalidArgument)
    }

    /// An unregistered type is refused; so is an atomic store without a URL, and the bare
    /// `AtomicStore`, whose `load()` a subclass must override (seed 004).
    @Test func unregisteredStoreTypesAndIncompleteAtomicStoresAreRefused() throws {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try TestModel.make())
        #expect(code { try coordinator.addPersistentStore(type: PersistentStore.StoreType("NoSuchType")) } == .unknownStoreType)
        PersistentStoreCoordinator.registerStoreClass(AtomicStore.self, type: PersistentStore.StoreType("AtomicStub"))
        #expect(code { try coordinator.addPersistentStore(type: PersistentStore.StoreType("AtomicStub")) } == .invalidArgument)
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("atomic-stub-\(UUID().uuidString)")
        #expect(code { try coordinator.addPersistentStore(type: PersistentStore.StoreType("AtomicStub"), at: url) } == .unsupportedRequest)
        #expect(!FileManager.default.fileExists(atPath: url.path), "the reservation file went with the failed load")
        #expect(coordinator.persistentStores.isEmpty)
    }

    @Test func sameURLCannotBeAddedTwiceToOneCoordinator() throws {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try TestModel.make())
        let url = try #require(URL(string: "memory://bad/\(UUID().uuidString)"))
        try coordinator.addPersistentStore(type: .inMemory, at: url)
        #expect(code { try coordinator.addPersistentStore(type: .inMemory, at: url) } == .storeMismatch)
    }

    @Test func storeMadeWithAnotherModelVersionIsRefused() throws {
        let url = try #require(URL(string: "memory://bad/\(UUID().uuidString)"))
        let first = PersistentStoreCoordinator(managedObjectModel: try ManagedObjectModel(entities: [
            EntityDescription(name: "A", properties: [.attribute("x", .string)])
        ]))
        try first.addPersistentStore(type: .inMemory, at: url)
        let second = PersistentStoreCoordinator(managedObjectModel: try ManagedObjectModel(entities: [
            EntityDescription(name: "A", properties: [.attribute("x", .integer64)])
        ]))
        #expect(code { try second.addPersistentStore(type: .inMemory, at: url) } == .incompatibleModel)
    }

    @Test func abstractEntityInstancesCannotBeSaved() throws {
        let model = try ManagedObjectModel(entities: [
            EntityDescription(name: "Shape", isAbstract: true), EntityDescription(name: "Circle", superentity: "Shape"),
        ])
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .inMemory)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        _ = try context.insertNewObject(forEntityName: "Circle")
        try context.save()
        _ = try context.insertNewObject(forEntityName: "Shape")
        #expect(code { try context.save() } == .invalidArgument)
    }

    @Test func dictionaryFetchOfUngroupedPropertyIsRejected() throws {
        let context = try stack().context()
        var request = FetchRequest(entityName: "Person")
        request.propertiesToFetch = ["name", "age"]
        request.propertiesToGroupBy = ["age"]
        #expect(code { _ = try context.fetchDictionaries(request) } == .invalidFetchRequest)
    }

    @Test func objectOfResetContextCannotLoadOrChange() throws {
        let stack = try stack()
        let context = stack.context()
        let ada = try context.makePerson("Ada")
        try context.save()
        context.refresh(ada, mergeChanges: false)
        context.reset()
        #expect(code { _ = try ada.value(forKey: "name") } == .objectInvalidated)
    }

    @Test func readOnlyStoreRefusesSavesButServesFetches() throws {
        let url = try #require(URL(string: "memory://bad/\(UUID().uuidString)"))
        let first = PersistentStoreCoordinator(managedObjectModel: try TestModel.make())
        try first.addPersistentStore(type: .inMemory, at: url)
        let writer = ManagedObjectContext(persistentStoreCoordinator: first)
        try writer.makePerson("Ada")
        try writer.save()

        let readOnly = PersistentStoreCoordinator(managedObjectModel: try TestModel.make())
        try readOnly.addPersistentStore(type: .inMemory, at: url, options: [PersistentStore.readOnlyOption: true])
        let context = ManagedObjectContext(persistentStoreCoordinator: readOnly)
        let ada = try #require(try context.fetch(FetchRequest(entityName: "Person")).first)
        try ada.setValue(99, forKey: "age")
        #expect(code { try context.save() } == .invalidArgument)
        context.rollback()
        try context.makePerson("Bob")
        #expect(code { try context.save() } == .invalidArgument)
    }
}

import Foundation
import ObjectGraph
import Testing

@Suite("Conformance: insert, save, fetch")
struct RoundTripConformance {
    @Test(arguments: allStoreFixtures)
    func insertedObjectsSurviveSaveAndFetchInAnotherContext(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let writer = stack.context()
        let ada = try writer.makePerson("Ada", age: 36)
        #expect(ada.objectID.isTemporaryID)
        try writer.save()
        #expect(!ada.objectID.isTemporaryID)
        #expect(!ada.isInserted && !ada.hasChanges && !writer.hasChanges)

        let reader = stack.context()
        let people = try reader.fetch(FetchRequest(entityName: "Person"))
        #expect(people.count == 1)
        let fetched = try #require(people.first)
        #expect(fetched.objectID == ada.objectID)
        #expect(fetched !== ada)
        #expect(try fetched.value(forKey: "name") == "Ada")
        #expect(try fetched.value(forKey: "age", as: Int.self) == 36)
    }

    @Test(arguments: allStoreFixtures)
    func everyAttributeTypeRoundTrips(fixture: any StoreFixture) throws {
        struct Payload: Codable, Equatable { var tags: [String] }
        let model = try ManagedObjectModel(entities: [
            EntityDescription(name: "All", properties: AttributeType.allCases.map { .attribute($0.rawValue, $0) })
        ])
        let stack = try fixture.makeStack(model: model)
        let values: [AttributeType: AttributeValue] = [
            .integer16: .int16(-12), .integer32: .int32(1 << 20), .integer64: .int64(1 << 40), .double: .double(3.25),
            .float: .float(1.5), .decimal: .decimal(Decimal(string: "12.345") ?? 0), .boolean: true, .string: "ünïcode",
            .date: .date(Date(timeIntervalSince1970: 1_700_000_000)), .binaryData: .data(Data([0, 1, 255])),
            .uuid: .uuid(UUID()), .uri: .uri(URL(string: "https://example.com/a?b=c") ?? URL(fileURLWithPath: "/")),
            .transformable: try .transformable(encoding: Payload(tags: ["a", "b"])),
        ]
        let context = stack.context()
        let object = try context.insertNewObject(forEntityName: "All")
        for (type, value) in values { try object.setValue(value, forKey: type.rawValue) }
        try context.save()
        let reader = stack.context()
        let fetched = try #require(try reader.fetch(FetchRequest(entityName: "All")).first)
        for (type, value) in values {
            #expect(try fetched.value(forKey: type.rawValue) == value, "\(type)")
        }
        #expect(try fetched.value(forKey: "transformable").decoded(as: Payload.self) == Payload(tags: ["a", "b"]))
    }

    @Test(arguments: allStoreFixtures)
    func subentityInstancesMatchSuperentityFetchesUnlessExcluded(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        try context.makePerson("Ada")
        let boss = try context.makePerson("Bea", entity: "Manager")
        try boss.setValue(3, forKey: "level")
        try context.save()

        let reader = stack.context()
        var request = FetchRequest.make("Person", sortedBy: ["name"])
        #expect(try reader.names(request) == ["Ada", "Bea"])
        request.includesSubentities = false
        #expect(try reader.names(request) == ["Ada"])
        let managers = try reader.fetch(FetchRequest(entityName: "Manager"))
        #expect(managers.map(\.entity.name) == ["Manager"])
        #expect(try managers.first?.value(forKey: "level") == .int32(3))
        let all = try reader.fetch(FetchRequest(entityName: "Person"))
        #expect(all.filter { $0.entity.name == "Person" }.allSatisfy { $0 is Person }, "objects use their entity's class")
        #expect(all.filter { $0.entity.name == "Manager" }.allSatisfy { type(of: $0) == ManagedObject.self })
    }

    @Test(arguments: allStoreFixtures)
    func predicateSortOffsetAndLimitApply(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        for (name, age) in [("Cy", 50), ("Ada", 36), ("Bob", 20), ("Dee", 41), ("Eve", 29)] {
            try context.makePerson(name, age: Int16(age))
        }
        try context.save()
        let reader = stack.context()
        var request = FetchRequest.make("Person", .greaterThan("age", 25), sortedBy: ["name"])
        #expect(try reader.names(request) == ["Ada", "Cy", "Dee", "Eve"])
        request.fetchOffset = 1
        request.fetchLimit = 2
        #expect(try reader.names(request) == ["Cy", "Dee"])
        #expect(try reader.count(for: request) == 2)
        request.sortDescriptors = [FetchSortDescriptor(keyPath: "age", ascending: false)]
        request.fetchOffset = 0
        request.fetchLimit = 0
        #expect(try reader.names(request) == ["Cy", "Dee", "Ada", "Eve"])
        #expect(try reader.count(for: FetchRequest(entityName: "Person")) == 5)
    }

    @Test(arguments: allStoreFixtures)
    func objectIDAndDictionaryResults(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let sales = try context.makeDepartment("Sales")
        for (name, age) in [("Ada", 30), ("Bob", 30), ("Cy", 40)] {
            try context.makePerson(name, age: Int16(age)).setValue(sales, forKey: "department")
        }
        try context.save()

        let reader = stack.context()
        let ids = try reader.fetchObjectIDs(FetchRequest.make("Person", sortedBy: ["name"]))
        #expect(ids.count == 3)
        #expect(reader.registeredObjects.isEmpty, "an ID fetch registers nothing")

        var request = FetchRequest.make("Person", sortedBy: ["name"])
        request.propertiesToFetch = ["name", "department"]
        let rows = try reader.fetchDictionaries(request)
        #expect(rows.map { $0["name"] } == [.attribute("Ada"), .attribute("Bob"), .attribute("Cy")])
        #expect(rows.first?["department"] == .object(sales.objectID))

        var distinct = FetchRequest.make("Person", sortedBy: ["age"])
        distinct.propertiesToFetch = ["age"]
        distinct.returnsDistinctResults = true
        #expect(try reader.fetchDictionaries(distinct).map { $0["age"] } == [.attribute(.int16(30)), .attribute(.int16(40))])

        var grouped = FetchRequest.make("Person", sortedBy: ["age"])
        grouped.propertiesToFetch = ["age"]
        grouped.propertiesToGroupBy = ["age"]
        grouped.havingPredicate = .greaterThan("age", 35)
        #expect(try reader.fetchDictionaries(grouped).map { $0["age"] } == [.attribute(.int16(40))])
    }

    @Test(arguments: allStoreFixtures)
    func nodeVersionsStartAtOneAndGrowByOnePerSave(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let ada = try context.makePerson("Ada")
        try context.save()
        let store = try #require(stack.store as? IncrementalStore)
        let reader = stack.context()
        #expect(try store.newValuesForObject(with: ada.objectID, with: reader).version == 1)
        try ada.setValue(37, forKey: "age")
        try context.save()
        #expect(try store.newValuesForObject(with: ada.objectID, with: reader).version == 2)
        try ada.setValue("Ada L.", forKey: "name")
        try context.save()
        let node = try store.newValuesForObject(with: ada.objectID, with: reader)
        #expect(node.version == 3)
        #expect(node.values["name"] == .attribute("Ada L."))
    }

    @Test(arguments: allStoreFixtures)
    func reopenedStoreKeepsRowsIdentifierAndURIs(fixture: any StoreFixture) throws {
        guard fixture.supportsReopen else { return }
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let ada = try context.makePerson("Ada")
        try context.save()
        let uri = ada.objectID.uriRepresentation()

        let reopened = try fixture.reopen(stack)
        #expect(reopened.store.identifier == stack.store.identifier)
        let id = try #require(reopened.coordinator.managedObjectID(forURIRepresentation: uri))
        let object = try reopened.context().existingObject(with: id)
        #expect(try object.value(forKey: "name") == "Ada")
    }

    @Test(arguments: allStoreFixtures)
    func metadataIsReadableByURLAndRecordsModelHashes(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        guard let url = stack.url else { return }  // only stores with a location have metadata by URL
        if stack.store is AtomicStore {
            // An atomic store writes its file, metadata included, when it is saved (seed 004).
            let context = stack.context()
            try context.makePerson("Ada")
            try context.save()
        }
        let metadata = try PersistentStoreCoordinator.metadataForPersistentStore(type: stack.store.type, at: url)
        #expect(metadata[PersistentStore.storeUUIDKey] == .string(stack.store.identifier))
        let hash = try TestModel.make().entitiesByName["Person"]?.versionHash
        #expect(metadata[PersistentStore.modelVersionHashKeyPrefix + "Person"] == hash.map(AttributeValue.data))

        var changed = metadata
        changed["app.version"] = "2"
        stack.coordinator.setMetadata(changed, for: stack.store)
        let context = stack.context()
        try context.makePerson("Ada")
        try context.save()
        let saved = try PersistentStoreCoordinator.metadataForPersistentStore(type: stack.store.type, at: url)
        #expect(saved["app.version"] == "2")
    }
}

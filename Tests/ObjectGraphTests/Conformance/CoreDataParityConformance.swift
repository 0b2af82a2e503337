import Foundation
import ObjectGraph
import Testing

/// Behaviours Core Data documents (or shows) that the context is held to, one test each,
/// on every store. Each test names the Apple document it follows.
@Suite("Conformance: Core Data parity")
struct CoreDataParityConformance {
    /// NSManagedObjectContext `save()` (seed 003: "If there were no changes, returns YES"):
    /// a save with nothing to save posts no will-save or did-save notification and sends the
    /// stores nothing.
    @Test(arguments: allStoreFixtures)
    func aSaveWithNoChangesPostsNothingAndWritesNothing(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        try context.makePerson("Ada")
        try context.save()
        let willSave = NotificationRecorder(ManagedObjectContext.willSaveObjectsNotification, from: context)
        let didSave = NotificationRecorder(ManagedObjectContext.didSaveObjectsNotification, from: context)
        try context.save()
        #expect(willSave.received.isEmpty && didSave.received.isEmpty)
    }

    /// The same, seen by the store: no request at all (seed 002: an empty save request would
    /// be a request to save metadata).
    @Test func aSaveWithNoChangesSendsNoSaveRequest() throws {
        let (coordinator, store) = try RecordingStore.makeStack()
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        try context.makePerson("Ada")
        try context.save()
        store.clear()
        try context.save()
        #expect(!store.calls.contains { if case .save = $0 { return true } else { return false } })
    }

    /// NSManagedObject `setPrimitiveValue(_:forKey:)`: it "does not invoke the change
    /// notification methods", so the context does not track the change: the object is not
    /// updated for it and a save alone does not write it. With a tracked change beside it,
    /// both are saved.
    @Test(arguments: allStoreFixtures)
    func aPrimitiveChangeIsNotTrackedButIsSavedWithATrackedOne(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let ada = try context.makePerson("Ada", age: 30)
        try context.save()
        let recorder = NotificationRecorder(ManagedObjectContext.objectsDidChangeNotification, from: context)
        try ada.setPrimitiveValue(41, forKey: "age")
        #expect(ada.primitiveValue(forKey: "age") == .int16(41))
        context.processPendingChanges()
        #expect(recorder.received.isEmpty)
        #expect(!context.hasChanges && context.updatedObjects.isEmpty)
        try context.save()
        #expect(try stack.read { try $0.existingObject(with: ada.objectID).value(forKey: "age") } == .int16(30), "not saved alone")
        try ada.setValue("Ada L.", forKey: "name")
        try context.save()
        try stack.read { (reader: ManagedObjectContext) throws in
            let row = try reader.existingObject(with: ada.objectID)
            #expect(try row.value(forKey: "age") == .int16(41))
            #expect(try row.value(forKey: "name") == "Ada L.")
        }
    }

    /// NSPropertyDescription `isTransient` ("still managed for undo, redo, validation") and
    /// NSManagedObject `changedValues()` ("not changes to transient properties"): changing a
    /// transient attribute makes the object updated, without a changed value; the save goes
    /// through and leaves it clean.
    @Test(arguments: allStoreFixtures)
    func aTransientChangeMakesTheObjectUpdatedWithoutAChangedValue(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let ada = try context.makePerson("Ada", age: 30)
        try context.save()
        let recorder = NotificationRecorder(ManagedObjectContext.objectsDidChangeNotification, from: context)
        try ada.setValue("Addie", forKey: "nickname")
        #expect(ada.isUpdated && ada.hasChanges && context.hasChanges)
        #expect(context.updatedObjects == [ada])
        #expect(ada.changedValues().isEmpty)
        context.processPendingChanges()
        #expect(recorder.last?.updated == [ada])
        try context.save()
        #expect(!ada.isUpdated && !context.hasChanges)
        #expect(try ada.value(forKey: "nickname") == "Addie", "a save keeps transient values")
        #expect(try stack.read { try $0.existingObject(with: ada.objectID).value(forKey: "nickname") } == .null, "never stored")
    }

    /// NSManagedObjectContext `delete(_:)`: deleting an object twice is one delete: it is in
    /// `deletedObjects` once, its `prepareForDeletion` runs once, the save deletes one row.
    @Test(arguments: allStoreFixtures)
    func deletingAnObjectTwiceIsOneDelete(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let ada = try #require(try context.makePerson("Ada") as? Person)
        try context.makePerson("Bob")
        try context.save()
        context.delete(ada)
        context.processPendingChanges()
        context.delete(ada)
        context.processPendingChanges()
        #expect(context.deletedObjects == [ada])
        #expect(ada.deletionsPrepared == 1)
        try context.save()
        #expect(try stack.read { try $0.names(.make("Person")) } == ["Bob"])
    }

    /// Core Data Programming Guide, "Relationships and Fetched Properties": an object inserted
    /// and deleted before a save never reaches the store, and the relationships that pointed at
    /// it are cleared by its delete rules, on both ends.
    @Test(arguments: allStoreFixtures)
    func anObjectInsertedAndDeletedBeforeASaveLeavesNoReferenceBehind(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let ada = try context.makePerson("Ada")
        try context.save()
        let badge = try context.insertNewObject(forEntityName: "Badge")
        try ada.setValue(badge, forKey: "badge")
        let sales = try context.makeDepartment("Sales")
        try ada.setValue(sales, forKey: "department")
        context.processPendingChanges()
        context.delete(badge)
        // Department.employees cascades: Ada leaves the department first.
        try ada.setValue(nil as ManagedObject?, forKey: "department")
        context.delete(sales)
        context.processPendingChanges()
        #expect(try ada.object(forKey: "badge") == nil)
        #expect(try ada.object(forKey: "department") == nil)
        #expect(context.insertedObjects.isEmpty && context.deletedObjects.isEmpty)
        #expect(badge.managedObjectContext == nil && sales.managedObjectContext == nil)
        try context.save()
        try stack.read { (reader: ManagedObjectContext) throws in
            #expect(try reader.count(for: .make("Badge")) == 0)
            #expect(try reader.count(for: .make("Department")) == 0)
            #expect(try reader.existingObject(with: ada.objectID).object(forKey: "badge") == nil)
        }
    }

    /// NSSortDescriptor on Core Data's SQLite store: `nil` sorts before every value ascending
    /// and after every value descending, whether or not an index serves the sort.
    @Test(arguments: allStoreFixtures, [false, true])
    func nullsSortFirstAscendingAndLastDescending(fixture: any StoreFixture, indexed: Bool) throws {
        let model = try ManagedObjectModel(entities: [
            EntityDescription(name: "Item", properties: [
                .attribute("name", .string, optional: false),
                .attribute("rank", .integer32, indexed: indexed),
            ])
        ])
        let stack = try fixture.makeStack(model: model)
        let context = stack.context()
        for (name, rank) in [("b", AttributeValue.int32(2)), ("none1", .null), ("a", .int32(1)), ("none2", .null), ("c", .int32(3))] {
            let item = try context.insertNewObject(forEntityName: "Item")
            try item.setValue(.string(name), forKey: "name")
            try item.setValue(rank, forKey: "rank")
        }
        try context.save()
        try stack.read { (reader: ManagedObjectContext) throws in
            var ascending = FetchRequest(entityName: "Item")
            ascending.sortDescriptors = [FetchSortDescriptor(keyPath: "rank"), FetchSortDescriptor(keyPath: "name")]
            #expect(try reader.names(ascending) == ["none1", "none2", "a", "b", "c"])
            var descending = FetchRequest(entityName: "Item")
            descending.sortDescriptors = [FetchSortDescriptor(keyPath: "rank", ascending: false), FetchSortDescriptor(keyPath: "name")]
            #expect(try reader.names(descending) == ["c", "b", "a", "none1", "none2"])
            ascending.fetchLimit = 3
            #expect(try reader.names(ascending) == ["none1", "none2", "a"], "the same with a limit")
        }
    }

    /// NSManagedObjectID `uriRepresentation()` and the coordinator's
    /// `managedObjectID(forURIRepresentation:)`: a string reference object with reserved,
    /// percent and non-ASCII characters round-trips exactly through its URI.
    @Test func stringReferenceObjectsAreEscapedInURIsAndComeBackExactly() throws {
        for text in ["plain", "a/b c", "100%", "%2F", "café ünïcode", "?#[]@!$&'()*+,;=", "p1", ""] {
            let reference = ReferenceObject.string(text)
            let component = reference.uriComponent
            #expect(component.unicodeScalars.allSatisfy { $0.isASCII }, "\(text): escaped to ASCII")
            #expect(!component.contains("/") && !component.contains("?") && !component.contains("#"))
            #expect(ReferenceObject(uriComponent: component) == reference, "\(text) round-trips")
        }
        let (coordinator, store) = try RecordingStore.makeStack()
        let entity = try coordinator.managedObjectModel.entity(named: "Person")
        for text in ["café ünïcode", "a/b c", "100%"] {
            let id = store.newObjectID(for: entity, referenceObject: .string(text))
            let uri = id.uriRepresentation()
            #expect(coordinator.managedObjectID(forURIRepresentation: uri) == id, "\(uri)")
        }
    }
}

/// An in-memory store under another type name: it shares the rows of an InMemoryStore at the
/// same URL, so it can try to take one over.
final class OtherTypedMemoryStore: InMemoryStore, @unchecked Sendable {
    static let storeType = PersistentStore.StoreType("OtherTypedMemory")
    override var type: StoreType { Self.storeType }
}

extension CoreDataParityConformance {
    /// NSPersistentStoreCoordinator `addPersistentStore(ofType:…)` and CoreDataErrors.h
    /// (`NSPersistentStoreTypeMismatchError`): a store made by one type, added as another, is
    /// refused with the type mismatch error, and its metadata is left as it was.
    @Test func addingAStoreAsAnotherTypeThanMadeItIsATypeMismatch() throws {
        PersistentStoreCoordinator.registerStoreClass(OtherTypedMemoryStore.self, type: OtherTypedMemoryStore.storeType)
        let stack = try InMemoryFixture().makeStack(model: try TestModel.make())
        try stack.read { context in
            try context.makePerson("Ada")
            try context.save()
        }
        let url = try #require(stack.url)
        let before = try InMemoryStore.metadataForPersistentStore(at: url)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try TestModel.make())
        let error = #expect(throws: ObjectGraphError.self) {
            try coordinator.addPersistentStore(type: OtherTypedMemoryStore.storeType, at: url)
        }
        #expect(error?.code == .storeTypeMismatch && error?.code.cocoaErrorCode == 134010)
        #expect(coordinator.persistentStores.isEmpty)
        #expect(try InMemoryStore.metadataForPersistentStore(at: url) == before, "nothing written")
        #expect(throws: Never.self) { try coordinator.addPersistentStore(type: .inMemory, at: url) }
    }

    /// NSFetchRequest `propertiesToGroupBy` / `havingPredicate` ("you must set the resultType
    /// to NSDictionaryResultType") and `propertiesToFetch` (a to-many relationship is not a
    /// column): Core Data rejects these requests; so does every store here, before reading.
    @Test(arguments: allStoreFixtures)
    func dictionaryRequestsCoreDataRejectsAreRejected(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        try context.makeDepartment("Sales")
        try context.save()
        var toMany = FetchRequest(entityName: "Department")
        toMany.propertiesToFetch = ["name", "employees"]
        #expect(throws: ObjectGraphError.self) { _ = try context.fetchDictionaries(toMany) }
        var throughToMany = FetchRequest(entityName: "Department")
        throughToMany.propertiesToFetch = ["employees.name"]
        #expect(throws: ObjectGraphError.self) { _ = try context.fetchDictionaries(throughToMany) }
        var havingAlone = FetchRequest(entityName: "Person")
        havingAlone.propertiesToFetch = [.aggregate(.count, of: "age", as: "people")]
        havingAlone.havingPredicate = .greaterThan("people", 1)
        #expect(throws: ObjectGraphError.self) { _ = try context.fetchDictionaries(havingAlone) }
        var groupedObjects = FetchRequest(entityName: "Person")
        groupedObjects.propertiesToGroupBy = ["age"]
        #expect(throws: ObjectGraphError.self) { _ = try context.fetch(groupedObjects) }
        // What Core Data accepts still works: a to-one key path and a to-many's count.
        var accepted = FetchRequest(entityName: "Person")
        accepted.propertiesToFetch = ["name", "department.name"]
        #expect(throws: Never.self) { _ = try context.fetchDictionaries(accepted) }
    }
}

extension CoreDataParityConformance {
    /// Seed 002 ("executeRequest:withContext:error: is preceded by a call to
    /// obtainPermanentIDsForObjects:error: … Once these IDs have been assigned, they cannot
    /// change") and seed 000 (register counts): inserted objects get their permanent IDs first,
    /// are registered under them once, then the save request carries them; a save that fails
    /// after that keeps the IDs, and the next save neither asks for new ones nor registers
    /// the objects again.
    @Test func insertedObjectsTakePermanentIDsThenRegisterThenSaveAndKeepThemAfterAFailure() throws {
        let (coordinator, store) = try RecordingStore.makeStack()
        let setup = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let ada = try setup.makePerson("Ada", age: 30)
        try setup.save()
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let mine = try context.existingObject(with: ada.objectID)
        try ada.setValue(.int16(31), forKey: "age")
        try setup.save()
        try mine.setValue(.int16(32), forKey: "age")
        let bob = try context.makePerson("Bob")
        store.clear()
        #expect(throws: ObjectGraphError.self) { try context.save() }  // conflicts on Ada
        let permanent = bob.objectID
        #expect(!permanent.isTemporaryID, "the IDs stay assigned")
        let calls = store.calls
        let obtained = calls.firstIndex { if case .obtainPermanentIDs = $0 { return true } else { return false } }
        let registered = calls.firstIndex { if case .register(let ids) = $0 { return ids.contains(permanent) } else { return false } }
        let saved = calls.firstIndex { if case .save = $0 { return true } else { return false } }
        #expect(obtained != nil && registered != nil && saved != nil)
        if let obtained, let registered, let saved { #expect(obtained < registered && registered < saved) }
        #expect(store.registrationCount(for: permanent) == 1)

        store.clear()
        context.mergePolicy = .mergeByPropertyObjectTrump
        try context.save()
        #expect(bob.objectID == permanent)
        #expect(!store.calls.contains { if case .obtainPermanentIDs = $0 { return true } else { return false } })
        #expect(!store.calls.contains { if case .register(let ids) = $0 { return ids.contains(permanent) } else { return false } })
        #expect(store.registrationCount(for: permanent) == 1)
        #expect(store.bookkeepingErrors.isEmpty)
    }
}

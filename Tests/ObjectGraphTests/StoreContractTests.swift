import Foundation
import ObjectGraph
import Testing

/// Checks, with a recording store, that contexts call the incremental-store contract
/// in the order and balance seeds 000 and 002 require.
@Suite("Store contract")
struct StoreContractTests {
    @Test func permanentIDsAreObtainedBeforeTheSaveInInsertionOrder() throws {
        let (coordinator, store) = try RecordingStore.makeStack()
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let ada = try context.makePerson("Ada")
        let sales = try context.makeDepartment("Sales")
        let bob = try context.makePerson("Bob")
        try context.save()

        let calls = store.calls
        let obtainIndex = try #require(calls.firstIndex { if case .obtainPermanentIDs = $0 { return true } else { return false } })
        let saveIndex = try #require(calls.firstIndex { if case .save = $0 { return true } else { return false } })
        #expect(obtainIndex < saveIndex)
        guard case .obtainPermanentIDs(let entities, let returned) = calls[obtainIndex] else { return }
        #expect(entities == ["Person", "Department", "Person"])
        #expect(returned == [ada.objectID, sales.objectID, bob.objectID], "IDs are assigned in the order returned")
        guard case .save(let inserted, _, _) = calls[saveIndex] else { return }
        #expect(Set(inserted) == Set(returned), "the save request carries the permanent IDs")
    }

    @Test func saveWithoutInsertsDoesNotObtainIDs() throws {
        let (coordinator, store) = try RecordingStore.makeStack()
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let ada = try context.makePerson("Ada")
        try context.save()
        store.clear()
        try ada.setValue(40, forKey: "age")
        try context.save()
        #expect(!store.calls.contains { if case .obtainPermanentIDs = $0 { return true } else { return false } })
        #expect(store.calls.contains(.save(inserted: [], updated: 1, deleted: 0)))
    }

    @Test func registerCountsFollowFetchesAndReturnToZeroOnReset() throws {
        let (coordinator, store) = try RecordingStore.makeStack()
        let writer = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let ada = try writer.makePerson("Ada")
        try writer.makePerson("Bob")
        try writer.save()
        #expect(store.registrationCount(for: ada.objectID) == 1, "the writer registers saved inserts")

        let reader = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        reader.retainsRegisteredObjects = true
        store.clear()
        _ = try reader.fetch(FetchRequest(entityName: "Person"))
        #expect(store.registrationCount(for: ada.objectID) == 2)
        #expect(store.calls.filter { if case .register = $0 { return true } else { return false } }.count == 1, "one call per fetch")
        _ = try reader.fetch(FetchRequest(entityName: "Person"))
        #expect(store.registrationCount(for: ada.objectID) == 2, "refetching registers nothing new")

        reader.reset()
        writer.reset()
        #expect(store.registrationCounts.isEmpty)
        #expect(store.bookkeepingErrors.isEmpty)
    }

    @Test func refreshKeepsRegistrationBalanced() throws {
        let (coordinator, store) = try RecordingStore.makeStack()
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let ada = try context.makePerson("Ada")
        try context.save()
        context.refresh(ada, mergeChanges: false)
        _ = try ada.value(forKey: "name")
        context.refresh(ada, mergeChanges: true)
        #expect(store.registrationCount(for: ada.objectID) == 1)
        context.reset()
        #expect(store.registrationCount(for: ada.objectID) == 0)
        #expect(store.bookkeepingErrors.isEmpty)
    }

    @Test func deallocatingContextOrObjectsUnregistersRows() throws {
        let (coordinator, store) = try RecordingStore.makeStack()
        var id: ManagedObjectID?
        do {
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            context.retainsRegisteredObjects = true
            let ada = try context.makePerson("Ada")
            try context.save()
            id = ada.objectID
            _ = try context.fetch(FetchRequest(entityName: "Person"))
            #expect(store.registrationCount(for: ada.objectID) == 1)
        }
        #expect(store.registrationCount(for: try #require(id)) == 0, "context deallocation unregisters")

        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        _ = try context.fetch(FetchRequest(entityName: "Person"))
        context.processPendingChanges()
        #expect(store.registrationCounts.isEmpty, "an unretained fetched object is released at once and unregistered with the next batch")
        do {
            let held = context.object(with: try #require(id))
            #expect(store.registrationCount(for: held.objectID) == 1)
        }
        _ = try context.fetch(FetchRequest(entityName: "Department"))  // a fetch sends the batch too
        #expect(store.registrationCounts.isEmpty)
        #expect(store.bookkeepingErrors.isEmpty)
    }

    @Test func deallocationsReachTheStoreInBatchesOfAtMostTheBatchSize() throws {
        let (coordinator, store) = try RecordingStore.makeStack()
        let writer = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let total = ManagedObjectContext.unregistrationBatch + 44
        for index in 0..<total { try writer.makePerson("P\(index)") }
        try writer.save()
        writer.reset()
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        do {
            let people = try context.fetch(FetchRequest(entityName: "Person"))
            #expect(people.count == total && store.registrationCounts.count == total)
            store.clear()
        }
        // One batch went as soon as it was full, in one call; the rest waits.
        let sizes = store.calls.compactMap { call -> Int? in if case .unregister(let ids) = call { return ids.count } else { return nil } }
        #expect(sizes == [ManagedObjectContext.unregistrationBatch])
        #expect(store.registrationCounts.count == 44)
        context.processPendingChanges()
        #expect(store.registrationCounts.isEmpty)
        #expect(store.bookkeepingErrors.isEmpty)
    }

    // The registry holds objects without a reference count: every way an object can leave
    // (deallocation, reset, re-keying by obtainPermanentIDs, unregistering on a failed
    // existingObject, a second object for the same ID) must drop its entry exactly once.
    @Test func everyWayAnObjectLeavesTheRegistryKeepsCountsBalanced() throws {
        let (coordinator, store) = try RecordingStore.makeStack()
        let writer = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let ids = try (0..<20).map { try writer.makePerson("P\($0)") }.map(\.objectID)
        try writer.save()
        let saved = try writer.fetch(FetchRequest(entityName: "Person")).map(\.objectID)
        #expect(saved.count == 20 && ids.count == 20)
        writer.reset()
        #expect(store.registrationCounts.isEmpty)

        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        do {
            // Fetched, then released in the reverse order of registration.
            var fetched = try context.fetch(FetchRequest(entityName: "Person"))
            #expect(store.registrationCounts.count == 20)
            while !fetched.isEmpty { fetched.removeLast() }
            // Deallocations reach the stores in a batch, when the context next processes
            // its changes (or fetches, saves, resets, or goes), as Core Data's do.
            #expect(store.registrationCounts.count == 20)
            context.processPendingChanges()
            #expect(store.registrationCounts.isEmpty)
            #expect(context.registeredObjects.isEmpty)
        }
        do {
            // Released after a reset: the objects no longer belong to the context.
            let fetched = try context.fetch(FetchRequest(entityName: "Person"))
            context.reset()
            #expect(store.registrationCounts.isEmpty)
            #expect(fetched.allSatisfy { $0.managedObjectContext == nil })
        }
        #expect(context.registeredObjects.isEmpty)
        do {
            // Re-keyed by obtainPermanentIDs, then saved, then released.
            let fresh = try context.makePerson("New")
            try context.obtainPermanentIDs(for: [fresh])
            #expect(store.registrationCount(for: fresh.objectID) == 1)
            #expect(context.registeredObject(for: fresh.objectID) === fresh)
            try context.save()
        }
        context.processPendingChanges()
        #expect(store.registrationCounts.isEmpty, "a saved object nothing holds is unregistered")
        do {
            // A failed existingObject leaves nothing behind.
            let missing = try #require(coordinator.persistentStores.first as? IncrementalStore)
                .newObjectID(for: try coordinator.managedObjectModel.entity(named: "Person"), referenceObject: .int64(999_999))
            #expect(throws: ObjectGraphError.self) { _ = try context.existingObject(with: missing) }
            #expect(context.registeredObject(for: missing) == nil)
        }
        do {
            // An object is uniqued while alive, and a new one is made once it is gone.
            let first = context.object(with: saved[0])
            #expect(context.object(with: saved[0]) === first)
            #expect(store.registrationCount(for: saved[0]) == 1)
        }
        context.processPendingChanges()
        #expect(store.registrationCounts.isEmpty)
        let again = context.object(with: saved[0])
        #expect(store.registrationCount(for: saved[0]) == 1)
        withExtendedLifetime(again) {}
        #expect(store.bookkeepingErrors.isEmpty)
    }

    // Defaults are read from the entity by an object outside any context, and recorded
    // as changes once it is inserted.
    @Test func aNewObjectReadsDefaultValuesBeforeAndAfterInsertion() throws {
        let (coordinator, _) = try RecordingStore.makeStack()
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let entity = try coordinator.managedObjectModel.entity(named: "Person")
        let loose = ManagedObject(entity: entity, insertInto: nil)
        #expect(try loose.value(forKey: "age") == .int16(0))
        #expect(loose.objectID.isTemporaryID)
        let id = loose.objectID
        #expect(loose.objectID == id, "the temporary ID is made once")
        try context.insert(loose)
        #expect(loose.objectID == id)
        #expect(loose.changedValues()["age"] == .attribute(.int16(0)))
        #expect(try loose.value(forKey: "age") == .int16(0))
    }

    @Test func deletedAndRolledBackObjectsAreUnregistered() throws {
        let (coordinator, store) = try RecordingStore.makeStack()
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let ada = try context.makePerson("Ada")
        try context.save()
        context.delete(ada)
        try context.save()
        #expect(store.registrationCount(for: ada.objectID) == 0)

        let bob = try context.makePerson("Bob")
        try context.obtainPermanentIDs(for: [bob])
        #expect(store.registrationCount(for: bob.objectID) == 1)
        context.rollback()
        #expect(store.registrationCount(for: bob.objectID) == 0)
        #expect(store.bookkeepingErrors.isEmpty)
    }

    @Test func faultsFireThroughNewValuesAndToManyThroughNewValueForRelationship() throws {
        let (coordinator, store) = try RecordingStore.makeStack()
        let writer = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let sales = try writer.makeDepartment("Sales")
        try writer.makePerson("Ada").setValue(sales, forKey: "department")
        try writer.save()
        store.clear()

        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        context.stalenessInterval = 0
        let department = context.object(with: sales.objectID)
        #expect(store.calls == [.register([sales.objectID])], "object(with:) does no I/O")
        _ = try department.value(forKey: "name")
        #expect(store.calls.last == .newValues(sales.objectID))
        _ = try department.objects(forKey: "employees")
        #expect(store.calls.contains(.newRelationship("employees")))
    }

    @Test func unbalancedUnregisterIsRecordedAndCountsStayAtZero() throws {
        let (coordinator, store) = try RecordingStore.makeStack()
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let ada = try context.makePerson("Ada")
        try context.save()
        context.reset()
        store.managedObjectContextDidUnregisterObjects(with: [ada.objectID])
        #expect(store.registrationCount(for: ada.objectID) == 0)
        #expect(store.bookkeepingErrors.map(\.code) == [.unbalancedUnregister])
    }

    @Test func unknownRequestTypeIsAnError() throws {
        struct BatchDelete: PersistentStoreRequest {
            var requestType: PersistentStoreRequestType { PersistentStoreRequestType(rawValue: "batchDelete") }
            var affectedStores: [PersistentStore]? { nil }
        }
        let (coordinator, store) = try RecordingStore.makeStack()
        #expect { try store.execute(BatchDelete(), with: nil) } throws: { ($0 as? ObjectGraphError)?.code == .unsupportedRequest }
        #expect { try coordinator.execute(BatchDelete(), with: nil) } throws: { ($0 as? ObjectGraphError)?.code == .unsupportedRequest }
    }

    @Test func emptySaveRequestSavesMetadata() throws {
        let url = try #require(URL(string: "memory://contract/\(UUID().uuidString)"))
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try TestModel.make())
        let store = try #require(try coordinator.addPersistentStore(type: .inMemory, at: url) as? IncrementalStore)
        var metadata = store.metadata
        metadata["note"] = "kept"
        store.metadata = metadata
        #expect(try PersistentStoreCoordinator.metadataForPersistentStore(type: .inMemory, at: url)["note"] == nil)
        #expect(try store.execute(SaveChangesRequest(), with: nil).isSaved)
        #expect(try PersistentStoreCoordinator.metadataForPersistentStore(type: .inMemory, at: url)["note"] == "kept")
    }

    @Test func countWithPendingChangesMakesNoObjects() throws {
        let (coordinator, store) = try RecordingStore.makeStack()
        let writer = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for name in ["Ada", "Bob", "Cy"] { try writer.makePerson(name) }
        try writer.save()
        writer.reset()
        store.clear()

        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        try context.makePerson("Dee")
        var request = FetchRequest(entityName: "Person")
        #expect(try context.count(for: request) == 4)
        request.fetchOffset = 1
        request.fetchLimit = 2
        #expect(try context.count(for: request) == 2)
        #expect(!store.calls.contains { if case .register = $0 { return true } else { return false } })
    }

    @Test func contextLockIsReentrantAndTryLockReportsIt() throws {
        let context = ManagedObjectContext(persistentStoreCoordinator: nil)
        context.lock()
        #expect(context.tryLock(), "the lock is recursive for its owner")
        context.unlock()
        context.unlock()
        #expect(context.tryLock())
        context.unlock()
    }

    /// The lock is made on first use: every thread gets the same one, so a lock held here
    /// keeps another thread out until it is released.
    @Test func contextLockHeldOnOneThreadKeepsAnotherOut() throws {
        let context = ManagedObjectContext(persistentStoreCoordinator: nil)
        /// What the other thread's `tryLock` answered; written there, read after the wait.
        final class Answer: @unchecked Sendable { var value: Bool? }
        func tryLockElsewhere() -> Bool? {
            let answer = Answer()
            let done = DispatchSemaphore(value: 0)
            let thread = Thread {
                answer.value = context.tryLock()
                if answer.value == true { context.unlock() }
                done.signal()
            }
            thread.start()
            done.wait()
            return answer.value
        }
        context.lock()
        #expect(tryLockElsewhere() == false, "held by this thread")
        context.unlock()
        #expect(tryLockElsewhere() == true, "released")
    }
}

extension PersistentStoreResult {
    var isSaved: Bool { if case .saved = self { return true } else { return false } }
}

import Foundation
import ObjectGraph
import Testing

@Suite("Conformance: rollback, reset, refresh, change tracking")
struct ContextLifecycleConformance {
    @Test(arguments: allStoreFixtures)
    func changeTrackingReportsChangedAndCommittedValues(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let ada = try context.makePerson("Ada", age: 36)
        #expect(ada.isInserted && !ada.isUpdated)
        try context.save()
        #expect(!ada.hasChanges && ada.changedValues().isEmpty)

        try ada.setValue(37, forKey: "age")
        #expect(ada.isUpdated && context.updatedObjects == [ada])
        #expect(ada.changedValues() == ["age": .attribute(.int16(37))])
        #expect(try ada.committedValues(forKeys: ["age", "name"]) == ["age": .attribute(.int16(36)), "name": .attribute("Ada")])
        try ada.setValue(36, forKey: "age")
        #expect(!ada.hasChanges && context.updatedObjects.isEmpty, "setting the committed value back is no change")
    }

    /// Core Data's `existingObject(with:)` fails for a temporary ID the context has no object
    /// for (NSManagedObjectReferentialIntegrityError): another context's insert, before its
    /// save and after it (the object then has a permanent ID, which works). Neither call
    /// leaves an object behind in the context.
    @Test(arguments: allStoreFixtures)
    func existingObjectFailsForAnotherContextsTemporaryID(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let writer = stack.context()
        let ada = try writer.makePerson("Ada", age: 36)
        let temporary = ada.objectID
        #expect(temporary.isTemporaryID)
        let reader = stack.context()
        #expect(throws: ObjectGraphError.self) { _ = try reader.existingObject(with: temporary) }
        try writer.save()
        var caught: ObjectGraphError?
        do { _ = try reader.existingObject(with: temporary) } catch let error as ObjectGraphError { caught = error }
        #expect(caught?.code == .objectNotFound)
        #expect(reader.registeredObjects.isEmpty)
        #expect(try reader.existingObject(with: ada.objectID).value(forKey: "name") == .string("Ada"))
        // The writer's own inserted object stays reachable by its ID until it is saved.
        let bob = try writer.makePerson("Bob")
        #expect(try writer.existingObject(with: bob.objectID) === bob)
    }

    @Test(arguments: allStoreFixtures)
    func rollbackDiscardsInsertsDeletesAndUpdates(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let ada = try context.makePerson("Ada", age: 36)
        let bob = try context.makePerson("Bob", age: 20)
        try context.save()

        try ada.setValue(99, forKey: "age")
        context.delete(bob)
        let cy = try context.makePerson("Cy")
        context.rollback()
        #expect(!context.hasChanges)
        #expect(try ada.value(forKey: "age") == .int16(36))
        #expect(!bob.isDeleted)
        #expect(cy.managedObjectContext == nil && context.registeredObject(for: cy.objectID) == nil)
        #expect(try context.names(.make("Person", sortedBy: ["name"])) == ["Ada", "Bob"])
    }

    @Test(arguments: allStoreFixtures)
    func objectsThatOutliveTheirContextSeeNoContext(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let writer = stack.context()
        for name in ["Ada", "Bob", "Cy"] { try writer.makePerson(name) }
        try writer.save()

        // A fetched fault, a loaded object and an unsaved insert, kept past their context;
        // the context also holds objects of its own (the insert) that go with it.
        var fault: ManagedObject?
        var loaded: ManagedObject?
        var inserted: ManagedObject?
        do {
            let context = stack.context()
            var request = FetchRequest(entityName: "Person")
            request.sortDescriptors = [FetchSortDescriptor(keyPath: "name")]
            let people = try context.fetch(request)
            #expect(people.count == 3)
            fault = people[0]
            loaded = people[1]
            #expect(try loaded?.value(forKey: "name") == "Bob")
            inserted = try context.makePerson("Dee")
            #expect(fault?.managedObjectContext === context && fault?.isFault == true)
        }
        #expect(fault?.managedObjectContext == nil && loaded?.managedObjectContext == nil && inserted?.managedObjectContext == nil)
        // A fault whose context is gone cannot load (Core Data: an inaccessible object); a
        // loaded object keeps the values it has.
        #expect(throws: ObjectGraphError.self) { try fault?.value(forKey: "name") }
        #expect(try loaded?.value(forKey: "name") == "Bob")
        // Letting them go afterwards touches no context.
        fault = nil
        loaded = nil
        inserted = nil
        #expect(try stack.context().count(for: FetchRequest(entityName: "Person")) == 3)
    }

    @Test(arguments: allStoreFixtures)
    func resetForgetsEveryObject(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let ada = try context.makePerson("Ada")
        try context.save()
        try ada.setValue(99, forKey: "age")
        try context.makePerson("Unsaved")
        context.reset()
        #expect(!context.hasChanges && context.registeredObjects.isEmpty)
        #expect(ada.managedObjectContext == nil)
        let fresh = try #require(try context.fetch(FetchRequest(entityName: "Person")).first)
        #expect(fresh !== ada)
        #expect(try fresh.value(forKey: "age") == .int16(30))
    }

    @Test(arguments: allStoreFixtures)
    func refreshWithoutMergeDiscardsChangesAndReloads(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let ada = try context.makePerson("Ada", age: 36)
        try context.save()

        let other = stack.context()
        try other.existingObject(with: ada.objectID).setValue("Ada L.", forKey: "name")
        try other.save()

        try ada.setValue(99, forKey: "age")
        (ada as? Person)?.nickname = "A"
        context.refresh(ada, mergeChanges: false)
        #expect(ada.isFault && !ada.hasChanges && context.updatedObjects.isEmpty)
        #expect(try ada.value(forKey: "name") == "Ada L.")
        #expect(try ada.value(forKey: "age") == .int16(36))
        #expect((ada as? Person)?.nickname == nil, "transient values are released")
    }

    @Test(arguments: allStoreFixtures)
    func refreshWithMergeKeepsLocalChangesOverNewStoreValues(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let ada = try context.makePerson("Ada", age: 36)
        try context.save()
        let other = stack.context()
        try other.existingObject(with: ada.objectID).setValue("Ada L.", forKey: "name")
        try other.save()

        try ada.setValue(99, forKey: "age")
        (ada as? Person)?.nickname = "A"
        context.refresh(ada, mergeChanges: true)
        #expect(!ada.isFault)
        #expect(try ada.value(forKey: "name") == "Ada L.")
        #expect(try ada.value(forKey: "age") == .int16(99))
        #expect(ada.changedValues() == ["age": .attribute(.int16(99))])
        #expect((ada as? Person)?.nickname == "A", "transient values are kept")
        try context.save()
        let stored = try stack.context().existingObject(with: ada.objectID)
        #expect(try stored.value(forKey: "name") == "Ada L." && stored.value(forKey: "age") == .int16(99))
    }

    @Test(arguments: allStoreFixtures)
    func stalenessIntervalDecidesWhetherCachedValuesAreReused(fixture: any StoreFixture) throws {
        guard fixture.supportsReopen else { return }
        let stack = try fixture.makeStack(model: try TestModel.make())
        // An atomic store reads its file once, when added: its nodes are the store, and
        // another coordinator's saves to the file are not seen (seed 004).
        guard !(stack.store is AtomicStore) else { return }
        let context = stack.context()
        let ada = try context.makePerson("Ada")
        try context.save()
        context.refresh(ada, mergeChanges: false)
        #expect(try ada.value(forKey: "name") == "Ada")  // cached by this coordinator

        // Another coordinator (another process, in effect) changes the row.
        let elsewhere = try fixture.reopen(stack).context()
        try elsewhere.existingObject(with: ada.objectID).setValue("Ada L.", forKey: "name")
        try elsewhere.save()

        context.refresh(ada, mergeChanges: false)
        #expect(try ada.value(forKey: "name") == "Ada", "infinite staleness reuses the cached row")
        context.stalenessInterval = 0
        context.refresh(ada, mergeChanges: false)
        #expect(try ada.value(forKey: "name") == "Ada L.", "zero staleness goes back to the store")

        // A bounded interval reuses the row read just now, then a store read when it is too old.
        context.stalenessInterval = 3_600
        context.refresh(ada, mergeChanges: false)
        #expect(try ada.value(forKey: "name") == "Ada L.")
        try elsewhere.existingObject(with: ada.objectID).setValue("Countess", forKey: "name")
        try elsewhere.save()
        context.refresh(ada, mergeChanges: false)
        #expect(try ada.value(forKey: "name") == "Ada L.", "a row younger than the interval is reused")
        context.stalenessInterval = 1e-9
        context.refresh(ada, mergeChanges: false)
        #expect(try ada.value(forKey: "name") == "Countess", "an older row is read again")
    }

    @Test(arguments: allStoreFixtures)
    func obtainPermanentIDsKeepsObjectInserted(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let ada = try context.makePerson("Ada")
        let temporary = ada.objectID
        try context.obtainPermanentIDs(for: [ada])
        #expect(!ada.objectID.isTemporaryID && ada.isInserted)
        #expect(context.registeredObject(for: ada.objectID) === ada)
        #expect(context.registeredObject(for: temporary) == nil)
        try context.save()
        #expect(try stack.read { try $0.existingObject(with: ada.objectID).value(forKey: "name") } == "Ada")
    }

    @Test(arguments: allStoreFixtures)
    func lifecycleHooksRun(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let ada = try #require(try context.makePerson("Ada") as? Person)
        try context.save()
        #expect(ada.saves == 1)
        context.delete(ada)
        context.processPendingChanges()
        #expect(ada.deletionsPrepared == 1)
        try context.save()
        #expect(ada.saves == 2)
        #expect(ada.managedObjectContext == nil && !ada.isDeleted)
    }

    @Test(arguments: allStoreFixtures)
    func typedPropertiesReadAndWrite(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let ada = try Person(context: context)
        ada.name = "Ada"
        ada.age = 36
        #expect(ada.name == "Ada" && ada.age == 36)
        try context.save()
        let fetched = try context.fetch(FetchRequest(entityName: "Person"), as: Person.self)
        #expect(fetched.first?.name == "Ada")
        #expect(ada.lastAccessError == nil)
    }

    @Test(arguments: allStoreFixtures)
    func objectCreatedOutsideAContextCanBeFilledThenInserted(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let entity = try stack.coordinator.managedObjectModel.entity(named: "Person")
        let ada = ManagedObject(entity: entity, insertInto: nil)
        #expect(!ada.isFault && !ada.isInserted)
        #expect(try ada.value(forKey: "age") == .int16(0), "defaults apply at creation")
        try ada.setValue("Ada", forKey: "name")
        let context = stack.context()
        try context.insert(ada)
        #expect(throws: ObjectGraphError.self) { try stack.context().insert(ada) }
        #expect(ada.isInserted && context.insertedObjects == [ada])
        try context.save()
        #expect(try stack.read { try $0.existingObject(with: ada.objectID).value(forKey: "name") } == "Ada")
    }
}

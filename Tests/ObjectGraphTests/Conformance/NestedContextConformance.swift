import Foundation
import ObjectGraph
import Testing

/// Parent and child contexts (Core Data's nested contexts), against every store.
@Suite("Conformance: parent and child contexts")
struct NestedContextConformance {
    /// A parent on a store holding Ada (30), Bob (40) and Cy (50), saved.
    private func parentWithThreePeople(_ fixture: any StoreFixture) throws -> (TestStack, ManagedObjectContext) {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let parent = stack.context()
        try parent.makePerson("Ada", age: 30)
        try parent.makePerson("Bob", age: 40)
        try parent.makePerson("Cy", age: 50)
        try parent.save()
        return (stack, parent)
    }

    private func child(of parent: ManagedObjectContext) -> ManagedObjectContext {
        let child = ManagedObjectContext(concurrencyType: .confinement)
        child.parent = parent
        return child
    }

    private func person(_ name: String, in context: ManagedObjectContext) throws -> ManagedObject {
        try #require(try context.fetch(.make("Person", .equal("name", .string(name)))).first)
    }

    @Test(arguments: allStoreFixtures)
    func aChildFetchSeesItsParentsUnsavedInsertsUpdatesAndDeletes(fixture: any StoreFixture) throws {
        let (stack, parent) = try parentWithThreePeople(fixture)
        try person("Ada", in: parent).setValue(.int16(31), forKey: "age")
        parent.delete(try person("Bob", in: parent))
        try parent.makePerson("Dee", age: 60)
        let child = child(of: parent)
        #expect(child.persistentStoreCoordinator === stack.coordinator)
        #expect(try child.names(.make("Person", sortedBy: ["name"])) == ["Ada", "Cy", "Dee"])
        #expect(try child.count(for: .make("Person")) == 3)
        #expect(try child.names(.make("Person", .lessThan("age", .int16(40)))) == ["Ada"], "matched on the parent's unsaved age")
        let ada = try person("Ada", in: child)
        #expect(try ada.value(forKey: "age") == .int16(31))
        #expect(!ada.hasChanges, "the parent's changes are the child's committed values")
        let dee = try person("Dee", in: child)
        #expect(dee.objectID.isTemporaryID, "the parent's insert keeps its temporary ID")
        #expect(try dee.value(forKey: "age") == .int16(60))
        #expect(try child.existingObject(with: dee.objectID) === dee)
        #expect(try stack.read { try $0.count(for: .make("Person")) } == 3, "nothing of the parent's reached the store")
    }

    @Test(arguments: allStoreFixtures)
    func aChildFetchesLoadedObjectsAndPrefetchesThroughItsParent(fixture: any StoreFixture) throws {
        let (_, parent) = try parentWithThreePeople(fixture)
        let sales = try parent.makeDepartment("Sales")
        try person("Ada", in: parent).setValue(sales, forKey: "department")
        try person("Ada", in: parent).setValue(.int16(31), forKey: "age")
        let child = child(of: parent)
        var request = FetchRequest.make("Person", sortedBy: ["name"])
        request.returnsObjectsAsFaults = false
        request.relationshipKeyPathsForPrefetching = ["department"]
        let people = try child.fetch(request)
        #expect(people.count == 3)
        #expect(people.allSatisfy { !$0.isFault }, "loaded by the fetch, from the parent")
        #expect(try people[0].value(forKey: "age") == .int16(31), "the parent's unsaved value")
        let department = try #require(try people[0].object(forKey: "department"))
        #expect(!department.isFault, "prefetched from the parent")
        #expect(department.objectID == sales.objectID && sales.objectID.isTemporaryID)
        #expect(try department.value(forKey: "name") == .string("Sales"))
    }

    @Test(arguments: allStoreFixtures)
    func aChildSaveIsAnEventOfItsParent(fixture: any StoreFixture) throws {
        let (_, parent) = try parentWithThreePeople(fixture)
        let dee = try parent.makePerson("Dee")
        parent.processPendingChanges()
        let recorder = NotificationRecorder(ManagedObjectContext.objectsDidChangeNotification, from: parent)
        let child = child(of: parent)
        try child.makePerson("Eve")
        try person("Bob", in: child).setValue(.int16(44), forKey: "age")
        child.delete(child.object(with: dee.objectID))
        try child.save()
        let change = try #require(recorder.last)
        #expect(try change.inserted.map { try $0.value(forKey: "name") } == [.string("Eve")])
        #expect(try change.updated.map { try $0.value(forKey: "name") } == [.string("Bob")])
        #expect(change.deleted == [dee], "inserted in an earlier event of the parent")
        #expect(parent.insertedObjects.count == 1, "Dee, inserted and then deleted in the parent, is forgotten")
        #expect(dee.managedObjectContext == nil)
    }

    @Test(arguments: allStoreFixtures)
    func aRefreshedChildObjectReadsItsParentsCurrentValues(fixture: any StoreFixture) throws {
        let (_, parent) = try parentWithThreePeople(fixture)
        let child = child(of: parent)
        let ada = try person("Ada", in: child)
        #expect(try ada.value(forKey: "age") == .int16(30))
        try person("Ada", in: parent).setValue(.int16(33), forKey: "age")
        #expect(try ada.value(forKey: "age") == .int16(30), "a loaded object keeps its values")
        child.refresh(ada, mergeChanges: false)
        #expect(ada.isFault)
        #expect(try ada.value(forKey: "age") == .int16(33), "the parent's unsaved value, not the old row")
        try person("Ada", in: parent).setValue(.int16(34), forKey: "age")
        try ada.setValue("ada@example.com", forKey: "email")
        child.refresh(ada, mergeChanges: true)
        #expect(try ada.value(forKey: "age") == .int16(34))
        #expect(try ada.value(forKey: "email") == .string("ada@example.com"))
    }

    @Test(arguments: allStoreFixtures)
    func aChildSavePushesIntoItsParentOnlyUntilTheParentSaves(fixture: any StoreFixture) throws {
        let (stack, parent) = try parentWithThreePeople(fixture)
        let child = child(of: parent)
        try child.makePerson("Eve", age: 20)
        try person("Cy", in: child).setValue(.int16(51), forKey: "age")
        child.delete(try person("Ada", in: child))
        try child.save()
        #expect(!child.hasChanges)

        #expect(try stack.read { try $0.names(.make("Person", sortedBy: ["name"])) } == ["Ada", "Bob", "Cy"], "the store is untouched")
        #expect(parent.hasChanges)
        #expect(parent.insertedObjects.count == 1)
        #expect(parent.updatedObjects.count == 1)
        #expect(parent.deletedObjects.count == 1)
        #expect(try parent.names(.make("Person", sortedBy: ["name"])) == ["Bob", "Cy", "Eve"])
        #expect(try person("Cy", in: parent).value(forKey: "age") == .int16(51))

        try parent.save()
        #expect(try stack.read { try $0.names(.make("Person", sortedBy: ["name"])) } == ["Bob", "Cy", "Eve"])
        #expect(try stack.read { try person("Cy", in: $0).value(forKey: "age") } == .int16(51))
    }

    @Test(arguments: allStoreFixtures)
    func relationshipsAndDeleteRulesCrossTheChain(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let parent = stack.context()
        let sales = try parent.makeDepartment("Sales")
        try parent.save()
        let child = child(of: parent)
        let childSales = child.object(with: sales.objectID)
        let ada = try child.makePerson("Ada")
        try ada.setValue(childSales, forKey: "department")
        #expect(try childSales.objects(forKey: "employees") == [ada], "the inverse is kept in the child")
        try child.save()
        try parent.save()
        #expect(try stack.read { try $0.names(.make("Person", .equal("department.name", "Sales"))) } == ["Ada"])

        // A cascade in a child deletes the employees in the parent too.
        let second = self.child(of: parent)
        second.delete(second.object(with: sales.objectID))
        try second.save()
        #expect(parent.deletedObjects.count == 2, "the department and, by cascade, its employee")
        try parent.save()
        #expect(try stack.read { try $0.count(for: .make("Person")) } == 0)
        #expect(try stack.read { try $0.count(for: .make("Department")) } == 0)
    }

    @Test(arguments: allStoreFixtures)
    func temporaryIDsBecomePermanentDownTheChainWhenTheRootSaves(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let parent = stack.context()
        let child = child(of: parent)
        let eve = try child.makePerson("Eve")
        let temporary = eve.objectID
        try child.save()
        #expect(eve.objectID == temporary && temporary.isTemporaryID, "saving into a parent keeps the temporary ID")
        let parentEve = try #require(parent.registeredObject(for: temporary))
        #expect(parentEve.isInserted)

        try parent.save()
        #expect(!parentEve.objectID.isTemporaryID)
        child.processPendingChanges()
        #expect(eve.objectID == parentEve.objectID, "the child took the permanent ID from the parent's save")
        #expect(child.registeredObject(for: parentEve.objectID) === eve)
        try eve.setValue(.int16(33), forKey: "age")
        try child.save()
        try parent.save()
        #expect(try stack.read { try $0.existingObject(with: parentEve.objectID).value(forKey: "age") } == .int16(33))
    }

    @Test(arguments: allStoreFixtures)
    func obtainingPermanentIDsInAChildReachesTheStoreAndTheParent(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let parent = stack.context()
        let child = child(of: parent)
        let eve = try child.makePerson("Eve")
        let fay = try child.makePerson("Fay")
        try child.obtainPermanentIDs(for: [eve])
        #expect(!eve.objectID.isTemporaryID)
        try child.save()
        #expect(parent.registeredObject(for: eve.objectID)?.isInserted == true)
        // Fay went up with a temporary ID; obtaining hers now re-keys the parent's object too.
        try child.obtainPermanentIDs(for: [fay])
        #expect(!fay.objectID.isTemporaryID)
        #expect(parent.registeredObject(for: fay.objectID)?.isInserted == true)
        try parent.save()
        #expect(try stack.read { try $0.existingObject(with: eve.objectID).value(forKey: "name") } == .string("Eve"))
        #expect(try stack.read { try $0.existingObject(with: fay.objectID).value(forKey: "name") } == .string("Fay"))
    }

    @Test(arguments: allStoreFixtures)
    func grandchildrenSaveThroughEachLevel(fixture: any StoreFixture) throws {
        let (stack, parent) = try parentWithThreePeople(fixture)
        let child = child(of: parent)
        let grandchild = self.child(of: child)
        try grandchild.makePerson("Gus", age: 70)
        try person("Bob", in: grandchild).setValue(.int16(41), forKey: "age")
        try grandchild.save()
        #expect(!parent.hasChanges, "a grandchild's save stops at its parent")
        #expect(try child.names(.make("Person", sortedBy: ["name"])) == ["Ada", "Bob", "Cy", "Gus"])
        try child.save()
        #expect(try parent.count(for: .make("Person")) == 4)
        #expect(try stack.read { try $0.count(for: .make("Person")) } == 3)
        try parent.save()
        #expect(try stack.read { try $0.names(.make("Person", .greaterThan("age", .int16(40)), sortedBy: ["name"])) } == ["Bob", "Cy", "Gus"])
    }

    @Test(arguments: allStoreFixtures)
    func discardingAChildDiscardsItsChanges(fixture: any StoreFixture) throws {
        let (stack, parent) = try parentWithThreePeople(fixture)
        do {
            let child = child(of: parent)
            try child.makePerson("Zed")
            try person("Ada", in: child).setValue(.int16(99), forKey: "age")
        }
        let child = child(of: parent)
        try child.makePerson("Zed")
        child.rollback()
        try child.save()
        #expect(!parent.hasChanges)
        #expect(try person("Ada", in: parent).value(forKey: "age") == .int16(30))
        try parent.save()
        #expect(try stack.read { try $0.count(for: .make("Person")) } == 3)
    }

    @Test(arguments: allStoreFixtures)
    func aChildThatMergesAutomaticallySeesItsParentsSaveUnderItsOwnChanges(fixture: any StoreFixture) throws {
        let (_, parent) = try parentWithThreePeople(fixture)
        let child = child(of: parent)
        child.automaticallyMergesChangesFromParent = true
        let ada = try person("Ada", in: child)
        #expect(try ada.value(forKey: "age") == .int16(30))
        let cy = try person("Cy", in: child)
        try cy.setValue("cy@example.com", forKey: "email")

        try person("Ada", in: parent).setValue(.int16(35), forKey: "age")
        try person("Cy", in: parent).setValue(.int16(55), forKey: "age")
        try parent.save()
        let recorder = NotificationRecorder(ManagedObjectContext.objectsDidChangeNotification, from: child)
        child.processPendingChanges()
        #expect(try ada.value(forKey: "age") == .int16(35))
        #expect(try cy.value(forKey: "age") == .int16(55))
        #expect(try cy.value(forKey: "email") == .string("cy@example.com"), "the unsaved change stays on top")
        #expect(cy.hasChanges)
        #expect(recorder.last?.refreshed.contains(ada) == true)

        // A child that does not merge keeps what it loaded.
        let other = self.child(of: parent)
        let otherAda = try person("Ada", in: other)
        #expect(try otherAda.value(forKey: "age") == .int16(35))
        try person("Ada", in: parent).setValue(.int16(36), forKey: "age")
        try parent.save()
        other.processPendingChanges()
        #expect(try otherAda.value(forKey: "age") == .int16(35))
    }
}

/// Merging one context's saves into another (seed 003), against every store.
@Suite("Conformance: merging saves")
struct MergeConformance {
    @Test(arguments: allStoreFixtures)
    func mergingADidSaveNotificationRefreshesInsertsAndDeletes(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let writer = stack.context()
        let ada = try writer.makePerson("Ada", age: 30)
        let bob = try writer.makePerson("Bob", age: 40)
        try writer.save()

        let reader = stack.context()
        let readerAda = try reader.existingObject(with: ada.objectID)
        let readerBob = try reader.existingObject(with: bob.objectID)
        try readerAda.setValue("ada@example.com", forKey: "email")

        let saves = NotificationRecorder(ManagedObjectContext.didSaveObjectsNotification, from: writer)
        let idSaves = NotificationRecorder(ManagedObjectContext.didSaveObjectIDsNotification, from: writer)
        try ada.setValue(.int16(31), forKey: "age")
        writer.delete(bob)
        let cy = try writer.makePerson("Cy", age: 50)
        try writer.save()
        let saved = try #require(saves.last)
        #expect(saved.insertedObjectIDs == [cy.objectID])
        #expect(saved.updatedObjectIDs == [ada.objectID])
        #expect(saved.deletedObjectIDs == [bob.objectID])
        #expect(idSaves.last?.insertedObjectIDs == [cy.objectID])
        #expect(idSaves.last?.inserted.isEmpty == true, "the ID notification carries no objects")

        let changes = NotificationRecorder(ManagedObjectContext.objectsDidChangeNotification, from: reader)
        reader.mergeChanges(fromContextDidSave: try #require(idSaves.received.last))
        #expect(try readerAda.value(forKey: "age") == .int16(31))
        #expect(try readerAda.value(forKey: "email") == .string("ada@example.com"), "unsaved changes stay on top")
        #expect(readerBob.managedObjectContext == nil, "a deleted object leaves the context")
        let readerCy = try #require(reader.registeredObject(for: cy.objectID))
        #expect(try readerCy.value(forKey: "name") == .string("Cy"))
        let change = try #require(changes.last)
        #expect(change.refreshed == [readerAda])
        #expect(change.deleted == [readerBob])
        #expect(change.inserted == [readerCy])
        try reader.save()
        #expect(try stack.read { try $0.existingObject(with: ada.objectID).value(forKey: "email") } == .string("ada@example.com"))
        #expect(try stack.read { try $0.existingObject(with: ada.objectID).value(forKey: "age") } == .int16(31))
    }

    @Test(arguments: allStoreFixtures)
    func remoteChangesMergeByIDOrURI(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let writer = stack.context()
        let ada = try writer.makePerson("Ada", age: 30)
        try writer.save()
        let first = stack.context()
        let second = stack.context()
        let firstAda = try first.existingObject(with: ada.objectID)
        let secondAda = try second.existingObject(with: ada.objectID)
        try ada.setValue(.int16(44), forKey: "age")
        try writer.save()
        #expect(try firstAda.value(forKey: "age") == .int16(30), "nothing merged yet")
        ManagedObjectContext.mergeChanges(
            fromRemoteContextSave: [ManagedObjectContext.NotificationKey.updatedObjects.rawValue: [ada.objectID.uriRepresentation()]],
            into: [first])
        ManagedObjectContext.mergeChanges(
            fromRemoteContextSave: [ManagedObjectContext.NotificationKey.updatedObjectIDs.rawValue: [ada.objectID]],
            into: [second])
        #expect(try firstAda.value(forKey: "age") == .int16(44))
        #expect(try secondAda.value(forKey: "age") == .int16(44))
    }

    @Test(arguments: allStoreFixtures)
    func refreshAllObjectsFaultsUnchangedObjectsAndKeepsChanges(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let writer = stack.context()
        let ada = try writer.makePerson("Ada", age: 30)
        let bob = try writer.makePerson("Bob", age: 40)
        try writer.save()
        let reader = stack.context()
        let readerAda = try reader.existingObject(with: ada.objectID)
        let readerBob = try reader.existingObject(with: bob.objectID)
        try readerBob.setValue("bob@example.com", forKey: "email")
        try ada.setValue(.int16(31), forKey: "age")
        try bob.setValue(.int16(41), forKey: "age")
        try writer.save()
        reader.refreshAllObjects()
        #expect(readerAda.isFault)
        #expect(!readerBob.isFault)
        #expect(try readerAda.value(forKey: "age") == .int16(31))
        #expect(try readerBob.value(forKey: "age") == .int16(41))
        #expect(try readerBob.value(forKey: "email") == .string("bob@example.com"))
    }

    @Test(arguments: allStoreFixtures)
    func contextsOnACoordinatorMergeEachOthersSavesWhenAsked(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let writer = stack.context()
        let ada = try writer.makePerson("Ada", age: 30)
        try writer.save()
        let merging = stack.context()
        merging.automaticallyMergesChangesFromParent = true
        let bystander = stack.context()
        let mergingAda = try merging.existingObject(with: ada.objectID)
        let bystanderAda = try bystander.existingObject(with: ada.objectID)
        try ada.setValue(.int16(32), forKey: "age")
        try writer.save()
        merging.processPendingChanges()
        bystander.processPendingChanges()
        #expect(try mergingAda.value(forKey: "age") == .int16(32))
        #expect(try bystanderAda.value(forKey: "age") == .int16(30), "a context that does not merge keeps its values")
        merging.automaticallyMergesChangesFromParent = false
        try ada.setValue(.int16(33), forKey: "age")
        try writer.save()
        merging.processPendingChanges()
        #expect(try mergingAda.value(forKey: "age") == .int16(32))
    }
}

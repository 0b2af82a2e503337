import Foundation
import ObjectGraph
import Testing

@Suite("Conformance: notifications")
struct NotificationConformance {
    @Test(arguments: allStoreFixtures)
    func objectsDidChangeReportsTheEvent(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let ada = try context.makePerson("Ada")
        let bob = try context.makePerson("Bob")
        try context.save()

        let recorder = NotificationRecorder(ManagedObjectContext.objectsDidChangeNotification, from: context)
        let cy = try context.makePerson("Cy")
        try ada.setValue(40, forKey: "age")
        context.delete(bob)
        context.processPendingChanges()
        #expect(recorder.received.count == 1)
        let change = try #require(recorder.last)
        #expect(change.inserted == [cy])
        #expect(change.updated == [ada])
        #expect(change.deleted == [bob])
        context.processPendingChanges()
        #expect(recorder.received.count == 1, "an empty event posts nothing")

        context.refresh(ada, mergeChanges: false)
        context.processPendingChanges()
        #expect(recorder.last?.refreshed == [ada])

        context.reset()
        #expect(recorder.last?.invalidatedAll?.contains(ada.objectID) == true)
    }

    @Test(arguments: allStoreFixtures)
    func anUnsavedInsertDeletedInALaterEventIsReportedDeleted(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let recorder = NotificationRecorder(ManagedObjectContext.objectsDidChangeNotification, from: context)
        let cy = try context.makePerson("Cy")
        context.processPendingChanges()
        #expect(recorder.last?.inserted == [cy])
        context.delete(cy)
        context.processPendingChanges()
        #expect(recorder.received.count == 2)
        #expect(recorder.last?.deleted == [cy], "observers told of the insert are told it is gone")
        #expect(recorder.last?.inserted.isEmpty == true)
        #expect(!context.hasChanges && context.deletedObjects.isEmpty && context.insertedObjects.isEmpty)

        // Inserted and deleted within one event: in neither set, and no notification.
        let dee = try context.makePerson("Dee")
        context.delete(dee)
        context.processPendingChanges()
        #expect(recorder.received.count == 2)
        let saves = NotificationRecorder(ManagedObjectContext.didSaveObjectsNotification, from: context)
        try context.save()
        #expect(saves.received.isEmpty, "nothing to save")
    }

    @Test(arguments: allStoreFixtures)
    func saveNotificationsCarryInsertedUpdatedAndDeletedObjects(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let ada = try context.makePerson("Ada")
        let bob = try context.makePerson("Bob")
        try context.save()

        let willSave = NotificationRecorder(ManagedObjectContext.willSaveObjectsNotification, from: context)
        let didSave = NotificationRecorder(ManagedObjectContext.didSaveObjectsNotification, from: context)
        let cy = try context.makePerson("Cy")
        try ada.setValue(40, forKey: "age")
        context.delete(bob)
        try context.save()
        #expect(willSave.received.count == 1)
        #expect(willSave.received.first?.userInfo == nil)
        let saved = try #require(didSave.last)
        #expect(saved.context === context)
        #expect(saved.inserted == [cy] && saved.updated == [ada] && saved.deleted == [bob])
        #expect(!cy.objectID.isTemporaryID, "inserted objects carry their permanent IDs")

        try context.save()
        #expect(didSave.received.count == 1, "a save without changes posts nothing")
    }

    @Test(arguments: allStoreFixtures)
    func failedSavePostsNoDidSave(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let didSave = NotificationRecorder(ManagedObjectContext.didSaveObjectsNotification, from: context)
        _ = try context.insertNewObject(forEntityName: "Person")
        #expect(throws: ObjectGraphError.self) { try context.save() }
        #expect(didSave.received.isEmpty)
    }

    @Test(arguments: allStoreFixtures)
    func objectWhoseRowVanishedIsReportedInvalidated(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let writer = stack.context()
        let ada = try writer.makePerson("Ada")
        try writer.save()

        let context = stack.context()
        let fault = context.object(with: ada.objectID)
        writer.delete(ada)
        try writer.save()

        let recorder = NotificationRecorder(ManagedObjectContext.objectsDidChangeNotification, from: context)
        #expect(throws: ObjectGraphError.self) { try fault.value(forKey: "name") }
        context.processPendingChanges()
        #expect(recorder.last?.invalidated == [fault])
    }
}

import Foundation
import ObjectGraph
import Testing

@Suite("Conformance: delete rules")
struct DeleteRuleConformance {
    @Test(arguments: allStoreFixtures)
    func nullifyRemovesDeletedObjectFromInverse(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let sales = try context.makeDepartment("Sales")
        let ada = try context.makePerson("Ada")
        let bob = try context.makePerson("Bob")
        try sales.setValue([ada, bob], forKey: "employees")
        try context.save()

        context.delete(ada)
        context.processPendingChanges()
        #expect(try sales.objects(forKey: "employees") == [bob])
        try context.save()
        let reader = stack.context()
        #expect(try reader.existingObject(with: sales.objectID).objects(forKey: "employees").map(\.objectID) == [bob.objectID])
        #expect(try reader.count(for: FetchRequest(entityName: "Person")) == 1)
    }

    @Test(arguments: allStoreFixtures)
    func cascadeDeletesDestinations(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let sales = try context.makeDepartment("Sales")
        let ada = try context.makePerson("Ada")
        try sales.setValue([ada], forKey: "employees")
        let badge = try context.insertNewObject(forEntityName: "Badge")
        try ada.setValue(badge, forKey: "badge")
        try context.save()

        context.delete(sales)
        context.processPendingChanges()
        #expect(ada.isDeleted && badge.isDeleted, "cascade goes two levels: department → person → badge")
        #expect(context.deletedObjects == [sales, ada, badge])
        try context.save()
        let reader = stack.context()
        for entity in ["Department", "Person", "Badge"] {
            #expect(try reader.count(for: FetchRequest(entityName: entity)) == 0, "\(entity)")
        }
    }

    @Test(arguments: allStoreFixtures)
    func denyBlocksSaveWhileDestinationsRemain(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let sales = try context.makeDepartment("Sales")
        let project = try context.insertNewObject(forEntityName: "Project")
        try project.setValue(sales, forKey: "department")
        try context.save()

        context.delete(sales)
        do {
            try context.save()
            Issue.record("deny rule did not block the save")
        } catch let error as ObjectGraphError {
            #expect(error.code == .deleteDenied)
            #expect(error.key == "projects")
        }
        #expect(sales.isDeleted && context.hasChanges, "the failed save leaves changes pending")
        #expect(try stack.context().count(for: FetchRequest(entityName: "Department")) == 1)

        context.delete(project)
        try context.save()
        #expect(try stack.context().count(for: FetchRequest(entityName: "Department")) == 0)
    }

    @Test(arguments: allStoreFixtures)
    func noActionLeavesDestinationsPointingAtDeletedObject(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let ada = try context.makePerson("Ada")
        let note = try context.insertNewObject(forEntityName: "Note")
        try note.setValue(ada, forKey: "author")
        try context.save()

        context.delete(ada)
        try context.save()
        #expect(!note.isDeleted)
        #expect(try note.objectIDs(forRelationshipNamed: "author") == [ada.objectID])
        let reader = stack.context()
        let stored = try reader.existingObject(with: note.objectID)
        let author = try #require(try stored.object(forKey: "author"))
        #expect(throws: ObjectGraphError.self) { try author.value(forKey: "name") }
    }

    @Test(arguments: allStoreFixtures)
    func objectInsertedThenDeletedNeverReachesStore(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let ada = try context.makePerson("Ada")
        context.delete(ada)
        #expect(context.insertedObjects.isEmpty && context.deletedObjects.isEmpty)
        context.processPendingChanges()
        #expect(ada.managedObjectContext == nil)
        #expect(!context.hasChanges)
        try context.save()
        #expect(try stack.context().count(for: FetchRequest(entityName: "Person")) == 0)
    }

    @Test(arguments: allStoreFixtures)
    func deferredPropagationHappensAtSave(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        context.propagatesDeletesAtEndOfEvent = false
        let sales = try context.makeDepartment("Sales")
        let ada = try context.makePerson("Ada")
        try ada.setValue(sales, forKey: "department")
        try context.save()

        context.delete(sales)
        context.processPendingChanges()
        #expect(!ada.isDeleted, "not propagated at end of event")
        try context.save()
        #expect(try stack.context().count(for: FetchRequest(entityName: "Person")) == 0)
        #expect((ada as? Person)?.deletionsPrepared == 1)
    }
}

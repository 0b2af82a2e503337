import Foundation
import ObjectGraph
@testable import Strata
import Testing

/// [REL-5] Firing a to-many relationship to make its objects reads the destinations' rows
/// along, as Core Data's SQLite store fills its row cache when a to-many fault fires: the
/// destinations come back as faults holding their rows, which they fire from while no save
/// came through their coordinator. A second coordinator on the same store changes rows
/// behind the first one's back, which tells a fault that fired from the row it was given
/// from one that read the store.
@Suite struct MemberRowsTests {
    /// An owner with three items (a keyed one-to-many) and two of them ranked (an ordered
    /// to-many, a list in the owner's row), saved; the owner's ID.
    static func populate(_ coordinator: PersistentStoreCoordinator) throws -> ManagedObjectID {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let owner = try context.insertNewObject(forEntityName: "Owner")
        try owner.setValue(.string("o"), forKey: "name")
        var items: [ManagedObject] = []
        for name in ["i1", "i2", "i3"] {
            let item = try context.insertNewObject(forEntityName: "Item")
            try item.setValue(.string(name), forKey: "name")
            try item.setValue(owner, forKey: "owner")
            items.append(item)
        }
        try owner.setValue([items[2], items[0]], forKey: "ranked")
        try context.save()
        return owner.objectID
    }

    /// A new store with ``populate(_:)``'s objects saved, its model, a coordinator on it and the owner's ID.
    static func saved() throws -> (TemporaryStore, ManagedObjectModel, PersistentStoreCoordinator, ManagedObjectID) {
        let store = TemporaryStore()
        let model = try RelationshipKeyTests.model()
        let coordinator = try store.coordinator(model: model)
        return (store, model, coordinator, try populate(coordinator))
    }

    /// Renames every item through `coordinator` (`name` + `suffix`).
    static func renameItems(_ coordinator: PersistentStoreCoordinator, suffix: String) throws {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for item in try context.fetch(FetchRequest(entityName: "Item")) {
            let name = try item.value(forKey: "name").stringValue ?? "?"
            try item.setValue(.string(name + suffix), forKey: "name")
        }
        try context.save()
    }

    static func names(_ objects: [ManagedObject]) throws -> [String] {
        try objects.map { try $0.value(forKey: "name").stringValue ?? "?" }
    }

    @Test func firingAToManyGivesItsDestinationsTheirRows() throws {
        let (store, model, coordinator, ownerID) = try Self.saved()
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let owner = try context.existingObject(with: ownerID)
        let items = try owner.objects(forKey: "items")
        let ranked = try owner.objects(forKey: "ranked")
        #expect(items.count == 3 && ranked.count == 2)
        #expect(items.allSatisfy(\.isFault) && ranked.allSatisfy(\.isFault), "the destinations are faults, as Core Data returns them")
        // A fault made for the same row by ID alone, in another context, reads the store.
        let control = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let controlItems = items.map { control.object(with: $0.objectID) }

        try Self.renameItems(try store.coordinator(model: model), suffix: "+")

        // Fired from the rows read with the relationship (no save through this coordinator since).
        #expect(Set(try Self.names(items)) == ["i1", "i2", "i3"])
        #expect(try Self.names(ranked) == ["i3", "i1"], "an ordered to-many keeps its order")
        #expect(Set(try Self.names(controlItems)) == ["i1+", "i2+", "i3+"])
    }

    @Test func aSaveThroughTheCoordinatorMakesTheRowsStale() throws {
        let (store, model, coordinator, ownerID) = try Self.saved()
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let items = try context.existingObject(with: ownerID).objects(forKey: "items")
        try Self.renameItems(try store.coordinator(model: model), suffix: "+")
        // Any save through this coordinator: rows read before it are read again.
        let other = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        try other.insertNewObject(forEntityName: "Tag").setValue(.string("t"), forKey: "name")
        try other.save()
        #expect(Set(try Self.names(items)) == ["i1+", "i2+", "i3+"])
    }

    @Test func registeredObjectsKeepTheirStateAndFaultsWithoutARowGetOne() throws {
        let (store, model, coordinator, ownerID) = try Self.saved()
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let owner = try context.existingObject(with: ownerID)
        func id(_ name: String) throws -> ManagedObjectID {
            try RelationshipKeyTests.object("Item", name, in: ManagedObjectContext(persistentStoreCoordinator: coordinator)).objectID
        }
        // i1 loaded and changed, i2 a fault made by ID (no row), i3 not registered.
        let loaded = try context.existingObject(with: try id("i1"))
        try loaded.setValue(.string("changed"), forKey: "name")
        let fault = context.object(with: try id("i2"))
        #expect(fault.isFault)

        let members = try owner.objects(forKey: "items")
        #expect(members.count == 3)
        #expect(members.contains { $0 === loaded } && members.contains { $0 === fault }, "one object per ID")
        #expect(try loaded.value(forKey: "name") == .string("changed"), "a changed object keeps its change")

        try Self.renameItems(try store.coordinator(model: model), suffix: "+")
        #expect(try fault.value(forKey: "name") == .string("i2"), "the fault without a row got the one read along")
        #expect(try loaded.value(forKey: "name") == .string("changed"))
    }

    // MARK: Rows by ID (prefetching, later batches)

    @Test func rowsOfIDsComeInTheIDsOrderWithNilForWhatTheStoreDoesNotHold() throws {
        let (store, model, coordinator, ownerID) = try Self.saved()
        let strata = try #require(coordinator.persistentStores.first as? StrataStore)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let items = try context.existingObject(with: ownerID).objects(forKey: "items")
        // References allocated in order: i1 < i2 < i3. Asked for out of that order, with the
        // owner (another entity) in the middle.
        let byName = Dictionary(uniqueKeysWithValues: try items.map { (try $0.value(forKey: "name").stringValue ?? "?", $0.objectID) })
        let asked = [try #require(byName["i3"]), ownerID, try #require(byName["i1"]), try #require(byName["i2"])]
        let rows = try #require(try strata.rows(of: asked))
        #expect(rows.count == 4)
        #expect(zip(rows, asked).allSatisfy { $0?.objectID == $1 }, "each row is its ID's, in the order asked")
        let names = try zip(rows, asked).map { row, id in
            row?.value(for: try id.entity.property(named: "name"))?.attributeValue?.stringValue
        }
        #expect(names == ["i3", "o", "i1", "i2"])

        // A deleted object, a temporary ID and another store's ID get no row; the rest do.
        let other = TemporaryStore()
        let otherCoordinator = try other.coordinator(model: model)
        let foreign = try Self.populate(otherCoordinator)
        let deleter = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        deleter.delete(try deleter.existingObject(with: asked[2]))
        try deleter.save()
        let temporary = try context.insertNewObject(forEntityName: "Item").objectID
        let mixed = try #require(try strata.rows(of: [asked[0], asked[2], temporary, foreign, asked[3]]))
        #expect(mixed.map { $0 != nil } == [true, false, false, false, true])
        #expect(try strata.rows(of: []) == [])
        withExtendedLifetime(store) {}
        withExtendedLifetime(other) {}
    }

    @Test func aStoreSubclassIsNotAskedForRowsByID() throws {
        PersistentStoreCoordinator.registerStoreClass(RacingStrataStore.self, type: RacingStrataStore.type)
        let directory = TemporaryStore()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try RelationshipKeyTests.model())
        let store = try #require(try coordinator.addPersistentStore(type: RacingStrataStore.type, at: directory.url) as? RacingStrataStore)
        let ownerID = try Self.populate(coordinator)
        #expect(try store.rows(of: [ownerID]) == nil, "a subclass may load its faults its own way")
        // Prefetching through it still loads the destinations (by a fetch).
        var request = FetchRequest(entityName: "Item")
        request.relationshipKeyPathsForPrefetching = ["owner"]
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let items = try context.fetch(request)
        #expect(items.count == 3)
        for item in items {
            let owner = try #require(try item.object(forKey: "owner"))
            #expect(!owner.isFault, "prefetched: loaded")
        }
    }
}

import Foundation
import ObjectGraph
import Testing

@Suite("Object IDs")
struct ObjectIDTests {
    @Test func referenceObjectsRoundTripThroughURIComponents() {
        let references: [ReferenceObject] = [.int64(42), .int64(-7), .string("42"), .string("a/b c%"), .uuid(UUID())]
        for reference in references {
            #expect(ReferenceObject(uriComponent: reference.uriComponent) == reference)
        }
        #expect(ReferenceObject.int64(42).uriComponent == "42")
        #expect(ReferenceObject(uriComponent: "x") == nil)
    }

    @Test func permanentURIHasCoreDataForm() throws {
        let model = try TestModel.make()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let store = try #require(try coordinator.addPersistentStore(type: .inMemory) as? IncrementalStore)
        let id = store.newObjectID(for: try model.entity(named: "Person"), referenceObject: .int64(12))
        #expect(id.uriRepresentation().absoluteString == "x-coredata://\(store.identifier)/Person/p12")
        #expect(!id.isTemporaryID)
        #expect(id.persistentStore === store)
        #expect(try store.referenceObject(for: id) == .int64(12))
        #expect(coordinator.managedObjectID(forURIRepresentation: id.uriRepresentation()) == id)
    }

    @Test func idsAreEqualAndHashAlikeExactlyWhenEntityStoreAndReferenceAre() throws {
        // Integer IDs share one home per entity and store; every other kind has its own.
        // Equality and hashing must not depend on which form an ID took.
        let model = try TestModel.make()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let first = try #require(try coordinator.addPersistentStore(type: .inMemory) as? IncrementalStore)
        let second = try #require(try coordinator.addPersistentStore(type: .inMemory) as? IncrementalStore)
        let person = try model.entity(named: "Person"), note = try model.entity(named: "Note")
        let references: [ReferenceObject] = [.int64(0), .int64(1), .int64(-1), .int64(.max), .string("1"), .string(""), .uuid(UUID())]
        var ids: [ManagedObjectID] = [.temporary(for: person), .temporary(for: note)]
        for store in [first, second] {
            for entity in [person, note] {
                for reference in references { ids.append(store.newObjectID(for: entity, referenceObject: reference)) }
            }
        }
        for (i, a) in ids.enumerated() {
            for (j, b) in ids.enumerated() {
                #expect((a == b) == (i == j), "\(a) vs \(b)")
            }
            // A second ID made the same way (or parsed back from its URI) equals it and hashes alike.
            let again = try #require(coordinator.managedObjectID(forURIRepresentation: a.uriRepresentation()))
            #expect(again == a && again.hashValue == a.hashValue && Set([a, again]).count == 1)
            #expect(again.referenceObject == a.referenceObject && again.entity === a.entity && again.storeIdentifier == a.storeIdentifier)
        }
        #expect(Set(ids).count == ids.count)
        #expect(first.newObjectID(for: person, referenceObject: .int64(7)).kind == .permanent(.int64(7)))
    }

    @Test func temporaryIDsAreDistinctAndHaveTemporaryURIs() throws {
        let entity = try TestModel.make().entity(named: "Person")
        let a = ManagedObjectID.temporary(for: entity)
        let b = ManagedObjectID.temporary(for: entity)
        #expect(a != b)
        #expect(a.isTemporaryID)
        #expect(a.uriRepresentation().absoluteString.hasPrefix("x-coredata:///Person/t"))
    }

    @Test func idsFromAnotherStoreOrGarbageURIsAreNotResolved() throws {
        let model = try TestModel.make()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .inMemory)
        #expect(coordinator.managedObjectID(forURIRepresentation: try #require(URL(string: "x-coredata://unknown-store/Person/p1"))) == nil)
        #expect(coordinator.managedObjectID(forURIRepresentation: try #require(URL(string: "https://example.com/Person/p1"))) == nil)
        let store = try #require(coordinator.persistentStores.first)
        #expect(coordinator.managedObjectID(forURIRepresentation: try #require(URL(string: "x-coredata://\(store.identifier)/Ghost/p1"))) == nil)
    }

    @Test func referenceObjectOfForeignIDThrows() throws {
        let model = try TestModel.make()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let first = try #require(try coordinator.addPersistentStore(type: .inMemory) as? IncrementalStore)
        let second = try #require(try coordinator.addPersistentStore(type: .inMemory) as? IncrementalStore)
        let id = first.newObjectID(for: try model.entity(named: "Note"), referenceObject: .int64(1))
        #expect(throws: ObjectGraphError.self) { try second.referenceObject(for: id) }
        #expect(throws: ObjectGraphError.self) { try first.referenceObject(for: .temporary(for: id.entity)) }
    }

    @Test func stringAndUUIDReferencesRoundTripThroughURIs() throws {
        let model = try TestModel.make()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let store = try #require(try coordinator.addPersistentStore(type: .inMemory) as? IncrementalStore)
        let entity = try model.entity(named: "Note")
        for reference in [ReferenceObject.string("a/b c%25"), .string("42"), .uuid(UUID()), .int64(Int64.max)] {
            let id = store.newObjectID(for: entity, referenceObject: reference)
            #expect(coordinator.managedObjectID(forURIRepresentation: id.uriRepresentation()) == id, "\(reference)")
        }
    }
}

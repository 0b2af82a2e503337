import Foundation
import ObjectGraph
import Testing

/// An atomic store that records the calls the coordinator makes (seed 001, seed 004), over
/// the JSON example store; its `save()` fails on demand.
final class RecordingAtomicStore: AtomicStore, @unchecked Sendable {
    // @unchecked: `calls` and `failNextSave` are touched under AtomicStore's lock (every call
    // below runs under it) or by the test's thread between saves.
    static let storeType = PersistentStore.StoreType("RecordingAtomic")
    override var type: StoreType { Self.storeType }

    nonisolated(unsafe) static var failNextSave = false
    private(set) var calls: [String] = []
    /// Whether each object was given to `newReferenceObject(for:)` with a temporary ID.
    private(set) var temporaryAtReference: [Bool] = []
    /// The file's contents as of the last save: the JSON store's format.
    private var file = JSONFileStore.Contents(metadata: [:], objects: [])

    override func load() throws {
        calls.append("load")
        if let url, let contents = try JSONFileStore.contents(at: url) {
            metadata = contents.metadata.mapValues(\.attributeValue)
            file = contents
        }
        // Loaded nodes: attributes only (the tests' objects have no relationships here).
        guard let model = persistentStoreCoordinator?.managedObjectModel else { return }
        var nodes = Set<AtomicStoreCacheNode>()
        for object in file.objects {
            let node = AtomicStoreCacheNode(objectID: objectID(for: try model.entity(named: object.entity), withReferenceObject: .int64(object.reference)))
            for (key, field) in object.values { node.setValue(.attribute(field.attributeValue), forKey: key) }
            nodes.insert(node)
        }
        addCacheNodes(nodes)
    }

    override func newReferenceObject(for managedObject: ManagedObject) throws -> ReferenceObject {
        calls.append("newReferenceObject")
        temporaryAtReference.append(managedObject.objectID.isTemporaryID)
        return try super.newReferenceObject(for: managedObject)
    }

    override func newCacheNode(for managedObject: ManagedObject) throws -> AtomicStoreCacheNode {
        calls.append("newCacheNode")
        return try super.newCacheNode(for: managedObject)
    }

    override func updateCacheNode(_ node: AtomicStoreCacheNode, from managedObject: ManagedObject) throws {
        calls.append("updateCacheNode")
        try super.updateCacheNode(node, from: managedObject)
    }

    override func willRemoveCacheNodes(_ cacheNodes: Set<AtomicStoreCacheNode>) {
        calls.append("willRemoveCacheNodes(\(cacheNodes.count))")
    }

    override func save() throws {
        calls.append("save")
        if Self.failNextSave {
            Self.failNextSave = false
            throw ObjectGraphError(.invalidArgument, "the disk is full (simulated)")
        }
        guard let url else { return }
        var objects: [JSONFileStore.Object] = []
        for node in cacheNodes() {
            guard case .int64(let reference) = try referenceObject(for: node.objectID) else { continue }
            var values: [String: JSONFileStore.Field] = [:]
            for (key, value) in node.propertyCache ?? [:] {
                if case .attribute(let attribute) = value { values[key] = JSONFileStore.Field(attribute) }
            }
            objects.append(JSONFileStore.Object(entity: node.objectID.entity.name, reference: reference, values: values))
        }
        file = JSONFileStore.Contents(metadata: metadata.mapValues(JSONFileStore.Field.init), objects: objects)
        try JSONFileStore.write(file, to: url)
    }

    func resetCalls() { calls = []; temporaryAtReference = [] }
}

/// `AtomicStore` and `AtomicStoreCacheNode` as seeds 001 and 004 document them: the
/// reservation file, the calls of a save in their order, metadata, and a failing save.
@Suite("AtomicStore: the seeds' contract", .serialized)
struct AtomicStoreTests {
    static let registered: Bool = {
        PersistentStoreCoordinator.registerStoreClass(RecordingAtomicStore.self, type: RecordingAtomicStore.storeType)
        return true
    }()

    private func url() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("atomic-\(UUID().uuidString).json")
    }

    private func add(_ url: URL, model: ManagedObjectModel? = nil) throws -> (PersistentStoreCoordinator, RecordingAtomicStore) {
        _ = Self.registered
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try model ?? TestModel.make())
        let store = try coordinator.addPersistentStore(type: RecordingAtomicStore.storeType, at: url)
        return (coordinator, try #require(store as? RecordingAtomicStore))
    }

    /// Seed 001, init: a missing file is created with zero length before `load()`; removing
    /// the store before its first save deletes it again; after a save it stays.
    @Test func theReservationFileIsCreatedEmptyAndRemovedIfTheStoreIsNeverSaved() throws {
        let unsaved = url()
        let (coordinator, store) = try add(unsaved)
        #expect(FileManager.default.fileExists(atPath: unsaved.path))
        #expect(try Data(contentsOf: unsaved).isEmpty, "a zero-length reservation file")
        #expect(store.calls == ["load"])
        try coordinator.remove(store)
        #expect(!FileManager.default.fileExists(atPath: unsaved.path), "removed before any save: the reservation goes")

        let saved = url()
        defer { try? FileManager.default.removeItem(at: saved) }
        let (other, savedStore) = try add(saved)
        let context = ManagedObjectContext(persistentStoreCoordinator: other)
        try context.makePerson("Ada")
        try context.save()
        try other.remove(savedStore)
        #expect(try !Data(contentsOf: saved).isEmpty, "a saved store keeps its file")

        // A file that was there before (empty, made by someone else) is not the store's to remove.
        let existing = url()
        defer { try? FileManager.default.removeItem(at: existing) }
        _ = FileManager.default.createFile(atPath: existing.path, contents: Data())
        let (third, thirdStore) = try add(existing)
        try third.remove(thirdStore)
        #expect(FileManager.default.fileExists(atPath: existing.path))
    }

    /// An atomic store needs a URL, and a store whose `load()` throws is not added (its
    /// reservation file is removed).
    @Test func aStoreWithoutAURLOrThatFailsToLoadIsNotAdded() throws {
        _ = Self.registered
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try TestModel.make())
        let error = #expect(throws: ObjectGraphError.self) { try coordinator.addPersistentStore(type: RecordingAtomicStore.storeType, at: nil) }
        #expect(error?.code == .invalidArgument)
        let garbage = url()
        defer { try? FileManager.default.removeItem(at: garbage) }
        try Data("not json".utf8).write(to: garbage)
        #expect(throws: (any Error).self) { try coordinator.addPersistentStore(type: RecordingAtomicStore.storeType, at: garbage) }
        #expect(coordinator.persistentStores.isEmpty)
        #expect(try Data(contentsOf: garbage) == Data("not json".utf8), "a file that was there is left alone")
    }

    /// Seed 001: a save calls `newReferenceObject` once per inserted object, while it has its
    /// temporary ID, then `newCacheNode` once per inserted object, `updateCacheNode` once per
    /// updated object, `willRemoveCacheNodes` with the deleted objects' nodes, and `save()`.
    @Test func aSaveCallsTheStoreInTheDocumentedOrderOncePerObject() throws {
        let file = url()
        defer { try? FileManager.default.removeItem(at: file) }
        let (coordinator, store) = try add(file)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let ada = try context.makePerson("Ada"), bob = try context.makePerson("Bob"), cy = try context.makePerson("Cy")
        try context.save()
        #expect(store.calls == ["load", "newReferenceObject", "newReferenceObject", "newReferenceObject", "newCacheNode", "newCacheNode", "newCacheNode", "save"])
        #expect(store.temporaryAtReference == [true, true, true])
        #expect(!ada.objectID.isTemporaryID && store.cacheNode(for: ada.objectID)?.objectID == ada.objectID)
        #expect(store.cacheNodes().count == 3)

        store.resetCalls()
        try bob.setValue(.int16(41), forKey: "age")
        context.delete(cy)
        try context.makePerson("Dee")
        try context.save()
        #expect(store.calls == ["newReferenceObject", "newCacheNode", "updateCacheNode", "willRemoveCacheNodes(1)", "save"])
        #expect(store.cacheNodes().count == 3)
        #expect(store.cacheNode(for: cy.objectID) == nil)
        #expect(store.cacheNode(for: bob.objectID)?.value(forKey: "age") == .attribute(.int16(41)))

        store.resetCalls()
        try context.save()
        #expect(store.calls.isEmpty, "a save with no changes does not reach the store")

        // An ID obtained early is not asked for again at the save.
        let early = try context.makePerson("Eve")
        try context.obtainPermanentIDs(for: [early])
        try context.save()
        #expect(store.calls == ["newReferenceObject", "newCacheNode", "save"])
    }

    /// Seed 004, metadata: the store type and UUID are in the metadata, saved with the data
    /// and read back on reopening, also without opening (`metadataForPersistentStore(at:)`).
    @Test func metadataTravelsWithTheDataAndReadsBackOnReopening() throws {
        let file = url()
        defer { try? FileManager.default.removeItem(at: file) }
        let (coordinator, store) = try add(file)
        let uuid = try #require(store.metadata[PersistentStore.storeUUIDKey]?.stringValue)
        #expect(store.metadata[PersistentStore.storeTypeKey] == .string(RecordingAtomicStore.storeType.rawValue))
        var metadata = store.metadata
        metadata["note"] = "kept"
        coordinator.setMetadata(metadata, for: store)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        try context.makePerson("Ada")
        try context.save()
        try coordinator.remove(store)

        let (reopened, again) = try add(file)
        #expect(again.identifier == uuid)
        #expect(again.metadata["note"] == "kept")
        #expect(try JSONFileStore.metadataForPersistentStore(at: file)[PersistentStore.storeUUIDKey] == .string(uuid))
        #expect(try ManagedObjectContext(persistentStoreCoordinator: reopened).count(for: .make("Person")) == 1)
    }

    /// A save whose `save()` throws leaves the nodes as they were and the context's changes
    /// pending; the next save writes them.
    @Test func aFailedSaveLeavesTheNodesAsTheyWereAndTheChangesPending() throws {
        let file = url()
        defer { try? FileManager.default.removeItem(at: file) }
        let (coordinator, store) = try add(file)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let ada = try context.makePerson("Ada", age: 30)
        let bob = try context.makePerson("Bob")
        try context.save()
        try ada.setValue(.int16(31), forKey: "age")
        context.delete(bob)
        try context.makePerson("Cy")
        RecordingAtomicStore.failNextSave = true
        #expect(throws: ObjectGraphError.self) { try context.save() }
        #expect(store.cacheNodes().count == 2, "no node added or removed")
        #expect(store.cacheNode(for: ada.objectID)?.value(forKey: "age") == .attribute(.int16(30)), "the node's values are back")
        #expect(try ManagedObjectContext(persistentStoreCoordinator: coordinator).names(.make("Person", sortedBy: ["name"])) == ["Ada", "Bob"])
        #expect(context.hasChanges)
        try context.save()
        #expect(try ManagedObjectContext(persistentStoreCoordinator: coordinator).names(.make("Person", sortedBy: ["name"])) == ["Ada", "Cy"])
    }

    /// Nodes: values by name, identity equality; `objectID(for:withReferenceObject:)` and
    /// `referenceObject(for:)` round-trip.
    @Test func cacheNodesHoldValuesByNameAndIDsRoundTripTheirReferences() throws {
        let file = url()
        defer { try? FileManager.default.removeItem(at: file) }
        let (coordinator, store) = try add(file)
        let person = try coordinator.managedObjectModel.entity(named: "Person")
        let id = store.objectID(for: person, withReferenceObject: .string("ada"))
        #expect(try store.referenceObject(for: id) == .string("ada"))
        let node = AtomicStoreCacheNode(objectID: id)
        #expect(node.propertyCache == nil && node.value(forKey: "name") == nil)
        node.setValue(.attribute("Ada"), forKey: "name")
        #expect(node.value(forKey: "name") == .attribute("Ada") && node.propertyCache?.count == 1)
        node.setValue(nil, forKey: "name")
        #expect(node.value(forKey: "name") == nil)
        #expect(node != AtomicStoreCacheNode(objectID: id), "nodes are equal only to themselves")
        store.addCacheNodes([node])
        #expect(store.cacheNode(for: id) === node)
        node.setValue(.attribute("Ada"), forKey: "name")
        node.setValue(.attribute(.int64(36)), forKey: "age")
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let ada = try context.existingObject(with: id)
        #expect(try ada.value(forKey: "name") == "Ada")
        #expect(try ada.value(forKey: "age") == .int16(36), "a node's integer is converted to the attribute's type")
        node.setValue(.attribute("not a number"), forKey: "age")
        let other = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let error = #expect(throws: ObjectGraphError.self) { try other.existingObject(with: id).value(forKey: "age") }
        #expect(error?.code == .wrongValueType || error?.code == .objectNotFound)
    }
}

/// The DocC article's example store is the one the tests run.
@Suite struct AtomicStoreArticleTests {
    @Test func theArticlesJSONStoreIsTheCodeTheTestsRun() throws {
        let root = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let article = try String(contentsOf: root.appending(path: "Sources/ObjectGraph/ObjectGraph.docc/WritingAnAtomicStore.md"), encoding: .utf8)
        let source = try String(contentsOf: root.appending(path: "Tests/ObjectGraphTests/Support/JSONFileStore.swift"), encoding: .utf8)
        let start = try #require(article.range(of: "```swift\nfinal class JSONFileStore"))
        let end = try #require(article.range(of: "```", range: start.upperBound..<article.endIndex))
        let block = String(article[article.index(start.lowerBound, offsetBy: "```swift\n".count)..<end.lowerBound])
        #expect(block.count > 2_000)
        #expect(source.contains(block), "the article's JSONFileStore is word for word the test's")
    }
}

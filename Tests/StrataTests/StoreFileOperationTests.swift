import Foundation
import ObjectGraph
import Testing
@testable import Strata

/// The coordinator's store-file operations (Core Data's `destroyPersistentStore(at:type:options:)`
/// and `replacePersistentStore(at:destinationOptions:withPersistentStoreFrom:sourceOptions:type:)`)
/// on every store type: they act on closed stores only, and never on files that are not stores.
@Suite struct StoreFileOperationTests {
    private func scratch() throws -> URL {
        StrataStore.register()
        BinaryStore.register()
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("store-files-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// A store of `type` at `url` holding members named `names`; returns its coordinator.
    private func store(_ type: PersistentStore.StoreType, at url: URL, names: [String]) throws -> PersistentStoreCoordinator {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try StoreTestModel.make())
        try coordinator.addPersistentStore(type: type, at: url)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for name in names { try context.insertNewObject(forEntityName: "Member").setValue(.string(name), forKey: "name") }
        try context.save()
        return coordinator
    }

    private func names(_ type: PersistentStore.StoreType, at url: URL) throws -> [String] {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try StoreTestModel.make())
        let added = try coordinator.addPersistentStore(type: type, at: url)
        defer { try? coordinator.remove(added) }
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        return try context.fetch(FetchRequest(entityName: "Member")).map { try $0.value(forKey: "name").stringValue ?? "" }.sorted()
    }

    @Test(arguments: [PersistentStore.StoreType.strata, .binary])
    func destroyRemovesAClosedStoreAndRefusesAnOpenOneOrAForeignFile(type: PersistentStore.StoreType) throws {
        let root = try scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let url = root.appendingPathComponent(type == .binary ? "a.strata-binary" : "a")
        let coordinator = try store(type, at: url, names: ["Ann"])
        if type == .strata {
            let error = #expect(throws: ObjectGraphError.self) { try PersistentStoreCoordinator.destroyPersistentStore(at: url, type: type) }
            #expect(error?.code == .storeLocked, "open in this process")
            #expect(FileManager.default.fileExists(atPath: url.path))
        }
        // Through the coordinator that has it: removed from it first, then destroyed.
        try coordinator.destroyPersistentStore(at: url, type: type)
        #expect(coordinator.persistentStores.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: url.path))
        try PersistentStoreCoordinator.destroyPersistentStore(at: url, type: type)  // nothing there: nothing to do

        // Something that is not a store of the type is left alone.
        let foreign = root.appendingPathComponent("notes")
        if type == .strata {
            try FileManager.default.createDirectory(at: foreign, withIntermediateDirectories: true)
            try Data("keep".utf8).write(to: foreign.appendingPathComponent("todo.txt"))
        } else {
            try Data("keep me".utf8).write(to: foreign)
        }
        let refused = #expect(throws: ObjectGraphError.self) { try PersistentStoreCoordinator.destroyPersistentStore(at: foreign, type: type) }
        #expect(refused?.code == .invalidArgument)
        #expect(FileManager.default.fileExists(atPath: foreign.path))
    }

    @Test(arguments: [PersistentStore.StoreType.strata, .binary])
    func replaceCopiesAClosedStoreWithItsIdentifier(type: PersistentStore.StoreType) throws {
        let root = try scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let suffix = type == .binary ? ".strata-binary" : ""
        let source = root.appendingPathComponent("source" + suffix), destination = root.appendingPathComponent("destination" + suffix)
        let sourceCoordinator = try store(type, at: source, names: ["Ann", "Ben"])
        let sourceID = try #require(sourceCoordinator.persistentStores.first).identifier
        let destinationCoordinator = try store(type, at: destination, names: ["Zed"])
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try StoreTestModel.make())
        if type == .strata {
            let error = #expect(throws: ObjectGraphError.self) {
                try coordinator.replacePersistentStore(at: destination, withPersistentStoreFrom: source, type: type)
            }
            #expect(error?.code == .storeLocked, "the source is open")
        }
        for (added, url) in [(sourceCoordinator, source), (destinationCoordinator, destination)] {
            for store in added.persistentStores where store.url == url { try added.remove(store) }
        }
        try coordinator.replacePersistentStore(at: destination, withPersistentStoreFrom: source, type: type)
        #expect(try names(type, at: destination) == ["Ann", "Ben"])
        #expect(try names(type, at: source) == ["Ann", "Ben"], "the source is unchanged")
        let copy = try coordinator.addPersistentStore(type: type, at: destination)
        #expect(copy.identifier == sourceID, "a copy keeps the store's UUID")
        let busy = #expect(throws: ObjectGraphError.self) {
            try coordinator.replacePersistentStore(at: destination, withPersistentStoreFrom: source, type: type)
        }
        #expect(busy?.code == .storeMismatch, "the destination is added to this coordinator")
    }

    @Test func inMemoryStoresAreReplacedByTheirContents() throws {
        let source = try #require(URL(string: "memory://files/\(UUID().uuidString)")), destination = try #require(URL(string: "memory://files/\(UUID().uuidString)"))
        let first = try store(.inMemory, at: source, names: ["Ann"])
        for store in first.persistentStores { try first.remove(store) }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try StoreTestModel.make())
        try coordinator.replacePersistentStore(at: destination, withPersistentStoreFrom: source, type: .inMemory)
        #expect(try names(.inMemory, at: destination) == ["Ann"])
        try coordinator.destroyPersistentStore(at: destination, type: .inMemory)
        #expect(try names(.inMemory, at: destination) == [])
    }

    /// Core Data's names for reading a closed store's metadata and checking a model against it.
    @Test(arguments: [PersistentStore.StoreType.strata, .binary])
    func metadataOfAClosedStoreAnswersWhetherAModelFitsIt(type: PersistentStore.StoreType) throws {
        let root = try scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let url = root.appendingPathComponent(type == .binary ? "a.strata-binary" : "a")
        let coordinator = try store(type, at: url, names: ["Ann"])
        for store in coordinator.persistentStores { try coordinator.remove(store) }
        let metadata = try PersistentStoreCoordinator.metadataForPersistentStore(ofType: type, at: url, options: [:])
        #expect(metadata[PersistentStore.storeTypeKey] == .string(type.rawValue))
        #expect(try StoreTestModel.make().isConfiguration(withName: nil, compatibleWithStoreMetadata: metadata))
        #expect(try !StoreTestModel.make(extraAttribute: true).isConfiguration(withName: nil, compatibleWithStoreMetadata: metadata))
        var changed = metadata
        changed["note"] = "kept"
        try PersistentStoreCoordinator.setMetadata(changed, forPersistentStoreOfType: type, at: url, options: [:])
        #expect(try PersistentStoreCoordinator.metadataForPersistentStore(ofType: type, at: url)["note"] == "kept")
    }

    /// `strata inspect` lists the row layouts a store holds and their rows (what a migration
    /// reads): after a save with one model, every row is in the stored model's layout.
    @Test func inspectListsEachEntitysRowLayoutWithItsRows() throws {
        let root = try scratch()
        defer { try? FileManager.default.removeItem(at: root) }
        let url = root.appendingPathComponent("store")
        let coordinator = try store(.strata, at: url, names: ["Ann", "Ben", "Cy"])
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        try context.insertNewObject(forEntityName: "Team").setValue("Red", forKey: "name")
        try context.save()
        for store in coordinator.persistentStores { try coordinator.remove(store) }
        let report = try StoreInspector.inspect(at: url.path)
        #expect(report.layouts.map(\.entity).sorted() == ["Member", "Team"])
        #expect(report.layouts.first { $0.entity == "Member" }?.rows == 3)
        #expect(report.layouts.first { $0.entity == "Team" }?.rows == 1)
        #expect(report.layouts.allSatisfy { $0.current && $0.layout.count == 8 })
        let layout = try StoreLayout(model: try StoreTestModel.make())
        let member = try StoreTestModel.make().entity(named: "Member")
        #expect(report.layouts.first { $0.entity == "Member" }?.layout == hexLayout(try #require(layout.layout(of: member)).layoutID))
    }
}

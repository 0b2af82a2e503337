import Foundation
import Strata
import StrataSync
import Testing

/// The model of the container tests: notes in folders.
enum NotesModel {
    static func make() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Folder", properties: [
                .attribute("name", .string, optional: false),
                .toMany("notes", "Note", inverse: "folder", deleteRule: .cascade),
            ]),
            EntityDescription(name: "Note", managedObjectClass: Note.self, properties: [
                .attribute("title", .string, optional: false),
                .attribute("body", .string),
                .attribute("created", .date),
                .toOne("folder", "Folder", inverse: "notes"),
            ]),
        ])
    }
}

/// A note, as a Core Data subclass would declare it (`@NSManaged var title: String?`).
final class Note: ManagedObject {
    @Managed("title") var title: String?
    @Managed("body") var body: String?
    @Managed("created") var created: Date?
}

/// A container whose default directory is a fresh temporary one.
final class ScratchContainer: PersistentContainer, @unchecked Sendable {
    // @unchecked: adds no state to PersistentContainer.
    static let directory = FileManager.default.temporaryDirectory.appending(path: "container-tests-\(UUID().uuidString)")
    override class func defaultDirectoryURL() -> URL { directory }
}

@Suite("Persistent container")
struct PersistentContainerTests {
    private func scratch() -> URL {
        FileManager.default.temporaryDirectory.appending(path: "container-\(UUID().uuidString)")
    }

    @Test func theDefaultStoreIsAStrataStoreNamedAfterTheContainerInTheDefaultDirectory() async throws {
        let name = "Notes-\(UUID().uuidString)"
        let container = ScratchContainer(name: name, managedObjectModel: try NotesModel.make())
        defer { try? FileManager.default.removeItem(at: ScratchContainer.directory.appending(path: "\(name).strata")) }
        #expect(container.persistentStoreDescriptions.count == 1)
        let description = try #require(container.persistentStoreDescriptions.first)
        #expect(description.type == .strata)
        #expect(description.url == ScratchContainer.directory.appending(path: "\(name).strata"))
        #expect(description.shouldMigrateStoreAutomatically && description.shouldInferMappingModelAutomatically)
        try await container.loadPersistentStores()
        let store = try #require(container.persistentStoreCoordinator.persistentStores.first)
        #expect(store is StrataStore)
        #expect(FileManager.default.fileExists(atPath: ScratchContainer.directory.appending(path: "\(name).strata").path))
        #expect(container.viewContext.concurrencyType == .mainQueue)
        #expect(container.newBackgroundContext().concurrencyType == .privateQueue)
    }

    @Test func theDefaultDirectoryFollowsTheXDGDataHome() {
        let directory = PersistentContainer.defaultDirectoryURL()
        #expect(directory.lastPathComponent == ProcessInfo.processInfo.processName)
        let environment = ProcessInfo.processInfo.environment
        if environment["STRATA_DATA_DIR"] == nil, let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") {
            #expect(directory.deletingLastPathComponent().path == URL(filePath: data).path)
        }
    }

    @Test func descriptionsChooseTheTypeTheLocationAndTheOptions() throws {
        let directory = scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let container = PersistentContainer(name: "Notes", managedObjectModel: try NotesModel.make())
        let strata = PersistentStoreDescription(url: directory.appending(path: "nested/Notes.strata"))
        strata.setOption(.string("normal"), forKey: StrataStore.durabilityOption)
        let memory = PersistentStoreDescription()
        memory.type = .inMemory
        container.persistentStoreDescriptions = [strata, memory]
        var reported: [(PersistentStoreDescription, (any Error)?)] = []
        container.loadPersistentStores { description, error in reported.append((description, error)) }
        #expect(reported.count == 2, "synchronous descriptions are reported before the call returns")
        #expect(reported.allSatisfy { $0.1 == nil })
        let stores = container.persistentStoreCoordinator.persistentStores
        #expect(stores.map(\.type) == [.strata, .inMemory])
        #expect(stores[0].options[StrataStore.durabilityOption] == .string("normal"))

        // Loading the same description again reports the store as already added.
        var again: (any Error)?
        container.persistentStoreDescriptions = [strata]
        container.loadPersistentStores { _, error in again = error }
        #expect((again as? ObjectGraphError)?.code == .storeMismatch)
    }

    @Test func aDescriptionMayBeAddedAsynchronouslyAndAFailureIsReported() async throws {
        let directory = scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let container = PersistentContainer(name: "Notes", managedObjectModel: try NotesModel.make())
        let description = PersistentStoreDescription(url: directory.appending(path: "Notes.strata"))
        description.shouldAddStoreAsynchronously = true
        let unknown = PersistentStoreDescription(url: directory.appending(path: "Other"))
        unknown.type = PersistentStore.StoreType("NoSuchStore")
        unknown.shouldAddStoreAsynchronously = true
        container.persistentStoreDescriptions = [description, unknown]
        let results = await withCheckedContinuation { (continuation: CheckedContinuation<[String: String], Never>) in
            let collected = Locked<[String: String]>([:])
            container.loadPersistentStores { description, error in
                let all = collected.withLock { results in
                    results[description.type.rawValue] = error.map { "\(($0 as? ObjectGraphError)?.code.rawValue ?? "?")" } ?? "ok"
                    return results
                }
                if all.count == 2 { continuation.resume(returning: all) }
            }
        }
        #expect(results == ["Strata": "ok", "NoSuchStore": "unknownStoreType"])

        let failing = PersistentContainer(name: "Notes", managedObjectModel: try NotesModel.make())
        failing.persistentStoreDescriptions = [unknown]
        await #expect(throws: ObjectGraphError.self) { try await failing.loadPersistentStores() }
    }

    @Test func backgroundTasksSaveAndTheViewContextMergesThem() async throws {
        let directory = scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let container = PersistentContainer(name: "Notes", managedObjectModel: try NotesModel.make())
        container.persistentStoreDescriptions = [PersistentStoreDescription(url: directory.appending(path: "Notes.strata"))]
        try await container.loadPersistentStores()
        let view = container.viewContext
        view.automaticallyMergesChangesFromParent = true
        let folderID = try await view.perform {
            let folder = try view.insertNewObject(forEntityName: "Folder")
            try folder.setValue("Inbox", forKey: "name")
            try view.save()
            _ = try view.fetch(FetchRequest(entityName: "Folder"))
            return folder.objectID
        }
        // The merge posts objectsDidChange on the view context's queue, with the new note.
        let mergedInserts = Locked<Set<ManagedObjectID>>([])
        let observer = NotificationCenter.default.addObserver(
            forName: ManagedObjectContext.objectsDidChangeNotification, object: view, queue: nil
        ) { note in
            let ids = ObjectChangeNotification(note)?.inserted.map(\.objectID) ?? []
            mergedInserts.withLock { $0.formUnion(ids) }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        let noteID = try await container.performBackgroundTask { context in
            let note = Note(entity: try context.persistentStoreCoordinator!.managedObjectModel.entity(named: "Note"), insertInto: context)
            note.title = "Groceries"
            try note.setValue(context.object(with: folderID), forKey: "folder")
            try context.save()
            return note.objectID
        }
        // The merge was enqueued on the view context's queue before the save returned.
        let titles = try await view.perform {
            try view.object(with: folderID).objects(forKey: "notes").map { try $0.value(forKey: "title").stringValue }
        }
        #expect(titles == ["Groceries"])
        #expect(mergedInserts.withLock { $0 } == [noteID], "the merge registered the inserted note")
    }
}

import Foundation
import ObjectGraph
@testable import Strata
import StrataEngine
import Testing

/// Issue 17, SPEC.md [MIG-1] [IDX-S9] under crashes: the library saved, migrated to a model
/// that indexes the books' titles (the build deferred), edited while the index is unbuilt (a
/// title changed, a book added), then the index built in the background in batches of 3 rows,
/// crashed at every I/O operation of the whole run. Whatever the crash, the store opens with
/// the new model, finishes the build, and reads through the index what its last acknowledged
/// (or in-flight) save wrote; fsck finds nothing wrong (no entry missing, none stale).
@Suite struct IndexBuildCrashTests {
    typealias Enumerator = CrashPointEnumerator<Progress>
    typealias Library = LightweightMigrationTests
    typealias Progress = MigrationCrashProgress

    static let path = "/strata-index-build-crash-store"
    static let before = LibraryModel()
    static let after = LibraryModel(titleIndexed: true)

    /// The books, and counts the title index answers once built.
    static func observe(_ coordinator: PersistentStoreCoordinator) throws -> [String] {
        try Library.books(coordinator, after) + [
            "Book 2 \(try Library.count(coordinator, "Book", "title == 'Book 2'"))",
            "Book* \(try Library.count(coordinator, "Book", "title BEGINSWITH 'Book'"))",
            "Renamed \(try Library.count(coordinator, "Book", "title == 'Renamed 1'"))",
        ]
    }

    /// The library saved (and migrated, which reads the same).
    static let library = Library.version1Books + ["Book 2 1", "Book* 4", "Renamed 0"]
    /// After the edit: Book 1 renamed, Book 9 (Lem's, untagged) added.
    static let changed = [
        "Book 0|nil|Le Guin|even|Book", "Book 2|200|Le Guin|even|Novel", "Book 3|300|Lem|odd|Novel", "Book 9|nil|Lem||Book",
        "Renamed 1|100|Lem|odd|Book", "Book 2 1", "Book* 4", "Renamed 1",
    ]
    /// An empty store, read.
    static let empty = ["Book 2 0", "Book* 0", "Renamed 0"]

    static func enumerator() throws -> Enumerator {
        Progress.enumerator("index build", run: run(on:), read: read) { progress in
            if progress.changed { return [changed] }
            if progress.migrated { return [library, changed] }
            return progress.populated ? [library] : [empty, library]
        }
    }

    /// Opens the store on `fs` with `model` and `options`, runs `body`, removes the store.
    static func withStore<R>(
        _ fs: FaultInjectingFileSystem, _ model: LibraryModel, options: [String: AttributeValue] = [:],
        _ body: (PersistentStoreCoordinator) throws -> R
    ) throws -> R {
        try FaultStrataStore.withStore(fs, path: path, model: model.make(), options: options, body)
    }

    static func run(on fs: FaultInjectingFileSystem) -> Progress {
        var progress = Progress()
        guard !SharedEngine.isOpen(path: path) else {
            progress.staleEngine = true
            return progress
        }
        do {
            progress.inFlight = true
            try withStore(fs, before) { coordinator in try Library.populate(coordinator, before) }
            progress.populated = true
            progress.inFlight = false
            let deferred = Library.migrating.merging([StrataStore.indexBuildOption: .string("deferred")]) { $1 }
            try withStore(fs, after, options: deferred) { coordinator in
                progress.migrated = true
                progress.inFlight = true
                let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
                let renamed = try #require(try context.fetch(Library.request("Book", "title == 'Book 1'")).first)
                try renamed.setValue("Renamed 1", forKey: "title")
                let lem = try #require(try context.fetch(Library.request("Author", "name == 'Lem'")).first)
                let added = try context.insertNewObject(forEntityName: "Book")
                try added.setValue("Book 9", forKey: "title")
                try added.setValue(lem, forKey: "author")
                try context.save()
                progress.changed = true
                progress.inFlight = false
            }
            var options = Library.migrating
            options[StrataStore.indexBuildBatchOption] = .int64(3)
            try withStore(fs, after, options: options) { coordinator in
                try #require(coordinator.persistentStores.first as? StrataStore).waitForIndexBuild()
            }
            progress.built = true
        } catch {}
        return progress
    }

    /// Opens the crashed store with the new model (migrating it if the crash came first),
    /// waits for the index build to finish, and reads it; fsck must be clean.
    static func read(_ fs: FaultInjectingFileSystem) throws -> [String] {
        try Progress.readChecked(path: path, open: { try withStore(fs, after, options: Library.migrating, $0) }) { coordinator in
            try #require(coordinator.persistentStores.first as? StrataStore).waitForIndexBuild()
            return try observe(coordinator)
        }
    }

    @Test func aCrashAnywhereInAnIndexBuildLeavesAnIndexThatAnswersRight() throws {
        try Progress.expectEveryCrashRecovers(try Self.enumerator(), run: Self.run(on:), read: Self.read, final: Self.changed)
    }
}

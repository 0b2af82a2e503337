import Foundation
import ObjectGraph
@testable import Strata
import StrataEngine
import Testing

/// Issue 17, SPEC.md [MIG-4] under crashes: the library with reviews saved, migrated with Novel
/// removed (its rows retired, the build deferred), saved (a review of a novel edited, a book
/// added), then the retired rows deleted by a background build in batches of 3 keys, crashed
/// at every I/O operation of the whole run. Whatever the crash, the store opens with the new
/// model, reads no novel, no key or entry of one, and what its last acknowledged (or
/// in-flight) save wrote, and fsck finds nothing wrong: the deletion is never cut in a way
/// that leaves a key of a row it deleted.
@Suite struct RetiredRowCrashTests {
    typealias Enumerator = CrashPointEnumerator<Progress>
    typealias Library = LightweightMigrationTests
    typealias Progress = MigrationCrashProgress

    static let path = "/strata-retired-crash-store"

    /// What the store reads with Novel removed: the books, the reviews' books, counts through
    /// keys and indexes.
    static func observe(_ coordinator: PersistentStoreCoordinator) throws -> [String] {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var reviews = FetchRequest(entityName: "Review")
        reviews.sortDescriptors = [FetchSortDescriptor(keyPath: "text", ascending: true)]
        let read = try context.fetch(reviews).map { review in
            "\(try review.value(forKey: "text").stringValue ?? "?")→\(try review.object(forKey: "book")?.value(forKey: "title").stringValue ?? "nil")"
        }
        return try Library.books(coordinator, RetiredRowTests.model(novels: false)) + read + [
            "books \(try Library.count(coordinator, "Book", "title BEGINSWITH 'Book'"))",
            "Book 2 \(try Library.count(coordinator, "Book", "title == 'Book 2'"))",
            "one book \(try Library.count(coordinator, "Author", "books.@count == 1"))",
            "tagged once \(try Library.count(coordinator, "Tag", "books.@count == 1"))",
            "no book \(try Library.count(coordinator, "Review", "book == nil"))",
        ]
    }

    /// After the migration, before the save.
    static let migrated = [
        "Book 0|nil|Le Guin|even|Book", "Book 1|100|Lem|odd|Book", "on 0→Book 0", "on 2→nil", "on 3→nil",
        "books 2", "Book 2 0", "one book 2", "tagged once 2", "no book 2",
    ]
    /// After the save: a review of a novel edited, Book 9 (Lem's, untagged) added.
    static let changed = [
        "Book 0|nil|Le Guin|even|Book", "Book 1|100|Lem|odd|Book", "Book 9|nil|Lem||Book", "on 0→Book 0", "on 3→nil", "on a novel→nil",
        "books 3", "Book 2 0", "one book 1", "tagged once 2", "no book 2",
    ]
    /// The library saved, the reviews not yet.
    static let libraryOnly = [
        "Book 0|nil|Le Guin|even|Book", "Book 1|100|Lem|odd|Book", "books 2", "Book 2 0", "one book 2", "tagged once 2", "no book 0",
    ]
    /// An empty store, read.
    static let empty = ["books 0", "Book 2 0", "one book 0", "tagged once 0", "no book 0"]

    static func enumerator() throws -> Enumerator {
        Progress.enumerator("retired rows", run: run(on:), read: read) { progress in
            if progress.changed { return [changed] }
            if progress.saved { return progress.migrated && progress.inFlight ? [migrated, changed] : [migrated] }
            return progress.populated ? [libraryOnly, migrated] : [empty, libraryOnly]
        }
    }

    /// Opens the store on `fs` with `options` and `model`, runs `body`, removes the store.
    static func withStore<R>(
        _ fs: FaultInjectingFileSystem, novels: Bool, options: [String: AttributeValue] = [:],
        _ body: (PersistentStoreCoordinator) throws -> R
    ) throws -> R {
        try FaultStrataStore.withStore(fs, path: path, model: RetiredRowTests.model(novels: novels).make(), options: options, body)
    }

    static func run(on fs: FaultInjectingFileSystem) -> Progress {
        var progress = Progress()
        guard !SharedEngine.isOpen(path: path) else {
            progress.staleEngine = true
            return progress
        }
        do {
            progress.inFlight = true
            try withStore(fs, novels: true) { coordinator in
                try Library.populate(coordinator, RetiredRowTests.model())
            }
            progress.populated = true
            try withStore(fs, novels: true) { coordinator in
                let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
                for index in [0, 2, 3] {
                    let book = try #require(try context.fetch(Library.request("Book", "title == 'Book \(index)'")).first)
                    let review = try context.insertNewObject(forEntityName: "Review")
                    try review.setValue(.string("on \(index)"), forKey: "text")
                    try review.setValue(book, forKey: "book")
                }
                try context.save()
            }
            progress.saved = true
            progress.inFlight = false
            let deferred = Library.migrating.merging([StrataStore.indexBuildOption: .string("deferred")]) { $1 }
            try withStore(fs, novels: false, options: deferred) { coordinator in
                progress.migrated = true
                progress.inFlight = true
                try RetiredRowTests.editAfterRemoval(coordinator)
                progress.changed = true
                progress.inFlight = false
            }
            var options = Library.migrating
            options[StrataStore.indexBuildBatchOption] = .int64(3)
            try withStore(fs, novels: false, options: options) { coordinator in
                try #require(coordinator.persistentStores.first as? StrataStore).waitForIndexBuild()
            }
            progress.built = true
        } catch {}
        return progress
    }

    /// Opens the crashed store without Novel (migrating it if the crash came first, no build)
    /// and reads it; fsck must be clean.
    static func read(_ fs: FaultInjectingFileSystem) throws -> [String] {
        let options = Library.migrating.merging([StrataStore.indexBuildOption: .string("deferred")]) { $1 }
        return try Progress.readChecked(path: path, open: { try withStore(fs, novels: false, options: options, $0) }, observe: observe)
    }

    @Test func aCrashAnywhereLeavesNoNovelNorAKeyOfOne() throws {
        try Progress.expectEveryCrashRecovers(try Self.enumerator(), run: Self.run(on:), read: Self.read, final: Self.changed)
    }
}

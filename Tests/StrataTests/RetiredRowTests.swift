import Foundation
import ObjectGraph
@testable import Strata
import StrataEngine
import Testing

/// Issue 17, SPEC.md [MIG-1] [MIG-4]: a subentity removed from a kept hierarchy costs its
/// migration no row read or written: its rows are retired, every reader skips them (and every
/// index entry and relationship key naming them), and the background build deletes them.
@Suite struct RetiredRowTests {
    typealias Library = LightweightMigrationTests

    /// The library model with reviews: Review *—1 Book (`Book.reviews`, keys kept from the
    /// reviews' to-one), the title indexed; without Novel when `novels` is false.
    static func model(novels: Bool = true, isbn: Bool = false) -> LibraryModel {
        LibraryModel(
            bookExtra: {
                [.toMany("reviews", "Review", inverse: "book")] + (isbn ? [.attribute("isbn", .string)] : [])
            },
            titleIndexed: true, withNovel: novels,
            extraEntities: { [EntityDescription(name: "Review", properties: [.attribute("text", .string), .toOne("book", "Book", inverse: "reviews")])] })
    }

    /// Novel's number: entities are numbered in name order (Author, Book, Novel, Review, Tag).
    static let novel: UInt16 = 2

    /// A version-1 store: the library (Books 2 and 3 are novels) and three reviews, of Book 0,
    /// Book 2 and Book 3; with the URIs of the two novels as Book's (an application may have
    /// kept them).
    static func savedStore() throws -> (store: TemporaryStore, novelURIs: [URL]) {
        let store = TemporaryStore()
        let coordinator = try store.coordinator(model: model().make())
        try Library.populate(coordinator, model())
        let again = try store.coordinator(model: model().make())
        let context = ManagedObjectContext(persistentStoreCoordinator: again)
        var uris: [URL] = []
        for index in [0, 2, 3] {
            let book = try #require(try context.fetch(Library.request("Book", "title == 'Book \(index)'")).first)
            let review = try context.insertNewObject(forEntityName: "Review")
            try review.setValue(.string("on \(index)"), forKey: "text")
            try review.setValue(book, forKey: "book")
            if index > 0 { uris.append(URL(string: book.objectID.uriRepresentation().absoluteString.replacingOccurrences(of: "/Novel/", with: "/Book/"))!) }
        }
        try context.save()
        try Library.close(again)
        return (store, uris)
    }

    static func open(_ store: TemporaryStore, _ model: LibraryModel, build: String = "background", readOnly: Bool = false) throws -> PersistentStoreCoordinator {
        var options = Library.migrating
        options[StrataStore.indexBuildOption] = .string(build)
        if readOnly { options[PersistentStore.readOnlyOption] = .bool(true) }
        return try store.coordinator(model: model.make(), options: options)
    }

    /// Every key of the engine but the two records.
    static func keys(_ engine: Engine) throws -> [[UInt8]] {
        var keys: [[UInt8]] = []
        try engine.snapshot().forEachKey(from: [KeyLayout.rowTag], to: nil) { key in
            keys.append(key)
            return true
        }
        return keys
    }

    /// The rows of Book's hierarchy.
    static func bookRows(_ engine: Engine) throws -> Int {
        try engine.snapshot().countKeys(from: KeyLayout.rowPrefix(root: "Book"), to: KeyLayout.rowPrefixEnd(root: "Book"))
    }

    /// The relationship keys naming a novel as member.
    static func keysNamingNovels(_ engine: Engine) throws -> Int {
        var count = 0
        try engine.snapshot().forEachKey(from: [RelationshipKeys.tag], to: [RelationshipKeys.tag + 1]) { key in
            if RelationshipKeys.parse(key)?.member.entity == novel { count += 1 }
            return true
        }
        return count
    }

    /// What the objects say after Novel's removal, through every kind of read: objects,
    /// faults, counts answered from indexes and keys, key paths through to-ones.
    static func expectNovelsGone(_ coordinator: PersistentStoreCoordinator, novelURIs: [URL], sourceLocation: SourceLocation = #_sourceLocation) throws {
        let v2 = model(novels: false)
        #expect(try Library.books(coordinator, v2) == Array(Library.version1Books.prefix(2)), sourceLocation: sourceLocation)
        let counts: [(String, String, Int)] = [
            ("Book", "TRUEPREDICATE", 2),
            ("Book", "title == 'Book 2'", 0),  // an index-only count
            ("Book", "title BEGINSWITH 'Book'", 2),
            ("Book", "author == nil", 0),  // from the one-to-many's keys
            ("Book", "author != nil", 2),
            ("Author", "books.@count == 1", 2),  // keys counted
            ("Author", "ANY books.title == 'Book 2'", 0),
            ("Tag", "books.@count == 1", 2),
            ("Tag", "SUBQUERY(books, $b, $b.pages >= 0).@count == 1", 1),
            ("Review", "book == nil", 2),  // a to-one naming a removed entity's row is nil
            ("Review", "book != nil", 1),
            ("Review", "book.title == 'Book 0'", 1),
            ("Review", "book.title == 'Book 2'", 0),
        ]
        for (entity, format, expected) in counts {
            #expect(try Library.count(coordinator, entity, format) == expected, "\(entity) \(format)", sourceLocation: sourceLocation)
        }
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var reviews = FetchRequest(entityName: "Review")
        reviews.sortDescriptors = [FetchSortDescriptor(keyPath: "text", ascending: true)]
        let read = try context.fetch(reviews).map { review in
            "\(try review.value(forKey: "text").stringValue ?? "?")→\(try review.object(forKey: "book")?.value(forKey: "title").stringValue ?? "nil")"
        }
        #expect(read == ["on 0→Book 0", "on 2→nil", "on 3→nil"], sourceLocation: sourceLocation)
        let authors = try context.fetch(Library.request("Author", "name == 'Le Guin'"))
        #expect(try authors.first?.objects(forKey: "books").count == 1, sourceLocation: sourceLocation)
        let book0 = try #require(try context.fetch(Library.request("Book", "title == 'Book 0'")).first)
        #expect(try book0.objects(forKey: "reviews").count == 1, sourceLocation: sourceLocation)
        // An ID kept from before (the novel as a Book) names no object.
        for uri in novelURIs {
            let id = try #require(coordinator.managedObjectID(forURIRepresentation: uri), sourceLocation: sourceLocation)
            #expect(throws: ObjectGraphError.self, sourceLocation: sourceLocation) { try context.existingObject(with: id) }
        }
    }

    /// A save after Novel's removal: the review of Book 2 (a novel) edited, Book 9 (Lem's)
    /// added.
    static func editAfterRemoval(_ coordinator: PersistentStoreCoordinator) throws {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let review = try #require(try context.fetch(Library.request("Review", "text == 'on 2'")).first)
        try review.setValue("on a novel", forKey: "text")
        let book = try context.insertNewObject(forEntityName: "Book")
        try book.setValue("Book 9", forKey: "title")
        try book.setValue(try context.fetch(Library.request("Author", "name == 'Lem'")).first, forKey: "author")
        try context.save()
    }

    @Test func aRemovedSubentityIsRetiredAndEveryReaderSkipsItsRowsUntilTheBuildDeletesThem() throws {
        let (store, uris) = try Self.savedStore()
        let v1 = try store.coordinator(model: Self.model().make())
        let before = try Self.keys(try Library.engine(v1))
        try Library.close(v1)
        let v2 = Self.model(novels: false)
        let coordinator = try Self.open(store, v2, build: "deferred")
        let engine = try Library.engine(coordinator)
        #expect(try Self.keys(engine) == before, "the migration wrote the two records only")
        #expect(try PendingRelationshipKeyTests.storedRecord(coordinator).retired == [.rows(keySpace: "Book", entity: Self.novel)])
        try Self.expectNovelsGone(coordinator, novelURIs: uris)
        // fsck counts the retired rows and every key naming them, and checks the rest: 2 rows,
        // their 2 title entries, the authors' and the tags' keys naming them (2 + 2), their own
        // tags and reviews keys (2 + 2).
        let report = try ObjectChecker.check(engine: engine, repair: false)
        #expect(report.problems.isEmpty, "\(report.problems)")
        #expect(report.retiredKeys == 12)
        #expect(report.rows == 2 + 2 + 2 + 3)
        // Saves go on: a review of a removed novel is edited, a book is added.
        try Self.editAfterRemoval(coordinator)
        #expect(try Library.count(coordinator, "Review", "book == nil") == 2)
        #expect(try Library.count(coordinator, "Book", "title BEGINSWITH 'Book'") == 3)
        try Library.close(coordinator)
        #expect(try StoreInspector.inspect(at: store.url.path).pending == ["#2 in Book (retired rows)"])

        // A read-write load's build deletes them, with their keys.
        let built = try Self.open(store, v2)
        try #require(built.persistentStores.first as? StrataStore).waitForIndexBuild()
        let after = try Library.engine(built)
        #expect(try Self.bookRows(after) == 3)
        #expect(try Self.keysNamingNovels(after) == 0)
        #expect(try PendingRelationshipKeyTests.storedRecord(built).retired.isEmpty)
        let clean = try ObjectChecker.check(engine: after, repair: false)
        #expect(clean.problems.isEmpty, "\(clean.problems)")
        #expect(clean.retiredKeys == 0)
        #expect(try Library.count(built, "Book", "title == 'Book 9'") == 1)
        #expect(try Library.count(built, "Author", "books.@count == 2") == 1)
        #expect(try Library.count(built, "Review", "book == nil") == 2)
        try Library.close(built)
        #expect(try StoreInspector.inspect(at: store.url.path).pending == [])
    }

    @Test func theBackgroundBuildLeavesTheSameStoreAsTheSynchronousLoad() throws {
        let v2 = Self.model(novels: false)
        var results: [[[UInt8]]] = []
        for build in ["background", "synchronous"] {
            let (store, uris) = try Self.savedStore()
            let coordinator = try Self.open(store, v2, build: build)
            try #require(coordinator.persistentStores.first as? StrataStore).waitForIndexBuild()
            let engine = try Library.engine(coordinator)
            #expect(try Self.bookRows(engine) == 2, "\(build)")
            #expect(try Self.keysNamingNovels(engine) == 0, "\(build)")
            #expect(try PendingRelationshipKeyTests.storedRecord(coordinator).retired.isEmpty, "\(build)")
            try Self.expectNovelsGone(coordinator, novelURIs: uris)
            try Library.expectClean(coordinator)
            // Keys name references, which differ between stores only by their order of saving:
            // the same here.
            results.append(try Self.keys(engine).filter { $0.first != KeyLayout.rowTag })
            try Library.close(coordinator)
        }
        #expect(results[0] == results[1])
    }

    // Fetches during the background deletion, in small batches, read what they read before and
    // after it: each from its snapshot, skipping retired rows or finding them gone.
    @Test func fetchesDuringTheDeletionReadTheSameObjects() throws {
        let store = TemporaryStore()
        let v1 = try store.coordinator(model: Self.model().make())
        let context = ManagedObjectContext(persistentStoreCoordinator: v1)
        let author = try context.insertNewObject(forEntityName: "Author")
        try author.setValue("Le Guin", forKey: "name")
        let tag = try context.insertNewObject(forEntityName: "Tag")
        try tag.setValue("sf", forKey: "label")
        for index in 0..<240 {
            let book = try context.insertNewObject(forEntityName: index % 8 == 0 ? "Book" : "Novel")
            try book.setValue(.string("Book \(index)"), forKey: "title")
            try book.setValue(author, forKey: "author")
            try book.addObject(tag, toRelationship: "tags")
            let review = try context.insertNewObject(forEntityName: "Review")
            try review.setValue(.string("on \(index)"), forKey: "text")
            try review.setValue(book, forKey: "book")
        }
        try context.save()
        try Library.close(v1)

        var options = Library.migrating
        options[StrataStore.indexBuildBatchOption] = .int64(5)
        let coordinator = try store.coordinator(model: Self.model(novels: false).make(), options: options)
        let strata = try #require(coordinator.persistentStores.first as? StrataStore)
        func read() throws -> [Int] {
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            return [
                try Library.count(coordinator, "Book", "TRUEPREDICATE"),
                try Library.count(coordinator, "Book", "title BEGINSWITH 'Book 1'"),
                try Library.count(coordinator, "Author", "books.@count == 30"),
                try Library.count(coordinator, "Tag", "books.@count == 30"),
                try Library.count(coordinator, "Review", "book == nil"),
                try Library.count(coordinator, "Review", "book.title BEGINSWITH 'Book'"),
                try context.fetch(Library.request("Author", "TRUEPREDICATE")).first?.objects(forKey: "books").count ?? -1,
            ]
        }
        let expected = [30, 13, 1, 1, 210, 30, 30]  // "Book 1…": 16, 104, 112, …, 192
        var reads = 0
        while strata.indexBuildProgress != nil, reads < 1_000 {
            let got = try read()
            #expect(got == expected, "\(got) during the build")
            reads += 1
        }
        try strata.waitForIndexBuild()
        let got = try read()
        #expect(got == expected, "\(got) after the build")
        #expect(try Self.bookRows(try Library.engine(coordinator)) == 30)
        #expect(try Self.keysNamingNovels(try Library.engine(coordinator)) == 0)
        try Library.expectClean(coordinator)
        try Library.close(coordinator)
    }

    // A read-only load migrates in memory (the migration writes only the records) and skips
    // the novels' rows as well.
    @Test func aReadOnlyLoadReadsWithoutTheRemovedSubentity() throws {
        let (store, uris) = try Self.savedStore()
        let v1 = try store.coordinator(model: Self.model().make())
        let before = try Self.keys(try Library.engine(v1))
        try Library.close(v1)
        let coordinator = try Self.open(store, Self.model(novels: false), readOnly: true)
        try Self.expectNovelsGone(coordinator, novelURIs: uris)
        #expect(try Self.keys(try Library.engine(coordinator)) == before)
        try Library.close(coordinator)
    }

    // A migration from a store whose last one left retired rows deletes them first.
    @Test func aLaterMigrationDeletesTheRetiredRowsFirst() throws {
        let (store, uris) = try Self.savedStore()
        try Library.close(try Self.open(store, Self.model(novels: false), build: "deferred"))
        let v3 = Self.model(novels: false, isbn: true)
        // Read-only, such a migration is refused: it would have to delete them.
        #expect(throws: ObjectGraphError.self) { try Self.open(store, v3, readOnly: true) }
        let coordinator = try Self.open(store, v3, build: "deferred")
        let engine = try Library.engine(coordinator)
        #expect(try Self.bookRows(engine) == 2)
        #expect(try Self.keysNamingNovels(engine) == 0)
        #expect(try PendingRelationshipKeyTests.storedRecord(coordinator).retired.isEmpty)
        try Self.expectNovelsGone(coordinator, novelURIs: uris)
        try Library.expectClean(coordinator)
        try Library.close(coordinator)
    }
}

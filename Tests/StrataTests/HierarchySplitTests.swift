import Foundation
import ObjectGraph
@testable import Strata
import StrataEngine
import Testing

/// Issue 17: an entity moved out of its hierarchy (a change Core Data's lightweight migration
/// makes: "move entities out of a hierarchy"), here Novel leaving Book's to be a root of its
/// own, with the relationships it had through Book given inverses of their own.
@Suite struct HierarchySplitTests {
    typealias Library = LightweightMigrationTests

    /// The library with Novel a root: its title, pages, author (inverse Author.novels) and tags
    /// (inverse Tag.novels) its own.
    static func split() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Author", properties: [
                .attribute("name", .string, indexed: true),
                .toMany("books", "Book", inverse: "author"),
                .toMany("novels", "Novel", inverse: "author"),
            ]),
            EntityDescription(name: "Book", properties: [
                .attribute("title", .string, optional: false, indexed: true),
                .attribute("pages", .integer32),
                .toOne("author", "Author", inverse: "books"),
                .toMany("tags", "Tag", inverse: "books"),
            ]),
            EntityDescription(name: "Novel", properties: [
                .attribute("title", .string, optional: false, indexed: true),
                .attribute("pages", .integer32),
                .attribute("genre", .string),
                .toOne("author", "Author", inverse: "novels"),
                .toMany("tags", "Tag", inverse: "novels"),
            ]),
            EntityDescription(name: "Tag", properties: [
                .attribute("label", .string),
                .toMany("books", "Book", inverse: "tags"),
                .toMany("novels", "Novel", inverse: "tags"),
            ]),
        ])
    }

    // Each store type (StrataStore migrates such a change by copy, [MIG-3]); read back after
    // the migration and after reopening.
    @Test(arguments: [PersistentStore.StoreType.strata, .binary], 0..<2)
    func aSubentityMovedOutOfItsHierarchyKeepsItsObjectsAndRelationships(type: PersistentStore.StoreType, round: Int) throws {
        let (directory, url) = try Library.libraryFile(type, LibraryModel(titleIndexed: true))
        defer { try? FileManager.default.removeItem(at: directory) }
        // A novel's URI from before: StrataStore splits in place, so it still names the novel.
        let before = PersistentStoreCoordinator(managedObjectModel: try LibraryModel(titleIndexed: true).make())
        try before.addPersistentStore(type: type, at: url)
        let context = ManagedObjectContext(persistentStoreCoordinator: before)
        let uri = try #require(try context.fetch(Library.request("Novel", "title == 'Book 2'")).first).objectID.uriRepresentation()
        try Library.close(before)
        for _ in 0...round {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.split())
            try coordinator.addPersistentStore(type: type, at: url, options: Library.migrating)
            try Self.expectSplit(coordinator)
            if type == .strata {
                let id = try #require(coordinator.managedObjectID(forURIRepresentation: uri))
                let novel = try ManagedObjectContext(persistentStoreCoordinator: coordinator).existingObject(with: id)
                #expect(try novel.value(forKey: "title") == "Book 2", "in place: the object keeps its ID")
                let record = try PendingRelationshipKeyTests.storedRecord(coordinator)
                #expect(record.keySpace(ofRoot: "Novel") == "Novel" && record.keySpace(ofRoot: "Book") == "Book")
            }
            try Library.close(coordinator)
        }
    }

    /// What the split library holds: the books and novels apart, each relationship through the
    /// entity it reaches now.
    static func expectSplit(_ coordinator: PersistentStoreCoordinator) throws {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        func titles(_ objects: [ManagedObject]) throws -> [String] {
            try objects.map { try $0.value(forKey: "title").stringValue ?? "?" }.sorted()
        }
        #expect(try titles(context.fetch(Library.request("Book", "TRUEPREDICATE"))) == ["Book 0", "Book 1"])
        let novels = try context.fetch(Library.request("Novel", "TRUEPREDICATE"))
        #expect(try titles(novels) == ["Book 2", "Book 3"])
        #expect(try novels.map { try $0.value(forKey: "genre").stringValue ?? "?" } == ["sf", "sf"])
        let leGuin = try #require(try context.fetch(Library.request("Author", "name == 'Le Guin'")).first)
        #expect(try titles(leGuin.objects(forKey: "books")) == ["Book 0"])
        #expect(try titles(leGuin.objects(forKey: "novels")) == ["Book 2"])
        let even = try #require(try context.fetch(Library.request("Tag", "label == 'even'")).first)
        #expect(try titles(even.objects(forKey: "books")) == ["Book 0"])
        #expect(try titles(even.objects(forKey: "novels")) == ["Book 2"])
        // Counts through the title index of each hierarchy.
        #expect(try context.count(for: Library.request("Novel", "title == 'Book 2'")) == 1)
        #expect(try context.count(for: Library.request("Book", "title == 'Book 2'")) == 0)
        #expect(try context.count(for: Library.request("Book", "title BEGINSWITH 'Book'")) == 2)
        let novel = try #require(try context.fetch(Library.request("Novel", "title == 'Book 3'")).first)
        #expect(try novel.object(forKey: "author")?.value(forKey: "name") == "Lem")
        #expect(try novel.objects(forKey: "tags").map { try $0.value(forKey: "label").stringValue ?? "?" } == ["odd"])
        if let engine = (coordinator.persistentStores.first as? StrataStore)?.storageEngine {
            let report = try ObjectChecker.check(engine: engine, repair: false)
            #expect(report.problems.isEmpty, "\(report.problems)")
        }
    }
}

extension HierarchySplitTests {
    /// The split library with reviews: Review.book reaches Books only now, and a novel's reviews
    /// come back through Review.novel, a new to-one (stored in rows).
    static func splitWithReviews() throws -> ManagedObjectModel {
        let base = try split()
        return try ManagedObjectModel(entities: base.entities.map { entity in
            let copy = LightweightMigrationTests.copy(entity)
            switch entity.name {
            case "Book":
                return EntityDescription(name: "Book", properties: copy.ownProperties + [.toMany("reviews", "Review", inverse: "book")])
            case "Novel":
                return EntityDescription(name: "Novel", properties: copy.ownProperties + [.toMany("reviews", "Review", inverse: "novel")])
            default:
                return copy
            }
        } + [
            EntityDescription(name: "Review", properties: [
                .attribute("text", .string), .toOne("book", "Book", inverse: "reviews"), .toOne("novel", "Novel", inverse: "reviews"),
            ])
        ])
    }

    /// The split library with reviews where Novel has none: Review keeps its layout.
    static func splitDroppingNovelReviews() throws -> ManagedObjectModel {
        let base = try split()
        return try ManagedObjectModel(entities: base.entities.map { entity in
            let copy = LightweightMigrationTests.copy(entity)
            guard entity.name == "Book" else { return copy }
            return EntityDescription(name: "Book", properties: copy.ownProperties + [.toMany("reviews", "Review", inverse: "book")])
        } + [EntityDescription(name: "Review", properties: [.attribute("text", .string), .toOne("book", "Book", inverse: "reviews")])])
    }

    /// Each review as `text: book novel` (titles, `-` for none).
    static func reviews(_ coordinator: PersistentStoreCoordinator, novels: Bool) throws -> [String] {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var request = FetchRequest(entityName: "Review")
        request.sortDescriptors = [FetchSortDescriptor(keyPath: "text", ascending: true)]
        return try context.fetch(request).map { review in
            let novel = novels ? try review.object(forKey: "novel")?.value(forKey: "title").stringValue ?? "-" : "-"
            return "\(try review.value(forKey: "text").stringValue ?? "?"): \(try review.object(forKey: "book")?.value(forKey: "title").stringValue ?? "-") \(novel)"
        }
    }

    static func storeUUID(_ coordinator: PersistentStoreCoordinator) throws -> String? {
        try #require(coordinator.persistentStores.first).metadata[PersistentStore.storeUUIDKey]?.stringValue
    }

    // A to-one that reached the entity that leaves (Review.book reached novels) reads, in the
    // rows written before, only the books; the novels come back through Review.novel, the new
    // inverse of Novel.reviews, which reads the same old field ([ROW-5] `fieldOf`): in place,
    // no row rewritten; and the same after a save of an old review and a compaction.
    @Test func aToOneIntoTheMovedEntityIsSplitByItsUpgradesInPlace() throws {
        let (store, _) = try RetiredRowTests.savedStore()
        let v1 = try store.coordinator(model: RetiredRowTests.model().make())
        let identifier = try Self.storeUUID(v1)
        try Library.close(v1)
        let expected = ["on 0: Book 0 -", "on 2: - Book 2", "on 3: - Book 3"]
        let coordinator = try store.coordinator(model: Self.splitWithReviews(), options: Library.migrating)
        #expect(try Self.storeUUID(coordinator) == identifier, "in place")
        #expect(try Self.reviews(coordinator, novels: true) == expected)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let novel = try #require(try context.fetch(Library.request("Novel", "title == 'Book 2'")).first)
        #expect(try novel.objects(forKey: "reviews").map { try $0.value(forKey: "text").stringValue ?? "?" } == ["on 2"])
        #expect(try context.count(for: Library.request("Review", "novel != nil")) == 2)
        #expect(try context.count(for: Library.request("Review", "book == nil")) == 2)
        try Library.expectClean(coordinator)
        // A save of an old review writes it in the new layout with what it read.
        let review = try #require(try context.fetch(Library.request("Review", "text == 'on 3'")).first)
        try review.setValue("on 3, edited", forKey: "text")
        try context.save()
        try Library.engine(coordinator).compact()
        try Library.expectClean(coordinator)
        try Library.close(coordinator)
        let reopened = try store.coordinator(model: Self.splitWithReviews(), options: Library.migrating)
        #expect(try Self.reviews(reopened, novels: true) == ["on 0: Book 0 -", "on 2: - Book 2", "on 3, edited: - Book 3"])
        try Library.close(reopened)
    }

    // Without a new field for it, rows whose to-one reached the moved entity keep their layout
    // and would read it: StrataStore migrates such a split by copy ([MIG-3]).
    @Test func aToOneIntoTheMovedEntityWithoutANewLayoutIsSplitByCopy() throws {
        let (store, _) = try RetiredRowTests.savedStore()
        let v1 = try store.coordinator(model: RetiredRowTests.model().make())
        let identifier = try Self.storeUUID(v1)
        try Library.close(v1)
        let coordinator = try store.coordinator(model: Self.splitDroppingNovelReviews(), options: Library.migrating)
        #expect(try Self.storeUUID(coordinator) != identifier, "copied: a new store")
        #expect(try Self.reviews(coordinator, novels: false) == ["on 0: Book 0 -", "on 2: - -", "on 3: - -"])
        try Library.expectClean(coordinator)
        try Library.close(coordinator)
    }
}

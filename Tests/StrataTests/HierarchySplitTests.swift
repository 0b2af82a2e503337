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
    static func split(novelTagsOrdered: Bool = false) throws -> ManagedObjectModel {
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
                .toMany("tags", "Tag", inverse: "novels", ordered: novelTagsOrdered),
            ]),
            EntityDescription(name: "Tag", properties: [
                .attribute("label", .string),
                .toMany("books", "Book", inverse: "tags"),
                .toMany("novels", "Novel", inverse: "tags"),
            ]),
        ])
    }

    /// `base` (the split library by default) with the properties `added` names appended to
    /// each entity's own (its superentity kept) and `entities` added. (Made anew for each
    /// model: a description belongs to one model.)
    static func split(
        adding added: [String: [PropertyDescription]], entities: [EntityDescription] = [], to base: ManagedObjectModel? = nil
    ) throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: (base ?? split()).entities.map { entity in
            let copy = LightweightMigrationTests.copy(entity)
            guard let extra = added[entity.name] else { return copy }
            return EntityDescription(name: entity.name, superentity: copy.superentityName, properties: copy.ownProperties + extra)
        } + entities)
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
        try split(adding: [
            "Book": [.toMany("reviews", "Review", inverse: "book")], "Novel": [.toMany("reviews", "Review", inverse: "novel")],
        ], entities: [
            EntityDescription(name: "Review", properties: [
                .attribute("text", .string), .toOne("book", "Book", inverse: "reviews"), .toOne("novel", "Novel", inverse: "reviews"),
            ])
        ])
    }

    /// The split library with reviews where Novel has none: Review's version hash is
    /// unchanged. With `tagColor`, Tag has a new attribute too (a later version).
    static func splitDroppingNovelReviews(tagColor: Bool = false, reviewStars: Bool = false) throws -> ManagedObjectModel {
        try split(adding: [
            "Book": [.toMany("reviews", "Review", inverse: "book")], "Tag": tagColor ? [.attribute("color", .string)] : [],
        ], entities: [
            EntityDescription(name: "Review", properties: [
                .attribute("text", .string), .toOne("book", "Book", inverse: "reviews"),
            ] + (reviewStars ? [.attribute("stars", .integer16)] : []))
        ])
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

    // Without a new field, Review's version hash is unchanged; the migration still gives it
    // a new layout ([ROW-1]), so that the rows written before read Review.book through their
    // upgrades (only books): in place. A later migration that leaves Review as it is keeps that
    // layout (the hash's would read the old rows as current and bring the novels back).
    @Test func aToOneIntoTheMovedEntityWithoutANewFieldIsSplitInPlaceUnderANewLayout() throws {
        let (store, _) = try RetiredRowTests.savedStore()
        let v1 = try store.coordinator(model: RetiredRowTests.model().make())
        let identifier = try Self.storeUUID(v1)
        try Library.close(v1)
        let expected = ["on 0: Book 0 -", "on 2: - -", "on 3: - -"]
        let coordinator = try store.coordinator(model: Self.splitDroppingNovelReviews(), options: Library.migrating)
        #expect(try Self.storeUUID(coordinator) == identifier, "in place")
        #expect(try Self.reviews(coordinator, novels: false) == expected)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try context.count(for: Library.request("Review", "book == nil")) == 2)
        #expect(try context.count(for: Library.request("Review", "book != nil")) == 1)
        let review = try #require(coordinator.managedObjectModel.entitiesByName["Review"])
        let layout = try PendingRelationshipKeyTests.storedRecord(coordinator).current.layoutIDs["Review"]
        #expect(layout != nil && layout != RowLayout.layoutID(of: review), "a layout that is not the hash's")
        try Library.expectClean(coordinator)
        try Library.close(coordinator)
        let later = try store.coordinator(model: Self.splitDroppingNovelReviews(tagColor: true), options: Library.migrating)
        #expect(try Self.storeUUID(later) == identifier, "in place")
        #expect(try PendingRelationshipKeyTests.storedRecord(later).current.layoutIDs["Review"] == layout)
        #expect(try Self.reviews(later, novels: false) == expected)
        try Library.engine(later).compact()
        try Library.expectClean(later)
        #expect(try Self.reviews(later, novels: false) == expected)
        try Library.close(later)
        // Review changed and changed back: its hash's layout is the one of the rows written
        // before the split again, so it takes another ([ROW-1]), and those rows still read
        // through their upgrades.
        for stars in [true, false] {
            let version = try store.coordinator(model: Self.splitDroppingNovelReviews(tagColor: true, reviewStars: stars), options: Library.migrating)
            #expect(try Self.storeUUID(version) == identifier, "in place")
            #expect(try Self.reviews(version, novels: false) == expected)
            try Library.expectClean(version)
            try Library.close(version)
        }
    }

    /// Book `index` (by its title) of `entity` in `context`.
    static func book(_ index: Int, _ context: ManagedObjectContext, _ entity: String = "Book") throws -> ManagedObject {
        try #require(try context.fetch(Library.request(entity, "title == 'Book \(index)'")).first)
    }

    /// A saved library of `v1` where each pair (a, b) links Book a to Book b through
    /// `relationship` (set when a to-one, added when a to-many); with the store's UUID.
    /// With `moreNovels`, a novel Book 4 too (novels then outnumber books).
    static func linkedStore(_ v1: LibraryModel, _ pairs: [(Int, Int)], _ relationship: String, moreNovels: Bool = false) throws -> (TemporaryStore, String?) {
        let store = try Library.savedStore(v1)
        let coordinator = try store.coordinator(model: v1.make())
        let identifier = try storeUUID(coordinator)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        if moreNovels {
            let novel = try context.insertNewObject(forEntityName: "Novel")
            try novel.setValue("Book 4", forKey: "title")
        }
        for (a, b) in pairs {
            let (owner, member) = (try book(a, context), try book(b, context))
            if owner.entity.relationshipsByName[relationship]?.isToMany == true {
                try owner.addObject(member, toRelationship: relationship)
            } else {
                try owner.setValue(member, forKey: relationship)
            }
        }
        try context.save()
        try Library.close(coordinator)
        return (store, identifier)
    }

    /// The split library with a to-one `sequel` to a Book in each hierarchy (inferred mappings
    /// keep destinations).
    static func splitWithSequels() throws -> ManagedObjectModel {
        try split(adding: ["Book": [.toOne("sequel", "Book")], "Novel": [.toOne("sequel", "Book")]])
    }

    // A to-one of the splitting hierarchy itself (Book.sequel, and Novel.sequel from it) that
    // reached novels: each reads, through its upgrades, only the books it reaches (a novel
    // sequel is none, as Core Data's inferred mapping leaves it); in place, moved rows unchanged.
    @Test func aToOneOfTheSplittingHierarchyReachingAcrossItIsSplitInPlace() throws {
        let v1 = LibraryModel(bookExtra: { [.toOne("sequel", "Book")] }, titleIndexed: true)
        let (store, identifier) = try Self.linkedStore(v1, [(0, 1), (1, 2), (2, 3), (3, 0)], "sequel")
        for round in 0..<2 {
            let coordinator = try store.coordinator(model: Self.splitWithSequels(), options: Library.migrating)
            #expect(try Self.storeUUID(coordinator) == identifier, "in place")
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            func sequel(_ index: Int, _ entity: String) throws -> String {
                try Self.book(index, context, entity).object(forKey: "sequel")?.value(forKey: "title").stringValue ?? "-"
            }
            #expect(try [sequel(0, "Book"), sequel(1, "Book"), sequel(2, "Novel"), sequel(3, "Novel")] == ["Book 1", "-", "-", "Book 0"], "round \(round)")
            #expect(try context.count(for: Library.request("Book", "sequel == nil")) == 1)
            #expect(try context.count(for: Library.request("Novel", "sequel != nil")) == 1)
            #expect(try context.count(for: Library.request("Novel", "sequel.title == 'Book 0'")) == 1)
            try Library.expectClean(coordinator)
            if round == 0 { try Library.engine(coordinator).compact() }
            try Library.close(coordinator)
        }
    }

    /// The library (version 1) with Author.books ordered: a list in the author's row.
    static func orderedLibrary() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: try LibraryModel(titleIndexed: true).make().entities.map { entity in
            guard entity.name == "Author" else { return LightweightMigrationTests.copy(entity) }
            return EntityDescription(name: "Author", properties: [
                .attribute("name", .string, indexed: true), .toMany("books", "Book", inverse: "author", ordered: true),
            ])
        })
    }

    /// The split library with Author.books ordered, and Author.novels ordered too (or not).
    static func splitOrdered(novelsOrdered: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: try split().entities.map { entity in
            guard entity.name == "Author" else { return LightweightMigrationTests.copy(entity) }
            return EntityDescription(name: "Author", properties: [
                .attribute("name", .string, indexed: true),
                .toMany("books", "Book", inverse: "author", ordered: true),
                .toMany("novels", "Novel", inverse: "author", ordered: novelsOrdered),
            ])
        })
    }

    /// A store of ``orderedLibrary()`` where Le Guin's books are, in order, Book 0, Book 2
    /// (a novel), Book 4 and Book 5 (a novel); Lem's Book 1 and Book 3 (a novel).
    static func orderedStore() throws -> (store: TemporaryStore, identifier: String?) {
        let store = TemporaryStore()
        try Library.populate(try store.coordinator(model: orderedLibrary()), LibraryModel(titleIndexed: true))
        let coordinator = try store.coordinator(model: orderedLibrary())
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let leGuin = try #require(try context.fetch(Library.request("Author", "name == 'Le Guin'")).first)
        for (index, entity) in [(4, "Book"), (5, "Novel")] {
            let book = try context.insertNewObject(forEntityName: entity)
            try book.setValue(.string("Book \(index)"), forKey: "title")
            try book.setValue(leGuin, forKey: "author")
        }
        try context.save()
        #expect(try leGuin.objects(forKey: "books").map { try $0.value(forKey: "title").stringValue ?? "?" } == ["Book 0", "Book 2", "Book 4", "Book 5"])
        let identifier = try storeUUID(coordinator)
        try Library.close(coordinator)
        return (store, identifier)
    }

    /// Each author as `name: books | novels`, titles in the lists' order.
    static func authors(_ coordinator: PersistentStoreCoordinator) throws -> [String] {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var request = FetchRequest(entityName: "Author")
        request.sortDescriptors = [FetchSortDescriptor(keyPath: "name", ascending: true)]
        return try context.fetch(request).map { author in
            // An ordered relationship's titles in its order, another's sorted.
            func titles(_ key: String) throws -> String {
                let titles = try author.objects(forKey: key).map { try $0.value(forKey: "title").stringValue ?? "?" }
                return (author.entity.relationshipsByName[key]?.isOrdered == true ? titles : titles.sorted()).joined(separator: ",")
            }
            return "\(try author.value(forKey: "name").stringValue ?? "?"): \(try titles("books")) | \(try titles("novels"))"
        }
    }

    // An ordered to-many that reached the entity that leaves (Author.books, a list in the
    // author's row) reads, in the rows written before, only the books, in their order; the
    // new ordered inverse of Novel.author (Author.novels) reads the novels from the same list
    // ([ROW-5] `listOf`): in place, no row rewritten; then a save, a compaction and a reopen.
    @Test func anOrderedToManyIntoTheMovedEntityIsSplitByItsUpgradesInPlace() throws {
        let (store, identifier) = try Self.orderedStore()
        let coordinator = try store.coordinator(model: Self.splitOrdered(novelsOrdered: true), options: Library.migrating)
        #expect(try Self.storeUUID(coordinator) == identifier, "in place")
        #expect(try Self.authors(coordinator) == ["Le Guin: Book 0,Book 4 | Book 2,Book 5", "Lem: Book 1 | Book 3"])
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try context.count(for: Library.request("Author", "novels.@count == 2")) == 1)
        #expect(try context.count(for: Library.request("Author", "ANY books.title == 'Book 2'")) == 0)
        let novel = try #require(try context.fetch(Library.request("Novel", "title == 'Book 5'")).first)
        #expect(try novel.object(forKey: "author")?.value(forKey: "name") == "Le Guin")
        try Library.expectClean(coordinator)
        // A new novel of Lem's, saved: Lem's row is written in the new layout with what it read.
        let lem = try #require(try context.fetch(Library.request("Author", "name == 'Lem'")).first)
        let added = try context.insertNewObject(forEntityName: "Novel")
        try added.setValue(.string("Book 6"), forKey: "title")
        try added.setValue(lem, forKey: "author")
        try context.save()
        try Library.engine(coordinator).compact()
        try Library.expectClean(coordinator)
        try Library.close(coordinator)
        let reopened = try store.coordinator(model: Self.splitOrdered(novelsOrdered: true), options: Library.migrating)
        #expect(try Self.authors(reopened) == ["Le Guin: Book 0,Book 4 | Book 2,Book 5", "Lem: Book 1 | Book 3,Book 6"])
        try Library.close(reopened)
    }

    // When the new inverse is an unordered to-many (keys indexing Novel.author, [REL-2]), its
    // keys are pending ([MIG-5]): read from the old lists (novels only) until the background
    // build writes them from the novels' rows; in place, with every build mode, and reopened.
    @Test(arguments: ["background", "synchronous", "deferred"])
    func anOrderedToManyIntoTheMovedEntityWhoseNewInverseIsKeysIsSplitInPlace(build: String) throws {
        let (store, identifier) = try Self.orderedStore()
        var options = Library.migrating
        options[StrataStore.indexBuildOption] = .string(build)
        let expected = ["Le Guin: Book 0,Book 4 | Book 2,Book 5", "Lem: Book 1 | Book 3"]
        let coordinator = try store.coordinator(model: Self.splitOrdered(novelsOrdered: false), options: options)
        #expect(try Self.storeUUID(coordinator) == identifier, "in place")
        #expect(try Self.authors(coordinator) == expected)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try context.count(for: Library.request("Author", "novels.@count == 2")) == 1)
        #expect(try context.count(for: Library.request("Author", "ANY novels.title == 'Book 3'")) == 1)
        try Library.expectClean(coordinator)
        try Library.close(coordinator)
        let reopened = try store.coordinator(model: Self.splitOrdered(novelsOrdered: false), options: Library.migrating)
        #expect(try Self.authors(reopened) == expected)
        try Library.expectClean(reopened)
        try Library.close(reopened)
    }

    /// The split library where Book.related (a many-to-many of books, its own inverse) was
    /// Book's before the split: books keep it among books, reach novels through relatedNovels,
    /// and Novel.related (mapped from it) reaches books, the inverse of relatedNovels.
    static func splitRelated() throws -> ManagedObjectModel {
        try split(adding: [
            "Book": [.toMany("related", "Book", inverse: "related"), .toMany("relatedNovels", "Novel", inverse: "related")],
            "Novel": [.toMany("related", "Book", inverse: "relatedNovels")],
        ])
    }

    // A keyed relationship of the splitting hierarchy itself that reached across it (a
    // many-to-many of books, keys in both directions): each key goes to the relationship of
    // its owner that reaches its member now, or to the inverse of the member's, or is dropped
    // (novel to novel: Novel.related reaches books only, as Core Data's inferred mapping
    // leaves it); in place, and the same after a reopen. With more novels than books, the
    // novels keep Book's key space and the books (Book.related's declaring entity) move.
    @Test(arguments: [false, true])
    func aManyToManyOfTheSplittingHierarchyReachingAcrossItIsSplitInPlace(moreNovels: Bool) throws {
        let v1 = LibraryModel(bookExtra: { [.toMany("related", "Book", inverse: "related")] }, titleIndexed: true)
        let (store, identifier) = try Self.linkedStore(v1, [(0, 1), (0, 2), (2, 3), (1, 3)], "related", moreNovels: moreNovels)
        for round in 0..<2 {
            let coordinator = try store.coordinator(model: Self.splitRelated(), options: Library.migrating)
            #expect(try Self.storeUUID(coordinator) == identifier, "in place")
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            func titles(_ index: Int, _ entity: String, _ key: String) throws -> String {
                try Self.book(index, context, entity).objects(forKey: key).map { try $0.value(forKey: "title").stringValue ?? "?" }.sorted().joined(separator: ",")
            }
            #expect(try [titles(0, "Book", "related"), titles(0, "Book", "relatedNovels"), titles(1, "Book", "related"), titles(1, "Book", "relatedNovels")]
                == ["Book 1", "Book 2", "Book 0", "Book 3"], "round \(round)")
            #expect(try [titles(2, "Novel", "related"), titles(3, "Novel", "related")] == ["Book 0", "Book 1"], "round \(round)")
            #expect(try context.count(for: Library.request("Book", "ANY relatedNovels.title == 'Book 3'")) == 1)
            #expect(try context.count(for: Library.request("Novel", "related.@count == 1")) == 2)
            #expect(try PendingRelationshipKeyTests.storedRecord(coordinator).keySpace(ofRoot: moreNovels ? "Novel" : "Book") == "Book")
            try Library.expectClean(coordinator)
            try Library.close(coordinator)
        }
    }

    /// The split library where Book.sequel (to-one) and Book.prequels (its inverse, keys
    /// indexing the to-one) were Book's before: among books as before, and across the two
    /// hierarchies through novelSequel / novelPrequels (Book) and sequel / prequels (Novel).
    static func splitSequelTree() throws -> ManagedObjectModel {
        try split(adding: [
            "Book": [
                .toOne("sequel", "Book", inverse: "prequels"), .toMany("prequels", "Book", inverse: "sequel"),
                .toOne("novelSequel", "Novel", inverse: "prequels"), .toMany("novelPrequels", "Novel", inverse: "sequel"),
            ],
            "Novel": [.toOne("sequel", "Book", inverse: "novelPrequels"), .toMany("prequels", "Book", inverse: "novelSequel")],
        ])
    }

    // A one-to-many of the splitting hierarchy itself (Book.prequels: keys indexing the to-one
    // Book.sequel) that reached across it: the to-ones read through their upgrades, the new
    // to-one Book.novelSequel reads the old sequel field for novels, and each key goes to the
    // relationship that reaches its member now (Novel.prequels, Book.novelPrequels) or is
    // dropped (a novel's novel sequel); in place, whichever part keeps Book's key space.
    @Test(arguments: [false, true])
    func aOneToManyOfTheSplittingHierarchyReachingAcrossItIsSplitInPlace(moreNovels: Bool) throws {
        let v1 = LibraryModel(bookExtra: { [.toOne("sequel", "Book", inverse: "prequels"), .toMany("prequels", "Book", inverse: "sequel")] }, titleIndexed: true)
        let (store, identifier) = try Self.linkedStore(v1, [(0, 1), (1, 2), (2, 3), (3, 0)], "sequel", moreNovels: moreNovels)
        for round in 0..<2 {
            let coordinator = try store.coordinator(model: Self.splitSequelTree(), options: Library.migrating)
            #expect(try Self.storeUUID(coordinator) == identifier, "in place")
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            func entity(_ index: Int) -> String { index >= 2 ? "Novel" : "Book" }
            func one(_ index: Int, _ key: String) throws -> String {
                try Self.book(index, context, entity(index)).object(forKey: key)?.value(forKey: "title").stringValue ?? "-"
            }
            func many(_ index: Int, _ key: String) throws -> String {
                try Self.book(index, context, entity(index)).objects(forKey: key).map { try $0.value(forKey: "title").stringValue ?? "?" }.sorted().joined(separator: ",")
            }
            #expect(try [one(0, "sequel"), one(1, "sequel"), one(1, "novelSequel"), one(2, "sequel"), one(3, "sequel")]
                == ["Book 1", "-", "Book 2", "-", "Book 0"], "round \(round)")
            #expect(try [many(0, "prequels"), many(0, "novelPrequels"), many(1, "prequels"), many(2, "prequels"), many(3, "prequels")]
                == ["", "Book 3", "Book 0", "Book 1", ""], "round \(round)")
            #expect(try context.count(for: Library.request("Book", "novelPrequels.@count == 1")) == 1)
            try Library.expectClean(coordinator)
            try Library.close(coordinator)
        }
    }

    // Novel's tags (keys of Book.tags, whose name Book keeps) made ordered as it leaves: the
    // lists are written into the novels' rows in the migration, and those rows move as
    // written; in place, reopened.
    @Test func aLeavingEntitysInheritedToManyMadeOrderedIsSplitInPlaceWithItsLists() throws {
        let (store, identifier) = try Self.linkedStore(LibraryModel(titleIndexed: true), [], "author")
        for round in 0..<2 {
            let coordinator = try store.coordinator(model: Self.split(novelTagsOrdered: true), options: Library.migrating)
            #expect(try Self.storeUUID(coordinator) == identifier, "in place")
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            #expect(try [2, 3].map { try Self.book($0, context, "Novel").objects(forKey: "tags").map { try $0.value(forKey: "label").stringValue ?? "?" } } == [["even"], ["odd"]], "round \(round)")
            let odd = try #require(try context.fetch(Library.request("Tag", "label == 'odd'")).first)
            #expect(try odd.objects(forKey: "novels").map { try $0.value(forKey: "title").stringValue ?? "?" } == ["Book 3"])
            #expect(try odd.objects(forKey: "books").map { try $0.value(forKey: "title").stringValue ?? "?" } == ["Book 1"])
            try Library.expectClean(coordinator)
            try Library.close(coordinator)
        }
    }

    /// `base` with Novel's own to-many `awards` (no inverse: keys its owners write) of a new
    /// entity Award, ordered or not.
    static func withAwards(_ base: ManagedObjectModel, ordered: Bool) throws -> ManagedObjectModel {
        try split(
            adding: ["Novel": [.toMany("awards", "Award", ordered: ordered)]],
            entities: [EntityDescription(name: "Award", properties: [.attribute("name", .string)])], to: base)
    }

    // Novel's own awards (keys in Book's key space) made ordered as it leaves: its list cannot
    // be read from keys of the key space it leaves ([MIG-5]), so the lists are written into
    // the novels' rows in the migration, which move as written; in place.
    @Test func aLeavingEntitysToManyMadeOrderedIsSplitInPlaceWithItsLists() throws {
        let store = TemporaryStore()
        let v1 = try Self.withAwards(LibraryModel(titleIndexed: true).make(), ordered: false)
        try Library.populate(try store.coordinator(model: v1), LibraryModel(titleIndexed: true))
        let seeded = try store.coordinator(model: Self.withAwards(LibraryModel(titleIndexed: true).make(), ordered: false))
        let identifier = try Self.storeUUID(seeded)
        let seedContext = ManagedObjectContext(persistentStoreCoordinator: seeded)
        let award = try seedContext.insertNewObject(forEntityName: "Award")
        try award.setValue("Hugo", forKey: "name")
        try Self.book(3, seedContext, "Novel").addObject(award, toRelationship: "awards")
        try seedContext.save()
        try Library.close(seeded)
        let coordinator = try store.coordinator(model: Self.withAwards(Self.split(), ordered: true), options: Library.migrating)
        #expect(try Self.storeUUID(coordinator) == identifier, "in place")
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try Self.book(3, context, "Novel").objects(forKey: "awards").map { try $0.value(forKey: "name").stringValue ?? "?" } == ["Hugo"])
        try Library.expectClean(coordinator)
        try Library.close(coordinator)
    }

    // Author.books (keys) made ordered in the same migration as Novel leaves: its list would
    // be read from keys that name novels too, and Author.novels would need them; StrataStore
    // migrates such a split by copy ([MIG-3]).
    @Test func aToManyMadeOrderedAsItLosesTheMovedEntityIsSplitByCopy() throws {
        let (store, identifier) = try Self.linkedStore(LibraryModel(titleIndexed: true), [], "author")
        let model = try ManagedObjectModel(entities: try Self.split().entities.map { entity in
            let copy = LightweightMigrationTests.copy(entity)
            guard entity.name == "Author" else { return copy }
            return EntityDescription(name: "Author", properties: [
                .attribute("name", .string, indexed: true),
                .toMany("books", "Book", inverse: "author", ordered: true), .toMany("novels", "Novel", inverse: "author"),
            ])
        })
        let coordinator = try store.coordinator(model: model, options: Library.migrating)
        #expect(try Self.storeUUID(coordinator) != identifier, "copied: a new store")
        #expect(try Self.authors(coordinator) == ["Le Guin: Book 0 | Book 2", "Lem: Book 1 | Book 3"])
        try Library.expectClean(coordinator)
        try Library.close(coordinator)
    }
}

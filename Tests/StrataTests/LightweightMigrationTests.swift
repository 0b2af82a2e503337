import Foundation
import ObjectGraph
@testable import Strata
import StrataEngine
import Testing

/// Version 1 of the library model these tests migrate, and its variants: Author 1—* Book
/// (a foreign-key index of the books' to-one, [REL-2]), Book *—* Tag (keys both ways), Novel a
/// subentity of Book.
struct LibraryModel {
    /// Made anew for each model: a property belongs to one model.
    var bookExtra: @Sendable () -> [PropertyDescription] = { [] }
    var titleIndexed = false
    var titleName = "title"
    var titleIdentifier: String? = nil
    var pagesOptional = true
    var pagesDefault: AttributeValue = .null
    var tagsName = "tags"
    var tagsIdentifier: String? = nil
    var tagsOrdered = false
    var novelName = "Novel"
    var novelIdentifier: String? = nil
    var withTags = true
    var withNovel = true
    var extraEntities: @Sendable () -> [EntityDescription] = { [] }
    var authorName = "Author"
    var authorIdentifier: String? = nil
    var genreKept = true
    var authorNameIndexed = true
    var authorNameUnique = false
    /// Whether Author has an abstract superentity, Person (a new level above a root).
    var authorUnderPerson = false
    var withTagRelationship = true
    /// Whether Book.author is a to-many (its inverse Author.books making a many-to-many).
    var authorToMany = false

    func make() throws -> ManagedObjectModel {
        var book: [PropertyDescription] = [
            .attribute(titleName, .string, optional: false, indexed: titleIndexed, renamingIdentifier: titleIdentifier),
            .attribute("pages", .integer32, optional: pagesOptional, defaultValue: pagesDefault),
            authorToMany ? .toMany("author", authorName, inverse: "books") : .toOne("author", authorName, inverse: "books"),
        ]
        if withTags && withTagRelationship { book.append(.toMany(tagsName, "Tag", inverse: "books", ordered: tagsOrdered, renamingIdentifier: tagsIdentifier)) }
        var entities = [
            EntityDescription(name: authorName, superentity: authorUnderPerson ? "Person" : nil, properties: [
                .attribute("name", .string, indexed: authorNameIndexed),
                .toMany("books", "Book", inverse: "author"),
            ], uniquenessConstraints: authorNameUnique ? [["name"]] : [], renamingIdentifier: authorIdentifier),
            EntityDescription(name: "Book", properties: book + bookExtra()),
        ]
        if withNovel {
            entities.append(
                EntityDescription(
                    name: novelName, superentity: "Book", properties: genreKept ? [.attribute("genre", .string)] : [], renamingIdentifier: novelIdentifier))
        }
        if withTags {
            entities.append(EntityDescription(name: "Tag", properties: [.attribute("label", .string)] + (withTagRelationship ? [
                .toMany("books", "Book", inverse: tagsName),
            ] : [])))
        }
        if authorUnderPerson { entities.append(EntityDescription(name: "Person", isAbstract: true)) }
        return try ManagedObjectModel(entities: entities + extraEntities())
    }
}

/// Issue 17, SPEC.md [MIG-1] [MIG-2]: a store opened with a model that changed in a way
/// lightweight migration infers is migrated in place, at the cost of writing its two records:
/// rows stay in the layout they were written in and are read through it.
@Suite struct LightweightMigrationTests {
    static let migrating: [String: AttributeValue] = [
        PersistentStore.migratePersistentStoresAutomaticallyOption: .bool(true),
        PersistentStore.inferMappingModelAutomaticallyOption: .bool(true),
    ]

    /// A store of `model` (version 1 by default) with 2 authors, 4 books (2 of them novels), 2
    /// tags: book i has i * 100 pages (book 0 none), and tags by parity.
    static func savedStore(_ model: LibraryModel = LibraryModel()) throws -> TemporaryStore {
        let store = TemporaryStore()
        try populate(try store.coordinator(model: model.make()), model)
        return store
    }

    /// Saves the library into the store of `coordinator` and removes the store.
    static func populate(_ coordinator: PersistentStoreCoordinator, _ model: LibraryModel) throws {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let authors = try ["Le Guin", "Lem"].map { name in
            let author = try context.insertNewObject(forEntityName: model.authorName)
            try author.setValue(.string(name), forKey: "name")
            return author
        }
        let tags = try ["even", "odd"].map { label in
            let tag = try context.insertNewObject(forEntityName: "Tag")
            try tag.setValue(.string(label), forKey: "label")
            return tag
        }
        for index in 0..<4 {
            let book = try context.insertNewObject(forEntityName: index >= 2 ? model.novelName : "Book")
            try book.setValue(.string("Book \(index)"), forKey: model.titleName)
            if index > 0 { try book.setValue(.int64(Int64(index * 100)), forKey: "pages") }
            if model.authorToMany {
                try book.addObject(authors[index % 2], toRelationship: "author")
            } else {
                try book.setValue(authors[index % 2], forKey: "author")
            }
            if model.withTagRelationship { try book.addObject(tags[index % 2], toRelationship: model.tagsName) }
            if index >= 2 && model.genreKept { try book.setValue("sf", forKey: "genre") }
        }
        try context.save()
        for persistent in coordinator.persistentStores { try coordinator.remove(persistent) }
    }

    /// A new directory holding a library store of `type` and `model` (version 1 by default):
    /// the directory (the caller removes it) and the store's URL.
    static func libraryFile(_ type: PersistentStore.StoreType, _ model: LibraryModel = LibraryModel()) throws -> (directory: URL, url: URL) {
        StrataStore.register()
        BinaryStore.register()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("strata-library-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let url = directory.appendingPathComponent(type == .strata ? "store" : "store.bin")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try model.make())
        try coordinator.addPersistentStore(type: type, at: url)
        try populate(coordinator, model)
        return (directory, url)
    }

    /// Lightweight changes, each with the model after it and how a book reads after it (from
    /// ``version1Books``).
    static let changes: [(label: String, model: LibraryModel, books: [String])] = [
        ("an attribute added", LibraryModel(bookExtra: { [.attribute("isbn", .string)] }), version1Books),
        ("an attribute renamed", LibraryModel(titleName: "name", titleIdentifier: "title"), version1Books),
        ("an indexed attribute", LibraryModel(titleIndexed: true), version1Books),
        ("required with a default", LibraryModel(pagesOptional: false, pagesDefault: .int64(1)), ["Book 0|1|Le Guin|even|Book"] + version1Books.dropFirst()),
        ("a subentity renamed", LibraryModel(novelName: "Fiction", novelIdentifier: "Novel"), version1Books.map { $0.replacingOccurrences(of: "Novel", with: "Fiction") }),
        ("a root entity renamed", LibraryModel(authorName: "Writer", authorIdentifier: "Author"), version1Books),
        ("a many-to-many renamed", LibraryModel(tagsName: "labels", tagsIdentifier: "tags"), version1Books),
        ("an entity removed", LibraryModel(withTags: false), version1Books.map { $0.replacingOccurrences(of: "|even|", with: "|-|").replacingOccurrences(of: "|odd|", with: "|-|") }),
        ("a to-many made ordered", LibraryModel(tagsOrdered: true), version1Books),
        ("a subentity removed", LibraryModel(withNovel: false), Array(version1Books.prefix(2))),
    ]

    // Each lightweight change on each store type that keeps files: the data written before
    // reads back after, and once more after reopening.
    @Test(arguments: [PersistentStore.StoreType.strata, .binary], 0..<10)
    func everyLightweightChangeOnEveryStoreType(type: PersistentStore.StoreType, change: Int) throws {
        let (label, model, books) = Self.changes[change]
        let (directory, url) = try Self.libraryFile(type)
        defer { try? FileManager.default.removeItem(at: directory) }
        for round in 0..<2 {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: try model.make())
            try coordinator.addPersistentStore(type: type, at: url, options: Self.migrating)
            try (coordinator.persistentStores.first as? StrataStore)?.waitForIndexBuild()
            #expect(try Self.books(coordinator, model) == books, "\(label) on \(type), round \(round)")
            if let engine = (coordinator.persistentStores.first as? StrataStore)?.storageEngine {
                #expect(try ObjectChecker.check(engine: engine, repair: false).problems.isEmpty, "\(label)")
            }
            try Self.close(coordinator)
        }
    }

    /// The lightweight changes ``changes`` leaves out, each from the model before it (version 1
    /// but where the change is a removal of something version 1 lacks) to the one after it,
    /// with how a book reads after it.
    static let otherChanges: [(label: String, from: LibraryModel, to: LibraryModel, books: [String])] = [
        ("an attribute removed", LibraryModel(), LibraryModel(genreKept: false), version1Books),
        ("an entity added", LibraryModel(), LibraryModel(extraEntities: { [EntityDescription(name: "Shelf", properties: [.attribute("code", .string)])] }), version1Books),
        ("a relationship added", LibraryModel(), LibraryModel(bookExtra: { [.toMany("related", "Book")] }), version1Books),
        ("a relationship removed", LibraryModel(), LibraryModel(withTagRelationship: false), version1Books.map {
            $0.replacingOccurrences(of: "|even|", with: "|-|").replacingOccurrences(of: "|odd|", with: "|-|")
        }),
        ("a default changed", LibraryModel(), LibraryModel(pagesDefault: .int64(7)), version1Books),
        ("an index removed", LibraryModel(), LibraryModel(authorNameIndexed: false), version1Books),
        ("a uniqueness constraint added", LibraryModel(), LibraryModel(authorNameUnique: true), version1Books),
        ("a uniqueness constraint removed", LibraryModel(authorNameUnique: true), LibraryModel(), version1Books),
        ("a superentity level added", LibraryModel(), LibraryModel(authorUnderPerson: true), version1Books),
        ("a to-one made to-many", LibraryModel(), LibraryModel(authorToMany: true), version1Books),
    ]

    // A uniqueness constraint added over values two objects share fails the migration on every
    // store type, as Core Data's does (NSMigrationError, 134110: "constraint violation during
    // attempted migration"), and leaves the store as it was: every file byte for byte, and the
    // old model opens it with both objects.
    @Test(arguments: [PersistentStore.StoreType.strata, .binary])
    func aConstraintOverSharedValuesFailsTheMigrationAndChangesNothing(type: PersistentStore.StoreType) throws {
        let (directory, url) = try Self.libraryFile(type)
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: try LibraryModel().make())
            try coordinator.addPersistentStore(type: type, at: url)
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            try context.insertNewObject(forEntityName: "Author").setValue("Lem", forKey: "name")
            try context.save()
            try Self.close(coordinator)
        }
        func files() throws -> [String: Data] {
            var contents: [String: Data] = [:]
            for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
                let path = directory.appendingPathComponent(name)
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: path.path, isDirectory: &isDirectory), isDirectory.boolValue {
                    for inner in try FileManager.default.contentsOfDirectory(atPath: path.path) {
                        contents[name + "/" + inner] = try Data(contentsOf: path.appendingPathComponent(inner))
                    }
                } else {
                    contents[name] = try Data(contentsOf: path)
                }
            }
            return contents
        }
        let before = try files()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try LibraryModel(authorNameUnique: true).make())
        let error = try #require(throws: ObjectGraphError.self) { try coordinator.addPersistentStore(type: type, at: url, options: Self.migrating) }
        #expect(error.code == .migrationFailed && error.code.cocoaErrorCode == 134110, "\(error)")
        #expect(error.message.contains("onstraint violation during attempted migration"), "\(error.message)")
        #expect(error.entityName == "Author" && error.key == "name", "\(error)")
        #expect(coordinator.persistentStores.isEmpty)
        #expect(try files() == before, "nothing was written")
        let old = PersistentStoreCoordinator(managedObjectModel: try LibraryModel().make())
        try old.addPersistentStore(type: type, at: url)
        let context = ManagedObjectContext(persistentStoreCoordinator: old)
        var request = FetchRequest(entityName: "Author")
        request.predicate = try FetchPredicate(format: "name == 'Lem'")
        #expect(try context.count(for: request) == 2)
        try Self.close(old)
    }

    // Issue 17's other lightweight changes on each store type that keeps files: the data
    // written before reads back after, again after reopening, and (StrataStore) after a full
    // compaction rewrote the rows; fsck finds nothing. A new object saved under the new model
    // reads back with them.
    @Test(arguments: [PersistentStore.StoreType.strata, .binary], 0..<10)
    func everyOtherLightweightChangeOnEveryStoreType(type: PersistentStore.StoreType, change: Int) throws {
        let (label, from, model, books) = Self.otherChanges[change]
        let (directory, url) = try Self.libraryFile(type, from)
        defer { try? FileManager.default.removeItem(at: directory) }
        var expected = books
        for round in 0..<3 {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: try model.make())
            try coordinator.addPersistentStore(type: type, at: url, options: Self.migrating)
            let strata = coordinator.persistentStores.first as? StrataStore
            try strata?.waitForIndexBuild()
            if round == 2, let engine = strata?.storageEngine {
                try engine.flush()
                try engine.compact(.full)
            }
            #expect(try Self.books(coordinator, model) == expected, "\(label) on \(type), round \(round)")
            if let engine = strata?.storageEngine {
                #expect(try ObjectChecker.check(engine: engine, repair: false).problems.isEmpty, "\(label)")
            }
            if round == 0 {
                // A book saved under the new model, by a new author (a constraint holds).
                let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
                let author = try context.insertNewObject(forEntityName: model.authorName)
                try author.setValue("Tiptree", forKey: "name")
                let book = try context.insertNewObject(forEntityName: "Book")
                try book.setValue("Book 9", forKey: model.titleName)
                try book.setValue(.int64(900), forKey: "pages")
                if model.authorToMany { try book.addObject(author, toRelationship: "author") } else { try book.setValue(author, forKey: "author") }
                try context.save()
                expected.append("Book 9|900|Tiptree|\(model.withTags && model.withTagRelationship ? "" : "-")|Book")
            }
            try Self.close(coordinator)
        }
    }

    /// The store opened with `model` and the migration options (read-only when asked).
    static func open(_ store: TemporaryStore, _ model: LibraryModel, readOnly: Bool = false) throws -> PersistentStoreCoordinator {
        var options = migrating
        if readOnly { options[PersistentStore.readOnlyOption] = .bool(true) }
        return try store.coordinator(model: model.make(), options: options)
    }

    static func close(_ coordinator: PersistentStoreCoordinator) throws {
        for persistent in coordinator.persistentStores { try coordinator.remove(persistent) }
    }

    /// Every book as `title|pages|author|tags|entity`, by title.
    static func books(_ coordinator: PersistentStoreCoordinator, _ model: LibraryModel) throws -> [String] {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var request = FetchRequest(entityName: "Book")
        request.sortDescriptors = [FetchSortDescriptor(keyPath: model.titleName, ascending: true)]
        return try context.fetch(request).map { book in
            let pages = try book.value(forKey: "pages").integer.map(String.init) ?? "nil"
            let author = model.authorToMany
                ? try book.objects(forKey: "author").map { try $0.value(forKey: "name").stringValue ?? "?" }.sorted().joined(separator: ",")
                : try book.object(forKey: "author")?.value(forKey: "name").stringValue ?? "nil"
            let tags = model.withTags && model.withTagRelationship ? try book.objects(forKey: model.tagsName).map { try $0.value(forKey: "label").stringValue ?? "?" }.sorted().joined(separator: ",") : "-"
            return "\(try book.value(forKey: model.titleName).stringValue ?? "nil")|\(pages)|\(author)|\(tags)|\(book.entity.name)"
        }
    }

    static let version1Books = ["Book 0|nil|Le Guin|even|Book", "Book 1|100|Lem|odd|Book", "Book 2|200|Le Guin|even|Novel", "Book 3|300|Lem|odd|Novel"]

    static func request(_ entity: String, _ format: String) throws -> FetchRequest {
        var request = FetchRequest(entityName: entity)
        request.predicate = try FetchPredicate(format: format)
        return request
    }

    static func engine(_ coordinator: PersistentStoreCoordinator) throws -> Engine {
        try #require((coordinator.persistentStores.first as? StrataStore)?.storageEngine)
    }

    static func expectClean(_ coordinator: PersistentStoreCoordinator, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let report = try ObjectChecker.check(engine: try engine(coordinator), repair: false)
        #expect(report.problems.isEmpty, "\(report.problems)", sourceLocation: sourceLocation)
    }

    // [MIG-1] The common case: an optional attribute and one with a default added. The old rows
    // read the defaults, new saves write the new layout, and after reopening (and a
    // compaction) both layouts read back; fsck finds nothing wrong.
    @Test func anAddedAttributeReadsItsDefaultFromRowsWrittenBefore() throws {
        let store = try Self.savedStore()
        let v2 = LibraryModel(bookExtra: { [.attribute("isbn", .string), .attribute("rating", .integer16, optional: false, defaultValue: 3)] })
        let coordinator = try Self.open(store, v2)
        #expect(try Self.books(coordinator, v2) == Self.version1Books)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var request = FetchRequest(entityName: "Book")
        request.sortDescriptors = [FetchSortDescriptor(keyPath: "title", ascending: true)]
        let fetched = try context.fetch(request)
        #expect(try fetched.map { try $0.value(forKey: "rating") } == Array(repeating: .int16(3), count: 4))
        #expect(try fetched.map { try $0.value(forKey: "isbn") } == Array(repeating: .null, count: 4))
        // A predicate on the new attribute over old rows.
        #expect(try context.count(for: Self.request("Book", "rating == 3")) == 4)
        try fetched[1].setValue(.string("978-0"), forKey: "isbn")
        try fetched[1].setValue(.int64(5), forKey: "rating")
        let added = try context.insertNewObject(forEntityName: "Novel")
        try added.setValue("Book 4", forKey: "title")
        try context.save()
        try Self.expectClean(coordinator)
        try Self.close(coordinator)

        let reopened = try Self.open(store, v2)
        let again = ManagedObjectContext(persistentStoreCoordinator: reopened)
        let ratings = try again.fetch(request).map { "\(try $0.value(forKey: "title").stringValue ?? "")=\(try $0.value(forKey: "rating").integer ?? -1)" }
        #expect(ratings == ["Book 0=3", "Book 1=5", "Book 2=3", "Book 3=3", "Book 4=3"])
        #expect(try again.count(for: Self.request("Book", "isbn == '978-0'")) == 1)
        try Self.engine(reopened).compact()
        #expect(try again.count(for: Self.request("Book", "rating == 3")) == 4)
        try Self.expectClean(reopened)
        try Self.close(reopened)
    }

    // [MIG-2] [CMP-7] Compaction rewrites rows of older layouts in the newest one (same
    // versions), and `strata compact` then drops the older version from the model record.
    @Test func compactionRewritesOldRowsAndTheOfflineCompactionDropsTheirVersion() throws {
        let store = try Self.savedStore()
        let v2 = LibraryModel(bookExtra: { [.attribute("isbn", .string, defaultValue: "none")] })
        let coordinator = try Self.open(store, v2)
        let engine = try Self.engine(coordinator)
        try engine.flush()
        try engine.compact(.full)
        let survey = try StoreSurvey.survey(try engine.snapshot())
        let layout = try StoreLayout(record: try ModelRecord.decodeRecord(try #require(try engine.get(KeyLayout.modelKey))))
        for kind in survey.rows.keys {
            #expect(layout.layoutsByNumber[Int(kind.number)]?.layoutID == kind.layoutID, "\(kind) is in the newest layout")
        }
        #expect(try Self.books(coordinator, v2) == Self.version1Books)
        try Self.expectClean(coordinator)
        try Self.close(coordinator)

        let report = try OfflineCompaction.run(at: store.url.path, policy: .full)
        #expect(report.modelVersionsDropped == 1)
        let reopened = try Self.open(store, v2)
        #expect(try Self.books(reopened, v2) == Self.version1Books)
        let context = ManagedObjectContext(persistentStoreCoordinator: reopened)
        #expect(try context.count(for: Self.request("Book", "isbn == 'none'")) == 4)
        let record = try ModelRecord.decodeRecord(try #require(try Self.engine(reopened).get(KeyLayout.modelKey)))
        #expect(record.versions.count == 1)
        try Self.expectClean(reopened)
        try Self.close(reopened)
    }

    // [ROW-5] [MIG-2] A model record with older versions and their upgrades, every byte damaged
    // or cut: it decodes or throws, and a layout made from what decodes reads an old row or
    // throws; nothing traps.
    @Test func damagedMigratedModelRecordsNeverTrap() throws {
        let store = try Self.savedStore()
        let v2 = LibraryModel(
            bookExtra: { [.attribute("isbn", .string, defaultValue: "none"), .attribute("rating", .integer16, optional: false, defaultValue: 3)] },
            titleName: "name", titleIdentifier: "title", pagesOptional: false, pagesDefault: .int64(1))
        let coordinator = try Self.open(store, v2)
        let engine = try Self.engine(coordinator)
        let record = try #require(try engine.get(KeyLayout.modelKey))
        let decoded = try ModelRecord.decodeRecord(record)
        #expect(decoded.versions.count == 2 && !decoded.versions[1].upgrades.isEmpty)
        // An old row of Book, as the store holds it.
        var oldRow: [UInt8]? = nil
        try engine.snapshot().forEach(from: KeyLayout.rowPrefix(root: "Book"), to: KeyLayout.rowPrefixEnd(root: "Book")) { _, value in
            oldRow = value
            return false
        }
        let row = try #require(oldRow)
        #expect(try StoredRow.decode(row, store: try StoreLayout(record: decoded), context: "row").attributes["rating"] == .int16(3))
        try Self.close(coordinator)
        var thrown = 0, decodedVariants = 0
        for bytes in RowDecoderRobustnessTests.variants(of: record) {
            do {
                let layout = try StoreLayout(record: try ModelRecord.decodeRecord(bytes))
                decodedVariants += 1
                _ = try? StoredRow.decode(row, store: layout, context: "row")
            } catch {
                thrown += 1
            }
        }
        #expect(thrown > 0 && decodedVariants > 0)
    }

    // [MIG-1] Opening after a lightweight change writes only the two records: no row is rewritten.
    @Test func theMigrationWritesTheRecordsAndNoRow() throws {
        let store = try Self.savedStore()
        let before = try StoreSurvey.survey(try {
            let coordinator = try store.coordinator(model: LibraryModel().make())
            defer { try? Self.close(coordinator) }
            return try Self.engine(coordinator).snapshot()
        }())
        let coordinator = try Self.open(store, LibraryModel(bookExtra: { [.attribute("isbn", .string)] }))
        let after = try StoreSurvey.survey(try Self.engine(coordinator).snapshot())
        #expect(after.rows == before.rows, "every row keeps its layout")
        let record = try ModelRecord.decodeRecord(try #require(try Self.engine(coordinator).get(KeyLayout.modelKey)))
        #expect(record.versions.count == 2, "the old version is kept for its rows")
        try Self.close(coordinator)
    }

    @Test func aRemovedAttributeIsNoLongerReadAndRowsStillDecode() throws {
        let store = try Self.savedStore(LibraryModel(bookExtra: { [.attribute("isbn", .string)] }))
        let v2 = LibraryModel()
        let coordinator = try Self.open(store, v2)
        #expect(try Self.books(coordinator, v2) == Self.version1Books)
        try Self.expectClean(coordinator)
        try Self.close(coordinator)
    }

    // A renamed attribute keeps its values, through its renaming identifier; an index on it is
    // rebuilt under its new name ([IDX-S6]) and serves fetches.
    @Test(arguments: [false, true])
    func aRenamedAttributeKeepsItsValues(indexed: Bool) throws {
        let store = try Self.savedStore(LibraryModel(titleIndexed: indexed))
        let v2 = LibraryModel(titleIndexed: indexed, titleName: "name", titleIdentifier: "title")
        let coordinator = try Self.open(store, v2)
        #expect(try Self.books(coordinator, v2) == Self.version1Books)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try context.fetch(Self.request("Book", "name == 'Book 2'")).map { try $0.value(forKey: "name") } == ["Book 2"])
        try (coordinator.persistentStores.first as? StrataStore)?.waitForIndexBuild()
        #expect(try context.fetch(Self.request("Book", "name == 'Book 2'")).map { try $0.value(forKey: "name") } == ["Book 2"])
        let engine = try Self.engine(coordinator)
        let newIndex = IndexKey.prefix(root: "Book", attribute: "name"), oldIndex = IndexKey.prefix(root: "Book", attribute: "title")
        #expect(try engine.snapshot().countKeys(from: newIndex, to: StrataStore.prefixEnd(newIndex)) == (indexed ? 4 : 0))
        #expect(try engine.snapshot().countKeys(from: oldIndex, to: StrataStore.prefixEnd(oldIndex)) == 0)
        try Self.expectClean(coordinator)
        try Self.close(coordinator)
    }

    @Test func optionalToRequiredWithADefaultReadsTheDefaultForNulls() throws {
        let store = try Self.savedStore()
        let v2 = LibraryModel(pagesOptional: false, pagesDefault: .int64(1))
        let coordinator = try Self.open(store, v2)
        #expect(try Self.books(coordinator, v2).first == "Book 0|1|Le Guin|even|Book")
        // The object validates and saves: its value is the default.
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let book = try #require(try context.fetch(Self.request("Book", "title == 'Book 0'")).first)
        try book.setValue("Book 0 revised", forKey: "title")
        try context.save()
        try Self.close(coordinator)
    }

    // Entity numbers ([ROW-1]) are the model record's, not name order: an entity added whose
    // name sorts first takes a new number, and every stored reference still resolves.
    @Test func anAddedEntityTakesANewNumberAndReferencesStillResolve() throws {
        let store = try Self.savedStore()
        let v2 = LibraryModel(extraEntities: { [EntityDescription(name: "Aardvark", properties: [.attribute("name", .string)])] })
        let coordinator = try Self.open(store, v2)
        #expect(try Self.books(coordinator, v2) == Self.version1Books)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let aardvark = try context.insertNewObject(forEntityName: "Aardvark")
        try aardvark.setValue("first", forKey: "name")
        try context.save()
        let record = try ModelRecord.decodeRecord(try #require(try Self.engine(coordinator).get(KeyLayout.modelKey)))
        #expect(record.current.numbers["Aardvark"] == 4, "after Author 0, Book 1, Novel 2, Tag 3")
        #expect(record.current.numbers["Author"] == 0)
        try Self.expectClean(coordinator)
        try Self.close(coordinator)
        let reopened = try Self.open(store, v2)
        #expect(try Self.books(reopened, v2) == Self.version1Books)
        let context2 = ManagedObjectContext(persistentStoreCoordinator: reopened)
        #expect(try names(fetch("Aardvark", in: context2)) == ["first"])
        try Self.close(reopened)
    }

    // A removed subentity's rows go, and with them their index entries and every relationship
    // key naming them (its author's one-to-many, its tags' many-to-many): counts through the
    // relationships and the indexes agree with the objects left.
    @Test func aRemovedSubentityLosesItsRowsAndEveryKeyNamingThem() throws {
        let store = try Self.savedStore(LibraryModel(titleIndexed: true))
        let v2 = LibraryModel(titleIndexed: true, withNovel: false)
        let coordinator = try Self.open(store, v2)
        #expect(try Self.books(coordinator, v2) == Array(Self.version1Books.prefix(2)))
        #expect(try Self.count(coordinator, "Author", "books.@count == 1") == 2)
        #expect(try Self.count(coordinator, "Tag", "books.@count == 1") == 2)
        #expect(try Self.count(coordinator, "Book", "title == 'Book 2'") == 0)
        #expect(try Self.count(coordinator, "Book", "title BEGINSWITH 'Book'") == 2)
        try Self.expectClean(coordinator)
        try Self.close(coordinator)
    }

    static func count(_ coordinator: PersistentStoreCoordinator, _ entity: String, _ format: String) throws -> Int {
        try ManagedObjectContext(persistentStoreCoordinator: coordinator).count(for: request(entity, format))
    }

    @Test func aRemovedEntityLosesItsRowsAndKeys() throws {
        let store = try Self.savedStore()
        let v2 = LibraryModel(withTags: false)
        let coordinator = try Self.open(store, v2)
        #expect(try Self.books(coordinator, v2) == Self.version1Books.map { $0.replacingOccurrences(of: "|even|", with: "|-|").replacingOccurrences(of: "|odd|", with: "|-|") })
        // Its keys are retired and deleted in the background ([MIG-4]).
        try #require(coordinator.persistentStores.first as? StrataStore).waitForIndexBuild()
        let engine = try Self.engine(coordinator)
        #expect(try engine.snapshot().countKeys(from: KeyLayout.rowPrefix(root: "Tag"), to: KeyLayout.rowPrefixEnd(root: "Tag")) == 0)
        #expect(try ModelRecord.decodeRecord(try #require(try engine.get(KeyLayout.modelKey))).current.numbers["Tag"] == nil)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try context.count(for: FetchRequest(entityName: "Book")) == 4)
        try Self.expectClean(coordinator)
        try Self.close(coordinator)
    }

    // A renamed subentity keeps its number and its rows (its hierarchy's key space is its root's).
    @Test func aRenamedSubentityKeepsItsObjects() throws {
        let store = try Self.savedStore()
        let v2 = LibraryModel(novelName: "Fiction", novelIdentifier: "Novel")
        let coordinator = try Self.open(store, v2)
        #expect(try Self.books(coordinator, v2) == Self.version1Books.map { $0.replacingOccurrences(of: "Novel", with: "Fiction") })
        #expect(try ManagedObjectContext(persistentStoreCoordinator: coordinator).count(for: FetchRequest(entityName: "Fiction")) == 2)
        try Self.expectClean(coordinator)
        try Self.close(coordinator)
    }

    // A new superentity level between the root and a subentity keeps the key space (the root's):
    // in place, the subentity's rows read through their old layout.
    @Test func aNewSuperentityLevelBelowTheRootMigratesInPlace() throws {
        let store = try Self.savedStore()
        let v2 = LibraryModel(
            novelName: "Novel",
            extraEntities: { [EntityDescription(name: "Fiction", superentity: "Book", isAbstract: true, properties: [.attribute("era", .string, defaultValue: "modern")])] })
        // Novel moves under Fiction: its model says so through a variant of the library model.
        let model = try ManagedObjectModel(entities: try v2.make().entities.map { entity in
            guard entity.name == "Novel" else { return Self.copy(entity) }
            return EntityDescription(name: "Novel", superentity: "Fiction", properties: [.attribute("genre", .string)])
        })
        let coordinator = try store.coordinator(model: model, options: Self.migrating)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let novels = try context.fetch(Self.request("Novel", "TRUEPREDICATE"))
        #expect(novels.count == 2)
        #expect(try novels.map { try $0.value(forKey: "era") } == ["modern", "modern"])
        #expect(try context.count(for: FetchRequest(entityName: "Fiction")) == 2)
        #expect(try context.count(for: FetchRequest(entityName: "Book")) == 4)
        let engine = try Self.engine(coordinator)
        #expect(try ModelRecord.decodeRecord(try #require(try engine.get(KeyLayout.modelKey))).versions.count == 2, "in place")
        try Self.expectClean(coordinator)
        try Self.close(coordinator)
    }

    /// A copy of an entity description for another model (a description belongs to one model).
    static func copy(_ entity: EntityDescription) -> EntityDescription {
        EntityDescription(
            name: entity.name, superentity: entity.superentityName, isAbstract: entity.isAbstract,
            properties: entity.ownProperties.map { property in
                if let attribute = property as? AttributeDescription {
                    return AttributeDescription(
                        name: attribute.name, type: attribute.attributeType, isOptional: attribute.isOptional,
                        defaultValue: attribute.defaultValue, isTransient: attribute.isTransient, isIndexed: attribute.isIndexed,
                        renamingIdentifier: attribute.renamingIdentifier)
                }
                let relationship = property as! RelationshipDescription
                return RelationshipDescription(
                    name: relationship.name, destination: relationship.destinationEntityName, inverse: relationship.inverseName,
                    isToMany: relationship.isToMany, isOrdered: relationship.isOrdered, isOptional: relationship.isOptional,
                    deleteRule: relationship.deleteRule, renamingIdentifier: relationship.renamingIdentifier)
            },
            renamingIdentifier: entity.renamingIdentifier)
    }

    /// A saved store of `v1` (which has a to-one `sequel`) where Book 0's sequel is Book 1
    /// and Book 2's is Book 3.
    static func storeWithSequels(_ v1: LibraryModel) throws -> TemporaryStore {
        let store = try Self.savedStore(v1)
        let seeded = try store.coordinator(model: v1.make())
        let seedContext = ManagedObjectContext(persistentStoreCoordinator: seeded)
        let books = try seedContext.fetch(Self.request("Book", "TRUEPREDICATE")).sorted {
            (try $0.value(forKey: "title").stringValue ?? "") < (try $1.value(forKey: "title").stringValue ?? "")
        }
        try books[0].setValue(books[1], forKey: "sequel")
        try books[2].setValue(books[3], forKey: "sequel")
        try seedContext.save()
        try Self.close(seeded)
        return store
    }

    // A to-one without an inverse that becomes an unordered to-many: its keys ([REL-1]) are
    // built from the owners' rows, in place.
    @Test func aToOneMadeToManyBuildsItsKeysInPlace() throws {
        let v1 = LibraryModel(bookExtra: { [.toOne("sequel", "Book")] })
        let store = try Self.storeWithSequels(v1)

        let v2 = LibraryModel(bookExtra: { [.toMany("sequel", "Book")] })
        let coordinator = try Self.open(store, v2)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let first = try #require(try context.fetch(Self.request("Book", "title == 'Book 0'")).first)
        #expect(try first.objects(forKey: "sequel").map { try $0.value(forKey: "title") } == ["Book 1"])
        #expect(try context.count(for: Self.request("Book", "sequel.@count == 1")) == 2)
        #expect(try Self.books(coordinator, v2) == Self.version1Books)
        let record = try ModelRecord.decodeRecord(try #require(try Self.engine(coordinator).get(KeyLayout.modelKey)))
        #expect(record.versions.count == 2, "in place")
        try Self.expectClean(coordinator)
        try Self.close(coordinator)
    }

    // A to-one made to-many after an earlier migration left the rows in an older layout: the
    // keys are built from each row's field as its own layout has it ([MIG-2]), not from a
    // whole upgraded row.
    @Test func aToOneMadeToManyReadsRowsOfAnOlderLayout() throws {
        let v1 = LibraryModel(bookExtra: { [.toOne("sequel", "Book")] })
        let store = try Self.storeWithSequels(v1)
        // An added attribute: two records written, every row stays in the first layout.
        let v2 = LibraryModel(bookExtra: { [.toOne("sequel", "Book"), .attribute("subtitle", .string)] })
        try Self.close(try Self.open(store, v2))
        let v3 = LibraryModel(bookExtra: { [.toMany("sequel", "Book"), .attribute("subtitle", .string)] })
        let coordinator = try Self.open(store, v3)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let first = try #require(try context.fetch(Self.request("Book", "title == 'Book 2'")).first)
        #expect(try first.objects(forKey: "sequel").map { try $0.value(forKey: "title") } == ["Book 3"])
        #expect(try context.count(for: Self.request("Book", "sequel.@count == 1")) == 2)
        #expect(try context.count(for: Self.request("Book", "sequel.@count == 0")) == Self.version1Books.count - 2)
        let record = try ModelRecord.decodeRecord(try #require(try Self.engine(coordinator).get(KeyLayout.modelKey)))
        #expect(record.versions.count == 3, "in place, the rows still in the first layout")
        try Self.expectClean(coordinator)
        try Self.close(coordinator)
    }

    // A one-to-one that becomes one-to-many: the new to-many's keys index the members' to-one.
    @Test func aOneToOneMadeOneToManyIndexesTheMembersToOne() throws {
        func model(toMany: Bool) throws -> ManagedObjectModel {
            try ManagedObjectModel(entities: [
                EntityDescription(name: "Person", properties: [
                    .attribute("name", .string),
                    toMany ? .toMany("address", "Address", inverse: "person") : .toOne("address", "Address", inverse: "person"),
                ]),
                EntityDescription(name: "Address", properties: [.attribute("city", .string), .toOne("person", "Person", inverse: "address")]),
            ])
        }
        let store = TemporaryStore()
        let coordinator = try store.coordinator(model: model(toMany: false))
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for (name, city) in [("Ada", "London"), ("Grace", "Arlington"), ("Linus", nil)] {
            let person = try context.insertNewObject(forEntityName: "Person")
            try person.setValue(.string(name), forKey: "name")
            if let city {
                let address = try context.insertNewObject(forEntityName: "Address")
                try address.setValue(.string(city), forKey: "city")
                try person.setValue(address, forKey: "address")
            }
        }
        try context.save()
        try Self.close(coordinator)

        let migrated = try store.coordinator(model: model(toMany: true), options: Self.migrating)
        let again = ManagedObjectContext(persistentStoreCoordinator: migrated)
        let people = try fetch("Person", in: again).map { person in
            "\(try person.value(forKey: "name").stringValue ?? "")=" + (try person.objects(forKey: "address").map { try $0.value(forKey: "city").stringValue ?? "" }.joined())
        }
        #expect(people == ["Ada=London", "Grace=Arlington", "Linus="])
        // A new address for Ada is one more key, her row untouched.
        let ada = try #require(try fetch("Person", in: again, where: FetchPredicate(format: "name == 'Ada'")).first)
        let second = try again.insertNewObject(forEntityName: "Address")
        try second.setValue("Oxford", forKey: "city")
        try second.setValue(ada, forKey: "person")
        try again.save()
        #expect(try again.count(for: Self.request("Person", "address.@count == 2")) == 1)
        try Self.expectClean(migrated)
        try Self.close(migrated)
    }

    // A renamed many-to-many moves its keys ([REL-1] keys name the relationship).
    @Test func aRenamedKeyedRelationshipKeepsItsMembers() throws {
        let store = try Self.savedStore()
        let v2 = LibraryModel(tagsName: "labels", tagsIdentifier: "tags")
        let coordinator = try Self.open(store, v2)
        #expect(try Self.books(coordinator, v2) == Self.version1Books)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try context.count(for: Self.request("Book", "ANY labels.label == 'odd'")) == 2)
        try Self.expectClean(coordinator)
        try Self.close(coordinator)
    }

    // A persistent container migrates by default (its descriptions set both options), as Core
    // Data's does.
    @Test func aContainerMigratesByDefault() async throws {
        let store = try Self.savedStore()
        let v2 = LibraryModel(bookExtra: { [.attribute("isbn", .string, defaultValue: "unknown")] })
        let container = PersistentContainer(name: "Library", managedObjectModel: try v2.make())
        container.persistentStoreDescriptions = [PersistentStoreDescription(url: store.url)]
        try await container.loadPersistentStores()
        let coordinator = container.persistentStoreCoordinator
        #expect(try Self.books(coordinator, v2) == Self.version1Books)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try context.count(for: Self.request("Book", "isbn == 'unknown'")) == 4)
        try Self.close(coordinator)
    }

    // Three versions, rows written under each: every row reads through its own layout, and
    // `inspect` counts the rows of each.
    @Test func aChainOfThreeVersionsReadsEveryRow() throws {
        let store = try Self.savedStore()
        let v2 = LibraryModel(bookExtra: { [.attribute("isbn", .string)] })
        let v3 = LibraryModel(bookExtra: { [.attribute("isbn", .string), .attribute("year", .integer16, defaultValue: 2000)] }, titleName: "name", titleIdentifier: "title")
        var coordinator = try Self.open(store, v2)
        var context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let second = try context.insertNewObject(forEntityName: "Book")
        try second.setValue("Book 5", forKey: "title")
        try second.setValue("isbn-5", forKey: "isbn")
        try context.save()
        try Self.close(coordinator)
        coordinator = try Self.open(store, v3)
        context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let third = try context.insertNewObject(forEntityName: "Book")
        try third.setValue("Book 6", forKey: "name")
        try third.setValue(.int64(1999), forKey: "year")
        try context.save()
        let rows = try fetch("Book", in: context).map { (book: ManagedObject) -> String in
            "\(try book.value(forKey: "name").stringValue ?? "")/\(try book.value(forKey: "isbn").stringValue ?? "-")/\(try book.value(forKey: "year").integer ?? 0)"
        }
        #expect(rows == ["Book 0/-/2000", "Book 1/-/2000", "Book 2/-/2000", "Book 3/-/2000", "Book 5/isbn-5/2000", "Book 6/-/1999"])
        try Self.expectClean(coordinator)
        try Self.close(coordinator)
        let report = try StoreInspector.inspect(at: store.url.path)
        #expect(report.modelVersions == 3)
        let books = report.layouts.filter { $0.entity == "Book" }
        #expect(books.map(\.rows).sorted() == [1, 1, 2], "\(report.layouts)")
        #expect(Set(books.compactMap(\.modelVersion)) == [0, 1, 2])
    }

    // Without both options (a bare coordinator's default), a changed model is refused as before
    // and nothing is written.
    @Test(arguments: [[:], [PersistentStore.migratePersistentStoresAutomaticallyOption: AttributeValue.bool(true)]])
    func withoutTheOptionsTheStoreIsRefusedUntouched(options: [String: AttributeValue]) throws {
        let store = try Self.savedStore()
        let before = try ModelSafetyTests.files(of: store)
        let error = try #require(throws: ObjectGraphError.self) {
            try store.coordinator(model: LibraryModel(bookExtra: { [.attribute("isbn", .string)] }).make(), options: options)
        }
        #expect(error.code == .incompatibleModel)
        #expect(try ModelSafetyTests.files(of: store) == before)
    }

    // A model that shares no entity with the store's (another application's) is refused even
    // with the options: migrating would delete every object.
    @Test(arguments: [PersistentStore.StoreType.strata, .binary])
    func aModelSharingNoEntityIsNeverMigrated(type: PersistentStore.StoreType) throws {
        let (directory, url) = try Self.libraryFile(type)
        defer { try? FileManager.default.removeItem(at: directory) }
        func snapshot() throws -> [String: Data] {
            var isDirectory: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory)
            guard isDirectory.boolValue else { return [url.lastPathComponent: try Data(contentsOf: url)] }
            var files: [String: Data] = [:]
            for name in try FileManager.default.contentsOfDirectory(atPath: url.path) { files[name] = try Data(contentsOf: url.appendingPathComponent(name)) }
            return files
        }
        let before = try snapshot()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try SafetyModel.unrelated())
        let error = try #require(throws: ObjectGraphError.self) { try coordinator.addPersistentStore(type: type, at: url, options: Self.migrating) }
        #expect(error.code == .incompatibleModel, "\(error)")
        #expect(try snapshot() == before)
        let again = PersistentStoreCoordinator(managedObjectModel: try LibraryModel().make())
        try again.addPersistentStore(type: type, at: url)
        #expect(try Self.books(again, LibraryModel()) == Self.version1Books)
        try Self.close(again)
    }

    // A change lightweight migration cannot infer names entity and property, and writes nothing.
    @Test func anUninferableChangeIsRefusedUntouched() throws {
        let store = try Self.savedStore(LibraryModel(bookExtra: { [.attribute("year", .integer16)] }))
        let before = try ModelSafetyTests.files(of: store)
        let error = try #require(throws: ObjectGraphError.self) {
            try Self.open(store, LibraryModel(bookExtra: { [.attribute("year", .string)] }))
        }
        #expect(error.code == .inferredMappingFailed)
        #expect(error.detailedErrors.contains { $0.entityName == "Book" && $0.key == "year" })
        #expect(try ModelSafetyTests.files(of: store) == before)
    }

    // Read-only, a migration that needs no key written is made in memory: the store reads
    // through the new model and no file changes.
    @Test func aReadOnlyStoreMigratesInMemory() throws {
        let store = try Self.savedStore()
        let before = try ModelSafetyTests.files(of: store)
        let v2 = LibraryModel(bookExtra: { [.attribute("isbn", .string, defaultValue: "none")] })
        let coordinator = try Self.open(store, v2, readOnly: true)
        #expect(try Self.books(coordinator, v2) == Self.version1Books)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try context.count(for: Self.request("Book", "isbn == 'none'")) == 4)
        try Self.close(coordinator)
        #expect(try ModelSafetyTests.files(of: store) == before)
    }

    // [MIG-1] A crash after the migration's transaction and before the index rebuild: the record
    // names the index entries that exist, so the next open builds the rest.
    @Test func anIndexAddedByAMigrationIsBuiltAfterACrashBeforeTheRebuild() throws {
        let store = try Self.savedStore()
        let v2 = LibraryModel(titleIndexed: true)
        // The migration's transaction alone, as a crash right after it would leave the store.
        do {
            let shared = try SharedEngine.acquire(path: store.url.path, options: EngineOptions()) { _ in 1 }
            defer { shared.release() }
            let record = try #require(try StrataStore.modelRecord(in: try shared.engine.snapshot()))
            _ = try StrataStore.migrateLightweight(in: shared, from: record, to: try v2.make(), url: store.url)
            let prefix = IndexKey.prefix(root: "Book", attribute: "title")
            #expect(try shared.engine.snapshot().countKeys(from: prefix, to: StrataStore.prefixEnd(prefix)) == 0)
        }
        let coordinator = try Self.open(store, v2)
        try (coordinator.persistentStores.first as? StrataStore)?.waitForIndexBuild()
        let prefix = IndexKey.prefix(root: "Book", attribute: "title")
        #expect(try Self.engine(coordinator).snapshot().countKeys(from: prefix, to: StrataStore.prefixEnd(prefix)) == 4)
        #expect(try Self.books(coordinator, v2) == Self.version1Books)
        try Self.expectClean(coordinator)
        try Self.close(coordinator)
    }
}

import Foundation
import ObjectGraph
@testable import Strata
import StrataEngine
import Testing

/// Issue 17, SPEC.md [MIG-3]: migration by copy (a lightweight change a store does not make in
/// place, a store type that only copies, a custom stage of a plan) and the crash-safe swap.
@Suite struct CopyMigrationTests {
    typealias Library = LightweightMigrationTests

    /// Every leftover of a migration next to `url`.
    static func leftovers(_ url: URL) -> [String] {
        [PersistentStore.migratingURL(for: url).path, url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).premigration").path]
            .filter { FileManager.default.fileExists(atPath: $0) }
    }

    // [MIG-1] A renamed root entity: its hierarchy keeps its key space ([KEY-2]), the objects
    // their references (and the store its UUID).
    @Test func aRenamedRootEntityKeepsItsObjectsInPlace() throws {
        let store = try Library.savedStore()
        let before = try store.coordinator(model: LibraryModel().make())
        let uuid = try #require(before.persistentStores.first).identifier
        let references = try fetch("Author", in: ManagedObjectContext(persistentStoreCoordinator: before)).map {
            $0.objectID.uriRepresentation().lastPathComponent
        }
        try Library.close(before)
        let v2 = LibraryModel(authorName: "Writer", authorIdentifier: "Author")
        let coordinator = try Library.open(store, v2)
        #expect(try #require(coordinator.persistentStores.first).identifier == uuid)
        #expect(try Library.books(coordinator, v2) == Library.version1Books)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let writers = try fetch("Writer", in: context)
        #expect(try names(writers) == ["Le Guin", "Lem"])
        #expect(writers.map { $0.objectID.uriRepresentation().lastPathComponent } == references)
        try (coordinator.persistentStores.first as? StrataStore)?.waitForIndexBuild()
        #expect(try context.count(for: Library.request("Writer", "name == 'Lem'")) == 1)
        let engine = try Library.engine(coordinator)
        for tag in [KeyLayout.rowTag, IndexKey.tag, RelationshipKeys.tag] {
            let prefix = [tag] + Array("Writer".utf8) + [0]
            #expect(try engine.snapshot().countKeys(from: prefix, to: StrataStore.prefixEnd(prefix)) == 0, "nothing under Writer (tag \(tag))")
        }
        try Library.expectClean(coordinator)
        try Library.close(coordinator)
        #expect(Self.leftovers(store.url).isEmpty)
    }

    // A new root level above an entity keeps its key space too.
    @Test func aNewRootLevelAboveAnEntityMigratesInPlace() throws {
        let store = try Library.savedStore()
        let v2 = LibraryModel(extraEntities: { [EntityDescription(name: "Thing", isAbstract: true, properties: [.attribute("note", .string)])] })
        let model = try ManagedObjectModel(entities: try v2.make().entities.map { entity in
            guard entity.name == "Tag" else { return LightweightMigrationTests.copy(entity) }
            return EntityDescription(name: "Tag", superentity: "Thing", properties: [.attribute("label", .string), .toMany("books", "Book", inverse: "tags")])
        })
        let coordinator = try store.coordinator(model: model, options: Library.migrating)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try context.count(for: FetchRequest(entityName: "Thing")) == 2)
        #expect(try context.count(for: Library.request("Book", "ANY tags.label == 'odd'")) == 2)
        try Library.expectClean(coordinator)
        try Library.close(coordinator)
    }

    // [MIG-1] [MIG-5] An unordered to-many made ordered: each owner's list is its old keys
    // until the background build writes it into the row (read here while the build runs);
    // the objects keep their IDs.
    @Test(arguments: [false, true])
    func anUnorderedToManyMadeOrderedTakesItsKeysAsLists(oneToMany: Bool) throws {
        let store = try Library.savedStore()
        let v2: LibraryModel
        if oneToMany {
            // Author.books, kept by the books' to-one, becomes ordered.
            v2 = LibraryModel(extraEntities: { [] })
        } else {
            v2 = LibraryModel(tagsOrdered: true)
        }
        let model: ManagedObjectModel
        if oneToMany {
            model = try ManagedObjectModel(entities: try LibraryModel().make().entities.map { entity in
                guard entity.name == "Author" else { return LightweightMigrationTests.copy(entity) }
                return EntityDescription(name: "Author", properties: [
                    .attribute("name", .string, indexed: true), .toMany("books", "Book", inverse: "author", ordered: true),
                ])
            })
        } else {
            model = try v2.make()
        }
        let coordinator = try store.coordinator(model: model, options: Library.migrating)
        #expect(try Library.books(coordinator, v2) == Library.version1Books)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        if oneToMany {
            let authors = try fetch("Author", in: context).map { author in
                "\(try author.value(forKey: "name").stringValue ?? "")=" + (try author.objects(forKey: "books").map { try $0.value(forKey: "title").stringValue ?? "" }.joined(separator: ","))
            }
            #expect(authors == ["Le Guin=Book 0,Book 2", "Lem=Book 1,Book 3"])
        } else {
            let first = try #require(try context.fetch(Library.request("Book", "title == 'Book 1'")).first)
            #expect(try first.objects(forKey: "tags").map { try $0.value(forKey: "label") } == ["odd"])
            #expect(try context.count(for: Library.request("Tag", "ANY books.title == 'Book 3'")) == 1)
        }
        let engine = try Library.engine(coordinator)
        #expect(try ModelRecord.decodeRecord(try #require(try engine.get(KeyLayout.modelKey))).versions.count == 2, "in place")
        try Library.expectClean(coordinator)
        try Library.close(coordinator)
    }

    // [MIG-5] An unordered to-many made ordered writes nothing but the records (the owners'
    // keys are their lists until the build writes them): a read-only add migrates in memory,
    // reads the lists from the keys, and leaves every file as it was.
    @Test func aReadOnlyStoreReadsItsNewListsFromTheKeys() throws {
        let store = try Library.savedStore()
        let before = try ModelSafetyTests.files(of: store)
        let v2 = LibraryModel(tagsOrdered: true)
        let coordinator = try Library.open(store, v2, readOnly: true)
        #expect(try Library.books(coordinator, v2) == Library.version1Books)
        #expect(try Library.count(coordinator, "Book", "tags.@count == 1") == 4)
        try Library.close(coordinator)
        #expect(try ModelSafetyTests.files(of: store) == before)
    }

    // The binary store keeps its model too: a lightweight change copies it.
    @Test func aBinaryStoreMigratesByCopy() throws {
        BinaryStore.register()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("strata-binary-migration-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("library.strata-binary")
        let v1 = try LibraryModel().make()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: v1)
        try coordinator.addPersistentStore(type: .binary, at: url)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let author = try context.insertNewObject(forEntityName: "Author")
        try author.setValue("Lem", forKey: "name")
        let book = try context.insertNewObject(forEntityName: "Novel")
        try book.setValue("Solaris", forKey: "title")
        try book.setValue(author, forKey: "author")
        try context.save()
        try Library.close(coordinator)

        let v2 = LibraryModel(bookExtra: { [.attribute("isbn", .string, defaultValue: "?")] }, titleName: "name", titleIdentifier: "title")
        let migrated = PersistentStoreCoordinator(managedObjectModel: try v2.make())
        try migrated.addPersistentStore(type: .binary, at: url, options: Library.migrating)
        let again = ManagedObjectContext(persistentStoreCoordinator: migrated)
        let novel = try #require(try again.fetch(FetchRequest(entityName: "Novel")).first)
        #expect(try novel.value(forKey: "name") == "Solaris")
        #expect(try novel.value(forKey: "isbn") == "?")
        #expect(try novel.object(forKey: "author")?.value(forKey: "name") == "Lem")
        try Library.close(migrated)
        #expect(Self.leftovers(url).isEmpty)
    }

    /// Version 3 of the author: `name` split into `firstName` and `lastName`.
    static func splitAuthors() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Author", properties: [
                .attribute("firstName", .string), .attribute("lastName", .string),
                .toMany("books", "Book", inverse: "author"),
            ]),
            EntityDescription(name: "Book", properties: [
                .attribute("title", .string, optional: false), .attribute("pages", .integer32),
                .attribute("isbn", .string), .toOne("author", "Author", inverse: "books"),
            ]),
        ])
    }

    static func withoutTags(isbn: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Author", properties: [.attribute("name", .string), .toMany("books", "Book", inverse: "author")]),
            EntityDescription(name: "Book", properties: [
                .attribute("title", .string, optional: false), .attribute("pages", .integer32),
                .toOne("author", "Author", inverse: "books"),
            ] + (isbn ? [.attribute("isbn", .string)] : [])),
        ])
    }

    /// A store of ``withoutTags(isbn:)`` (version 1) holding two authors with a book each.
    static func authorsStore(type: PersistentStore.StoreType, at url: URL) throws {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try withoutTags(isbn: false))
        try coordinator.addPersistentStore(type: type, at: url)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for (name, title) in [("Ursula Le Guin", "The Dispossessed"), ("Stanisław Lem", "Solaris")] {
            let author = try context.insertNewObject(forEntityName: "Author")
            try author.setValue(.string(name), forKey: "name")
            let book = try context.insertNewObject(forEntityName: "Book")
            try book.setValue(.string(title), forKey: "title")
            try book.setValue(author, forKey: "author")
        }
        try context.save()
        try Library.close(coordinator)
    }

    /// The plan v1 → v2 (an attribute added, lightweight) → v3 (a custom stage that splits the
    /// author's name), with a `didMigrate` that marks every book.
    static func plan(failAt failure: String? = nil) throws -> MigrationPlan {
        let v1 = try withoutTags(isbn: false), v2 = try withoutTags(isbn: true), v3 = try splitAuthors()
        return MigrationPlan(stages: [
            .lightweight(from: v1, to: v2),
            .custom(
                from: v2, to: v3,
                didMigrate: { context in
                    for book in try context.fetch(FetchRequest(entityName: "Book")) { try book.setValue("migrated", forKey: "isbn") }
                },
                customizeObject: { source, copy in
                    guard source.entity.name == "Author" else { return }
                    let name = try source.value(forKey: "name").stringValue ?? ""
                    if name == failure { throw ObjectGraphError(.invalidArgument, "no split for \(name)") }
                    let parts = name.split(separator: " ", maxSplits: 1).map(String.init)
                    try copy.setValue(.string(parts.first ?? ""), forKey: "firstName")
                    try copy.setValue(.string(parts.count > 1 ? parts[1] : ""), forKey: "lastName")
                }),
        ])
    }

    static func storeURL(_ type: PersistentStore.StoreType, in directory: URL) -> URL {
        directory.appendingPathComponent(type == .strata ? "store" : "store.bin")
    }

    // A chain of three model versions, with a custom stage that splits an attribute, on each
    // store type that keeps files.
    @Test(arguments: [PersistentStore.StoreType.strata, .binary])
    func aPlanOfThreeVersionsWithACustomStageSplitsAnAttribute(type: PersistentStore.StoreType) throws {
        StrataStore.register()
        BinaryStore.register()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("strata-plan-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = Self.storeURL(type, in: directory)
        try Self.authorsStore(type: type, at: url)
        var plan = try Self.plan()
        var stagesSeen = Set<Int>()
        plan.progressHandler = { stage, _ in stagesSeen.insert(stage) }
        try plan.migrateStore(at: url, type: type)
        #expect(stagesSeen == [0, 1])
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.splitAuthors())
        try coordinator.addPersistentStore(type: type, at: url)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var request = FetchRequest(entityName: "Author")
        request.sortDescriptors = [FetchSortDescriptor(keyPath: "lastName", ascending: true)]
        let authors = try context.fetch(request).map { author in
            "\(try author.value(forKey: "firstName").stringValue ?? "")|\(try author.value(forKey: "lastName").stringValue ?? "")|"
                + (try author.objects(forKey: "books").map { try $0.value(forKey: "title").stringValue ?? "" }.joined())
        }
        #expect(authors == ["Ursula|Le Guin|The Dispossessed", "Stanisław|Lem|Solaris"])
        #expect(try context.fetch(FetchRequest(entityName: "Book")).map { try $0.value(forKey: "isbn") } == ["migrated", "migrated"])
        try Library.close(coordinator)
        #expect(Self.leftovers(url).isEmpty)
        // A store of the last version is left as it is.
        let before = try Data(contentsOf: type == .strata ? url.appendingPathComponent("MANIFEST") : url)
        try plan.migrateStore(at: url, type: type)
        #expect(try Data(contentsOf: type == .strata ? url.appendingPathComponent("MANIFEST") : url) == before)
    }

    // A mapping model built by hand: an inferred one with a property whose value is a
    // fetch-language expression on the source object (a denormalized count).
    @Test(arguments: [PersistentStore.StoreType.strata, .binary])
    func aMappingWithAnExpressionFillsANewAttribute(type: PersistentStore.StoreType) throws {
        StrataStore.register()
        BinaryStore.register()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("strata-mapping-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = Self.storeURL(type, in: directory)
        try Self.authorsStore(type: type, at: url)
        let v1 = try Self.withoutTags(isbn: false)
        let v2 = try ManagedObjectModel(entities: [
            EntityDescription(name: "Author", properties: [
                .attribute("name", .string), .attribute("bookCount", .integer32, optional: false, defaultValue: 0),
                .attribute("shout", .string),
                .toMany("books", "Book", inverse: "author"),
            ]),
            EntityDescription(name: "Book", properties: [
                .attribute("title", .string, optional: false), .attribute("pages", .integer32),
                .toOne("author", "Author", inverse: "books"),
            ]),
        ])
        var mapping = try MappingModel.inferred(from: v1, to: v2)
        let index = try #require(mapping.entityMappings.firstIndex { $0.destinationEntityName == "Author" })
        let count = try FetchExpression(format: "books.@count")
        mapping.entityMappings[index].attributeMappings = mapping.entityMappings[index].attributeMappings.map { property in
            switch property.name {
            case "bookCount": return PropertyMapping(name: "bookCount", value: .expression(count))
            case "shout": return PropertyMapping(name: "shout", value: .expression(.keyPath("name")))
            default: return property
            }
        }
        let manager = MigrationManager(sourceModel: v1, destinationModel: v2)
        var progress: [Double] = []
        manager.progressHandler = { progress.append($0) }
        try manager.migrateStore(at: url, type: type, mapping: mapping)
        #expect(progress.last == 1)
        #expect(progress == progress.sorted(), "progress only grows")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: v2)
        try coordinator.addPersistentStore(type: type, at: url)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let rows = try fetch("Author", in: context).map { "\(try $0.value(forKey: "shout").stringValue ?? "")=\(try $0.value(forKey: "bookCount").integer ?? -1)" }
        #expect(rows == ["Stanisław Lem=1", "Ursula Le Guin=1"])
        try Library.close(coordinator)
    }

    // A container runs its description's plan before adding the store.
    @Test func aContainerRunsItsDescriptionsPlan() async throws {
        StrataStore.register()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("strata-plan-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("store")
        try Self.authorsStore(type: .strata, at: url)
        let container = PersistentContainer(name: "Library", managedObjectModel: try Self.splitAuthors())
        let description = PersistentStoreDescription(url: url)
        description.migrationPlan = try Self.plan()
        container.persistentStoreDescriptions = [description]
        try await container.loadPersistentStores()
        let context = ManagedObjectContext(persistentStoreCoordinator: container.persistentStoreCoordinator)
        var request = FetchRequest(entityName: "Author")
        request.sortDescriptors = [FetchSortDescriptor(keyPath: "firstName", ascending: true)]
        #expect(try context.fetch(request).map { try $0.value(forKey: "lastName") } == ["Lem", "Le Guin"])
        try Library.close(container.persistentStoreCoordinator)
    }

    // A stage that fails leaves the store whole at the version before it, and no copy behind.
    @Test func aFailedStageLeavesTheStoreAtTheVersionBefore() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("strata-plan-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        StrataStore.register()
        let url = directory.appendingPathComponent("store")
        try Self.authorsStore(type: .strata, at: url)
        #expect(throws: ObjectGraphError.self) { try Self.plan(failAt: "Stanisław Lem").migrateStore(at: url, type: .strata) }
        #expect(Self.leftovers(url).isEmpty)
        // Version 2 (the lightweight stage went through), every object there.
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.withoutTags(isbn: true))
        try coordinator.addPersistentStore(type: .strata, at: url)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try names(fetch("Author", in: context)) == ["Stanisław Lem", "Ursula Le Guin"])
        try Library.close(coordinator)
    }

    // A store the plan does not know is refused, naming what differs, and left as it is.
    @Test func aStoreOfAnotherModelIsRefusedByAPlan() throws {
        let store = try Library.savedStore()
        let before = try ModelSafetyTests.files(of: store)
        let error = try #require(throws: ObjectGraphError.self) { try Self.plan().migrateStore(at: store.url, type: .strata) }
        #expect(error.code == .migrationFailed)
        #expect(error.message.contains("Tag"))
        #expect(try ModelSafetyTests.files(of: store) == before)
    }

    // The swap's crash points: a copy never swapped in is dropped (the old store opens); the
    // old store set aside before the copy took its place is replaced by the copy.
    @Test(arguments: ["beforeSwap", "betweenRenames", "afterRenames"])
    func anInterruptedSwapLeavesOneWholeStore(point: String) throws {
        let store = try Library.savedStore()
        let url = store.url
        let migrating = PersistentStore.migratingURL(for: url)
        let aside = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).premigration")
        defer {
            try? FileManager.default.removeItem(at: migrating)
            try? FileManager.default.removeItem(at: aside)
        }
        // The copy: the store migrated to version 2 (an added attribute) in another directory.
        let v2 = LibraryModel(bookExtra: { [.attribute("isbn", .string, defaultValue: "copy")] })
        try FileManager.default.copyItem(at: url, to: migrating)
        let copy = PersistentStoreCoordinator(managedObjectModel: try v2.make())
        try copy.addPersistentStore(type: .strata, at: migrating, options: Library.migrating)
        try Library.close(copy)
        switch point {
        case "beforeSwap":
            break
        case "betweenRenames":
            try FileManager.default.moveItem(at: url, to: aside)
        default:
            try FileManager.default.moveItem(at: url, to: aside)
            try FileManager.default.moveItem(at: migrating, to: url)
        }
        let expectsCopy = point != "beforeSwap"
        let coordinator = try store.coordinator(model: expectsCopy ? v2.make() : LibraryModel().make())
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try context.count(for: FetchRequest(entityName: "Book")) == 4)
        if expectsCopy { #expect(try context.count(for: Library.request("Book", "isbn == 'copy'")) == 4) }
        try Library.close(coordinator)
        #expect(Self.leftovers(url).isEmpty, "\(point)")
    }
}

import Foundation
import ObjectGraph
@testable import Strata
import StrataEngine
import Testing

/// SPEC.md [KEY-2] [ROW-5] [MIG-1] [MIG-4]: a hierarchy keeps its key space when its root
/// changes (a renamed root entity, a new root level above it), so such a migration moves no
/// key; only hierarchies merged under one new root move the smaller's keys. A removed
/// hierarchy's keys and a removed relationship's are retired: recorded, and deleted in the
/// background.
@Suite struct KeySpaceMigrationTests {
    typealias Library = LightweightMigrationTests

    /// Every key and value of the store but its two records.
    static func entries(_ engine: Engine) throws -> [[UInt8]: [UInt8]] {
        var entries: [[UInt8]: [UInt8]] = [:]
        try engine.snapshot().forEach(from: [0x01], to: [0xFF]) { key, value in
            entries[key] = value
            return true
        }
        return entries
    }

    static func entries(of store: TemporaryStore) throws -> [[UInt8]: [UInt8]] {
        let coordinator = try store.coordinator(model: LibraryModel().make())
        defer { try? Library.close(coordinator) }
        return try entries(try Library.engine(coordinator))
    }

    static func record(_ coordinator: PersistentStoreCoordinator) throws -> ModelRecord {
        try ModelRecord.decodeRecord(try #require(try Library.engine(coordinator).get(KeyLayout.modelKey)))
    }

    /// The keys under each of the three tags ([KEY-2], [IDX-S1], [REL-1]) of key space `space`.
    static func keyCount(_ engine: Engine, space: String) throws -> Int {
        let snapshot = try engine.snapshot()
        return [KeyLayout.rowTag, IndexKey.tag, RelationshipKeys.tag].reduce(0) { total, tag in
            let prefix = [tag] + Array(space.utf8) + [0x00]
            return total + snapshot.countKeys(from: prefix, to: StrataStore.prefixEnd(prefix))
        }
    }

    /// The library with `Author` under a new abstract root `Person`.
    static func personModel() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [EntityDescription(name: "Person", isAbstract: true)] + LibraryModel().make().entities.map { entity in
            guard entity.name == "Author" else { return Library.copy(entity) }
            let copy = Library.copy(entity)
            return EntityDescription(name: "Author", superentity: "Person", properties: copy.ownProperties)
        })
    }

    // A renamed root: the migration writes the two records and nothing else; the rows, index
    // entries and keys stay in the key space named after the old root, and so do new objects.
    @Test func aRenamedRootMovesNoKey() throws {
        let store = try Library.savedStore()
        let before = try Self.entries(of: store)
        let v2 = LibraryModel(authorName: "Writer", authorIdentifier: "Author")
        let coordinator = try Library.open(store, v2)
        let engine = try Library.engine(coordinator)
        #expect(try Self.entries(engine) == before, "no key moved")
        #expect(try Self.record(coordinator).keySpaces == ["Writer": "Author"])
        #expect(try Library.books(coordinator, v2) == Library.version1Books)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try context.count(for: Library.request("Writer", "name == 'Lem'")) == 1, "through the index")
        let added = try context.insertNewObject(forEntityName: "Writer")
        try added.setValue("Tolkien", forKey: "name")
        try context.save()
        #expect(try Self.keyCount(engine, space: "Writer") == 0)
        let strata = try #require(coordinator.persistentStores.first as? StrataStore)
        #expect(try engine.get(KeyLayout.rowKey(root: "Author", reference: try strata.integerReference(added.objectID))) != nil)
        try Library.expectClean(coordinator)
        try Library.close(coordinator)

        let reopened = try Library.open(store, v2)
        let again = ManagedObjectContext(persistentStoreCoordinator: reopened)
        #expect(try again.count(for: Library.request("Writer", "name == 'Tolkien'")) == 1)
        #expect(try again.count(for: FetchRequest(entityName: "Writer")) == 3)
        try Library.expectClean(reopened)
        try Library.close(reopened)
    }

    // A new root level above a hierarchy: no key moves; the new root fetches the old rows.
    @Test func aNewRootAboveAHierarchyMovesNoKey() throws {
        let store = try Library.savedStore()
        let before = try Self.entries(of: store)
        let coordinator = try store.coordinator(model: Self.personModel(), options: Library.migrating)
        #expect(try Self.entries(try Library.engine(coordinator)) == before, "no key moved")
        #expect(try Self.record(coordinator).keySpaces == ["Person": "Author"])
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try context.count(for: FetchRequest(entityName: "Person")) == 2)
        #expect(try context.count(for: Library.request("Author", "name == 'Le Guin'")) == 1)
        #expect(try context.count(for: Library.request("Book", "author.name == 'Lem'")) == 2)
        // [IDX-S7] The abstract root has no rows: the index alone counts Author's.
        var request = try Library.request("Author", "name == 'Lem'")
        let author = try coordinator.managedObjectModel.entity(named: "Author")
        request.entity = author
        let served = StrataStore.indexOnlyMatches(
            for: request, entity: author, root: "Author", names: ["Author"], model: coordinator.managedObjectModel,
            in: try Library.engine(coordinator).snapshot())
        #expect(served?.count == 1)
        try Library.expectClean(coordinator)
        try Library.close(coordinator)
    }

    // After a rename keeps "Author" as Writer's key space, a new root named Author takes the
    // first free name; both hierarchies keep their objects apart, across reopening.
    @Test func aNewRootNamedLikeAKeptKeySpaceTakesAFreeOne() throws {
        let store = try Library.savedStore()
        try Library.close(try Library.open(store, LibraryModel(authorName: "Writer", authorIdentifier: "Author")))
        let v3 = LibraryModel(extraEntities: { [EntityDescription(name: "Author", properties: [.attribute("name", .string, indexed: true)])] }, authorName: "Writer")
        let coordinator = try Library.open(store, v3)
        // Author.name's entries are built in the background ([IDX-S9]); the record claims them after.
        try (coordinator.persistentStores.first as? StrataStore)?.waitForIndexBuild()
        #expect(try Self.record(coordinator).keySpaces == ["Writer": "Author", "Author": "Author~2"])
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let author = try context.insertNewObject(forEntityName: "Author")
        try author.setValue("Lem", forKey: "name")
        try context.save()
        #expect(try context.count(for: Library.request("Author", "name == 'Lem'")) == 1)
        #expect(try context.count(for: Library.request("Writer", "name == 'Lem'")) == 1)
        #expect(try Self.keyCount(try Library.engine(coordinator), space: "Author~2") == 2, "its row and its index entry")
        try Library.expectClean(coordinator)
        try Library.close(coordinator)

        let reopened = try Library.open(store, v3)
        let again = ManagedObjectContext(persistentStoreCoordinator: reopened)
        #expect(try again.count(for: FetchRequest(entityName: "Author")) == 1)
        #expect(try again.count(for: FetchRequest(entityName: "Writer")) == 2)
        #expect(try Library.books(reopened, v3) == Library.version1Books)
        try Library.expectClean(reopened)
        try Library.close(reopened)
    }

    // Two hierarchies under one new root: the one with more rows (Book's 4 to Tag's 2) keeps
    // its key space and its keys; Tag's rows and keys move into it.
    @Test func hierarchiesMergedUnderANewRootMoveOnlyTheSmaller() throws {
        let store = try Library.savedStore()
        let before = try Self.entries(of: store)
        let model = try ManagedObjectModel(entities: [EntityDescription(name: "Thing", isAbstract: true)] + LibraryModel().make().entities.map { entity in
            guard entity.name == "Book" || entity.name == "Tag" else { return Library.copy(entity) }
            return EntityDescription(name: entity.name, superentity: "Thing", properties: Library.copy(entity).ownProperties)
        })
        let coordinator = try store.coordinator(model: model, options: Library.migrating)
        let engine = try Library.engine(coordinator)
        #expect(try Self.record(coordinator).keySpaces == ["Thing": "Book"])
        #expect(try Self.keyCount(engine, space: "Tag") == 0)
        let after = try Self.entries(engine)
        let bookRows = before.filter { $0.key.starts(with: KeyLayout.rowPrefix(root: "Book")) }
        #expect(bookRows.allSatisfy { after[$0.key] == $0.value }, "Book's rows stay")
        #expect(after.count == before.count, "Tag's keys moved, none lost")
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try context.count(for: FetchRequest(entityName: "Thing")) == 6)
        #expect(try context.count(for: FetchRequest(entityName: "Tag")) == 2)
        #expect(try Library.books(coordinator, LibraryModel()) == Library.version1Books)
        try Library.expectClean(coordinator)
        try Library.close(coordinator)
    }

    // Read-only, a renamed root is migrated in memory (nothing to write but the records).
    @Test func aReadOnlyStoreWithARenamedRootMigratesInMemory() throws {
        let store = try Library.savedStore()
        let files = try ModelSafetyTests.files(of: store)
        let v2 = LibraryModel(authorName: "Writer", authorIdentifier: "Author")
        let coordinator = try Library.open(store, v2, readOnly: true)
        #expect(try Library.books(coordinator, v2) == Library.version1Books)
        #expect(try ManagedObjectContext(persistentStoreCoordinator: coordinator).count(for: Library.request("Writer", "name == 'Lem'")) == 1)
        try Library.close(coordinator)
        #expect(try ModelSafetyTests.files(of: store) == files)
    }

    // `strata compact` dropping the older version keeps the key spaces in the record.
    @Test func theOfflineCompactionKeepsTheKeySpaces() throws {
        let store = try Library.savedStore()
        let v2 = LibraryModel(authorName: "Writer", authorIdentifier: "Author")
        let coordinator = try Library.open(store, v2)
        try Library.engine(coordinator).flush()
        try Library.engine(coordinator).compact(.full)
        try Library.close(coordinator)
        let report = try OfflineCompaction.run(at: store.url.path, policy: .full)
        #expect(report.modelVersionsDropped == 1)
        let reopened = try Library.open(store, v2)
        let record = try Self.record(reopened)
        #expect(record.versions.count == 1 && record.keySpaces == ["Writer": "Author"])
        #expect(try Library.books(reopened, v2) == Library.version1Books)
        try Library.expectClean(reopened)
        try Library.close(reopened)
    }

    // [ROW-5] Format 3 round-trips; key spaces that are not one per hierarchy are refused.
    @Test func keySpacesRoundTripAndBadOnesAreRefused() throws {
        let model = try Self.personModel()
        var record = ModelRecord(model: model)
        #expect(record.encode().first == 2, "no key space named: format 2")
        record.keySpaces = ["Person": "Author"]
        #expect(record.encode().first == 3)
        #expect(try ModelRecord.decodeRecord(record.encode()) == record)
        for bad in [["Author": "People"], ["Person": "Book"], ["Person": ""], ["Person": "A\u{0}"], ["Nobody": "Author"]] {
            record.keySpaces = bad
            #expect(throws: ObjectGraphError.self, "\(bad)") { try ModelRecord.decodeRecord(record.encode()) }
        }
        // Retired keys ([MIG-4]) round-trip alone or with key spaces; a retired key space in use is refused.
        record.keySpaces = [:]
        record.retired = [.keySpace("Gone"), .relationship(keySpace: "Book", name: "gone")]
        #expect(record.encode().first == 3)
        #expect(try ModelRecord.decodeRecord(record.encode()) == record)
        record.keySpaces = ["Person": "Author"]
        #expect(try ModelRecord.decodeRecord(record.encode()) == record)
        record.retired = [.keySpace("Book")]
        #expect(throws: ObjectGraphError.self) { try ModelRecord.decodeRecord(record.encode()) }
        // Key names ([REL-1]): one per keyed relationship of a key space, none retired.
        record.retired = [.relationship(keySpace: "Book", name: "gone")]
        record.keyNames = [ModelRecord.keyNameKey(keySpace: "Book", relationship: "tags"): "labels"]
        #expect(try ModelRecord.decodeRecord(record.encode()) == record)
        for bad in [["Book\u{0}tags": "gone"], ["Book\u{0}title": "x"], ["Book\u{0}tags": ""], ["Tag\u{0}books": "tags", "Tag\u{0}x": "y"]] {
            record.keyNames = bad
            #expect(throws: ObjectGraphError.self, "\(bad)") { try ModelRecord.decodeRecord(record.encode()) }
        }
    }

    // [MIG-4] Removing an entity (a whole hierarchy) writes the two records only: its keys and
    // those of the relationships to it are retired, skipped by fsck, and deleted in the
    // background by the next read-write load.
    @Test func aRemovedHierarchyIsRetiredThenDeletedInTheBackground() throws {
        let store = try Library.savedStore()
        let before = try Self.entries(of: store)
        let v2 = LibraryModel(withTags: false)
        let shared = try StrataStore.sharedEngine(at: store.url)
        let record = try #require(try StrataStore.modelRecord(in: shared.engine.snapshot()))
        _ = try StrataStore.migrateLightweight(in: shared, from: record, to: v2.make(), url: store.url)
        let migrated = try #require(try StrataStore.modelRecord(in: shared.engine.snapshot()))
        #expect(migrated.retired == [.keySpace("Tag"), .relationship(keySpace: "Book", name: "tags")])
        #expect(try Self.entries(shared.engine) == before, "the migration deleted nothing")
        let pending = try ObjectChecker.check(engine: shared.engine, repair: false)
        #expect(pending.problems.isEmpty, "\(pending.problems)")
        let tagKeys = try Self.keyCount(shared.engine, space: "Tag")
        let bookTags = RelationshipKeys.relationshipPrefix(root: "Book", relationship: "tags")
        let bookTagKeys = try shared.engine.snapshot().countKeys(from: bookTags, to: RelationshipKeys.end(of: bookTags))
        #expect(tagKeys == 6 && bookTagKeys == 4, "2 tag rows and their 4 keys; the books' 4 keys")
        #expect(pending.retiredKeys == tagKeys + bookTagKeys)
        shared.release()

        let coordinator = try Library.open(store, v2)
        try #require(coordinator.persistentStores.first as? StrataStore).waitForIndexBuild()
        let engine = try Library.engine(coordinator)
        #expect(try Self.keyCount(engine, space: "Tag") == 0)
        #expect(try engine.snapshot().countKeys(from: bookTags, to: RelationshipKeys.end(of: bookTags)) == 0)
        #expect(try Self.record(coordinator).retired.isEmpty)
        #expect(try Library.books(coordinator, v2) == Library.version1Books.map { $0.replacingOccurrences(of: "|even|", with: "|-|").replacingOccurrences(of: "|odd|", with: "|-|") })
        try Library.expectClean(coordinator)
        try Library.close(coordinator)
    }

    // [MIG-4] A deletion cut short (the store closed at once) leaves the rest retired, which
    // the next load finishes; a retired key space is never reused meanwhile: a new root of
    // the removed one's name takes a free key space.
    @Test func aRetirementCutShortIsFinishedAndItsKeySpaceNotReused() throws {
        let store = try Library.savedStore()
        let v2 = LibraryModel(withTags: false)
        try Library.close(try store.coordinator(model: v2.make(), options: Library.migrating.merging([StrataStore.indexBuildBatchOption: .int64(1)]) { $1 }))
        let v3 = LibraryModel(withTags: false, extraEntities: { [EntityDescription(name: "Tag", properties: [.attribute("word", .string)])] })
        let coordinator = try Library.open(store, v3)
        let strata = try #require(coordinator.persistentStores.first as? StrataStore)
        let record = try Self.record(coordinator)
        if !record.retired.isEmpty || strata.indexBuildProgress != nil {
            #expect(record.keySpaces["Tag"] == "Tag~2", "Tag is still being deleted")
        }
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let tag = try context.insertNewObject(forEntityName: "Tag")
        try tag.setValue("new", forKey: "word")
        try context.save()
        try strata.waitForIndexBuild()
        #expect(try context.count(for: FetchRequest(entityName: "Tag")) == 1)
        #expect(try Self.record(coordinator).retired.isEmpty)
        let space = try Self.record(coordinator).keySpace(ofRoot: "Tag")
        #expect(try Self.keyCount(try Library.engine(coordinator), space: space) == 1, "the new tag alone")
        try Library.expectClean(coordinator)
        try Library.close(coordinator)
    }

    // [MIG-4] Read-only, a removed entity is migrated in memory: nothing is deleted or written.
    @Test func aReadOnlyStoreWithARemovedEntityMigratesInMemory() throws {
        let store = try Library.savedStore()
        let files = try ModelSafetyTests.files(of: store)
        let v2 = LibraryModel(withTags: false)
        let coordinator = try Library.open(store, v2, readOnly: true)
        #expect(try ManagedObjectContext(persistentStoreCoordinator: coordinator).count(for: FetchRequest(entityName: "Book")) == 4)
        try Library.close(coordinator)
        #expect(try ModelSafetyTests.files(of: store) == files)
    }

    // [MIG-4] With synchronous index builds, the load deletes retired keys before it returns.
    @Test func theSynchronousOptionDeletesRetiredKeysBeforeTheLoadReturns() throws {
        let store = try Library.savedStore()
        let options = Library.migrating.merging([StrataStore.indexBuildOption: .string("synchronous")]) { $1 }
        let coordinator = try store.coordinator(model: LibraryModel(withTags: false).make(), options: options)
        #expect(try Self.keyCount(try Library.engine(coordinator), space: "Tag") == 0)
        #expect(try Self.record(coordinator).retired.isEmpty)
        try Library.expectClean(coordinator)
        try Library.close(coordinator)
    }

    // A renamed keyed relationship keeps its keys under the name they have ([REL-1], [ROW-5]):
    // no key moves, saves write under that name, and a later rename keeps it too.
    @Test func aRenamedKeyedRelationshipMovesNoKey() throws {
        let store = try Library.savedStore()
        let before = try Self.entries(of: store)
        let v2 = LibraryModel(tagsName: "labels", tagsIdentifier: "tags")
        let coordinator = try Library.open(store, v2)
        let engine = try Library.engine(coordinator)
        #expect(try Self.entries(engine) == before, "no key moved")
        #expect(try Self.record(coordinator).keyNames == [ModelRecord.keyNameKey(keySpace: "Book", relationship: "labels"): "tags"])
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let book = try #require(try context.fetch(Library.request("Book", "title == 'Book 0'")).first)
        let odd = try #require(try context.fetch(Library.request("Tag", "label == 'odd'")).first)
        try book.addObject(odd, toRelationship: "labels")
        try context.save()
        let tags = RelationshipKeys.relationshipPrefix(root: "Book", relationship: "tags")
        #expect(try engine.snapshot().countKeys(from: tags, to: RelationshipKeys.end(of: tags)) == 5)
        try Library.expectClean(coordinator)
        try Library.close(coordinator)

        let v3 = LibraryModel(tagsName: "topics", tagsIdentifier: "labels")
        let again = try Library.open(store, v3)
        #expect(try Self.record(again).keyNames == [ModelRecord.keyNameKey(keySpace: "Book", relationship: "topics"): "tags"])
        let reread = ManagedObjectContext(persistentStoreCoordinator: again)
        #expect(try reread.count(for: Library.request("Book", "ANY topics.label == 'odd'")) == 3)
        #expect(try reread.count(for: Library.request("Tag", "label == 'odd' AND books.@count == 3")) == 1)
        try Library.expectClean(again)
        try Library.close(again)
    }
}

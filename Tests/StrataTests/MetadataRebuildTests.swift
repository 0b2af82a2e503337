import Foundation
import ObjectGraph
@testable import Strata
import StrataEngine
import Testing

/// Issue 13: a StrataStore whose metadata record ([ROW-4]) or model record ([ROW-5]) is lost,
/// by a delete through the engine or by damage to the block that holds them and the engine's
/// repair. It used to open as a new store (counts 0, references from p1 again) and adopted
/// any model. SPEC.md [META-1]…[META-3], [OPEN-1].
@Suite(.timeLimit(.minutes(5))) struct MetadataRebuildTests {
    /// Which records a test loses.
    enum Lost: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case metadata, model, both
        var testDescription: String { rawValue }
        var metadata: Bool { self != .model }
        var model: Bool { self != .metadata }
    }

    /// Deletes the records `lost` names through the engine (what the engine's repair leaves
    /// after dropping the block that held them).
    static func lose(_ lost: Lost, in path: String) throws {
        let engine = try LibraryStore.openEngine(path)
        defer { try? engine.close() }
        var batch = WriteBatch()
        if lost.metadata { batch.delete(KeyLayout.metadataKey) }
        if lost.model { batch.delete(KeyLayout.modelKey) }
        _ = try engine.commit(batch)
    }

    /// The largest reference of any object the library fixture made.
    static func largestReference(_ library: LibraryStore) -> Int64 {
        library.uris.values.compactMap(LibraryStore.reference(ofURI:)).max() ?? 0
    }

    static let libraryCounts = ["Author": LibraryStore.authors, "Book": LibraryStore.books, "Shelf": LibraryStore.shelves]

    /// The library model ([ObjectGraphDemo.model]) with Book.price of `priceType` and, with
    /// `atlas`, an entity that sorts first, so every entity number shifts by one.
    static func libraryModel(priceType: AttributeType = .double, atlas: Bool = false) throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Author", properties: [
                .attribute("name", .string, optional: false, indexed: true),
                .attribute("born", .integer16),
                .toMany("books", "Book", inverse: "author", deleteRule: .cascade),
            ]),
            EntityDescription(name: "Book", properties: [
                .attribute("title", .string, optional: false),
                .attribute("year", .integer16, indexed: true),
                .attribute("genre", .string, indexed: true),
                .attribute("price", priceType),
                .toOne("author", "Author", inverse: "books"),
                .toMany("shelves", "Shelf", inverse: "books"),
            ]),
            EntityDescription(name: "Shelf", properties: [
                .attribute("label", .string, optional: false),
                .toMany("books", "Book", inverse: "shelves"),
            ]),
        ] + (atlas ? [EntityDescription(name: "Atlas", properties: [.attribute("title", .string)])] : []))
    }

    /// The library model with an entity that sorts first: every entity number shifts by one.
    static func renumberedModel() throws -> ManagedObjectModel { try libraryModel(atlas: true) }

    /// The library model with Book.price a string: Book's layout differs.
    static func retypedModel() throws -> ManagedObjectModel { try libraryModel(priceType: .string) }

    /// A coordinator with the library store at `path` added (`options` as given).
    static func open(_ path: String, model: ManagedObjectModel? = nil, options: [String: AttributeValue] = [:]) throws -> PersistentStoreCoordinator {
        StrataStore.register()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try model ?? ObjectGraphDemo.model())
        try coordinator.addPersistentStore(type: .strata, at: URL(fileURLWithPath: path), options: options)
        return coordinator
    }

    static func close(_ coordinator: PersistentStoreCoordinator) throws {
        for store in coordinator.persistentStores { try coordinator.remove(store) }
    }

    /// Counts per entity through the coordinator (the metadata's counts, [ROW-4]).
    static func counts(_ coordinator: PersistentStoreCoordinator) throws -> [String: Int] {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var counts: [String: Int] = [:]
        for entity in ["Author", "Book", "Shelf"] { counts[entity] = try context.count(for: FetchRequest(entityName: entity)) }
        return counts
    }

    /// Inserts an author with one book, saves, and returns their references: the save fails
    /// when a reference is handed out again ([KEY-3]).
    static func insertAuthorAndBook(_ coordinator: PersistentStoreCoordinator) throws -> [Int64] {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let author = try context.insertNewObject(forEntityName: "Author")
        try author.setValue(.string("New Author"), forKey: "name")
        let book = try context.insertNewObject(forEntityName: "Book")
        try book.setValue(.string("New Book"), forKey: "title")
        try book.setValue(author, forKey: "author")
        try context.save()
        return [author, book].compactMap { LibraryStore.reference(ofURI: $0.objectID.uriRepresentation().absoluteString) }
    }

    /// The object check of the store at `path` (read-only), as `strata fsck` runs it.
    static func objectProblems(_ path: String) throws -> [ObjectProblem] {
        try StoreInspector.withEngine(at: path) { try ObjectChecker.check(engine: $0, repair: false) }.problems
    }

    // MARK: Opening

    // [META-1] A store that lost its metadata record used to open as a new one: counts 0, the
    // next insert given p1 and failing on the existing row. It is refused with storeCorrupted,
    // saying to run `strata fsck --repair`, and nothing is written.
    @Test(arguments: [Lost.metadata, Lost.both], [false, true])
    func aStoreThatLostItsMetadataRecordIsRefusedAtOpenAndNothingIsWritten(lost: Lost, readOnly: Bool) throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        try Self.lose(lost, in: library.path)
        let before = try OnDisk.files(in: library.path)
        let options: [String: AttributeValue] = readOnly ? [PersistentStore.readOnlyOption: .bool(true)] : [:]
        do {
            let coordinator = try Self.open(library.path, options: options)
            Issue.record("the store opened as a new one: counts \(try Self.counts(coordinator))")
            try Self.close(coordinator)
        } catch let error as ObjectGraphError {
            #expect(error.code == .storeCorrupted, "\(error)")
            #expect(error.message.contains("metadata record") && error.message.contains("strata fsck --repair \(library.path)"), "\(error.message)")
            #expect(error.message.contains("\(LibraryStore.rows) rows"), "it says what the store holds: \(error.message)")
            #expect(error.message.contains("Nothing was written"), "\(error.message)")
        }
        #expect(throws: ObjectGraphError.self) { _ = try StrataStore.metadataForPersistentStore(at: URL(fileURLWithPath: library.path)) }
        #expect(try OnDisk.files(in: library.path) == before, "every file keeps its bytes")
    }

    // [META-2] The repair option rebuilds the record from the rows and the application's model
    // (checked against the model record, or the rows): counts per entity, a next reference
    // above every reference, so the next insert gets a fresh one.
    @Test(arguments: [Lost.metadata, Lost.both])
    func theRepairOptionRebuildsALostMetadataRecordAndTheNextInsertGetsAFreshReference(lost: Lost) throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        try Self.lose(lost, in: library.path)
        let largest = Self.largestReference(library)

        let coordinator = try Self.open(library.path, options: [StrataStore.repairOption: .bool(true)])
        #expect(try Self.counts(coordinator) == Self.libraryCounts)
        let engine = try #require((coordinator.persistentStores.first as? StrataStore)?.storageEngine)
        let record = try MetadataRecord.decode(try #require(try engine.get(KeyLayout.metadataKey)))
        #expect(record.nextReference > largest, "next reference \(record.nextReference), largest \(largest)")
        #expect(record.rowCounts == Self.libraryCounts)
        #expect(try engine.get(KeyLayout.modelKey) != nil, "the model record is written too")
        let fresh = try Self.insertAuthorAndBook(coordinator)
        #expect(fresh.count == 2 && fresh.allSatisfy { $0 > largest }, "\(fresh) after \(largest)")
        #expect(try Self.counts(coordinator)["Author"] == LibraryStore.authors + 1)
        try Self.close(coordinator)

        // Rebuilt for good: a plain open (no option) reads it, and fsck finds nothing wrong.
        let again = try Self.open(library.path)
        #expect(try Self.counts(again) == ["Author": LibraryStore.authors + 1, "Book": LibraryStore.books + 1, "Shelf": LibraryStore.shelves])
        try Self.close(again)
        #expect(try Self.objectProblems(library.path).isEmpty)
    }

    // [META-2] [META-3] rebuildMetadata checks the application's model against every row's
    // header before writing (no model record, no hashes to compare with): an unrelated model,
    // one that numbers the entities otherwise, and one with another layout of Book are refused
    // without writing. The store's model rebuilds both records, keeping the identifier given,
    // so object URIs saved before the loss resolve again.
    @Test func rebuildMetadataChecksTheModelAgainstTheRowsAndRebuildsBothRecords() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        try Self.lose(.both, in: library.path)
        let url = URL(fileURLWithPath: library.path)
        let before = try OnDisk.files(in: library.path)
        for (label, model, mentions) in [
            ("unrelated", try SafetyModel.unrelated(), ["entity #0", "entity #1", "entity #2"]),
            ("renumbered", try Self.renumberedModel(), ["entity #0", "Atlas"]),
            ("Book retyped", try Self.retypedModel(), ["Book", "layout"]),
        ] {
            let error = #expect(throws: ObjectGraphError.self, "\(label)") { try StrataStore.rebuildMetadata(at: url, model: model) }
            #expect(error?.code == .incompatibleModel, "\(label): \(String(describing: error))")
            for word in mentions { #expect(error?.message.contains(word) == true, "\(label): \(String(describing: error))") }
            #expect(try OnDisk.files(in: library.path) == before, "\(label): nothing written")
        }

        let rebuilt = try StrataStore.rebuildMetadata(at: url, model: try ObjectGraphDemo.model(), storeIdentifier: library.storeIdentifier)
        #expect(rebuilt.rebuiltMetadataRecord && rebuilt.rebuiltModelRecord)
        #expect(rebuilt.rowCounts == Self.libraryCounts)
        #expect(rebuilt.nextReference > Self.largestReference(library))
        #expect(rebuilt.storeIdentifier == library.storeIdentifier)

        let coordinator = try Self.open(library.path)
        #expect(try Self.counts(coordinator) == Self.libraryCounts)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let a1URI = try #require(library.uris["A1"].flatMap { URL(string: $0) })
        let a1 = try #require(coordinator.managedObjectID(forURIRepresentation: a1URI))
        #expect(try context.existingObject(with: a1).value(forKey: "name") == .string("Author 1"))
        let fresh = try Self.insertAuthorAndBook(coordinator)
        #expect(fresh.allSatisfy { $0 > Self.largestReference(library) })
        try Self.close(coordinator)
        #expect(try Self.objectProblems(library.path).isEmpty)
    }

    // [OPEN-1] A lost model record with the metadata record intact: the version hashes decide;
    // a changed model is refused without writing, the store's model rebuilds the record
    // ([IDX-S6]) and the store checks clean.
    @Test func aLostModelRecordIsRebuiltFromTheApplicationsModelWhenTheHashesMatch() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        try Self.lose(.model, in: library.path)
        let before = try OnDisk.files(in: library.path)
        #expect(throws: ObjectGraphError.self) { try Self.close(try Self.open(library.path, model: try Self.retypedModel())) }
        #expect(try OnDisk.files(in: library.path) == before)
        let coordinator = try Self.open(library.path)
        #expect(try Self.counts(coordinator) == Self.libraryCounts)
        let engine = try #require((coordinator.persistentStores.first as? StrataStore)?.storageEngine)
        #expect(try engine.get(KeyLayout.modelKey) == ModelRecord.encode(try ObjectGraphDemo.model()))
        try Self.close(coordinator)
        #expect(try Self.objectProblems(library.path).isEmpty)
    }

    // [OPEN-1] [META-3] With neither a model record nor version hashes (what `strata fsck
    // --repair` leaves without a model: a record with the next reference only), the rows
    // decide: a model that numbers the entities otherwise used to be adopted (the record
    // counted no rows); it is refused, naming the rows, and nothing is written. The store's
    // model opens it: read-only with the counts taken from the rows in memory, read-write with
    // the record completed.
    @Test func withNeitherModelRecordNorHashesEveryRowMustFitTheModel() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        try Self.lose(.both, in: library.path)
        do {
            let engine = try LibraryStore.openEngine(library.path)
            defer { try? engine.close() }
            var partial = MetadataRecord()
            partial.nextReference = Self.largestReference(library) + 1
            try engine.put(KeyLayout.metadataKey, partial.encode())
        }
        let before = try OnDisk.files(in: library.path)
        for model in [try Self.renumberedModel(), try SafetyModel.unrelated(), try Self.retypedModel()] {
            for readOnly in [false, true] {
                let options: [String: AttributeValue] = readOnly ? [PersistentStore.readOnlyOption: .bool(true)] : [:]
                let error = #expect(throws: ObjectGraphError.self) { try Self.close(try Self.open(library.path, model: model, options: options)) }
                #expect(error?.code == .incompatibleModel && error?.message.contains("entity #") == true, "\(String(describing: error))")
                #expect(try OnDisk.files(in: library.path) == before, "nothing written")
            }
        }
        let readOnly = try Self.open(library.path, options: [PersistentStore.readOnlyOption: .bool(true)])
        #expect(try Self.counts(readOnly) == Self.libraryCounts, "counted from the rows, in memory")
        try Self.close(readOnly)
        #expect(try OnDisk.files(in: library.path) == before, "a read-only load writes nothing")

        let coordinator = try Self.open(library.path)
        #expect(try Self.counts(coordinator) == Self.libraryCounts)
        let fresh = try Self.insertAuthorAndBook(coordinator)
        #expect(fresh.allSatisfy { $0 > Self.largestReference(library) })
        try Self.close(coordinator)
        #expect(try Self.objectProblems(library.path).isEmpty)
    }
}

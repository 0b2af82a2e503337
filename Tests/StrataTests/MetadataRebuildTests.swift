import Foundation
import ObjectGraph
@testable import Strata
import StrataDemo
import StrataEngine
import Testing

/// Issue 13: a StrataStore whose metadata record ([ROW-4]) or model record ([ROW-5]) is lost,
/// by a delete through the engine or by damage to the block that holds them and the engine's
/// repair. It used to be "clean, not a StrataStore" for fsck, opened as a new store (counts 0,
/// references from p1 again, the first insert failing on an existing row) and adopted any
/// model. SPEC.md [META-1]…[META-4], [OPEN-1].
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

    // MARK: strata fsck

    // [META-1] Both records lost: fsck used to say "clean, not a StrataStore" (exit 0). It is
    // damage (exit 1), named with the rows per hierarchy and entity number.
    @Test func fsckNamesAStoreThatLostBothRecordsAsDamagedNotAsAnEngineStore() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        try Self.lose(.both, in: library.path)
        let check = try scratch.run("fsck", library.path)
        #expect(check.status == 1, "\(check)")
        #expect(!check.stdout.contains("not a StrataStore"), "\(check)")
        for text in [
            "the metadata record ([ROW-4]) is missing and so is the model record ([ROW-5])",
            "Author: 7 of entity #0", "Book: 17 of entity #1", "Shelf: 3 of entity #2",
            "references up to \(Self.largestReference(library))",
        ] {
            #expect(check.stdout.contains(text), "fsck does not say \(text): \(check)")
        }
        let json = try scratch.run("fsck", "--json", library.path)
        #expect(json.status == 1)
        let report = try json.json(FsckJSON.self)
        #expect(report.objects?.isObjectStore == true && report.objects?.hasModel == false)
        #expect(report.objects?.problems.contains { $0.kind == "metadata" } == true, "\(report.problemTexts)")
    }

    // [META-2] The tool alone rebuilds what needs no model (the next reference, above every
    // reference a key names), says what needs the application's model, and exits 3; the
    // application's model then completes the record at a plain read-write open, fsck is clean
    // and the next insert gets a fresh reference.
    @Test func fsckRepairWithoutAModelKeepsReferencesSafeAndTheApplicationCompletesTheRebuild() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        try Self.lose(.both, in: library.path)
        let largest = Self.largestReference(library)
        let repair = try scratch.run("fsck", "--repair", "--no-backup", library.path)
        #expect(repair.status == 3, "the model record cannot be rebuilt by the tool: \(repair)")
        #expect(repair.stdout.contains("rebuilt the metadata record partly: next reference \(largest + 1)"), "\(repair)")
        #expect(repair.stdout.contains("StrataStore.rebuildMetadata(at:model:)"), "\(repair)")
        #expect(repair.lines.last == "problems found; some remain after repair (see above)", "\(repair)")
        let engine = try LibraryStore.openEngine(library.path)
        let record = try MetadataRecord.decode(try #require(try engine.get(KeyLayout.metadataKey)))
        try engine.close()
        #expect(record.nextReference == largest + 1 && record.rowCounts.isEmpty && record.metadata.isEmpty)
        let check = try scratch.run("fsck", library.path)
        #expect(check.status == 1 && check.stdout.contains("strata fsck cannot rebuild the record"), "\(check)")

        let coordinator = try Self.open(library.path)
        #expect(try Self.counts(coordinator) == Self.libraryCounts)
        let fresh = try Self.insertAuthorAndBook(coordinator)
        #expect(fresh.allSatisfy { $0 > largest }, "\(fresh)")
        try Self.close(coordinator)
        let clean = try scratch.run("fsck", library.path)
        #expect(clean.status == 0 && clean.lines.last == "clean", "\(clean)")
    }

    // [META-2] With the model record, the tool rebuilds the whole record: counts per entity,
    // the next reference and the version hashes (a new store UUID); it used to write counts
    // and the next reference only, and named no counts.
    @Test func fsckRepairRebuildsALostMetadataRecordWithTheModelRecordsHashes() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        try Self.lose(.metadata, in: library.path)
        let largest = Self.largestReference(library)
        let (check, repair) = try StrataToolFsckTests.checkRepairAndRecheck(
            scratch, library.path, backup: .none,
            named: ["the metadata record ([ROW-4]) is missing", "Author 7, Book 17, Shelf 3 (27 objects)"])
        #expect(check.objects?.problems.count == 1, "\(check.problemTexts)")
        #expect(repair.stdout.contains("rebuilt the metadata record from the rows and the model record: rows Author 7, Book 17, Shelf 3 (27 objects), next reference \(largest + 1), version hashes of the model record"), "\(repair)")
        let metadata = try StrataStore.metadataForPersistentStore(at: URL(fileURLWithPath: library.path))
        let model = try ObjectGraphDemo.model()
        for entity in model.entities {
            #expect(metadata[PersistentStore.modelVersionHashKeyPrefix + entity.name] == .data(entity.versionHash))
        }
        #expect(metadata[PersistentStore.storeUUIDKey]?.stringValue?.isEmpty == false)
        let coordinator = try Self.open(library.path)
        #expect(try Self.counts(coordinator) == Self.libraryCounts)
        #expect(try Self.insertAuthorAndBook(coordinator).allSatisfy { $0 > largest })
        try Self.close(coordinator)
        #expect(try scratch.run("fsck", library.path).status == 0)
    }

    // [META-2] Only the model record lost: the tool says it cannot rebuild it and what can,
    // exits 1 checking and 3 after --repair; the application's model rebuilds it.
    @Test func aStoreThatLostOnlyItsModelRecordNeedsTheApplicationsModel() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        try Self.lose(.model, in: library.path)
        let check = try scratch.run("fsck", library.path)
        #expect(check.status == 1 && check.stdout.contains("strata fsck cannot rebuild the record; the application's model can"), "\(check)")
        let repair = try scratch.run("fsck", "--repair", "--no-backup", library.path)
        #expect(repair.status == 3, "\(repair)")
        let coordinator = try Self.open(library.path)
        #expect(try Self.counts(coordinator) == Self.libraryCounts)
        try Self.close(coordinator)
        #expect(try scratch.run("fsck", library.path).status == 0)
    }

    // [META-1] Keys that merely start like StrataStore's (a row-shaped key whose value is no
    // row, others that do not parse) are an engine store's: not a StrataStore, exit 0.
    @Test func anEngineStoreWithoutStrataStoreKeysIsStillNotAStrataStore() throws {
        let scratch = try ToolScratch()
        let path = scratch.path + "/engine"
        do {
            let engine = try LibraryStore.openEngine(path)
            defer { try? engine.close() }
            try engine.put(Array("user:1".utf8), Array("Ada".utf8))
            try engine.put([0x01] + Array("Thing".utf8) + [0x00] + OnDisk.referenceBytes(7), Array("not a row".utf8))
            try engine.put([0x02, 0x41], [])
            try engine.put([0x03] + Array("x".utf8), [1])
        }
        let check = try scratch.run("fsck", path)
        #expect(check.status == 0 && check.lines.last == "clean", "\(check)")
        #expect(check.stdout.contains("not a StrataStore"), "\(check)")
        let report = try scratch.run("fsck", "--json", path).json(FsckJSON.self)
        #expect(report.objects?.isObjectStore == false)
    }

    // MARK: The issue: damage to the block holding both records

    /// A library whose authors come last (the highest references) and whose keys all lie in
    /// one segment with several data blocks; the first block holds the metadata record, the
    /// model record and the first rows (keys sort `0x00 metadata`, `0x00 model`, `0x01 Author…`).
    struct BigLibrary {
        var path: String
        var authors: Int
        var books: Int
        var largestReference: Int64
        var metadataSequence: UInt64
        var modelSequence: UInt64

        static func build(at path: String, authors: Int = 60, booksPerAuthor: Int = 8) throws -> BigLibrary {
            StrataStore.register()
            let coordinator = PersistentStoreCoordinator(managedObjectModel: try ObjectGraphDemo.model())
            try coordinator.addPersistentStore(
                type: .strata, at: URL(fileURLWithPath: path), options: [StrataStore.compactionOption: false, StrataStore.durabilityOption: "none"])
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            var shelves: [ManagedObject] = []
            for index in 0..<3 {
                let shelf = try context.insertNewObject(forEntityName: "Shelf")
                try shelf.setValue(.string("Shelf \(index)"), forKey: "label")
                shelves.append(shelf)
            }
            var books: [ManagedObject] = []
            for index in 0..<(authors * booksPerAuthor) {
                let book = try context.insertNewObject(forEntityName: "Book")
                try book.setValue(.string("Book \(index): " + String(repeating: "a long title that fills blocks ", count: 3)), forKey: "title")
                try book.setValue(.int16(Int16(1900 + index % 100)), forKey: "year")
                try book.setValue(.string(["fiction", "history", "poetry"][index % 3]), forKey: "genre")
                try book.setValue([shelves[index % 3]], forKey: "shelves")
                books.append(book)
            }
            try context.save()
            var all = shelves + books
            for index in 0..<authors {
                let author = try context.insertNewObject(forEntityName: "Author")
                try author.setValue(.string("Author \(index) " + String(repeating: "with a long name ", count: 4)), forKey: "name")
                for book in books[(index * booksPerAuthor)..<((index + 1) * booksPerAuthor)] { try book.setValue(author, forKey: "author") }
                all.append(author)
            }
            try context.save()
            let largest = all.compactMap { LibraryStore.reference(ofURI: $0.objectID.uriRepresentation().absoluteString) }.max() ?? 0
            for store in coordinator.persistentStores { try coordinator.remove(store) }
            // Everything into one segment, one version per key.
            let engine = try LibraryStore.openEngine(path)
            try engine.flush()
            try engine.compact(.full)
            let snapshot = try engine.snapshot()
            let metadata = try #require(snapshot.sequence(of: KeyLayout.metadataKey))
            let model = try #require(snapshot.sequence(of: KeyLayout.modelKey))
            try engine.close()
            return BigLibrary(
                path: path, authors: authors, books: authors * booksPerAuthor, largestReference: largest,
                metadataSequence: metadata, modelSequence: model)
        }

        /// Flips a byte in the middle of the first data block of the only segment.
        func damageFirstBlock() throws {
            let segments = try OnDisk.manifest(of: path).segments
            try #require(segments.count == 1)
            let segment = path + "/" + OnDisk.segmentName(segments[0].number)
            let layout = OnDisk.segmentLayout(try OnDisk.read(segment))
            try #require(layout.dataBlocks.count >= 3, "the fixture needs several data blocks")
            let block = layout.dataBlocks[0]
            try OnDisk.flip(segment, at: block.offset + 16 + block.stored / 2, mask: 0x08)
        }

        /// Rows per hierarchy root in the store now.
        func rows() throws -> [String: Int] {
            let engine = try LibraryStore.openEngine(path)
            defer { try? engine.close() }
            var rows: [String: Int] = [:]
            for key in try engine.snapshot().keys(prefix: [0x01]) {
                let root = String(decoding: key.dropFirst().prefix { $0 != 0 }, as: UTF8.self)
                rows[root, default: 0] += 1
            }
            return rows
        }
    }

    // The issue's report: damage to the block holding the metadata and model records. The
    // engine's repair drops the block; fsck then said "clean, not a StrataStore", counts read 0
    // and the next insert reused p1. Now the repair run names what was lost in acknowledged
    // terms (the commits' sequence numbers, the records, the rows per hierarchy with their
    // references), rebuilds a next reference above everything ever handed out, exits 3 (the
    // model record needs the application); the application's model completes the rebuild, a
    // second repair removes the links to lost objects, and the store is clean with fresh
    // references.
    @Test func damageToTheBlockHoldingBothRecordsIsReportedInAcknowledgedTermsAndRebuilt() throws {
        let scratch = try ToolScratch()
        let big = try BigLibrary.build(at: scratch.path + "/store")
        try big.damageFirstBlock()
        let check = try scratch.run("fsck", big.path)
        #expect(check.status == 1, "\(check)")
        // The same damage twice: one repair read as text, one as JSON.
        let copy = scratch.path + "/copy"
        try FileManager.default.copyItem(atPath: big.path, toPath: copy)
        try? FileManager.default.removeItem(atPath: copy + "/LOCK")

        let repair = try scratch.run("fsck", "--repair", "--no-backup", big.path)
        #expect(repair.status == 3, "\(repair)")
        let rows = try big.rows()
        let lostAuthors = big.authors - rows["Author", default: 0]
        try #require(lostAuthors > 0, "the first block held author rows")
        let lostBooks = big.books - rows["Book", default: 0]
        for text in [
            "lost, in acknowledged writes:",
            "lost the metadata record ([ROW-4]: row counts, next reference, store UUID, version hashes), written at sequence \(big.metadataSequence): gone",
            "lost the model record ([ROW-5]), written at sequence \(big.modelSequence): gone",
            "lost \(lostAuthors) row\(lostAuthors == 1 ? "" : "s") in Author's key space (p",
            "rebuilt the metadata record partly: next reference \(big.largestReference + 1)",
        ] {
            #expect(repair.stdout.contains(text), "the repair does not say \(text): \(repair)")
        }
        if lostBooks > 0 { #expect(repair.stdout.contains("lost \(lostBooks) rows in Book's key space"), "\(repair)") }
        #expect(repair.stdout.contains("(sequence"), "the dropped block's sequence numbers: \(repair)")

        let json = try scratch.run("fsck", "--repair", "--no-backup", "--json", copy)
        #expect(json.status == 3, "\(json)")
        let report = try json.json(FsckJSON.self)
        let losses = report.losses ?? []
        #expect(losses.contains { $0.kind == "metadata" && $0.outcome == "gone" && $0.firstSequence == big.metadataSequence }, "\(losses)")
        #expect(losses.contains { $0.kind == "model" && $0.outcome == "gone" })
        let authorLoss = try #require(losses.first { $0.kind == "rows" && $0.hierarchy == "Author" })
        #expect(authorLoss.count == lostAuthors && authorLoss.references?.count == lostAuthors && authorLoss.outcome == "gone")
        #expect(losses.contains { $0.kind == "sequences" && ($0.firstSequence ?? 0) <= big.modelSequence && ($0.lastSequence ?? 0) >= big.metadataSequence }, "\(losses)")

        // Only the application's model can finish: a plain read-write open checks every row's
        // header against it and completes the record.
        #expect(try scratch.run("fsck", big.path).status == 1)
        let coordinator = try Self.open(big.path)
        #expect(try Self.counts(coordinator) == ["Author": rows["Author", default: 0], "Book": rows["Book", default: 0], "Shelf": 3])
        try Self.close(coordinator)
        // Books whose author was lost point at nothing: a repair with the model record removes
        // those links; then the store is clean.
        let mend = try scratch.run("fsck", "--repair", "--no-backup", big.path)
        #expect(mend.status == 1 && mend.stdout.contains("after repair: clean"), "\(mend)")
        let clean = try scratch.run("fsck", big.path)
        #expect(clean.status == 0, "\(clean)")

        let reopened = try Self.open(big.path)
        let fresh = try Self.insertAuthorAndBook(reopened)
        #expect(fresh.allSatisfy { $0 > big.largestReference }, "no reference handed out before the damage is reused: \(fresh)")
        #expect(try Self.counts(reopened)["Author"] == rows["Author", default: 0] + 1)
        try Self.close(reopened)
        #expect(try scratch.run("fsck", big.path).status == 0)
    }
}

import Foundation
import ObjectGraph
import Strata
import StrataDemo
import StrataEngine
import Testing

/// `strata fsck` run as a process on real stores: a clean store, then one kind of damage per
/// store (SPEC.md [REC-3], [REC-4], [REC-7], [SEG-*], [MAN-*]; object-level: [KEY-2], [ROW-1],
/// [IDX-S1]), each found and named, repaired with a backup of the original files, and clean
/// afterwards.
@Suite(.timeLimit(.minutes(5))) struct StrataToolFsckTests {
    @Test func aCleanStoreIsCleanAndItsJSONReportCarriesTheSameCountsAsTheText() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        let manifest = try OnDisk.manifest(of: library.path)
        #expect(manifest.segments.count == 2 && manifest.wals.count == 1, "the fixture: rows in two segments and a WAL")

        let text = try scratch.run("fsck", library.path)
        #expect(text.status == 0, "\(text)")
        #expect(text.lines.last == "clean", "\(text)")
        #expect(text.stderr.isEmpty, "\(text)")

        let json = try scratch.run("fsck", "--json", library.path)
        #expect(json.status == 0, "\(json)")
        let report = try json.json(FsckJSON.self)
        #expect(report.verdict == "clean", "\(json)")
        let objects = try #require(report.objects, "\(json)")
        // The facts, derived from what the fixture wrote (not from the tool).
        #expect(report.files.walRecords == 3, "saves 3…5 are in the WAL")
        #expect(report.files.blocks >= 4, "two segments, each with a data and a hint block")
        #expect(report.files.liveKeys == LibraryStore.keys)
        #expect(report.files.problems.isEmpty, "\(report.problemTexts)")
        #expect(objects.isObjectStore && objects.hasModel)
        #expect(objects.rows == LibraryStore.rows)
        #expect(objects.references == LibraryStore.references)
        #expect(objects.indexEntries == LibraryStore.indexEntries)
        #expect(objects.problems.isEmpty, "\(report.problemTexts)")
        #expect(report.repaired == false && report.after == nil && report.backupPath == nil)
        // The text says the same.
        let files = report.files
        #expect(text.stdout.contains("\(files.walRecords) WAL records, \(files.blocks) blocks, \(files.entries) entries, \(files.liveKeys) live keys, \(humanBytes(files.bytesChecked)) checked: ok"), "\(text)")
        #expect(text.stdout.contains("\(objects.rows) rows, \(objects.references) references, \(objects.indexEntries) index entries: ok"), "\(text)")
        // Checking changes nothing.
        let before = try OnDisk.files(in: library.path)
        _ = try scratch.run("fsck", library.path)
        #expect(try OnDisk.files(in: library.path) == before)
    }

    // [REC-4] A payload CRC failure with bytes after the record is corruption.
    @Test func aDamagedWALRecordBeforeTheLastIsNamedByFileAndOffsetAndRepairDropsIt() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        let walName = OnDisk.walName(try #require(try OnDisk.manifest(of: library.path).wals.last))
        let walPath = library.path + "/" + walName
        let records = OnDisk.walRecords(try OnDisk.read(walPath))
        try #require(records.count == 3)
        let damaged = records[1]  // save 4, with save 5 after it
        try OnDisk.flip(walPath, at: damaged.lowerBound + 16 + (damaged.count - 16) / 2, mask: 0x10)

        let (check, repair) = try Self.checkRepairAndRecheck(
            scratch, library.path, backup: .default,
            named: [walName, "offset \(damaged.lowerBound)"])
        #expect(check.files.problems.contains { $0.path.hasSuffix(walName) && $0.offset == UInt64(damaged.lowerBound) && $0.severity == "error" }, "\(check.problemTexts)")
        #expect(repair.stdout.contains("  dropped \(walPath) [\(damaged.lowerBound), +\(damaged.count))"), "the repair lists the dropped record: \(repair)")
    }

    /// The sequence the store's durable bound names ([DUR-1]: `SYNC`, two slots of 32 bytes,
    /// the sequence a u64 at offset 16 of each; both hold valid records here).
    static func durableBound(_ store: String) throws -> UInt64 {
        let bytes = try OnDisk.read(store + "/SYNC")
        return max(OnDisk.u64(bytes, 16), OnDisk.u64(bytes, 48))
    }

    // [DUR-3] [DUR-4] The last record of the newest WAL damaged (its payload CRC fails at the end
    // of the file) after the commit was acknowledged: not a torn tail but a lost transaction.
    // fsck names it by sequence and exits 1; opening refuses and changes nothing; --repair keeps
    // the WAL as found, accepts the loss and leaves a store that checks clean.
    @Test func damageInTheNewestWALsLastAcknowledgedRecordIsALostTransactionThatRepairAccepts() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        let walName = OnDisk.walName(try #require(try OnDisk.manifest(of: library.path).wals.last))
        let walPath = library.path + "/" + walName
        let records = OnDisk.walRecords(try OnDisk.read(walPath))
        let last = try #require(records.last)
        let lost = try Self.durableBound(library.path)
        try OnDisk.flip(walPath, at: last.lowerBound + 16 + (last.count - 16) / 2, mask: 0x10)
        let damaged = try OnDisk.read(walPath)

        let json = try scratch.run("fsck", "--json", library.path).json(FsckJSON.self)
        #expect(json.files.lostSequences == [.init(first: lost, last: lost)], "\(json.problemTexts)")
        #expect(json.files.problems.contains { $0.severity == "error" && $0.path == walPath && $0.offset == UInt64(last.lowerBound) })
        let before = try OnDisk.files(in: library.path)
        let open = try scratch.run("inspect", library.path)
        #expect(open.status == 2 && open.stderr.contains("acknowledged transactions \(lost)…\(lost) are lost"), "\(open)")
        #expect(try OnDisk.files(in: library.path) == before, "the refused open changed nothing")

        let (check, repair) = try Self.checkRepairAndRecheck(
            scratch, library.path, backup: .none,
            named: [walName, "offset \(last.lowerBound)", "lost acknowledged transactions: sequences \(lost)"])
        #expect(check.files.lostSequences == [.init(first: lost, last: lost)])
        #expect(repair.stdout.contains("  accepted the loss of acknowledged transactions \(lost)"), "\(repair)")
        #expect(repair.stdout.contains("  kept \(walPath).damaged (the WAL as found)"), "\(repair)")
        #expect(try OnDisk.read(walPath + ".damaged") == damaged)
        let after = try scratch.run("fsck", library.path)
        #expect(after.status == 0 && after.stdout.contains("warning: \(walPath).damaged"), "\(after)")
    }

    // [DUR-3] The newest WAL cut at a record boundary, the last acknowledged transactions gone:
    // no damaged byte is left, and fsck still exits 1 naming them.
    @Test func aNewestWALCutBeforeItsLastAcknowledgedRecordsIsReportedAsLost() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        let walPath = library.path + "/" + OnDisk.walName(try #require(try OnDisk.manifest(of: library.path).wals.last))
        let bytes = try OnDisk.read(walPath)
        let records = OnDisk.walRecords(bytes)
        try #require(records.count >= 3)
        let bound = try Self.durableBound(library.path)
        try OnDisk.write(Array(bytes[0..<records[records.count - 2].lowerBound]), to: walPath)
        let check = try scratch.run("fsck", library.path)
        #expect(check.status == 1, "\(check)")
        #expect(check.stdout.contains("lost acknowledged transactions: sequences \(bound - 1)…\(bound)"), "\(check)")
        let json = try scratch.run("fsck", "--json", library.path).json(FsckJSON.self)
        #expect(json.files.lostSequences == [.init(first: bound - 1, last: bound)])
    }

    // [REC-3] [DUR-3] Bytes after the last acknowledged record that were never synced (a commit
    // a crash cut short): a torn tail, a warning; fsck passes the store, and opening cuts the
    // tail, keeping its bytes beside the WAL.
    @Test func aTornTailAfterTheLastAcknowledgedRecordIsAWarningThatOpeningCutsOff() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        let walName = OnDisk.walName(try #require(try OnDisk.manifest(of: library.path).wals.last))
        let walPath = library.path + "/" + walName
        let bytes = try OnDisk.read(walPath)
        let tail: [UInt8] = [0x5A, 0x11, 0, 0, 0x40, 0, 0, 0, 1, 0]  // fewer than a record header
        try OnDisk.write(bytes + tail, to: walPath)

        let check = try scratch.run("fsck", library.path)
        #expect(check.status == 0, "a torn tail is a warning, not damage: \(check)")
        #expect(check.stdout.contains("warning: \(walPath) at offset \(bytes.count): torn tail of \(tail.count) bytes"), "\(check)")
        let json = try scratch.run("fsck", "--json", library.path).json(FsckJSON.self)
        #expect(json.files.problems.count == 1 && json.files.problems.first?.severity == "warning", "\(json.problemTexts)")
        #expect(json.files.lostSequences.isEmpty)
        // With nothing but warnings, --repair has nothing to do and makes no backup.
        let repair = try scratch.run("fsck", "--repair", library.path)
        #expect(repair.status == 0, "\(repair)")
        #expect(try scratch.names(in: scratch.path).filter { $0.contains("fsck-backup") } == [])

        let engine = try LibraryStore.openEngine(library.path)
        try engine.close()
        #expect(try OnDisk.read(walPath) == bytes, "the tail is cut")
        #expect(try OnDisk.read(walPath + ".torn-\(bytes.count)") == tail, "and kept")
        let after = try scratch.run("fsck", library.path)
        #expect(after.status == 0 && !after.stdout.contains("torn tail of"), "\(after)")
    }

    // [SEG-3] [REC-7] A data block failing its CRC: named by segment and block offset; repair
    // drops the block's entries and mends the objects that pointed at its rows.
    @Test func aDamagedSegmentDataBlockIsNamedAndRepairDropsItsRows() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        let segment = try #require(try OnDisk.manifest(of: library.path).segments.last)
        let name = OnDisk.segmentName(segment.number), path = library.path + "/" + name
        let layout = OnDisk.segmentLayout(try OnDisk.read(path))
        let block = try #require(layout.dataBlocks.first)
        try OnDisk.flip(path, at: block.offset + 16 + block.stored / 2, mask: 0x04)

        let (check, repair) = try Self.checkRepairAndRecheck(
            scratch, library.path, backup: .directory(scratch.path + "/chosen-backup"), named: [name, "offset \(block.offset)"])
        #expect(check.files.problems.contains { $0.path.hasSuffix(name) && $0.offset == UInt64(block.offset) }, "\(check.problemTexts)")
        #expect(repair.stdout.contains("  dropped \(path) [\(block.offset), +\(16 + block.stored)): data block"), "\(repair)")
    }

    // [SEG-6] [SEG-1] [SEG-8] A footer byte covered by the footer CRC: the blocks are found
    // without it and only the footer is lost (the whole segment used to be dropped).
    @Test func aDamagedSegmentFooterIsNamedAndRepaired() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        let segment = try #require(try OnDisk.manifest(of: library.path).segments.last)
        let name = OnDisk.segmentName(segment.number), path = library.path + "/" + name
        let layout = OnDisk.segmentLayout(try OnDisk.read(path))
        try OnDisk.flip(path, at: layout.footer + 40, mask: 0x01)  // the entry count

        let (check, repair) = try Self.checkRepairAndRecheck(scratch, library.path, backup: .none, named: [name])
        #expect(check.files.problems.contains { $0.path.hasSuffix(name) && $0.severity == "error" }, "\(check.problemTexts)")
        #expect(repair.stdout.contains("  dropped \(path) [\(layout.footer), +64): segment footer"), "\(repair)")
        #expect(repair.stdout.contains("  nothing acknowledged was lost"), "\(repair)")
        let after = try scratch.run("fsck", "--json", library.path).json(FsckJSON.self)
        #expect(after.objects?.rows == LibraryStore.rows)
    }

    // [MAN-3] A manifest byte inside the checksummed body: corruption at the CRC's offset;
    // repair rebuilds the manifest from the files present ([REC-7]).
    @Test func aDamagedManifestIsNamedAndRepairRebuildsIt() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        let manifestBytes = try OnDisk.read(library.path + "/MANIFEST")
        try OnDisk.flip(library.path + "/MANIFEST", at: 20, mask: 0x02)  // lastSequence

        let (check, repair) = try Self.checkRepairAndRecheck(
            scratch, library.path, backup: .default, named: ["MANIFEST", "offset \(manifestBytes.count - 4)", "checksum"])
        #expect(check.objects == nil && check.objectsSkippedReason != nil, "objects cannot be checked before the files are repaired")
        #expect(repair.stdout.contains("rebuilt the manifest"), "\(repair)")
        // Nothing was lost: every row is still there.
        let after = try scratch.run("fsck", "--json", library.path).json(FsckJSON.self)
        #expect(after.objects?.rows == LibraryStore.rows)
    }

    // [SEG-6] [REC-2] A segment cut short: its size disagrees with the manifest and its footer
    // is gone.
    @Test func aTruncatedSegmentIsNamedAndRepaired() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        let segment = try #require(try OnDisk.manifest(of: library.path).segments.last)
        let name = OnDisk.segmentName(segment.number), path = library.path + "/" + name
        let bytes = try OnDisk.read(path)
        try OnDisk.write(Array(bytes.prefix(bytes.count / 2)), to: path)

        let (check, repair) = try Self.checkRepairAndRecheck(
            scratch, library.path, backup: .default, named: [name, "\(bytes.count / 2) bytes", "\(bytes.count)"])
        // [SEG-8] The blocks before the cut are kept: the bytes from the first block the cut
        // reached are dropped, and the missing rest up to the size the manifest recorded.
        let cut = bytes.count / 2
        let layout = OnDisk.segmentLayout(bytes)
        let firstCut = (layout.dataBlocks + layout.hintBlocks).first { $0.offset + 16 + $0.stored > cut }?.offset ?? cut
        #expect(repair.stdout.contains("  dropped \(path) [\(min(firstCut, cut)), +"), "\(repair)")
        #expect(repair.stdout.contains("  dropped \(path) [\(cut), +\(bytes.count - cut)): missing"), "\(repair)")
        #expect(check.files.problems.contains { $0.path.hasSuffix(name) && $0.message.contains("manifest recorded \(bytes.count)") }, "\(check.problemTexts)")
    }

    // [REC-2] A segment named by the manifest but absent.
    @Test func aMissingSegmentIsNamedAndRepaired() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        let segment = try #require(try OnDisk.manifest(of: library.path).segments.last)
        let name = OnDisk.segmentName(segment.number)
        try FileManager.default.removeItem(atPath: library.path + "/" + name)

        let (check, repair) = try Self.checkRepairAndRecheck(scratch, library.path, backup: .default, named: [name, "missing"])
        #expect(repair.stdout.contains("  dropped \(library.path)/\(name) [0, +"), "\(repair)")
        #expect(check.files.problems.contains { $0.path.hasSuffix(name) && $0.message.contains("missing") }, "\(check.problemTexts)")
    }

    // [KEY-2] [ROW-1] Rows deleted behind StrataStore's back (an author and a shelf) leave other
    // rows pointing at them: fsck names both objects; repair removes the links; ObjectGraph then
    // reads the store without errors and the deleted objects are in no relationship.
    @Test func danglingRelationshipsAreNamedByObjectURIAndRepairRemovesTheLinks() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        let author = try #require(library.uris["A1"]), shelf = try #require(library.uris["S2"])
        do {
            let engine = try LibraryStore.openEngine(library.path)
            defer { try? engine.close() }
            for uri in [author, shelf] {
                let key = try #require(LibraryStore.rowKey(ofURI: uri))
                #expect(try engine.get(key) != nil, "the fixture's row key of \(uri)")
                try engine.delete(key)
            }
        }

        let (check, repair) = try Self.checkRepairAndRecheck(scratch, library.path, backup: .default, named: [author, shelf, "danglingReference"])
        let dangling = (check.objects?.problems ?? []).filter { $0.kind == "danglingReference" }
        // B3…B5 point at A1; every book on S2 points at it.
        #expect(dangling.contains { $0.message.contains(author) } && dangling.contains { $0.message.contains(shelf) }, "\(check.problemTexts)")
        #expect(repair.stdout.contains("removed") && repair.stdout.contains(author) && repair.stdout.contains(shelf), "\(repair)")

        // ObjectGraph reads the repaired store: the deleted objects are gone from every relationship.
        StrataStore.register()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try ObjectGraphDemo.model())
        let persistent = try coordinator.addPersistentStore(type: .strata, at: URL(fileURLWithPath: library.path), options: [:])
        defer { try? coordinator.remove(persistent) }
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let books = try context.fetch(FetchRequest(entityName: "Book"))
        let authors = try context.fetch(FetchRequest(entityName: "Author"))
        let shelves = try context.fetch(FetchRequest(entityName: "Shelf"))
        #expect(books.count == LibraryStore.books && authors.count == LibraryStore.authors - 1 && shelves.count == LibraryStore.shelves - 1)
        #expect(try context.count(for: FetchRequest(entityName: "Author")) == LibraryStore.authors - 1, "the metadata's counts were rebuilt")
        var orphans = 0
        for book in books {
            let linked = try book.objectIDs(forRelationshipNamed: "author") + book.objectIDs(forRelationshipNamed: "shelves")
            #expect(!linked.map { $0.uriRepresentation().absoluteString }.contains(author))
            #expect(!linked.map { $0.uriRepresentation().absoluteString }.contains(shelf))
            if try book.object(forKey: "author") == nil { orphans += 1 }
            _ = try book.objects(forKey: "shelves").map { try $0.value(forKey: "label") }
        }
        #expect(orphans == 3, "A1's three books lost their author")
        for object in authors + shelves {
            _ = try object.objects(forKey: "books").map { try $0.value(forKey: "title") }
        }
    }

    // [IDX-S1] An index entry removed and one no row accounts for, written with the engine.
    @Test func missingAndExtraIndexEntriesAreNamedAndRepaired() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        var removed: [UInt8] = [], extra: [UInt8] = []
        do {
            let engine = try LibraryStore.openEngine(library.path)
            defer { try? engine.close() }
            let index = try engine.snapshot().keys(prefix: [0x02])
            #expect(index.count == LibraryStore.indexEntries)
            removed = try #require(index.first)
            extra = Array(try #require(index.last).dropLast(8)) + OnDisk.referenceBytes(9_999)
            try engine.delete(removed)
            try engine.put(extra, [])
        }
        let (check, repair) = try Self.checkRepairAndRecheck(
            scratch, library.path, backup: .default,
            named: ["missingIndexEntry", "extraIndexEntry", OnDisk.hex(removed), OnDisk.hex(extra)])
        let problems = check.objects?.problems ?? []
        #expect(problems.contains { $0.kind == "missingIndexEntry" && $0.key == OnDisk.hex(removed) }, "\(check.problemTexts)")
        #expect(problems.contains { $0.kind == "extraIndexEntry" && $0.key == OnDisk.hex(extra) }, "\(check.problemTexts)")
        #expect(problems.count == 2, "\(check.problemTexts)")
        #expect(repair.stdout.contains("added index entry 0x\(OnDisk.hex(removed))") && repair.stdout.contains("deleted index entry 0x\(OnDisk.hex(extra))"), "\(repair)")
        let engine = try LibraryStore.openEngine(library.path)
        defer { try? engine.close() }
        #expect(try engine.get(removed) == [] && engine.get(extra) == nil)
    }

    @Test func repairWithJSONReportsTheRepairAndTheCleanRecheck() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        let author = try #require(library.uris["A2"])
        do {
            let engine = try LibraryStore.openEngine(library.path)
            defer { try? engine.close() }
            try engine.delete(try #require(LibraryStore.rowKey(ofURI: author)))
        }
        let run = try scratch.run("fsck", "--repair", "--no-backup", "--json", "--verbose", library.path)
        #expect(run.status == 1, "\(run)")
        let report = try run.json(FsckJSON.self)
        #expect(report.repaired && report.backupPath == nil)
        #expect(run.stderr.contains("warning strata:") && run.stderr.contains("object repair"), "--verbose logs each repair: \(run)")
        #expect(report.verdict == "repaired", "\(run)")
        #expect(report.after?.isClean == true, "\(run)")
        #expect(report.objects?.problems.contains { $0.kind == "danglingReference" && $0.message.contains(author) } == true, "\(report.problemTexts)")
        #expect(report.objectRepairs.contains { $0.contains("removed") && $0.contains(author) }, "\(report.objectRepairs)")
        #expect(try scratch.run("fsck", library.path).status == 0)
    }

    // MARK: Check, repair, check again

    enum Backup {
        /// The default `<store>.fsck-backup-<time>`.
        case `default`
        /// `--backup-dir`.
        case directory(String)
        /// `--no-backup`.
        case none
    }

    /// Runs `fsck` (exit 1, naming every string of `named` in its text output), `fsck --json`
    /// (the same verdict), `fsck --repair` (exit 1: found and repaired; the backup holds the
    /// original files), then `fsck` again (exit 0). Returns the JSON check and the repair run.
    static func checkRepairAndRecheck(
        _ scratch: ToolScratch, _ store: String, backup: Backup, named: [String],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> (check: FsckJSON, repair: ToolRun) {
        let check = try scratch.run("fsck", store)
        #expect(check.status == 1, "\(check)", sourceLocation: sourceLocation)
        for text in named { #expect(check.stdout.contains(text), "fsck does not name \(text): \(check)", sourceLocation: sourceLocation) }
        #expect(check.lines.last == "problems found; run `strata fsck --repair \(store)` to salvage", "\(check)", sourceLocation: sourceLocation)

        let json = try scratch.run("fsck", "--json", store)
        #expect(json.status == 1, "\(json)", sourceLocation: sourceLocation)
        let report = try json.json(FsckJSON.self)
        #expect(!report.problemTexts.isEmpty && !report.repaired, sourceLocation: sourceLocation)
        #expect(report.verdict == "problems", "\(json)", sourceLocation: sourceLocation)

        let original = try OnDisk.files(in: store)
        var arguments = ["fsck", "--repair"]
        switch backup {
        case .default: break
        case .directory(let path): arguments += ["--backup-dir", path]
        case .none: arguments.append("--no-backup")
        }
        let repair = try scratch.run(arguments + [store])
        #expect(repair.status == 1, "found and repaired: \(repair)", sourceLocation: sourceLocation)
        #expect(repair.stdout.contains("\nrepair:\n") && repair.stdout.contains("after repair: clean"), "\(repair)", sourceLocation: sourceLocation)
        #expect(repair.lines.last == "problems found and repaired", "\(repair)", sourceLocation: sourceLocation)
        let backups = try scratch.names(in: (store as NSString).deletingLastPathComponent).filter { $0.contains(".fsck-backup-") }
        let announced = repair.lines.first { $0.hasPrefix("  backup of the files before repair: ") }
            .map { String($0.dropFirst("  backup of the files before repair: ".count)) }
        switch backup {
        case .default:
            #expect(backups.count == 1, "\(backups)", sourceLocation: sourceLocation)
            #expect(announced == backups.first.map { store + $0.dropFirst("store".count) }, "\(repair)", sourceLocation: sourceLocation)
        case .directory(let path):
            #expect(backups.isEmpty, sourceLocation: sourceLocation)
            #expect(announced == path, "\(repair)", sourceLocation: sourceLocation)
        case .none:
            #expect(backups.isEmpty && announced == nil, "\(repair)", sourceLocation: sourceLocation)
        }
        if let announced {
            #expect(try OnDisk.files(in: announced) == original, "the backup holds the files as they were before the repair", sourceLocation: sourceLocation)
        }

        let again = try scratch.run("fsck", store)
        #expect(again.status == 0, "clean after repair: \(again)", sourceLocation: sourceLocation)
        #expect(again.lines.last == "clean", sourceLocation: sourceLocation)
        return (report, repair)
    }
}

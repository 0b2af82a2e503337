import Foundation
import ObjectGraph
import Strata
import StrataEngine
import Testing

/// `strata compact`, `inspect`, `dump`, `stats` and `demo` run as processes on real stores.
@Suite(.timeLimit(.minutes(5))) struct StrataToolCommandTests {
    // MARK: compact

    /// An engine store holding 2,000 keys each written 20 times, one flush per round: 20
    /// segments, 19 of them all dead.
    static func overwrittenEngineStore(at path: String) throws {
        var options = EngineOptions()
        options.compaction.automatic = false
        options.backgroundFlush = false
        options.durability = .none
        let engine = try Engine.open(at: path, options: options)
        defer { try? engine.close() }
        for round in 0..<20 {
            var batch = WriteBatch()
            for key in 0..<2_000 {
                batch.put(Array(String(format: "key-%05d", key).utf8), Array(String(format: "round %02d of key %05d", round, key).utf8))
            }
            try engine.commit(batch)
            try engine.flush()
        }
        // A few keys deleted and some left in the WAL.
        for key in stride(from: 0, to: 2_000, by: 100) { try engine.delete(Array(String(format: "key-%05d", key).utf8)) }
        try engine.put(Array("key-00001".utf8), Array("in the WAL".utf8))
    }

    @Test func compactReclaimsOverwrittenSpaceAndTheDumpIsUnchanged() throws {
        let scratch = try ToolScratch()
        let store = scratch.path + "/store"
        try Self.overwrittenEngineStore(at: store)
        let dumpBefore = try scratch.run("dump", store)
        #expect(dumpBefore.status == 0, "\(dumpBefore)")
        #expect(dumpBefore.lines.count == 2_000 - 20, "one line per live key")
        let statsBefore = try scratch.run("stats", "--json", store).json(StatsJSON.self)

        let run = try scratch.run("compact", "--json", store)
        #expect(run.status == 0, "\(run)")
        let report = try run.json(CompactJSON.self)
        #expect(report.bytesAfter < report.bytesBefore, "\(run)")
        #expect(report.segmentsBefore == 20 && report.segmentsRemoved > 0 && report.segmentsAfter < report.segmentsBefore, "\(run)")
        #expect(report.walsBefore == 1 && report.walsAfter == 1, "the WAL is flushed; a fresh one remains")
        #expect(report.keyCount == 2_000 - 20)
        #expect(statsBefore.keyCount == report.keyCount && statsBefore.diskBytes == report.bytesBefore)

        let dumpAfter = try scratch.run("dump", store)
        #expect(dumpAfter.status == 0)
        #expect(dumpAfter.stdout == dumpBefore.stdout, "compaction changes no record")
        let statsAfter = try scratch.run("stats", "--json", store).json(StatsJSON.self)
        #expect(statsAfter.diskBytes == report.bytesAfter && statsAfter.segmentFiles == report.segmentsAfter)
        #expect(statsAfter.spaceAmplification < statsBefore.spaceAmplification, "before \(statsBefore.spaceAmplification), after \(statsAfter.spaceAmplification)")
        #expect(try scratch.run("fsck", store).status == 0)
    }

    @Test func compactFullRewritesEverySegmentOfAStrataStoreAndChangesNoRecord() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        let dumpBefore = try scratch.run("dump", "--json", library.path)
        #expect(dumpBefore.status == 0)
        let segmentsBefore = Set(try OnDisk.manifest(of: library.path).segments.map(\.number))

        let text = try scratch.run("compact", "--full", library.path)
        #expect(text.status == 0, "\(text)")
        #expect(text.stdout.contains("segments: 2 → ") && text.stdout.contains("WAL files 1 → 1"), "\(text)")
        let manifest = try OnDisk.manifest(of: library.path)
        #expect(segmentsBefore.isDisjoint(with: manifest.segments.map(\.number)), "every segment was rewritten")
        #expect(manifest.segments.count >= 1 && manifest.wals.count == 1)
        #expect(OnDisk.walRecords(try OnDisk.read(library.path + "/" + OnDisk.walName(manifest.wals[0]))).isEmpty, "the WAL was flushed")

        let dumpAfter = try scratch.run("dump", "--json", library.path)
        #expect(dumpAfter.stdout == dumpBefore.stdout, "compaction changes no record")
        let check = try scratch.run("fsck", "--json", library.path)
        #expect(check.status == 0, "\(check)")
        #expect(try check.json(FsckJSON.self).objects?.rows == LibraryStore.rows)

        // With --json, a second full compaction reports what it did.
        let json = try scratch.run("compact", "--full", "--json", library.path).json(CompactJSON.self)
        #expect(json.segmentsBefore == manifest.segments.count && json.segmentsRemoved == manifest.segments.count && json.segmentsWritten >= 1)
        #expect(json.keyCount == LibraryStore.keys)
        #expect(try scratch.run("dump", "--json", library.path).stdout == dumpBefore.stdout)
    }

    // MARK: inspect

    @Test func inspectTextAndJSONAgreeOnFilesSizesAndRowCounts() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        let text = try scratch.run("inspect", library.path)
        #expect(text.status == 0, "\(text)")
        let json = try scratch.run("inspect", "--json", library.path)
        #expect(json.status == 0)
        let report = try json.json(InspectJSON.self)

        // The files are those the manifest names, with their sizes on disk.
        let manifest = try OnDisk.manifest(of: library.path)
        let named = manifest.wals.map(OnDisk.walName) + manifest.segments.map { OnDisk.segmentName($0.number) }
        #expect(Set(report.files.map(\.name)) == Set(named))
        #expect(report.nextFileNumber == manifest.nextFileNumber)
        for file in report.files {
            let size = try #require(try FileManager.default.attributesOfItem(atPath: library.path + "/" + file.name)[.size] as? NSNumber)
            #expect(file.sizeBytes == size.uint64Value, "\(file.name)")
            let line = try #require(text.lines.first { $0.hasPrefix("    \(file.name)  ") }, "\(file.name) in \(text)")
            if file.kind == "wal" {
                #expect(line.contains("WAL      \(humanBytes(file.sizeBytes)), \(file.records) records, \(file.entries) entries"), "\(line)")
                #expect(file.records == 3)
            } else {
                #expect(file.kind == "segment")
                #expect(line.contains("segment  \(humanBytes(file.sizeBytes)), \(file.entries) entries, \(file.dataBlocks) blocks"), "\(line)")
            }
            #expect(line.contains("live \(humanBytes(file.liveBytes)), dead \(humanBytes(file.deadBytes))"), "\(line)")
        }
        #expect(report.keyCount == LibraryStore.keys)
        #expect(text.stdout.contains("last sequence \(report.lastSequence), \(report.keyCount) keys"), "\(text)")

        // The StrataStore: identifier, model and rows per entity.
        #expect(report.isObjectStore && report.storeIdentifier == library.storeIdentifier)
        #expect(text.stdout.contains("StrataStore \(library.storeIdentifier), next reference \(report.nextReference ?? -1)"), "\(text)")
        let expected = ["Author": LibraryStore.authors, "Book": LibraryStore.books, "Shelf": LibraryStore.shelves]
        #expect(report.rowCounts == expected)
        #expect(Dictionary(uniqueKeysWithValues: report.entities.map { ($0.name, $0.rows) }) == expected)
        for entity in report.entities {
            #expect(text.lines.contains("    \(entity.name)  \(entity.rows) rows"), "\(entity.name) in \(text)")
            for line in entity.attributes + entity.relationships { #expect(text.lines.contains("      \(line)"), "\(line)") }
        }
        let book = try #require(report.entities.first { $0.name == "Book" })
        #expect(book.attributes.contains("year: integer16 indexed") && book.relationships.contains("shelves → Shelf* (inverse books)"), "\(book)")
    }

    @Test func inspectAnObjectByURIPrintsItsAttributesAndRelationships() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        let uri = try #require(library.uris["B0"]), author = try #require(library.uris["A0"])
        let book = LibraryStore.bookZero

        let text = try scratch.run("inspect", library.path, "--object", uri)
        #expect(text.status == 0, "\(text)")
        #expect(text.stdout.hasPrefix("row 0x\(OnDisk.hex(try #require(LibraryStore.rowKey(ofURI: uri)))) \(uri) v2 "), "saved twice: \(text)")
        for field in ["title: \"\(book.title)\"", "year: \(book.year)", "genre: \"\(book.genre)\"", "price: \(book.price)", "author: \"\(author)\""] {
            #expect(text.stdout.contains(field), "\(field) in \(text)")
        }

        let json = try scratch.run("inspect", "--json", "--object", uri, library.path)
        #expect(json.status == 0)
        let record = try RecordJSON(json.stdout)
        #expect(record.kind == "row" && record.object == uri && record.entity == "Book" && record.version == 2)
        #expect(record.reference == LibraryStore.reference(ofURI: uri))
        let fields = try #require(record.fields)
        #expect(fields["title"] as? String == book.title)
        #expect((fields["year"] as? NSNumber)?.intValue == Int(book.year))
        #expect(fields["genre"] as? String == book.genre)
        #expect((fields["price"] as? NSNumber)?.doubleValue == book.price)
        #expect(fields["author"] as? String == author)
        #expect(Set(fields["shelves"] as? [String] ?? []) == Set([library.uris["S0"], library.uris["S1"]].compactMap { $0 }))

        // An object that is not there, and a URI naming no entity of the model.
        let missing = try scratch.run("inspect", library.path, "--object", "x-coredata://\(library.storeIdentifier)/Book/p999999")
        #expect(missing.status == 2 && missing.stderr.contains("no record"), "\(missing)")
        let unknown = try scratch.run("inspect", library.path, "--object", "x-coredata://\(library.storeIdentifier)/Magazine/p1")
        #expect(unknown.status == 2 && unknown.stderr.contains("Magazine"), "\(unknown)")
    }

    // [KEY-1] The metadata record's key is 0x00 "metadata".
    @Test func inspectTheMetadataKeyShowsTheMetadataRecordAndAnUnknownKeyIsAnError() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        let metadataKey = OnDisk.hex([0x00] + Array("metadata".utf8))
        #expect(metadataKey == "006d65746164617461")

        for spelling in [metadataKey, "0x" + metadataKey] {
            let text = try scratch.run("inspect", library.path, "--key", spelling)
            #expect(text.status == 0, "\(text)")
            #expect(text.stdout.hasPrefix("metadata 0x\(metadataKey) "), "\(text)")
            #expect(text.stdout.contains("NSStoreUUID: \"\(library.storeIdentifier)\""), "\(text)")
        }
        let json = try scratch.run("inspect", "--json", "--key", metadataKey, library.path)
        let record = try RecordJSON(json.stdout)
        #expect(record.kind == "metadata" && record.key == metadataKey)
        let counts = record.fields?["rowCounts"] as? [String: Any]
        #expect((counts?["Book"] as? NSNumber)?.intValue == LibraryStore.books, "\(json)")

        let unknown = try scratch.run("inspect", library.path, "--key", "0xdeadbeef")
        #expect(unknown.status == 2, "\(unknown)")
        #expect(unknown.stdout.isEmpty && unknown.stderr.contains("no record with key 0xdeadbeef"), "\(unknown)")
        let both = try scratch.run("inspect", library.path, "--key", metadataKey, "--object", library.uris["B0"]!)
        #expect(both.status == 2, "\(both)")
    }

    // The key `inspect --help` shows as an example is the metadata record's.
    @Test func theKeyInInspectsHelpExampleNamesARecordOfEveryStrataStore() throws {
        let scratch = try ToolScratch()
        let help = try scratch.run("inspect", "--help")
        let example = try #require(help.lines.first { $0.contains("strata inspect ") && $0.contains(" --key ") }, "\(help)")
        let key = try #require(example.split(separator: " ").last.map(String.init))
        let library = try LibraryStore.build(at: scratch.path + "/store")
        let run = try scratch.run("inspect", library.path, "--key", key)
        #expect(run.status == 0, "the documented example fails: \(run)")
    }

    // MARK: stats and dump

    @Test func statsJSONParsesAndAgreesWithInspect() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        let stats = try scratch.run("stats", "--json", library.path)
        #expect(stats.status == 0, "\(stats)")
        let report = try stats.json(StatsJSON.self)
        let inspect = try scratch.run("inspect", "--json", library.path).json(InspectJSON.self)
        #expect(report.keyCount == inspect.keyCount && report.keyCount == LibraryStore.keys)
        #expect(report.lastSequence == inspect.lastSequence)
        #expect(report.walFiles == 1 && report.segmentFiles == 2)
        #expect(report.diskBytes == inspect.files.reduce(0) { $0 + $1.sizeBytes })
        #expect(report.rowCounts == inspect.rowCounts)
        #expect(report.spaceAmplification >= 1)
        let text = try scratch.run("stats", library.path)
        #expect(text.status == 0 && text.stdout.contains("keys:                \(report.keyCount)\n"), "\(text)")
        // The row cache in words and units, not raw counter names.
        let cacheLine = try #require(text.lines.first { $0.contains("row cache (this process):") }, "\(text)")
        #expect(cacheLine.hasSuffix("0 hits, 0 misses (no reads yet); 0 entries, 0 B of 64.0 MiB; 0 pinned keys (0 B); 0 evictions; 0 reads from WAL images"), "\(cacheLine)")
    }

    @Test func theRowCacheLineGivesTheHitRateAndUnits() {
        let line = StatsReport.rowCacheDescription([
            "hits": 3, "misses": 1, "entries": 2, "unpinnedBytes": 2048, "budgetBytes": 1_048_576, "pinnedKeys": 5, "pinnedBytes": 512,
            "evictions": 7, "walReads": 9,
        ])
        #expect(line == "3 hits, 1 misses (75 % hits); 2 entries, 2.0 KiB of 1.0 MiB; 5 pinned keys (512 B); 7 evictions; 9 reads from WAL images")
    }



    @Test func dumpJSONIsOneRecordPerLineInKeyOrderWithEveryRow() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        let run = try scratch.run("dump", "--json", library.path)
        #expect(run.status == 0, "\(run)")
        let records = try run.lines.map(RecordJSON.init)
        #expect(records.count == LibraryStore.keys)
        #expect(records.filter { $0.kind == "row" }.count == LibraryStore.rows)
        #expect(records.filter { $0.kind == "index" }.count == LibraryStore.indexEntries)
        #expect(records.filter { $0.kind == "metadata" }.count == 1 && records.filter { $0.kind == "model" }.count == 1)
        #expect(records.map(\.key) == records.map(\.key).sorted(), "key order")
        #expect(Set(records.compactMap(\.object)) == Set(library.uris.values), "every object, by URI")
        let b0 = try #require(records.first { $0.object == library.uris["B0"] })
        #expect(b0.fields?["title"] as? String == "Book 0")

        let rows = try scratch.run("dump", "--json", "--rows-only", library.path)
        #expect(try rows.lines.map(RecordJSON.init).map(\.kind) == Array(repeating: "row", count: LibraryStore.rows))
        let text = try scratch.run("dump", library.path)
        #expect(text.lines.count == records.count)
        #expect(zip(text.lines, records).allSatisfy { $0.hasPrefix("\($1.kind) 0x\($1.key)") }, "the text lines are the same records")
    }

    // MARK: demo

    @Test func demoBuildsAStoreThatAnswersCorrectlyAndChecksClean() throws {
        let scratch = try ToolScratch()
        let directory = scratch.path + "/library"
        let run = try scratch.run("demo", directory)
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("every answer matched"), "\(run)")
        let check = try scratch.run("fsck", directory)
        #expect(check.status == 0 && check.lines.last == "clean", "\(check)")
        // A second demo refuses to overwrite the store.
        let again = try scratch.run("demo", directory)
        #expect(again.status == 2 && again.stderr.contains("already holds a store"), "\(again)")
    }

    /// `demo --json`: one JSON document with the verdict and every timed step; `--quiet`: the
    /// verdict line alone.
    @Test func demoReportsAsJSONAndQuietly() throws {
        struct Report: Decodable {
            struct Step: Decodable {
                var title: String
                var milliseconds: Double
            }
            var verdict: String
            var store: String
            var temporary: Bool
            var steps: [Step]
            var failures: [String]
        }
        let scratch = try ToolScratch()
        let run = try scratch.run("demo", "--authors", "12", "--json", scratch.path + "/library")
        #expect(run.status == 0, "\(run)")
        let report = try run.json(Report.self)
        #expect(report.verdict == "verified" && report.failures.isEmpty && !report.temporary)
        #expect(report.store == scratch.path + "/library")
        #expect(report.steps.count >= 8 && report.steps.allSatisfy { !$0.title.isEmpty && $0.milliseconds >= 0 }, "\(run)")
        #expect(report.steps.first?.title.hasPrefix("insert 12 authors") == true, "\(run)")

        let quiet = try scratch.run("demo", "--authors", "12", "--quiet")
        #expect(quiet.status == 0, "\(quiet)")
        #expect(quiet.lines == ["strata demo: every answer matched what was written; fsck found the store clean."], "\(quiet)")
    }

    /// Every command's `--json` document carries a top-level verdict beside its fields.
    @Test func everyJSONDocumentHasAVerdict() throws {
        struct Verdict: Decodable { var verdict: String }
        let scratch = try ToolScratch()
        let store = scratch.path + "/library"
        #expect(try scratch.run("demo", "--authors", "4", "--quiet", store).status == 0)
        for (arguments, expected) in [(["stats"], "ok"), (["inspect"], "ok"), (["fsck"], "clean"), (["compact"], "compacted")] {
            let run = try scratch.run(arguments + ["--json", store])
            #expect(run.status == 0, "\(run)")
            #expect(try run.json(Verdict.self).verdict == expected, "\(run)")
        }
        // The document keeps its own fields beside the verdict.
        struct Stats: Decodable {
            var verdict: String
            var keyCount: Int
        }
        #expect(try scratch.run("stats", "--json", store).json(Stats.self).keyCount > 0)
    }

    /// Progress without a terminal: a line per phase (named) and per tenth of a phase whose
    /// size is known, on standard error only; none with `--quiet`, and none for work shorter
    /// than the threshold (`STRATA_PROGRESS_AFTER`, one second by default).
    @Test func progressNamesEveryPhaseOnStandardError() throws {
        let scratch = try ToolScratch()
        let store = scratch.path + "/library"
        let now = ["STRATA_PROGRESS_AFTER": "0"]
        let demo = try scratch.run(["demo", "--authors", "30", store], environment: now)
        #expect(demo.status == 0, "\(demo)")
        #expect(demo.stderr.contains("demo: insert 30 authors"), "\(demo)")
        #expect(demo.stderr.contains("demo: close and reopen the store…"), "\(demo)")

        let fsck = try scratch.run(["fsck", store], environment: now)
        #expect(fsck.status == 0 && fsck.lines.last == "clean", "\(fsck)")
        let lines = fsck.stderr.split(separator: "\n").map(String.init)
        #expect(lines.first == "fsck: checking files…", "\(fsck)")
        #expect(lines.contains("fsck: checking files 100%"), "\(fsck)")
        #expect(lines.contains("fsck: checking objects…") && lines.last == "fsck: checking objects 100%", "\(fsck)")
        #expect(!fsck.stdout.contains("checking"), "progress stays off standard output: \(fsck)")

        let compact = try scratch.run(["compact", store], environment: now)
        #expect(compact.status == 0, "\(compact)")
        let phases = compact.stderr.split(separator: "\n").map(String.init).filter { $0.hasSuffix("…") }
        #expect(phases == ["compact: opening the store (replaying its log)…", "compact: flushing the log into segments…", "compact: compacting…"], "\(compact)")

        for command in ["stats", "inspect"] {
            let run = try scratch.run([command, store], environment: now)
            #expect(run.status == 0 && run.stderr.hasPrefix("\(command): opening the store (replaying its log)…"), "\(run)")
        }
        let dump = try scratch.run(["dump", store], environment: now)
        #expect(dump.status == 0 && dump.stderr.contains("dump: opening the store") && dump.stderr.contains("dump: writing records 100%"), "\(dump)")

        let quiet = try scratch.run(["fsck", "--quiet", store], environment: now)
        #expect(quiet.status == 0 && quiet.stderr.isEmpty, "\(quiet)")
        let json = try scratch.run(["fsck", "--json", store], environment: now)
        #expect(json.status == 0 && json.stderr.isEmpty, "\(json)")
        let quick = try scratch.run(["fsck", store], environment: ["STRATA_PROGRESS_AFTER": "60"])
        #expect(quick.status == 0 && quick.stderr.isEmpty, "shorter than the threshold: no progress: \(quick)")
    }

    /// On a terminal (a pseudo-terminal from util-linux's `script`), progress is one line
    /// redrawn in place: the phase, a bar, the share done, then the line cleared at the end.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script"), "needs util-linux's script for a terminal"))
    func progressOnATerminalIsOneRedrawnLine() throws {
        let scratch = try ToolScratch()
        let store = scratch.path + "/library"
        #expect(try scratch.run("demo", "--authors", "30", "--quiet", store).status == 0)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        process.arguments = ["-qec", "\(try StrataTool.executable()) fsck \(store)", "/dev/null"]
        process.environment = ProcessInfo.processInfo.environment.merging(["STRATA_PROGRESS_AFTER": "0"]) { $1 }
        let output = Pipe()
        process.standardOutput = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let bytes = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(process.terminationStatus == 0, "\(text)")
        #expect(text.contains("\rfsck: checking files ["), "a bar redrawn from the line's start: \(text.debugDescription)")
        #expect(text.contains("\rfsck: checking objects ["), "\(text.debugDescription)")
        #expect(text.contains("100%"), "\(text.debugDescription)")
        #expect(text.contains("\r\u{1B}[K"), "the line cleared at the end: \(text.debugDescription)")
        #expect(!text.contains("fsck: checking files 10%\n"), "no line per tenth on a terminal: \(text.debugDescription)")
        #expect(text.hasSuffix("clean\r\n") || text.hasSuffix("clean\n"), "\(text.debugDescription)")
    }

    /// `--verbose`: the engine's log on standard error (opening, the flush); nothing without it.
    @Test func verboseShowsTheEnginesLogOnStandardError() throws {
        let scratch = try ToolScratch()
        let store = scratch.path + "/library"
        #expect(try scratch.run("demo", "--authors", "6", "--quiet", store).status == 0)
        let verbose = try scratch.run("compact", "--verbose", store)
        #expect(verbose.status == 0, "\(verbose)")
        #expect(verbose.stderr.contains("opened the store") && verbose.stderr.contains("path=\(store)"), "\(verbose)")
        #expect(verbose.stderr.contains("flushed a WAL into a segment"), "\(verbose)")
        #expect(!verbose.stdout.contains("opened the store"), "the log stays off standard output: \(verbose)")
        let stats = try scratch.run("stats", "--verbose", store)
        #expect(stats.status == 0 && stats.stderr.contains("readOnly=true"), "\(stats)")
        let plain = try scratch.run(["compact", store], environment: ["STRATA_PROGRESS_AFTER": "60"])
        #expect(plain.status == 0 && plain.stderr.isEmpty, "\(plain)")
    }

    /// `--version`: the release and the formats this build writes.
    @Test func versionNamesTheReleaseAndTheFormats() throws {
        let run = try ToolScratch().run("--version")
        #expect(run.status == 0, "\(run)")
        #expect(run.lines == [StrataBuild.description], "\(run)")
        #expect(StrataBuild.description.contains("files: format \(Engine.formatVersion)"))
        #expect(StrataBuild.description.contains("rows: format 3"))
    }
}

import Testing
@testable import StrataEngine

// Issue 13: a store that lost its MANIFEST or a WAL is rebuilt from the files that remain
// (SPEC.md [REC-7]), and what the lost file held is reported in acknowledged terms: the
// sequence numbers the manifest, the durable bound (`SYNC`, [DUR-3]) and the surviving files
// say it held. A missing WAL used to fail even a repair open.

@Suite struct MissingFileRepairTests {
    /// A store without segments whose commits are split over two WALs: `wals[0]` holds
    /// `batches[0..<split]` (sequences 1…split), the active `wals[1]` the rest; `SYNC` names the
    /// last commit in the active WAL.
    struct TwoWALs {
        var files: [String: [UInt8]]
        var batches: [ModelBatch]
        var split: Int
        var wals: [String]

        func makeFileSystem() -> FaultInjectingFileSystem {
            let fs = FaultInjectingFileSystem()
            for (path, bytes) in files { fs.setContents(bytes, of: path) }
            return fs
        }

        static func build() throws -> TwoWALs {
            let base = try DamageFixture.standard(segmentBatchCount: 0, flush: false)
            let records = base.walRecords
            try #require(records.count == base.walBatches.count && records.count == 5)
            let split = 2
            let older = WALRecord.fileHeader(fileNumber: 1) + records[0..<split].flatMap { Array(base.walBytes[$0]) }
            let active = WALRecord.fileHeader(fileNumber: 2) + records[split...].flatMap { Array(base.walBytes[$0]) }
            var files = base.files.filter { !$0.key.hasSuffix(".wal") }
            let wals = [Damage.directory + "/" + Format.walFileName(1), Damage.directory + "/" + Format.walFileName(2)]
            files[wals[0]] = older
            files[wals[1]] = active
            files[Damage.manifestPath] = Manifest(nextFileNumber: 3, lastSequence: 0, wals: [1, 2], segments: []).encode()
            files[Damage.directory + "/" + Format.syncFileName] =
                SyncRecord(walNumber: 2, sequence: UInt64(records.count), walEnd: UInt32(active.count)).encodeFile()
            return TwoWALs(files: files, batches: base.walBatches, split: split, wals: wals)
        }
    }

    /// Opens `fs` with repair; checks the content, a normal reopen and a clean second repair;
    /// returns the report.
    static func repair(
        _ fs: FaultInjectingFileSystem, _ what: String, expected: [[UInt8]: [UInt8]], sourceLocation: SourceLocation = #_sourceLocation
    ) -> RepairReport? {
        SegmentSalvageTests.repair(fs, what, expected: expected, sourceLocation: sourceLocation)
    }

    // MARK: MANIFEST

    // [REC-7] [DIR-4] MANIFEST deleted, with a MANIFEST.tmp beside it (a stale manifest that
    // names only the WAL, as before the flush, or a torn one): rebuilt from the WAL and segment
    // files present, never from the temporary manifest, and nothing is lost.
    @Test func aDeletedManifestBesideAManifestTmpIsRebuiltFromTheFilesPresent() throws {
        let fixture = try DamageFixture.standard()
        let manifest = try #require(fixture.files[Damage.manifestPath])
        let walNumber = try #require(Format.parseNumberedFileName(String(fixture.walPath.split(separator: "/").last ?? ""))?.number)
        let stale = Manifest(nextFileNumber: walNumber + 1, lastSequence: 0, wals: [walNumber], segments: []).encode()
        for (what, temporary) in [("stale", stale), ("torn", Array(manifest.prefix(20))), ("none", nil)] {
            let fs = fixture.makeFileSystem()
            try fs.remove(Damage.manifestPath)
            if let temporary { fs.setContents(temporary, of: Damage.directory + "/" + Format.manifestTempFileName) }
            guard let report = Self.repair(fs, "MANIFEST deleted, MANIFEST.tmp \(what)", expected: fixture.model) else { continue }
            #expect(report.rebuiltManifest, "\(what)")
            #expect(report.lost.isEmpty && report.lostSequences.isEmpty && report.dropped.isEmpty, "\(what): \(report)")
            #expect(fs.contents(of: Damage.directory + "/" + Format.manifestTempFileName) == nil, "\(what): the temporary manifest is removed")
        }
    }

    // [MAN-2] [REC-7] Found by fuzzing the rebuild: with MANIFEST gone, a WAL and a segment of
    // the same number (a file copied in; the engine never makes one) made the rebuilt manifest
    // name the number twice, the index pointed into the wrong file and reads failed. The WAL is
    // renumbered, its records read, and nothing is lost.
    @Test func aRebuiltManifestNeverNamesANumberTwice() throws {
        let fixture = try DamageFixture.standard()
        let fs = fixture.makeFileSystem()
        try fs.remove(Damage.manifestPath)
        fs.setContents(fixture.walBytes, of: Damage.directory + "/" + Format.walFileName(fixture.segmentNumber))
        guard let report = Self.repair(fs, "a WAL copied under the segment's number", expected: fixture.model) else { return }
        #expect(report.rebuiltManifest && report.lost.isEmpty && report.lostSequences.isEmpty, "\(report)")
    }

    // [REC-7] [SEG-3] [DUR-3] The newest commit a delete that a full compaction dropped (its
    // tombstone shadowed nothing older): with MANIFEST lost, the segments still account for its
    // sequence, so neither the checker nor the repair reports acknowledged commits lost.
    @Test func aCompactedAwayDeleteIsNotReportedLostWhenTheManifestIsRebuilt() throws {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: Damage.directory, options: testOptions(fs, rollover: 1 << 20))
        var batch = WriteBatch()
        batch.put([1], [1])
        batch.put([2], [2])
        try engine.commit(batch)
        var put = WriteBatch()
        put.put([3], [3])
        try engine.commit(put)
        var delete = WriteBatch()
        delete.delete([3])
        try engine.commit(delete)
        try engine.flush()
        try engine.compact(.full)
        try engine.close()
        try fs.remove(Damage.manifestPath)
        let report = try StoreChecker.check(at: Damage.directory, fileSystem: fs)
        #expect(!report.problems.contains { $0.message.contains("acknowledged transactions") }, "\(report.problems)")
        var options = testOptions(fs, rollover: 1 << 20)
        options.repair = true
        let repaired = try Engine.open(at: Damage.directory, options: options)
        #expect(repaired.repairReport?.lostSequences == [], "\(String(describing: repaired.repairReport))")
        #expect(try contents(of: repaired) == [[1]: [1], [2]: [2]])
        try repaired.close()
    }

    // MARK: WAL

    // [REC-7] [DUR-3] The only (active) WAL deleted: repair starts a fresh WAL, keeps everything
    // the segment holds, and reports the commits that were in the WAL by sequence: the durable
    // bound names them, the segment's newest sequence is below them.
    @Test func aDeletedActiveWALIsReportedByTheSequencesItHeld() throws {
        let fixture = try DamageFixture.standard()
        let fs = fixture.makeFileSystem()
        try fs.remove(fixture.walPath)
        let first = UInt64(fixture.segmentBatches.count + 1), last = UInt64(fixture.allBatches.count)
        guard let report = Self.repair(fs, "active WAL deleted", expected: Damage.model(fixture.segmentBatches)) else { return }
        #expect(report.lostSequences == [first...last], "\(report)")
        #expect(report.dropped.contains { $0.path == fixture.walPath }, "the report names the missing WAL: \(report.dropped)")
        #expect(!fs.listFiles(under: Damage.directory).contains(fixture.walPath), "the WAL's number is not reused")
    }

    // [REC-7] The active WAL of two deleted: what the older WAL holds survives; the active
    // WAL's commits are reported by sequence (from the older WAL's last record to the bound).
    @Test func aDeletedActiveWALBehindAnOlderOneKeepsTheOlderWALsCommits() throws {
        let store = try TwoWALs.build()
        let fs = store.makeFileSystem()
        try fs.remove(store.wals[1])
        let expected = Damage.model(Array(store.batches[0..<store.split]))
        guard let report = Self.repair(fs, "active WAL deleted", expected: expected) else { return }
        #expect(report.lostSequences == [UInt64(store.split + 1)...UInt64(store.batches.count)], "\(report)")
        #expect(report.dropped.contains { $0.path == store.wals[1] }, "\(report.dropped)")
    }

    // [REC-7] An older WAL deleted: the active WAL's commits survive; the older WAL's are
    // reported by sequence (the gap below the active WAL's first record).
    @Test func aDeletedOlderWALIsReportedByTheSequencesItHeld() throws {
        let store = try TwoWALs.build()
        let fs = store.makeFileSystem()
        try fs.remove(store.wals[0])
        let expected = Damage.model(Array(store.batches[store.split...]))
        guard let report = Self.repair(fs, "older WAL deleted", expected: expected) else { return }
        let dropped = report.dropped.filter { $0.path == store.wals[0] }
        #expect(dropped.count == 1 && dropped.first?.sequences == 1...UInt64(store.split), "\(report.dropped)")
        #expect(report.lostSequences.isEmpty, "the bound's commits are all there: \(report)")
    }

    // [REC-7] MANIFEST and the active WAL both deleted: the manifest is rebuilt around a fresh
    // WAL and the bound still says which commits are gone.
    @Test func aDeletedManifestAndActiveWALAreRebuiltAndTheLossReported() throws {
        let fixture = try DamageFixture.standard()
        let fs = fixture.makeFileSystem()
        try fs.remove(fixture.walPath)
        try fs.remove(Damage.manifestPath)
        guard let report = Self.repair(fs, "MANIFEST and WAL deleted", expected: Damage.model(fixture.segmentBatches)) else { return }
        #expect(report.rebuiltManifest)
        #expect(report.lostSequences == [UInt64(fixture.segmentBatches.count + 1)...UInt64(fixture.allBatches.count)], "\(report)")
    }

    // [DIR-5] A read-only repair writes nothing, so it cannot start the WAL a missing one
    // leaves the store without: it fails, naming the WAL, and changes no file.
    @Test func aReadOnlyRepairOfAStoreWithoutItsActiveWALFailsAndWritesNothing() throws {
        let fixture = try DamageFixture.standard()
        let fs = fixture.makeFileSystem()
        try fs.remove(fixture.walPath)
        let before = fs.listFiles(under: Damage.directory).map { ($0, fs.contents(of: $0) ?? []) }
        var options = Damage.options(fs, repair: true)
        options.readOnly = true
        let error = caught { try Engine.open(at: Damage.directory, options: options) }
        #expect(error?.code == .corruption && error?.path == fixture.walPath, "\(String(describing: error))")
        #expect(fs.listFiles(under: Damage.directory).map { ($0, fs.contents(of: $0) ?? []) }.elementsEqual(before, by: { $0 == $1 }))
    }
}

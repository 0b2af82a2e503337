import Testing
@testable import StrataEngine
import StrataSync

/// The offline checker behind `strata fsck`: finds every kind of damage, reports and goes on.
@Suite struct StoreCheckerTests {
    /// A closed store with two segments and a WAL of three records.
    static func store() throws -> FaultInjectingFileSystem {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: "/store", options: testOptions(fs, rollover: 1 << 20))
        for round in 0..<2 {
            var batch = WriteBatch()
            for i in 0..<40 { batch.put(testKey(i), Array("round \(round) value \(i)".utf8)) }
            try engine.commit(batch)
            try engine.flush()
        }
        try engine.delete(testKey(1))
        try engine.put(testKey(2), Array("in the WAL".utf8))
        try engine.put(testKey(99), Array("new".utf8))
        try engine.close()
        return fs
    }

    static func segments(_ fs: FaultInjectingFileSystem) -> [String] {
        fs.listFiles(under: "/store").filter { $0.hasSuffix(".seg") }.sorted()
    }

    @Test func aHealthyStoreIsClean() throws {
        let fs = try Self.store()
        let progress = Locked<[UInt64]>([])
        let report = try StoreChecker.check(at: "/store", fileSystem: fs) { step in progress.withLock { $0.append(step.bytesDone) } }
        #expect(report.problems == [])
        #expect(report.isClean)
        #expect(report.walRecords == 3)
        #expect(report.liveKeys == 40)
        #expect(report.blocks > 2)
        let steps = progress.withLock { $0 }
        #expect(!steps.isEmpty && steps == steps.sorted())
    }

    @Test func aDamagedWALRecordIsAnErrorNamingItsOffset() throws {
        let fs = try Self.store()
        fs.flipBits(in: "/store/00000004.wal", at: Format.walHeaderSize + 20)  // inside the first record
        let report = try StoreChecker.check(at: "/store", fileSystem: fs)
        #expect(!report.isClean)
        #expect(report.problems.contains { $0.path == "/store/00000004.wal" && $0.offset == UInt64(Format.walHeaderSize) })
    }

    @Test func aDamagedDataBlockAndADamagedHintAreBothReported() throws {
        let fs = try Self.store()
        let segments = Self.segments(fs)
        try #require(segments.count == 2)
        fs.flipBits(in: segments[0], at: Format.segmentHeaderSize + Format.blockHeaderSize + 3)
        let number = try #require(Format.parseNumberedFileName(String(segments[1].split(separator: "/").last ?? "")))
        let reader = try SegmentReader.open(fileSystem: fs, path: segments[1], fileNumber: number.number)
        let hint = try #require(reader.hintBlocks.first)
        fs.flipBits(in: segments[1], at: Int(hint.offset) + Format.blockHeaderSize + 1)
        let report = try StoreChecker.check(at: "/store", fileSystem: fs)
        #expect(report.problems.contains { $0.path == segments[0] && $0.offset == UInt64(Format.segmentHeaderSize) })
        #expect(report.problems.contains { $0.path == segments[1] && $0.offset == hint.offset })
    }

    @Test func orphansAndTornTailsAreWarningsAndMissingSegmentsErrors() throws {
        let fs = try Self.store()
        fs.setContents([1, 2, 3], of: "/store/00000077.seg")
        let wal = try #require(fs.contents(of: "/store/00000004.wal"))
        fs.setContents(Array(wal.dropLast(2)), of: "/store/00000004.wal")
        try setDurableBound(fs, 4)  // [DUR-3] the last commit (5) was never synced: a torn tail
        var report = try StoreChecker.check(at: "/store", fileSystem: fs)
        #expect(report.isClean, "warnings only: \(report.problems)")
        #expect(report.problems.filter { $0.severity == .warning }.count == 2)
        try fs.remove(Self.segments(fs)[0])
        report = try StoreChecker.check(at: "/store", fileSystem: fs)
        #expect(report.problems.contains { $0.severity == .error && $0.message.contains("missing") })
    }

    @Test func aDamagedManifestIsReported() throws {
        let fs = try Self.store()
        fs.flipBits(in: "/store/MANIFEST", at: 20)
        let report = try StoreChecker.check(at: "/store", fileSystem: fs)
        #expect(report.problems.count == 1)
        #expect(report.problems.first?.path == "/store/MANIFEST")
    }

    // [REC-7] Issue 13: a store without its MANIFEST was "not a Strata store" (fsck exit 2).
    // It is one error, and the files present are checked as the rebuilt manifest names them.
    @Test func aMissingManifestIsAnErrorAndTheFilesPresentAreChecked() throws {
        let fs = try Self.store()
        try fs.remove("/store/MANIFEST")
        let report = try StoreChecker.check(at: "/store", fileSystem: fs)
        #expect(report.problems.count == 1, "\(report.problems)")
        #expect(report.problems.first?.path == "/store/MANIFEST" && report.problems.first?.message.contains("missing") == true)
        #expect(report.walRecords == 3 && report.liveKeys == 40)
    }

    // [REC-7] [DUR-3] A missing WAL is an error naming the acknowledged commits it held: an
    // older one's from the records around it, the active one's from the durable bound.
    @Test func aMissingWALIsAnErrorNamingTheCommitsItHeld() throws {
        let store = try MissingFileRepairTests.TwoWALs.build()
        let older = store.makeFileSystem()
        try older.remove(store.wals[0])
        var report = try StoreChecker.check(at: Damage.directory, fileSystem: older)
        #expect(report.lostSequences == [1...UInt64(store.split)], "\(report.problems)")
        #expect(report.problems.contains { $0.path == store.wals[0] && $0.message.contains("missing") && $0.message.contains("1…\(store.split)") })
        let active = store.makeFileSystem()
        try active.remove(store.wals[1])
        report = try StoreChecker.check(at: Damage.directory, fileSystem: active)
        #expect(report.lostSequences == [UInt64(store.split + 1)...UInt64(store.batches.count)], "\(report.problems)")
        #expect(report.problems.contains { $0.path == store.wals[1] && $0.message.contains("is missing") && $0.message.contains("acknowledged transactions") })
    }

    // [SEG-8] A segment whose header does not check out is checked as a repair will salvage it:
    // one error for the header (it held no entry), every block and entry checked.
    @Test func aSegmentWithADamagedHeaderIsCheckedAsSalvageKeepsIt() throws {
        let fs = try Self.store()
        let segment = try #require(Self.segments(fs).last)
        fs.flipBits(in: segment, at: 3)
        let report = try StoreChecker.check(at: "/store", fileSystem: fs)
        #expect(report.problems.count == 1, "\(report.problems)")
        #expect(report.problems.first?.offset == 0 && report.problems.first?.message.contains("held no entry") == true, "\(report.problems)")
        #expect(report.liveKeys == 40 && report.blocks > 2)
    }

    @Test func aStoreOpenElsewhereIsNotCheckedAndANonStoreIsRefused() throws {
        let fs = try Self.store()
        let engine = try Engine.open(at: "/store", options: testOptions(fs))
        #expect(caught { _ = try StoreChecker.check(at: "/store", fileSystem: fs) }?.code == .locked)
        try engine.close()
        fs.setContents([1], of: "/other/file")
        #expect(caught { _ = try StoreChecker.check(at: "/other", fileSystem: fs) }?.code == .notAStore)
        #expect(caught { _ = try StoreChecker.check(at: "/nowhere", fileSystem: fs) }?.code == .notFound)
    }

    @Test func hintsThatDisagreeWithTheDataAreFound() throws {
        // Rewrite one hint's sequence and recompute every checksum, so only the cross-check of
        // hints against data blocks can see it.
        let fs = try Self.store()
        let path = Self.segments(fs)[1]
        let number = try #require(Format.parseNumberedFileName(String(path.split(separator: "/").last ?? ""))).number
        let reader = try SegmentReader.open(fileSystem: fs, path: path, fileNumber: number)
        var hints = try reader.readHints()
        hints[0].sequence += 1000
        var raw = ByteWriter()
        for hint in hints {
            raw.u8(hint.isDelete ? Format.entryDelete : Format.entryPut)
            raw.varint(UInt64(hint.key.count))
            raw.append(hint.key)
            raw.varint(hint.sequence)
            raw.varint(UInt64(hint.location.position))
            raw.varint(UInt64(hint.location.offset))
            raw.varint(UInt64(hint.location.length))
        }
        // Rebuild the file: header and data blocks as they are, one raw hint block, table, footer.
        let file = try #require(fs.contents(of: path))
        let firstHint = Int(try #require(reader.hintBlocks.first).offset)
        var out = Array(file[0..<firstHint])
        let hintOffset = UInt64(out.count)
        out += SegmentWriter.blockHeader(stored: raw.bytes, rawCount: raw.count, lz4: false) + raw.bytes
        var table = ByteWriter()
        for block in reader.dataBlocks { table.u64(block.offset); table.u32(block.storedCount); table.u32(block.rawCount) }
        table.u64(hintOffset); table.u32(UInt32(raw.count)); table.u32(UInt32(raw.count))
        let tableOffset = UInt64(out.count)
        out += table.bytes
        var footer = ByteWriter()
        footer.append(Format.segmentMagic)
        footer.u32(Format.version); footer.u32(0)
        footer.u32(UInt32(reader.dataBlocks.count)); footer.u32(1)
        footer.u64(tableOffset); footer.u32(CRC32C.checksum(table.bytes)); footer.u32(0)
        footer.u64(UInt64(hints.count)); footer.u64(reader.maxSequence + 1000)
        footer.u32(CRC32C.checksum(footer.bytes)); footer.u32(0)
        out += footer.bytes
        fs.setContents(out, of: path)
        // The manifest records the segment's size: keep it truthful so only the hint is wrong.
        var manifest = try #require(try Manifest.load(fileSystem: fs, directory: "/store"))
        for i in manifest.segments.indices where manifest.segments[i].fileNumber == number { manifest.segments[i].size = UInt64(out.count) }
        fs.setContents(manifest.encode(), of: "/store/MANIFEST")
        let report = try StoreChecker.check(at: "/store", fileSystem: fs)
        #expect(report.problems.contains { $0.path == path && $0.message.contains("hint disagrees") && $0.key == hints[0].key })
    }

    // [DIR-4] A lock file and a WAL without a record are what an interrupted creation leaves:
    // not a store that lost its MANIFEST (which repair would rebuild) but no store yet.
    @Test func theLeftoversOfAnInterruptedCreationAreNoStoreYet() throws {
        let fs = FaultInjectingFileSystem()
        fs.setContents([], of: "/store/LOCK")
        fs.setContents(WALRecord.fileHeader(fileNumber: 1), of: "/store/00000001.wal")
        do throws(StoreError) {
            _ = try StoreChecker.check(at: "/store", fileSystem: fs)
            Issue.record("the leftovers were checked as a damaged store")
        } catch {
            #expect(error.code == .notAStore && error.message.contains("interrupted store creation"), "\(error)")
        }
        let engine = try Engine.open(at: "/store", options: testOptions(fs, rollover: 1 << 20))
        try engine.close()
        #expect(try StoreChecker.check(at: "/store", fileSystem: fs).isClean)
    }
}

import Testing
@testable import StrataEngine

// Damage to every on-disk structure must surface as a typed error that names the damaged file
// and the exact offset of the damaged record, block, table, footer or header (SPEC.md [REC-4],
// [SEG-1], [MAN-3], [READ-1]), except a torn tail of the newest WAL, which open cuts off
// ([REC-3], [REC-4]).
//
// The fixtures below (`DamageFixture`, `Damage`) are shared with EngineRepairTests.

// MARK: - Shared fixtures

/// Byte-level helpers that parse the format as SPEC.md describes it, independently of the engine.
enum Damage {
    static let directory = "/store"
    static let manifestPath = "/store/MANIFEST"

    static func u32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[at + $1]) << (8 * UInt32($1)) }
    }

    static func u64(_ bytes: [UInt8], _ at: Int) -> UInt64 {
        (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) }
    }

    static func putU32(_ value: UInt32, into bytes: inout [UInt8], at: Int) {
        for i in 0..<4 { bytes[at + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt32(i))) }
    }

    static func putU64(_ value: UInt64, into bytes: inout [UInt8], at: Int) {
        for i in 0..<8 { bytes[at + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(i))) }
    }

    /// [WAL-2] Every record of a WAL file as the byte range of header plus payload.
    static func walRecords(_ bytes: [UInt8]) -> [Range<Int>] {
        var records: [Range<Int>] = []
        var position = Format.walHeaderSize
        while position + Format.walRecordHeaderSize <= bytes.count {
            let end = position + Format.walRecordHeaderSize + Int(u32(bytes, position + 4))
            guard end <= bytes.count else { break }
            records.append(position..<end)
            position = end
        }
        return records
    }

    /// [WAL-2] A batch record with correct header and payload checksums around any payload.
    static func walRecord(payload: [UInt8], type: UInt8 = Format.walRecordBatch) -> [UInt8] {
        var record = [UInt8](repeating: 0, count: Format.walRecordHeaderSize)
        putU32(CRC32C.checksum(payload), into: &record, at: 0)
        putU32(UInt32(payload.count), into: &record, at: 4)
        record[8] = type
        putU32(CRC32C.checksum(Array(record[0..<12])), into: &record, at: 12)
        return record + payload
    }

    /// [SEG-3] [SEG-5] [SEG-6] Where the blocks, table and footer of a segment are.
    struct SegmentLayout {
        var size: Int
        var dataBlocks: [Range<Int>]
        var hintBlocks: [Range<Int>]
        var tableOffset: Int
        var footerOffset: Int { size - Format.segmentFooterSize }
        var table: Range<Int> { tableOffset..<footerOffset }

        init(_ bytes: [UInt8]) {
            size = bytes.count
            let footer = bytes.count - Format.segmentFooterSize
            let dataCount = Int(Damage.u32(bytes, footer + 16))
            let hintCount = Int(Damage.u32(bytes, footer + 20))
            tableOffset = Int(Damage.u64(bytes, footer + 24))
            var blocks: [Range<Int>] = []
            for row in 0..<(dataCount + hintCount) {
                let at = tableOffset + row * Format.blockTableEntrySize
                let offset = Int(Damage.u64(bytes, at))
                blocks.append(offset..<offset + Format.blockHeaderSize + Int(Damage.u32(bytes, at + 8)))
            }
            dataBlocks = Array(blocks[0..<dataCount])
            hintBlocks = Array(blocks[dataCount...])
        }

        /// Whether the blocks tile the file from the header to the table ([SEG-5]).
        var isContiguous: Bool {
            var expected = Format.segmentHeaderSize
            for block in dataBlocks + hintBlocks {
                guard block.lowerBound == expected else { return false }
                expected = block.upperBound
            }
            return expected == tableOffset
        }
    }

    /// Applies `batches` in order to an empty model.
    static func model(_ batches: [ModelBatch]) -> [[UInt8]: [UInt8]] {
        var model: [[UInt8]: [UInt8]] = [:]
        for batch in batches { batch.apply(to: &model) }
        return model
    }

    /// Test options with no automatic rollover, so the test decides what is in which file.
    static func options(_ fs: FaultInjectingFileSystem, repair: Bool = false) -> EngineOptions {
        var options = testOptions(fs, rollover: 1 << 24)
        options.repair = repair
        return options
    }

    /// Opens the store on `fs`, returning the engine or the typed error.
    static func open(_ fs: FaultInjectingFileSystem, repair: Bool = false) -> Result<Engine, StoreError> {
        do throws(StoreError) {
            return .success(try Engine.open(at: directory, options: options(fs, repair: repair)))
        } catch {
            return .failure(error)
        }
    }

    /// Every key and value the engine holds, or the typed error of the first failed read.
    static func state(of engine: Engine) -> Result<[[UInt8]: [UInt8]], StoreError> {
        do throws(StoreError) {
            var result: [[UInt8]: [UInt8]] = [:]
            for (key, value) in try engine.snapshot().scan() { result[key] = value }
            return .success(result)
        } catch {
            return .failure(error)
        }
    }

    /// One encoded entry ([ENT-1]).
    static func entry(sequence: UInt64, key: [UInt8], value: [UInt8], isDelete: Bool = false) -> [UInt8] {
        var writer = ByteWriter()
        key.withUnsafeBytes { key in
            value.withUnsafeBytes { value in
                _ = LogEntry.encode(isDelete: isDelete, sequence: sequence, key: key, value: value, into: &writer)
            }
        }
        return writer.bytes
    }

    /// A value that LZ4 compresses, so segment blocks are really compressed.
    static func value(_ tag: String, _ n: Int) -> [UInt8] {
        Array(String(repeating: "\(tag)-\(n)|", count: 5).utf8)
    }
}

/// A closed store whose pristine bytes are kept, so each damage starts from a fresh copy.
///
/// `segmentBatches` were committed and flushed into one segment; `walBatches` were committed
/// after the flush and live only in the active WAL, one record each.
struct DamageFixture {
    var files: [String: [UInt8]]
    var segmentBatches: [ModelBatch]
    var walBatches: [ModelBatch]
    var walPath: String
    var segmentPath: String
    var segmentNumber: UInt32

    var allBatches: [ModelBatch] { segmentBatches + walBatches }
    var model: [[UInt8]: [UInt8]] { Damage.model(allBatches) }
    var walBytes: [UInt8] { files[walPath] ?? [] }
    var segmentBytes: [UInt8] { files[segmentPath] ?? [] }
    var walRecords: [Range<Int>] { Damage.walRecords(walBytes) }
    var segmentLayout: Damage.SegmentLayout { Damage.SegmentLayout(segmentBytes) }

    /// A fresh in-memory file system holding the pristine store.
    func makeFileSystem() -> FaultInjectingFileSystem {
        let fs = FaultInjectingFileSystem()
        for (path, bytes) in files { fs.setContents(bytes, of: path) }
        return fs
    }

    /// The fixture as if the last WAL record had been written but a crash came before its
    /// sync: the durable bound ([DUR-1]) names the transaction before it, so the last record
    /// was never acknowledged and damage to it is a torn tail ([REC-3], [DUR-3]).
    func lastRecordUnacknowledged() throws -> DamageFixture {
        var fixture = self
        let path = Damage.directory + "/" + Format.syncFileName
        let bound = try #require(try SyncRecord.decode(files[path] ?? [], path: path))
        #expect(bound.sequence == UInt64(allBatches.count), "the fixture's bound names its last commit")
        fixture.files[path] = SyncRecord(
            walNumber: bound.walNumber, sequence: bound.sequence - 1, walEnd: UInt32(walRecords.last?.lowerBound ?? 0)
        ).encodeFile()
        return fixture
    }

    /// The model with WAL record `dropped` (an index into `walBatches`) left out.
    func model(droppingWALRecord dropped: Int) -> [[UInt8]: [UInt8]] {
        Damage.model(segmentBatches + walBatches.enumerated().filter { $0.offset != dropped }.map(\.element))
    }

    /// The keys the WAL batches write or delete.
    var walKeys: Set<[UInt8]> { Set(walBatches.flatMap { $0.operations.map(\.key) }) }

    /// Builds the standard fixture: 80 keys in a segment of several LZ4 data blocks and
    /// several hint blocks, then five WAL records that overwrite, delete and add keys.
    static func standard(segmentBatchCount: Int = 8, keysPerBatch: Int = 10, flush: Bool = true) throws -> DamageFixture {
        var segmentBatches: [ModelBatch] = []
        for b in 0..<segmentBatchCount {
            var batch = ModelBatch()
            for j in 0..<keysPerBatch {
                batch.operations.append((testKey(b * keysPerBatch + j), Damage.value("s\(b)", j)))
            }
            if b == segmentBatchCount - 1 {
                batch.operations.append((testKey(3), nil))  // a tombstone in the segment
                batch.operations.append((testKey(5), Damage.value("over", 5)))
            }
            segmentBatches.append(batch)
        }
        var walBatches: [ModelBatch] = []
        walBatches.append(ModelBatch(operations: [(testKey(0), Damage.value("w0", 0)), (testKey(200), Damage.value("w0", 200))]))
        walBatches.append(ModelBatch(operations: [(testKey(1), nil), (testKey(201), Damage.value("w1", 201))]))
        walBatches.append(
            ModelBatch(operations: [
                (testKey(2), Damage.value("w2", 2)), (testKey(202), Damage.value("w2", 202)), (testKey(0), Damage.value("w2", 0)),
            ]))
        walBatches.append(ModelBatch(operations: [(testKey(203), Damage.value("w3", 203))]))
        walBatches.append(ModelBatch(operations: [(testKey(204), Damage.value("w4", 204)), (testKey(200), nil)]))
        return try build(segmentBatches: segmentBatches, walBatches: walBatches, flush: flush)
    }

    /// Commits `segmentBatches`, flushes (if `flush`), commits `walBatches`, closes, and keeps the bytes.
    static func build(segmentBatches: [ModelBatch], walBatches: [ModelBatch], flush: Bool = true) throws -> DamageFixture {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: Damage.directory, options: Damage.options(fs))
        for batch in segmentBatches { try engine.commit(batch.writeBatch) }
        if flush { try engine.flush() }
        for batch in walBatches { try engine.commit(batch.writeBatch) }
        try engine.close()
        var files: [String: [UInt8]] = [:]
        for path in fs.listFiles(under: Damage.directory) { files[path] = fs.contents(of: path) ?? [] }
        let wal = try #require(files.keys.filter { $0.hasSuffix(".wal") }.sorted().last)
        let segment = files.keys.filter { $0.hasSuffix(".seg") }.sorted().last
        let number = segment.flatMap { Format.parseNumberedFileName(String($0.split(separator: "/").last ?? ""))?.number }
        return DamageFixture(
            files: files, segmentBatches: segmentBatches, walBatches: walBatches, walPath: wal,
            segmentPath: segment ?? "", segmentNumber: number ?? 0)
    }

    /// The segment's hints, read with the engine's reader from a pristine copy.
    func segmentHints() throws -> [SegmentReader.Hint] {
        let reader = try SegmentReader.open(fileSystem: makeFileSystem(), path: segmentPath, fileNumber: segmentNumber)
        return try reader.readHints()
    }

    /// Keys whose newest value lives in data block `block` of the segment (not shadowed by the WAL).
    func keysServedByDataBlock(_ block: Int) throws -> [[UInt8]] {
        let walKeys = walKeys
        return try segmentHints()
            .filter { $0.location.position == UInt32(block) && !$0.isDelete && !walKeys.contains($0.key) }
            .map(\.key)
    }
}

// MARK: - Tests

@Suite struct EngineCorruptionTests {
    /// Opens `fs` and expects the open to fail with `code` at `path` and `offset`.
    private func expectOpenFails(
        _ fs: FaultInjectingFileSystem, _ code: StoreError.Code, path: String, offset: Int, _ what: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        switch Damage.open(fs) {
        case .success:
            Issue.record("open succeeded despite \(what)", sourceLocation: sourceLocation)
        case .failure(let error):
            #expect(error.code == code, "\(what): \(error)", sourceLocation: sourceLocation)
            #expect(error.path == path, "\(what): \(error)", sourceLocation: sourceLocation)
            #expect(error.offset == UInt64(offset), "\(what): \(error)", sourceLocation: sourceLocation)
        }
    }

    @Test func theFixtureIsWhatTheTestsAssume() throws {
        let fixture = try DamageFixture.standard()
        #expect(fixture.walRecords.count == fixture.walBatches.count)
        #expect(fixture.walRecords.last?.upperBound == fixture.walBytes.count)
        let layout = fixture.segmentLayout
        #expect(layout.isContiguous)
        #expect(layout.dataBlocks.count >= 4)
        #expect(layout.hintBlocks.count >= 2)
        #expect(fixture.segmentBytes.count == layout.size)
        // At least one data block is LZ4-compressed (compression byte 1, [SEG-3]).
        #expect(layout.dataBlocks.contains { fixture.segmentBytes[$0.lowerBound + 12] == Format.compressionLZ4 })
        let engine = try Damage.open(fixture.makeFileSystem()).get()
        #expect(try Damage.state(of: engine).get() == fixture.model)
        try engine.close()
    }

    // MARK: WAL

    // [WAL-2] [REC-4] A header CRC mismatch with non-zero bytes is corruption at the record's offset.
    @Test func aDamagedHeaderOfANonLastWALRecordIsCorruptionAtThatRecord() throws {
        let fixture = try DamageFixture.standard()
        for record in fixture.walRecords.dropLast() {
            for field in [0, 3, 4, 7, 8, 9, 11, 12, 15] {
                let fs = fixture.makeFileSystem()
                fs.flipBits(in: fixture.walPath, at: record.lowerBound + field)
                expectOpenFails(
                    fs, .corruption, path: fixture.walPath, offset: record.lowerBound,
                    "header byte \(field) of the record at \(record.lowerBound)")
            }
        }
    }

    // [REC-4] A payload CRC mismatch with bytes after the record is corruption at the record's offset.
    @Test func aDamagedPayloadOfANonLastWALRecordIsCorruptionAtThatRecord() throws {
        let fixture = try DamageFixture.standard()
        for record in fixture.walRecords.dropLast() {
            let payload = record.lowerBound + Format.walRecordHeaderSize
            for at in [payload, payload + 1, (payload + record.upperBound) / 2, record.upperBound - 1] {
                for mask: UInt8 in [0xFF, 0x01] {
                    let fs = fixture.makeFileSystem()
                    fs.flipBits(in: fixture.walPath, at: at, mask: mask)
                    expectOpenFails(
                        fs, .corruption, path: fixture.walPath, offset: record.lowerBound,
                        "payload byte \(at) (mask \(mask)) of the record at \(record.lowerBound)")
                }
            }
        }
    }

    // [REC-4] [REC-3] [DUR-3] The last record of the newest WAL damaged inside its payload, when
    // the durable bound says it was never synced, is a torn tail: open succeeds without that
    // transaction, cuts it off, and appends after the valid records.
    @Test func damageInsideTheLastRecordsPayloadIsATornTailThatOpenCutsOff() throws {
        let fixture = try DamageFixture.standard().lastRecordUnacknowledged()
        let last = try #require(fixture.walRecords.last)
        let withoutLast = fixture.model(droppingWALRecord: fixture.walBatches.count - 1)
        #expect(withoutLast != fixture.model)
        let payload = last.lowerBound + Format.walRecordHeaderSize
        for at in [payload, (payload + last.upperBound) / 2, last.upperBound - 1] {
            let fs = fixture.makeFileSystem()
            fs.flipBits(in: fixture.walPath, at: at, mask: 0x10)
            let engine = try Damage.open(fs).get()
            #expect(try Damage.state(of: engine).get() == withoutLast, "flip at \(at)")
            #expect(fs.contents(of: fixture.walPath)?.count == last.lowerBound, "the torn tail is truncated")
            try engine.put(Array("after".utf8), Array("tear".utf8))
            try engine.close()
            let reopened = try Damage.open(fs).get()
            var expected = withoutLast
            expected[Array("after".utf8)] = Array("tear".utf8)
            #expect(try Damage.state(of: reopened).get() == expected, "flip at \(at), after reopen")
            try reopened.close()
        }
    }

    // [REC-4] The last record's header damaged (non-zero bytes) is corruption, not a torn tail.
    @Test func damageInTheLastRecordsHeaderIsCorruptionNotATornTail() throws {
        let fixture = try DamageFixture.standard()
        let last = try #require(fixture.walRecords.last)
        for field in [0, 4, 8, 10, 12, 15] {
            let fs = fixture.makeFileSystem()
            fs.flipBits(in: fixture.walPath, at: last.lowerBound + field, mask: 0x04)
            expectOpenFails(fs, .corruption, path: fixture.walPath, offset: last.lowerBound, "last record header byte \(field)")
        }
    }

    // [REC-3] [DUR-3] A last record that was never synced, cut short or zero-filled at the end of
    // the newest WAL, is a torn tail.
    @Test func aLastRecordCutShortOrZeroedIsATornTail() throws {
        let fixture = try DamageFixture.standard().lastRecordUnacknowledged()
        let last = try #require(fixture.walRecords.last)
        let withoutLast = fixture.model(droppingWALRecord: fixture.walBatches.count - 1)
        for keep in [1, 8, 15, 16, 17, last.count - 1] {
            let fs = fixture.makeFileSystem()
            fs.truncateFile(fixture.walPath, to: last.lowerBound + keep)
            let engine = try Damage.open(fs).get()
            #expect(try Damage.state(of: engine).get() == withoutLast, "kept \(keep) bytes of the last record")
            #expect(fs.contents(of: fixture.walPath)?.count == last.lowerBound)
            try engine.close()
        }
        let fs = fixture.makeFileSystem()
        var bytes = fixture.walBytes
        for i in last { bytes[i] = 0 }
        fs.setContents(bytes + [UInt8](repeating: 0, count: 100), of: fixture.walPath)
        let engine = try Damage.open(fs).get()
        #expect(try Damage.state(of: engine).get() == withoutLast, "zero-filled last record")
        try engine.close()
    }

    /// A store whose manifest names two WALs: WAL 1 (older, with the records) and an empty WAL 2.
    private func twoWALStore() throws -> (fixture: DamageFixture, olderWAL: String) {
        var fixture = try DamageFixture.standard(segmentBatchCount: 0, flush: false)
        let older = fixture.walPath
        #expect(older == "/store/00000001.wal")
        fixture.files["/store/00000002.wal"] = WALRecord.fileHeader(fileNumber: 2)
        fixture.files[Damage.manifestPath] = Manifest(nextFileNumber: 3, lastSequence: 0, wals: [1, 2], segments: []).encode()
        return (fixture, older)
    }

    // [REC-3] [REC-4] Only the newest WAL may end in a torn tail: the same damage at the end of an
    // older WAL is corruption at the last record's offset.
    @Test func damageAtTheEndOfAnOlderWALIsCorruptionNotATornTail() throws {
        let (fixture, older) = try twoWALStore()
        let healthy = try Damage.open(fixture.makeFileSystem()).get()
        #expect(try Damage.state(of: healthy).get() == fixture.model)
        try healthy.close()

        let last = try #require(fixture.walRecords.last)
        var fs = fixture.makeFileSystem()
        fs.flipBits(in: older, at: last.upperBound - 1, mask: 0x01)
        expectOpenFails(fs, .corruption, path: older, offset: last.lowerBound, "payload of the last record of an older WAL")

        for keep in [5, 16, last.count - 1] {
            fs = fixture.makeFileSystem()
            fs.truncateFile(older, to: last.lowerBound + keep)
            expectOpenFails(fs, .corruption, path: older, offset: last.lowerBound, "older WAL cut \(keep) bytes into its last record")
        }
    }

    // [WAL-1] A damaged WAL header fails open at offset 0; a wrong file number at offset 16.
    @Test func aDamagedWALHeaderFailsOpenAtOffsetZero() throws {
        let fixture = try DamageFixture.standard()
        for at in [8, 9, 12, 16, 17, 23, 24, 27] {
            let fs = fixture.makeFileSystem()
            fs.flipBits(in: fixture.walPath, at: at, mask: 0x02)
            expectOpenFails(fs, .corruption, path: fixture.walPath, offset: 0, "WAL header byte \(at)")
        }
        for at in [0, 7] {
            let fs = fixture.makeFileSystem()
            fs.flipBits(in: fixture.walPath, at: at)
            let error = caught { try Damage.open(fs).get() }
            #expect(error?.code == .notAStore || error?.code == .corruption, "WAL magic byte \(at): \(String(describing: error))")
            #expect(error?.path == fixture.walPath)
            #expect(error?.offset == 0)
        }
        let fs = fixture.makeFileSystem()
        var bytes = fixture.walBytes
        bytes.replaceSubrange(0..<Format.walHeaderSize, with: WALRecord.fileHeader(fileNumber: 42))
        fs.setContents(bytes, of: fixture.walPath)
        expectOpenFails(fs, .corruption, path: fixture.walPath, offset: 16, "WAL header naming another file number")
    }

    // [REC-4] Records with valid checksums can still be corruption: an entry that does not decode,
    // a sequence that does not increase, an unknown record type.
    @Test func recordsWithValidChecksumsButBadContentAreCorruption() throws {
        let fixture = try DamageFixture.standard()
        let records = fixture.walRecords
        let firstRecord = Array(fixture.walBytes[records[0]])
        let entry = Damage.entry(sequence: 999, key: Array("x".utf8), value: Array("y".utf8))
        var badCRC = entry
        badCRC[badCRC.count - 1] ^= 0xFF
        let cases: [(String, [UInt8])] = [
            ("a replayed record (sequence does not increase)", firstRecord),
            ("a payload that is not a batch", Damage.walRecord(payload: [0x05, 0xAA, 0xBB])),
            ("an entry count of zero", Damage.walRecord(payload: [0x00])),
            ("an entry with a bad CRC", Damage.walRecord(payload: [0x01] + badCRC)),
            ("bytes after the last entry", Damage.walRecord(payload: [0x01] + entry + [0x00])),
            ("an unknown record type", Damage.walRecord(payload: [0x01] + entry, type: 2)),
        ]
        for (what, record) in cases {
            // As the last record, and followed by a valid one: never a torn tail.
            let tail = Damage.walRecord(payload: [0x01] + entry)
            for suffix in [[], tail] {
                let fs = fixture.makeFileSystem()
                fs.setContents(fixture.walBytes + record + suffix, of: fixture.walPath)
                expectOpenFails(
                    fs, .corruption, path: fixture.walPath, offset: fixture.walBytes.count,
                    "\(what)\(suffix.isEmpty ? "" : ", followed by a valid record")")
            }
        }
    }

    // MARK: Segments

    // [SEG-3] [READ-1] Data blocks are not read at open; a read of a key in a damaged block is
    // corruption naming the segment and the block's offset; other blocks still read.
    @Test func aDamagedDataBlockFailsOnlyReadsOfItsOwnKeys() throws {
        let fixture = try DamageFixture.standard()
        let layout = fixture.segmentLayout
        let blockIndex = layout.dataBlocks.count / 2
        let block = layout.dataBlocks[blockIndex]
        let damagedKeys = try fixture.keysServedByDataBlock(blockIndex)
        try #require(!damagedKeys.isEmpty)
        for field in [0, 4, 8, 12, 13, 16, block.count / 2, block.count - 1] {
            let fs = fixture.makeFileSystem()
            fs.flipBits(in: fixture.segmentPath, at: block.lowerBound + field, mask: 0x20)
            let engine = try Damage.open(fs).get()
            for (key, value) in fixture.model {
                let error = caught { try engine.get(key) }
                if damagedKeys.contains(key) {
                    #expect(error?.code == .corruption, "block byte \(field)")
                    #expect(error?.path == fixture.segmentPath)
                    #expect(error?.offset == UInt64(block.lowerBound))
                } else {
                    #expect(try engine.get(key) == value, "block byte \(field)")
                }
            }
            let scan = caught { try engine.snapshot().scan() }
            #expect(scan?.code == .corruption && scan?.offset == UInt64(block.lowerBound), "a scan reads every block")
            try engine.close()
        }
    }

    // [SEG-1] [SEG-3] [REC-2] A damaged hint block fails open at that block's offset.
    @Test func aDamagedHintBlockFailsOpenAtThatBlock() throws {
        let fixture = try DamageFixture.standard()
        for block in fixture.segmentLayout.hintBlocks {
            for field in [0, 4, 8, 12, 16, block.count - 1] {
                let fs = fixture.makeFileSystem()
                fs.flipBits(in: fixture.segmentPath, at: block.lowerBound + field, mask: 0x40)
                expectOpenFails(
                    fs, .corruption, path: fixture.segmentPath, offset: block.lowerBound,
                    "hint block at \(block.lowerBound), byte \(field)")
            }
        }
    }

    // [SEG-5] [SEG-6] A damaged block table fails open at the table's offset.
    @Test func aDamagedBlockTableFailsOpenAtTheTable() throws {
        let fixture = try DamageFixture.standard()
        let table = fixture.segmentLayout.table
        for at in [table.lowerBound, table.lowerBound + 8, table.lowerBound + 12, table.upperBound - 16, table.upperBound - 1] {
            let fs = fixture.makeFileSystem()
            fs.flipBits(in: fixture.segmentPath, at: at, mask: 0x01)
            expectOpenFails(fs, .corruption, path: fixture.segmentPath, offset: table.lowerBound, "block table byte \(at)")
        }
    }

    // [SEG-6] A damaged footer fails open at the footer's offset (file size − 64).
    @Test func aDamagedFooterFailsOpenAtTheFooter() throws {
        let fixture = try DamageFixture.standard()
        let footer = fixture.segmentLayout.footerOffset
        for field in [0, 7, 8, 12, 16, 20, 24, 31, 32, 36, 40, 48, 56, 59] {
            let fs = fixture.makeFileSystem()
            fs.flipBits(in: fixture.segmentPath, at: footer + field, mask: 0x80)
            expectOpenFails(fs, .corruption, path: fixture.segmentPath, offset: footer, "footer byte \(field)")
        }
    }

    // [SEG-2] A damaged segment header fails open at offset 0; a wrong file number at 16.
    @Test func aDamagedSegmentHeaderFailsOpenAtOffsetZero() throws {
        let fixture = try DamageFixture.standard()
        for at in [8, 11, 12, 16, 20, 24, 27] {
            let fs = fixture.makeFileSystem()
            fs.flipBits(in: fixture.segmentPath, at: at, mask: 0x08)
            expectOpenFails(fs, .corruption, path: fixture.segmentPath, offset: 0, "segment header byte \(at)")
        }
        for at in [0, 5] {
            let fs = fixture.makeFileSystem()
            fs.flipBits(in: fixture.segmentPath, at: at)
            let error = caught { try Damage.open(fs).get() }
            #expect(error?.code == .notAStore || error?.code == .corruption, "segment magic byte \(at): \(String(describing: error))")
            #expect(error?.path == fixture.segmentPath)
            #expect(error?.offset == 0)
        }
        let fs = fixture.makeFileSystem()
        var bytes = fixture.segmentBytes
        bytes.replaceSubrange(0..<Format.segmentHeaderSize, with: SegmentWriter.header(fileNumber: fixture.segmentNumber + 9))
        fs.setContents(bytes, of: fixture.segmentPath)
        expectOpenFails(fs, .corruption, path: fixture.segmentPath, offset: 16, "segment header naming another file number")
    }

    // [REC-5] [SEG-4] Hints out of key order (under valid checksums) are corruption naming the
    // segment: the engine must not hand unsorted input to the index's bulk build.
    @Test func segmentHintsOutOfKeyOrderAreCorruptionNamingTheSegment() throws {
        let fixture = try DamageFixture.standard()
        let b = Damage.entry(sequence: 2, key: Array("b".utf8), value: [1])
        let a = Damage.entry(sequence: 1, key: Array("a".utf8), value: [2])
        let hints = [
            FuzzInput.hint(key: Array("b".utf8), sequence: 2, block: 0, offset: 0, length: UInt64(b.count)),
            FuzzInput.hint(key: Array("a".utf8), sequence: 1, block: 0, offset: UInt64(b.count), length: UInt64(a.count)),
        ]
        for (what, hintBlock) in [("keys descending", hints[0] + hints[1]), ("a key twice", hints[0] + hints[0])] {
            let fs = fixture.makeFileSystem()
            fs.setContents(
                FuzzInput.craftedSegment(data: [b + a], hints: [hintBlock], entryCount: 2, fileNumber: fixture.segmentNumber),
                of: fixture.segmentPath)
            let error = caught { try Damage.open(fs).get() }
            #expect(error?.code == .corruption, "\(what): \(String(describing: error))")
            #expect(error?.path == fixture.segmentPath, "\(what)")
        }
    }

    // [REC-2] A segment the manifest names but that is missing is corruption naming it.
    @Test func aMissingSegmentIsCorruptionNamingIt() throws {
        let fixture = try DamageFixture.standard()
        let fs = fixture.makeFileSystem()
        try fs.remove(fixture.segmentPath)
        let error = caught { try Damage.open(fs).get() }
        #expect(error?.code == .corruption)
        #expect(error?.path == fixture.segmentPath)
    }

    // [SEG-6] [REC-2] A truncated segment is corruption naming it.
    @Test func aTruncatedSegmentIsCorruptionNamingIt() throws {
        let fixture = try DamageFixture.standard()
        let size = fixture.segmentBytes.count
        for newSize in [0, 31, 95, 96, size / 2, size - 65, size - 64, size - 1] {
            let fs = fixture.makeFileSystem()
            fs.truncateFile(fixture.segmentPath, to: newSize)
            let error = caught { try Damage.open(fs).get() }
            #expect(error?.code == .corruption, "truncated to \(newSize): \(String(describing: error))")
            #expect(error?.path == fixture.segmentPath)
        }
        // Extended with zeros: the footer is no longer where the file ends.
        let fs = fixture.makeFileSystem()
        fs.truncateFile(fixture.segmentPath, to: size + 64)
        let error = caught { try Damage.open(fs).get() }
        #expect(error?.code == .corruption && error?.path == fixture.segmentPath && error?.offset == UInt64(size))
    }

    // MARK: Manifest

    // [MAN-1] [MAN-3] Every byte of the manifest: wrong magic is notAStore, a damaged length is
    // corruption at offset 12, anything else (a version that reads as newer included: its
    // checksum fails) is corruption at the CRC's offset.
    @Test func everyDamagedManifestByteIsReportedAtTheRightOffset() throws {
        let fixture = try DamageFixture.standard()
        let manifest = try #require(fixture.files[Damage.manifestPath])
        let crcOffset = manifest.count - 4
        for at in manifest.indices {
            for mask: UInt8 in [0xFF, 0x01, 0x80] {
                let fs = fixture.makeFileSystem()
                fs.flipBits(in: Damage.manifestPath, at: at, mask: mask)
                let what = "manifest byte \(at) mask \(mask)"
                switch at {
                case 0..<8:
                    expectOpenFails(fs, .notAStore, path: Damage.manifestPath, offset: 0, what)
                case 8..<12:
                    // A version that reads as newer fails the checksum: damage, not a newer store.
                    expectOpenFails(fs, .corruption, path: Damage.manifestPath, offset: crcOffset, what)
                case 12..<16:
                    expectOpenFails(fs, .corruption, path: Damage.manifestPath, offset: 12, what)
                default:
                    expectOpenFails(fs, .corruption, path: Damage.manifestPath, offset: crcOffset, what)
                }
            }
        }
    }

    // [MAN-2] A manifest with a valid checksum that breaks the rules is corruption.
    @Test func aWellFormedManifestThatBreaksTheRulesIsCorruption() throws {
        let fixture = try DamageFixture.standard()
        let cases: [(String, Manifest)] = [
            ("no WAL", Manifest(nextFileNumber: 9, lastSequence: 0, wals: [], segments: [])),
            ("a number twice", Manifest(nextFileNumber: 9, lastSequence: 0, wals: [2, 2], segments: [])),
            ("a WAL and a segment with one number", Manifest(nextFileNumber: 9, lastSequence: 0, wals: [3], segments: [.init(fileNumber: 3, size: 1)])),
            ("a number not below nextFileNumber", Manifest(nextFileNumber: 2, lastSequence: 0, wals: [2], segments: [])),
        ]
        for (what, manifest) in cases {
            let fs = fixture.makeFileSystem()
            fs.setContents(manifest.encode(), of: Damage.manifestPath)
            let error = caught { try Damage.open(fs).get() }
            #expect(error?.code == .corruption, "\(what): \(String(describing: error))")
            #expect(error?.path == Damage.manifestPath, "\(what)")
        }
    }

    // MARK: Exhaustive walks

    // [WAL-1] [WAL-2] [REC-3] [REC-4] [DUR-3] Every byte of a small WAL, flipped on its own: open
    // either fails naming the WAL and the damaged record (or the header, whose reserved bytes
    // must be zero), or — only for damage inside the last record's payload, and only when the
    // durable bound says that record was never synced — succeeds with a prefix of the committed
    // transactions. When the bound names the last record, damage there is acknowledged data
    // lost: open fails at the record with the lost sequence. Never a crash, never another state.
    @Test(arguments: [false, true])
    func flippingAnyByteOfASmallWALFailsAtTheDamagedRecordOrCutsATornTail(lastAcknowledged: Bool) throws {
        var rng = SeededRandom(seed: 0xC0FFEE)
        var batches: [ModelBatch] = []
        for _ in 0..<4 { batches.append(ModelBatch.random(keys: 6, maxOperations: 3, maxValue: 12, using: &rng)) }
        var fixture = try DamageFixture.build(segmentBatches: [], walBatches: batches, flush: false)
        if !lastAcknowledged { fixture = try fixture.lastRecordUnacknowledged() }
        let bytes = fixture.walBytes
        let records = fixture.walRecords
        try #require(records.count == batches.count && records.last?.upperBound == bytes.count)
        let prefixes = (0...batches.count).map { Damage.model(Array(batches.prefix($0))) }
        var mismatches: [String] = []
        for at in bytes.indices {
            for mask: UInt8 in [0xFF, 0x01, 0x80] {
                let fs = fixture.makeFileSystem()
                fs.flipBits(in: fixture.walPath, at: at, mask: mask)
                let record = records.firstIndex { $0.contains(at) }
                // What SPEC.md requires for this byte.
                var expectedPrefix: Int? = nil
                let expectedCodes: Set<StoreError.Code> = [.corruption]
                var expectedOffset = 0
                if at < Format.walHeaderSize {
                    expectedOffset = 0  // [WAL-1] magic, checked fields and zero reserved bytes
                } else if let record {
                    let isPayload = at >= records[record].lowerBound + Format.walRecordHeaderSize
                    if record == records.count - 1 && isPayload && !lastAcknowledged {
                        expectedPrefix = batches.count - 1
                    } else {
                        expectedOffset = records[record].lowerBound
                    }
                }
                switch Damage.open(fs) {
                case .success(let engine):
                    let state = Damage.state(of: engine)
                    try engine.close()
                    guard case .success(let state) = state else {
                        mismatches.append("byte \(at) mask \(mask): opened, then a read failed: \(state)")
                        continue
                    }
                    guard let prefix = prefixes.firstIndex(of: state) else {
                        mismatches.append("byte \(at) mask \(mask): opened with a state that is no prefix")
                        continue
                    }
                    if expectedPrefix != prefix {
                        mismatches.append("byte \(at) mask \(mask): opened with prefix \(prefix), expected \(expectedPrefix.map { "prefix \($0)" } ?? "a failure")")
                    }
                case .failure(let error):
                    let lastPayload = record == records.count - 1 && at >= records[records.count - 1].lowerBound + Format.walRecordHeaderSize
                    let expectedLoss = lastPayload ? UInt64(batches.count)...UInt64(batches.count) : nil
                    if expectedPrefix != nil || !expectedCodes.contains(error.code) || error.path != fixture.walPath
                        || error.offset != UInt64(expectedOffset) || error.lostSequences != expectedLoss
                    {
                        mismatches.append("byte \(at) mask \(mask): \(error), expected \(expectedPrefix.map { "prefix \($0)" } ?? "corruption at \(expectedOffset)")")
                    }
                }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) mismatches:\n\(mismatches.prefix(40).joined(separator: "\n"))")
    }

    // [SEG-1]…[SEG-6] [READ-1] Every byte of a small segment, flipped on its own: damage to the
    // header, a hint block, the table or the footer fails open at that structure's offset; damage
    // to a data block fails exactly the reads of that block's keys at the block's offset.
    @Test func flippingAnyByteOfASmallSegmentIsReportedAtTheDamagedStructure() throws {
        var batch = ModelBatch()
        for i in 0..<40 { batch.operations.append((testKey(i), Damage.value("v", i))) }
        batch.operations.append((testKey(7), nil))
        let fixture = try DamageFixture.build(segmentBatches: [batch], walBatches: [], flush: true)
        let bytes = fixture.segmentBytes
        let layout = fixture.segmentLayout
        try #require(layout.isContiguous && layout.dataBlocks.count >= 3 && !layout.hintBlocks.isEmpty)
        let model = fixture.model
        let hints = try fixture.segmentHints()
        var mismatches: [String] = []
        for at in bytes.indices {
            let fs = fixture.makeFileSystem()
            fs.flipBits(in: fixture.segmentPath, at: at, mask: 0x01)
            let dataBlock = layout.dataBlocks.firstIndex { $0.contains(at) }
            var openFailsAt: Int? = nil
            if at < Format.segmentHeaderSize {
                openFailsAt = 0  // [SEG-2] including the reserved bytes, which must be zero
            } else if dataBlock != nil {
                openFailsAt = nil
            } else if let hint = layout.hintBlocks.first(where: { $0.contains(at) }) {
                openFailsAt = hint.lowerBound
            } else if layout.table.contains(at) {
                openFailsAt = layout.tableOffset
            } else {
                openFailsAt = layout.footerOffset
            }
            switch Damage.open(fs) {
            case .failure(let error):
                if openFailsAt == nil || error.path != fixture.segmentPath || error.offset != openFailsAt.map(UInt64.init)
                    || (error.code != .corruption && !(at < 8 && error.code == .notAStore))
                {
                    mismatches.append("byte \(at): open failed with \(error), expected \(openFailsAt.map { "corruption at \($0)" } ?? "success")")
                }
            case .success(let engine):
                defer { try? engine.close() }
                guard openFailsAt == nil else {
                    mismatches.append("byte \(at): open succeeded, expected corruption at \(openFailsAt ?? -1)")
                    continue
                }
                for hint in hints where !hint.isDelete {
                    let inDamagedBlock = dataBlock.map { UInt32($0) == hint.location.position } ?? false
                    let result = Result { () throws(StoreError) -> [UInt8]? in try engine.get(hint.key) }
                    switch result {
                    case .success(let value):
                        if inDamagedBlock || value != model[hint.key] {
                            mismatches.append("byte \(at): read \(hint.key) succeeded, expected \(inDamagedBlock ? "corruption" : "its value")")
                        }
                    case .failure(let error):
                        let blockOffset = layout.dataBlocks[Int(hint.location.position)].lowerBound
                        if !inDamagedBlock || error.code != .corruption || error.path != fixture.segmentPath
                            || error.offset != UInt64(blockOffset)
                        {
                            mismatches.append("byte \(at): read of \(hint.key) failed with \(error)")
                        }
                    }
                }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) mismatches:\n\(mismatches.prefix(40).joined(separator: "\n"))")
    }
}

import Testing
@testable import StrataEngine

// [REC-7] Repair salvages instead of failing: every damage EngineCorruptionTests makes opens
// with `options.repair`, the report names the damaged file and range, everything outside the
// damaged record or block is still readable, and the store repair leaves behind opens normally
// with the same content.

@Suite struct EngineRepairTests {
    /// Opens `fs` with repair and checks the report and the content, then closes and checks that
    /// a normal open sees the same content and that a second repair finds nothing to do.
    ///
    /// - Parameters:
    ///   - damagedPath: the file the report must name (`nil`: the report must be clean).
    ///   - damagedOffset: a byte the reported dropped ranges of `damagedPath` must cover.
    private func expectRepair(
        _ fs: FaultInjectingFileSystem, _ what: String, expected: [[UInt8]: [UInt8]], damagedPath: String?,
        damagedOffset: Int? = nil, rebuiltManifest: Bool = false, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let engine: Engine
        switch Damage.open(fs, repair: true) {
        case .success(let opened):
            engine = opened
        case .failure(let error):
            Issue.record("\(what): repair open failed: \(error)", sourceLocation: sourceLocation)
            return
        }
        guard let report = engine.repairReport else {
            Issue.record("\(what): no repair report", sourceLocation: sourceLocation)
            return
        }
        #expect(report.rebuiltManifest == rebuiltManifest, "\(what): \(report)", sourceLocation: sourceLocation)
        if let damagedPath {
            let named = report.dropped.filter { $0.path == damagedPath }
            #expect(!named.isEmpty || rebuiltManifest, "\(what): report does not name \(damagedPath): \(report.dropped)", sourceLocation: sourceLocation)
            if let damagedOffset {
                #expect(
                    named.contains { $0.offset <= UInt64(damagedOffset) && UInt64(damagedOffset) < $0.offset + $0.length },
                    "\(what): no dropped range covers offset \(damagedOffset): \(report.dropped)", sourceLocation: sourceLocation)
            }
        } else {
            #expect(report.dropped.isEmpty, "\(what): \(report.dropped)", sourceLocation: sourceLocation)
        }
        let state = Damage.state(of: engine)
        #expect(state == .success(expected), "\(what): content after repair", sourceLocation: sourceLocation)
        #expect(caught { try engine.close() } == nil, "\(what)", sourceLocation: sourceLocation)

        switch Damage.open(fs) {
        case .success(let reopened):
            #expect(Damage.state(of: reopened) == .success(expected), "\(what): content after a normal reopen", sourceLocation: sourceLocation)
            try? reopened.close()
        case .failure(let error):
            Issue.record("\(what): a normal open after repair failed: \(error)", sourceLocation: sourceLocation)
            return
        }
        switch Damage.open(fs, repair: true) {
        case .success(let again):
            #expect(again.repairReport?.isClean == true, "\(what): a second repair found \(String(describing: again.repairReport))", sourceLocation: sourceLocation)
            try? again.close()
        case .failure(let error):
            Issue.record("\(what): a second repair open failed: \(error)", sourceLocation: sourceLocation)
        }
    }

    @Test func repairOfAnUndamagedStoreReportsNothingAndChangesNothing() throws {
        let fixture = try DamageFixture.standard()
        let fs = fixture.makeFileSystem()
        expectRepair(fs, "undamaged store", expected: fixture.model, damagedPath: nil)
        #expect(fs.contents(of: fixture.segmentPath) == fixture.segmentBytes, "the segment was not rewritten")
    }

    // MARK: WAL

    // [REC-7] A damaged WAL record is skipped up to the next valid record; the rest replays.
    @Test func aDamagedWALRecordIsDroppedAndTheRecordsAroundItSurvive() throws {
        let fixture = try DamageFixture.standard()
        let records = fixture.walRecords
        for (index, record) in records.enumerated().dropLast() {
            for (part, at) in [("header", record.lowerBound + 5), ("payload", record.upperBound - 2)] {
                let fs = fixture.makeFileSystem()
                fs.flipBits(in: fixture.walPath, at: at, mask: 0x01)
                expectRepair(
                    fs, "\(part) of WAL record \(index)", expected: fixture.model(droppingWALRecord: index),
                    damagedPath: fixture.walPath, damagedOffset: record.lowerBound)
            }
        }
    }

    // [REC-4] [REC-7] [DUR-3] A torn tail (never synced) is not damage: repair cuts it as a
    // normal open does.
    @Test func aTornTailIsCutAndNotReportedAsDamage() throws {
        let fixture = try DamageFixture.standard().lastRecordUnacknowledged()
        let last = try #require(fixture.walRecords.last)
        let fs = fixture.makeFileSystem()
        fs.flipBits(in: fixture.walPath, at: last.upperBound - 1)
        expectRepair(
            fs, "torn last record", expected: fixture.model(droppingWALRecord: fixture.walBatches.count - 1),
            damagedPath: nil)
    }

    // [REC-7] Damage in an older WAL is dropped like damage in the newest.
    @Test func aDamagedRecordInAnOlderWALIsDropped() throws {
        var fixture = try DamageFixture.standard(segmentBatchCount: 0, flush: false)
        let older = fixture.walPath
        fixture.files["/store/00000002.wal"] = WALRecord.fileHeader(fileNumber: 2)
        fixture.files[Damage.manifestPath] = Manifest(nextFileNumber: 3, lastSequence: 0, wals: [1, 2], segments: []).encode()
        let records = fixture.walRecords
        for index in [1, records.count - 1] {
            let fs = fixture.makeFileSystem()
            fs.flipBits(in: older, at: records[index].upperBound - 1)
            expectRepair(
                fs, "record \(index) of the older WAL", expected: fixture.model(droppingWALRecord: index),
                damagedPath: older, damagedOffset: records[index].lowerBound)
        }
    }

    // [WAL-1] [REC-7] A damaged WAL header loses no record: the records after it are intact.
    @Test func aDamagedWALHeaderIsReportedAndItsRecordsSurvive() throws {
        let fixture = try DamageFixture.standard()
        let fs = fixture.makeFileSystem()
        fs.flipBits(in: fixture.walPath, at: 24)
        expectRepair(fs, "WAL header CRC", expected: fixture.model, damagedPath: fixture.walPath, damagedOffset: 24)
    }

    // MARK: Segments

    // [REC-7] [SEG-3] A data block that fails its CRC is dropped: only its keys are lost.
    @Test func aDamagedDataBlockLosesOnlyItsOwnKeys() throws {
        let fixture = try DamageFixture.standard()
        let layout = fixture.segmentLayout
        let blockIndex = layout.dataBlocks.count / 2
        let block = layout.dataBlocks[blockIndex]
        let lost = try fixture.keysServedByDataBlock(blockIndex)
        try #require(!lost.isEmpty)
        var expected = fixture.model
        for key in lost { expected[key] = nil }
        let fs = fixture.makeFileSystem()
        fs.flipBits(in: fixture.segmentPath, at: block.lowerBound + block.count / 2)
        expectRepair(
            fs, "data block \(blockIndex)", expected: expected, damagedPath: fixture.segmentPath,
            damagedOffset: block.lowerBound + block.count / 2)
    }

    // [REC-7] Issue 13: what a dropped data block held is reported by key and sequence (its
    // hints, checked against the other blocks, say), so a tool can say what acknowledged writes
    // were lost. The report used to carry only the byte range.
    @Test func aDroppedDataBlockReportsTheKeysAndSequencesItHeld() throws {
        let fixture = try DamageFixture.standard()
        let layout = fixture.segmentLayout
        let blockIndex = layout.dataBlocks.count / 2
        let block = layout.dataBlocks[blockIndex]
        let held = try fixture.segmentHints().filter { $0.location.position == UInt32(blockIndex) }
        try #require(!held.isEmpty)
        let fs = fixture.makeFileSystem()
        fs.flipBits(in: fixture.segmentPath, at: block.lowerBound + block.count / 2)
        let engine = try Damage.open(fs, repair: true).get()
        defer { _ = caught { try engine.close() } }
        let report = try #require(engine.repairReport)
        #expect(report.lost.map(\.key) == held.map(\.key), "every entry of the block, in key order")
        #expect(report.lost.map(\.sequence) == held.map(\.sequence))
        #expect(report.lost.map(\.isDelete) == held.map(\.isDelete))
        #expect(report.lost.allSatisfy { $0.path == fixture.segmentPath })
        let dropped = try #require(report.dropped.first { $0.path == fixture.segmentPath })
        let sequences = held.map(\.sequence)
        #expect(dropped.sequences == sequences.min()!...sequences.max()!, "\(dropped)")
        #expect(dropped.description.contains("sequence"), "\(dropped)")
    }

    // [REC-7] A dropped WAL record is one commit: its sequence is the gap between the valid
    // records around it (the first record's lower neighbour is the newest segment entry).
    @Test func aDroppedWALRecordReportsTheSequenceOfItsCommit() throws {
        let fixture = try DamageFixture.standard()
        let records = fixture.walRecords
        let firstWALSequence = UInt64(fixture.segmentBatches.count + 1)
        for index in records.indices.dropLast() {
            let fs = fixture.makeFileSystem()
            fs.flipBits(in: fixture.walPath, at: records[index].upperBound - 2, mask: 0x01)
            let engine = try Damage.open(fs, repair: true).get()
            let dropped = engine.repairReport?.dropped.filter { $0.path == fixture.walPath } ?? []
            let expected = firstWALSequence + UInt64(index)
            #expect(dropped.count == 1 && dropped.first?.sequences == expected...expected, "record \(index): \(dropped)")
            #expect(engine.repairReport?.lost.isEmpty == true, "a WAL record's entries cannot be listed")
            _ = caught { try engine.close() }
        }
    }

    // [REC-7] [SEG-4] A segment with unreadable hints has them rebuilt from its data blocks:
    // nothing is lost, the damage is reported, and the rewritten store opens normally.
    @Test func aDamagedHintBlockIsRebuiltFromTheDataBlocks() throws {
        let fixture = try DamageFixture.standard()
        for (index, block) in fixture.segmentLayout.hintBlocks.enumerated() {
            let fs = fixture.makeFileSystem()
            fs.flipBits(in: fixture.segmentPath, at: block.lowerBound + Format.blockHeaderSize + 1)
            expectRepair(
                fs, "hint block \(index)", expected: fixture.model, damagedPath: fixture.segmentPath,
                damagedOffset: block.lowerBound + Format.blockHeaderSize + 1)
        }
    }

    // [REC-7] [SEG-8] A segment whose header, block table or footer is unreadable keeps every
    // block: only those bytes are lost (it used to be dropped whole, leaving what the WAL alone
    // holds). SegmentSalvageTests flips every byte of them.
    @Test func anUnreadableHeaderTableOrFooterCostsOnlyItsOwnBytes() throws {
        let fixture = try DamageFixture.standard()
        let layout = fixture.segmentLayout
        let damages: [(String, Int)] = [
            ("header CRC", 24), ("header version", 8), ("header magic", 0), ("block table", layout.tableOffset + 3),
            ("footer", layout.footerOffset + 20), ("footer CRC", layout.footerOffset + 56),
        ]
        for (what, at) in damages {
            let fs = fixture.makeFileSystem()
            fs.flipBits(in: fixture.segmentPath, at: at, mask: 0x01)
            expectRepair(fs, what, expected: fixture.model, damagedPath: fixture.segmentPath, damagedOffset: at)
        }
    }

    // [REC-2] [REC-7] A missing segment, or one cut before its first block, is dropped; a
    // segment cut later keeps its blocks before the cut (SegmentSalvageTests).
    @Test func aMissingOrTruncatedSegmentIsDropped() throws {
        let fixture = try DamageFixture.standard()
        let walOnly = Damage.model(fixture.walBatches)
        let missing = fixture.makeFileSystem()
        try missing.remove(fixture.segmentPath)
        expectRepair(missing, "missing segment", expected: walOnly, damagedPath: fixture.segmentPath)
        for size in [0, 20, 50, fixture.segmentLayout.dataBlocks[0].upperBound - 1] {
            let fs = fixture.makeFileSystem()
            fs.truncateFile(fixture.segmentPath, to: size)
            expectRepair(fs, "segment truncated to \(size)", expected: walOnly, damagedPath: fixture.segmentPath)
        }
    }

    // MARK: Manifest

    // [MAN-3] [REC-7] A manifest that fails its checksum is rebuilt from the files present.
    @Test func aDamagedManifestIsRebuiltFromTheFilesPresent() throws {
        let fixture = try DamageFixture.standard()
        let manifest = try #require(fixture.files[Damage.manifestPath])
        for at in [16, 20, 28, manifest.count - 5, manifest.count - 1] {
            let fs = fixture.makeFileSystem()
            fs.flipBits(in: Damage.manifestPath, at: at, mask: 0x04)
            expectRepair(fs, "manifest byte \(at)", expected: fixture.model, damagedPath: nil, rebuiltManifest: true)
        }
        let fs = fixture.makeFileSystem()
        fs.setContents(Array(manifest.prefix(20)), of: Damage.manifestPath)
        expectRepair(fs, "manifest cut short", expected: fixture.model, damagedPath: nil, rebuiltManifest: true)
    }

    // [REC-7] A manifest that is gone or wiped is rebuilt too: the numbered files present are the
    // store (the notAStore message itself says "open with repair if this is a damaged store").
    @Test func aDeletedOrZeroedManifestIsRebuiltFromTheFilesPresent() throws {
        let fixture = try DamageFixture.standard()
        let manifest = try #require(fixture.files[Damage.manifestPath])
        let deleted = fixture.makeFileSystem()
        try deleted.remove(Damage.manifestPath)
        #expect(caught { try Damage.open(deleted).get() }?.code == .notAStore, "without repair: not a store")
        expectRepair(deleted, "deleted manifest", expected: fixture.model, damagedPath: nil, rebuiltManifest: true)
        let zeroed = fixture.makeFileSystem()
        zeroed.setContents([UInt8](repeating: 0, count: manifest.count), of: Damage.manifestPath)
        expectRepair(zeroed, "zeroed manifest", expected: fixture.model, damagedPath: nil, rebuiltManifest: true)
    }

    // MARK: Exhaustive walk

    // [REC-7] Every byte of a small WAL, flipped on its own: repair opens, loses at most the one
    // damaged transaction, and leaves a store that opens normally with the same content.
    @Test func repairSurvivesAFlipOfAnyByteOfASmallWAL() throws {
        var rng = SeededRandom(seed: 0xBADC0DE)
        var batches: [ModelBatch] = []
        for _ in 0..<4 { batches.append(ModelBatch.random(keys: 6, maxOperations: 3, maxValue: 12, using: &rng)) }
        let fixture = try DamageFixture.build(segmentBatches: [], walBatches: batches, flush: false)
        let records = fixture.walRecords
        try #require(records.count == batches.count)
        var allowed = [Damage.model(batches)]
        for index in batches.indices { allowed.append(fixture.model(droppingWALRecord: index)) }
        var mismatches: [String] = []
        for at in fixture.walBytes.indices {
            let fs = fixture.makeFileSystem()
            fs.flipBits(in: fixture.walPath, at: at, mask: 0x01)
            let record = records.firstIndex { $0.contains(at) }
            let engine: Engine
            switch Damage.open(fs, repair: true) {
            case .success(let opened): engine = opened
            case .failure(let error):
                mismatches.append("byte \(at): repair open failed: \(error)")
                continue
            }
            let state = Damage.state(of: engine)
            _ = caught { try engine.close() }
            let expected = record.map { fixture.model(droppingWALRecord: $0) } ?? fixture.model
            guard case .success(let content) = state, content == expected else {
                let described = (try? state.get()).map { allowed.contains($0) ? "another allowed state" : "a state that drops more" } ?? "\(state)"
                mismatches.append("byte \(at): repair gave \(described)")
                continue
            }
            switch Damage.open(fs) {
            case .success(let reopened):
                if Damage.state(of: reopened) != .success(expected) { mismatches.append("byte \(at): reopen differs") }
                _ = caught { try reopened.close() }
            case .failure(let error):
                mismatches.append("byte \(at): normal open after repair failed: \(error)")
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) mismatches:\n\(mismatches.prefix(40).joined(separator: "\n"))")
    }
}

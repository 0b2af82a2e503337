import Testing
@testable import StrataEngine

// Issue 13, "Salvage, never discard intact data" (SPEC.md [REC-7], [SEG-8]): a segment whose
// header, footer, block table or hints do not check out keeps every data block whose checksum
// holds. Repair used to drop such a segment whole, intact blocks with it; in a store with two
// segments that silently rolled keys back to the older segment's values.

@Suite struct SegmentSalvageTests {
    /// What a repair open of `fs` did, after checking that it opened, that the store holds
    /// exactly `expected`, and that the repaired store reopens normally with the same content
    /// and needs no second repair. `nil` (with an issue recorded) when a step failed.
    static func repair(
        _ fs: FaultInjectingFileSystem, _ what: String, expected: [[UInt8]: [UInt8]],
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> RepairReport? {
        let engine: Engine
        switch Damage.open(fs, repair: true) {
        case .success(let opened): engine = opened
        case .failure(let error):
            Issue.record("\(what): repair open failed: \(error)", sourceLocation: sourceLocation)
            return nil
        }
        let report = engine.repairReport
        let state = Damage.state(of: engine)
        #expect(caught { try engine.close() } == nil, "\(what)", sourceLocation: sourceLocation)
        guard case .success(let content) = state else {
            Issue.record("\(what): a full read after repair failed: \(state)", sourceLocation: sourceLocation)
            return nil
        }
        if content != expected {
            let missing = expected.keys.filter { content[$0] != expected[$0] }.count
            let extra = content.keys.filter { expected[$0] == nil }.count
            Issue.record(
                "\(what): after repair \(missing) keys differ from the acknowledged commits and \(extra) are extra; report: \(String(describing: report))",
                sourceLocation: sourceLocation)
        }
        switch Damage.open(fs) {
        case .success(let reopened):
            #expect(Damage.state(of: reopened) == .success(expected), "\(what): a normal reopen", sourceLocation: sourceLocation)
            _ = caught { try reopened.close() }
        case .failure(let error):
            Issue.record("\(what): a normal open after repair failed: \(error)", sourceLocation: sourceLocation)
        }
        switch Damage.open(fs, repair: true) {
        case .success(let again):
            #expect(again.repairReport?.isClean == true, "\(what): a second repair found \(String(describing: again.repairReport))", sourceLocation: sourceLocation)
            _ = caught { try again.close() }
        case .failure(let error):
            Issue.record("\(what): a second repair failed: \(error)", sourceLocation: sourceLocation)
        }
        return report
    }

    /// The byte ranges `report` dropped in `path`, in order.
    static func spans(_ report: RepairReport, in path: String) -> [Range<UInt64>] {
        report.dropped.filter { $0.path == path }.map { $0.offset..<$0.offset + $0.length }.sorted { $0.lowerBound < $1.lowerBound }
    }

    // MARK: Header, footer, block table

    // [SEG-2] [REC-7] Every byte of the 32-byte header, flipped on its own: the header is all
    // that is lost (its magic and file number), every entry reads back, and the report names
    // exactly the header's 32 bytes. Repair used to drop the whole segment.
    @Test func aFlipOfAnyHeaderByteLosesOnlyTheHeader() throws {
        let fixture = try DamageFixture.standard()
        var failures: [String] = []
        for at in 0..<Format.segmentHeaderSize {
            let fs = fixture.makeFileSystem()
            fs.flipBits(in: fixture.segmentPath, at: at)
            guard let report = Self.repair(fs, "header byte \(at)", expected: fixture.model) else {
                failures.append("header byte \(at)")
                continue
            }
            if Self.spans(report, in: fixture.segmentPath) != [0..<UInt64(Format.segmentHeaderSize)] || !report.lost.isEmpty
                || !report.lostSequences.isEmpty
            {
                failures.append("header byte \(at): \(report.dropped) lost \(report.lost.count)")
            }
        }
        #expect(failures.isEmpty, "\(failures.count) failures:\n\(failures.prefix(10).joined(separator: "\n"))")
    }

    // [SEG-6] [REC-7] Every byte of the 64-byte footer, flipped on its own: the blocks are found
    // by their own framing and checksums and the block table confirms them, so only the footer
    // is lost. Repair used to drop the whole segment.
    @Test func aFlipOfAnyFooterByteLosesOnlyTheFooter() throws {
        let fixture = try DamageFixture.standard()
        let layout = fixture.segmentLayout
        let footer = UInt64(layout.footerOffset)..<UInt64(layout.size)
        var failures: [String] = []
        for at in layout.footerOffset..<layout.size {
            let fs = fixture.makeFileSystem()
            fs.flipBits(in: fixture.segmentPath, at: at)
            guard let report = Self.repair(fs, "footer byte \(at - layout.footerOffset)", expected: fixture.model) else {
                failures.append("footer byte \(at - layout.footerOffset)")
                continue
            }
            if Self.spans(report, in: fixture.segmentPath) != [footer] || !report.lost.isEmpty {
                failures.append("footer byte \(at - layout.footerOffset): \(report.dropped)")
            }
        }
        #expect(failures.isEmpty, "\(failures.count) failures:\n\(failures.prefix(10).joined(separator: "\n"))")
    }

    // [SEG-5] [REC-7] A damaged block table (the footer's CRC of it fails): the blocks are found
    // without it; only the table is lost.
    @Test func aDamagedBlockTableLosesOnlyTheTable() throws {
        let fixture = try DamageFixture.standard()
        let layout = fixture.segmentLayout
        for at in [layout.tableOffset, layout.tableOffset + 3, layout.tableOffset + 8, layout.footerOffset - 1] {
            let fs = fixture.makeFileSystem()
            fs.flipBits(in: fixture.segmentPath, at: at, mask: 0x01)
            guard let report = Self.repair(fs, "block table byte \(at)", expected: fixture.model) else { continue }
            #expect(Self.spans(report, in: fixture.segmentPath) == [UInt64(layout.tableOffset)..<UInt64(layout.footerOffset)], "\(report.dropped)")
            #expect(report.lost.isEmpty)
        }
    }

    // [SEG-4] [REC-7] Bytes of a hint block (its header and its stored bytes): the hints are
    // rebuilt from the data blocks, nothing is lost, and the report names the hint bytes only.
    @Test func aFlipInAHintBlockLosesOnlyHints() throws {
        let fixture = try DamageFixture.standard()
        let layout = fixture.segmentLayout
        let hints = try #require(layout.hintBlocks.first?.lowerBound)..<(try #require(layout.hintBlocks.last?.upperBound))
        var failures: [String] = []
        for (index, block) in layout.hintBlocks.enumerated() {
            // Every byte of the first hint block; the header and a few stored bytes of the others.
            let offsets = index == 0 ? Array(block) : Array(block.prefix(Format.blockHeaderSize + 2)) + [block.upperBound - 1]
            for at in offsets {
                let fs = fixture.makeFileSystem()
                fs.flipBits(in: fixture.segmentPath, at: at)
                guard let report = Self.repair(fs, "hint block \(index) byte \(at - block.lowerBound)", expected: fixture.model) else {
                    failures.append("hint block \(index) byte \(at - block.lowerBound)")
                    continue
                }
                let spans = Self.spans(report, in: fixture.segmentPath)
                if spans.isEmpty || !spans.allSatisfy({ hints.contains(Int($0.lowerBound)) && $0.upperBound <= UInt64(hints.upperBound) })
                    || !spans.contains(where: { $0.contains(UInt64(at)) }) || !report.lost.isEmpty
                {
                    failures.append("hint block \(index) byte \(at - block.lowerBound): \(report.dropped)")
                }
            }
        }
        #expect(failures.isEmpty, "\(failures.count) failures:\n\(failures.prefix(10).joined(separator: "\n"))")
    }

    // [REC-7] Damage to the footer and to a data block: the other blocks are found by scanning,
    // the damaged block's range is reported, and its entries are named by key and sequence from
    // the segment's own hint blocks, which still check out.
    @Test func aDamagedDataBlockInASegmentWithoutAFooterIsNamedByItsHints() throws {
        let fixture = try DamageFixture.standard()
        let layout = fixture.segmentLayout
        for blockIndex in [0, layout.dataBlocks.count / 2, layout.dataBlocks.count - 1] {
            let block = layout.dataBlocks[blockIndex]
            let held = try fixture.segmentHints().filter { $0.location.position == UInt32(blockIndex) }
            var expected = fixture.model
            for key in try fixture.keysServedByDataBlock(blockIndex) { expected[key] = nil }
            for at in [block.lowerBound + block.count / 2, block.lowerBound + 5] {
                let fs = fixture.makeFileSystem()
                fs.flipBits(in: fixture.segmentPath, at: at, mask: 0x01)
                fs.flipBits(in: fixture.segmentPath, at: layout.footerOffset + 30, mask: 0x01)
                guard let report = Self.repair(fs, "data block \(blockIndex) byte \(at) and the footer", expected: expected) else { continue }
                let spans = Self.spans(report, in: fixture.segmentPath)
                #expect(spans.contains(UInt64(block.lowerBound)..<UInt64(block.upperBound)), "block \(blockIndex): \(report.dropped)")
                #expect(spans.contains(UInt64(layout.footerOffset)..<UInt64(layout.size)), "block \(blockIndex): \(report.dropped)")
                #expect(spans.count == 2, "block \(blockIndex): \(report.dropped)")
                #expect(report.lost.map(\.key) == held.map(\.key) && report.lost.map(\.sequence) == held.map(\.sequence), "block \(blockIndex)")
                let sequences = held.map(\.sequence)
                let dropped = report.dropped.first { $0.offset == UInt64(block.lowerBound) }
                #expect(dropped?.sequences == sequences.min()!...sequences.max()!, "\(String(describing: dropped))")
            }
        }
    }

    // [REC-7] A segment cut short keeps every block before the cut; the report names the bytes
    // from the first incomplete block to the size the manifest records.
    @Test func aTruncatedSegmentKeepsTheBlocksBeforeTheCut() throws {
        let fixture = try DamageFixture.standard()
        let layout = fixture.segmentLayout
        let hints = try fixture.segmentHints()
        for cut in [layout.size - 1, layout.dataBlocks[2].upperBound + 7, layout.dataBlocks[1].lowerBound] {
            let survivors = layout.dataBlocks.indices.filter { layout.dataBlocks[$0].upperBound <= cut }
            var expected = fixture.model
            for hint in hints where !survivors.contains(Int(hint.location.position)) && !fixture.walKeys.contains(hint.key) {
                expected[hint.key] = nil
            }
            let fs = fixture.makeFileSystem()
            fs.truncateFile(fixture.segmentPath, to: cut)
            guard let report = Self.repair(fs, "segment cut to \(cut) bytes", expected: expected) else { continue }
            let spans = Self.spans(report, in: fixture.segmentPath)
            // The block table and what is left of the footer survive a cut of the last byte.
            let firstLost = survivors.count < layout.dataBlocks.count ? layout.dataBlocks[survivors.count].lowerBound : layout.footerOffset
            #expect(spans.first?.lowerBound == UInt64(min(firstLost, cut)), "cut \(cut): \(report.dropped)")
            #expect(spans.last?.upperBound == UInt64(layout.size), "cut \(cut): the report reaches the recorded size: \(report.dropped)")
        }
    }

    // [REC-7] Dropped bytes that held no entry (a header, footer, block table or hint block:
    // what they described is rebuilt from the data) say so, and a damaged data block says it
    // held entries, so a tool can tell "nothing acknowledged lost" from a loss.
    @Test func droppedRangesSayWhetherTheyHeldEntries() throws {
        let fixture = try DamageFixture.standard()
        let layout = fixture.segmentLayout
        let metadata = [("header", 4), ("footer", layout.footerOffset + 9), ("table", layout.tableOffset + 1),
                        ("hint block", layout.hintBlocks[1].lowerBound + 20)]
        for (what, at) in metadata {
            let fs = fixture.makeFileSystem()
            fs.flipBits(in: fixture.segmentPath, at: at, mask: 0x02)
            let report = Self.repair(fs, what, expected: fixture.model)
            #expect(report?.dropped.isEmpty == false && report?.dropped.allSatisfy { !$0.heldEntries } == true, "\(what): \(String(describing: report))")
        }
        let fs = fixture.makeFileSystem()
        let block = layout.dataBlocks[1]
        fs.flipBits(in: fixture.segmentPath, at: block.lowerBound + 30, mask: 0x02)
        fs.flipBits(in: fixture.segmentPath, at: layout.footerOffset + 9, mask: 0x02)
        let engine = try Damage.open(fs, repair: true).get()
        defer { _ = caught { try engine.close() } }
        let dropped = try #require(engine.repairReport?.dropped)
        #expect(dropped.filter(\.heldEntries).map(\.offset) == [UInt64(block.lowerBound)], "\(dropped)")
    }

    // [SEG-8] A file made so that a plausible block header starts every 16 bytes, each claiming
    // to run almost to the end: checking every candidate's CRC would cost the square of the
    // size (here some 500 GiB). The scan's budget keeps it linear: it gives up, and the bytes
    // are one dropped range.
    @Test func aHostileFileCannotMakeTheScanQuadratic() {
        let size = 4 << 20
        var bytes = [UInt8](repeating: 0, count: size)
        for slot in stride(from: 32, to: size - 16, by: 16) {
            Damage.putU32(UInt32(size - slot - 32), into: &bytes, at: slot + 4)  // stored: almost to the end
            Damage.putU32(1, into: &bytes, at: slot + 8)  // raw
            bytes[slot + 12] = Format.compressionLZ4
        }
        let clock = ContinuousClock()
        let start = clock.now
        let scan = bytes.withUnsafeBytes { SegmentReader.scanBlocks($0, from: 32, to: size) }
        let elapsed = clock.now - start
        #expect(scan.blocks.isEmpty && scan.gaps == [32..<size], "\(scan.gaps.prefix(3))")
        #expect(scan.gaveUpAt != nil, "the scan stops at its budget")
        #expect(elapsed < .seconds(20), "\(elapsed)")
    }

    // [SEG-8] Blocks whose CRC holds are found between damaged bytes of any length, and the
    // scan costs about one pass over the file.
    @Test func theScanFindsEveryIntactBlockAroundDamage() throws {
        let fixture = try DamageFixture.standard()
        let layout = fixture.segmentLayout
        var bytes = fixture.segmentBytes
        // Wipe the first data block's header and a stretch in the third.
        for at in layout.dataBlocks[0].lowerBound..<(layout.dataBlocks[0].lowerBound + 16) { bytes[at] = 0xA5 }
        for at in (layout.dataBlocks[2].lowerBound + 3)..<(layout.dataBlocks[2].lowerBound + 40) { bytes[at] ^= 0x5A }
        let scan = bytes.withUnsafeBytes { SegmentReader.scanBlocks($0, from: 32, to: layout.tableOffset) }
        let expected = (layout.dataBlocks + layout.hintBlocks).enumerated().filter { $0.offset != 0 && $0.offset != 2 }.map { UInt64($0.element.lowerBound) }
        #expect(scan.blocks.map(\.offset) == expected)
        #expect(scan.gaps == [layout.dataBlocks[0], layout.dataBlocks[2]], "\(scan.gaps)")
        #expect(scan.gaveUpAt == nil)
    }

    // MARK: Two segments

    /// A store with two segments (the second overwrites and deletes keys of the first) and a WAL.
    static func twoSegmentFixture() throws -> (fixture: DamageFixture, older: String, newer: String) {
        var older: [ModelBatch] = [], newer: [ModelBatch] = []
        for b in 0..<6 {
            older.append(ModelBatch(operations: (0..<10).map { (testKey(b * 10 + $0), Damage.value("old\(b)", $0)) }))
        }
        for b in 0..<6 {
            var batch = ModelBatch(operations: (0..<10).map { (testKey(b * 10 + $0), Damage.value("new\(b)", $0)) })
            batch.operations.append((testKey(100 + b), nil))
            if b % 2 == 0 { batch.operations.append((testKey(b * 10 + 9), nil)) }
            newer.append(batch)
        }
        let wal = [ModelBatch(operations: [(testKey(7), Damage.value("wal", 7)), (testKey(300), Damage.value("wal", 300))])]
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: Damage.directory, options: Damage.options(fs))
        for batch in older { try engine.commit(batch.writeBatch) }
        try engine.flush()
        for batch in newer { try engine.commit(batch.writeBatch) }
        try engine.flush()
        for batch in wal { try engine.commit(batch.writeBatch) }
        try engine.close()
        var files: [String: [UInt8]] = [:]
        for path in fs.listFiles(under: Damage.directory) { files[path] = fs.contents(of: path) ?? [] }
        let segments = files.keys.filter { $0.hasSuffix(".seg") }.sorted()
        try #require(segments.count == 2)
        let walPath = try #require(files.keys.filter { $0.hasSuffix(".wal") }.sorted().last)
        let number = try #require(Format.parseNumberedFileName(String(segments[1].split(separator: "/").last ?? ""))?.number)
        let fixture = DamageFixture(
            files: files, segmentBatches: older + newer, walBatches: wal, walPath: walPath, segmentPath: segments[1],
            segmentNumber: number)
        return (fixture, segments[0], segments[1])
    }

    // Issue 13: one flipped byte in the newer segment's header used to drop that segment, and
    // with it every newer version: the store silently read the older segment's values (a
    // rollback of acknowledged commits) and the report named no lost sequence or key. Nothing
    // is lost now.
    @Test func aFlippedHeaderByteInTheNewerOfTwoSegmentsRollsNothingBack() throws {
        let (fixture, older, newer) = try Self.twoSegmentFixture()
        for at in [0, 9, 16, 24] {
            let fs = fixture.makeFileSystem()
            fs.flipBits(in: newer, at: at, mask: 0x20)
            guard let report = Self.repair(fs, "newer segment header byte \(at)", expected: fixture.model) else { continue }
            #expect(Self.spans(report, in: newer) == [0..<UInt64(Format.segmentHeaderSize)], "\(report.dropped)")
            #expect(report.lost.isEmpty && report.lostSequences.isEmpty)
        }
        // The footer of the older one: nothing lost either.
        let fs = fixture.makeFileSystem()
        let size = try #require(fixture.files[older]?.count)
        fs.flipBits(in: older, at: size - 20, mask: 0x01)
        let report = Self.repair(fs, "older segment footer", expected: fixture.model)
        #expect(report.map { Self.spans($0, in: older) } == [UInt64(size - Format.segmentFooterSize)..<UInt64(size)])
    }

    // [REC-7] When a block of the newer segment is lost for good, what the store reads instead
    // (older versions from the older segment) is never silent: the lost entries are listed by
    // key and sequence, so a tool can say which acknowledged writes were rolled back.
    @Test func aLostBlockOfTheNewerSegmentNamesEveryRolledBackKey() throws {
        let (fixture, _, newer) = try Self.twoSegmentFixture()
        let bytes = try #require(fixture.files[newer])
        let layout = Damage.SegmentLayout(bytes)
        let block = layout.dataBlocks[0]
        let reader = try SegmentReader.open(fileSystem: fixture.makeFileSystem(), path: newer, fileNumber: fixture.segmentNumber)
        let held = try reader.readHints().filter { $0.location.position == 0 }
        try #require(!held.isEmpty)
        let fs = fixture.makeFileSystem()
        fs.flipBits(in: newer, at: block.lowerBound + block.count / 2, mask: 0x01)
        fs.flipBits(in: newer, at: 3, mask: 0x01)  // and the header
        let engine = try Damage.open(fs, repair: true).get()
        defer { _ = caught { try engine.close() } }
        let report = try #require(engine.repairReport)
        #expect(report.lost.map(\.key) == held.map(\.key), "\(report)")
        let snapshot = try engine.snapshot()
        for entry in report.lost where !entry.isDelete && fixture.walKeys.contains(entry.key) == false {
            // The key now reads its older version (or nothing): exactly what the report says was lost.
            #expect(snapshot.sequence(of: entry.key) ?? 0 < entry.sequence)
        }
    }
}

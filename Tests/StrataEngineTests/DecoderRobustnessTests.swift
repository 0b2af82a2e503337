import Glibc
import Testing
@testable import StrataEngine

// Decoders never crash on arbitrary bytes: every input either decodes or throws a StoreError
// (the decoders' typed throws make anything else impossible short of a crash). Inputs are seeded
// random byte strings and random mutations of valid encodings, both raw (mostly stopped by a
// checksum) and with every checksum recomputed afterwards, so the parsers behind the checksums
// see the damage too ([CRC-1] protects against accidents, not against every byte pattern).

/// Valid encodings, mutations and checksum fix-ups, following SPEC.md.
enum FuzzInput {
    // MARK: Valid encodings

    /// [MAN-1] A manifest with WALs and segments.
    static func manifest() -> [UInt8] {
        Manifest(
            nextFileNumber: 12, lastSequence: 977, wals: [7, 11],
            segments: [.init(fileNumber: 3, size: 4096), .init(fileNumber: 9, size: 123_456)]
        ).encode()
    }

    /// [ENT-1] A put or a delete.
    static func entry(_ rng: inout SeededRandom) -> [UInt8] {
        let isDelete = Int.random(in: 0..<4, using: &rng) == 0
        return Damage.entry(
            sequence: UInt64.random(in: 0...1 << 40, using: &rng), key: rng.bytes(Int.random(in: 0...20, using: &rng)),
            value: isDelete ? [] : rng.bytes(Int.random(in: 0...40, using: &rng)), isDelete: isDelete)
    }

    /// [WAL-1] [WAL-2] [WAL-3] A WAL file (number 5) with a few batch records.
    static func wal(_ rng: inout SeededRandom) -> [UInt8] {
        var writer = ByteWriter()
        writer.append(WALRecord.fileHeader(fileNumber: 5))
        for sequence in 1...UInt64.random(in: 1...5, using: &rng) {
            var operations: [WALRecord.Operation] = []
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                let isDelete = Bool.random(using: &rng)
                operations.append(
                    .init(
                        isDelete: isDelete, key: rng.bytes(Int.random(in: 1...12, using: &rng)),
                        value: isDelete ? [] : rng.bytes(Int.random(in: 0...30, using: &rng))))
            }
            var entries: [WALRecord.EncodedEntry] = []
            WALRecord.appendBatch(sequence: sequence * 3, operations: operations, to: &writer, entries: &entries)
        }
        return writer.bytes
    }

    /// [SEG-1]…[SEG-6] A segment (number 5) written by SegmentWriter, with LZ4 or raw blocks.
    static func segment(_ rng: inout SeededRandom, compressible: Bool) throws -> [UInt8] {
        let fs = FaultInjectingFileSystem()
        try fs.createDirectory("/w")
        var inputs: [SegmentWriter.Input] = []
        for i in 0..<Int.random(in: 1...40, using: &rng) {
            let isDelete = Int.random(in: 0..<6, using: &rng) == 0
            let value = compressible ? Damage.value("x", i) : rng.bytes(Int.random(in: 0...40, using: &rng))
            inputs.append(.init(isDelete: isDelete, sequence: UInt64(i + 1), key: testKey(i), value: isDelete ? [] : value))
        }
        _ = try SegmentWriter(fileSystem: fs, path: "/w/00000005.seg", fileNumber: 5, blockSize: 128).write(inputs)
        return try #require(fs.contents(of: "/w/00000005.seg"))
    }

    // MARK: Mutations

    /// Values that tend to find edge cases when written over a length or count field.
    static let interesting: [UInt32] = [0, 1, 2, 15, 16, 17, 32, 64, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF]

    /// One to four random edits: bit flips, byte sets, truncation, insertion, deletion,
    /// duplication, interesting 32-bit values, zeroed runs.
    static func mutate(_ input: [UInt8], _ rng: inout SeededRandom) -> [UInt8] {
        var bytes = input
        for _ in 0..<Int.random(in: 1...4, using: &rng) {
            let at = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &rng)
            switch Int.random(in: 0..<8, using: &rng) {
            case 0 where !bytes.isEmpty:
                bytes[at] ^= 1 << UInt8.random(in: 0..<8, using: &rng)
            case 1 where !bytes.isEmpty:
                bytes[at] = UInt8.random(in: 0...255, using: &rng)
            case 2:
                bytes.removeLast(Int.random(in: 0...bytes.count, using: &rng))
            case 3:
                bytes.insert(contentsOf: rng.bytes(Int.random(in: 1...16, using: &rng)), at: at)
            case 4 where !bytes.isEmpty:
                bytes.removeSubrange(at..<min(bytes.count, at + Int.random(in: 1...16, using: &rng)))
            case 5 where !bytes.isEmpty:
                let chunk = bytes[at..<min(bytes.count, at + Int.random(in: 1...32, using: &rng))]
                bytes.insert(contentsOf: chunk, at: Int.random(in: 0...bytes.count, using: &rng))
            case 6 where bytes.count >= 4:
                let value = interesting.randomElement(using: &rng) ?? 0
                Damage.putU32(value, into: &bytes, at: Int.random(in: 0...bytes.count - 4, using: &rng))
            case 7 where !bytes.isEmpty:
                for i in at..<min(bytes.count, at + Int.random(in: 1...24, using: &rng)) { bytes[i] = 0 }
            default:
                bytes.append(UInt8.random(in: 0...255, using: &rng))
            }
        }
        return bytes
    }

    /// Edits that keep the length (so a segment's layout still lines up): bit flips, byte
    /// sets, interesting 32-bit values, zeroed runs.
    static func mutateInPlace(_ input: [UInt8], _ rng: inout SeededRandom) -> [UInt8] {
        var bytes = input
        guard bytes.count >= 4 else { return bytes }
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
            let at = Int.random(in: 0..<bytes.count, using: &rng)
            switch Int.random(in: 0..<4, using: &rng) {
            case 0: bytes[at] ^= 1 << UInt8.random(in: 0..<8, using: &rng)
            case 1: bytes[at] = UInt8.random(in: 0...255, using: &rng)
            case 2:
                let value = interesting.randomElement(using: &rng) ?? 0
                Damage.putU32(value, into: &bytes, at: min(at, bytes.count - 4))
            default:
                for i in at..<min(bytes.count, at + Int.random(in: 1...8, using: &rng)) { bytes[i] = 0 }
            }
        }
        return bytes
    }

    // MARK: Checksum fix-ups (so mutations reach the parsers behind the checksums)

    /// [MAN-1] Recomputes the body length and the CRC of a manifest-shaped byte string.
    static func fixManifest(_ input: [UInt8]) -> [UInt8] {
        var bytes = input
        guard bytes.count >= 20 else { return bytes }
        Damage.putU32(UInt32(bytes.count - 20), into: &bytes, at: 12)
        Damage.putU32(CRC32C.checksum(Array(bytes[0..<bytes.count - 4])), into: &bytes, at: bytes.count - 4)
        return bytes
    }

    /// [WAL-1] [WAL-2] Recomputes the header CRC and, record by record, both record CRCs.
    static func fixWAL(_ input: [UInt8]) -> [UInt8] {
        var bytes = input
        guard bytes.count >= 28 else { return bytes }
        Damage.putU32(CRC32C.checksum(Array(bytes[0..<24])), into: &bytes, at: 24)
        var position = Format.walHeaderSize
        while position + Format.walRecordHeaderSize <= bytes.count {
            let end = position + Format.walRecordHeaderSize + Int(Damage.u32(bytes, position + 4))
            if end <= bytes.count {
                let payload = Array(bytes[(position + Format.walRecordHeaderSize)..<end])
                Damage.putU32(CRC32C.checksum(payload), into: &bytes, at: position)
            }
            Damage.putU32(CRC32C.checksum(Array(bytes[position..<position + 12])), into: &bytes, at: position + 12)
            guard end <= bytes.count else { break }
            position = end
        }
        return bytes
    }

    /// [SEG-2]…[SEG-6] Recomputes the header CRC, every block CRC the table points at, the
    /// table CRC and the footer CRC, as far as the (possibly damaged) layout allows.
    static func fixSegment(_ input: [UInt8]) -> [UInt8] {
        var bytes = input
        guard bytes.count >= 96 else { return bytes }
        Damage.putU32(CRC32C.checksum(Array(bytes[0..<24])), into: &bytes, at: 24)
        let footer = bytes.count - 64
        let blockCount = Int(Damage.u32(bytes, footer + 16)) &+ Int(Damage.u32(bytes, footer + 20))
        let table = Damage.u64(bytes, footer + 24)
        if blockCount >= 0, blockCount < 10_000, table <= UInt64(footer), Int(table) + blockCount * 16 <= footer {
            for row in 0..<blockCount {
                let at = Int(table) + row * 16
                let offset = Damage.u64(bytes, at)
                let stored = Int(Damage.u32(bytes, at + 8))
                guard offset <= UInt64(footer), Int(offset) + 16 + stored <= footer else { continue }
                let start = Int(offset)
                Damage.putU32(CRC32C.checksum(Array(bytes[start + 4..<start + 16 + stored])), into: &bytes, at: start)
            }
            let tableBytes = Array(bytes[Int(table)..<Int(table) + blockCount * 16])
            Damage.putU32(CRC32C.checksum(tableBytes), into: &bytes, at: footer + 32)
        }
        Damage.putU32(CRC32C.checksum(Array(bytes[footer..<footer + 56])), into: &bytes, at: footer + 56)
        return bytes
    }

    // MARK: Crafted segments

    /// [SEG-3] A block (header and stored bytes) holding `raw` uncompressed.
    static func rawBlock(_ raw: [UInt8], rawCount: Int? = nil, compression: UInt8 = Format.compressionNone) -> [UInt8] {
        var header = SegmentWriter.blockHeader(stored: raw, rawCount: rawCount ?? raw.count, lz4: false)
        header[12] = compression
        Damage.putU32(CRC32C.checksum(Array(header[4..<16]) + raw), into: &header, at: 0)
        return header + raw
    }

    /// [SEG-4] One hint.
    static func hint(key: [UInt8], sequence: UInt64, block: UInt64, offset: UInt64, length: UInt64, kind: UInt8 = Format.entryPut) -> [UInt8] {
        var writer = ByteWriter()
        writer.u8(kind)
        writer.varint(UInt64(key.count))
        writer.append(key)
        writer.varint(sequence)
        writer.varint(block)
        writer.varint(offset)
        writer.varint(length)
        return writer.bytes
    }

    /// A segment (number 5) with valid checksums everywhere around the given raw blocks; the
    /// footer's table offset and entry count can be overridden.
    static func craftedSegment(
        data: [[UInt8]], hints: [[UInt8]], entryCount: UInt64, tableOffset: UInt64? = nil, fileNumber: UInt32 = 5
    ) -> [UInt8] {
        var bytes = SegmentWriter.header(fileNumber: fileNumber)
        var table = ByteWriter()
        for raw in data + hints {
            let block = rawBlock(raw)
            table.u64(UInt64(bytes.count))
            table.u32(UInt32(raw.count))
            table.u32(UInt32(raw.count))
            bytes += block
        }
        let tableStart = UInt64(bytes.count)
        bytes += table.bytes
        var footer = ByteWriter()
        footer.append(Format.segmentMagic)
        footer.u32(Format.version)
        footer.u32(0)
        footer.u32(UInt32(data.count))
        footer.u32(UInt32(hints.count))
        footer.u64(tableOffset ?? tableStart)
        footer.u32(CRC32C.checksum(table.bytes))
        footer.u32(0)
        footer.u64(entryCount)
        footer.u64(99)
        footer.u32(CRC32C.checksum(footer.bytes))
        footer.u32(0)
        return bytes + footer.bytes
    }

    /// Opens `bytes` as segment 5 and reads its hints and every data block; the typed error, if any.
    static func readSegment(_ bytes: [UInt8]) -> StoreError? {
        let fs = FaultInjectingFileSystem()
        fs.setContents(bytes, of: "/f/00000005.seg")
        do throws(StoreError) {
            let reader = try SegmentReader.open(fileSystem: fs, path: "/f/00000005.seg", fileNumber: 5)
            for hint in try reader.readHints() { _ = try reader.readEntry(at: hint.location) }
            for index in reader.dataBlocks.indices { _ = try reader.readDataBlock(index) }
            return nil
        } catch {
            return error
        }
    }
}

@Suite struct DecoderRobustnessTests {
    // MARK: Manifest

    // [MAN-1] [MAN-3] Manifest.decode on random bytes and on mutations of a valid manifest.
    @Test func manifestDecodeNeverCrashesAndAcceptsOnlyCanonicalBytes() {
        var rng = SeededRandom(seed: 101)
        let valid = FuzzInput.manifest()
        #expect((try? Manifest.decode(valid, path: "/m")) != nil)
        var decoded = 0, failures: [String] = []
        for round in 0..<6000 {
            let input: [UInt8]
            switch round % 4 {
            case 0: input = rng.bytes(Int.random(in: 0...80, using: &rng))
            case 1: input = Format.manifestMagic + rng.bytes(Int.random(in: 0...80, using: &rng))
            case 2: input = FuzzInput.mutate(valid, &rng)
            default: input = FuzzInput.fixManifest(FuzzInput.mutate(valid, &rng))
            }
            do throws(StoreError) {
                let manifest = try Manifest.decode(input, path: "/m")
                decoded += 1
                // Decoding succeeds only on bytes the encoder would write (for version 1).
                if Damage.u32(input, 8) == Format.version && manifest.encode() != input {
                    failures.append("round \(round): decoded a non-canonical manifest")
                }
                if manifest.wals.isEmpty || !(manifest.wals + manifest.segments.map(\.fileNumber)).allSatisfy({ $0 < manifest.nextFileNumber }) {
                    failures.append("round \(round): decoded a manifest that breaks [MAN-2]")
                }
            } catch {
                if error.path != "/m" || error.offset == nil {
                    failures.append("round \(round): error without path and offset: \(error)")
                }
            }
        }
        #expect(decoded > 0, "some fixed-up mutations decode")
        #expect(failures.isEmpty, "\(failures.prefix(20))")
    }

    // MARK: Entries

    // [ENT-1] LogEntry.decode on random bytes and mutations of valid entries.
    @Test func entryDecodeNeverCrashesAndRoundTripsWhatItAccepts() {
        var rng = SeededRandom(seed: 202)
        var failures: [String] = []
        for round in 0..<6000 {
            let valid = FuzzInput.entry(&rng)
            let input: [UInt8]
            switch round % 3 {
            case 0: input = rng.bytes(Int.random(in: 0...60, using: &rng))
            case 1: input = FuzzInput.mutate(valid, &rng)
            default: input = valid
            }
            input.withUnsafeBytes { raw in
                var reader = ByteReader(raw)
                switch LogEntry.decode(from: &reader) {
                case .success(let entry):
                    let consumed = Array(input[0..<reader.position])
                    let again = Damage.entry(sequence: entry.sequence, key: entry.key, value: entry.value, isDelete: entry.isDelete)
                    if again != consumed { failures.append("round \(round): accepted a non-canonical entry") }
                    if (try? LogEntry.decodeExactly(UnsafeRawBufferPointer(rebasing: raw[0..<reader.position]), path: "/e", offset: 0)) != entry {
                        failures.append("round \(round): decodeExactly disagrees with decode")
                    }
                case .failure:
                    if round % 3 == 2 { failures.append("round \(round): a valid entry did not decode") }
                    let error = caught { try LogEntry.decodeExactly(raw, path: "/e", offset: 7) }
                    if error?.code != .corruption || error?.offset != 7 {
                        failures.append("round \(round): decodeExactly gave \(String(describing: error))")
                    }
                }
            }
        }
        #expect(failures.isEmpty, "\(failures.prefix(20))")
    }

    // MARK: WAL

    // [WAL-1]…[WAL-3] [REC-3] [REC-4] [REC-7] WALReader (checkHeader and read, newest or not,
    // repair or not) on random bytes and mutations of a valid WAL. Whatever it hands out is
    // consistent: increasing sequences, entries inside the file that decode where it says.
    @Test func walReaderNeverCrashesAndOnlyHandsOutVerifiedRecords() {
        var rng = SeededRandom(seed: 303)
        var failures: [String] = []
        var recordsSeen = 0
        for round in 0..<2400 {
            let valid = FuzzInput.wal(&rng)
            let input: [UInt8]
            switch round % 4 {
            case 0: input = Format.walMagic + rng.bytes(Int.random(in: 0...200, using: &rng))
            case 1: input = FuzzInput.mutate(valid, &rng)
            case 2: input = FuzzInput.fixWAL(FuzzInput.mutate(valid, &rng))
            default: input = FuzzInput.fixWAL(FuzzInput.mutate(FuzzInput.mutate(valid, &rng), &rng))
            }
            for isNewest in [false, true] {
                for repair in [false, true] {
                    let reader = WALReader(path: "/w/00000005.wal", bytes: input, isNewest: isNewest, repair: repair)
                    let label = "round \(round) newest \(isNewest) repair \(repair)"
                    do throws(StoreError) {
                        _ = try reader.checkHeader()
                    } catch {
                        if error.path != "/w/00000005.wal" { failures.append("\(label): header error without path") }
                    }
                    var lastSequence: UInt64 = 0
                    var lastEnd = Format.walHeaderSize
                    do throws(StoreError) {
                        let outcome = try reader.read { (record) throws(StoreError) in
                            recordsSeen += 1
                            if record.sequence <= lastSequence { failures.append("\(label): sequence did not increase") }
                            if record.offset < UInt64(lastEnd) { failures.append("\(label): records overlap") }
                            lastSequence = record.sequence
                            for item in record.entries {
                                let end = Int(item.offset) + Int(item.length)
                                guard end <= input.count else {
                                    failures.append("\(label): entry past the end")
                                    continue
                                }
                                let again = try Array(input[Int(item.offset)..<end]).withBytes { (raw) throws(StoreError) in
                                    try LogEntry.decodeExactly(raw, path: reader.path, offset: item.offset)
                                }
                                if again != item.entry || item.entry.sequence != record.sequence {
                                    failures.append("\(label): entry does not read back")
                                }
                                lastEnd = end
                            }
                        }
                        if input.count >= Format.walHeaderSize && outcome.validEnd > UInt64(input.count) {
                            failures.append("\(label): validEnd past the end")
                        }
                        if outcome.tornTail != nil && !isNewest { failures.append("\(label): torn tail in an older WAL") }
                        if !repair && !outcome.dropped.isEmpty { failures.append("\(label): dropped without repair") }
                        if let torn = outcome.tornTail, torn.offset + torn.length != UInt64(input.count) {
                            failures.append("\(label): torn tail does not reach the end")
                        }
                        var previousEnd: UInt64 = 0
                        for range in outcome.dropped {
                            if range.offset < previousEnd || range.offset + range.length > UInt64(input.count) || range.length == 0 {
                                failures.append("\(label): bad dropped range \(range)")
                            }
                            previousEnd = range.offset + range.length
                        }
                    } catch {
                        if error.code != .corruption || error.path != reader.path || error.offset == nil {
                            failures.append("\(label): \(error)")
                        }
                        if repair { failures.append("\(label): read failed in repair mode: \(error)") }
                    }
                }
            }
        }
        #expect(recordsSeen > 1000, "the fuzzer reached valid records")
        #expect(failures.isEmpty, "\(failures.count) failures: \(failures.prefix(20))")
    }

    // MARK: Segments

    // [SEG-1]…[SEG-6] [READ-1] SegmentReader (open, readHints, readDataBlock, readEntry,
    // salvageHints) on random bytes and on mutations of valid segments.
    @Test func segmentReaderNeverCrashesOnDamagedFiles() throws {
        var rng = SeededRandom(seed: 404)
        var failures: [String] = []
        var opened = 0
        let path = "/f/00000005.seg"
        for round in 0..<1600 {
            let valid = try FuzzInput.segment(&rng, compressible: round % 2 == 0)
            let input: [UInt8]
            switch round % 5 {
            case 0: input = Format.segmentMagic + rng.bytes(Int.random(in: 0...300, using: &rng))
            case 1: input = FuzzInput.mutate(valid, &rng)
            case 2: input = FuzzInput.fixSegment(FuzzInput.mutate(valid, &rng))
            default: input = FuzzInput.fixSegment(FuzzInput.mutateInPlace(valid, &rng))
            }
            let fs = FaultInjectingFileSystem()
            fs.setContents(input, of: path)
            let reader: SegmentReader
            do throws(StoreError) {
                reader = try SegmentReader.open(fileSystem: fs, path: path, fileNumber: 5)
            } catch {
                if error.path != path { failures.append("round \(round): open error without path: \(error)") }
                continue
            }
            opened += 1
            do throws(StoreError) {
                for hint in try reader.readHints() { _ = try reader.readEntry(at: hint.location) }
            } catch {
                if error.code != .corruption || error.path != path {
                    failures.append("round \(round): read error \(error)")
                }
            }
            for index in [-1, reader.dataBlocks.count] + Array(reader.dataBlocks.indices) {
                do throws(StoreError) {
                    _ = try reader.readDataBlock(index)
                } catch {
                    if error.code != .corruption || error.path != path { failures.append("round \(round): block \(index): \(error)") }
                }
            }
            var dropped: [DroppedRange] = []
            let hints = reader.salvageHints(dropped: &dropped)
            for range in dropped where range.path != path || range.offset + range.length > UInt64(input.count) {
                failures.append("round \(round): salvage dropped \(range)")
            }
            for hint in hints where Int(hint.location.position) >= reader.dataBlocks.count {
                failures.append("round \(round): salvaged hint points at no block")
            }
        }
        #expect(opened > 400, "the fuzzer got past the footer (\(opened) opened)")
        #expect(failures.isEmpty, "\(failures.count) failures: \(failures.prefix(20))")
    }

    // [SEG-3] [SEG-4] [READ-1] Crafted segments with valid checksums but inconsistent content are
    // corruption, never a crash or a wrong entry.
    @Test func craftedSegmentsWithValidChecksumsButBadContentAreCorruption() {
        let entry = Damage.entry(sequence: 4, key: Array("k".utf8), value: Array("v".utf8))
        let length = UInt64(entry.count)
        let good = FuzzInput.hint(key: Array("k".utf8), sequence: 4, block: 0, offset: 0, length: length)
        #expect(FuzzInput.readSegment(FuzzInput.craftedSegment(data: [entry], hints: [good], entryCount: 1)) == nil, "the crafting is sound")
        let cases: [(String, [UInt8])] = [
            ("a hint naming a block that does not exist",
             FuzzInput.craftedSegment(data: [entry], hints: [FuzzInput.hint(key: Array("k".utf8), sequence: 4, block: 1, offset: 0, length: length)], entryCount: 1)),
            ("a hint running past its block",
             FuzzInput.craftedSegment(data: [entry], hints: [FuzzInput.hint(key: Array("k".utf8), sequence: 4, block: 0, offset: 1, length: length)], entryCount: 1)),
            ("a hint with a bad kind",
             FuzzInput.craftedSegment(data: [entry], hints: [FuzzInput.hint(key: Array("k".utf8), sequence: 4, block: 0, offset: 0, length: length, kind: 9)], entryCount: 1)),
            ("a hint with a too long key", FuzzInput.craftedSegment(data: [entry], hints: [[1, 0xFF, 0xFF, 0x7F]], entryCount: 1)),
            ("a hint cut short", FuzzInput.craftedSegment(data: [entry], hints: [Array(good.dropLast())], entryCount: 1)),
            ("more hints than the footer counts", FuzzInput.craftedSegment(data: [entry], hints: [good + good], entryCount: 1)),
            ("a hint pointing at half an entry",
             FuzzInput.craftedSegment(data: [entry], hints: [FuzzInput.hint(key: Array("k".utf8), sequence: 4, block: 0, offset: 0, length: length - 1)], entryCount: 1)),
            ("a data block that is not entries",
             FuzzInput.craftedSegment(data: [[0x07] + entry.dropFirst()], hints: [good], entryCount: 1)),
            ("a table offset before the first block", FuzzInput.craftedSegment(data: [entry], hints: [good], entryCount: 1, tableOffset: 8)),
            ("a table offset past the file", FuzzInput.craftedSegment(data: [entry], hints: [good], entryCount: 1, tableOffset: 1 << 40)),
        ]
        for (what, bytes) in cases {
            let error = FuzzInput.readSegment(bytes)
            #expect(error?.code == .corruption, "\(what): \(String(describing: error))")
            #expect(error?.path == "/f/00000005.seg", "\(what)")
        }
        // Blocks whose compression byte or LZ4 stream is bad, under valid CRCs.
        var segment = FuzzInput.craftedSegment(data: [entry], hints: [good], entryCount: 1)
        let badCompression = FuzzInput.rawBlock(entry, compression: 7)
        segment.replaceSubrange(32..<32 + badCompression.count, with: badCompression)
        #expect(FuzzInput.readSegment(segment)?.code == .corruption, "unknown compression")
        let badLZ4 = FuzzInput.rawBlock(entry, rawCount: entry.count, compression: Format.compressionLZ4)
        segment.replaceSubrange(32..<32 + badLZ4.count, with: badLZ4)
        #expect(FuzzInput.readSegment(segment)?.code == .corruption, "LZ4 stream that does not decompress")
    }

    // [SEG-6] A footer (valid CRC) whose block-table offset is near 2^64: the position check
    // `parsed.table + tableLength` in SegmentReader.open must not overflow and trap.
    @Test func aFooterWithAHugeTableOffsetIsCorruptionNotACrash() async {
        await #expect(processExitsWith: .success) {
            let entry = Damage.entry(sequence: 4, key: Array("k".utf8), value: Array("v".utf8))
            let hint = FuzzInput.hint(key: Array("k".utf8), sequence: 4, block: 0, offset: 0, length: UInt64(entry.count))
            let bytes = FuzzInput.craftedSegment(data: [entry], hints: [hint], entryCount: 1, tableOffset: UInt64.max - 8)
            let error = FuzzInput.readSegment(bytes)
            exit(error?.code == .corruption ? 0 : 3)
        }
    }

    // [SEG-4] A hint (valid block CRC) whose offset is near 2^64: the bounds check
    // `offset + length` in SegmentReader.readHints must not overflow and trap.
    @Test func aHintWithAHugeOffsetIsCorruptionNotACrash() async {
        await #expect(processExitsWith: .success) {
            let entry = Damage.entry(sequence: 4, key: Array("k".utf8), value: Array("v".utf8))
            let hint = FuzzInput.hint(key: Array("k".utf8), sequence: 4, block: 0, offset: UInt64.max, length: UInt64(entry.count))
            let bytes = FuzzInput.craftedSegment(data: [entry], hints: [hint], entryCount: 1)
            let error = FuzzInput.readSegment(bytes)
            exit(error?.code == .corruption ? 0 : 3)
        }
    }

    // MARK: Hints across blocks ([SEG-4], read by open one block at a time)

    /// A segment whose data block holds one entry per key of `keys`, with its hints split
    /// into hint blocks as `split` says (hints per block, in order; 0 makes an empty block);
    /// `entryCount` overrides the footer's count.
    static func segment(keys: [String], split: [Int], entryCount: Int? = nil) -> [UInt8] {
        var data: [UInt8] = []
        var hints: [[UInt8]] = []
        for (index, key) in keys.enumerated() {
            let entry = Damage.entry(sequence: UInt64(index + 1), key: Array(key.utf8), value: Array("v".utf8))
            hints.append(
                FuzzInput.hint(
                    key: Array(key.utf8), sequence: UInt64(index + 1), block: 0, offset: UInt64(data.count), length: UInt64(entry.count)))
            data += entry
        }
        var blocks: [[UInt8]] = []
        var next = 0
        for count in split {
            blocks.append(hints[next..<next + count].flatMap { $0 })
            next += count
        }
        return FuzzInput.craftedSegment(data: [data], hints: blocks, entryCount: UInt64(entryCount ?? keys.count))
    }

    /// The keys of the hints `bytes` (segment 5) holds, or the typed error reading them.
    static func hintKeys(_ bytes: [UInt8]) -> Result<[String], StoreError> {
        let fs = FaultInjectingFileSystem()
        fs.setContents(bytes, of: "/f/00000005.seg")
        do throws(StoreError) {
            let reader = try SegmentReader.open(fileSystem: fs, path: "/f/00000005.seg", fileNumber: 5)
            return .success(try reader.readHints().map { String(decoding: $0.key, as: UTF8.self) })
        } catch {
            return .failure(error)
        }
    }

    @Test func hintsSplitOverSeveralBlocksAndEmptyBlocksReadInOrder() throws {
        let keys = ["a", "b", "ba", "c", "d", "e"]
        for split in [[6], [1, 5], [3, 3], [2, 0, 4], [0, 6, 0], [1, 1, 1, 1, 1, 1]] {
            #expect(try Self.hintKeys(Self.segment(keys: keys, split: split)).get() == keys, "split \(split)")
        }
    }

    @Test func aKeyRepeatedOrOutOfOrderAcrossHintBlocksIsCorruption() {
        for (keys, split) in [
            (["a", "b", "b", "c"], [2, 2]),  // the second block starts with the first block's last key
            (["a", "c", "b", "d"], [2, 2]),  // ... or a smaller one
            (["a", "c", "b", "d"], [2, 0, 2]),  // with an empty block between
            (["b", "a"], [1, 1]),
            (["a", "c", "b", "d"], [4]),  // within one block
        ] {
            guard case .failure(let error) = Self.hintKeys(Self.segment(keys: keys, split: split)) else {
                Issue.record("\(keys) in blocks \(split) was read")
                continue
            }
            #expect(error.code == .corruption && error.message.contains("ascending key order"), "\(keys) \(split): \(error)")
        }
    }

    @Test func hintsFewerOrMoreThanTheFooterCountsAreCorruption() {
        for count in [3, 5, 0] {
            guard case .failure(let error) = Self.hintKeys(Self.segment(keys: ["a", "b", "c", "d"], split: [2, 2], entryCount: count)) else {
                Issue.record("footer count \(count) for 4 hints was accepted")
                continue
            }
            #expect(error.code == .corruption && error.message.contains("footer counts \(count) entries"), "\(count): \(error)")
        }
    }
}

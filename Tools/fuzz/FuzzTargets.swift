@testable import StrataEngine

/// One driver per decoder. Each feeds the bytes to the decoder, lets it return or throw its
/// ``StoreError``, and checks with ``fuzzCheck(_:_:)`` what SPEC.md promises about what a
/// decoder hands out: errors name the file (and the offset, where the spec says so), and a
/// decoded value is consistent with the bytes it came from.
enum FuzzTargets {
    // MARK: Manifest

    /// [MAN-1]…[MAN-3] `Manifest.decode`.
    static func manifest(_ bytes: [UInt8]) {
        let path = "/fuzz/MANIFEST"
        do throws(StoreError) {
            let manifest = try Manifest.decode(bytes, path: path)
            let numbers = manifest.wals + manifest.segments.map(\.fileNumber)
            fuzzCheck(!manifest.wals.isEmpty, "[MAN-2] decoded a manifest that names no WAL")
            fuzzCheck(Set(numbers).count == numbers.count, "[MAN-2] decoded a manifest that names a file twice")
            fuzzCheck(
                numbers.allSatisfy { $0 < manifest.nextFileNumber },
                "[MAN-2] decoded a manifest naming a file number not below nextFileNumber")
            // Version 1 has no optional or reserved bytes: what decodes is what encode writes.
            if FuzzChecksums.u32(bytes, 8) == Format.version {
                fuzzCheck(manifest.encode() == bytes, "[MAN-1] decoded a manifest that does not re-encode to its bytes")
            }
        } catch {
            fuzzCheck(error.path == path && error.offset != nil, "manifest error without file and offset: \(error)")
        }
    }

    // MARK: WAL

    /// [WAL-1]…[WAL-3] [REC-3] [REC-4] [REC-7] `WALReader.checkHeader` and `WALReader.read`.
    static func wal(_ bytes: [UInt8], isNewest: Bool, repair: Bool) {
        let path = "/fuzz/00000005.wal"
        let reader = WALReader(path: path, bytes: bytes, isNewest: isNewest, repair: repair)
        do throws(StoreError) {
            _ = try reader.checkHeader()
        } catch {
            fuzzCheck(error.path == path && error.offset != nil, "WAL header error without file and offset: \(error)")
        }
        var lastSequence: UInt64 = 0
        var recordsEnd = 0
        do throws(StoreError) {
            let outcome = try reader.read { record in
                fuzzCheck(record.sequence > lastSequence, "[WAL-3] record sequence \(record.sequence) does not increase")
                fuzzCheck(record.offset >= UInt64(recordsEnd), "[WAL-2] record at \(record.offset) overlaps the one before")
                fuzzCheck(!record.entries.isEmpty, "[WAL-3] record with no entries")
                lastSequence = record.sequence
                for item in record.entries {
                    let start = Int(item.offset), end = start + Int(item.length)
                    fuzzCheck(start >= Int(record.offset) && end <= bytes.count, "[WAL-3] entry outside the file")
                    fuzzCheck(item.entry.sequence == record.sequence, "[WAL-3] entry sequence differs from its record's")
                    let again = bytes.withUnsafeBytes { raw -> LogEntry? in
                        var entryReader = ByteReader(UnsafeRawBufferPointer(rebasing: raw[start..<end]))
                        guard case .success(let entry) = LogEntry.decode(from: &entryReader), entryReader.isAtEnd
                        else { return nil }
                        return entry
                    }
                    fuzzCheck(again == item.entry, "[IDX-1] entry at \(start)+\(item.length) does not read back")
                    recordsEnd = end
                }
            }
            if bytes.count >= Format.walHeaderSize {
                fuzzCheck(outcome.validEnd <= UInt64(bytes.count), "validEnd \(outcome.validEnd) past the end")
            }
            fuzzCheck(outcome.validEnd >= UInt64(recordsEnd), "validEnd before the last record's end")
            if let torn = outcome.tornTail {
                fuzzCheck(isNewest, "[REC-3] torn tail in a WAL that is not the newest")
                fuzzCheck(torn.offset + torn.length == UInt64(bytes.count), "[REC-3] torn tail does not reach the end")
                fuzzCheck(torn.offset == outcome.validEnd, "[REC-3] torn tail does not start at validEnd")
            }
            fuzzCheck(repair || outcome.dropped.isEmpty, "[REC-7] bytes dropped without repair")
            var previousEnd: UInt64 = 0
            for range in outcome.dropped {
                fuzzCheck(range.length > 0 && range.offset >= previousEnd, "[REC-7] bad dropped range \(range)")
                fuzzCheck(range.offset + range.length <= UInt64(bytes.count), "[REC-7] dropped range past the end")
                previousEnd = range.offset + range.length
            }
        } catch {
            // The visitor above never throws, so in repair mode read must not either.
            fuzzCheck(!repair, "[REC-7] WAL read threw in repair mode: \(error)")
            fuzzCheck(
                error.code == .corruption && error.path == path && error.offset != nil,
                "[REC-4] WAL error is not corruption naming file and offset: \(error)")
        }
    }

    // MARK: Segment

    /// [SEG-1]…[SEG-8] [READ-1] [REC-7] `SegmentReader`: the salvage of any bytes, then open,
    /// every data block, the hints (with each hint's entry), and the hints rebuilt from the data.
    static func segment(_ bytes: [UInt8], numberFromHeader: Bool) {
        let number = numberFromHeader && bytes.count >= 20 ? FuzzChecksums.u32(bytes, 16) : 5
        let path = "/fuzz/" + Format.segmentFileName(number)
        let fs = FaultInjectingFileSystem()
        fs.setContents(bytes, of: path)
        segmentSalvage(bytes, fs: fs, path: path, number: number)
        let reader: SegmentReader
        do throws(StoreError) {
            reader = try SegmentReader.open(fileSystem: fs, path: path, fileNumber: number)
        } catch {
            fuzzCheck(error.path == path, "segment open error without file: \(error)")
            return
        }
        let footer = UInt64(bytes.count - Format.segmentFooterSize)
        for block in reader.dataBlocks + reader.hintBlocks {
            fuzzCheck(
                block.offset + UInt64(Format.blockHeaderSize) + UInt64(block.storedCount) <= footer,
                "[SEG-5] accepted a block at \(block.offset) that runs past the footer")
        }
        var blocks: [Int: [UInt8]] = [:]
        for index in reader.dataBlocks.indices {
            do throws(StoreError) {
                let raw = try reader.readDataBlock(index)
                fuzzCheck(raw.count == Int(reader.dataBlocks[index].rawCount), "[SEG-3] block \(index) raw length differs")
                blocks[index] = raw
            } catch {
                fuzzCheck(error.path == path && error.offset != nil, "data block error without file and offset: \(error)")
            }
        }
        do throws(StoreError) {
            let hints = try reader.readHints()
            fuzzCheck(UInt64(hints.count) == reader.entryCount, "[SEG-6] hint count differs from the footer's")
            for (previous, next) in zip(hints, hints.dropFirst()) {
                fuzzCheck(previous.key.lexicographicallyPrecedes(next.key), "[SEG-4] hints out of order")
            }
            for hint in hints {
                fuzzCheck(hint.location.fileNumber == number, "hint names another file")
                let position = Int(hint.location.position)
                if let block = blocks[position] {
                    _ = try? reader.entry(in: block, at: hint.location)
                }
                _ = try? reader.readEntry(at: hint.location)
            }
        } catch {
            fuzzCheck(error.path == path && error.offset != nil, "hint error without file and offset: \(error)")
        }
        var dropped: [DroppedRange] = []
        let salvaged = reader.salvageHints(dropped: &dropped)
        for (previous, next) in zip(salvaged, salvaged.dropFirst()) {
            fuzzCheck(previous.key.lexicographicallyPrecedes(next.key), "[REC-7] salvaged hints not strictly ascending")
        }
        for hint in salvaged {
            // Salvage decoded this entry from a block that passed its checks: it reads back.
            do throws(StoreError) {
                let entry = try reader.readEntry(at: hint.location)
                fuzzCheck(
                    entry.key == hint.key && entry.sequence == hint.sequence && entry.isDelete == hint.isDelete,
                    "[REC-7] salvaged hint does not match its entry")
            } catch {
                fuzzCheck(false, "[REC-7] salvaged hint does not read back: \(error)")
            }
        }
        for range in dropped {
            fuzzCheck(range.offset + range.length <= footer, "[REC-7] dropped range past the blocks")
        }
    }

    /// [SEG-8] [REC-7] `SegmentReader.salvage` of any bytes: it throws only for a newer format,
    /// its dropped ranges lie in the file (or in the bytes missing up to the recorded size) and
    /// do not overlap, the blocks it keeps lie in the file, and every hint it rebuilt reads
    /// back as the entry it names, in strictly ascending key order.
    static func segmentSalvage(_ bytes: [UInt8], fs: FaultInjectingFileSystem, path: String, number: UInt32) {
        // The size the manifest would record: sometimes more than the file holds (a cut).
        let recorded = UInt64(bytes.count) + UInt64(bytes.first ?? 0) % 3 * 40
        let salvaged: SegmentReader.Salvaged
        do throws(StoreError) {
            salvaged = try SegmentReader.salvage(fileSystem: fs, path: path, fileNumber: number, recordedSize: recorded)
        } catch {
            fuzzCheck(
                error.code == .unsupportedVersion && error.path == path,
                "[SEG-8] salvage threw for damage: \(error)")
            return
        }
        let reader = salvaged.reader
        var previousEnd: UInt64 = 0
        for range in salvaged.dropped {
            fuzzCheck(range.path == path && range.length > 0, "[SEG-8] bad dropped range \(range)")
            fuzzCheck(range.offset >= previousEnd, "[SEG-8] dropped ranges overlap: \(salvaged.dropped)")
            fuzzCheck(range.offset + range.length <= max(recorded, UInt64(bytes.count)), "[SEG-8] dropped range past the end: \(range)")
            previousEnd = range.offset + range.length
        }
        for block in reader.dataBlocks + reader.hintBlocks {
            fuzzCheck(
                block.offset >= UInt64(min(bytes.count, Format.segmentHeaderSize))
                    && block.offset + UInt64(Format.blockHeaderSize) + UInt64(block.storedCount) <= UInt64(bytes.count),
                "[SEG-8] kept a block at \(block.offset) outside the file")
        }
        guard let hints = reader.rebuiltHints else { return }
        for (previous, next) in zip(hints, hints.dropFirst()) {
            fuzzCheck(previous.key.lexicographicallyPrecedes(next.key), "[SEG-8] rebuilt hints not strictly ascending")
        }
        for hint in hints {
            do throws(StoreError) {
                let entry = try reader.readEntry(at: hint.location)
                fuzzCheck(
                    entry.key == hint.key && entry.sequence == hint.sequence && entry.isDelete == hint.isDelete,
                    "[SEG-8] rebuilt hint does not match its entry")
            } catch {
                fuzzCheck(false, "[SEG-8] rebuilt hint does not read back: \(error)")
            }
        }
    }

    // MARK: Entries

    /// [ENT-1] `LogEntry.decode` over back-to-back entries, and `decodeExactly` on each.
    static func entries(_ bytes: [UInt8]) {
        let path = "/fuzz/entries"
        bytes.withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            while !reader.isAtEnd {
                let start = reader.position
                switch LogEntry.decode(from: &reader) {
                case .success(let entry):
                    let end = reader.position
                    let slice = UnsafeRawBufferPointer(rebasing: raw[start..<end])
                    fuzzCheck(
                        (try? LogEntry.decodeExactly(slice, path: path, offset: UInt64(start))) == entry,
                        "[ENT-1] decodeExactly disagrees with decode at \(start)")
                    // What decodes re-encodes to an entry that decodes the same (varints may
                    // be longer than needed on disk, so the bytes themselves may differ).
                    var writer = ByteWriter()
                    let length = entry.key.withUnsafeBytes { key in
                        entry.value.withUnsafeBytes { value in
                            LogEntry.encode(
                                isDelete: entry.isDelete, sequence: entry.sequence, key: key, value: value, into: &writer)
                        }
                    }
                    fuzzCheck(length <= end - start, "[ENT-1] canonical encoding is longer than the decoded one")
                    let again = writer.bytes.withUnsafeBytes { encoded -> LogEntry? in
                        var again = ByteReader(encoded)
                        guard case .success(let decoded) = LogEntry.decode(from: &again), again.isAtEnd else { return nil }
                        return decoded
                    }
                    fuzzCheck(again == entry, "[ENT-1] entry does not survive a round trip")
                case .failure:
                    do throws(StoreError) {
                        _ = try LogEntry.decodeExactly(
                            UnsafeRawBufferPointer(rebasing: raw[start...]), path: path, offset: UInt64(start))
                        fuzzCheck(false, "[ENT-1] decodeExactly accepted what decode rejected at \(start)")
                    } catch {
                        fuzzCheck(
                            error.code == .corruption && error.path == path && error.offset == UInt64(start),
                            "[ENT-1] decodeExactly error does not name file and offset: \(error)")
                    }
                    return
                }
            }
        }
    }

    // MARK: Engine

    /// The key the commit-and-reopen check writes.
    static let probeKey: [UInt8] = Array("strata-fuzz-probe".utf8)
    /// The value the commit-and-reopen check writes.
    static let probeValue: [UInt8] = Array("probe value".utf8)

    /// Options for a fuzzed open: the in-memory file system, everything inline and
    /// deterministic (no background flush, compaction or sync timer), invariant checks on.
    static func options(_ fs: FaultInjectingFileSystem, repair: Bool, readOnly: Bool) -> EngineOptions {
        var options = EngineOptions()
        options.fileSystem = fs
        options.durability = .full
        options.walRolloverBytes = 4096
        options.blockSize = 512
        options.backgroundFlush = false
        options.checkInvariants = true
        options.compaction.automatic = false
        options.repair = repair
        options.readOnly = readOnly
        return options
    }

    /// [REC-1]…[REC-7] [READ-1] `Engine.open` of the store in `image`, then a full scan and a
    /// point read of every key; optionally one commit, a close and a reopen, after which the
    /// store must hold what it held plus the commit.
    static func engine(_ image: StoreImage, repair: Bool, readOnly: Bool, commitAndReopen: Bool) {
        let fs = image.fileSystem()
        let directory = StoreImage.directory
        let engine: Engine
        do throws(StoreError) {
            engine = try Engine.open(at: directory, options: options(fs, repair: repair, readOnly: readOnly))
        } catch {
            // Refusing a damaged store is what open is for, but never as the caller's fault.
            KnownIssues.note("open failed: \(error) (raised at \(error.raisedAt))")
            fuzzCheck(
                error.code != .invalidArgument || KnownIssues.repairTrustsHints(repair: repair),
                "open blamed its (valid) options for a damaged store: \(error)")
            return
        }
        let before = readAll(engine)
        // [REC-7] [READ-1] What repair keeps is readable: it drops what fails its checks.
        fuzzCheck(
            !repair || before != nil || KnownIssues.repairTrustsHints(repair: repair),
            "[REC-7] store opened with repair, but a full scan fails")
        guard commitAndReopen, !readOnly, !KnownIssues.stepsAround(engine) else {
            close(engine)
            return
        }
        let committed: Bool
        do throws(StoreError) {
            _ = try engine.put(probeKey, probeValue)
            committed = true
        } catch {
            KnownIssues.note("commit failed: \(error)")
            committed = false
        }
        close(engine)
        guard committed else { return }
        // [WAL-4] [REC-6] An acknowledged commit survives a close and a reopen, and a store that
        // opened once reopens: nothing the first open and the commit did may break it.
        let reopened: Engine
        do throws(StoreError) {
            reopened = try Engine.open(at: directory, options: options(fs, repair: false, readOnly: false))
        } catch {
            fuzzCheck(false, "[REC-6] store that opened and took a commit does not reopen: \(error)")
            return
        }
        defer { close(reopened) }
        do throws(StoreError) {
            let value = try reopened.get(probeKey)
            fuzzCheck(value == probeValue, "[WAL-4] acknowledged commit lost across a reopen")
        } catch {
            fuzzCheck(false, "[READ-1] acknowledged commit unreadable after a reopen: \(error)")
        }
        if var expected = before {
            expected[probeKey] = probeValue
            let after = readAll(reopened)
            fuzzCheck(after == nil || after == expected, "[REC-6] reopened store holds different data")
        }
    }

    /// Every key and value, read by a scan and checked against point reads; `nil` when a read
    /// fails (damage found lazily, after open, is allowed to fail a read).
    private static func readAll(_ engine: Engine) -> [[UInt8]: [UInt8]]? {
        do throws(StoreError) {
            let snapshot = try engine.snapshot()
            var all: [[UInt8]: [UInt8]] = [:]
            for (key, value) in try snapshot.scan() {
                fuzzCheck(all.updateValue(value, forKey: key) == nil, "[READ-2] scan returned a key twice")
                let read = try engine.get(key)
                fuzzCheck(read == value, "[READ-1] point read disagrees with the scan")
            }
            fuzzCheck(all.count == snapshot.count, "[READ-2] scan and snapshot count disagree")
            return all
        } catch {
            KnownIssues.note("read failed: \(error)")
            return nil
        }
    }

    /// Closes `engine`; a failure to close (a failed final sync) is not a decoder bug.
    private static func close(_ engine: Engine) {
        do throws(StoreError) { try engine.close() } catch {}
    }
}

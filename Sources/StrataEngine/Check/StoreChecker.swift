/// One problem a check found.
public struct CheckProblem: Sendable, Equatable, CustomStringConvertible {
    /// How bad a problem is.
    public enum Severity: String, Sendable, Equatable {
        /// Data is damaged or inconsistent; open fails or loses it.
        case error
        /// Harmless leftovers that the next open cleans up (an orphan file, a torn WAL tail).
        case warning
    }

    /// How bad it is.
    public var severity: Severity
    /// The file concerned.
    public var path: String
    /// Where in the file, if known.
    public var offset: UInt64?
    /// The key concerned, if any.
    public var key: [UInt8]?
    /// What is wrong.
    public var message: String

    public var description: String {
        var text = "\(severity): \(path)"
        if let offset { text += " at offset \(offset)" }
        if let key { text += " key 0x" + key.map { String($0, radix: 16).leftPadded(2) }.joined() }
        return text + ": " + message
    }
}

/// What ``StoreChecker/check(at:fileSystem:progress:)`` found.
public struct CheckReport: Sendable, Equatable {
    /// Every problem, in the order found.
    public var problems: [CheckProblem] = []
    /// WAL records read and verified.
    public var walRecords = 0
    /// Segment blocks (data and hint) read and verified.
    public var blocks = 0
    /// Entries decoded from WALs and data blocks.
    public var entries = 0
    /// Keys with a value after applying every entry.
    public var liveKeys = 0
    /// Bytes read and checked.
    public var bytesChecked: UInt64 = 0
    /// Sequence numbers of acknowledged (synced) transactions the store no longer holds: the
    /// durable bound (`SYNC`) names them, but the WAL's valid records end before them (SPEC.md
    /// [DUR-3]), or a missing WAL held them (the sequences between the records around it,
    /// [REC-7]). Each range is also an error in ``problems``.
    public var lostSequences: [ClosedRange<UInt64>] = []

    /// Whether no error was found (warnings allowed).
    public var isClean: Bool { !problems.contains { $0.severity == .error } }
}

/// Progress of a check, for progress bars: bytes checked so far of the total.
public struct CheckProgress: Sendable {
    /// Bytes checked so far.
    public var bytesDone: UInt64
    /// Bytes the check will read.
    public var bytesTotal: UInt64
    /// The file being checked.
    public var path: String
}

/// Checks a store offline without changing it: the engine-level core of `strata fsck`.
///
/// It verifies every checksum of every WAL record and segment block, the manifest against the
/// files present, each segment's hints against its data blocks, and that the index open would
/// build from hints matches a full scan of every entry. It reports every problem it finds
/// instead of stopping at the first, sharing the readers that recovery uses.
///
/// For example:
///
/// ```swift
/// let report = try StoreChecker.check(at: "/var/lib/app/store")
/// for problem in report.problems { print(problem) }
/// ```
public enum StoreChecker {
    /// Checks the store at `path`, creating and changing no file. Takes a reader's (shared) lock
    /// on the store's `LOCK` for the duration, as a read-only open does ([DIR-5]), so it never
    /// checks a store another process is writing; on a store whose `LOCK` is missing or cannot be
    /// opened for reading (read-only media) it checks without one.
    ///
    /// - Throws: ``StoreError/Code/locked`` when the store is open for writing elsewhere,
    ///   ``StoreError/Code/unsupportedVersion`` when a newer Strata wrote it,
    ///   ``StoreError/Code/notFound`` / ``StoreError/Code/notAStore`` when `path` is not a store,
    ///   and I/O errors. Damage is reported in the returned report, not thrown.
    public static func check(
        at path: String, fileSystem: any FileSystem = PosixFileSystem(),
        progress: (@Sendable (CheckProgress) -> Void)? = nil
    ) throws(StoreError) -> CheckReport {
        guard case .directory? = try fileSystem.kind(of: path) else {
            throw StoreError(.notFound, "no store directory at this path", path: path)
        }
        let names = try fileSystem.contentsOfDirectory(path)
        // [REC-7] Without a MANIFEST, Strata's numbered WAL and segment files are a store that
        // lost it (repair rebuilds it from them); anything else is not a store.
        guard names.contains(Format.manifestFileName) || names.contains(where: { Format.parseNumberedFileName($0) != nil }) else {
            throw StoreError(.notAStore, "directory has no MANIFEST; it is not a Strata store", path: path)
        }
        // [DIR-4] Only what an interrupted creation leaves (a lock file, a temporary manifest,
        // WALs without a record): no store yet, which an open creates, not one that lost its
        // manifest.
        if !names.contains(Format.manifestFileName),
            (try? Engine.checkOnlyCreationLeftovers(path, names: names, fileSystem: fileSystem)) != nil
        {
            throw StoreError(
                .notAStore,
                "directory holds only the leftovers of an interrupted store creation (no MANIFEST, no record); opening it creates a new store",
                path: path)
        }
        let lock = try fileSystem.sharedLock(path + "/" + Format.lockFileName)
        defer { lock?.unlock() }
        var checker = Run(path: path, fileSystem: fileSystem, progress: progress)
        // [DUR-3] The durable bound before the manifest, as open reads it.
        do throws(StoreError) {
            checker.bound = try SyncRecord.load(fileSystem: fileSystem, directory: path)
        } catch where error.code == .corruption {
            checker.problem(.error, error.path ?? path, error.offset, error.message + " (the durable bound is lost; repair rewrites it)")
        }
        try checker.run(names: names)
        return checker.report
    }

    /// The state of one check.
    struct Run {
        let path: String
        let fileSystem: any FileSystem
        let progress: (@Sendable (CheckProgress) -> Void)?
        var report = CheckReport()
        var total: UInt64 = 0
        /// Per key, the newest entry seen by the full scan and the newest seen through hints.
        var scanned: [[UInt8]: (sequence: UInt64, isDelete: Bool)] = [:]
        var hinted: [[UInt8]: (sequence: UInt64, isDelete: Bool)] = [:]
        /// The store's durable bound ([DUR-1]), if it has one.
        var bound: SyncRecord?
        /// The largest sequence the segments' footers (or their salvage) account for ([SEG-3]).
        var segmentsMaxSequence: UInt64 = 0
        /// Per WAL: where its valid records end, its size, and its torn tail.
        var walEnds: [UInt32: (validEnd: UInt64, size: UInt64, torn: (offset: UInt64, length: UInt64)?)] = [:]
        /// The WALs whose tail after the last record is all zeros: the space a writer under
        /// full durability writes ahead of its records ([WAL-6]), not a torn write.
        var zeroTails: Set<UInt32> = []

        mutating func problem(_ severity: CheckProblem.Severity, _ path: String, _ offset: UInt64?, _ message: String, key: [UInt8]? = nil) {
            report.problems.append(CheckProblem(severity: severity, path: path, offset: offset, key: key, message: message))
        }

        mutating func advance(_ bytes: UInt64, _ file: String) {
            report.bytesChecked += bytes
            progress?(CheckProgress(bytesDone: report.bytesChecked, bytesTotal: total, path: file))
        }

        mutating func run(names: [String]) throws(StoreError) {
            let manifestPath = path + "/" + Format.manifestFileName
            var manifest: Manifest
            do throws(StoreError) {
                if let loaded = try Manifest.load(fileSystem: fileSystem, directory: path) {
                    manifest = loaded
                } else {
                    manifest = try implied(by: names)
                    problem(
                        .error, manifestPath, nil,
                        "MANIFEST is missing; repair rebuilds it from the \(manifest.wals.count) WAL and \(manifest.segments.count) segment files present, which are checked below as it will name them")
                }
            } catch where error.code == .corruption || error.code == .notAStore {
                // A newer version (its checksum holds: [MAN-3]) is not damage: it is thrown.
                problem(.error, error.path ?? manifestPath, error.offset, error.message)
                // [REC-7] Repair rebuilds it from the files present: check those.
                manifest = try implied(by: names)
            }
            // The manifest against the files present.
            let live = Set(manifest.wals + manifest.segments.map(\.fileNumber))
            var sizes: [String: UInt64] = [:]
            for name in names {
                let filePath = path + "/" + name
                if case .file(let size)? = try fileSystem.kind(of: filePath) { sizes[filePath] = size }
                if let parsed = Format.parseNumberedFileName(name), !live.contains(parsed.number) {
                    problem(.warning, filePath, nil, "file is not named by the manifest (an orphan; the next open removes it)")
                }
                if Format.isKeptCopy(name) {
                    problem(
                        .warning, filePath, nil,
                        name.contains(".torn-")
                            ? "bytes an open cut off a WAL as a torn tail, kept for inspection (not part of the store; remove it when done)"
                            : "a WAL as a repair found it, before it cut lost acknowledged data (not part of the store; remove it when done)")
                }
            }
            for number in manifest.wals { total += sizes[path + "/" + Format.walFileName(number)] ?? 0 }
            for segment in manifest.segments { total += sizes[path + "/" + Format.segmentFileName(segment.fileNumber)] ?? 0 }

            for segment in manifest.segments {
                let segmentPath = path + "/" + Format.segmentFileName(segment.fileNumber)
                guard let size = sizes[segmentPath] else {
                    problem(.error, segmentPath, nil, "segment named by the manifest is missing")
                    continue
                }
                if size != segment.size {
                    problem(.error, segmentPath, nil, "segment is \(size) bytes; the manifest recorded \(segment.size)")
                }
                try checkSegment(segmentPath, number: segment.fileNumber, recordedSize: segment.size)
            }
            // A missing WAL held the commits between the newest sequence before it and the first
            // record of the next WAL that has one ([REC-7]); the durable bound may say more.
            var missing: [(number: UInt32, after: UInt64)] = []
            var missingNumbers: Set<UInt32> = []
            func reportMissing(before next: UInt64?) {
                for wal in missing {
                    var message = "WAL named by the manifest is missing"
                    if let next, next > wal.after + 1 {
                        let lost = (wal.after + 1)...(next - 1)
                        message += "; it held the acknowledged commits \(lost.lowerBound)…\(lost.upperBound) (between the records around it)"
                        report.lostSequences.append(lost)
                    } else if next != nil {
                        message += "; it held no commit (the records around it are consecutive)"
                    } else {
                        message += "; the commits it held cannot be known beyond what SYNC says"
                    }
                    problem(.error, path + "/" + Format.walFileName(wal.number), nil, message)
                }
                missing.removeAll()
            }
            for (position, number) in manifest.wals.enumerated() {
                let walPath = path + "/" + Format.walFileName(number)
                guard sizes[walPath] != nil else {
                    let newest = max(manifest.lastSequence, scanned.values.map(\.sequence).max() ?? 0)
                    missing.append((number, newest))
                    missingNumbers.insert(number)
                    continue
                }
                let first = try checkWAL(walPath, number: number, isNewest: position == manifest.wals.count - 1)
                if let first { reportMissing(before: first) }
            }
            reportMissing(before: nil)
            // [DUR-3] Acknowledged transactions lost, or a torn tail that was never acknowledged.
            let newestSequence = max(
                manifest.lastSequence, segmentsMaxSequence, scanned.values.map(\.sequence).max() ?? 0,
                hinted.values.map(\.sequence).max() ?? 0)
            var lossAt: UInt32? = nil
            if let bound, newestSequence < bound.sequence, let active = manifest.wals.last {
                let lost = (newestSequence + 1)...bound.sequence
                let number = walEnds[bound.walNumber] != nil || missingNumbers.contains(bound.walNumber) ? bound.walNumber : active
                let walName = Format.walFileName(number)
                let end = walEnds[number] ?? (UInt64(Format.walHeaderSize), UInt64(Format.walHeaderSize), nil)
                let isMissing = missingNumbers.contains(number)
                let tail = isMissing
                    ? "is missing"
                    : end.torn.map { "ends in \($0.length) damaged or cut bytes at offset \($0.offset)" }
                        ?? "ends at offset \(end.validEnd) after its last valid record"
                let synced = bound.walNumber == number && !isMissing ? " (\(bound.walEnd) bytes of it were synced, it is \(end.size) bytes now)" : ""
                problem(
                    .error, path + "/" + walName, isMissing ? nil : end.validEnd,
                    "acknowledged transactions \(lost.lowerBound)…\(lost.upperBound) are lost: SYNC records every transaction up to sequence \(bound.sequence) as synced, but the store's records end at sequence \(newestSequence) and the WAL \(tail)\(synced); \(isMissing ? "it was deleted" : "the WAL was truncated or damaged") after they were acknowledged")
                report.lostSequences.append(lost)
                lossAt = number
            }
            for number in manifest.wals where number != lossAt && !zeroTails.contains(number) {
                if let torn = walEnds[number]?.torn {
                    problem(.warning, path + "/" + Format.walFileName(number), torn.offset, "torn tail of \(torn.length) bytes (an unacknowledged write cut by a crash; the next open keeps its bytes beside the WAL and truncates it)")
                }
            }
            // The index open would build (hints, then WAL) against a full scan of every entry.
            for (key, newest) in scanned where hinted[key]?.sequence != newest.sequence || hinted[key]?.isDelete != newest.isDelete {
                problem(.error, path, nil, "hints disagree with the data: the newest entry has sequence \(newest.sequence), the hints say \(hinted[key].map { "\($0.sequence)" } ?? "nothing")", key: key)
            }
            for key in hinted.keys where scanned[key] == nil {
                problem(.error, path, nil, "hints name a key that no data block holds", key: key)
            }
            report.liveKeys = scanned.values.filter { !$0.isDelete }.count
        }

        static func see(_ key: [UInt8], _ sequence: UInt64, _ isDelete: Bool, into table: inout [[UInt8]: (sequence: UInt64, isDelete: Bool)]) {
            if let current = table[key], current.sequence >= sequence { return }
            table[key] = (sequence, isDelete)
        }

        mutating func checkSegment(_ segmentPath: String, number: UInt32, recordedSize: UInt64) throws(StoreError) {
            let reader: SegmentReader
            do throws(StoreError) {
                reader = try SegmentReader.open(fileSystem: fileSystem, path: segmentPath, fileNumber: number)
            } catch where error.code == .corruption {
                // [SEG-8] What a repair will drop, each range an error; what it keeps is checked below.
                guard
                    let salvaged = try? SegmentReader.salvage(
                        fileSystem: fileSystem, path: segmentPath, fileNumber: number, recordedSize: recordedSize),
                    !salvaged.dropped.isEmpty
                else {
                    problem(.error, segmentPath, error.offset, error.message)
                    return
                }
                for range in salvaged.dropped {
                    var message = range.reason + " (\(range.length) bytes"
                    if let sequences = range.sequences {
                        message += sequences.count == 1 ? ", sequence \(sequences.lowerBound)" : ", sequences \(sequences.lowerBound)…\(sequences.upperBound)"
                    }
                    message += range.heldEntries ? "; repair loses the entries they held)" : "; they held no entry: repair loses nothing with them)"
                    problem(.error, segmentPath, range.offset, message)
                }
                reader = salvaged.reader
            } catch where error.code == .unsupportedVersion {
                problem(.error, segmentPath, error.offset, error.message)
                return
            }
            segmentsMaxSequence = max(segmentsMaxSequence, reader.maxSequence)
            // Every data block: checksum, decompression, entries.
            var entriesAt: [ValueLocation: LogEntry] = [:]
            for (index, block) in reader.dataBlocks.enumerated() {
                defer { advance(UInt64(Format.blockHeaderSize) + UInt64(block.storedCount), segmentPath) }
                report.blocks += 1
                let raw: [UInt8]
                do throws(StoreError) {
                    raw = try reader.readBlock(block)
                } catch {
                    problem(.error, segmentPath, error.offset, error.message)
                    continue
                }
                var bad = false
                raw.withUnsafeBytes { buffer in
                    var bytes = ByteReader(buffer)
                    while !bytes.isAtEnd {
                        let start = bytes.position
                        guard case .success(let entry) = LogEntry.decode(from: &bytes) else {
                            bad = true
                            return
                        }
                        let location = ValueLocation(
                            fileNumber: number, position: UInt32(index), offset: UInt32(start), length: UInt32(bytes.position - start))
                        entriesAt[location] = entry
                    }
                }
                if bad { problem(.error, segmentPath, block.offset, "an entry in this data block does not decode") }
            }
            report.entries += entriesAt.count
            for entry in entriesAt.values { Self.see(entry.key, entry.sequence, entry.isDelete, into: &scanned) }
            // Hints against the entries they describe.
            report.blocks += reader.hintBlocks.count
            for block in reader.hintBlocks { advance(UInt64(Format.blockHeaderSize) + UInt64(block.storedCount), segmentPath) }
            do throws(StoreError) {
                let hints: [SegmentReader.Hint]
                if let rebuilt = reader.rebuiltHints { hints = rebuilt } else { hints = try reader.readHints() }
                for hint in hints {
                    Self.see(hint.key, hint.sequence, hint.isDelete, into: &hinted)
                    guard let entry = entriesAt[hint.location] else {
                        problem(.error, segmentPath, reader.dataBlocks[Int(hint.location.position)].offset,
                                "hint points at no entry (block \(hint.location.position), offset \(hint.location.offset))", key: hint.key)
                        continue
                    }
                    if entry.key != hint.key || entry.sequence != hint.sequence || entry.isDelete != hint.isDelete {
                        problem(.error, segmentPath, reader.dataBlocks[Int(hint.location.position)].offset,
                                "hint disagrees with the entry it points at", key: hint.key)
                    }
                }
                if hints.count != entriesAt.count {
                    problem(.error, segmentPath, nil, "\(hints.count) hints for \(entriesAt.count) entries")
                }
            } catch {
                problem(.error, segmentPath, error.offset, "hints: \(error.message)")
                // Recovery cannot use this segment; count its entries as what open would see
                // only after repair.
            }
        }

        /// [REC-7] The manifest a repair rebuilds from the numbered files `names`: every WAL
        /// (oldest first, the last one active) and every segment present.
        func implied(by names: [String]) throws(StoreError) -> Manifest {
            let numbered = names.compactMap { Format.parseNumberedFileName($0) }.sorted { $0.number < $1.number }
            var manifest = Manifest(
                nextFileNumber: (numbered.last?.number ?? 0) &+ 1, lastSequence: 0,
                wals: numbered.filter { $0.ext == Format.walExtension }.map(\.number), segments: [])
            for item in numbered where item.ext == Format.segmentExtension {
                var size: UInt64 = 0
                if case .file(let bytes)? = try fileSystem.kind(of: path + "/" + Format.segmentFileName(item.number)) { size = bytes }
                manifest.segments.append(.init(fileNumber: item.number, size: size))
            }
            return manifest
        }

        /// Checks one WAL and returns the sequence of its first valid record, if it has one.
        mutating func checkWAL(_ walPath: String, number: UInt32, isNewest: Bool) throws(StoreError) -> UInt64? {
            let handle = try fileSystem.open(walPath, mode: .readOnly)
            defer { handle.close() }
            let bytes = try handle.read(exactly: Int(try handle.size()), at: 0)
            let reader = WALReader(path: walPath, bytes: bytes, isNewest: isNewest, repair: true)
            do throws(StoreError) {
                let recorded = try reader.checkHeader()
                if recorded != number { problem(.error, walPath, 16, "WAL header names file \(recorded), expected \(number)") }
            } catch {
                problem(.error, walPath, error.offset, error.message)
            }
            var records = 0, entries = 0
            var seen: [([UInt8], UInt64, Bool)] = []
            let outcome = try reader.read { record in
                records += 1
                for item in record.entries {
                    entries += 1
                    seen.append((item.entry.key, item.entry.sequence, item.entry.isDelete))
                }
            }
            for (key, sequence, isDelete) in seen {
                Self.see(key, sequence, isDelete, into: &scanned)
                Self.see(key, sequence, isDelete, into: &hinted)  // open replays the WAL itself
            }
            report.walRecords += records
            report.entries += entries
            for dropped in outcome.dropped { problem(.error, dropped.path, dropped.offset, "WAL record damaged: \(dropped.reason)") }
            walEnds[number] = (outcome.validEnd, UInt64(bytes.count), outcome.tornTail)
            if let torn = outcome.tornTail, bytes[Int(torn.offset)...].allSatisfy({ $0 == 0 }) { zeroTails.insert(number) }
            advance(UInt64(bytes.count), walPath)
            return seen.first?.1
        }
    }
}

extension String {
    /// The string padded on the left with zeros to `width` characters.
    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

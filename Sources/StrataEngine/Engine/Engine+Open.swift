import Logging
import Dispatch
import Glibc

/// Opening a store: location checks, the lock, the manifest, the index from segment hints, and
/// WAL replay (SPEC.md [REC-1]…[REC-7]).
extension Engine {
    /// Opens the store at `path`, creating it if the path is missing, an empty directory, or a
    /// zero-length file.
    ///
    /// Open costs time in proportion to the number of keys (read from segment hints, never from
    /// data blocks) plus the WAL not yet flushed.
    ///
    /// A read-write open takes the store's `LOCK` exclusively (creating it); a read-only open
    /// (``EngineOptions/readOnly``) creates and changes no file: it takes a shared lock on an
    /// existing `LOCK` it can open for reading, and otherwise reads without one ([DIR-5]).
    ///
    /// - Throws: ``StoreError/Code/locked`` if another engine holds the store (for writing, when
    ///   this open is read-only); ``StoreError/Code/notAStore`` for a path that holds something
    ///   else; ``StoreError/Code/unsupportedVersion`` for a newer format;
    ///   ``StoreError/Code/corruption`` naming file and offset for damage recovery may not skip
    ///   (unless `options.repair`), with ``StoreError/lostSequences`` when the durable bound
    ///   (`SYNC`) names acknowledged transactions the WAL no longer holds ([DUR-3]); the open
    ///   then writes nothing; ``StoreError/Code/io`` with `EROFS` (or `EACCES`) naming
    ///   `LOCK` when a read-write open finds the store on a read-only file system or directory.
    public static func open(at path: String, options: EngineOptions = EngineOptions()) throws(StoreError) -> Engine {
        let fs = options.fileSystem
        let path = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        try prepareLocation(path, fileSystem: fs, readOnly: options.readOnly)
        try refuseForeignDirectory(path, options: options)
        let lockPath = path + "/" + Format.lockFileName
        let start = ContinuousClock.now
        guard options.readOnly else {
            let lock = try writerLock(lockPath, fileSystem: fs)
            do throws(StoreError) {
                let engine = try recover(path: path, options: options, lock: lock)
                try engine.finishOpening()
                engine.metrics.open.recordInterval(since: start)
                return engine
            } catch {
                lock.unlock()
                throw error
            }
        }
        // [DIR-5] A reader shares the lock with other readers, or reads without one.
        guard let shared = try fs.sharedLock(lockPath) else {
            let engine = try recoverUnlocked(path: path, options: options)
            engine.metrics.open.recordInterval(since: start)
            return engine
        }
        do throws(StoreError) {
            let engine = try recover(path: path, options: options, lock: shared)
            try engine.finishOpening()
            engine.metrics.open.recordInterval(since: start)
            return engine
        } catch {
            shared.unlock()
            throw error
        }
    }

    /// [DIR-5] A read-only open without a lock: nothing keeps a writer from starting meanwhile
    /// and flushing or compacting away a file the manifest this open read still names. When a
    /// step of recovery fails and `MANIFEST` has changed since it was read, recovery starts over
    /// from the new manifest (at most three attempts). Once open, the engine holds every WAL's
    /// bytes in memory and every segment's handle, so later deletions cannot take them away.
    static func recoverUnlocked(path: String, options: EngineOptions) throws(StoreError) -> Engine {
        let manifestPath = path + "/" + Format.manifestFileName
        var attempt = 1
        while true {
            let before = try? readWholeFile(manifestPath, fileSystem: options.fileSystem)
            do throws(StoreError) {
                let engine = try recover(path: path, options: options, lock: NoFileLock())
                try engine.finishOpening()
                return engine
            } catch {
                let after = try? readWholeFile(manifestPath, fileSystem: options.fileSystem)
                guard attempt < 3, before != after else { throw error }
                attempt += 1
            }
        }
    }

    /// Every byte of the file at `path`.
    static func readWholeFile(_ path: String, fileSystem fs: any FileSystem) throws(StoreError) -> [UInt8] {
        let handle = try fs.open(path, mode: .readOnly)
        defer { handle.close() }
        return try handle.read(exactly: Int(try handle.size()), at: 0)
    }

    private static func recover(path: String, options: EngineOptions, lock: any FileLock) throws(StoreError) -> Engine {
        let fs = options.fileSystem
        var report = RepairReport()
        let blockCache = BlockCache(capacityBytes: options.blockCacheBytes)
        // [DUR-3] The durable bound first: every transaction it names was on stable storage
        // before this open began, so the manifest read next (even one a concurrent writer
        // installs later, for a reader without a lock) still holds it, in a WAL or a segment.
        let syncPath = path + "/" + Format.syncFileName
        var bound: SyncRecord? = nil
        /// The slot of `SYNC` holding `bound` ([DUR-1]); the writer writes the other one next.
        var boundSlot = 0
        /// Whether `SYNC` must be rewritten at this open: missing, empty, damaged or lowered by repair.
        var rewriteBound = false
        do throws(StoreError) {
            let loaded = try SyncRecord.loadFile(fileSystem: fs, directory: path)
            bound = loaded?.record
            boundSlot = loaded?.slot ?? 0
            rewriteBound = bound == nil
        } catch let error where options.repair && error.code == .corruption {
            report.dropped.append(
                DroppedRange(
                    path: syncPath, offset: 0, length: UInt64(Format.syncFileSize),
                    reason: "durable bound unreadable (\(error.message)); rewritten from the records recovered",
                    heldEntries: false))
            rewriteBound = true
        }
        let names = try fs.contentsOfDirectory(path)
        let numbered = names.compactMap { Format.parseNumberedFileName($0) }

        var manifest: Manifest
        do throws(StoreError) {
            if let loaded = try Manifest.load(fileSystem: fs, directory: path) {
                manifest = loaded
            } else if options.repair && !numbered.isEmpty {
                manifest = try rebuiltManifest(path: path, numbered: numbered, options: options, report: &report)
                report.rebuiltManifest = true
            } else {
                manifest = try newStoreManifest(path: path, names: names, numbered: numbered, options: options)
            }
        } catch let error where options.repair && (error.code == .corruption || error.code == .notAStore) && !numbered.isEmpty {
            // [REC-7] A damaged MANIFEST in a directory of Strata files is rebuilt from them.
            manifest = try rebuiltManifest(path: path, numbered: numbered, options: options, report: &report)
            report.rebuiltManifest = true
        }

        // Segments: the index comes from their hints ([REC-5]).
        var files: [UInt32: LiveFile] = [:]
        var usage: [UInt32: FileUsage] = [:]
        // Hint cursors: read block by block during the merge; repair's salvaged hints are read
        // whole first (a segment that cannot be salvaged is dropped here).
        var segmentReaders: [SegmentReader] = []
        var salvagedCursors: [PackedHintCursor] = []
        var lastSequence = manifest.lastSequence
        var keptSegments: [Manifest.Segment] = []
        var segmentMinSequence: [UInt32: UInt64] = [:]
        for segment in manifest.segments {
            let segmentPath = path + "/" + Format.segmentFileName(segment.fileNumber)
            do throws(StoreError) {
                let reader: SegmentReader
                if options.repair {
                    reader = try salvageSegment(
                        segment, path: segmentPath, fileSystem: fs, blockCache: blockCache, report: &report)
                    salvagedCursors.append(
                        PackedHintCursor(PackedHints(salvagedHints(of: reader, report: &report)), fileNumber: segment.fileNumber))
                } else {
                    reader = try openSegment(
                        path: segmentPath, number: segment.fileNumber, fileSystem: fs, blockCache: blockCache)
                    segmentReaders.append(reader)
                }
                files[segment.fileNumber] = LiveFile(
                    number: segment.fileNumber, path: segmentPath, content: .segment(reader), fileSystem: fs)
                lastSequence = max(lastSequence, reader.maxSequence)
                keptSegments.append(segment)
            } catch let error where options.repair && error.code == .corruption {
                report.dropped.append(
                    DroppedRange(path: segmentPath, offset: 0, length: segment.size, reason: "segment unreadable: \(error.message)"))
            }
        }
        manifest.segments = keptSegments
        // [MAN-1] lastSequence is at least every segment's largest sequence (a rebuilt manifest
        // starts from 0): the next manifest installed says so, so compaction, which may drop the
        // entry that carried it, never makes the store's newest sequence go down below what
        // SYNC may name ([DUR-3]).
        manifest.lastSequence = lastSequence
        var index: KeyIndex
        if options.repair {
            index = try buildIndex(from: &salvagedCursors, usage: &usage)
            for cursor in salvagedCursors { segmentMinSequence[cursor.fileNumber] = cursor.minimumSequence ?? 0 }
        } else {
            index = try buildIndex(from: segmentReaders, usage: &usage, minimumSequences: &segmentMinSequence)
        }

        // [REC-7] A WAL the manifest names but the directory lacks: without repair the open
        // fails; repair reports it and, when it was the active WAL, starts a fresh one (appends
        // never follow a lost tail, and the lost WAL's number is never reused).
        let namedWALs = manifest.wals
        var missingWALs: Set<UInt32> = []
        for number in namedWALs where try !fs.exists(path + "/" + Format.walFileName(number)) {
            guard options.repair else {
                throw StoreError.corruption(
                    "WAL named by the manifest is missing; open with repair to rebuild the store from the files that remain",
                    path: path + "/" + Format.walFileName(number), offset: 0)
            }
            missingWALs.insert(number)
        }
        if !missingWALs.isEmpty {
            manifest.wals.removeAll { missingWALs.contains($0) }
            if let active = namedWALs.last, missingWALs.contains(active) {
                guard !options.readOnly else {
                    throw StoreError.corruption(
                        "the active WAL named by the manifest is missing, and a read-only repair cannot start a new one",
                        path: path + "/" + Format.walFileName(active), offset: 0)
                }
                let number = manifest.allocateFileNumber()
                try createEmptyWAL(number, in: path, fileSystem: fs)
                manifest.wals.append(number)
            }
        }
        /// Missing WALs not yet placed: each held the commits after `after` and before the
        /// first record of the next WAL that has one.
        var unplaced: [(number: UInt32, after: UInt64)] = []
        func placeMissing(before next: UInt64?) {
            for missing in unplaced {
                var range = DroppedRange(
                    path: path + "/" + Format.walFileName(missing.number), offset: 0, length: 0,
                    reason: "WAL named by the manifest is missing")
                if let next {
                    if next > missing.after + 1 {
                        range.sequences = (missing.after + 1)...(next - 1)
                        range.reason += "; it held the commits between the records around it"
                    } else {
                        range.heldEntries = false
                        range.reason += "; it held no commit (the records around it are consecutive)"
                    }
                }
                report.dropped.append(range)
            }
            unplaced.removeAll()
        }

        // WALs, oldest first; only the newest may have a torn tail ([REC-3], [REC-4]). Nothing is
        // written until the durable bound is checked below (but a repair's fresh WAL).
        var activeEnd = UInt64(Format.walHeaderSize)
        var walEnds: [UInt32: (validEnd: UInt64, size: UInt64, torn: (offset: UInt64, length: UInt64)?)] = [:]
        let walOrder = namedWALs + manifest.wals.filter { !namedWALs.contains($0) }
        for number in walOrder {
            if missingWALs.contains(number) {
                unplaced.append((number, lastSequence))
                continue
            }
            let isNewest = number == manifest.wals.last
            let walPath = path + "/" + Format.walFileName(number)
            let handle = try fs.open(walPath, mode: isNewest && !options.readOnly ? .readWrite : .readOnly)
            // Closed here unless a LiveFile takes it (a failure below leaves nothing open).
            var adopted = false
            defer { if !adopted { handle.close() } }
            let bytes = try handle.read(exactly: Int(try handle.size()), at: 0)
            let reader = WALReader(
                path: walPath, bytes: bytes, isNewest: isNewest, repair: options.repair, keysOnly: true,
                previousSequence: lastSequence > 0 ? lastSequence : nil, durableSequence: bound?.sequence)
            do throws(StoreError) {
                let headerNumber = try reader.checkHeader()
                guard headerNumber == number else {
                    throw StoreError.corruption("WAL header names file \(headerNumber), expected \(number)", path: walPath, offset: 16)
                }
            } catch let error where options.repair && error.code == .corruption {
                // [REC-7] The manifest says which WAL this is; its records carry their own checks.
                report.dropped.append(
                    DroppedRange(
                        path: walPath, offset: 0, length: UInt64(Format.walHeaderSize), reason: "WAL header: \(error.message)",
                        heldEntries: false))
            }
            usage[number] = FileUsage()
            // Entries of records newer than everything before them wait here and go into the
            // index together, as a large commit's do (one merge when they are many beside the
            // index, instead of one descent and one leaf shift per key): the same index and
            // counts as applying them one by one.
            var pending: [IndexChange] = []
            let outcome = try reader.read { (record) throws(StoreError) in
                if !unplaced.isEmpty { placeMissing(before: record.sequence) }
                // A record newer than everything in the segments and in earlier records is the
                // newest for each of its keys: no index lookup needed before the upsert.
                let newest = record.sequence > lastSequence
                if !newest && !pending.isEmpty {
                    // An older record's keys are looked up in the index: bring it up to date.
                    apply(pending, index: &index, usage: &usage)
                    pending.removeAll(keepingCapacity: true)
                }
                for item in record.entries {
                    let location = ValueLocation(
                        fileNumber: number, position: 0, offset: UInt32(item.offset), length: item.length)
                    if newest {
                        pending.append(
                            IndexChange(
                                isDelete: item.entry.isDelete, key: item.entry.key, sequence: item.entry.sequence,
                                location: location))
                    } else {
                        apply(
                            isDelete: item.entry.isDelete, key: item.entry.key, sequence: item.entry.sequence,
                            location: location, index: &index, usage: &usage, newest: false)
                    }
                }
                lastSequence = max(lastSequence, record.sequence)
            }
            if !pending.isEmpty { apply(pending, index: &index, usage: &usage) }
            report.dropped += outcome.dropped
            // [WAL-5] The WAL's checked bytes stay in memory: its values are read there. The
            // active WAL's image has room for the records appended next.
            let image = WALImage(
                bytes, count: isNewest ? Int(outcome.validEnd) : bytes.count, headroom: isNewest ? WALImage.chunkBytes : 0)
            files[number] = LiveFile(number: number, path: walPath, content: .wal(handle, image), fileSystem: fs)
            adopted = true
            walEnds[number] = (outcome.validEnd, UInt64(bytes.count), outcome.tornTail)
            if isNewest { activeEnd = outcome.validEnd }
        }
        placeMissing(before: nil)  // what followed them is unknown; the durable bound may say
        if options.checkInvariants {
            do { try index.checkInvariants() } catch {
                throw StoreError(.corruption, "index invariant failed after recovery: \(error)", path: path)
            }
        }

        guard let activeNumber = manifest.wals.last, let active = files[activeNumber],
            case .wal(let activeHandle, _) = active.content
        else {
            throw StoreError.corruption("manifest names no WAL", path: path + "/" + Format.manifestFileName, offset: 0)
        }

        // [DUR-3] Acknowledged transactions lost: the durable bound names sequences that no WAL
        // or segment holds any more. Refused without repair, before anything is written.
        var damagedWAL: UInt32? = nil
        if let bound, lastSequence < bound.sequence {
            let lost = (lastSequence + 1)...bound.sequence
            let boundWALMissing = missingWALs.contains(bound.walNumber)
            let number = walEnds[bound.walNumber] != nil || boundWALMissing ? bound.walNumber : activeNumber
            let walName = Format.walFileName(number)
            let walPath = path + "/" + walName
            let end = walEnds[number] ?? (UInt64(Format.walHeaderSize), UInt64(Format.walHeaderSize), nil)
            let tail = boundWALMissing
                ? "is missing"
                : end.torn.map { "ends in \($0.length) damaged or cut bytes at offset \($0.offset)" }
                    ?? "ends at offset \(end.validEnd) after its last valid record"
            let synced = bound.walNumber == number && !boundWALMissing
                ? " (\(bound.walEnd) bytes of it were synced, it is \(end.size) bytes now)" : ""
            let message = "acknowledged transactions \(lost.lowerBound)…\(lost.upperBound) are lost: SYNC records every transaction up to sequence \(bound.sequence) as synced, but the store's records end at sequence \(lastSequence) and \(walName) \(tail)\(synced)"
            guard options.repair else {
                throw StoreError(
                    .corruption,
                    message + ". The WAL was truncated or damaged after those commits were acknowledged; this open changed nothing. Open with repair to keep what remains (the WAL is kept as \(Format.damagedWALFileName(number))) and accept the loss.",
                    path: walPath, offset: end.validEnd, lostSequences: lost)
            }
            report.lostSequences.append(lost)
            if let torn = end.torn {
                report.dropped.append(DroppedRange(path: walPath, offset: torn.offset, length: torn.length, reason: message))
            }
            damagedWAL = boundWALMissing ? nil : number
            rewriteBound = true
        }

        var durable: DurableBoundFile? = nil
        if !options.readOnly {
            // [REC-1] Files the manifest does not name are leftovers of an interrupted flush,
            // rollover or compaction: remove them.
            let live = Set(manifest.wals + manifest.segments.map(\.fileNumber))
            for name in try fs.contentsOfDirectory(path) {
                let orphan = Format.parseNumberedFileName(name).map { !live.contains($0.number) } ?? false
                if orphan || name == Format.manifestTempFileName || name == Format.syncTempFileName {
                    try fs.remove(path + "/" + name)
                }
            }
            // [DUR-4] Repair keeps the WAL that lost acknowledged data as it found it.
            if let damagedWAL, let file = files[damagedWAL], case .wal(let handle, _) = file.content {
                let bytes = try handle.read(exactly: Int(try handle.size()), at: 0)
                report.keptCopies.append(
                    try keepCopy(bytes, named: Format.damagedWALFileName(damagedWAL), in: path, fileSystem: fs))
            }
            var activeSynced = false
            if let torn = walEnds[activeNumber]?.torn {
                // [REC-3] [DUR-3] Cut the torn tail so appends follow valid records; its bytes
                // are kept beside the WAL first (unless all zero, or the whole WAL was kept).
                let bytes = try activeHandle.read(exactly: Int(torn.length), at: torn.offset)
                let zeros = !bytes.contains(where: { $0 != 0 })
                if damagedWAL != activeNumber {
                    if !zeros {
                        let kept = try keepCopy(
                            bytes, named: Format.tornTailFileName(activeNumber, offset: torn.offset), in: path, fileSystem: fs)
                        if options.repair { report.keptCopies.append(kept) }
                    }
                }
                try activeHandle.truncate(to: torn.offset)
                try activeHandle.sync()
                activeSynced = true
                // [WAL-6] Zeros after the last record are the space written ahead of records
                // under full durability, not a write a crash tore.
                options.logger.log(level: zeros ? .info : .warning, zeros ? "cut the zeros after the active WAL's last record" : "cut a torn tail off the active WAL", metadata: [
                    "path": "\(path)", "file": "\(Format.walFileName(activeNumber))", "offset": "\(torn.offset)",
                    "bytes": "\(torn.length)", "sequence": "\(lastSequence)",
                ])
            }
            durable = try openDurableBound(
                path: path, bound: rewriteBound ? nil : bound, slot: boundSlot, activeNumber: activeNumber, activeEnd: activeEnd,
                lastSequence: lastSequence, activeHandle: activeSynced ? nil : activeHandle, fileSystem: fs)
        }

        options.logger.info("opened the store", metadata: [
            "path": "\(path)", "sequence": "\(lastSequence)", "wals": "\(manifest.wals.count)",
            "segments": "\(manifest.segments.count)", "keys": "\(index.count)", "readOnly": "\(options.readOnly)",
        ])
        if options.repair, !report.isClean {
            options.logger.warning("repair salvaged the store", metadata: [
                "path": "\(path)", "dropped": "\(report.dropped.map(\.description))", "rebuiltManifest": "\(report.rebuiltManifest)",
                "lostSequences": "\(report.lostSequences)", "keptCopies": "\(report.keptCopies)",
            ])
        }
        let engine = Engine(
            path: path, options: options, lock: lock, repairReport: options.repair ? report : nil, blockCache: blockCache,
            shared: SharedState(index: index, sequence: lastSequence, files: files, usage: usage),
            writer: WriterState(
                manifest: manifest, wal: active, walEnd: activeEnd, walSynced: activeEnd, lastSequence: lastSequence,
                pendingFlushes: Array(manifest.wals.dropLast()), segmentMinSequence: segmentMinSequence,
                durableBound: durable))
        return engine
    }

    /// The rest of opening, run once ``recover(path:options:lock:)`` has returned (so the files
    /// it held are released, and files retired here are deleted in a repeatable order): a
    /// repair rewrites what it salvaged; older WALs are flushed; the sync timer starts.
    private func finishOpening() throws(StoreError) {
        if options.repair && !options.readOnly, let report = repairReport, !report.isClean {
            // Rewrite what was salvaged into a clean segment and a clean manifest.
            // A fresh WAL even when the damaged one holds no record: appends must never follow
            // a damaged header or damaged bytes.
            try writer.withLock { (state) throws(StoreError) in
                try state.manifest.install(fileSystem: fileSystem, directory: path)
                try rollOver(&state)
            }
            runPendingFlushes()
            try checkWritable()
            try compact(.full)
        } else if !options.readOnly && !writer.withLock({ $0.pendingFlushes.isEmpty }) {
            scheduleFlushes()
        }
        startSyncTimer()
    }

    /// [DUR-2] The `SYNC` file a read-write engine records its durable bound in. A valid `bound`
    /// is kept as it is (the next write goes to the slot after `slot`). Otherwise (no file, an
    /// empty one, or one repair rewrites) the record is written anew, naming `lastSequence`:
    /// every record recovery read is made durable first (`activeHandle` synced, unless the
    /// caller just did; older WALs were synced at rollover), then the record goes into both
    /// slots of `SYNC.tmp`, which is synced and renamed over `SYNC` (the directory synced): a
    /// crash leaves the old file or the new one, never a torn one.
    private static func openDurableBound(
        path: String, bound: SyncRecord?, slot: Int, activeNumber: UInt32, activeEnd: UInt64, lastSequence: UInt64,
        activeHandle: (any FileHandle)?, fileSystem fs: any FileSystem
    ) throws(StoreError) -> DurableBoundFile {
        let syncPath = path + "/" + Format.syncFileName
        if let bound {
            return DurableBoundFile(
                handle: try fs.open(syncPath, mode: .readWrite), recorded: bound.sequence, nextSlot: 1 - slot, isDirty: false)
        }
        try activeHandle?.sync()
        let tempPath = path + "/" + Format.syncTempFileName
        if try fs.kind(of: tempPath) != nil { try fs.remove(tempPath) }
        let temp = try fs.open(tempPath, mode: .createNew)
        do throws(StoreError) {
            let record = SyncRecord(walNumber: activeNumber, sequence: lastSequence, walEnd: UInt32(clamping: activeEnd))
            try temp.write(record.encodeFile(), at: 0)
            try temp.sync()
        } catch {
            temp.close()
            throw error
        }
        temp.close()
        try fs.rename(tempPath, to: syncPath)
        try fs.syncDirectory(path)
        return DurableBoundFile(handle: try fs.open(syncPath, mode: .readWrite), recorded: lastSequence, nextSlot: 1, isDirty: false)
    }

    static func openSegment(
        path: String, number: UInt32, fileSystem: any FileSystem, blockCache: BlockCache
    ) throws(StoreError) -> SegmentReader {
        guard try fileSystem.exists(path) else {
            throw StoreError.corruption("segment named in the manifest is missing", path: path, offset: 0)
        }
        return try SegmentReader.open(fileSystem: fileSystem, path: path, fileNumber: number, blockCache: blockCache)
    }

    /// Under ``Durability/normal``, syncs the WAL in the background every `syncInterval`.
    func startSyncTimer() {
        guard options.durability == .normal, !options.readOnly else { return }
        let interval = options.syncInterval.components
        let nanoseconds = Int(interval.seconds) * 1_000_000_000 + Int(interval.attoseconds / 1_000_000_000)
        syncTimer.withLock { slot in
            let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "strata.engine.sync"))
            let period = DispatchTimeInterval.nanoseconds(max(nanoseconds, 1_000_000))
            timer.schedule(deadline: .now() + period, repeating: period)
            timer.setEventHandler { [weak self] in self?.backgroundSync() }
            timer.resume()
            slot = timer
        }
    }

    /// The sync timer's work: syncs the WAL if it holds unsynced records. A failure poisons
    /// the engine ([WAL-4]); a closed or already poisoned engine syncs nothing.
    func backgroundSync() {
        do throws(StoreError) { try syncWAL(.backgroundSync) } catch {
            // syncWAL already poisoned the engine; a closed or poisoned one needs nothing.
        }
    }
}

/// The lock of a read-only open that found no lock file it could open for reading ([DIR-5]):
/// it holds nothing, so there is nothing to release.
final class NoFileLock: FileLock {
    func unlock() {}
}

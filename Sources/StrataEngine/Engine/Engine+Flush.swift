import Logging
/// WAL rollover and flush: a full WAL becomes an immutable segment ([MAN-5], [SEG-7]).
extension Engine {
    /// Creates a WAL file with its header, synced and named durably in the directory.
    func createWAL(number: UInt32) throws(StoreError) -> LiveFile {
        let walPath = filePath(Format.walFileName(number))
        let handle = try fileSystem.open(walPath, mode: .createNew)
        do throws(StoreError) {
            try handle.write(WALRecord.fileHeader(fileNumber: number), at: 0)
            try sync(handle, .rollover)
            try syncDirectory(.rollover)
        } catch {
            handle.close()
            throw error
        }
        let header = WALRecord.fileHeader(fileNumber: number)
        let image = WALImage(header, count: header.count, headroom: WALImage.chunkBytes)
        return LiveFile(number: number, path: walPath, content: .wal(handle, image), fileSystem: fileSystem)
    }

    /// Starts a new WAL; the old one is synced and queued to become a segment. Writer lock held.
    /// A failed sync (of the old WAL, the new one, the directory or the manifest) poisons the
    /// engine; callers poison it for any other failure too, since the state is then unknown.
    func rollOver(_ state: inout WriterState) throws(StoreError) {
        guard case .wal(let handle, _) = state.wal.content else { return }
        // [WAL-6] The zeros ahead of the last record go, durably, before another WAL is newer.
        try trimPreparedWAL(handle, &state, .rollover)
        if state.walSynced < state.walEnd {
            try sync(handle, .rollover)
            state.walSynced = state.walEnd
            recordDurable(&state, through: state.lastSequence)
        }
        var manifest = state.manifest
        let number = manifest.allocateFileNumber()
        let wal = try createWAL(number: number)
        manifest.wals.append(number)
        try manifest.install(fileSystem: fileSystem, directory: path) { syncFailed($0, .rollover) }
        state.pendingFlushes.append(state.wal.number)
        options.logger.info("WAL rolled over", metadata: [
            "path": "\(path)", "file": "\(Format.walFileName(state.wal.number))", "bytes": "\(state.walEnd)",
            "next": "\(Format.walFileName(number))", "sequence": "\(state.lastSequence)",
        ])
        state.manifest = manifest
        state.wal = wal
        state.walEnd = UInt64(Format.walHeaderSize)
        state.walSynced = state.walEnd
        state.walPrepared = state.walEnd
        shared.withLock {
            $0.files[number] = wal
            $0.usage[number] = FileUsage()
        }
    }

    /// Runs the queued flushes on the flush queue, or right here when flushes are inline.
    func scheduleFlushes() {
        if options.backgroundFlush {
            flushQueue.async { self.runPendingFlushes() }
        } else {
            runPendingFlushes()
        }
    }

    /// Flushes queued WALs, oldest first, one at a time. A failure turns the engine read-only
    /// (the WAL still holds the data; the next open retries); a poisoned engine flushes nothing.
    func runPendingFlushes() {
        let flushed = flushLock.withLock { completed -> Bool in
            var flushed = false
            while let number = writer.withLock({ $0.pendingFlushes.first }) {
                // [WAL-4] A poisoned engine installs no manifest and syncs no file any more.
                if shared.withLock({ $0.failure != nil }) { return flushed }
                do throws(StoreError) {
                    try flushWAL(number)
                    completed += 1
                    flushed = true
                } catch {
                    poison(error)
                    return false
                }
            }
            return flushed
        }
        if flushed { scheduleCompaction() }
    }

    /// Rolls the WAL over (if it holds any record) and writes every rolled-over WAL as a
    /// segment before returning.
    public func flush() throws(StoreError) {
        try checkWritable()
        if options.readOnly { throw StoreError(.readOnly, "the engine was opened read-only", path: path) }
        try writer.withLock { (state) throws(StoreError) in
            guard state.walEnd > UInt64(Format.walHeaderSize) else { return }
            do throws(StoreError) {
                try rollOver(&state)
            } catch {
                poison(error)  // as a commit's rollover does: the WAL and manifest are now unknown
                throw error
            }
        }
        runPendingFlushes()
        try checkWritable()
    }

    /// Writes the live entries of rolled-over WAL `number` as a segment, then swaps it in.
    func flushWAL(_ number: UInt32) throws(StoreError) {
        // Phase 1, no lock: decide which entries are live, from a snapshot of the index.
        let (snapshotIndex, file) = shared.withLock { ($0.index, $0.files[number]) }
        guard let file, case .wal(let handle, _) = file.content else {
            throw StoreError(.notFound, "WAL \(number) queued for flush is not open", path: path)
        }
        let bytes = try handle.read(exactly: Int(try handle.size()), at: 0)
        // In repair mode the WAL may hold ranges recovery dropped; skip them the same way.
        let reader = WALReader(path: file.path, bytes: bytes, isNewest: false, repair: options.repair)
        if !options.repair { _ = try reader.checkHeader() }
        // A put is kept when the index still points at exactly this entry (so it is the key's
        // newest value); a delete is kept as a tombstone, since an older segment may hold the
        // key ([SEG-7]). Sorting by key, newest first, then keeping one entry per key drops the
        // older entries of keys written more than once; a put that is not kept never shadows.
        var inputs: [SegmentWriter.Input] = []
        var maxSequence: UInt64 = 0
        _ = try reader.read { (record) throws(StoreError) in
            for item in record.entries {
                if item.entry.isDelete {
                    inputs.append(.init(isDelete: true, sequence: item.entry.sequence, key: item.entry.key, value: []))
                } else if let current = snapshotIndex.lookup(item.entry.key), current.location.fileNumber == number,
                    UInt64(current.location.offset) == item.offset
                {
                    inputs.append(.init(isDelete: false, sequence: item.entry.sequence, key: item.entry.key, value: item.entry.value))
                }
            }
            maxSequence = record.sequence
        }
        // Per key: a kept put first (the index points at it, so it is the newest, even against a
        // tombstone of the same transaction), else the newest tombstone.
        let order = Self.keyOrder(inputs, key: \.key) { a, b in
            a.isDelete != b.isDelete ? !a.isDelete : a.sequence > b.sequence
        }
        var unique: [SegmentWriter.Input] = []
        unique.reserveCapacity(inputs.count)
        for position in order where unique.last?.key != inputs[position].key { unique.append(inputs[position]) }
        inputs = unique

        // Phase 2, no lock: write the segment.
        var segmentFile: LiveFile? = nil
        var written: SegmentWriter.Result? = nil
        if !inputs.isEmpty {
            let segmentNumber = writer.withLock { $0.manifest.allocateFileNumber() }
            let segmentPath = filePath(Format.segmentFileName(segmentNumber))
            let result = try SegmentWriter(
                fileSystem: fileSystem, path: segmentPath, fileNumber: segmentNumber, blockSize: options.blockSize
            ).write(inputs) { syncFailed($0, .flush) }
            // No directory sync here: the manifest install below syncs the directory before
            // the new manifest can name the segment ([MAN-4]).
            let segment = try SegmentReader.open(
                fileSystem: fileSystem, path: segmentPath, fileNumber: segmentNumber, blockCache: blockCache)
            segmentFile = LiveFile(number: segmentNumber, path: segmentPath, content: .segment(segment), fileSystem: fileSystem)
            written = result
        }

        // Phase 3, writer lock: swap the manifest, repoint the index, publish.
        try writer.withLock { (state) throws(StoreError) in
            var manifest = state.manifest
            manifest.wals.removeAll { $0 == number }
            if let segmentFile, let written {
                manifest.segments.append(.init(fileNumber: segmentFile.number, size: written.fileSize))
            }
            manifest.lastSequence = max(manifest.lastSequence, maxSequence)
            try manifest.install(fileSystem: fileSystem, directory: path) { syncFailed($0, .flush) }
            state.manifest = manifest
            state.pendingFlushes.removeAll { $0 == number }
            if let segmentFile { state.segmentMinSequence[segmentFile.number] = inputs.map(\.sequence).min() ?? 0 }

            var (index, usage) = shared.withLock { ($0.index, $0.usage) }
            if let segmentFile, let written {
                var segmentUsage = FileUsage()
                for (input, location) in zip(inputs, written.locations) {
                    let length = UInt64(location.length)
                    segmentUsage.entryBytes += length
                    if input.isDelete {
                        segmentUsage.tombstoneBytes += length
                    } else if let current = index.lookup(input.key), current.sequence == input.sequence,
                        current.location.fileNumber == number
                    {
                        _ = index.upsert(input.key, IndexEntry(sequence: input.sequence, location: location))
                    } else {
                        segmentUsage.deadBytes += length  // overwritten while the segment was written
                    }
                }
                usage[segmentFile.number] = segmentUsage
            }
            usage[number] = nil
            if options.checkInvariants {
                do { try index.checkInvariants() } catch {
                    throw StoreError(.corruption, "index invariant failed after flush: \(error)", path: path)
                }
            }
            shared.withLock {
                $0.index = index
                $0.usage = usage
                $0.files[number] = nil
                if let segmentFile { $0.files[segmentFile.number] = segmentFile }
            }
            file.markObsolete()
        }
        metrics.flushes.increment()
        options.logger.info("flushed a WAL into a segment", metadata: [
            "path": "\(path)", "file": "\(Format.walFileName(number))",
            "segment": "\(segmentFile.map { Format.segmentFileName($0.number) } ?? "none (no live entry)")",
            "entries": "\(inputs.count)", "sequence": "\(maxSequence)",
        ])
    }
}

import Logging
import Dispatch
import Glibc

/// The compactor ([CMP-1]…[CMP-7]): rewrites the live entries of victim segments into new
/// segments on its own serial queue, and swaps them in with one manifest change.
extension Engine {
    /// What the compactor shares with the rest of the engine. Protected by `compaction`.
    struct CompactionState: Sendable {
        var stats = CompactionStats()
    }

    /// Runs compaction now, on the calling thread, until no segment is a victim under
    /// `policy` (the engine's ``EngineOptions/compaction`` by default). Waits for a
    /// background run to finish first. Use ``CompactionOptions/full`` to rewrite every segment.
    ///
    /// - Throws: ``StoreError/Code/readOnly`` or ``StoreError/Code/closed``, and I/O or
    ///   corruption errors met while reading victims or writing outputs.
    public func compact(_ policy: CompactionOptions? = nil) throws(StoreError) {
        if options.readOnly { throw StoreError(.readOnly, "the engine was opened read-only", path: path) }
        try checkWritable()
        let result: Result<Void, StoreError> = compactionQueue.sync {
            Result { () throws(StoreError) in try runCompaction(policy ?? options.compaction, ignoringPause: true) }
        }
        try result.get()
    }

    /// Stops background compaction after the victim it is reading; a paused run leaves no trace.
    public func pauseCompaction() {
        compaction.withLock { $0.stats.isPaused = true }
    }

    /// Resumes background compaction and checks for victims at once.
    public func resumeCompaction() {
        compaction.withLock { $0.stats.isPaused = false }
        scheduleCompaction()
    }

    /// Waits until no background flush or compaction is queued or running (a flush can
    /// queue a compaction, so flushes are drained first).
    public func waitForCompaction() {
        flushQueue.sync {}
        compactionQueue.sync {}
    }

    /// What the compactor has done so far.
    /// Sets the rewrite compaction applies to every live value it copies ([CMP-7]): `rewrite`
    /// returns the value to write instead (the same entry, same key and sequence number: it
    /// must mean what the old value meant to every reader), or `nil` to copy it as it is.
    /// StrataStore uses it to rewrite rows of older layouts in the newest one. `nil` removes it.
    public func setCompactionRewriter(_ rewrite: (@Sendable (_ key: [UInt8], _ value: [UInt8]) -> [UInt8]?)?) {
        compactionRewriter.withLock { $0 = rewrite }
    }

    public func compactionStats() -> CompactionStats {
        compaction.withLock { $0.stats }
    }

    /// Queues a background run if compaction is automatic.
    func scheduleCompaction() {
        guard options.compaction.automatic, !options.readOnly else { return }
        compactionQueue.async {
            do throws(StoreError) {
                try self.runCompaction(self.options.compaction, ignoringPause: false)
            } catch {
                self.compaction.withLock { $0.stats.lastError = error }
                self.options.logger.error(
                    "background compaction failed", metadata: ["path": "\(self.path)", "error": "\(error)"])
            }
        }
    }

    /// Runs until no victim is left that this call has not itself written.
    func runCompaction(_ policy: CompactionOptions, ignoringPause: Bool) throws(StoreError) {
        var written: Set<UInt32> = []
        while true {
            if shared.withLock({ $0.isClosed || $0.failure != nil }) { return }
            if !ignoringPause && compaction.withLock({ $0.stats.isPaused }) { return }
            let victims = pickVictims(policy, excluding: written)
            guard !victims.isEmpty else { return }
            guard let outputs = try compactOnce(victims, policy: policy, ignoringPause: ignoringPause) else { return }
            written.formUnion(outputs)
        }
    }

    /// [CMP-2] The victim policy, oldest segments first, capped at `maxRunBytes` per run.
    func pickVictims(_ policy: CompactionOptions, excluding: Set<UInt32>) -> [Manifest.Segment] {
        let segments = writer.withLock { $0.manifest.segments }.filter { !excluding.contains($0.fileNumber) }
        let usage = shared.withLock { $0.usage }
        var chosen: Set<UInt32> = []
        for segment in segments {
            let use = usage[segment.fileNumber] ?? FileUsage()
            let ratio = use.entryBytes == 0 ? 1 : Double(use.deadBytes) / Double(use.entryBytes)
            if ratio >= policy.minDeadRatio || use.deadBytes >= policy.maxDeadBytes { chosen.insert(segment.fileNumber) }
        }
        let small = segments.filter { $0.size < policy.smallSegmentBytes }
        if small.count >= 2 { chosen.formUnion(small.map(\.fileNumber)) }
        var victims: [Manifest.Segment] = []
        var total: UInt64 = 0
        for segment in segments where chosen.contains(segment.fileNumber) {
            if !victims.isEmpty && total + segment.size > policy.maxRunBytes { break }
            victims.append(segment)
            total += segment.size
        }
        // A lone victim with nothing dead and nothing to merge would be rewritten as is.
        if victims.count == 1, let only = victims.first, (usage[only.fileNumber]?.deadBytes ?? 0) == 0,
            (usage[only.fileNumber]?.tombstoneBytes ?? 0) == 0, policy.maxDeadBytes > 0
        {
            return []
        }
        return victims
    }

    /// One run: read victims, write outputs, swap. Returns the outputs' file numbers, or `nil`
    /// when the run stopped because the compactor was paused (its outputs are removed).
    private func compactOnce(
        _ victims: [Manifest.Segment], policy: CompactionOptions, ignoringPause: Bool
    ) throws(StoreError) -> Set<UInt32>? {
        compaction.withLock { $0.stats.isRunning = true }
        defer { compaction.withLock { $0.stats.isRunning = false } }
        let victimNumbers = Set(victims.map(\.fileNumber))
        // The victims only, in order (not a copy of the whole table): when the run lets go of
        // them, retired ones are deleted in a repeatable order.
        let (index, files) = shared.withLock { shared in (shared.index, victims.map { shared.files[$0.fileNumber] }) }
        // [CMP-4] A tombstone may go when every segment outside the run holds only newer entries.
        let oldestOutside = writer.withLock { state in
            state.manifest.segments.filter { !victimNumbers.contains($0.fileNumber) }
                .compactMap { state.segmentMinSequence[$0.fileNumber] }.min()
        } ?? .max
        var throttle = Throttle(bytesPerSecond: policy.bytesPerSecond)
        var puts: [[UInt8]: (input: SegmentWriter.Input, from: ValueLocation)] = [:]
        var tombstones: [[UInt8]: SegmentWriter.Input] = [:]
        var dropped = 0
        var bytesRead: UInt64 = 0
        // The victims' largest sequence, which the outputs' footers carry on ([SEG-3]): a dropped
        // tombstone may have been the store's newest entry, and a manifest rebuilt from the
        // segments must not fall below it ([REC-7], [DUR-3]).
        var sequenceFloor: UInt64 = 0
        let rewrite = compactionRewriter.withLock { $0 }
        for (victim, file) in zip(victims, files) {
            if !ignoringPause && compaction.withLock({ $0.stats.isPaused }) { return nil }
            guard let file, case .segment(let reader) = file.content else {
                throw StoreError(.notFound, "compaction victim \(victim.fileNumber) is not open", path: path)
            }
            sequenceFloor = max(sequenceFloor, reader.maxSequence)
            var memo = BlockMemo()
            var hints: [SegmentReader.Hint]
            if options.repair {
                var ignored = RepairReport()
                hints = Self.salvagedHints(of: reader, report: &ignored)
            } else {
                hints = try reader.readHints()
            }
            for hint in hints {
                if hint.isDelete {
                    if hint.sequence < oldestOutside {
                        dropped += 1
                    } else if (tombstones[hint.key]?.sequence ?? 0) < hint.sequence {
                        tombstones[hint.key] = .init(isDelete: true, sequence: hint.sequence, key: hint.key, value: [])
                    }
                } else if index.lookup(hint.key)?.location == hint.location {
                    let block = try memo.block(hint.location.position, of: reader)
                    let entry = try reader.entry(in: block, at: hint.location)
                    guard entry.key == hint.key, entry.sequence == hint.sequence else {
                        throw StoreError.corruption(
                            "a hint does not describe the entry it points at", path: reader.path,
                            offset: reader.dataBlocks[Int(hint.location.position)].offset)
                    }
                    // [CMP-7] The owner may write the value in a newer form.
                    let value = rewrite?(entry.key, entry.value) ?? entry.value
                    puts[hint.key] = (.init(isDelete: false, sequence: entry.sequence, key: entry.key, value: value), hint.location)
                }
            }
            bytesRead += reader.fileSize
            throttle.account(reader.fileSize)
        }
        // A live put is the key's newest entry: it shadows every tombstone for the key.
        for key in puts.keys { tombstones[key] = nil }
        var inputs: [(input: SegmentWriter.Input, from: ValueLocation?)] = puts.values.map { ($0.input, $0.from) }
        inputs += tombstones.values.map { ($0, nil) }
        inputs.sort { $0.input.key.precedes($1.input.key) }

        // Write the outputs, cut at the target size. Nothing refers to them until the swap.
        var outputs: [(file: LiveFile, size: UInt64, minSequence: UInt64, items: ArraySlice<(input: SegmentWriter.Input, from: ValueLocation?)>, locations: [ValueLocation])] = []
        func removeOutputs() { for output in outputs { output.file.markObsolete() } }
        var start = 0
        while start < inputs.count {
            if !ignoringPause && compaction.withLock({ $0.stats.isPaused }) {
                removeOutputs()
                return nil
            }
            var end = start, bytes: UInt64 = 0
            while end < inputs.count && (bytes < policy.targetSegmentBytes || end == start) {
                bytes += UInt64(inputs[end].input.key.count + inputs[end].input.value.count + 16)
                end += 1
            }
            let items = inputs[start..<end]
            do throws(StoreError) {
                let number = writer.withLock { $0.manifest.allocateFileNumber() }
                let segmentPath = filePath(Format.segmentFileName(number))
                let result = try SegmentWriter(
                    fileSystem: fileSystem, path: segmentPath, fileNumber: number, blockSize: options.blockSize
                ).write(items.map(\.input), sequenceFloor: sequenceFloor) { syncFailed($0, .compaction) }
                let reader = try SegmentReader.open(
                    fileSystem: fileSystem, path: segmentPath, fileNumber: number, blockCache: blockCache)
                let file = LiveFile(number: number, path: segmentPath, content: .segment(reader), fileSystem: fileSystem)
                let minSequence = items.map(\.input.sequence).min() ?? 0
                outputs.append((file, result.fileSize, minSequence, items, result.locations))
                throttle.account(result.fileSize)
            } catch {
                removeOutputs()
                throw error
            }
            start = end
        }

        // [CMP-3] The swap: one manifest change, then repoint the index, under the writer lock.
        // Once the install has begun, `MANIFEST` may name the outputs (a failed directory sync
        // comes after the rename): they are then kept, and the next open removes whichever of
        // outputs and victims the manifest it finds does not name ([REC-1]).
        var installBegun = false
        do throws(StoreError) {
            try writer.withLock { (state) throws(StoreError) in
                try checkWritable()
                var manifest = state.manifest
                manifest.segments.removeAll { victimNumbers.contains($0.fileNumber) }
                manifest.segments += outputs.map { .init(fileNumber: $0.file.number, size: $0.size) }
                installBegun = true
                do throws(StoreError) {
                    try manifest.install(fileSystem: fileSystem, directory: path) { syncFailed($0, .compaction) }
                } catch {
                    poison(error)  // the manifest on disk is now unknown
                    throw error
                }
                state.manifest = manifest
                for number in victimNumbers { state.segmentMinSequence[number] = nil }
                for output in outputs { state.segmentMinSequence[output.file.number] = output.minSequence }

                var (index, usage) = shared.withLock { ($0.index, $0.usage) }
                for output in outputs {
                    var use = FileUsage()
                    for (item, location) in zip(output.items, output.locations) {
                        use.entryBytes += UInt64(location.length)
                        if item.input.isDelete {
                            use.tombstoneBytes += UInt64(location.length)
                        } else if let from = item.from, index.lookup(item.input.key)?.location == from {
                            _ = index.upsert(item.input.key, IndexEntry(sequence: item.input.sequence, location: location))
                        } else {
                            use.deadBytes += UInt64(location.length)  // overwritten during the run
                        }
                    }
                    usage[output.file.number] = use
                }
                for number in victimNumbers { usage[number] = nil }
                if options.checkInvariants {
                    do { try index.checkInvariants() } catch {
                        throw StoreError(.corruption, "index invariant failed after compaction: \(error)", path: path)
                    }
                }
                let retired = shared.withLock { shared -> [LiveFile] in
                    shared.index = index
                    shared.usage = usage
                    // Oldest first (not in Set order), so files are deleted in a repeatable order.
                    let retired = victims.compactMap { shared.files.removeValue(forKey: $0.fileNumber) }
                    for output in outputs { shared.files[output.file.number] = output.file }
                    return retired
                }
                // [DIR-3] Deleted when the last snapshot that can read them lets go.
                for file in retired { file.markObsolete() }
            }
        } catch {
            if !installBegun { removeOutputs() }
            throw error
        }
        let written = outputs.reduce(0) { $0 + $1.size }
        let read = bytesRead
        compaction.withLock {
            $0.stats.runs += 1
            $0.stats.bytesRead += read
            $0.stats.bytesWritten += written
            $0.stats.bytesReclaimed += read > written ? read - written : 0
            $0.stats.segmentsRemoved += victims.count
            $0.stats.segmentsWritten += outputs.count
            $0.stats.tombstonesDropped += dropped
        }
        metrics.compactions.increment()
        metrics.compactionRead.increment(by: Int64(read))
        metrics.compactionWritten.increment(by: Int64(written))
        options.logger.info("compacted segments", metadata: [
            "path": "\(path)", "victims": "\(victims.map(\.fileNumber))", "written": "\(outputs.map(\.file.number))",
            "bytesRead": "\(read)", "bytesWritten": "\(written)", "tombstonesDropped": "\(dropped)",
        ])
        return Set(outputs.map(\.file.number))
    }
}

/// Keeps the compactor's I/O under a byte-per-second budget by sleeping between units of work.
struct Throttle {
    let bytesPerSecond: UInt64?
    private let start = ContinuousClock.now
    private var bytes: UInt64 = 0

    init(bytesPerSecond: UInt64?) { self.bytesPerSecond = bytesPerSecond }

    mutating func account(_ count: UInt64) {
        guard let budget = bytesPerSecond, budget > 0 else { return }
        bytes += count
        let due = Double(bytes) / Double(budget)
        let elapsed = ContinuousClock.now - start
        let ahead = due - (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        if ahead > 0 { usleep(useconds_t(min(ahead, 10) * 1_000_000)) }
    }
}

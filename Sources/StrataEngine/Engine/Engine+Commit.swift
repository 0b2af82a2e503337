/// The group-commit leader's work ([WAL-4]): one WAL write and at most one sync for every
/// commit that queued while the previous leader was busy.
extension Engine {
    /// Runs with the writer lock held. Finishes every request it takes from the queue.
    func lead(_ state: inout WriterState) {
        var group = pending.withLock { queue -> [CommitRequest] in
            defer { queue.removeAll(keepingCapacity: true) }
            return queue
        }
        // A transaction built on an earlier one that failed fails too (in order, so a chain
        // fails from its first failure on), before anything is written.
        if group.contains(where: \.hasDependency) {
            group.removeAll { request in
                guard request.dependencyFailed else { return false }
                request.finish(.failure(StoreError(.io, "an earlier transaction this one was built on failed, so it was not applied", path: path)))
                return true
            }
        }
        guard !group.isEmpty else { return }
        func failAll(_ error: StoreError) { for request in group { request.finish(.failure(error)) } }
        do throws(StoreError) {
            try checkWritable()
        } catch {
            return failAll(error)
        }

        // Exact size: header and entry count per record, and per entry its bytes plus at most
        // 1 + 10 + 5 + 5 bytes of kind and varints and a 4-byte CRC.
        // Sequence numbers never wrap: a store whose counter is near the end (only a damaged
        // or crafted file can say so) refuses commits instead of trapping.
        guard state.lastSequence <= UInt64.max - UInt64(group.count) else {
            return failAll(StoreError(.corruption, "sequence numbers are exhausted (last sequence \(state.lastSequence)); the store's files carry an implausible sequence number", path: path))
        }
        var out = ByteWriter(capacity: group.reduce(0) { total, request in
            total + 32 + request.operations.reduce(0) { $0 + $1.key.count + $1.value.count + 25 }
        })
        var positions: [[WALRecord.EncodedEntry]] = []
        positions.reserveCapacity(group.count)
        var sequence = state.lastSequence
        for request in group {
            sequence += 1
            var entries: [WALRecord.EncodedEntry] = []
            entries.reserveCapacity(request.operations.count)
            WALRecord.appendBatch(sequence: sequence, operations: request.operations, to: &out, entries: &entries)
            positions.append(entries)
        }
        // WAL offsets must fit the index's 32-bit offsets ([IDX-1]).
        if state.walEnd + UInt64(out.count) > UInt64(UInt32.max) {
            do throws(StoreError) {
                try rollOver(&state)
            } catch {
                poison(error)
                return failAll(error)
            }
        }
        guard case .wal(let handle, let image) = state.wal.content else { return failAll(StoreError(.io, "active WAL is not a WAL")) }
        let base = state.walEnd
        do throws(StoreError) {
            try prepareWAL(handle, &state, through: base + UInt64(out.count))
            try handle.write(out.bytes, at: base)
        } catch {
            // Take back a partial record (and any zeros written for it) so later appends
            // follow valid ones; if even that fails, the WAL's tail is unknown and the engine
            // must stop writing.
            do throws(StoreError) { try handle.truncate(to: base) } catch { poison(error) }
            state.walPrepared = base
            return failAll(error)
        }
        state.walEnd += UInt64(out.count)
        if options.durability == .full {
            do throws(StoreError) {
                try sync(handle, .walAppend)
                state.walSynced = state.walEnd
                recordDurable(&state, through: sequence)
            } catch {
                // [WAL-4] The engine is poisoned and never syncs this WAL again. The records,
                // reported failed, are cut back off the file (as after a failed write) so that
                // a reopen does not replay them; nothing after them was ever written.
                do throws(StoreError) {
                    try handle.truncate(to: base)
                    state.walEnd = base
                    state.walPrepared = base
                } catch {}
                return failAll(error)
            }
        }

        // [WAL-5] The records join the WAL's image before the index publishes their entries.
        image.append(out.bytes, at: base)
        let walNumber = state.wal.number
        var recordSequence = state.lastSequence
        var applied: [IndexChange] = []
        applied.reserveCapacity(group.reduce(0) { $0 + $1.operations.count })
        for (request, entries) in zip(group, positions) {
            recordSequence += 1
            for (operation, entry) in zip(request.operations, entries) {
                let location = ValueLocation(
                    fileNumber: walNumber, position: 0, offset: UInt32(base + UInt64(entry.offset)),
                    length: UInt32(entry.length))
                applied.append(IndexChange(isDelete: operation.isDelete, key: operation.key, sequence: recordSequence, location: location))
            }
        }
        let checkInvariants = options.checkInvariants
        let invariantFailure: String?
        if applied.count <= Self.inPlaceApplyMaximum {
            // A commit of up to a few thousand entries changes the published index in place,
            // key by key, under the lock: a copy taken out of the lock would share every node
            // with the published one, so each leaf the commit reaches would be copied and the
            // old one freed (most of a small save's engine time; for 1,000 random keys into a
            // million, most of the commit). A node a reader's snapshot still holds is copied
            // first, as the index's copy on write does everywhere: it is written only when
            // uniquely referenced, and a reader's last release of it happens before the
            // uniqueness check that sees it go (release and acquire in the runtime's reference
            // counts, which ThreadSanitizer does not see: see ``inPlaceApplyMaximum``). A reader
            // taking a snapshot waits for these descents (about a microsecond each). With
            // `checkInvariants` a broken index is found here, already published: the engine is
            // poisoned below, as when the check runs on a copy.
            invariantFailure = shared.withLock { shared -> String? in
                Self.applyKeyByKey(applied, index: &shared.index, usage: &shared.usage)
                shared.sequence = sequence
                guard checkInvariants else { return nil }
                do { try shared.index.checkInvariants() } catch { return "\(error)" }
                return nil
            }
        } else {
            // A large commit is applied to a copy outside the lock, so that readers are not
            // held up, and published whole.
            var (index, usage) = shared.withLock { ($0.index, $0.usage) }
            Self.apply(applied, index: &index, usage: &usage)
            var failure: String?
            if checkInvariants {
                do { try index.checkInvariants() } catch { failure = "\(error)" }
            }
            invariantFailure = failure
            if failure == nil {
                shared.withLock {
                    $0.index = index
                    $0.usage = usage
                    $0.sequence = sequence
                }
            }
        }
        state.lastSequence = sequence
        if let invariantFailure {
            let failure = StoreError(.corruption, "index invariant failed after commit: \(invariantFailure)", path: path)
            poison(failure)
            return failAll(failure)
        }
        // Write through to cached or pinned keys; a hit must match the index's sequence, so
        // readers of older snapshots simply miss.
        var cacheSequence = state.lastSequence - UInt64(group.count)
        var changes: [(key: [UInt8], sequence: UInt64, value: [UInt8]?)] = []
        changes.reserveCapacity(group.reduce(0) { $0 + $1.operations.count })
        for request in group {
            cacheSequence += 1
            for operation in request.operations {
                changes.append((operation.key, cacheSequence, operation.isDelete ? nil : operation.value))
            }
        }
        rowCache.update(changes)
        var first = sequence - UInt64(group.count)
        for request in group {
            first += 1
            request.finish(.success(first))
        }
        if state.walEnd >= options.walRolloverBytes {
            do throws(StoreError) { try rollOver(&state) } catch { poison(error) }
        }
    }

    /// [WAL-6] Under full durability, makes sure the active WAL's file holds bytes (zeros
    /// where nothing is written yet) up to `end`, writing zeros up to
    /// ``EngineOptions/walPreallocationBytes`` past it when it does not: a commit's records
    /// then overwrite blocks the file already has, and its `fdatasync` changes no file size or
    /// extent (the one after the zeros were written does, once per stretch). Nothing is synced
    /// here; the zeros are never part of a record ([REC-3] cuts them at an open after a crash).
    func prepareWAL(_ handle: any FileHandle, _ state: inout WriterState, through end: UInt64) throws(StoreError) {
        let ahead = options.walPreallocationBytes
        guard options.durability == .full, ahead > 0 else { return }
        let start = max(state.walPrepared, state.walEnd)
        guard end > start else { return }
        // The stretch grows with the WAL (64 KiB, then as much as it holds, up to the option),
        // and stops where the WAL rolls over: a small store writes few zeros, none past its WAL.
        let stretch = min(ahead, max(Self.firstPreparedStretch, end))
        let target = max(end, min(end + stretch, options.walRolloverBytes))
        guard target > end else { return }  // past the rollover point: the record extends the file
        var offset = start
        while offset < target {
            let count = Int(min(target - offset, UInt64(Self.zeros.count)))
            try handle.write(count == Self.zeros.count ? Self.zeros : [UInt8](repeating: 0, count: count), at: offset)
            offset += UInt64(count)
        }
        state.walPrepared = target
    }

    /// The zeros [WAL-6] writes ahead of a new WAL's first records.
    static let firstPreparedStretch: UInt64 = 64 << 10

    /// The zeros [WAL-6] writes ahead of the records, 256 KiB at a time.
    static let zeros = [UInt8](repeating: 0, count: 256 << 10)

    /// [WAL-6] Cuts the zeros after the active WAL's last record off its file and syncs it,
    /// before it stops being the newest WAL (rollover) or the store closes: only the newest WAL
    /// may end in zeros after a crash ([REC-3]), and a closed store's WAL ends at its last record.
    func trimPreparedWAL(_ handle: any FileHandle, _ state: inout WriterState, _ site: SyncSite) throws(StoreError) {
        guard state.walPrepared > state.walEnd else { return }
        try handle.truncate(to: state.walEnd)
        state.walPrepared = state.walEnd
        try sync(handle, site)
    }

    /// One committed entry, as the index takes it.
    struct IndexChange {
        var isDelete: Bool
        var key: [UInt8]
        var sequence: UInt64
        var location: ValueLocation
    }

    /// The fewest entries a commit applies by merging instead of key by key.
    static let bulkApplyMinimum = 2_048

    /// Applies a commit's entries, in commit order, to the index and the per-file usage
    /// counts: key by key, or for a commit that is large beside the index (at least
    /// ``bulkApplyMinimum`` entries and as many as the index has keys) by one merge of the
    /// sorted entries with the index into a freshly built one, O(index + entries log entries)
    /// instead of one descent and one shift of a leaf per key. Both give the same index and
    /// counts. The merge costs about 0.23 µs per key of the result and the key-by-key path
    /// about 0.5 µs per entry (release build, `strata stats` replaying a WAL of 650k entries
    /// into an index of 2.55M keys: 1.20 s open with the merge, 0.79 s key by key), so the
    /// merge pays only once the entries are about as many as the keys already indexed. A
    /// commit of at least ``batchApplyMinimum`` entries that is small beside the index is
    /// applied in one pass (``applyInOnePass(_:index:usage:)``): each leaf its keys reach is
    /// rebuilt once, and a run of consecutive keys (a store's rows moved or imported together)
    /// fills or empties whole leaves instead of shifting one leaf per key.
    static func apply(_ changes: [IndexChange], index: inout KeyIndex, usage: inout [UInt32: FileUsage]) {
        if changes.count >= bulkApplyMinimum, changes.count >= index.count, let merged = merge(changes, into: index, usage: &usage) {
            index = merged
            return
        }
        if changes.count >= batchApplyMinimum {
            applyInOnePass(changes, index: &index, usage: &usage)
            return
        }
        applyKeyByKey(changes, index: &index, usage: &usage)
    }

    /// Applies `changes` (newest last) one key at a time: each a descent, changing the nodes
    /// on its path in place where the index holds them alone.
    static func applyKeyByKey(_ changes: [IndexChange], index: inout KeyIndex, usage: inout [UInt32: FileUsage]) {
        for change in changes {
            apply(
                isDelete: change.isDelete, key: change.key, sequence: change.sequence, location: change.location,
                index: &index, usage: &usage, newest: true)
        }
    }

    /// The positions of `changes` in key order, commit order within a key.
    static func keyOrder(_ changes: [IndexChange]) -> [Int] {
        keyOrder(changes, key: \.key) { _, _ in false }
    }

    /// The positions of `items` in the byte order of their keys; items with equal keys in the
    /// order `precedes` gives, then in their order in `items`. Sorts by each key's 24 bytes
    /// after the prefix every key shares, as three integers (big-endian, so integer order is
    /// byte order), and compares whole keys only where those tie: comparing two arrays' bytes
    /// at every step, and moving the items themselves (their arrays retained and released),
    /// was most of a large commit's merge and of a flush's sort. Three words, not one: a
    /// commit's keys come from a few families that share long prefixes (a row key is `0x01`,
    /// the entity's name, `0x00` and a reference whose high bytes are zero), so the first
    /// eight bytes rarely told two keys apart.
    @inline(__always)
    static func keyOrder<Item>(
        _ items: [Item], key: KeyPath<Item, [UInt8]>, precedes: (Item, Item) -> Bool
    ) -> [Int] {
        guard let first = items.first else { return [] }
        var shared = first[keyPath: key].count
        first[keyPath: key].withUnsafeBytes { head in
            for item in items where shared > 0 {
                item[keyPath: key].withUnsafeBytes { bytes in
                    let limit = min(shared, bytes.count)
                    var common = 0
                    while common < limit, head[common] == bytes[common] { common += 1 }
                    shared = common
                }
            }
        }
        var order: [(head: UInt64, second: UInt64, third: UInt64, position: Int)] = []
        order.reserveCapacity(items.count)
        for (position, item) in items.enumerated() {
            order.append(item[keyPath: key].withUnsafeBytes { bytes in
                (PackedKeys.head(bytes, from: shared), PackedKeys.head(bytes, from: shared + 8),
                 PackedKeys.head(bytes, from: shared + 16), position)
            })
        }
        items.withUnsafeBufferPointer { all in
            order.sort { a, b in
                if a.head != b.head { return a.head < b.head }
                if a.second != b.second { return a.second < b.second }
                if a.third != b.third { return a.third < b.third }
                let keys = all[a.position][keyPath: key].withUnsafeBytes { ka in
                    all[b.position][keyPath: key].withUnsafeBytes { compareKeys(ka, $0) }
                }
                if keys != 0 { return keys < 0 }
                if precedes(all[a.position], all[b.position]) { return true }
                if precedes(all[b.position], all[a.position]) { return false }
                return a.position < b.position
            }
        }
        return order.map(\.position)
    }

    /// The index with `changes` (newest last) merged in, counting usage as applying them one
    /// by one does; `nil`, changing nothing, if the index cannot be rebuilt (a key out of
    /// order: impossible for a valid index).
    static func merge(_ changes: [IndexChange], into index: KeyIndex, usage: inout [UInt32: FileUsage]) -> KeyIndex? {
        var counts = usage
        let sorted = lastChangePerKey(changes, counting: &counts)
        var builder = KeyIndex.Builder(leafCapacity: index.shape.leafCapacity, branchCapacity: index.shape.branchCapacity)
        var next = 0
        func emit(_ change: IndexChange) throws(StoreError) {
            guard !change.isDelete else { return }
            try change.key.withBytes { (raw) throws(StoreError) in
                try builder.append(raw, IndexEntry(sequence: change.sequence, location: change.location))
            }
        }
        do throws(StoreError) {
            var cursor = index.cursor()
            while try cursor.nextEntry({ (key, entry) throws(StoreError) -> Bool in
                while next < sorted.count {
                    let change = changes[sorted[next]]
                    let order = change.key.withUnsafeBytes { compareKeys($0, key) }
                    if order > 0 { break }
                    next += 1
                    if order == 0 {
                        // The indexed entry is replaced or deleted: its bytes are dead.
                        counts[entry.location.fileNumber, default: FileUsage()].deadBytes += UInt64(entry.location.length)
                        try emit(change)
                        return true
                    }
                    try emit(change)
                }
                try builder.append(key, entry)
                return true
            }) != nil {}
            while next < sorted.count {
                try emit(changes[sorted[next]])
                next += 1
            }
        } catch {
            return nil
        }
        usage = counts
        return builder.finish()
    }

    /// The positions of `changes` in key order, only the last (in commit order) of each key,
    /// after adding to `counts` what applying them one by one adds but for the entries they
    /// replace in the index: each entry's bytes, a delete's as tombstone bytes too, and the
    /// bytes of each put that a later change of its key in the same commit replaces as dead.
    private static func lastChangePerKey(_ changes: [IndexChange], counting counts: inout [UInt32: FileUsage]) -> [Int] {
        // Summed per run of one file (a commit's entries are all in one log, or a few), not
        // looked up per entry.
        var file = changes.first?.location.fileNumber ?? 0
        var run = FileUsage()
        for change in changes {
            if change.location.fileNumber != file {
                counts[file, default: FileUsage()].add(run)
                (file, run) = (change.location.fileNumber, FileUsage())
            }
            let length = UInt64(change.location.length)
            run.entryBytes += length
            if change.isDelete { run.tombstoneBytes += length }
        }
        if !changes.isEmpty { counts[file, default: FileUsage()].add(run) }
        // Changes in key order, commit order within a key (a stable sort); the last change of
        // each key wins, and the entries it replaces within the commit are dead.
        let byKey = keyOrder(changes)
        var sorted: [Int] = []
        sorted.reserveCapacity(byKey.count)
        for position in byKey {
            if let last = sorted.last, changes[last].key == changes[position].key {
                if !changes[last].isDelete {
                    counts[changes[last].location.fileNumber, default: FileUsage()].deadBytes += UInt64(changes[last].location.length)
                }
                sorted[sorted.count - 1] = position
            } else {
                sorted.append(position)
            }
        }
        return sorted
    }

    /// The most entries a commit applies in place, key by key, under the engine's lock; a
    /// larger one is applied to a copy and published whole. `compare --level engine`'s random
    /// fill and overwrite (batches of 1,000 random keys into an index of up to a million):
    /// 195k and 260k keys/s applied to a copy (in one pass), about 570k and 640k in place.
    ///
    /// Builds for ThreadSanitizer (`-DSTRATA_TSAN`) apply every commit to a copy: in place, a
    /// commit writes a node a reader released just before (the reader's release and the
    /// writer's uniqueness check order them, in the Swift runtime, which ThreadSanitizer does
    /// not instrument), and ThreadSanitizer reports that as a race it cannot see ordered, as
    /// it would any copy on write handed between threads. The same reason gives those builds
    /// a pthread lock (`StrataSync.Locked`).
    #if STRATA_TSAN
    static let inPlaceApplyMaximum = 0
    #else
    static let inPlaceApplyMaximum = 4_096
    #endif

    /// The fewest entries a commit applies in one pass over the index
    /// (``KeyIndex/apply(sortedChanges:replaced:)``) instead of key by key.
    static let batchApplyMinimum = 64

    /// Applies `changes` (newest last) in one pass over the index: each leaf they reach
    /// rebuilt once with all of its changes. Counts usage as applying them one by one does.
    static func applyInOnePass(_ changes: [IndexChange], index: inout KeyIndex, usage: inout [UInt32: FileUsage]) {
        let sorted = lastChangePerKey(changes, counting: &usage)
        let batch = sorted.map { position in
            let change = changes[position]
            return KeyIndex.BatchChange(
                key: change.key, entry: change.isDelete ? nil : IndexEntry(sequence: change.sequence, location: change.location))
        }
        index.apply(sortedChanges: batch) { _, previous in
            usage[previous.location.fileNumber, default: FileUsage()].deadBytes += UInt64(previous.location.length)
        }
    }

    /// Applies one entry to the index and the per-file usage counts. Shared by commit and
    /// recovery, so both build the same index from the same entries. During recovery an entry
    /// older than the key's indexed one is ignored (it can only come from an older file); a
    /// commit's entries are `newest` by construction, which saves an index descent per key.
    static func apply(
        isDelete: Bool, key: [UInt8], sequence: UInt64, location: ValueLocation, index: inout KeyIndex,
        usage: inout [UInt32: FileUsage], newest: Bool = false
    ) {
        let length = UInt64(location.length)
        usage[location.fileNumber, default: FileUsage()].entryBytes += length
        if !newest, let current = index.lookup(key), current.sequence > sequence {
            usage[location.fileNumber, default: FileUsage()].deadBytes += length
            return
        }
        let previous: IndexEntry?
        if isDelete {
            usage[location.fileNumber, default: FileUsage()].tombstoneBytes += length
            previous = index.remove(key)
        } else {
            previous = index.upsert(key, IndexEntry(sequence: sequence, location: location))
        }
        if let previous {
            usage[previous.location.fileNumber, default: FileUsage()].deadBytes += UInt64(previous.location.length)
        }
    }
}

import Logging
import Dispatch
import Synchronization
import StrataSync

/// StrataEngine: an embedded, append-only, log-structured key/value store.
///
/// Commits go to a write-ahead log; when the log passes a size threshold it rolls over and its
/// live records become an immutable LZ4-compressed segment. Every live key is held in an
/// in-memory index that maps it to its entry on disk. Readers work on snapshots and never wait
/// for a commit's sync.
///
/// For example:
///
/// ```swift
/// let engine = try Engine.open(at: "/tmp/example")
/// var batch = WriteBatch()
/// batch.put(Array("greeting".utf8), Array("hello".utf8))
/// try engine.commit(batch)
/// let value = try engine.get(Array("greeting".utf8))   // "hello"
/// try engine.close()
/// ```
///
/// One process (and one `Engine`) at a time may open a store; a second gets
/// ``StoreError/Code/locked``. An engine is safe to use from many threads.
public final class Engine: Sendable {
    /// The format version of the files this build writes and the newest it reads ([MAN-3],
    /// [WAL-1], [SEG-1]): a store written in a newer format is refused at open.
    public static var formatVersion: UInt32 { Format.version }

    // MARK: Constant after open

    /// The store's directory.
    public let path: String
    let options: EngineOptions
    let fileSystem: any FileSystem
    let lock: any FileLock
    /// What open in repair mode dropped, or `nil` when not opened with repair.
    public let repairReport: RepairReport?
    let flushQueue = DispatchQueue(label: "strata.engine.flush")
    let compactionQueue = DispatchQueue(label: "strata.engine.compactor")
    /// Decoded values by key, validated by sequence number; pinned keys are never evicted.
    let rowCache: RowCache
    /// Decompressed segment blocks snapshots read, shared by every segment reader.
    let blockCache: BlockCache
    /// The compactor's counters and pause flag.
    let compaction: Locked<CompactionState> = Locked(CompactionState())
    /// The owner's rewrite of live values as compaction copies them ([CMP-7]); `nil` for none.
    let compactionRewriter: Locked<(@Sendable (_ key: [UInt8], _ value: [UInt8]) -> [UInt8]?)?> = Locked(nil)
    let syncTimer: Locked<DispatchSourceTimer?> = Locked(nil)

    // MARK: State below is protected by `shared`: what readers see.

    struct SharedState: Sendable {
        var index: KeyIndex
        /// The newest sequence number whose transaction is visible.
        var sequence: UInt64
        var files: [UInt32: LiveFile]
        var usage: [UInt32: FileUsage]
        /// Set once, when the engine is poisoned (turns read-only for good) by a failed sync
        /// ([WAL-4]) or a failure that leaves its files in an unknown state. The first one wins.
        var failure: StoreError?
        var isClosed = false
    }
    let shared: Locked<SharedState>

    // MARK: State below is protected by `writer`, held by the group-commit leader, by
    // rollover, by the flush's swap and by close. Readers never take it.

    struct WriterState: Sendable {
        var manifest: Manifest
        var wal: LiveFile
        var walEnd: UInt64
        var walSynced: UInt64
        /// [WAL-6] Where the active WAL's zero-filled space ends (its file size): at least
        /// ``walEnd`` whenever it is above it.
        var walPrepared: UInt64 = 0
        var lastSequence: UInt64
        /// Rolled-over WALs waiting to become segments, oldest first.
        var pendingFlushes: [UInt32]
        /// The smallest sequence number in each live segment (for dropping tombstones, [CMP-4]).
        var segmentMinSequence: [UInt32: UInt64]
        /// The `SYNC` file each WAL sync records the durable bound in ([DUR-2]); `nil` when the
        /// engine was opened read-only.
        var durableBound: DurableBoundFile?
    }
    let writer: Locked<WriterState>

    /// The engine's metrics; made once, each thread-safe.
    let metrics: EngineMetrics

    /// The logger the engine was opened with (``EngineOptions/logger``): layers above the
    /// engine (StrataStore, the tool's repairs) log their own events there, beside the engine's.
    public var logger: Logger { options.logger }

    /// Commits waiting for a leader. Protected by its own lock, taken only briefly.
    let pending: Locked<[CommitRequest]> = Locked([])
    /// Serialises flushes (one WAL becomes a segment at a time); holds how many have completed.
    let flushLock: Locked<UInt64> = Locked(0)

    init(
        path: String, options: EngineOptions, lock: any FileLock, repairReport: RepairReport?, blockCache: BlockCache,
        shared: SharedState, writer: WriterState
    ) {
        self.path = path
        self.options = options
        self.fileSystem = options.fileSystem
        self.lock = lock
        self.repairReport = repairReport
        self.shared = Locked(shared)
        self.writer = Locked(writer)
        self.rowCache = RowCache(budgetBytes: options.rowCacheBytes)
        self.blockCache = blockCache
        self.metrics = EngineMetrics(path: path, factory: options.metricsFactory)
    }

    deinit {
        syncTimer.withLock { $0?.cancel() }
        lock.unlock()
    }

    func filePath(_ name: String) -> String { path + "/" + name }

    // MARK: Reads

    /// A consistent view of the store at the newest visible sequence number.
    public func snapshot() throws(StoreError) -> Snapshot {
        try shared.withLock { (state) throws(StoreError) -> Snapshot in
            guard !state.isClosed else { throw StoreError(.closed, "the engine was closed", path: path) }
            return Snapshot(sequence: state.sequence, index: state.index, files: state.files, cache: rowCache)
        }
    }

    /// The value of `key`, or `nil`.
    public func get(_ key: [UInt8]) throws(StoreError) -> [UInt8]? {
        try snapshot().get(key)
    }

    // MARK: The row cache

    /// Pins `keys` in the row cache: each call adds one to each key's count, and a key whose
    /// count is above zero keeps its row cached whatever the budget (a key not yet cached is
    /// cached on its next read and then kept). Mirrors the incremental-store contract's
    /// register counts.
    public func pin(_ keys: [[UInt8]]) {
        rowCache.pin(keys)
    }

    /// Removes one from each key's pin count. Throws ``StoreError/Code/invalidArgument``, and
    /// changes nothing, if any key's count is already zero (an unbalanced unregister).
    public func unpin(_ keys: [[UInt8]]) throws(StoreError) {
        try rowCache.unpin(keys)
    }

    /// Adds pins counted outside the engine (see ``RowPinSource``): while the source says a
    /// key is pinned, its cached row is never evicted. A source stays until
    /// ``removePinSource(_:)``.
    public func addPinSource(_ source: any RowPinSource) {
        rowCache.addPinSource(source)
    }

    /// Removes a pin source (by identity); rows only it pinned become evictable.
    public func removePinSource(_ source: any RowPinSource) {
        rowCache.removePinSource(source)
    }

    /// The row cache's counters: hits, misses, evictions, pinned and unpinned bytes.
    public func cacheStats() -> RowCacheStats {
        rowCache.stats
    }

    /// The block cache's counters: hits, misses, evictions, blocks and bytes held.
    public func blockCacheStats() -> BlockCacheStats {
        blockCache.stats
    }

    // MARK: Writes

    /// Puts `value` at `key` in a transaction of its own.
    @discardableResult
    public func put(_ key: [UInt8], _ value: [UInt8]) throws(StoreError) -> UInt64 {
        var batch = WriteBatch()
        batch.put(key, value)
        return try commit(batch)
    }

    /// Deletes `key` in a transaction of its own.
    @discardableResult
    public func delete(_ key: [UInt8]) throws(StoreError) -> UInt64 {
        var batch = WriteBatch()
        batch.delete(key)
        return try commit(batch)
    }

    /// Commits `batch` atomically and returns its sequence number.
    ///
    /// Under ``Durability/full`` the transaction is on stable storage when this returns.
    /// Concurrent committers share one WAL write and one sync (group commit). Readers see the
    /// whole transaction or none of it.
    ///
    /// - Throws: ``StoreError/Code/invalidArgument`` for an oversized key, value or batch;
    ///   ``StoreError/Code/readOnly`` after a failed sync or when opened read-only;
    ///   ``StoreError/Code/closed``; ``StoreError/Code/io`` when the write fails.
    @discardableResult
    public func commit(_ batch: WriteBatch) throws(StoreError) -> UInt64 {
        try wait(for: submit(batch))
    }

    /// Queues `batch` for the next group commit and returns at once, without waiting for it:
    /// ``wait(for:)`` then commits it (with whatever else is queued) and returns its sequence.
    /// Transactions commit in the order they were submitted.
    ///
    /// With `after`, the transaction commits only if that earlier one did: a writer that
    /// built `batch` on what an earlier, not yet committed transaction writes (as StrataStore's
    /// saves do, to share a sync) is failed with it rather than applied without it.
    ///
    /// Every ticket must be waited for; one that is not stays queued until another commit or
    /// wait runs.
    ///
    /// - Throws: as ``commit(_:)``, for what can be checked before the commit.
    public func submit(_ batch: WriteBatch, after earlier: CommitTicket? = nil) throws(StoreError) -> CommitTicket {
        try batch.validate()
        if options.readOnly { throw StoreError(.readOnly, "the engine was opened read-only", path: path) }
        if batch.isEmpty { return CommitTicket(request: nil, emptySequence: try snapshot().sequence, submitted: .now) }
        let request = CommitRequest(operations: batch.operations, after: earlier?.request)
        pending.withLock { $0.append(request) }
        return CommitTicket(request: request, emptySequence: 0, submitted: .now)
    }

    /// Commits the transaction of `ticket` (leading a group commit of every queued transaction
    /// if no other thread is) and returns its sequence number. Waiting again for the same
    /// ticket returns the same outcome.
    ///
    /// - Throws: as ``commit(_:)``; ``StoreError/Code/io`` naming the earlier transaction when
    ///   one the ticket was submitted after failed.
    @discardableResult
    public func wait(for ticket: CommitTicket) throws(StoreError) -> UInt64 {
        guard let request = ticket.request else { return ticket.emptySequence }
        defer { if request.claimTiming() { metrics.commit.recordInterval(since: ticket.submitted) } }
        let needsFlush = writer.withLock { (state) -> Bool in
            if !request.isDone { lead(&state) }
            return !state.pendingFlushes.isEmpty
        }
        if needsFlush { scheduleFlushes() }
        return try request.result()
    }

    /// Syncs the WAL now, whatever the durability setting.
    ///
    /// - Throws: ``StoreError/Code/io`` when the sync fails, which poisons the engine (every
    ///   later commit, flush, compaction and sync throws ``StoreError/Code/readOnly``);
    ///   ``StoreError/Code/readOnly`` when it is already poisoned; ``StoreError/Code/closed``.
    public func sync() throws(StoreError) {
        try syncWAL(.explicitSync)
    }

    /// Syncs the active WAL if it holds unsynced records; a failure poisons the engine.
    func syncWAL(_ site: SyncSite) throws(StoreError) {
        try writer.withLock { (state) throws(StoreError) in
            try checkWritable()
            guard state.walSynced < state.walEnd, case .wal(let handle, _) = state.wal.content else { return }
            try sync(handle, site)
            state.walSynced = state.walEnd
            recordDurable(&state, through: state.lastSequence)
        }
    }

    /// [DUR-2] After a WAL sync (writer lock held): records in `SYNC` that every transaction up to
    /// `sequence` is durable, with one 32-byte write in place that is not synced (the next
    /// writeback or `close()` makes it durable; until then the durable copy is an older, lower
    /// bound, which is still true). The write goes to the slot not holding the newest record,
    /// so a crash that tears it leaves the other. A failed write is ignored and the slot is
    /// written again next time: the bound only lags.
    func recordDurable(_ state: inout WriterState, through sequence: UInt64) {
        guard var bound = state.durableBound, sequence > bound.recorded else { return }
        let record = SyncRecord(walNumber: state.wal.number, sequence: sequence, walEnd: UInt32(clamping: state.walSynced))
        let handle = bound.handle
        let offset = UInt64(bound.nextSlot * Format.syncRecordSize)
        let written = withUnsafeTemporaryAllocation(byteCount: Format.syncRecordSize, alignment: 8) { buffer -> Bool in
            record.encode(into: buffer)
            do throws(StoreError) {
                try handle.write(UnsafeRawBufferPointer(buffer), at: offset)
                return true
            } catch {
                return false
            }
        }
        guard written else { return }
        bound.recorded = sequence
        bound.nextSlot = 1 - bound.nextSlot
        bound.isDirty = true
        state.durableBound = bound
    }

    /// Throws if the engine is closed or has turned read-only.
    func checkWritable() throws(StoreError) {
        try shared.withLock { (state) throws(StoreError) in
            if state.isClosed { throw StoreError(.closed, "the engine was closed", path: path) }
            if let failure = state.failure { throw poisonedError(failure, "it accepts no commit, flush, compaction or sync") }
        }
    }

    /// The error of an operation refused because the engine is poisoned by `failure`.
    func poisonedError(_ failure: StoreError, _ consequence: String) -> StoreError {
        StoreError(
            .readOnly,
            "the engine is poisoned and read-only for good after an earlier failure (\(failure)); \(consequence); reopen the store to recover",
            path: failure.path, offset: failure.offset, errno: failure.errno)
    }

    /// Turns the engine read-only after a failure it must not paper over (a failed sync never
    /// gets retried: the data it covered may be lost).
    func poison(_ error: StoreError) {
        let first = shared.withLock { state in
            if state.failure != nil { return false }
            state.failure = error
            return true
        }
        guard first else { return }
        var metadata: Logger.Metadata = ["path": "\(path)", "error": "\(error)"]
        if let file = error.path { metadata["file"] = "\(file)" }
        if let offset = error.offset { metadata["offset"] = "\(offset)" }
        if let errno = error.errno { metadata["errno"] = "\(errno)" }
        options.logger.error("engine poisoned: read-only until reopened", metadata: metadata)
    }

    // MARK: Syncs ([WAL-4])

    /// Where the engine syncs a file while open; named in the error of a poisoned engine.
    enum SyncSite: String, Sendable {
        case walAppend = "a commit's WAL sync"
        case explicitSync = "Engine.sync()"
        case backgroundSync = "the background WAL sync"
        case rollover = "WAL rollover"
        case flush = "a flush"
        case compaction = "a compaction"
        case close = "close"
    }

    /// Poisons the engine with sync failure `error` at `site` and returns the error to throw.
    /// Every failed sync while the engine is open goes through here: nothing ever retries it.
    func syncFailed(_ error: StoreError, _ site: SyncSite) -> StoreError {
        let failure = StoreError(
            error.code, "sync failed during \(site.rawValue): \(error.message)", path: error.path, offset: error.offset,
            errno: error.errno)
        poison(failure)
        return failure
    }

    /// Syncs `handle` (`fdatasync`); a failure poisons the engine.
    func sync(_ handle: any FileHandle, _ site: SyncSite) throws(StoreError) {
        let start = ContinuousClock.now
        do throws(StoreError) { try handle.sync() } catch { throw syncFailed(error, site) }
        metrics.sync.recordInterval(since: start)
    }

    /// Syncs the store's directory; a failure poisons the engine.
    func syncDirectory(_ site: SyncSite) throws(StoreError) {
        do throws(StoreError) { try fileSystem.syncDirectory(path) } catch { throw syncFailed(error, site) }
    }

    // MARK: Close

    /// Finishes background work, syncs the WAL and the durable bound (`SYNC`, SPEC.md [DUR-2])
    /// and releases the store's lock. Idempotent.
    ///
    /// A poisoned engine ([WAL-4]) syncs nothing here: a sync that failed once is never
    /// retried, since a retry can report success for data the system already dropped. Close
    /// then releases the lock and throws ``StoreError/Code/readOnly`` naming the failure, so
    /// the caller learns that what was not synced before it may be lost. A sync failing in
    /// close itself throws ``StoreError/Code/io``. The file handles close, unsynced, when the
    /// engine and its snapshots are released.
    public func close() throws(StoreError) {
        let writeOutFailure = writeOutLogBeforeClose()
        let wasClosed = shared.withLock { state -> Bool in
            defer { state.isClosed = true }
            return state.isClosed
        }
        guard !wasClosed else { return }
        syncTimer.withLock {
            $0?.cancel()
            $0 = nil
        }
        flushQueue.sync {}
        pauseCompaction()
        compactionQueue.sync {}
        var failure: StoreError? = nil
        writer.withLock { state in
            guard !options.readOnly else { return }
            if let poisoned = shared.withLock({ $0.failure }) {
                failure = poisonedError(poisoned, "close synced nothing, so what was not synced before may be lost")
                return
            }
            do throws(StoreError) {
                // [WAL-6] A closed store's WAL ends at its last record.
                if case .wal(let handle, _) = state.wal.content { try trimPreparedWAL(handle, &state, .close) }
                if state.walSynced < state.walEnd, case .wal(let handle, _) = state.wal.content {
                    try sync(handle, .close)
                    state.walSynced = state.walEnd
                    recordDurable(&state, through: state.lastSequence)
                }
                // [DUR-2] A closed store's durable bound is exact and durable.
                if let bound = state.durableBound, bound.isDirty {
                    try sync(bound.handle, .close)
                    state.durableBound?.isDirty = false
                }
            } catch {
                failure = error
            }
        }
        lock.unlock()
        // A failed write-out poisoned the engine after every commit was synced: its own error
        // says so, where the poisoned engine's would say that nothing was synced.
        if let failure { throw writeOutFailure ?? failure }
    }

    /// [MAN-6] Before a clean close: when the active WAL holds at least
    /// ``EngineOptions/flushAtCloseBytes`` of records, syncs it, then writes it out as a segment
    /// (``flush()``), so that the next open does not replay it. Returns the error to report
    /// when the write-out failed: every commit was synced first, and the log that stays is
    /// replayed by the next open. A failing sync is left to the close, which reports it.
    private func writeOutLogBeforeClose() -> StoreError? {
        guard !options.readOnly, options.flushAtCloseBytes > 0,
            shared.withLock({ !$0.isClosed && $0.failure == nil }),
            writer.withLock({ $0.walEnd - UInt64(Format.walHeaderSize) }) >= options.flushAtCloseBytes
        else { return nil }
        do throws(StoreError) {
            try sync()
        } catch {
            return nil
        }
        do throws(StoreError) {
            try flush()
        } catch {
            var reported = error
            reported.message =
                "close synced every commit, then writing the log out as a segment failed (\(error.message)); the log stays and the next open replays it"
            return reported
        }
        return nil
    }
}

/// The `SYNC` file of a read-write engine ([DUR-2]), kept in the writer state.
struct DurableBoundFile: Sendable {
    /// Open for writing; each WAL sync overwrites one of its two 32-byte slots in place.
    var handle: any FileHandle
    /// The sequence the file holds (written; durable once synced).
    var recorded: UInt64
    /// The slot the next record goes to: the one not holding `recorded`.
    var nextSlot: Int
    /// Whether the file was written since it was last synced.
    var isDirty: Bool
}

/// A transaction queued by ``Engine/submit(_:after:)``, to wait for with ``Engine/wait(for:)``.
public struct CommitTicket: Sendable {
    let request: CommitRequest?
    /// The sequence an empty batch "commits" at (the snapshot's).
    let emptySequence: UInt64
    /// When it was submitted (the commit timer runs from here).
    let submitted: ContinuousClock.Instant
}

/// One committer's batch waiting for (or handled by) a group-commit leader.
final class CommitRequest: Sendable {
    let operations: [WALRecord.Operation]
    /// The transaction this one was built on, which must commit for it to; let go once this
    /// one is finished (a stream of dependent commits must not hold every earlier one).
    private let after: Locked<CommitRequest?>
    private let outcome: Locked<Result<UInt64, StoreError>?> = Locked(nil)
    /// Whether a wait already recorded the commit's time (a ticket may be waited for twice).
    private let timed = Atomic<Bool>(false)

    init(operations: [WALRecord.Operation], after: CommitRequest? = nil) {
        self.operations = operations
        self.after = Locked(after)
    }

    /// Whether it was submitted after another transaction (finished or not).
    var hasDependency: Bool { after.withLock { $0 != nil } }

    /// Whether the transaction it was built on failed.
    var dependencyFailed: Bool { after.withLock { $0?.failed ?? false } }

    var isDone: Bool { outcome.withLock { $0 != nil } }

    /// Claims the recording of the commit's time: `true` for the first caller only.
    func claimTiming() -> Bool { !timed.exchange(true, ordering: .relaxed) }

    /// Whether the transaction failed (`false` while it waits).
    var failed: Bool {
        outcome.withLock { outcome in
            if case .failure? = outcome { return true }
            return false
        }
    }

    func finish(_ result: Result<UInt64, StoreError>) {
        outcome.withLock { $0 = result }
        after.withLock { $0 = nil }
    }

    func result() throws(StoreError) -> UInt64 {
        // The leader finished the request before the committer could take the writer lock.
        guard let result = outcome.withLock({ $0 }) else {
            throw StoreError(.io, "commit was not processed (internal error)")
        }
        return try result.get()
    }
}

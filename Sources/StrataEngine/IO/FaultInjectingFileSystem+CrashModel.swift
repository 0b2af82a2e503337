import Glibc

/// The richer crash model of ``FaultInjectingFileSystem``: what a crash keeps of unsynced
/// writes and directory changes, crashes armed at any I/O operation, and the faults that
/// ``FaultInjectingFileSystem/failNext(_:matching:skipping:errno:times:)`` and
/// ``FaultInjectingFileSystem/spaceLimit`` do not cover (a write that fails part-way, a failed
/// sync that loses the unsynced writes).
///
/// Every file records the writes and truncations made since its last sync, in order; every
/// directory records the entry changes (creations, renames, removals) made since its last
/// sync. ``FaultInjectingFileSystem/crash(keeping:)`` decides, per file and per directory,
/// which of them reach the disk: none (``FaultInjectingFileSystem/crash()``), all, a prefix,
/// or a seeded random subset applied in a random order with a torn last write, as SQLite's
/// crash VFS and RocksDB's fault-injection file system do. Directory changes are kept as a
/// prefix per directory: POSIX orders nothing across directories, and real file systems
/// journal one directory's changes in order.
extension FaultInjectingFileSystem {
    /// What a crash keeps of the writes and directory changes not yet synced. Each file and
    /// each directory is decided on its own.
    public enum CrashPolicy: Sendable, Hashable, CustomStringConvertible {
        /// Nothing unsynced survives: what ``FaultInjectingFileSystem/crash()`` does.
        case none
        /// Every unsynced write and directory change survives, as if everything was synced.
        case all
        /// The first `n` unsynced writes (or truncations) of each file, in the order they were
        /// made, and the first `n` unsynced changes of each directory survive.
        case prefix(Int)
        /// As ``prefix(_:)``, and the next write of each file survives torn: its first half,
        /// cut at a sector boundary of the file (`.sector`) or at any byte (`.byte`).
        case tornPrefix(Int, TearGranularity)
        /// A seeded random choice per file and directory: each unsynced write or truncation of
        /// a file survives with probability 1/2, those that do are applied in a random order,
        /// and the last one applied, if a write, is torn with probability 1/2 (cut at a random
        /// point of the given granularity); a random prefix of each directory's changes
        /// survives. The same seed on the same state makes the same choice.
        case random(seed: UInt64, tearing: TearGranularity = .sector(512))

        public var description: String {
            switch self {
            case .none: return "none"
            case .all: return "all"
            case .prefix(let n): return "prefix(\(n))"
            case .tornPrefix(let n, let granularity): return "tornPrefix(\(n), \(granularity))"
            case .random(let seed, let granularity): return "random(seed: \(seed), \(granularity))"
            }
        }
    }

    /// Where a torn write may be cut.
    public enum TearGranularity: Sendable, Hashable, CustomStringConvertible {
        /// At a multiple of this many bytes from the start of the file (a disk sector or page):
        /// what a device that writes whole sectors atomically leaves.
        case sector(Int)
        /// At any byte: the worst case, a device without atomic sectors.
        case byte

        public var description: String {
            switch self {
            case .sector(let size): return "sector \(size)"
            case .byte: return "byte"
            }
        }
    }

    /// When an armed crash halts the file system relative to its operation
    /// (``crash(atOperation:timing:)``).
    public enum OperationTiming: Sendable, Hashable, CustomStringConvertible {
        /// The operation is not performed; the file system halts and the call throws.
        case before
        /// The operation is performed, then the file system halts and the call throws.
        case after

        public var description: String { self == .before ? "before" : "after" }
    }

    /// One operation that changed (or tried to change) the file system, as
    /// ``operationLog`` lists it.
    public struct OperationRecord: Sendable, Hashable, CustomStringConvertible {
        /// The kind: ``Operation/write``, ``Operation/truncate``, ``Operation/sync``,
        /// ``Operation/syncDirectory``, ``Operation/rename``, ``Operation/remove``,
        /// ``Operation/createDirectory``, or ``Operation/open`` and ``Operation/lock`` for the
        /// calls that create a file.
        public var operation: Operation
        /// The path the call named (the source, for a rename).
        public var path: String

        public var description: String { "\(operation) \(path)" }
    }

    /// Simulates power loss and reboot like ``crash()``, but keeps what `policy` chooses of
    /// each file's unsynced writes and each directory's unsynced changes (they become durable
    /// and visible); everything else not durable is lost. `crash(keeping: .none)` is
    /// ``crash()``.
    public func crash(keeping policy: CrashPolicy) {
        state.withLock { s in s.keepUnsynced(policy) }
        crash()
    }

    /// How many I/O operations (writes, truncations, syncs, directory syncs, renames, removals
    /// and creations of files and directories) reached the file system so far: calls made
    /// while it was not halted, on a valid handle, including calls that then failed. Reads,
    /// lookups and opens of existing files are not counted.
    public var operationCount: Int { state.withLock { $0.journal.operations } }

    /// Every operation ``operationCount`` counted, in order: entry `i` is operation `i + 1`.
    public var operationLog: [OperationRecord] { state.withLock { $0.journal.log } }

    /// Arms a crash at the `n`-th I/O operation from now (1-based, counted as
    /// ``operationCount`` counts): with `.before` the operation is not performed, with
    /// `.after` it is; either way the file system halts and the call throws. Replaces any
    /// crash armed before by this call; ``crash(atSyncPoint:timing:)`` is independent.
    public func crash(atOperation n: Int, timing: OperationTiming) {
        state.withLock { s in s.journal.trigger = (s.journal.operations + max(n, 1), timing) }
    }

    /// A copy of this file system: its files, directories, durable state, unsynced writes and
    /// changes, faults and counters. Handles and locks of this file system do not carry over
    /// (they are invalid on the copy), so a copy is meant to be crashed: an enumerator halts a
    /// workload once and crashes copies with several ``CrashPolicy`` values.
    public func copy() -> FaultInjectingFileSystem {
        let snapshot = state.withLock { s in s }
        let copy = FaultInjectingFileSystem()
        copy.state.withLock { s in
            s = snapshot
            s.generation += 1  // the original's handles name the old generation
            s.openHandles = [:]
            s.locks = [:]
            s.collectGarbage()
        }
        return copy
    }

    /// How many writes and truncations of the file at `path` are not yet synced (0 if there is
    /// no such file).
    public func unsyncedWriteCount(of path: String) -> Int {
        state.withLock { s in
            guard let parts = try? FaultState.components(path), let inode = s.lookup(parts) else { return 0 }
            return s.journal.files[inode]?.count ?? 0
        }
    }

    /// How many entry changes of the directory at `path` are not yet synced.
    public func unsyncedChangeCount(ofDirectory path: String) -> Int {
        state.withLock { s in
            guard let parts = try? FaultState.components(path), let inode = s.lookup(parts) else { return 0 }
            return s.journal.directories[inode]?.count ?? 0
        }
    }

    /// Makes the next write whose path contains `pathFragment` store its first `kept` bytes
    /// and then throw ``StoreError/Code/io`` with `errno` (`ENOSPC` or `EIO`): a write that
    /// fails part-way, as `pwrite` does when it writes some bytes and the next call fails.
    /// The file system keeps running.
    public func failNextWrite(matching pathFragment: String? = nil, afterWriting kept: Int, errno: Int32 = EIO) {
        state.withLock { s in s.journal.partialWrite = (pathFragment, max(kept, 0), errno) }
    }

    /// Whether a sync failed by an injected fault loses the file's unsynced writes for good,
    /// as Linux does (the dirty pages are marked clean and the error reported once; a later
    /// sync succeeds without writing them, PostgreSQL's "fsyncgate"). Reads still see them
    /// until a crash. Default `false`: a failed sync has no effect, and a later sync makes the
    /// writes durable.
    public var failedSyncLosesWrites: Bool {
        get { state.withLock { $0.journal.failedSyncLosesWrites } }
        set { state.withLock { $0.journal.failedSyncLosesWrites = newValue } }
    }
}

/// The unsynced writes and directory changes of a ``FaultInjectingFileSystem`` and its
/// operation counter; part of ``FaultState``, so protected by the file system's lock.
struct CrashJournal {
    /// One unsynced change of a file's bytes.
    enum FileChange {
        case write(offset: Int, bytes: [UInt8])
        case truncate(size: Int)
    }

    /// One unsynced directory operation: the entries it set (an inode) or removed (nil),
    /// applied together.
    typealias EntryChange = [(name: String, inode: Int?)]

    /// Unsynced changes by file inode, oldest first. Invariant: applying them all to the
    /// durable bytes gives the current bytes, unless the inode is in ``lost``.
    var files: [Int: [FileChange]] = [:]
    /// Unsynced entry changes by directory inode, oldest first. Applying them all to the
    /// durable entries gives the current entries.
    var directories: [Int: [EntryChange]] = [:]
    /// Files whose unsynced writes a failed sync lost (``FaultInjectingFileSystem/failedSyncLosesWrites``).
    var lost: Set<Int> = []
    var failedSyncLosesWrites = false
    /// A pending ``FaultInjectingFileSystem/failNextWrite(matching:afterWriting:errno:)``.
    var partialWrite: (fragment: String?, kept: Int, errno: Int32)?
    /// Operations counted so far, and what each was.
    var operations = 0
    var log: [FaultInjectingFileSystem.OperationRecord] = []
    var trigger: (operation: Int, timing: FaultInjectingFileSystem.OperationTiming)?

    /// Applies `change` to `bytes`, zero-filling a gap; a write keeps only its first `kept` bytes.
    static func apply(_ change: FileChange, to bytes: inout [UInt8], keeping kept: Int? = nil) {
        switch change {
        case .truncate(let size):
            FaultState.resize(&bytes, to: size)
        case .write(let offset, let data):
            let count = min(kept ?? data.count, data.count)
            guard count > 0 else { return }
            if offset + count > bytes.count { bytes.append(contentsOf: repeatElement(0, count: offset + count - bytes.count)) }
            bytes.replaceSubrange(offset..<offset + count, with: data[0..<count])
        }
    }
}

extension FaultState {
    // MARK: Recording

    /// Counts an operation and fires an armed operation crash: throws for `.before`, returns
    /// true for `.after` (the caller performs it, then calls ``haltIfOperationArmed(_:_:)``).
    mutating func operationPoint(_ op: FaultInjectingFileSystem.Operation, _ path: String) throws(StoreError) -> Bool {
        journal.operations += 1
        journal.log.append(.init(operation: op, path: path))
        guard let trigger = journal.trigger, trigger.operation == journal.operations else { return false }
        journal.trigger = nil
        if trigger.timing == .after { return true }
        halted = "crash armed before operation \(journal.operations) (\(op) \(path))"
        throw haltedError(path)
    }

    /// Halts after an operation that ``operationPoint(_:_:)`` armed for `.after`.
    mutating func haltIfOperationArmed(_ armed: Bool, _ path: String) throws(StoreError) {
        guard armed else { return }
        haltAfterOperation()
        throw haltedError(path)
    }

    /// Marks the file system halted after the current operation (for a call that throws its
    /// own error after an `.after` operation point).
    mutating func haltAfterOperation() {
        halted = "crash armed after operation \(journal.operations)"
    }

    mutating func recordWrite(_ inode: Int, at offset: Int, _ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        journal.files[inode, default: []].append(.write(offset: offset, bytes: Array(bytes)))
    }

    mutating func recordTruncate(_ inode: Int, to size: Int) {
        journal.files[inode, default: []].append(.truncate(size: size))
    }

    /// Records one directory operation: `changes` applied together to directory `directory`.
    mutating func recordEntries(_ directory: Int, _ changes: CrashJournal.EntryChange) {
        journal.directories[directory, default: []].append(changes)
    }

    /// A file sync: its bytes become durable (without the writes a failed sync lost).
    mutating func makeDurable(_ inode: Int) {
        if journal.lost.remove(inode) != nil {
            for change in journal.files[inode] ?? [] { CrashJournal.apply(change, to: &inodes[inode].durable) }
        } else {
            inodes[inode].durable = inodes[inode].current
        }
        journal.files[inode] = nil
    }

    /// A file sync failed by an injected fault: with ``CrashJournal/failedSyncLosesWrites``
    /// the unsynced writes can no longer become durable.
    mutating func syncFailed(_ inode: Int) {
        guard journal.failedSyncLosesWrites, journal.files[inode] != nil else { return }
        journal.files[inode] = nil
        journal.lost.insert(inode)
    }

    /// A directory sync: its entries become durable.
    mutating func makeEntriesDurable(_ inode: Int) {
        inodes[inode].durableEntries = inodes[inode].entries
        journal.directories[inode] = nil
    }

    /// The pending partial-write fault for a write to `path`, consumed.
    mutating func takePartialWrite(_ path: String) -> (kept: Int, errno: Int32)? {
        guard let partial = journal.partialWrite, Self.matches(partial.fragment, path) else { return nil }
        journal.partialWrite = nil
        return (partial.kept, partial.errno)
    }

    /// XORs byte `offset` of every unsynced write of `inode` that covers it (``FaultInjectingFileSystem/flipBits(in:at:mask:)``
    /// damages what a crash may keep, too).
    mutating func flipUnsynced(_ inode: Int, at offset: Int, mask: UInt8) {
        guard var changes = journal.files[inode] else { return }
        for index in changes.indices {
            guard case .write(let start, var bytes) = changes[index], start <= offset, offset < start + bytes.count else { continue }
            bytes[offset - start] ^= mask
            changes[index] = .write(offset: start, bytes: bytes)
        }
        journal.files[inode] = changes
    }

    /// Inodes that unsynced changes of directory `inode` name: a crash may bring them back.
    func journalReferences(of inode: Int) -> [Int] {
        (journal.directories[inode] ?? []).flatMap { $0.compactMap(\.inode) }
    }

    /// Drops the journal's record of a freed inode.
    mutating func forgetJournal(of inode: Int) {
        journal.files[inode] = nil
        journal.directories[inode] = nil
        journal.lost.remove(inode)
    }

    // MARK: Crashing

    /// Makes durable what `policy` keeps of every unsynced write and directory change, then
    /// empties the journal (the reboot that follows makes the durable state current).
    mutating func keepUnsynced(_ policy: FaultInjectingFileSystem.CrashPolicy) {
        defer {
            journal.files = [:]
            journal.directories = [:]
            journal.lost = []
            journal.trigger = nil
            journal.partialWrite = nil
        }
        if case .none = policy { return }
        var random = CrashRandom(seed: { if case .random(let seed, _) = policy { return seed } else { return 0 } }())
        for directory in journal.directories.keys.sorted() {
            let changes = journal.directories[directory] ?? []
            let kept: Int
            switch policy {
            case .none: kept = 0
            case .all: kept = changes.count
            case .prefix(let n), .tornPrefix(let n, _): kept = min(max(n, 0), changes.count)
            case .random: kept = random.below(changes.count + 1)
            }
            for change in changes.prefix(kept) {
                for (name, inode) in change { inodes[directory].durableEntries[name] = inode }
            }
        }
        for file in journal.files.keys.sorted() where inodes[file].alive {
            let changes = journal.files[file] ?? []
            var durable = inodes[file].durable
            switch policy {
            case .none:
                break
            case .all:
                for change in changes { CrashJournal.apply(change, to: &durable) }
            case .prefix(let n):
                for change in changes.prefix(max(n, 0)) { CrashJournal.apply(change, to: &durable) }
            case .tornPrefix(let n, let granularity):
                let n = max(n, 0)
                for change in changes.prefix(n) { CrashJournal.apply(change, to: &durable) }
                if n < changes.count {
                    let torn = changes[n]
                    CrashJournal.apply(torn, to: &durable, keeping: Self.halfTear(torn, granularity))
                }
            case .random(_, let granularity):
                var chosen = changes.filter { _ in random.below(2) == 1 }
                random.shuffle(&chosen)
                let tearLast = random.below(2) == 1
                for (position, change) in chosen.enumerated() {
                    let kept = tearLast && position == chosen.count - 1 ? Self.randomTear(change, granularity, &random) : nil
                    CrashJournal.apply(change, to: &durable, keeping: kept)
                }
            }
            inodes[file].durable = durable
        }
    }

    /// How many bytes of `change` the first half of it keeps, cut at `granularity`.
    static func halfTear(_ change: CrashJournal.FileChange, _ granularity: FaultInjectingFileSystem.TearGranularity) -> Int? {
        guard case .write(let offset, let bytes) = change else { return nil }
        let half = bytes.count / 2
        guard case .sector(let size) = granularity, size > 1 else { return half }
        let end = (offset + half) / size * size  // the last sector boundary at or before the middle
        return max(end - offset, 0)
    }

    /// A random cut of `change`: any byte, or a sector boundary inside the write (nothing when
    /// the write crosses none).
    static func randomTear(
        _ change: CrashJournal.FileChange, _ granularity: FaultInjectingFileSystem.TearGranularity, _ random: inout CrashRandom
    ) -> Int? {
        guard case .write(let offset, let bytes) = change, !bytes.isEmpty else { return nil }
        guard case .sector(let size) = granularity, size > 1 else { return random.below(bytes.count) }
        let first = (offset + size - 1) / size * size  // the first boundary at or after the start
        let boundaries = stride(from: first, to: offset + bytes.count, by: size).map { $0 - offset }
        guard !boundaries.isEmpty else { return 0 }
        return boundaries[random.below(boundaries.count)]
    }
}

/// SplitMix64: the crash policies' deterministic choices.
struct CrashRandom {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `0..<bound` (0 when `bound` is at most 1).
    mutating func below(_ bound: Int) -> Int {
        bound <= 1 ? 0 : Int(next() % UInt64(bound))
    }

    mutating func shuffle<T>(_ items: inout [T]) {
        guard items.count > 1 else { return }
        for i in stride(from: items.count - 1, to: 0, by: -1) { items.swapAt(i, below(i + 1)) }
    }
}

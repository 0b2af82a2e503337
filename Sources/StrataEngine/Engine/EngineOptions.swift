import Metrics
import Logging

/// How durable an acknowledged commit is.
public enum Durability: Sendable, Equatable {
    /// The WAL is synced (`fdatasync`) before `commit` returns. Survives power loss. The default.
    case full
    /// The WAL is synced in the background at most ``EngineOptions/syncInterval`` after a commit.
    /// A crash loses at most that window of commits, never part of one.
    case normal
    /// The WAL is synced only when it rolls over and at close.
    case none
}

/// Options of ``Engine/open(at:options:)``.
public struct EngineOptions: Sendable {
    /// Durability of commits. Default ``Durability/full``.
    public var durability: Durability = .full
    /// The WAL rolls over into a segment once it is this large. Default 64 MiB.
    public var walRolloverBytes: UInt64 = 64 << 20
    /// Under ``Durability/full``: how far ahead of its last record the active WAL is written
    /// with zeros, so that a commit's `fdatasync` covers data in blocks the file already holds
    /// and no change of its size or extents ([WAL-6]; on ext4 about 40 % less time per durable
    /// commit). 0 turns it off. Default 1 MiB.
    public var walPreallocationBytes: UInt64 = 1 << 20
    /// Target size of a segment's uncompressed data blocks. Default 8 KiB: a point read that
    /// misses the block cache decompresses one block, so smaller blocks make random reads
    /// cheaper and scans dearer (`compare --level engine`, 1M keys, against LevelDB's 4 KiB
    /// blocks: random reads cold 0.58x / 0.85x / 0.81x and full scan 1.08x / 1.06x / 0.85x
    /// at 16 / 8 / 4 KiB).
    public var blockSize: Int = 8 << 10
    /// For ``Durability/normal``: the longest a commit stays unsynced. Default 100 ms.
    public var syncInterval: Duration = .milliseconds(100)
    /// Whether a rolled-over WAL is written as a segment on a background queue (default) or
    /// by the committing thread before `commit` returns (deterministic, for tests).
    public var backgroundFlush: Bool = true
    /// Salvage what can be read from a damaged store instead of failing to open; what was
    /// dropped is in ``Engine/repairReport``.
    public var repair: Bool = false
    /// Open without creating or changing any file: no tail truncation, no orphan removal, commits
    /// throw. Takes a shared lock on an existing `LOCK` (other read-only opens share it; a
    /// writer is refused, and refuses this open), or reads without one when `LOCK` is missing or
    /// cannot be opened for reading, as on read-only media (SPEC.md [DIR-5]).
    public var readOnly: Bool = false
    /// Run the index's invariant check after every commit and flush (slow; for tests).
    public var checkInvariants: Bool = false
    /// Bytes of unpinned values the row cache keeps; pinned rows stay whatever this says.
    /// Default 64 MiB.
    public var rowCacheBytes = 64 << 20
    /// Bytes of decompressed segment blocks kept for reads (scans and row-cache misses), so a
    /// block read again is not read from its file and decompressed again; 0 keeps none.
    /// Default 8 MiB.
    public var blockCacheBytes = 8 << 20
    /// When and how the background compactor rewrites segments.
    public var compaction = CompactionOptions()
    /// The file system the engine uses. Default ``PosixFileSystem``.
    public var fileSystem: any FileSystem = PosixFileSystem()
    /// Where the engine tells what it does on its own and what went wrong: opening and
    /// recovery (records replayed, torn tails cut), repair decisions, WAL rollovers, flushes,
    /// compactions, failed syncs, each with metadata (`path`, `file`, `offset`, `sequence`…).
    /// Routine events are `info`, damage and salvage `warning`, failures `error`; nothing is
    /// logged per commit or per read. Default: a logger that discards everything, so that a
    /// library logs nothing unless its application asks (`strata --verbose` passes one that
    /// writes to standard error).
    public var logger = Logger(label: "strata.engine", factory: { _ in SwiftLogNoOpLogHandler() })
    /// Where the engine's metrics go (`EngineMetrics`); `nil` (the default) uses swift-metrics'
    /// global `MetricsSystem`, which discards them until the application bootstraps a backend.
    public var metricsFactory: (any MetricsFactory)?
    /// A clean ``Engine/close()`` writes the active WAL out as a segment when it holds at least
    /// this many bytes of records (after syncing it), so that the next open reads those keys
    /// from the segment's hints instead of replaying the log (SPEC.md [MAN-6]). `0` leaves the
    /// log to be replayed. Default 4 MiB.
    public var flushAtCloseBytes: UInt64 = 4 << 20

    /// Default options.
    public init() {}
}

/// What an open in repair mode dropped.
public struct RepairReport: Sendable, Equatable {
    /// Byte ranges that could not be read and were dropped.
    public var dropped: [DroppedRange] = []
    /// Whether the manifest was rebuilt from the files present.
    public var rebuiltManifest = false
    /// The entries of dropped data blocks whose hints were readable and checked, in key order
    /// per block: what was lost, by key and sequence. For a segment salvaged by scanning
    /// (SPEC.md [SEG-8]), the entries its own hint blocks name that no salvaged block holds.
    /// Bytes dropped without trustworthy hints (WAL records, missing files, blocks of a segment
    /// whose hints are lost too) lost entries that cannot be listed; their
    /// ``DroppedRange/sequences`` say what is known, and ``DroppedRange/heldEntries`` whether
    /// they held any.
    public var lost: [LostEntry] = []
    /// Sequence numbers of acknowledged (synced) transactions the store no longer held: the
    /// durable bound (`SYNC`) names them, but the newest WAL was cut or damaged before them
    /// (SPEC.md [DUR-3]). Repair accepts their loss and lowers the bound.
    public var lostSequences: [ClosedRange<UInt64>] = []
    /// Copies of evidence the repair kept before changing a file: the damaged WAL as found
    /// (`NNNNNNNN.wal.damaged`), paths in the store directory ([DUR-4]).
    public var keptCopies: [String] = []
    /// Whether anything at all was dropped, lost or rebuilt.
    public var isClean: Bool { dropped.isEmpty && !rebuiltManifest && lostSequences.isEmpty }
}

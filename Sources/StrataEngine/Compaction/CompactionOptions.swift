/// When and how the compactor rewrites segments (SPEC.md [CMP-2]).
///
/// A segment is a *victim* when its dead bytes (entries overwritten or deleted since it was
/// written) reach ``minDeadRatio`` of its entry bytes, or reach ``maxDeadBytes`` whatever
/// the ratio. Segments smaller than ``smallSegmentBytes`` are merged together once there are
/// at least two. One run rewrites at most ``maxRunBytes`` of victims, oldest first.
public struct CompactionOptions: Sendable, Equatable {
    /// Whether the compactor runs by itself in the background after each flush. Default `true`.
    public var automatic = true
    /// A segment with at least this fraction of dead bytes is a victim. Default 0.2: no
    /// segment stays more than a fifth dead, so space stays within about 1.25 × the live
    /// data (DESIGN's target is 1.3 ×) at the price of rewriting segments sooner.
    public var minDeadRatio = 0.2
    /// A segment with at least this many dead bytes is a victim, whatever the ratio. Default 64 MiB.
    public var maxDeadBytes: UInt64 = 64 << 20
    /// Segments smaller than this are merged together when two or more exist. Default 4 MiB.
    public var smallSegmentBytes: UInt64 = 4 << 20
    /// Output segments are cut once they pass this size. Default 64 MiB.
    public var targetSegmentBytes: UInt64 = 64 << 20
    /// The most victim bytes one run rewrites. Default 256 MiB.
    public var maxRunBytes: UInt64 = 256 << 20
    /// I/O budget in bytes per second (read plus written); `nil` for no limit. Default `nil`.
    public var bytesPerSecond: UInt64? = nil

    /// Default options.
    public init() {}

    /// Options that make every segment a victim: a full compaction into fresh segments.
    public static var full: CompactionOptions {
        var options = CompactionOptions()
        options.minDeadRatio = 0
        options.maxDeadBytes = 0
        options.maxRunBytes = .max
        return options
    }
}

/// What the compactor has done since the engine opened.
public struct CompactionStats: Sendable, Equatable {
    /// Completed runs (each swaps victims for outputs in one manifest change).
    public var runs = 0
    /// Bytes of victim segments read.
    public var bytesRead: UInt64 = 0
    /// Bytes of output segments written.
    public var bytesWritten: UInt64 = 0
    /// Victim bytes minus output bytes over all runs: the space given back.
    public var bytesReclaimed: UInt64 = 0
    /// Segments removed by compaction.
    public var segmentsRemoved = 0
    /// Segments written by compaction.
    public var segmentsWritten = 0
    /// Tombstones dropped because no older segment could hold their key.
    public var tombstonesDropped = 0
    /// Whether a run is in progress now.
    public var isRunning = false
    /// Whether the compactor is paused.
    public var isPaused = false
    /// The last failure of a background run, if any.
    public var lastError: StoreError? = nil
}

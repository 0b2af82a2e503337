import BenchmarkSupport
import Foundation
import StrataEngine

/// The store's size at one moment of an overwrite run.
struct SpaceSample {
    /// When: a commit count, or the step after the run ("flushed", "compact()", …).
    var label: String
    /// Bytes of every live WAL and segment (`EngineStats.diskBytes`).
    var diskBytes: UInt64
    /// Bytes of entries that hold a key's newest value (`EngineStats.liveBytes`; uncompressed).
    var liveBytes: UInt64
    /// `EngineStats.spaceAmplification`: disk bytes over live bytes.
    var amplification: Double
    /// Live segments.
    var segments: Int
    /// Live WAL files (the current one included).
    var wals: Int
    /// Compactor runs completed so far.
    var compactionRuns: Int

    /// Reads the numbers from `engine` now.
    init(_ label: String, of engine: Engine) throws(StoreError) {
        let stats = try engine.stats()
        self.label = label
        diskBytes = stats.diskBytes
        liveBytes = stats.liveBytes
        amplification = stats.spaceAmplification
        segments = stats.segments.count
        wals = stats.wals.count
        compactionRuns = stats.compaction.runs
    }
}

/// What one overwrite run measured.
struct OverwriteResult {
    /// Which run: "compaction off #1", "compaction on #1", ….
    var label: String
    /// Whether the compactor ran in the background.
    var automatic: Bool
    /// Each commit's latency in nanoseconds, in commit order.
    var latencies: [Int64]
    /// Puts in each commit.
    var putsPerCommit: Int
    /// Wall-clock seconds of the commit loop, not counting the space samples.
    var loopSeconds: Double
    /// CPU seconds the process used during the commit loop, background flushes and
    /// compactions included.
    var loopCPUSeconds: Double
    /// The store's size every few commits, then after the flush and the compactions that follow.
    var samples: [SpaceSample]
    /// The compactor's totals once the run's last flush and background compaction were done.
    var compactionDuringRun: CompactionStats
    /// The compactor's totals after the explicit compactions at the end.
    var compactionAtEnd: CompactionStats
    /// Seconds of `compact()` (the engine's policy) after the run.
    var compactSeconds: Double
    /// Seconds of `compact(.full)` after that.
    var fullCompactSeconds: Double
    /// Segment bytes of the live data alone: the final contents written to a fresh store, flushed.
    var liveCompressedBytes: UInt64

    var commits: Int { latencies.count }
    var commitsPerSecond: Double { Double(commits) / loopSeconds }
    var putsPerSecond: Double { Double(commits * putsPerCommit) / loopSeconds }
}

/// The overwrite workload: fill `keys`, flush, then overwrite random keys in small commits,
/// timing every commit and sampling the store's size, with the compactor on or off.
struct OverwriteWorkload {
    let settings: Settings
    let keys: [[UInt8]]

    /// The engine options for one run: the settings' durability and WAL size, and the engine's
    /// default compaction thresholds (scaled to the WAL size unless the settings say not to).
    func options(automatic: Bool) -> EngineOptions {
        var options = Workload.options(settings.durability, walRolloverBytes: settings.walRolloverBytes)
        options.compaction = settings.compactionOptions
        options.compaction.automatic = automatic
        return options
    }

    /// One run in a fresh store at `path`; the store is left on disk (closed) for the caller.
    /// `scratch` is where the live data's fresh copy goes (removed before returning).
    func run(automatic: Bool, label: String, path: String, scratch: String) throws -> OverwriteResult {
        let engine = try Engine.open(at: path, options: options(automatic: automatic))
        let n = keys.count
        try Workload.fill(engine, keys: keys, order: Array(0..<n), values: Workload.values())
        try engine.flush()
        engine.waitForCompaction()

        // Values unlike the fill's, so every overwrite changes the key's value.
        let values = Workload.values(seed: 0x0DD5)
        var random = SplitMix64(seed: settings.seed)
        let commits = settings.commits, perCommit = settings.putsPerCommit
        let sampleEvery = max(1, commits / settings.samples)
        var latencies: [Int64] = []
        latencies.reserveCapacity(commits)
        var samples: [SpaceSample] = []
        var samplingSeconds = 0.0
        var next = 0
        let loopStart = ContinuousClock.now
        let cpuStart = processCPUSeconds()
        for commit in 0..<commits {
            if commit % sampleEvery == 0 {
                let (sample, elapsed) = try timed { () throws(StoreError) in try SpaceSample("\(commit)", of: engine) }
                samples.append(sample)
                samplingSeconds += elapsed
            }
            var batch = WriteBatch()
            for _ in 0..<perCommit {
                batch.put(keys[Int(random.next() % UInt64(n))], values[next % values.count])
                next += 1
            }
            let start = ContinuousClock.now
            try engine.commit(batch)
            latencies.append(nanoseconds(ContinuousClock.now - start))
        }
        let loopSeconds = seconds(ContinuousClock.now - loopStart) - samplingSeconds
        let loopCPUSeconds = processCPUSeconds() - cpuStart
        samples.append(try SpaceSample("\(commits)", of: engine))

        // Everything to segments, background work drained: what the run left behind.
        try engine.flush()
        engine.waitForCompaction()
        samples.append(try SpaceSample("\(commits), flushed", of: engine))
        let during = engine.compactionStats()
        if let error = during.lastError { throw BenchmarkError("background compaction failed: \(error)") }
        let (_, compactSeconds) = try timed { () throws(StoreError) in try engine.compact() }
        samples.append(try SpaceSample("after compact()", of: engine))
        let (_, fullSeconds) = try timed { () throws(StoreError) in try engine.compact(.full) }
        samples.append(try SpaceSample("after compact(.full)", of: engine))
        let live = try liveCompressedBytes(of: engine, copyAt: scratch)
        let atEnd = engine.compactionStats()
        try engine.close()
        return OverwriteResult(
            label: label, automatic: automatic, latencies: latencies, putsPerCommit: perCommit, loopSeconds: loopSeconds,
            loopCPUSeconds: loopCPUSeconds, samples: samples, compactionDuringRun: during, compactionAtEnd: atEnd,
            compactSeconds: compactSeconds, fullCompactSeconds: fullSeconds, liveCompressedBytes: live)
    }

    /// The segment bytes of `engine`'s contents alone: every key and value written to a fresh
    /// store at `path` (one WAL, no compactor), flushed to segments, measured, and removed. This
    /// is how the engine's compaction test measures "the live data's compressed size".
    func liveCompressedBytes(of engine: Engine, copyAt path: String) throws -> UInt64 {
        var options = Workload.options(.none, walRolloverBytes: 1 << 40)
        options.compaction.automatic = false
        let copy = try Engine.open(at: path, options: options)
        var batch = WriteBatch()
        var count = 0
        try engine.snapshot().forEach { (key, value) throws(StoreError) -> Bool in
            batch.put(key, value)
            count += 1
            if batch.count == Workload.batchSize {
                try copy.commit(batch)
                batch = WriteBatch()
            }
            return true
        }
        try copy.commit(batch)
        try copy.flush()
        let stats = try copy.stats()
        try copy.close()
        try FileManager.default.removeItem(atPath: path)
        guard count == keys.count else { throw BenchmarkError("the store holds \(count) keys, expected \(keys.count)") }
        return stats.segments.reduce(0) { $0 + $1.sizeBytes }
    }
}

extension OverwriteResult {
    /// The latency at quantile `q` (0…1) by nearest rank, in microseconds.
    func latency(_ q: Double, sorted: [Int64]) -> Double {
        guard !sorted.isEmpty else { return 0 }
        let rank = min(sorted.count - 1, max(0, Int((q * Double(sorted.count)).rounded(.up)) - 1))
        return Double(sorted[rank]) / 1e3
    }
}

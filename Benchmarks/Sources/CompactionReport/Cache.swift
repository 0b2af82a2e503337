import BenchmarkSupport
import Foundation
import StrataEngine

/// What one Zipfian read run measured.
struct CacheResult {
    /// The row cache budget (bytes of unpinned rows).
    var budgetBytes: Int
    /// What was pinned, for the table ("none", "top 1%", …).
    var pins: String
    /// Reads timed (after the warm-up).
    var reads: Int
    /// Wall-clock seconds of the timed reads.
    var seconds: Double
    /// Row cache hits and misses during the timed reads.
    var hits: Int, misses: Int
    /// Rows evicted during the timed reads.
    var evictions: Int
    /// Keys pinned, and the bytes (by entry cost) of the pinned and the unpinned rows at the end.
    var pinnedKeys: Int, pinnedBytes: Int, unpinnedBytes: Int
    /// Rows cached at the end, pinned or not.
    var entries: Int
    /// The hit ratio of an oracle cache that held the same number of rows, always the most
    /// frequent ones: the Zipf mass of the top `entries` ranks.
    var oracleHitRatio: Double

    var hitRatio: Double { Double(hits) / Double(max(1, hits + misses)) }
    var readsPerSecond: Double { Double(reads) / seconds }
}

/// Zipfian reads of a store whose keys are all in segments, through row caches of a few
/// budgets, with and without the hottest keys pinned.
struct CacheWorkload {
    let settings: Settings
    let keys: [[UInt8]]
    /// The Zipf rank distribution over the keys.
    let zipf: ZipfGenerator
    /// `keyOfRank[r]` is the index (in `keys`) of the key of rank `r`: a fixed random
    /// permutation, so the hot keys are spread over the key space and the segments' blocks.
    let keyOfRank: [Int]

    init(settings: Settings, keys: [[UInt8]]) {
        self.settings = settings
        self.keys = keys
        zipf = ZipfGenerator(count: keys.count, exponent: settings.zipfExponent)
        keyOfRank = Workload.shuffledIndices(keys.count, seed: 0x2199)
    }

    /// The options for reading the store with a row cache of `budget` bytes; no compactor.
    func options(budget: Int) -> EngineOptions {
        var options = Workload.options(.none, rowCacheBytes: budget)
        options.compaction.automatic = false
        return options
    }

    /// Fills a store at `path` with every key and flushes it to segments.
    func build(at path: String) throws {
        let engine = try Engine.open(at: path, options: options(budget: 0))
        try Workload.fill(engine, keys: keys, order: Workload.shuffledIndices(keys.count), values: Workload.values())
        try engine.flush()
        try engine.close()
    }

    /// The row cache's cost of one row, in bytes: read `sample` keys through a big cache and
    /// divide its bytes by its entries (the cache counts its own bookkeeping per entry).
    func rowCost(storeAt path: String, sample: Int = 1000) throws -> Int {
        let engine = try Engine.open(at: path, options: options(budget: 1 << 30))
        defer { try? engine.close() }
        let snapshot = try engine.snapshot()
        for key in keys.prefix(sample) { _ = try snapshot.get(key) }
        let stats = engine.cacheStats()
        guard stats.entries > 0 else { throw BenchmarkError("the row cache kept nothing") }
        return stats.unpinnedBytes / stats.entries
    }

    /// The key indices to read: `count` Zipf draws from the settings' seed.
    func readOrder(_ count: Int) -> [Int] {
        var random = SplitMix64(seed: settings.seed ^ 0x5EAD)
        return (0..<count).map { _ in keyOfRank[zipf.next(using: &random)] }
    }

    /// Opens the store at `path` with a cache of `budget` bytes, pins the keys of ranks
    /// `0 ..< pinned`, reads `warmUp` then times `timed`, and reports the timed part.
    func run(
        storeAt path: String, budget: Int, pinned: Int, pinsLabel: String, warmUp: ArraySlice<Int>,
        timed reads: ArraySlice<Int>
    ) throws -> CacheResult {
        let engine = try Engine.open(at: path, options: options(budget: budget))
        if pinned > 0 { engine.pin(keyOfRank.prefix(pinned).map { keys[$0] }) }
        let snapshot = try engine.snapshot()
        func read(_ indices: ArraySlice<Int>) throws -> Int {
            var found = 0
            for index in indices where try snapshot.get(keys[index]) != nil { found += 1 }
            return found
        }
        _ = try read(warmUp)
        let before = engine.cacheStats()
        let (found, elapsed) = try timed { try read(reads) }
        let after = engine.cacheStats()
        try engine.close()
        guard found == reads.count else { throw BenchmarkError("\(reads.count - found) reads found nothing") }
        return CacheResult(
            budgetBytes: budget, pins: pinsLabel, reads: reads.count, seconds: elapsed, hits: after.hits - before.hits,
            misses: after.misses - before.misses, evictions: after.evictions - before.evictions,
            pinnedKeys: after.pinnedKeys, pinnedBytes: after.pinnedBytes, unpinnedBytes: after.unpinnedBytes,
            entries: after.entries, oracleHitRatio: zipf.mass(ofTop: after.entries))
    }
}

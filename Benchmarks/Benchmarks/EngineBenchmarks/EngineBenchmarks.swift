// The engine's main workloads as package-benchmark benchmarks (same keys and values as
// engine-report). Run: swift package --package-path Benchmarks benchmark
//
// Throughput (and wall clock) are per operation: a fill iteration commits one batch of 1000 puts
// and scales by 1000; a read iteration does 1000 gets. Stores are small (tens of thousands of
// keys), so the whole suite takes a few minutes.

import Benchmark
import BenchmarkSupport
import StrataEngine

/// A store in a temporary directory, opened by a benchmark's setup and removed by its teardown,
/// plus the benchmark's position in its key sequence.
final class Store {
    let options: EngineOptions
    let preload: Int
    let flushAfterPreload: Bool
    private(set) var directory: TemporaryDirectory?
    private(set) var engine: Engine?
    /// The next key number a fill writes; advanced by each iteration.
    var next = 0
    /// A fixed random source, for reads and overwrites.
    var random = SplitMix64(seed: 0xACE)

    static let keys = Workload.keys(stored)
    static let values = Workload.values()
    /// Keys written by the preloaded stores.
    static let stored = 50_000

    let warmCache: Bool

    init(
        _ durability: Durability, preload: Int = 0, flush: Bool = false, walRolloverBytes: UInt64? = nil,
        rowCacheBytes: Int? = nil, warmCache: Bool = false
    ) {
        options = Workload.options(durability, walRolloverBytes: walRolloverBytes, rowCacheBytes: rowCacheBytes)
        self.preload = preload
        flushAfterPreload = flush
        self.warmCache = warmCache
    }

    /// The open engine; benchmarks only run between setup and teardown.
    var open: Engine {
        guard let engine else { fatalError("benchmark ran before its setup opened the store") }
        return engine
    }

    func setUp() throws {
        let directory = try TemporaryDirectory(prefix: "strata-benchmark-")
        self.directory = directory
        let engine = try Engine.open(at: directory.appending("store"), options: options)
        self.engine = engine
        try Workload.fill(engine, keys: Self.keys, order: Array(0..<preload), values: Self.values)
        if flushAfterPreload { try engine.flush() }
        if warmCache {
            let snapshot = try engine.snapshot()
            for key in Self.keys.prefix(preload) { _ = try snapshot.get(key) }
        }
        next = preload
    }

    func tearDown() throws {
        defer { directory?.remove() }
        try engine?.close()
        engine = nil
    }

    /// Closes the engine (keeping the files) and reopens it.
    func reopen() throws -> Engine {
        try engine?.close()
        engine = nil
        guard let directory else { fatalError("reopen before setup") }
        let engine = try Engine.open(at: directory.appending("store"), options: options)
        self.engine = engine
        return engine
    }

    /// Which keys a batch writes.
    enum Keys {
        /// The next keys in order.
        case sequential
        /// Keys drawn at random from `0 ..< space`.
        case random(space: Int)
    }

    /// A batch of `count` puts of the keys `pattern` picks.
    func batch(_ count: Int, _ pattern: Keys) -> WriteBatch {
        var batch = WriteBatch()
        for _ in 0..<count {
            let index: Int
            switch pattern {
            case .sequential:
                index = next
                next += 1
            case .random(let space):
                index = Int(random.next() % UInt64(space))
            }
            let key = index < Self.keys.count ? Self.keys[index] : Workload.key(index)
            batch.put(key, Self.values[(index &+ batch.count) % Self.values.count])
        }
        return batch
    }
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .cpuTotal, .mallocCountTotal],
        warmupIterations: 1,
        scalingFactor: .kilo,
        maxDuration: .seconds(3),
        maxIterations: 1000,
        // Regression thresholds for `benchmark baseline check`: wall clock and CPU may move
        // 25 % at the median on these shared machines; allocations are deterministic, so 5 %.
        thresholds: [
            .wallClock: .init(relative: BenchmarkThresholds.Relative.relaxed),
            .cpuTotal: .init(relative: BenchmarkThresholds.Relative.relaxed),
            .throughput: .init(relative: BenchmarkThresholds.Relative.relaxed),
            .mallocCountTotal: .init(relative: [.p50: 5.0]),
        ])

    // Fills: each iteration commits one batch of 1000 puts; the store grows over the run.
    for (name, keys, durability) in [
        ("Sequential fill, .none", Store.Keys.sequential, Durability.none),
        ("Sequential fill, .full", .sequential, .full),
        ("Random fill, .none", .random(space: 1_000_000_000_000), .none),
    ] {
        let store = Store(durability)
        Benchmark(name) { benchmark in
            let batch = store.batch(benchmark.scaledIterations.count, keys)
            benchmark.startMeasurement()
            do { try store.open.commit(batch) } catch { benchmark.error("\(error)") }
        } setup: {
            try store.setUp()
        } teardown: {
            try store.tearDown()
        }
    }

    // Overwrite: batches of 1000 puts to random keys of a preloaded store.
    do {
        let store = Store(.none, preload: Store.stored)
        Benchmark("Overwrite, .none") { benchmark in
            let batch = store.batch(benchmark.scaledIterations.count, .random(space: Store.stored))
            benchmark.startMeasurement()
            do { try store.open.commit(batch) } catch { benchmark.error("\(error)") }
        } setup: {
            try store.setUp()
        } teardown: {
            try store.tearDown()
        }
    }

    // Random reads: 1000 gets per iteration, from the WAL (recently written) or from segments
    // with the row cache off, and from a warm row cache.
    for (name, flush, cache) in [
        ("Random read, WAL, no row cache", false, 0), ("Random read, segments, no row cache", true, 0),
        ("Random read, row cache warm", true, 64 << 20),
    ] {
        let store = Store(
            .none, preload: Store.stored, flush: flush, walRolloverBytes: 1 << 30, rowCacheBytes: cache,
            warmCache: cache > 0)
        Benchmark(name) { benchmark in
            do {
                let snapshot = try store.open.snapshot()
                for _ in benchmark.scaledIterations {
                    let index = Int(store.random.next() % UInt64(Store.stored))
                    blackHole(try snapshot.get(Store.keys[index]))
                }
            } catch {
                benchmark.error("\(error)")
            }
        } setup: {
            try store.setUp()
        } teardown: {
            try store.tearDown()
        }
    }

    // Full scan and reopen of a store of 50k keys in segments; one iteration is one scan or open.
    do {
        let store = Store(.none, preload: Store.stored, flush: true)
        Benchmark("Full scan, 50k keys", configuration: .init(scalingFactor: .one)) { benchmark in
            do {
                var count = 0
                try store.open.snapshot().forEach { _, value in
                    count += value.count
                    return true
                }
                blackHole(count)
            } catch {
                benchmark.error("\(error)")
            }
        } setup: {
            try store.setUp()
        } teardown: {
            try store.tearDown()
        }
    }
    do {
        let store = Store(.none, preload: Store.stored, flush: true)
        Benchmark("Reopen, 50k keys", configuration: .init(scalingFactor: .one)) { benchmark in
            do { blackHole(try store.reopen()) } catch { benchmark.error("\(error)") }
        } setup: {
            try store.setUp()
        } teardown: {
            try store.tearDown()
        }
    }

    // Commits under full durability, one put each: 1 committer, and 8 threads sharing syncs
    // (group commit). One iteration is 200 commits in all.
    for threads in [1, 8] {
        let store = Store(.full)
        Benchmark(
            "Commits, .full, \(threads) committer\(threads == 1 ? "" : "s") (x200)",
            configuration: .init(scalingFactor: .one, maxDuration: .seconds(2))
        ) { benchmark in
            do {
                blackHole(try Committers.run(store.open, threads: threads, commitsPerThread: 200 / threads, value: Store.values[0]))
            } catch {
                benchmark.error("\(error)")
            }
        } setup: {
            try store.setUp()
        } teardown: {
            try store.tearDown()
        }
    }
}

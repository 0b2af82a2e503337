// The engine level of `compare`: StrataEngine beside LevelDB, RocksDB and SQLite used as a
// key/value table, on the same keys and values in the same run, plus the machine's physical
// limits (level "physical"). See Benchmarks/README.md.

import BenchmarkSupport
import Comparison
import Foundation
import Glibc

/// Sizes of the engine comparison.
public struct EngineComparisonSettings: Sendable {
    /// Keys per fill (16-byte keys, 100-byte values from `Workload`).
    public var keys: Int
    /// Random gets per read pass.
    public var reads: Int
    /// Seconds of each fsync-per-commit test (per system, writer count and round).
    public var commitSeconds: Double
    /// Rounds of the fsync-per-commit tests; each system's best round counts.
    public var commitRounds = 2
    /// MiB written by the raw sequential write test.
    public var rawMebibytes: Int
    /// Small write + `fdatasync` rounds of the sync latency test.
    public var syncSamples: Int
    /// MB of keys and values the LZ4 test compresses.
    public var lz4Megabytes: Int
    /// Puts per batch (one write batch or transaction) in the fills and the overwrite.
    public var batchSize = Workload.batchSize
    /// Strata's row cache, LevelDB's and RocksDB's block caches and SQLite's page cache.
    public var cacheBytes = 64 << 20
    /// LevelDB's and RocksDB's memtable size (Strata's WAL rollover is 64 MiB).
    public var writeBufferBytes = 64 << 20
    /// The systems to run, from "Strata", "LevelDB", "RocksDB" and "SQLite" (any case).
    public var systems = ["Strata", "LevelDB", "RocksDB", "SQLite"]

    /// Creates settings with every size given.
    public init(keys: Int, reads: Int, commitSeconds: Double, rawMebibytes: Int, syncSamples: Int, lz4Megabytes: Int) {
        self.keys = keys
        self.reads = reads
        self.commitSeconds = commitSeconds
        self.rawMebibytes = rawMebibytes
        self.syncSamples = syncSamples
        self.lz4Megabytes = lz4Megabytes
    }

    /// For CI: 100,000 keys, a quarter of a second per commit round (about 15 s on 2 cores).
    public static let quick = EngineComparisonSettings(
        keys: 100_000, reads: 100_000, commitSeconds: 0.25, rawMebibytes: 32, syncSamples: 50, lz4Megabytes: 8)

    /// The default: 1,000,000 keys (116 MB of keys and values, more than the 64 MiB memtables
    /// and WAL), 1.5 s per commit round (2.5 to 3.5 minutes on a loaded 2-core machine).
    public static let standard = EngineComparisonSettings(
        keys: 1_000_000, reads: 500_000, commitSeconds: 1.5, rawMebibytes: 256, syncSamples: 200, lz4Megabytes: 32)
}

/// The systems `settings` selects, configured as the notes say.
func selectedSystems(_ settings: EngineComparisonSettings) throws -> [any KeyValueSystem] {
    let all: [any KeyValueSystem] = [
        StrataSystem(rowCacheBytes: settings.cacheBytes),
        LevelDBSystem(blockCacheBytes: settings.cacheBytes, writeBufferBytes: settings.writeBufferBytes),
        RocksDBSystem(
            blockCacheBytes: settings.cacheBytes, writeBufferBytes: settings.writeBufferBytes,
            threads: ProcessInfo.processInfo.activeProcessorCount),
        SQLiteSystem(cacheBytes: settings.cacheBytes),
    ]
    let wanted = Set(settings.systems.map { $0.lowercased() })
    let unknown = wanted.subtracting(all.map { $0.name.lowercased() })
    guard unknown.isEmpty else {
        throw EngineComparisonError(
            system: "harness", operation: "select systems", path: nil,
            message: "unknown system(s) \(unknown.sorted().joined(separator: ", ")); use Strata, LevelDB, RocksDB, SQLite")
    }
    return all.filter { wanted.contains($0.name.lowercased()) }
}

/// How every system is configured and what the rows mean, for the notes under the engine table.
public func engineComparisonSetup(_ settings: EngineComparisonSettings) -> [String] {
    let systems = (try? selectedSystems(settings)) ?? []
    return systems.map(\.setup) + [
        "Data: \(ComparisonTable.format(Double(settings.keys))) keys \"key\" + 13 digits (16 B) with values of 100 B "
            + "(half random printable bytes, half their repeat: LZ4 halves them), from fixed seeds "
            + "(BenchmarkSupport.Workload); every system gets the same keys, values and order",
        "Durability: the no-sync rows sync nothing per batch and sync the last batch (Strata: durability .none, "
            + "then sync()); the commit rows sync every commit. Stores are closed between phases and reopened; "
            + "`sync` runs before each write phase; cold means a freshly opened store (the OS page cache is not dropped)",
    ]
}

/// Runs the engine comparison in `directory` (which must exist; the stores are made and
/// removed inside it) and returns rows of level "engine" (one column per system) and of level
/// "physical" (raw disk and LZ4 figures, with Strata's where one compares).
///
/// Every phase runs on every system before the next phase starts, so that a change in the
/// machine's load hits all systems alike; stores are closed between phases.
///
/// - Parameters:
///   - settings: sizes and systems.
///   - directory: scratch space on the file system to measure.
///   - log: called with a progress line after every measurement.
/// - Throws: ``EngineComparisonError`` naming the system, the operation and the path.
public func runEngineComparison(
    _ settings: EngineComparisonSettings, directory: String, log: (String) -> Void
) throws -> [ComparisonRow] {
    let systems = try selectedSystems(settings)
    let n = settings.keys
    let keys = Workload.keys(n)
    let values = Workload.values()
    let entryBytes = Workload.keyLength + Workload.valueLength
    let megabytes = Double(n * entryBytes) / 1e6
    let count = ComparisonTable.format(Double(n))
    func storePath(_ system: any KeyValueSystem, _ store: String) -> String {
        "\(directory)/\(system.name.lowercased())-\(store)"
    }
    var rows: [ComparisonRow] = []

    /// Runs `measure` on every system, `rounds` times with the systems taking turns, and
    /// appends a row of each system's best figure.
    @discardableResult
    func phase(
        _ operation: String, unit: String, higherIsBetter: Bool = true, rounds: Int = 1, note: String,
        _ measure: (any KeyValueSystem) throws -> Double
    ) throws -> [String: Double] {
        var results: [String: Double] = [:]
        for round in 0..<rounds {
            for system in systems {
                let figure = try measure(system)
                let best = results[system.name].map { higherIsBetter ? max($0, figure) : min($0, figure) } ?? figure
                results[system.name] = best
                let turn = rounds > 1 ? " (round \(round + 1) of \(rounds))" : ""
                log("  \(operation): \(system.name) \(ComparisonTable.format(figure)) \(unit)\(turn)")
            }
        }
        rows.append(
            ComparisonRow(
                level: "engine", operation: operation, unit: unit, higherIsBetter: higherIsBetter, results: results,
                note: note))
        return results
    }

    /// Throws unless a read pass or scan found `expected` keys.
    func expect(_ tally: ReadTally, _ expected: Int, _ system: any KeyValueSystem, _ what: String) throws {
        guard tally.found == expected else {
            throw EngineComparisonError(
                system: system.name, operation: what, path: nil,
                message: "found \(tally.found) keys, expected \(expected)")
        }
    }

    // Physical limits first, on a quiet disk.
    log("physical limits")
    Glibc.sync()
    var rawBandwidth = 0.0
    for _ in 0..<2 {
        rawBandwidth = max(
            rawBandwidth,
            try PhysicalLimits.sequentialWrite(path: directory + "/raw.bin", mebibytes: settings.rawMebibytes))
        Glibc.sync()
    }
    log("  sequential write: \(ComparisonTable.format(rawBandwidth)) MB/s")
    let lz4 = try PhysicalLimits.lz4Speed(megabytes: settings.lz4Megabytes)
    log(
        "  LZ4: compress \(ComparisonTable.format(lz4.compress)) MB/s, "
            + "decompress \(ComparisonTable.format(lz4.decompress)) MB/s")

    // Sequential fill, then reopen, then a full scan, of one store per system.
    log("engine: \(count) keys, \(ComparisonTable.format(megabytes)) MB of keys and values per fill")
    let inOrder = Array(0..<n)
    let batch = settings.batchSize
    let noSync = "batches of \(batch), no sync per batch, last batch synced"
    let sequentialFill = try phase(
        "sequential fill", unit: "keys/s", note: "\(count) keys in key order into a new store, \(noSync)"
    ) { system in
        Glibc.sync()
        let store = try system.open(at: storePath(system, "seq"), mode: .deferred)
        let (_, elapsed) = try timed { try fill(store, keys: keys, order: inOrder, values: values, batchSize: batch) }
        try store.close()
        return Double(n) / elapsed
    }
    try phase(
        "open a store of \(count) keys + 1 get", unit: "ms", higherIsBetter: false,
        note: "the sequential-fill store, first open after the fill's clean close, until one get returned "
            + "(LevelDB and RocksDB replay what the fill left in their logs; Strata's clean close wrote a log of 4 MiB "
            + "or more out as a segment, SPEC [MAN-6], so its open reads hints)"
    ) { system in
        let (store, elapsed) = try timed { () throws -> any KeyValueStore in
            let store = try system.open(at: storePath(system, "seq"), mode: .deferred)
            try expect(try store.read(keys, at: [n / 2]), 1, system, "get after open")
            return store
        }
        try store.close()
        return elapsed * 1e3
    }
    try phase("full scan", unit: "keys/s", note: "every key and value in key order, in a freshly opened store") { system in
        let store = try system.open(at: storePath(system, "seq"), mode: .deferred)
        let (tally, elapsed) = try timed { try store.scan() }
        try expect(tally, n, system, "scan")
        guard tally.bytes == n * entryBytes else {
            throw EngineComparisonError(
                system: system.name, operation: "scan", path: nil,
                message: "read \(tally.bytes) bytes, expected \(n * entryBytes)")
        }
        try store.close()
        try? FileManager.default.removeItem(atPath: storePath(system, "seq"))
        return Double(n) / elapsed
    }

    // Random fill, overwrite, reopen, reads, compaction: one more store per system.
    try phase(
        "random fill", unit: "keys/s", note: "\(count) keys in a random order into a new store, \(noSync)"
    ) { system in
        Glibc.sync()
        let store = try system.open(at: storePath(system, "random"), mode: .deferred)
        let order = Workload.shuffledIndices(n)
        let (_, elapsed) = try timed { try fill(store, keys: keys, order: order, values: values, batchSize: batch) }
        try store.close()
        return Double(n) / elapsed
    }
    let targets = Workload.randomIndices(n, in: n)
    try phase(
        "overwrite", unit: "puts/s",
        note: "\(count) puts to uniformly random existing keys (with repeats) of the random-fill store, new values, "
            + noSync
    ) { system in
        Glibc.sync()
        let store = try system.open(at: storePath(system, "random"), mode: .deferred)
        let (_, elapsed) = try timed {
            try fill(store, keys: keys, order: targets, values: Array(values.reversed()), batchSize: batch)
        }
        try store.close()
        return Double(n) / elapsed
    }
    var beforeCompaction: [String: Double] = [:]
    for system in systems {
        beforeCompaction[system.name] = Double(try directoryBytes(storePath(system, "random"))) / 1e6
    }
    let reads = Workload.randomIndices(settings.reads, in: n, seed: 0xBEEF)
    var coldReads: [String: Double] = [:]
    var hotReads: [String: Double] = [:]
    try phase(
        "open after random fill + overwrite + 1 get", unit: "ms", higherIsBetter: false,
        note: "first open after the overwrite's clean close, until one get returned"
    ) { system in
        let (store, elapsed) = try timed { () throws -> any KeyValueStore in
            let store = try system.open(at: storePath(system, "random"), mode: .deferred)
            try expect(try store.read(keys, at: [n / 3]), 1, system, "get after open")
            return store
        }
        // The read rows use this store; they are appended below in their own rows.
        let (cold, coldSeconds) = try timed { try store.read(keys, at: reads) }
        try expect(cold, reads.count, system, "cold reads")
        let (hot, hotSeconds) = try timed { try store.read(keys, at: reads) }
        try expect(hot, reads.count, system, "hot reads")
        try store.close()
        coldReads[system.name] = Double(reads.count) / coldSeconds
        hotReads[system.name] = Double(reads.count) / hotSeconds
        return elapsed * 1e3
    }
    rows.append(
        ComparisonRow(
            level: "engine", operation: "random read, cold", unit: "gets/s", higherIsBetter: true, results: coldReads,
            note: "\(ComparisonTable.format(Double(reads.count))) gets of uniformly random keys (with repeats) right "
                + "after the open above: empty store caches, OS page cache warm"))
    rows.append(
        ComparisonRow(
            level: "engine", operation: "random read, hot", unit: "gets/s", higherIsBetter: true, results: hotReads,
            note: "the same gets again on the same handle: caches hold what the first pass loaded, within their "
                + "\(settings.cacheBytes >> 20) MiB"))
    for system in systems {
        log("  random read: \(system.name) cold \(ComparisonTable.format(coldReads[system.name] ?? 0)), "
            + "hot \(ComparisonTable.format(hotReads[system.name] ?? 0)) gets/s")
    }
    rows.append(
        ComparisonRow(
            level: "engine", operation: "space after overwrite, before compaction", unit: "MB", higherIsBetter: false,
            results: beforeCompaction,
            note: "sum of file sizes in the store's directory after the overwrite and a clean close; live data "
                + "\(ComparisonTable.format(megabytes)) MB uncompressed"))
    var compactionSeconds: [String: Double] = [:]
    for system in systems {
        let store = try system.open(at: storePath(system, "random"), mode: .deferred)
        let (_, elapsed) = try timed { try store.compactFully() }
        compactionSeconds[system.name] = elapsed
        try store.close()
    }
    var afterCompaction: [String: Double] = [:]
    for system in systems {
        afterCompaction[system.name] = Double(try directoryBytes(storePath(system, "random"))) / 1e6
        try? FileManager.default.removeItem(atPath: storePath(system, "random"))
    }
    rows.append(
        ComparisonRow(
            level: "engine", operation: "space after full compaction", unit: "MB", higherIsBetter: false,
            results: afterCompaction,
            note: "Strata flush() + compact(.full); LevelDB and RocksDB compact_range over all keys (each flushes its "
                + "memtable first); SQLite wal_checkpoint(TRUNCATE) + VACUUM; then a clean close. Live data "
                + "\(ComparisonTable.format(megabytes)) MB uncompressed. The compaction call took "
                + systems.map { "\($0.name) \(fixed(compactionSeconds[$0.name] ?? 0, 2)) s" }.joined(separator: ", ")
                + " (not comparable: background compaction may already have done part of the work)"))
    for system in systems {
        log("  space: \(system.name) \(ComparisonTable.format(beforeCompaction[system.name] ?? 0)) MB before, "
            + "\(ComparisonTable.format(afterCompaction[system.name] ?? 0)) MB after compaction")
    }

    // Durable commits: one put per commit, synced before it returns, from 1 and 8 threads. The
    // disk's own sync latency is measured right before, as other work on the machine moves it.
    Glibc.sync()
    let appendLatencies = try PhysicalLimits.syncLatencies(
        path: directory + "/fsync.bin", samples: settings.syncSamples, bytes: entryBytes, append: true)
    let rewriteLatencies = try PhysicalLimits.syncLatencies(
        path: directory + "/fsync.bin", samples: settings.syncSamples, bytes: entryBytes, append: false)
    func percentile(_ sorted: [Double], _ p: Double) -> Double {
        sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
    }
    log(
        "  raw: append + fdatasync median \(ComparisonTable.format(percentile(appendLatencies, 0.5))) µs, "
            + "rewrite + fdatasync median \(ComparisonTable.format(percentile(rewriteLatencies, 0.5))) µs")
    var commitRates: [Int: [String: Double]] = [:]
    for threads in [1, 8] {
        commitRates[threads] = try phase(
            "commits, fsync each, \(threads) writer\(threads == 1 ? "" : "s")", unit: "commits/s",
            rounds: settings.commitRounds,
            note: "one 116 B put per commit for \(ComparisonTable.format(settings.commitSeconds)) s from \(threads) "
                + "thread\(threads == 1 ? "" : "s") into a new store, better of \(settings.commitRounds) rounds "
                + "(the systems take turns); "
                + (threads == 1 ? "each commit synced before it returns" : "concurrent commits may share a sync")
        ) { system in
            Glibc.sync()
            let path = storePath(system, "commits-\(threads)")
            let store = try system.open(at: path, mode: .everyCommit)
            let deadline = ContinuousClock.now + .milliseconds(Int(settings.commitSeconds * 1000))
            let (commits, elapsed) = try timed {
                try runCommitters(store, threads: threads, until: deadline, value: values[0])
            }
            try store.close()
            try? FileManager.default.removeItem(atPath: path)
            return Double(commits) / elapsed
        }
    }

    // The physical rows, with Strata's figures where they compare.
    let fillMegabytesPerSecond = sequentialFill.mapValues { $0 * Double(entryBytes) / 1e6 }
    var bandwidth = ["raw disk": rawBandwidth]
    bandwidth["Strata"] = fillMegabytesPerSecond["Strata"]
    let shares = systems.compactMap { system in
        fillMegabytesPerSecond[system.name].map { "\(system.name) \(fixed(100 * $0 / rawBandwidth, 0))%" }
    }
    rows.append(
        ComparisonRow(
            level: "physical", operation: "sequential write (Strata: sequential fill)", unit: "MB/s", higherIsBetter: true,
            results: bandwidth,
            note: "raw: \(settings.rawMebibytes) MiB in 1 MiB pwrites to a new file, one fdatasync, better of two; "
                + "fills count keys and values. Sequential fill as a share of raw: \(shares.joined(separator: ", ")) "
                + "(DESIGN target for Strata: at least 50%)"))
    var latency = ["raw disk": percentile(appendLatencies, 0.5)]
    if let strataCommits = commitRates[1]?["Strata"], strataCommits > 0 { latency["Strata"] = 1e6 / strataCommits }
    rows.append(
        ComparisonRow(
            level: "physical", operation: "one durable commit (raw: 116 B append + fdatasync)", unit: "µs",
            higherIsBetter: false, results: latency,
            note: "raw: median of \(settings.syncSamples) appends + fdatasync to a new file, measured just before the "
                + "commit rows (p99 "
                + "\(ComparisonTable.format(percentile(appendLatencies, 0.99))) µs; rewriting a preallocated block "
                + "instead: median \(ComparisonTable.format(percentile(rewriteLatencies, 0.5))) µs); Strata: the mean "
                + "time per commit of the 1-writer commit row"))
    rows.append(
        ComparisonRow(
            level: "physical", operation: "LZ4 compress, 16 KiB blocks", unit: "MB/s", higherIsBetter: true,
            results: ["LZ4": lz4.compress],
            note: "LZ4_compress_default (liblz4, as StrataEngine uses it) on \(settings.lz4Megabytes) MB of the "
                + "benchmark's keys and values, one thread, better of three; ratio \(fixed(lz4.ratio, 2))"))
    rows.append(
        ComparisonRow(
            level: "physical", operation: "LZ4 decompress, 16 KiB blocks", unit: "MB/s", higherIsBetter: true,
            results: ["LZ4": lz4.decompress], note: "LZ4_decompress_safe on the same blocks"))
    return rows
}

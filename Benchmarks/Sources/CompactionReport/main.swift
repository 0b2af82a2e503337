// compaction-report: the compactor's effect on foreground commits and on space, and the row
// cache under Zipfian reads, in one run and one temporary directory. See Benchmarks/README.md.

import BenchmarkSupport
import Foundation
import Glibc
import StrataEngine

/// Sizes, seeds and places, from the command line.
struct Settings {
    var keys = 50_000
    var commits = 60_000
    var putsPerCommit = 10
    var samples = 12
    var repeats = 2
    var durability = Durability.none
    var walRolloverBytes: UInt64 = 1 << 20
    var defaultCompaction = false
    var reads = 400_000
    var zipfExponent = 0.99
    var budgets = [0.05, 0.10, 0.20]
    var pinFraction = 0.01
    var seed: UInt64 = 0x5EED_0C0A
    var parent = "/tmp"

    static let usage = """
        usage: compaction-report [--quick] [--keys N] [--commits N] [--puts-per-commit N] [--samples N]
                                 [--repeats N] [--durability none|normal] [--wal-kib N] [--default-compaction]
                                 [--reads N] [--zipf S] [--seed N] [--dir PATH]

          --quick               20k keys, 15k commits, 1 repeat, 80k reads per cache run (under 20 s)
          --keys N              keys in every store (default 50000)
          --commits N           overwrite commits per run (default 60000)
          --puts-per-commit N   puts to random keys in each commit (default 10)
          --samples N           space samples during each overwrite run (default 12)
          --repeats N           overwrite runs with the compactor off and on, alternating (default 2)
          --durability D        none (default) or normal; none keeps the disk out of the latencies
          --wal-kib N           WAL rollover size in KiB (default 1024)
          --default-compaction  the engine's compaction thresholds as they are, not scaled to the WAL
          --reads N             timed Zipfian reads per cache run, after N/4 warm-up reads (default 400000)
          --zipf S              Zipf exponent of the reads (default 0.99)
          --seed N              seed of the overwrite keys and the reads
          --dir PATH            where the temporary directory goes (default /tmp)
        """

    init(arguments: [String]) throws {
        var reader = ArgumentReader(arguments, usage: Self.usage)
        while let flag = reader.nextFlag() {
            switch flag {
            case "--quick":
                keys = 20_000
                commits = 15_000
                repeats = 1
                reads = 80_000
            case "--keys": keys = Int(try reader.positiveNumber(for: flag))
            case "--commits": commits = Int(try reader.positiveNumber(for: flag))
            case "--puts-per-commit": putsPerCommit = Int(try reader.positiveNumber(for: flag))
            case "--samples": samples = Int(try reader.positiveNumber(for: flag))
            case "--repeats": repeats = Int(try reader.positiveNumber(for: flag))
            case "--durability":
                switch try reader.value(for: flag) {
                case "none": durability = .none
                case "normal": durability = .normal
                case let other: throw BenchmarkError("--durability \(other): expected none or normal\n\(Self.usage)")
                }
            case "--wal-kib": walRolloverBytes = UInt64(try reader.positiveNumber(for: flag)) << 10
            case "--default-compaction": defaultCompaction = true
            case "--reads": reads = Int(try reader.positiveNumber(for: flag))
            case "--zipf": zipfExponent = try reader.positiveNumber(for: flag)
            case "--seed": seed = UInt64(try reader.positiveNumber(for: flag))
            case "--dir": parent = try reader.value(for: flag)
            case "-h", "--help":
                print(Self.usage)
                exit(0)
            default: throw BenchmarkError("unknown argument \(flag)\n\(Self.usage)")
            }
        }
        guard keys >= 100 else { throw BenchmarkError("--keys must be at least 100") }
    }

    /// The compaction thresholds of the overwrite runs. Unless `defaultCompaction`, the
    /// engine's defaults with every byte threshold scaled by `walRolloverBytes / 64 MiB` (the
    /// default WAL size), so that a small store sees the shape of work a large one would:
    /// segments the size of a WAL are not "small", and one run may rewrite four WALs' worth.
    var compactionOptions: CompactionOptions {
        var options = CompactionOptions()
        guard !defaultCompaction else { return options }
        let scale = Double(walRolloverBytes) / Double(EngineOptions().walRolloverBytes)
        func scaled(_ bytes: UInt64) -> UInt64 { max(1, UInt64(Double(bytes) * scale)) }
        options.maxDeadBytes = scaled(options.maxDeadBytes)
        options.smallSegmentBytes = scaled(options.smallSegmentBytes)
        options.targetSegmentBytes = scaled(options.targetSegmentBytes)
        options.maxRunBytes = scaled(options.maxRunBytes)
        return options
    }

    /// The durability's name as the report prints it.
    var durabilityName: String {
        switch durability {
        case .none: ".none"
        case .normal: ".normal"
        case .full: ".full"
        }
    }
}

/// Bytes of user data in one put.
let entryBytes = Workload.keyLength + Workload.valueLength

/// `bytes` as KiB or MiB, for option values.
func binarySize(_ bytes: UInt64) -> String {
    bytes >= 1 << 20 && bytes % (1 << 20) == 0 ? "\(bytes >> 20) MiB" : "\(bytes >> 10) KiB"
}

func runReport(_ settings: Settings) throws {
    let directory = try TemporaryDirectory(in: settings.parent, prefix: "strata-compaction-")
    defer { directory.remove() }
    let started = ContinuousClock.now
    let n = settings.keys
    let keys = Workload.keys(n)
    let compaction = settings.compactionOptions
    print(
        "compaction-report: \(n) keys of \(Workload.keyLength) B, values of \(Workload.valueLength) B "
            + "(\(megabytes(n * entryBytes, 1)) MB), in \(directory.path)")
    print("load average at start: \(loadAverage()) (\(ProcessInfo.processInfo.activeProcessorCount) cores)")
    print(
        "store options: durability \(settings.durabilityName), WAL rollover \(binarySize(settings.walRolloverBytes)); "
            + "compaction \(settings.defaultCompaction ? "defaults" : "defaults scaled to the WAL size"): "
            + "minDeadRatio \(compaction.minDeadRatio), maxDeadBytes \(binarySize(compaction.maxDeadBytes)), "
            + "smallSegmentBytes \(binarySize(compaction.smallSegmentBytes)), "
            + "targetSegmentBytes \(binarySize(compaction.targetSegmentBytes)), "
            + "maxRunBytes \(binarySize(compaction.maxRunBytes)), bytesPerSecond "
            + (compaction.bytesPerSecond.map { "\($0)" } ?? "unlimited"))

    let syncs = try FsyncProbe.latencies(path: directory.appending("fsync-probe"))
    if let slowest = syncs.last {
        print(
            "disk: 4 KiB write + fdatasync x \(syncs.count): median \(fixed(syncs[syncs.count / 2], 2)) ms, "
                + "max \(fixed(slowest, 2)) ms (under the writer lock, which commits wait for, a WAL rollover "
                + "syncs up to 5 times, a flush or compaction swap twice)")
    }

    // 1 and 2. Overwrites with the compactor off, then on, `repeats` times: same seed, fresh
    // store each (the previous one is removed first, so the page cache holds one at a time).
    let workload = OverwriteWorkload(settings: settings, keys: keys)
    var results: [OverwriteResult] = []
    for round in 1...settings.repeats {
        for automatic in [false, true] {
            let name = "compaction \(automatic ? "on" : "off") #\(round)"
            let path = directory.appending("overwrite")
            try? FileManager.default.removeItem(atPath: path)
            Glibc.sync()
            results.append(
                try workload.run(automatic: automatic, label: name, path: path, scratch: directory.appending("live-copy")))
        }
    }
    let putsTotal = settings.commits * settings.putsPerCommit
    print(
        "\n1. Overwrite: fill, flush, then \(settings.commits) commits of \(settings.putsPerCommit) puts to random "
            + "keys (\(fixed(Double(putsTotal) / Double(n), 1))x the key count), durability \(settings.durabilityName); "
            + "latency of each commit() call in µs, and how many commits took over 1 ms")
    var latencyTable = Table(["run", "commits/s", "puts/s", "MB/s", "CPU s", "p50", "p99", "p99.9", "max", "mean", "> 1 ms"])
    for result in results {
        let sorted = result.latencies.sorted()
        let mean = Double(sorted.reduce(0, +)) / Double(max(1, sorted.count)) / 1e3
        latencyTable.add([
            result.label, fixed(result.commitsPerSecond, 0), fixed(result.putsPerSecond, 0),
            fixed(result.putsPerSecond * Double(entryBytes) / 1e6, 1),
            fixed(result.loopCPUSeconds, 1) + "/" + fixed(result.loopSeconds, 1), fixed(result.latency(0.5, sorted: sorted), 1),
            fixed(result.latency(0.99, sorted: sorted), 1), fixed(result.latency(0.999, sorted: sorted), 1),
            fixed(Double(sorted.last ?? 0) / 1e3, 1), fixed(mean, 1), "\(sorted.count { $0 > 1_000_000 })",
        ])
    }
    print(latencyTable.rendered())
    print("  CPU s: CPU seconds of the process (all threads) / wall seconds of the commit loop")
    for on in results where on.automatic {
        let during = on.compactionDuringRun
        let overwritten = putsTotal * entryBytes
        print(
            "  compactor, \(on.label) (background, until the final flush drained): \(during.runs) runs, "
                + "\(during.segmentsRemoved) segments in, \(during.segmentsWritten) out; read \(megabytes(during.bytesRead, 1)) MB, "
                + "wrote \(megabytes(during.bytesWritten, 1)) MB, reclaimed \(megabytes(during.bytesReclaimed, 1)) MB; "
                + "wrote \(fixed(Double(during.bytesWritten) / Double(overwritten), 2)) B per byte of keys and values overwritten")
    }

    print(
        "\n2. Space over time (sampled every \(max(1, settings.commits / settings.samples)) commits; every on "
            + "run, the first off run, end state only for the other off runs). live = uncompressed bytes of the newest entries (EngineStats.liveBytes), "
            + "amp = disk / live (EngineStats.spaceAmplification); vs packed = disk / the live data's compressed size "
            + "(final contents written to a fresh store and flushed, as EngineCompactionTests does)")
    for (position, result) in results.enumerated() {
        let packed = Double(max(1, result.liveCompressedBytes))
        let during = result.samples.filter { Int($0.label) != nil }
        let peak = during.max { $0.diskBytes < $1.diskBytes }
        let peakNote = peak.map {
            "; peak while committing \(fixed(Double($0.diskBytes) / packed, 2))x packed at commit \($0.label)"
        } ?? ""
        if position >= 2 && !result.automatic {
            // Later rounds without the compactor: the end state only (the series is round 1's).
            let flushed = result.samples.first { $0.label.hasSuffix("flushed") }
            let compacted = result.samples.first { $0.label == "after compact()" }
            if let flushed, let compacted {
                print(
                    "\n  \(result.label): flushed \(megabytes(flushed.diskBytes)) MB "
                        + "(\(fixed(Double(flushed.diskBytes) / packed, 3))x packed), after compact() "
                        + "\(megabytes(compacted.diskBytes)) MB (\(fixed(Double(compacted.diskBytes) / packed, 3))x packed)"
                        + peakNote)
            }
            continue
        }
        print("\n  \(result.label): live data packed in a fresh store = \(megabytes(result.liveCompressedBytes)) MB")
        var table = Table(["commits", "disk MB", "live MB", "amp", "vs packed", "segments", "WALs", "compactor runs"])
        for sample in result.samples {
            table.add([
                sample.label, megabytes(sample.diskBytes), megabytes(sample.liveBytes), fixed(sample.amplification, 2),
                fixed(Double(sample.diskBytes) / Double(max(1, result.liveCompressedBytes)), 2), "\(sample.segments)",
                "\(sample.wals)", "\(sample.compactionRuns)",
            ])
        }
        print(table.rendered(indent: 4))
        if let compacted = result.samples.first(where: { $0.label == "after compact()" }) {
            let ratio = Double(compacted.diskBytes) / packed
            print(
                "    after compact(): \(fixed(ratio, 3))x the packed live data (DESIGN target <= 1.3: "
                    + "\(ratio <= 1.3 ? "met" : "NOT met")); compact() took \(fixed(result.compactSeconds, 2)) s, "
                    + "compact(.full) \(fixed(result.fullCompactSeconds, 2)) s" + peakNote)
        }
    }

    // 3. Zipfian reads through the row cache.
    let cache = CacheWorkload(settings: settings, keys: keys)
    let store = directory.appending("cache")
    try cache.build(at: store)
    let rowCost = try cache.rowCost(storeAt: store)
    let warmUp = settings.reads / 4
    let order = cache.readOrder(warmUp + settings.reads)
    let warm = order.prefix(warmUp), measured = order.dropFirst(warmUp)
    let pinned = max(1, Int((Double(n) * settings.pinFraction).rounded()))
    let pinLabel = "top \(fixed(100 * settings.pinFraction, 0))%"
    var cacheTable = Table([
        "budget", "rows fit", "pins", "hit %", "oracle %", "reads/s", "evictions", "pinned KB", "unpinned KB", "rows cached",
    ])
    for fraction in settings.budgets {
        let budget = Int(Double(n * rowCost) * fraction)
        var runs: [CacheResult] = []
        runs.append(try cache.run(storeAt: store, budget: budget, pinned: 0, pinsLabel: "none", warmUp: warm, timed: measured))
        let withPins = try cache.run(
            storeAt: store, budget: budget, pinned: pinned, pinsLabel: pinLabel + " (+ their bytes)", warmUp: warm,
            timed: measured)
        runs.append(withPins)
        runs.append(
            try cache.run(
                storeAt: store, budget: max(0, budget - withPins.pinnedBytes), pinned: pinned,
                pinsLabel: pinLabel + " (same total)", warmUp: warm, timed: measured))
        for run in runs {
            cacheTable.add([
                "\(kilobytes(run.budgetBytes)) KB", percent(Double(run.budgetBytes) / Double(n * rowCost), 1), run.pins,
                percent(run.hitRatio), percent(run.oracleHitRatio), fixed(run.readsPerSecond, 0), "\(run.evictions)",
                kilobytes(run.pinnedBytes), kilobytes(run.unpinnedBytes), "\(run.entries)",
            ])
        }
    }
    print(
        "\n3. Row cache: \(n) keys in segments, Zipf s = \(settings.zipfExponent) over a random permutation of the keys "
            + "(seeded); \(warmUp) warm-up reads, then \(settings.reads) timed gets per row, one thread. A cached row costs "
            + "\(rowCost) B (key, value and bookkeeping); rows fit = budget / (keys x row cost). Pins: the \(pinned) "
            + "hottest keys, pinned before the reads, either on top of the budget or taken out of it. oracle = hits "
            + "of a cache always holding the same number of rows, the most frequent ones (Zipf mass of the top ranks)")
    print(cacheTable.rendered())

    print("\nload average at end: \(loadAverage()) (on a shared 2-core machine, above 2 means the figures are skewed)")
    print("total time: \(fixed(seconds(ContinuousClock.now - started), 1)) s")
}

do {
    try runReport(try Settings(arguments: Array(CommandLine.arguments.dropFirst())))
} catch {
    FileHandle.standardError.write(Data("compaction-report: \(error)\n".utf8))
    exit(2)
}

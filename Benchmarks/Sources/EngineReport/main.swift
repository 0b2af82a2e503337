// engine-report: raw disk and LZ4 baselines, then the engine's main workloads, in one run and
// one temporary directory, printed as one table. See Benchmarks/README.md.

import BenchmarkSupport
import Foundation
import Glibc
import StrataEngine

/// Sizes and places, from the command line.
struct Settings {
    var keys = 1_000_000
    var rawMebibytes = 256
    var commitSeconds = 3.0
    var parent = "/tmp"
    var lz4OnValues = true

    static let usage = """
        usage: engine-report [--quick] [--keys N] [--raw-mib N] [--commit-seconds S] [--dir PATH]

          --quick             100k keys, 64 MiB raw write, 1 s per commit test (under 20 s)
          --keys N            keys per fill (default 1000000)
          --raw-mib N         MiB for the raw write baselines (default 256)
          --commit-seconds S  seconds per .full commit test (default 3)
          --dir PATH          where the temporary directory goes (default /tmp)
        """

    init(arguments: [String]) throws {
        var reader = ArgumentReader(arguments, usage: Self.usage)
        while let flag = reader.nextFlag() {
            switch flag {
            case "--quick":
                keys = 100_000
                rawMebibytes = 64
                commitSeconds = 1
                lz4OnValues = false
            case "--keys": keys = Int(try reader.positiveNumber(for: flag))
            case "--raw-mib": rawMebibytes = Int(try reader.positiveNumber(for: flag))
            case "--commit-seconds": commitSeconds = try reader.positiveNumber(for: flag)
            case "--dir": parent = try reader.value(for: flag)
            case "-h", "--help":
                print(Self.usage)
                exit(0)
            default: throw BenchmarkError("unknown argument \(flag)\n\(Self.usage)")
            }
        }
    }
}

/// Bytes of user data in one put.
let entryBytes = Workload.keyLength + Workload.valueLength

func runReport(_ settings: Settings) throws {
    let directory = try TemporaryDirectory(in: settings.parent, prefix: "strata-report-")
    defer { directory.remove() }
    let n = settings.keys
    print("engine-report: \(n) keys of \(Workload.keyLength) B, values of \(Workload.valueLength) B, in \(directory.path)")
    print("(MB = 10^6 bytes of keys and values; ratios compare with the raw pwrite bandwidth)")
    print("load average at start: \(loadAverage())\n")
    var report = Report()

    // 1. Raw sequential write bandwidth: the better of two runs each, after a global sync so
    // that no other dirty data competes for the disk (every write phase below does the same).
    let mib = settings.rawMebibytes
    Glibc.sync()
    var rawSeconds = Double.infinity
    for _ in 0..<2 {
        rawSeconds = min(rawSeconds, try Baselines.pwriteBandwidth(path: directory.appending("raw.bin"), mebibytes: mib))
        Glibc.sync()
    }
    report.rawMegabytesPerSecond = Double(mib << 20) / 1e6 / rawSeconds
    report.add(Row(operation: "raw: pwrite 1 MiB x \(mib), fdatasync", ops: mib, seconds: rawSeconds, bytes: mib << 20))
    var notes: [String] = []
    var dd: (seconds: Double, summary: String)? = nil
    for _ in 0..<2 {
        guard let run = try Baselines.ddBandwidth(path: directory.appending("dd.bin"), mebibytes: mib) else { break }
        if run.seconds < dd?.seconds ?? .infinity { dd = run }
        Glibc.sync()
    }
    if let dd {
        report.add(Row(operation: "raw: dd bs=1M conv=fdatasync", ops: mib, seconds: dd.seconds, bytes: mib << 20))
        notes.append("dd says (better run): \(dd.summary)")
    } else {
        notes.append("dd: not installed")
    }

    // 2. LZ4 level 1 (the engine's segment compression), from the lz4 command.
    var lz4Inputs: [(String, String?)] = [("lz4 synthetic 50%", nil)]
    if settings.lz4OnValues {
        let file = directory.appending("values.bin")
        try writeSampleData(to: file, megabytes: 16)
        lz4Inputs.append(("lz4 on benchmark keys+values", file))
    }
    for (label, file) in lz4Inputs {
        if let lz4 = try Baselines.lz4Speed(file: file) {
            notes.append(
                "\(label): ratio \(fixed(lz4.ratio, 2)), compress \(fixed(lz4.compress, 0)) MB/s, "
                    + "decompress \(fixed(lz4.decompress, 0)) MB/s")
        } else {
            notes.append("lz4: the lz4 command is not installed; no LZ4 figures")
            break
        }
    }
    for note in notes { print("  " + note) }

    // 3. The engine.
    let keys = Workload.keys(n)
    let values = Workload.values()
    let inOrder = Array(0..<n)
    let bytes = n * entryBytes

    // Sequential fill, durability none: commits, then one sync; then everything to segments.
    var stats: EngineStats
    do {
        Glibc.sync()
        let engine = try Engine.open(at: directory.appending("seq"), options: Workload.options(.none))
        let (_, fill) = try timed { () throws(StoreError) in
            try Workload.fill(engine, keys: keys, order: inOrder, values: values)
            try engine.sync()
        }
        report.add(Row(operation: "seq fill, .none (batch 1000, + sync)", ops: n, seconds: fill, bytes: bytes, comparesToRaw: true))
        let (_, flush) = try timed { try engine.flush() }
        report.add(
            Row(operation: "seq fill, .none, incl. flush to segments", ops: n, seconds: fill + flush, bytes: bytes,
                comparesToRaw: true))
        stats = try engine.stats()
        try engine.close()
    }

    // Reopen (all in segments), then a full scan.
    do {
        let (engine, open) = try timed { try Engine.open(at: directory.appending("seq")) }
        report.add(Row(operation: "reopen, \(n) keys in segments", ops: n, seconds: open, bytes: nil))
        let (count, scan) = try timed { () throws(StoreError) -> Int in
            var count = 0
            try engine.snapshot().forEach { _, _ in
                count += 1
                return true
            }
            return count
        }
        guard count == n else { throw BenchmarkError("scan saw \(count) keys, expected \(n)") }
        report.add(Row(operation: "full scan (forEach)", ops: count, seconds: scan, bytes: count * entryBytes))
        try engine.close()
    }

    // Sequential fill, durability full: one sync per batch of 1000.
    do {
        Glibc.sync()
        let engine = try Engine.open(at: directory.appending("seq-full"), options: Workload.options(.full))
        let (_, fill) = try timed { try Workload.fill(engine, keys: keys, order: inOrder, values: values) }
        report.add(Row(operation: "seq fill, .full (batch 1000)", ops: n, seconds: fill, bytes: bytes, comparesToRaw: true))
        try engine.close()
    }

    // Random fill, then overwrite of random keys (with repeats), both durability none.
    do {
        Glibc.sync()
        let engine = try Engine.open(at: directory.appending("random"), options: Workload.options(.none))
        let shuffled = Workload.shuffledIndices(n)
        let (_, fill) = try timed { () throws(StoreError) in
            try Workload.fill(engine, keys: keys, order: shuffled, values: values)
            try engine.sync()
        }
        report.add(Row(operation: "random fill, .none (batch 1000, + sync)", ops: n, seconds: fill, bytes: bytes, comparesToRaw: true))
        let targets = Workload.randomIndices(n, in: n)
        let (_, overwrite) = try timed { () throws(StoreError) in
            try Workload.fill(engine, keys: keys, order: targets, values: Array(values.reversed()))
            try engine.sync()
        }
        report.add(Row(operation: "overwrite, .none (batch 1000, + sync)", ops: n, seconds: overwrite, bytes: bytes))
        try engine.close()
    }

    // Random reads of keys still in the WAL, reopen with WAL replay, then reads from segments;
    // all with the row cache off, so that every read goes to a file. Then the same reads with a
    // row cache big enough for every key, warmed by one read of each.
    do {
        let walKeys = min(n, 250_000)
        let path = directory.appending("wal")
        var options = Workload.options(.none, walRolloverBytes: 1 << 30, rowCacheBytes: 0)
        options.flushAtCloseBytes = 0  // the reopen row times the log's replay: close leaves the log
        var engine = try Engine.open(at: path, options: options)
        try Workload.fill(engine, keys: keys, order: Workload.shuffledIndices(walKeys), values: values)
        let reads = Workload.randomIndices(n, in: walKeys, seed: 0xBEEF)
        func readAll(_ engine: Engine, _ indices: [Int]) throws -> Double {
            let snapshot = try engine.snapshot()
            let (found, elapsed) = try timed { () throws(StoreError) -> Int in
                var found = 0
                for index in indices where try snapshot.get(keys[index]) != nil { found += 1 }
                return found
            }
            guard found == indices.count else { throw BenchmarkError("\(indices.count - found) reads found nothing") }
            return elapsed
        }
        report.add(
            Row(operation: "random read, WAL, no row cache (\(walKeys) keys)", ops: n, seconds: try readAll(engine, reads),
                bytes: bytes))
        try engine.close()
        let open: Double
        (engine, open) = try timed { try Engine.open(at: path, options: options) }
        report.add(Row(operation: "reopen, \(walKeys) keys in the WAL (replay)", ops: walKeys, seconds: open, bytes: nil))
        let (_, flush) = try timed { try engine.flush() }
        report.add(Row(operation: "flush WAL to a segment", ops: walKeys, seconds: flush, bytes: walKeys * entryBytes))
        report.add(
            Row(operation: "random read, segments, no row cache", ops: n, seconds: try readAll(engine, reads), bytes: bytes))
        try engine.close()

        engine = try Engine.open(at: path, options: Workload.options(.none, rowCacheBytes: 256 << 20))
        _ = try readAll(engine, Array(0..<walKeys))
        let before = engine.cacheStats()
        let warm = try readAll(engine, reads)
        let after = engine.cacheStats()
        report.add(Row(operation: "random read, row cache warm", ops: n, seconds: warm, bytes: bytes))
        let hits = after.hits - before.hits, lookups = hits + after.misses - before.misses
        notes.append("row cache warm reads: \(fixed(100 * Double(hits) / Double(max(1, lookups)), 1))% hits")
        try engine.close()
    }

    // Commits per second under full durability: 1 and 8 committer threads, one put each.
    for threads in [1, 8] {
        Glibc.sync()
        let engine = try Engine.open(at: directory.appending("commits-\(threads)"), options: Workload.options(.full))
        let deadline = ContinuousClock.now + .milliseconds(Int(settings.commitSeconds * 1000))
        let (commits, elapsed) = try timed {
            try Committers.run(engine, threads: threads, until: deadline, value: values[0])
        }
        report.add(
            Row(operation: "commits, .full, \(threads) committer\(threads == 1 ? "" : "s")", ops: commits,
                seconds: elapsed, bytes: commits * entryBytes))
        try engine.close()
    }

    print("\n" + report.table())
    notes.append("load average at end: \(loadAverage()) (on \(ProcessInfo.processInfo.activeProcessorCount) cores; other work skews results)")
    print("")
    for note in notes { print(note) }
    let user = Double(bytes)
    print(
        "after seq fill + flush: \(stats.segments.count) segment(s), \(fixed(Double(stats.diskBytes) / 1e6, 1)) MB on disk "
            + "for \(fixed(user / 1e6, 1)) MB of keys and values (\(fixed(Double(stats.diskBytes) / user, 2))x); "
            + "index \(fixed(Double(stats.indexMemoryBytes) / Double(max(1, stats.keyCount)), 1)) B/key "
            + "(key is \(Workload.keyLength) B)")
}

/// Writes `megabytes` MB of keys and values as a WAL lays them out, for `lz4 -b1`.
func writeSampleData(to path: String, megabytes: Int) throws {
    let data = Workload.logBytes(megabytes: megabytes)
    guard FileManager.default.createFile(atPath: path, contents: Data(data)) else {
        throw BenchmarkError("could not write \(path)")
    }
}

do {
    try runReport(try Settings(arguments: Array(CommandLine.arguments.dropFirst())))
} catch {
    FileHandle.standardError.write(Data("engine-report: \(error)\n".utf8))
    exit(2)
}

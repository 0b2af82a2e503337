import Foundation
import StrataEngine

/// The `strata demo` job: writes a small store, reopens it and reads everything back.
///
/// For example:
///
/// ```swift
/// let report = try EngineDemo.run(in: "/tmp/strata-demo", keys: 10_000)
/// print(report.lines.joined(separator: "\n"))
/// ```
public enum EngineDemo {
    /// What the demo did, one line per step, and whether every value read back matched.
    public struct Report: Sendable {
        /// Human-readable lines, one per step.
        public var lines: [String] = []
        /// Whether every value read after reopening equalled what was written.
        public var verified = false
    }

    /// Runs the demo in `directory` (created if missing) with `keys` keys.
    public static func run(in directory: String, keys: Int = 10_000) throws(StoreError) -> Report {
        var report = Report()
        let clock = ContinuousClock()
        func value(_ i: Int) -> [UInt8] { Array("value \(i) of the Strata demo".utf8) }
        func key(_ i: Int) -> [UInt8] { Array(String(format: "demo/%08d", i).utf8) }

        var options = EngineOptions()
        options.walRolloverBytes = 256 << 10
        var engine = try Engine.open(at: directory, options: options)
        var start = clock.now
        var batch = WriteBatch()
        for i in 0..<keys {
            batch.put(key(i), value(i))
            if batch.count == 1000 {
                try engine.commit(batch)
                batch = WriteBatch()
            }
        }
        try engine.commit(batch)
        try engine.flush()
        report.lines.append("wrote \(keys) keys in \(keys / 1000 + 1) transactions in \(clock.now - start)")
        for i in stride(from: 0, to: keys, by: 2) { try engine.delete(key(i)) }
        report.lines.append("deleted every other key (\(keys / 2) transactions)")
        var stats = try engine.stats()
        report.lines.append(
            "store: \(stats.segments.count) segments, \(stats.wals.count) WAL, \(stats.diskBytes) bytes on disk, index ≈ \(stats.indexMemoryBytes) bytes")
        try engine.close()

        start = clock.now
        engine = try Engine.open(at: directory, options: options)
        report.lines.append("reopened in \(clock.now - start): \(try engine.snapshot().count) keys")
        start = clock.now
        var matched = 0
        for (k, v) in try engine.snapshot().scan(prefix: Array("demo/".utf8)) {
            guard let text = String(bytes: k, encoding: .utf8), let n = Int(text.dropFirst(5)) else { continue }
            if n % 2 == 1 && v == value(n) { matched += 1 }
        }
        let deletedIsGone = try engine.get(key(0)) == nil
        report.verified = matched == keys / 2 && deletedIsGone
        report.lines.append("scanned and verified \(matched) keys in \(clock.now - start): \(report.verified ? "all correct" : "MISMATCH")")
        stats = try engine.stats()
        report.lines.append("last sequence \(stats.lastSequence), \(stats.liveBytes) live bytes of \(stats.diskBytes) on disk")
        try engine.close()
        return report
    }
}

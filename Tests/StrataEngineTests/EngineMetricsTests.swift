import Glibc
import Metrics
import MetricsTestKit
import Testing
@testable import StrataEngine

/// The engine's metrics ([EngineMetrics]) in the factory its options name: timers and counters
/// as work happens, gauges when published, each with the store's path as a dimension.
@Suite struct EngineMetricsTests {
    @Test func commitsSyncsFlushesAndCompactionsAreMeasured() throws {
        let fs = FaultInjectingFileSystem()
        let metrics = TestMetrics()
        var options = testOptions(fs, rollover: 2048)
        options.metricsFactory = metrics
        let engine = try Engine.open(at: "/store", options: options)
        let path = [("path", "/store")]
        #expect(try metrics.expectTimer("strata_open_seconds", path).values.count == 1)
        for n in 0..<120 { try engine.put(testKey(n), Array(repeating: UInt8(n % 251), count: 40)) }
        try engine.compact(.full)
        try engine.publishMetrics()

        #expect(try metrics.expectTimer("strata_commit_seconds", path).values.count == 120)
        #expect(try metrics.expectTimer("strata_commit_seconds", path).values.allSatisfy { $0 >= 0 })
        let syncs = try metrics.expectTimer("strata_sync_seconds", path).values.count
        #expect(syncs >= 120, "every commit of durability full syncs its WAL: \(syncs)")
        #expect(metrics.counterTotal(label: "strata_flushes_total", dimensions: path) >= 1)
        #expect(metrics.counterTotal(label: "strata_compactions_total", dimensions: path) >= 1)
        let stats = try engine.stats()
        #expect(metrics.counterTotal(label: "strata_compaction_read_bytes_total", dimensions: path) == Int64(stats.compaction.bytesRead))
        #expect(metrics.counterTotal(label: "strata_compaction_written_bytes_total", dimensions: path) == Int64(stats.compaction.bytesWritten))
        #expect(try metrics.expectGauge("strata_keys", path).lastValue == 120)
        #expect(try metrics.expectGauge("strata_segment_bytes", path).lastValue == Double(stats.segments.reduce(0) { $0 + $1.sizeBytes }))
        #expect(try metrics.expectGauge("strata_wal_bytes", path).lastValue == Double(stats.wals.reduce(0) { $0 + $1.sizeBytes }))
        _ = try engine.get(testKey(3))
        try engine.publishMetrics()
        let reads = try metrics.expectGauge("strata_row_cache_hits", path).lastValue.map(Int.init) ?? -1
        let misses = try metrics.expectGauge("strata_row_cache_misses", path).lastValue.map(Int.init) ?? -1
        let hits = try engine.stats().cache.hits
        #expect(reads + misses >= 1 && reads == hits, "\(reads) \(misses)")
        try engine.close()

        // A read-only open is timed too.
        var readOnly = options
        readOnly.readOnly = true
        let reader = try Engine.open(at: "/store", options: readOnly)
        #expect(try metrics.expectTimer("strata_open_seconds", path).values.count == 2)
        try reader.close()
    }
}

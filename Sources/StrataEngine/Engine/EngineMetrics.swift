import Metrics

/// The engine's metrics, through swift-metrics: made once when the engine opens, each with the
/// store's directory as its `path` dimension, in ``EngineOptions/metricsFactory`` (or the
/// global `MetricsSystem`, which discards them until the application bootstraps a backend,
/// such as swift-prometheus).
///
/// Recorded as they happen: `strata_commit_seconds` (a timer per commit, from the call to
/// its acknowledgement, sync included), `strata_sync_seconds` (a timer per `fdatasync` of a
/// WAL), `strata_open_seconds` (the open, recovery included), `strata_flushes_total`,
/// `strata_compactions_total`, `strata_compaction_read_bytes_total` and
/// `strata_compaction_written_bytes_total` (counters). Published by
/// ``Engine/publishMetrics()`` (gauges, from ``Engine/stats()``): `strata_wal_bytes`,
/// `strata_segment_bytes`, `strata_keys`, `strata_row_cache_hits`, `strata_row_cache_misses`,
/// `strata_row_cache_pinned_keys`, `strata_block_cache_hits`, `strata_block_cache_misses`.
struct EngineMetrics: Sendable {
    let commit: CoreMetrics.Timer
    let sync: CoreMetrics.Timer
    let open: CoreMetrics.Timer
    let flushes: Counter
    let compactions: Counter
    let compactionRead: Counter
    let compactionWritten: Counter
    let walBytes: Gauge
    let segmentBytes: Gauge
    let keys: Gauge
    let rowCacheHits: Gauge
    let rowCacheMisses: Gauge
    let pinnedKeys: Gauge
    let blockCacheHits: Gauge
    let blockCacheMisses: Gauge

    init(path: String, factory: (any MetricsFactory)?) {
        let dimensions = [("path", path)]
        let factory = factory ?? MetricsSystem.factory
        func timer(_ label: String) -> CoreMetrics.Timer { CoreMetrics.Timer(label: label, dimensions: dimensions, factory: factory) }
        func counter(_ label: String) -> Counter { Counter(label: label, dimensions: dimensions, factory: factory) }
        func gauge(_ label: String) -> Gauge { Gauge(label: label, dimensions: dimensions, factory: factory) }
        commit = timer("strata_commit_seconds")
        sync = timer("strata_sync_seconds")
        open = timer("strata_open_seconds")
        flushes = counter("strata_flushes_total")
        compactions = counter("strata_compactions_total")
        compactionRead = counter("strata_compaction_read_bytes_total")
        compactionWritten = counter("strata_compaction_written_bytes_total")
        walBytes = gauge("strata_wal_bytes")
        segmentBytes = gauge("strata_segment_bytes")
        keys = gauge("strata_keys")
        rowCacheHits = gauge("strata_row_cache_hits")
        rowCacheMisses = gauge("strata_row_cache_misses")
        pinnedKeys = gauge("strata_row_cache_pinned_keys")
        blockCacheHits = gauge("strata_block_cache_hits")
        blockCacheMisses = gauge("strata_block_cache_misses")
    }
}

extension Engine {
    /// Sets the engine's gauges (`EngineMetrics`) from ``stats()``: call it as often as the
    /// metrics are scraped (the counters and timers are recorded as work happens).
    ///
    /// - Throws: what ``stats()`` throws.
    public func publishMetrics() throws(StoreError) {
        let stats = try stats()
        metrics.walBytes.record(stats.wals.reduce(0) { $0 + $1.sizeBytes })
        metrics.segmentBytes.record(stats.segments.reduce(0) { $0 + $1.sizeBytes })
        metrics.keys.record(stats.keyCount)
        metrics.rowCacheHits.record(stats.cache.hits)
        metrics.rowCacheMisses.record(stats.cache.misses)
        metrics.pinnedKeys.record(stats.cache.pinnedKeys)
        metrics.blockCacheHits.record(stats.blockCache.hits)
        metrics.blockCacheMisses.record(stats.blockCache.misses)
    }
}

extension CoreMetrics.Timer {
    /// Records the time since `start`, in nanoseconds.
    func recordInterval(since start: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - start
        recordNanoseconds(elapsed.components.seconds &* 1_000_000_000 &+ elapsed.components.attoseconds / 1_000_000_000)
    }
}

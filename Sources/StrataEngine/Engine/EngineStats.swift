/// The numbers the compactor and the tools read from an open engine.
public struct EngineStats: Sendable, Equatable {
    /// One WAL or segment file.
    public struct File: Sendable, Equatable {
        /// The file's number.
        public var fileNumber: UInt32
        /// The file's path.
        public var path: String
        /// Bytes on disk.
        public var sizeBytes: UInt64
        /// Bytes of all entries in the file.
        public var entryBytes: UInt64
        /// Bytes of entries overwritten or deleted since they were written.
        public var deadBytes: UInt64
        /// Bytes of delete entries (tombstones), which stay until compaction drops them.
        public var tombstoneBytes: UInt64
        /// Bytes of entries that still hold a key's newest value.
        public var liveBytes: UInt64 { entryBytes - min(entryBytes, deadBytes + tombstoneBytes) }
    }

    /// Keys with a value.
    public var keyCount: Int
    /// Estimated bytes of memory the in-memory index holds.
    public var indexMemoryBytes: Int
    /// Bytes of memory the live WALs' images hold ([WAL-5]: WAL values are read from memory).
    public var walMemoryBytes: Int = 0
    /// The newest visible sequence number.
    public var lastSequence: UInt64
    /// Live WAL files, oldest first; the last is the one appended to.
    public var wals: [File]
    /// Live segments.
    public var segments: [File]
    /// The manifest's next file number.
    public var nextFileNumber: UInt32
    /// The compactor's progress and totals.
    public var compaction: CompactionStats
    /// The row cache's counters.
    public var cache: RowCacheStats
    /// The block cache's counters.
    public var blockCache = BlockCacheStats()

    /// Bytes of every live WAL and segment.
    public var diskBytes: UInt64 { (wals + segments).reduce(0) { $0 + $1.sizeBytes } }
    /// Disk bytes divided by live bytes: 1.0 means no dead data at all.
    public var spaceAmplification: Double { liveBytes == 0 ? 1 : Double(diskBytes) / Double(liveBytes) }
    /// Bytes of entries that hold a key's newest value.
    public var liveBytes: UInt64 { (wals + segments).reduce(0) { $0 + $1.liveBytes } }
}

extension Engine {
    /// Current statistics. Cheap: reads counters kept up to date by commits and flushes.
    public func stats() throws(StoreError) -> EngineStats {
        let (manifest, walEnd, walNumber) = writer.withLock { ($0.manifest, $0.walEnd, $0.wal.number) }
        let compaction = compactionStats(), cache = cacheStats(), blockCache = blockCacheStats()
        return try shared.withLock { (state) throws(StoreError) -> EngineStats in
            func describe(_ number: UInt32, size: UInt64) -> EngineStats.File {
                let usage = state.usage[number] ?? FileUsage()
                let path = state.files[number]?.path ?? ""
                return EngineStats.File(
                    fileNumber: number, path: path, sizeBytes: size, entryBytes: usage.entryBytes,
                    deadBytes: usage.deadBytes, tombstoneBytes: usage.tombstoneBytes)
            }
            var wals: [EngineStats.File] = []
            for number in manifest.wals {
                var size = walEnd
                if number != walNumber, let file = state.files[number], case .wal(let handle, _) = file.content {
                    size = try handle.size()
                }
                wals.append(describe(number, size: size))
            }
            var stats = EngineStats(
                keyCount: state.index.count, indexMemoryBytes: state.index.estimatedMemoryBytes,
                lastSequence: state.sequence, wals: wals,
                segments: manifest.segments.map { describe($0.fileNumber, size: $0.size) },
                nextFileNumber: manifest.nextFileNumber, compaction: compaction, cache: cache,
                blockCache: blockCache)
            stats.walMemoryBytes = state.files.values.reduce(0) { total, file in
                if case .wal(_, let image) = file.content { return total + image.byteCount }
                return total
            }
            return stats
        }
    }
}

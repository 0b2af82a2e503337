import Testing
@testable import StrataEngine

/// The row cache as the engine uses it: pins keep rows resident, commits and snapshots stay
/// consistent with it, compaction never makes it stale.
@Suite struct EngineCacheTests {
    static func engine(budget: Int) throws -> Engine {
        var options = testOptions(FaultInjectingFileSystem(), rollover: 1 << 20)
        options.rowCacheBytes = budget
        return try Engine.open(at: "/store", options: options)
    }

    @Test func pinnedRowsStayCachedUnderPressureAndUnpinnedOnesAreEvicted() throws {
        let engine = try Self.engine(budget: 4096)
        for i in 0..<200 { try engine.put(testKey(i), [UInt8](repeating: UInt8(i % 256), count: 100)) }
        try engine.flush()
        let pinned = (0..<10).map(testKey)
        engine.pin(pinned)
        for key in pinned { _ = try engine.get(key) }  // loaded on first read, then kept
        for round in 0..<3 { for i in 10..<200 { _ = try engine.get(testKey(i)); _ = round } }
        let stats = engine.cacheStats()
        #expect(stats.pinnedEntries == 10)
        #expect(stats.evictions > 0)
        #expect(stats.unpinnedBytes <= 4096)
        for key in pinned { #expect(engine.rowCache.contains(key), "pinned row evicted") }
        let hitsBefore = engine.cacheStats().hits
        for key in pinned { _ = try engine.get(key) }
        #expect(engine.cacheStats().hits == hitsBefore + 10)
        // Once unpinned, the same pressure evicts them.
        try engine.unpin(pinned)
        for i in 10..<200 { _ = try engine.get(testKey(i)) }
        #expect(pinned.filter { engine.rowCache.contains($0) }.count < 10)
        #expect(engine.cacheStats().pinnedEntries == 0)
    }

    // A reader's read that does not cache: a segment value is read in place and left out of
    // the row cache; a value the cache holds comes from it; the other reads still cache.
    @Test func aReadThatDoesNotCacheLeavesTheRowCacheAsItWas() throws {
        let engine = try Self.engine(budget: 1 << 20)
        for i in 0..<50 { try engine.put(testKey(i), [UInt8(i), 7, UInt8(i)]) }
        try engine.flush()
        _ = try engine.get(testKey(3))  // cached by an ordinary read
        #expect(engine.rowCache.contains(testKey(3)))
        var reader = Snapshot.Reader(try engine.snapshot())
        for i in 0..<50 {
            var read: [UInt8]? = nil
            #expect(try reader.withValue(testKey(i), caching: false) { read = Array($0) })
            #expect(read == [UInt8(i), 7, UInt8(i)], "key \(i)")
            #expect(engine.rowCache.contains(testKey(i)) == (i == 3), "key \(i) cached by a read that does not cache")
        }
        #expect(try !reader.withValue(testKey(99), caching: false) { _ in Issue.record("a missing key read") })
        var cached: [UInt8]? = nil
        #expect(try reader.withValue(testKey(5), caching: true) { cached = Array($0) })
        #expect(cached == [5, 7, 5] && engine.rowCache.contains(testKey(5)))
    }

    @Test func anUnbalancedUnpinIsReportedAndChangesNothing() throws {
        let engine = try Self.engine(budget: 1 << 20)
        engine.pin([[1]])
        do {
            try engine.unpin([[1], [2]])
            Issue.record("unbalanced unpin accepted")
        } catch {
            #expect(error.code == .invalidArgument)
        }
        #expect(engine.rowCache.pinCount([1]) == 1)
        try engine.unpin([[1]])
        #expect(engine.rowCache.pinCount([1]) == 0)
        #expect(engine.cacheStats().unbalancedUnpins == 1)
    }

    @Test func commitsUpdateCachedRowsAndOlderSnapshotsStillSeeTheirValues() throws {
        let engine = try Self.engine(budget: 1 << 20)
        try engine.put([1], [10])
        engine.pin([[1]])
        #expect(try engine.get([1]) == [10])
        let old = try engine.snapshot()
        try engine.put([1], [11])
        #expect(try engine.get([1]) == [11])
        #expect(try old.get([1]) == [10], "an older snapshot must not see the newer cached value")
        #expect(try engine.get([1]) == [11], "the older read did not put a stale value back")
        try engine.delete([1])
        #expect(try engine.get([1]) == nil)
        #expect(engine.rowCache.pinCount([1]) == 1, "a delete keeps the pin")
        try engine.put([1], [12])
        #expect(try engine.get([1]) == [12])
    }

    @Test func compactionMovingRowsNeverLeavesAStaleCachedValue() throws {
        let engine = try Self.engine(budget: 1 << 20)
        for round in 0..<3 {
            for i in 0..<20 { try engine.put(testKey(i), [UInt8(round), UInt8(i)]) }
            try engine.flush()
        }
        for i in 0..<20 { _ = try engine.get(testKey(i)) }
        try engine.compact(.full)
        try engine.put(testKey(3), [9, 9])
        for i in 0..<20 {
            #expect(try engine.get(testKey(i)) == (i == 3 ? [9, 9] : [2, UInt8(i)]))
        }
        try engine.rowCache.checkInvariants()
    }
}

/// A snapshot's point reader (shared decompressed blocks and WAL windows) against plain gets.
@Suite struct SnapshotReaderTests {
    /// Keys in segments and in the WAL, overwritten and deleted, read in key order, backwards
    /// and at random (the window and block memo must never answer for the wrong entry), with
    /// a cache too small to answer for them.
    @Test func aReaderReadsWhatGetReadsInAnyOrder() throws {
        let engine = try EngineCacheTests.engine(budget: 0)
        for i in 0..<600 { try engine.put(testKey(i), [UInt8](repeating: UInt8(i % 251), count: 40 + i % 90)) }
        try engine.flush()
        for i in stride(from: 0, to: 600, by: 3) { try engine.put(testKey(i), Array("new \(i)".utf8)) }
        for i in stride(from: 1, to: 600, by: 7) { try engine.delete(testKey(i)) }
        for i in 600..<900 { try engine.put(testKey(i), Array("wal \(i)".utf8)) }
        let snapshot = try engine.snapshot()
        var rng = SeededRandom(seed: 5)
        let orders: [[Int]] = [Array(0..<950), Array((0..<950).reversed()), (0..<950).map { _ in Int.random(in: 0..<950, using: &rng) }]
        for order in orders {
            var reader = Snapshot.Reader(snapshot)
            for i in order {
                try #require(try reader.get(testKey(i)) == snapshot.get(testKey(i)), "key \(i)")
            }
        }
    }

    /// `withValue` (a reader's and a snapshot's) hands out in place what `get` copies (from a
    /// segment, the WAL's image or the row cache), and reports a missing or deleted key
    /// without calling its body.
    @Test func withValueSeesWhatGetReadsWithoutACopy() throws {
        for budget in [0, 1 << 20] {
            let engine = try EngineCacheTests.engine(budget: budget)
            for i in 0..<300 { try engine.put(testKey(i), [UInt8](repeating: UInt8(i % 251), count: 30 + i % 70)) }
            try engine.flush()
            for i in stride(from: 0, to: 300, by: 5) { try engine.delete(testKey(i)) }
            for i in 300..<400 { try engine.put(testKey(i), Array("wal \(i)".utf8)) }
            let snapshot = try engine.snapshot()
            var reader = Snapshot.Reader(snapshot)
            // Twice: the second pass reads from the cache where there is one.
            for i in Array(0..<420) + Array(0..<420) {
                var seen: [UInt8]? = nil
                let found = try reader.withValue(testKey(i)) { seen = Array($0) }
                let expected = try snapshot.get(testKey(i))
                try #require(found == (expected != nil) && seen == expected, "key \(i), budget \(budget)")
                var direct: [UInt8]? = nil
                let foundDirectly = try snapshot.withValue(testKey(i)) { direct = Array($0) }
                try #require(foundDirectly == (expected != nil) && direct == expected, "snapshot read of key \(i), budget \(budget)")
            }
        }
    }
}

import Dispatch
import Synchronization
import Testing
@testable import StrataEngine
import StrataSync

/// The cache of decompressed segment blocks: bounded by bytes, second-chance eviction, a
/// reader's blocks gone with it, and scans that read a block once while it stays cached.
@Suite struct BlockCacheTests {
    static func block(_ fill: UInt8, _ count: Int) -> [UInt8] { [UInt8](repeating: fill, count: count) }
    static func bytes(_ block: SegmentBlock) -> [UInt8] { Array(block.bytes) }

    @Test func aBlockUsedSinceTheHandPassedOutlivesOneThatWasNot() {
        let cache = BlockCache(capacityBytes: 300)
        let reader = cache.newReader()
        func key(_ position: UInt32) -> BlockCache.Key { BlockCache.Key(reader: reader, position: position) }
        for position in 0..<3 { cache.insert(key(UInt32(position)), SegmentBlock(Self.block(UInt8(position), 100))) }
        #expect(cache.block(key(0)).map(Self.bytes) == Self.block(0, 100))
        cache.insert(key(3), SegmentBlock(Self.block(3, 100)))
        #expect(cache.block(key(0)).map(Self.bytes) == Self.block(0, 100), "the block just read was evicted")
        #expect(cache.block(key(1)) == nil, "the block never read again should have gone first")
        #expect(cache.block(key(2)).map(Self.bytes) == Self.block(2, 100))
        #expect(cache.block(key(3)).map(Self.bytes) == Self.block(3, 100))
        let stats = cache.stats
        #expect(stats.bytes == 300 && stats.blocks == 3 && stats.evictions == 1)
    }

    @Test func randomInsertsAndReadsAnswerWhatWasInsertedWithinTheCapacity() {
        var random = SeededRandom(seed: 0xB10C)
        let capacity = 2_000
        let cache = BlockCache(capacityBytes: capacity)
        let readers = (0..<3).map { _ in cache.newReader() }
        var inserted: [BlockCache.Key: [UInt8]] = [:]  // what each key was given, ever
        var hits = 0
        for step in 0..<5_000 {
            let key = BlockCache.Key(
                reader: readers[Int(random.next() % 3)], position: UInt32(random.next() % 40))
            if random.next() % 3 == 0 {
                // A key's block is immutable: the same key always gets the same bytes.
                let bytes = inserted[key] ?? Self.block(UInt8(truncatingIfNeeded: step), Int(random.next() % 400) + 1)
                inserted[key] = bytes
                cache.insert(key, SegmentBlock(bytes))
            } else if let found = cache.block(key) {
                #expect(Self.bytes(found) == inserted[key], "key \(key) answered bytes it was not given")
                hits += 1
            }
            let stats = cache.stats
            #expect(stats.bytes <= capacity)
        }
        #expect(hits > 100, "the cache should answer some reads (\(hits))")
        let stats = cache.stats
        #expect(stats.hits == hits)
    }

    @Test func droppingAReaderRemovesItsBlocksOnly() {
        let cache = BlockCache(capacityBytes: 1 << 20)
        let first = cache.newReader(), second = cache.newReader()
        #expect(first != second)
        for position in 0..<5 {
            cache.insert(BlockCache.Key(reader: first, position: UInt32(position)), SegmentBlock(Self.block(1, 10)))
            cache.insert(BlockCache.Key(reader: second, position: UInt32(position)), SegmentBlock(Self.block(2, 10)))
        }
        cache.drop(reader: first)
        for position in 0..<5 {
            #expect(cache.block(BlockCache.Key(reader: first, position: UInt32(position))) == nil)
            #expect(cache.block(BlockCache.Key(reader: second, position: UInt32(position))).map(Self.bytes) == Self.block(2, 10))
        }
        #expect(cache.stats.bytes == 50)
        // The freed places are reused.
        cache.insert(BlockCache.Key(reader: second, position: 9), SegmentBlock(Self.block(3, 10)))
        #expect(cache.stats.blocks == 6)
    }

    @Test func aBlockLargerThanTheCapacityIsNotCachedAndNeitherIsAnythingAtZero() {
        let small = BlockCache(capacityBytes: 50)
        let key = BlockCache.Key(reader: small.newReader(), position: 0)
        small.insert(key, SegmentBlock(Self.block(1, 51)))
        #expect(small.block(key) == nil)
        let none = BlockCache(capacityBytes: 0)
        none.insert(key, SegmentBlock(Self.block(1, 1)))
        #expect(none.block(key) == nil)
        #expect(none.stats.bytes == 0)
    }

    static func engine(blockCacheBytes: Int) throws -> Engine {
        var options = testOptions(FaultInjectingFileSystem(), rollover: 1 << 20)
        options.blockCacheBytes = blockCacheBytes
        return try Engine.open(at: "/store", options: options)
    }

    @Test func aSecondScanOfSegmentsTakesEveryBlockFromTheCache() throws {
        let engine = try Self.engine(blockCacheBytes: 1 << 20)
        var expected: [[UInt8]: [UInt8]] = [:]
        for i in 0..<300 {
            expected[testKey(i)] = Self.block(UInt8(i % 251), 60)
            try engine.put(testKey(i), Self.block(UInt8(i % 251), 60))
        }
        try engine.flush()
        #expect(try contents(of: engine) == expected)
        let first = engine.blockCacheStats()
        #expect(first.misses > 10, "300 rows of 60 bytes in 512-byte blocks span many blocks")
        #expect(first.blocks == first.misses)
        #expect(try contents(of: engine) == expected)
        let second = engine.blockCacheStats()
        #expect(second.misses == first.misses, "the second scan read a block from its file again")
        #expect(second.hits >= first.hits + first.blocks)
        #expect(try engine.stats().blockCache == second)
    }

    @Test func compactionDropsTheBlocksOfTheSegmentsItDeletesAndReadsStayRight() throws {
        let engine = try Self.engine(blockCacheBytes: 1 << 20)
        for round in 0..<3 {
            for i in 0..<100 { try engine.put(testKey(i), [UInt8(round), UInt8(i)] + Self.block(0, 40)) }
            try engine.flush()
        }
        _ = try contents(of: engine)
        #expect(engine.blockCacheStats().blocks > 0)
        try engine.compact(.full)
        #expect(engine.blockCacheStats().blocks == 0, "blocks of deleted segments stayed cached")
        let values = try contents(of: engine)
        for i in 0..<100 { #expect(values[testKey(i)] == [2, UInt8(i)] + Self.block(0, 40)) }
        #expect(engine.blockCacheStats().blocks > 0)
    }

    /// Readers scanning through a small block cache (evicting as they go) while a writer
    /// commits whole transactions, flushes roll segments over and compaction replaces them
    /// (dropping their readers' blocks): every scan sees one transaction whole. Run under
    /// ThreadSanitizer too.
    @Test func scansThroughTheCacheSeeWholeTransactionsWhileCompactionReplacesSegments() throws {
        var options = testOptions(FaultInjectingFileSystem(), rollover: 2048)
        options.blockCacheBytes = 16384  // ~32 blocks: the first segment's stay, others go
        options.checkInvariants = false
        let engine = try Engine.open(at: "/store", options: options)
        // Keys 0..<40 are written once, then 40..<80 in every transaction: a scan reads blocks
        // of the first segment and of newer ones, which share block positions.
        let keys = 40, commits = 60
        @Sendable func commit(_ round: Int) throws {
            var batch = WriteBatch()
            for key in keys..<(2 * keys) { batch.put(testKey(key), Array("round-\(round)".utf8) + Self.block(UInt8(round % 251), 40)) }
            try engine.commit(batch)
        }
        var first = WriteBatch()
        for key in 0..<keys { first.put(testKey(key), Array("fixed-\(key)".utf8) + Self.block(7, 40)) }
        try engine.commit(first)
        try engine.flush()
        try commit(0)
        try engine.flush()
        let done = Atomic<Bool>(false)
        let problems = Locked<[String]>([])
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) {
            defer { done.store(true, ordering: .releasing) }
            do {
                for round in 1...commits {
                    try commit(round)
                    // Not after the last rounds: the scans that follow read several segments.
                    if round % 10 == 5 { try engine.compact(.full) }
                }
            } catch {
                problems.withLock { $0.append("writer: \(error)") }
            }
        }
        for _ in 0..<2 {
            DispatchQueue.global().async(group: group) {
                var scans = 0
                while !done.load(ordering: .acquiring) || scans < 5 {
                    scans += 1
                    do {
                        let values = try engine.snapshot().scan().map(\.value)
                        let fixed = (0..<keys).map { Array("fixed-\($0)".utf8) + Self.block(7, 40) }
                        if values.count != 2 * keys || Array(values.prefix(keys)) != fixed || Set(values.dropFirst(keys)).count != 1 {
                            problems.withLock { $0.append("a scan saw \(values.count) keys, \(Set(values.dropFirst(keys)).count) values") }
                        }
                    } catch {
                        problems.withLock { $0.append("reader: \(error)") }
                    }
                }
            }
        }
        group.wait()
        #expect(problems.withLock { $0 } == [])
        let stats = engine.blockCacheStats()
        #expect(stats.bytes <= 16384 && stats.hits > 0)
    }

    @Test func withoutABlockCacheScansReadTheSameValues() throws {
        let engine = try Self.engine(blockCacheBytes: 0)
        for i in 0..<200 { try engine.put(testKey(i), [UInt8(i % 256)]) }
        try engine.flush()
        let values = try contents(of: engine)
        #expect(values.count == 200 && values[testKey(7)] == [7])
        #expect(try contents(of: engine) == values)
        #expect(engine.blockCacheStats().blocks == 0 && engine.blockCacheStats().hits == 0)
    }
}

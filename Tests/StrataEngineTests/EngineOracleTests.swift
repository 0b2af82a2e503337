import Testing
@testable import StrataEngine

/// Random operations against a dictionary model, compared after every reopen.
@Suite struct EngineOracleTests {
    @Test(arguments: [UInt64(1), 2, 3])
    func randomOperationsMatchADictionaryAcrossReopensFlushesAndRollovers(seed: UInt64) throws {
        var rng = SeededRandom(seed: seed)
        let fs = FaultInjectingFileSystem()
        let options = testOptions(fs, rollover: 2048)
        var engine = try Engine.open(at: "/store", options: options)
        var model: [[UInt8]: [UInt8]] = [:]
        for step in 0..<1500 {
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<80:
                let batch = ModelBatch.random(keys: 150, maxOperations: 6, maxValue: 120, using: &rng)
                try engine.commit(batch.writeBatch)
                batch.apply(to: &model)
            case 80..<90:
                let key = testKey(Int.random(in: 0..<150, using: &rng))
                #expect(try engine.get(key) == model[key], "step \(step)")
            case 90..<93:
                try engine.flush()
            case 93..<95:
                var policy = CompactionOptions()
                policy.minDeadRatio = Double.random(in: 0...1, using: &rng)
                policy.smallSegmentBytes = UInt64.random(in: 0...4096, using: &rng)
                policy.targetSegmentBytes = UInt64.random(in: 256...8192, using: &rng)
                try engine.compact(Bool.random(using: &rng) ? policy : .full)
            default:
                try engine.close()
                engine = try Engine.open(at: "/store", options: options)
                #expect(try contents(of: engine) == model, "after reopen at step \(step)")
            }
        }
        #expect(try contents(of: engine) == model)
        let stats = try engine.stats()
        #expect(stats.keyCount == model.count)
        #expect(!stats.segments.isEmpty, "rollover produced segments")
        try engine.close()
        let reopened = try Engine.open(at: "/store", options: options)
        #expect(try contents(of: reopened) == model)
        #expect(try reopened.snapshot().count == model.count)
    }

    @Test func scansReturnKeysInOrderAndHonourPrefixesAndBounds() throws {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: "/store", options: testOptions(fs))
        var batch = WriteBatch()
        for key in ["a", "ab", "abc", "b", "b\u{7F}", "c"] { batch.put(Array(key.utf8), Array(key.utf8)) }
        batch.put([0x61, 0xFF], [1])
        batch.put([0x61, 0xFF, 0xFF], [2])
        try engine.commit(batch)
        try engine.flush()
        try engine.put(Array("aa".utf8), [3])  // one key in the WAL, the rest in a segment
        let snapshot = try engine.snapshot()
        let all = try snapshot.scan().map { $0.key }
        #expect(all == all.sorted { $0.lexicographicallyPrecedes($1) })
        #expect(all.count == 9)
        #expect(try snapshot.scan(prefix: Array("a".utf8)).map { $0.key }.count == 6)
        #expect(try snapshot.scan(prefix: [0x61, 0xFF]).map { $0.value } == [[1], [2]])
        #expect(try snapshot.scan(from: Array("ab".utf8), to: Array("b".utf8)).count == 4)
        #expect(try snapshot.scan(prefix: Array("zz".utf8)).isEmpty)
        #expect(snapshot.keys(prefix: Array("b".utf8)) == [Array("b".utf8), Array("b\u{7F}".utf8)])
    }

    @Test func aSnapshotIgnoresLaterCommitsFlushesAndDeletes() throws {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: "/store", options: testOptions(fs, rollover: 512))
        for i in 0..<50 { try engine.put(testKey(i), Array("v1-\(i)".utf8)) }
        let before = try engine.snapshot()
        let expected = try before.scan()
        for i in 0..<50 {
            if i % 2 == 0 { try engine.delete(testKey(i)) } else { try engine.put(testKey(i), Array("v2".utf8)) }
        }
        try engine.flush()
        let after = try before.scan()
        #expect(after.map { $0.key } == expected.map { $0.key })
        #expect(after.map { $0.value } == expected.map { $0.value })
        #expect(try engine.snapshot().count == 25)
    }

    @Test func emptyBatchesAndOverwritesWithinOneBatch() throws {
        let engine = try Engine.open(at: "/store", options: testOptions(FaultInjectingFileSystem()))
        let first = try engine.commit(WriteBatch())
        #expect(first == 0)
        var batch = WriteBatch()
        batch.put([1], [1])
        batch.put([1], [2])
        batch.delete([2])
        batch.put([2], [3])
        let sequence = try engine.commit(batch)
        #expect(sequence == 1)
        #expect(try engine.get([1]) == [2])
        #expect(try engine.get([2]) == [3])
        #expect(try engine.snapshot().sequence(of: [1]) == 1)
    }

    // [SEG-7] Entries of one transaction share a sequence number: the flush must keep the put
    // that follows a delete of the same key, not the tombstone.
    @Test func aDeleteThenPutOfOneKeyInOneBatchSurvivesFlushAndReopen() throws {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: "/store", options: testOptions(fs, rollover: 1 << 20))
        try engine.put([1], [1])
        try engine.flush()
        var batch = WriteBatch()
        batch.delete([1])
        batch.put([1], [2])
        batch.put([2], [2])
        batch.delete([2])
        try engine.commit(batch)
        try engine.flush()
        try engine.close()
        let reopened = try Engine.open(at: "/store", options: testOptions(fs))
        #expect(try contents(of: reopened) == [[1]: [2]])
    }

    @Test func statsCountLiveAndDeadBytes() throws {
        let engine = try Engine.open(at: "/store", options: testOptions(FaultInjectingFileSystem(), rollover: 1 << 20))
        for _ in 0..<3 { for i in 0..<10 { try engine.put(testKey(i), [UInt8](repeating: 7, count: 100)) } }
        var stats = try engine.stats()
        let wal = try #require(stats.wals.last)
        #expect(wal.entryBytes > 0)
        // [WAL-5] The WAL's bytes are in memory, all of them: header, records, entries.
        #expect(UInt64(stats.walMemoryBytes) == wal.sizeBytes)
        #expect(wal.deadBytes * 3 == wal.entryBytes * 2, "two of three versions of each key are dead")
        try engine.flush()
        stats = try engine.stats()
        let segment = try #require(stats.segments.last)
        #expect(segment.deadBytes == 0)
        #expect(segment.liveBytes == segment.entryBytes)
        #expect(stats.keyCount == 10)
        #expect(stats.indexMemoryBytes > 0)
        // The flushed WAL's image went with it; the new WAL holds its header.
        #expect(stats.walMemoryBytes == Format.walHeaderSize)
    }
}

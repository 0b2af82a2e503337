import Testing
@testable import StrataEngine

/// A large commit merged into the index in one pass against the same commit applied key by
/// key: the same keys, entries and per-file usage, whatever mix of puts, overwrites, repeats
/// and deletes (of present and absent keys) it holds.
@Suite struct BulkApplyTests {
    static func contents(_ index: KeyIndex) -> [([UInt8], IndexEntry)] {
        index.cursor().map { ($0.key, $0.entry) }
    }

    /// The merge's sort by integer heads against a plain sort by whole keys: keys with a long
    /// shared prefix, keys that tie on several words, keys that are prefixes of others, trailing zero bytes (which pad a head
    /// the same as a shorter key), the empty key, repeats (commit order kept) and keys that
    /// share no prefix at all.
    @Test func theMergeSortsChangesAsAWholeKeyComparisonWould() {
        var rng = SeededRandom(seed: 17)
        let alphabets: [[UInt8]] = [[0, 1, 0xFF], Array("ab".utf8), Array(0...255)]
        for round in 0..<60 {
            let alphabet = alphabets[round % alphabets.count]
            let prefix: [UInt8] = round % 4 == 0 ? [] : Array(repeating: 0x41, count: Int.random(in: 1...20, using: &rng))
            var changes: [Engine.IndexChange] = []
            for position in 0..<Int.random(in: 0...400, using: &rng) {
                // Tails up to 30 bytes over two or three symbols: runs that tie on several
                // eight-byte words before one decides, or never do.
                let tail = (0..<Int.random(in: 0...(round % 2 == 0 ? 12 : 30), using: &rng)).map { _ in alphabet.randomElement(using: &rng) ?? 0 }
                let key = round % 7 == 0 && position % 5 == 0 ? [] : prefix + tail
                changes.append(
                    Engine.IndexChange(
                        isDelete: false, key: key, sequence: UInt64(position),
                        location: ValueLocation(fileNumber: 1, position: 0, offset: UInt32(position), length: 1)))
            }
            let expected = changes.indices.sorted { a, b in
                let order = compareKeys(changes[a].key, changes[b].key)
                return order != 0 ? order < 0 : a < b
            }
            #expect(Engine.keyOrder(changes) == expected, "round \(round)")
        }
    }

    @Test(arguments: [(UInt64(1), 0), (2, 500), (3, 5_000), (4, 20_000)])
    func mergingACommitMatchesApplyingItKeyByKey(seed: UInt64, existing: Int) throws {
        var rng = SeededRandom(seed: seed)
        let space = max(4_000, existing * 2)
        func key() -> [UInt8] { Array("k\(Int.random(in: 0..<space, using: &rng))".utf8) }
        var index = KeyIndex(leafCapacity: 16, branchCapacity: 8)
        var usage: [UInt32: FileUsage] = [:]
        var sequence: UInt64 = 0
        for _ in 0..<existing {
            sequence += 1
            let location = ValueLocation(fileNumber: UInt32.random(in: 1...3, using: &rng), position: 0, offset: UInt32(sequence), length: UInt32.random(in: 10...90, using: &rng))
            Engine.apply(isDelete: false, key: key(), sequence: sequence, location: location, index: &index, usage: &usage, newest: true)
        }
        var changes: [Engine.IndexChange] = []
        for _ in 0..<3_000 {
            sequence += UInt64.random(in: 0...1, using: &rng)  // several entries share a record
            let location = ValueLocation(fileNumber: 9, position: 0, offset: UInt32(changes.count), length: UInt32.random(in: 10...90, using: &rng))
            changes.append(Engine.IndexChange(isDelete: Int.random(in: 0..<5, using: &rng) == 0, key: key(), sequence: sequence, location: location))
        }
        var expectedIndex = index, expectedUsage = usage
        for change in changes {
            Engine.apply(
                isDelete: change.isDelete, key: change.key, sequence: change.sequence, location: change.location,
                index: &expectedIndex, usage: &expectedUsage, newest: true)
        }
        var mergedUsage = usage
        let merged = try #require(Engine.merge(changes, into: index, usage: &mergedUsage))
        try merged.checkInvariants()
        #expect(merged.count == expectedIndex.count)
        let got = Self.contents(merged), want = Self.contents(expectedIndex)
        #expect(got.map(\.0) == want.map(\.0))
        #expect(got.map(\.1) == want.map(\.1))
        #expect(mergedUsage == expectedUsage)
        // The original index is untouched (snapshots share it).
        #expect(Self.contents(index).count == index.count)
    }
}

/// Recovery replays a WAL's newer records into the index together (the merge above when they
/// are many): a reopened store has the same keys, values and per-file usage (entry, dead and
/// tombstone bytes) as the engine that wrote them, with overwrites, repeats and deletes, in a
/// WAL alone and in a WAL after segments.
@Suite struct RecoveryReplayTests {
    static func usage(_ stats: EngineStats) -> [UInt32: [UInt64]] {
        var result: [UInt32: [UInt64]] = [:]
        for file in stats.wals + stats.segments { result[file.fileNumber] = [file.entryBytes, file.deadBytes, file.tombstoneBytes] }
        return result
    }

    @Test(arguments: [false, true])
    func aReopenedStoreHasTheKeysValuesAndUsageItWasClosedWith(segmentsFirst: Bool) throws {
        let fs = FaultInjectingFileSystem()
        var options = testOptions(fs, rollover: 64 << 20)
        options.checkInvariants = false
        var rng = SeededRandom(seed: segmentsFirst ? 2 : 1)
        var engine = try Engine.open(at: "/store", options: options)
        if segmentsFirst {
            for i in 0..<3_000 { try engine.put(testKey(i * 3), [UInt8(i % 251)]) }
            try engine.flush()
        }
        // Batches large beside the index, with overwrites, repeated keys and deletes.
        for round in 0..<6 {
            var batch = WriteBatch()
            for _ in 0..<2_500 {
                let key = testKey(Int.random(in: 0..<9_000, using: &rng))
                if Int.random(in: 0..<6, using: &rng) == 0 {
                    batch.delete(key)
                } else {
                    batch.put(key, [UInt8(round)] + [UInt8](repeating: 7, count: Int.random(in: 0..<40, using: &rng)))
                }
            }
            try engine.commit(batch)
        }
        let before = try contents(of: engine)
        let usageBefore = Self.usage(try engine.stats())
        try engine.close()
        engine = try Engine.open(at: "/store", options: options)
        #expect(try contents(of: engine) == before)
        #expect(Self.usage(try engine.stats()) == usageBefore)
        try engine.close()
    }
}

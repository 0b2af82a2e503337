import Testing

@testable import StrataEngine

/// ``KeyIndex/apply(sortedChanges:replaced:)`` and the commit path that uses it
/// (``Engine/applyInOnePass(_:index:usage:)``), against key-by-key application and a
/// dictionary.
@Suite("KeyIndex batches")
struct KeyIndexBatchTests {
    /// A distinct entry for `n`.
    private static func entry(_ n: UInt64) -> IndexEntry {
        IndexEntry(
            sequence: n,
            location: ValueLocation(
                fileNumber: UInt32(truncatingIfNeeded: n % 5), position: UInt32(truncatingIfNeeded: n >> 2),
                offset: UInt32(truncatingIfNeeded: n &* 17), length: UInt32(truncatingIfNeeded: 1 + n % 700)))
    }

    /// The key of number `n`: eight big-endian bytes after a one-byte space (so that runs of
    /// numbers are runs of keys, as a store's references are).
    private static func key(_ space: UInt8, _ n: Int) -> [UInt8] {
        [space] + withUnsafeBytes(of: UInt64(n).bigEndian) { Array($0) }
    }

    private static func contents(_ index: KeyIndex) -> [([UInt8], IndexEntry)] {
        var cursor = index.cursor()
        var result: [([UInt8], IndexEntry)] = []
        while let (key, entry) = cursor.next() { result.append((key, entry)) }
        return result
    }

    private static func sorted(_ oracle: [[UInt8]: IndexEntry]) -> [([UInt8], IndexEntry)] {
        oracle.sorted { compareKeys($0.key, $1.key) < 0 }.map { ($0.key, $0.value) }
    }

    /// One batch of changes, sorted and unique: random scattered keys, runs of consecutive
    /// keys (inserted or removed together, as a store's bulk imports and moves are), removes
    /// of keys that exist and of keys that do not.
    private static func batch(
        _ rng: inout SeededRandom, oracle: [[UInt8]: IndexEntry], step: inout UInt64, size: Int
    ) -> [KeyIndex.BatchChange] {
        var changes: [[UInt8]: IndexEntry?] = [:]
        let existing = Array(oracle.keys)
        while changes.count < size {
            step += 1
            switch Int.random(in: 0..<6, using: &rng) {
            case 0:  // a run of new or replaced keys
                let space = UInt8.random(in: 1...3, using: &rng), start = Int.random(in: 0..<4_000, using: &rng)
                for n in start..<(start + Int.random(in: 1...300, using: &rng)) {
                    step += 1
                    changes[key(space, n)] = .some(entry(step))
                }
            case 1:  // a run of removes (of keys present or not)
                let space = UInt8.random(in: 1...3, using: &rng), start = Int.random(in: 0..<4_000, using: &rng)
                for n in start..<(start + Int.random(in: 1...400, using: &rng)) { changes[key(space, n)] = .some(nil) }
            case 2 where !existing.isEmpty:  // an existing key removed
                changes[existing[Int.random(in: 0..<existing.count, using: &rng)]] = .some(nil)
            case 3 where !existing.isEmpty:  // an existing key replaced
                changes[existing[Int.random(in: 0..<existing.count, using: &rng)]] = .some(entry(step))
            default:  // a scattered key, of any length
                let length = Int.random(in: 0...12, using: &rng)
                let key = (0..<length).map { _ in UInt8.random(in: 0...4, using: &rng) }
                changes[key] = Bool.random(using: &rng) ? .some(entry(step)) : .some(nil)
            }
        }
        return changes.sorted { compareKeys($0.key, $1.key) < 0 }.map { KeyIndex.BatchChange(key: $0.key, entry: $0.value) }
    }

    @Test(
        "batches applied in one pass leave the index a dictionary and key-by-key application give, with the replaced entries reported",
        arguments: [(2, 4), (3, 5), (8, 6), (KeyIndex.defaultLeafCapacity, KeyIndex.defaultBranchCapacity)])
    func batchesMatchKeyByKey(leafCapacity: Int, branchCapacity: Int) throws {
        var rng = SeededRandom(seed: 0xBA7C_0000 + UInt64(leafCapacity))
        var index = KeyIndex(leafCapacity: leafCapacity, branchCapacity: branchCapacity)
        var keyByKey = KeyIndex(leafCapacity: leafCapacity, branchCapacity: branchCapacity)
        var oracle: [[UInt8]: IndexEntry] = [:]
        var step: UInt64 = 0
        for round in 0..<60 {
            // Small and large batches; the last rounds mostly remove, down to an empty index.
            let size = [1, 2, 40, 700, 3_000][Int.random(in: 0..<5, using: &rng)]
            var changes = Self.batch(&rng, oracle: oracle, step: &step, size: size)
            if round >= 50 { changes = oracle.keys.sorted { compareKeys($0, $1) < 0 }.map { KeyIndex.BatchChange(key: $0, entry: nil) } }
            let snapshot = index
            let before = Self.contents(snapshot)
            var reported: [Int: IndexEntry] = [:]
            index.apply(sortedChanges: changes) { position, previous in
                #expect(reported[position] == nil, "position \(position) reported twice")
                reported[position] = previous
            }
            var expected: [Int: IndexEntry] = [:]
            for (position, change) in changes.enumerated() {
                let previous = change.entry.map { keyByKey.upsert(change.key, $0) } ?? keyByKey.remove(change.key)
                if let previous { expected[position] = previous }
                if let entry = change.entry { oracle[change.key] = entry } else { oracle[change.key] = nil }
            }
            #expect(reported == expected, "round \(round): the replaced entries")
            try index.checkInvariants()
            #expect(index.count == oracle.count, "round \(round)")
            let after = Self.contents(index)
            #expect(after.map(\.0) == Self.sorted(oracle).map(\.0) && after.map(\.1) == Self.sorted(oracle).map(\.1), "round \(round)")
            for change in changes.prefix(50) { #expect(index.lookup(change.key) == oracle[change.key]) }
            // The snapshot taken before the batch is unchanged.
            try snapshot.checkInvariants()
            let kept = Self.contents(snapshot)
            #expect(kept.map(\.0) == before.map(\.0) && kept.map(\.1) == before.map(\.1), "round \(round): the snapshot")
        }
        #expect(index.isEmpty)
        try index.checkInvariants()
    }

    @Test(
        "every small batch of removes and puts on a small tree keeps it valid and equal to key-by-key application",
        // Leaves of two keys are always rebuilt; leaves of eight take one or two changes in
        // place (``KeyIndex/inPlaceDivisor``) and more by rebuilding.
        arguments: [(2, 3), (8, 4)])
    func exhaustiveSmallBatches(leafCapacity: Int, branchCapacity: Int) throws {
        // A tree of keys 0, 2, …, 28, then every batch that touches a subset of 0…9 (as the
        // subset's bits say) with each kind of change of 3 rounds.
        let base = (0..<15).map { Self.key(1, $0 * 2) }
        for mask in 0..<(1 << 10) {
            for kind in 0..<3 {
                var index = KeyIndex(leafCapacity: leafCapacity, branchCapacity: branchCapacity)
                for (n, key) in base.enumerated() { index.upsert(key, Self.entry(UInt64(n))) }
                var keyByKey = index
                let changes = (0..<10).filter { mask & (1 << $0) != 0 }.map { bit in
                    // Bits name keys 0…9 spread over the tree's keys and the gaps between them.
                    let n = bit * 3
                    let put = kind == 1 || (kind == 2 && bit % 2 == 0)
                    return KeyIndex.BatchChange(key: Self.key(1, n), entry: put ? Self.entry(UInt64(100 + n)) : nil)
                }
                index.apply(sortedChanges: changes) { _, _ in }
                for change in changes {
                    if let entry = change.entry { keyByKey.upsert(change.key, entry) } else { keyByKey.remove(change.key) }
                }
                try index.checkInvariants()
                let (got, want) = (Self.contents(index), Self.contents(keyByKey))
                #expect(got.map(\.0) == want.map(\.0) && got.map(\.1) == want.map(\.1), "mask \(mask), kind \(kind)")
            }
        }
    }

    @Test("a commit applied in one pass counts file usage as key-by-key application does")
    func onePassCountsUsageAsKeyByKey() {
        var rng = SeededRandom(seed: 0x05A6E)
        var onePass = KeyIndex(leafCapacity: 8, branchCapacity: 6)
        var keyByKey = onePass
        var usageOnePass: [UInt32: FileUsage] = [:], usageKeyByKey: [UInt32: FileUsage] = [:]
        var sequence: UInt64 = 0
        for _ in 0..<30 {
            // Commits that put, replace and delete keys, some more than once in one commit.
            var changes: [Engine.IndexChange] = []
            for _ in 0..<Int.random(in: 64...400, using: &rng) {
                sequence += 1
                let location = ValueLocation(
                    fileNumber: UInt32.random(in: 1...4, using: &rng), position: 0, offset: UInt32(sequence),
                    length: UInt32.random(in: 1...90, using: &rng))
                changes.append(Engine.IndexChange(
                    isDelete: Int.random(in: 0..<3, using: &rng) == 0, key: Self.key(1, Int.random(in: 0..<600, using: &rng)),
                    sequence: sequence, location: location))
            }
            Engine.applyInOnePass(changes, index: &onePass, usage: &usageOnePass)
            for change in changes {
                Engine.apply(
                    isDelete: change.isDelete, key: change.key, sequence: change.sequence, location: change.location,
                    index: &keyByKey, usage: &usageKeyByKey, newest: true)
            }
            #expect(usageOnePass == usageKeyByKey)
            let (got, want) = (Self.contents(onePass), Self.contents(keyByKey))
            #expect(got.map(\.0) == want.map(\.0) && got.map(\.1) == want.map(\.1))
        }
    }
}

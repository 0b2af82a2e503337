import Testing

@testable import StrataEngine

/// A distinct entry for `n`, so that wrong values are caught, not just wrong keys.
private func entry(_ n: UInt64) -> IndexEntry {
    IndexEntry(
        sequence: n,
        location: ValueLocation(
            fileNumber: UInt32(truncatingIfNeeded: n % 7), position: UInt32(truncatingIfNeeded: n >> 3),
            offset: UInt32(truncatingIfNeeded: n &* 31), length: UInt32(truncatingIfNeeded: n % 1000)))
}

/// Everything a cursor yields.
private func drain(_ cursor: KeyIndex.Cursor) -> [([UInt8], IndexEntry)] {
    var cursor = cursor
    var result: [([UInt8], IndexEntry)] = []
    while let (key, entry) = cursor.next() { result.append((key, entry)) }
    return result
}

/// The index's full contents, in iteration order.
private func contents(_ index: KeyIndex) -> [([UInt8], IndexEntry)] {
    drain(index.cursor())
}

/// The oracle's contents, in key order.
private func sorted(_ oracle: [[UInt8]: IndexEntry]) -> [([UInt8], IndexEntry)] {
    oracle.sorted { compareKeys($0.key, $1.key) < 0 }.map { ($0.key, $0.value) }
}

/// Expects two content lists to be equal, reporting the first difference rather than both lists.
private func expectSame(
    _ actual: [([UInt8], IndexEntry)], _ expected: [([UInt8], IndexEntry)],
    _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation
) {
    let firstDifference = zip(actual, expected).enumerated().first { $1.0.0 != $1.1.0 || $1.0.1 != $1.1.1 }?.offset
    let summary = "counts \(actual.count) vs \(expected.count), first difference at \(firstDifference ?? -1)"
    #expect(
        actual.count == expected.count && firstDifference == nil,
        "\(comment.map { "\($0): " } ?? "")\(summary)", sourceLocation: sourceLocation)
}

/// A key from a tiny space (many collisions, prefixes of each other, 0x00 and 0xFF).
private func smallKey(_ rng: inout SeededRandom) -> [UInt8] {
    let alphabet: [UInt8] = [0x00, 0x01, 0x61, 0x62, 0x7F, 0x80, 0xFE, 0xFF]
    return (0..<Int.random(in: 0...3, using: &rng)).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &rng)] }
}

/// A key from a huge space (the index keeps growing).
private func largeKey(_ rng: inout SeededRandom) -> [UInt8] {
    (0..<Int.random(in: 1...24, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
}

/// `count` distinct random 16-byte keys, sorted.
private func sortedKeys(_ count: Int, seed: UInt64) -> [[UInt8]] {
    var rng = SeededRandom(seed: seed)
    var keys = Set<[UInt8]>()
    while keys.count < count {
        keys.insert((0..<16).map { _ in UInt8.random(in: 0...255, using: &rng) })
    }
    return keys.sorted { compareKeys($0, $1) < 0 }
}

/// Node sizes to run the structural tests with: tiny (deep trees, many splits and merges),
/// odd, and the defaults.
private let shapes: [(Int, Int)] = [
    (2, 4), (3, 5), (8, 6), (KeyIndex.defaultLeafCapacity, KeyIndex.defaultBranchCapacity),
]

@Suite("KeyIndex")
struct KeyIndexTests {
    @Test("random upserts, removes and lookups agree with a dictionary", arguments: shapes)
    func matchesDictionaryOracle(leafCapacity: Int, branchCapacity: Int) throws {
        var rng = SeededRandom(seed: 0x5EED_0000 + UInt64(leafCapacity))
        var index = KeyIndex(leafCapacity: leafCapacity, branchCapacity: branchCapacity)
        var oracle: [[UInt8]: IndexEntry] = [:]
        var seen: [[UInt8]] = []
        let steps = 24_000
        for step in 0..<steps {
            // Grow for the first half, then shrink: removes dominate the second half.
            let removeShare = step < steps / 2 ? 25 : 70
            let roll = Int.random(in: 0..<100, using: &rng)
            let key: [UInt8]
            if roll < removeShare, !seen.isEmpty, Bool.random(using: &rng) {
                key = seen[Int.random(in: 0..<seen.count, using: &rng)]
            } else {
                key = Bool.random(using: &rng) ? smallKey(&rng) : largeKey(&rng)
            }
            if roll < removeShare {
                #expect(index.remove(key) == oracle.removeValue(forKey: key))
            } else if roll < removeShare + 10 {
                #expect(index.lookup(key) == oracle[key])
            } else {
                let value = entry(UInt64(step))
                #expect(index.upsert(key, value) == oracle.updateValue(value, forKey: key))
                seen.append(key)
            }
            #expect(index.count == oracle.count)
            #expect(index.lookup(key) == oracle[key])
            if step % 1_000 == 999 {
                try index.checkInvariants()
                expectSame(contents(index), sorted(oracle))
                for probe in seen.suffix(200) { #expect(index.lookup(probe) == oracle[probe]) }
            }
        }
        try index.checkInvariants()
        expectSame(contents(index), sorted(oracle))
    }

    @Test(
        "a prefix's probe scope answers every key under the prefix as a lookup from the root does, and keeps its index value",
        arguments: shapes)
    func probeScopesAgreeWithRootLookups(leafCapacity: Int, branchCapacity: Int) {
        var rng = SeededRandom(seed: 0x5C0E + UInt64(leafCapacity))
        var index = KeyIndex(leafCapacity: leafCapacity, branchCapacity: branchCapacity)
        // Keys as a store's index keys are: a prefix from a small set (some prefixes of
        // others, 0x00 and 0xFF bytes at their ends), then a big-endian 8-byte suffix.
        let prefixes: [[UInt8]] = [[], [0x02], [0x02, 0x00], [0x02, 0x61], [0x02, 0x61, 0x00], [0x02, 0x61, 0xFF], [0x02, 0xFF], [0x03], [0xFF, 0xFF]]
        func key(_ prefix: [UInt8], _ suffix: UInt64) -> [UInt8] { prefix + withUnsafeBytes(of: suffix.bigEndian) { Array($0) } }
        var oracle = Set<[UInt8]>()
        for n in 0..<3_000 {
            let stored = key(prefixes[Int.random(in: 0..<prefixes.count, using: &rng)], UInt64.random(in: 0..<400, using: &rng))
            index.upsert(stored, entry(UInt64(n)))
            oracle.insert(stored)
        }
        let snapshot = index
        let scopes = prefixes.map { snapshot.scope(ofPrefix: $0) }
        // Later changes reach neither the snapshot nor its scopes.
        for suffix in 0..<UInt64(400) { index.upsert(key([0x02, 0x61], suffix), entry(9_999)) }
        for (prefix, scope) in zip(prefixes, scopes) {
            #expect(scope.prefix == prefix)
            for suffix in 0..<UInt64(420) {
                let probe = key(prefix, suffix)
                let expected = oracle.contains(probe)
                #expect(scope.contains(followedBy: suffix) == expected, "prefix \(prefix), suffix \(suffix)")
                #expect((snapshot.lookup(probe) != nil) == expected)
            }
        }
        // An empty index and a prefix no key has.
        #expect(!KeyIndex().scope(ofPrefix: [0x02]).contains(followedBy: 1))
        #expect(!snapshot.scope(ofPrefix: [0x04, 0x00]).contains(followedBy: 1))
    }

    @Test("probe groups pass a suffix when every group has a scope holding it, as the scopes' own probes say", arguments: shapes)
    func probeGroupsAgreeWithTheirScopes(leafCapacity: Int, branchCapacity: Int) {
        var rng = SeededRandom(seed: 0x9A0B + UInt64(branchCapacity))
        var index = KeyIndex(leafCapacity: leafCapacity, branchCapacity: branchCapacity)
        let prefixes: [[UInt8]] = [[0x02], [0x02, 0x00], [0x02, 0x61], [0x02, 0x61, 0x00], [0x03], [0xFF, 0xFF, 0x01]]
        func key(_ prefix: [UInt8], _ suffix: UInt64) -> [UInt8] { prefix + withUnsafeBytes(of: suffix.bigEndian) { Array($0) } }
        var oracle = Set<[UInt8]>()
        for n in 0..<2_000 {
            let stored = key(prefixes[Int.random(in: 0..<prefixes.count, using: &rng)], UInt64.random(in: 0..<200, using: &rng))
            index.upsert(stored, entry(UInt64(n)))
            oracle.insert(stored)
        }
        let snapshot = index
        // Groups of one to three prefixes, some repeated across groups.
        var groups: [[[UInt8]]] = []
        for _ in 0..<3 {
            groups.append((0..<Int.random(in: 1...3, using: &rng)).map { _ in prefixes[Int.random(in: 0..<prefixes.count, using: &rng)] })
        }
        let probes = KeyIndex.ProbeGroups(groups.map { $0.map { snapshot.scope(ofPrefix: $0) } })
        #expect(!probes.isEmpty)
        // Later changes reach neither the snapshot nor the groups' scopes.
        for suffix in 0..<UInt64(200) { index.upsert(key([0x02, 0x61], suffix), entry(9_999)) }
        var passed = 0
        for suffix in 0..<UInt64(220) {
            let expected = groups.allSatisfy { group in group.contains { oracle.contains(key($0, suffix)) } }
            #expect(probes.pass(suffix) == expected, "suffix \(suffix)")
            if expected { passed += 1 }
        }
        #expect(passed > 0, "some suffix passes every group")
        // No group: nothing to fail. An empty group: nothing passes.
        #expect(KeyIndex.ProbeGroups([]).isEmpty)
        #expect(KeyIndex.ProbeGroups([]).pass(1))
        #expect(!KeyIndex.ProbeGroups([[snapshot.scope(ofPrefix: [0x02])], []]).pass(1))
    }

    @Test("a copy is unchanged by heavy mutation of the original, and vice versa", arguments: shapes)
    func snapshotIsolation(leafCapacity: Int, branchCapacity: Int) throws {
        var rng = SeededRandom(seed: 42)
        var original = KeyIndex(leafCapacity: leafCapacity, branchCapacity: branchCapacity)
        var keys: [[UInt8]] = []
        for i in 0..<3_000 {
            let key = largeKey(&rng)
            original.upsert(key, entry(UInt64(i)))
            keys.append(key)
        }
        let before = contents(original)

        // Mutate the original; the snapshot, and a cursor opened before, must not change.
        let snapshot = original
        var openCursor = original.cursor()
        let first = openCursor.next()
        for (i, key) in keys.enumerated() {
            switch i % 3 {
            case 0: original.remove(key)
            case 1: original.upsert(key, entry(1_000_000 + UInt64(i)))
            default: original.upsert(largeKey(&rng), entry(2_000_000 + UInt64(i)))
            }
        }
        expectSame(contents(snapshot), before)
        #expect(snapshot.count == before.count)
        expectSame([try #require(first)] + drain(openCursor), before)
        for (key, value) in before { #expect(snapshot.lookup(key) == value) }
        try snapshot.checkInvariants()
        try original.checkInvariants()
        let after = contents(original)
        let changed = after.count != before.count || zip(after, before).contains { $0.0 != $1.0 || $0.1 != $1.1 }
        #expect(changed)

        // The reverse: mutate a copy; the original must not change.
        let originalBefore = contents(original)
        var copy = original
        for (key, _) in originalBefore { copy.remove(key) }
        for i in 0..<2_000 { copy.upsert(largeKey(&rng), entry(UInt64(i))) }
        expectSame(contents(original), originalBefore)
        #expect(original.count == originalBefore.count)
        try original.checkInvariants()
        try copy.checkInvariants()
        #expect(copy.count > 1_500 && copy.count <= 2_000)  // random short keys may repeat
        expectSame(contents(snapshot), before)
    }

    @Test("a snapshot read on another task sees none of the writer's changes")
    func snapshotReadConcurrently() async throws {
        let keys = sortedKeys(20_000, seed: 7)
        var index = try KeyIndex(sortedUnique: keys.enumerated().map { ($1, entry(UInt64($0))) })
        let snapshot = index
        let reader = Task.detached {
            var mismatches = 0
            for _ in 0..<5 {
                for (i, key) in keys.enumerated() where snapshot.lookup(key) != entry(UInt64(i)) {
                    mismatches += 1
                }
            }
            return mismatches
        }
        for (i, key) in keys.enumerated() {
            if i % 2 == 0 { index.remove(key) } else { index.upsert(key, entry(0)) }
        }
        #expect(await reader.value == 0)
        #expect(index.count == keys.count / 2)
        try index.checkInvariants()
    }

    @Test("two builders joined equal one builder, cut at every position near node boundaries", arguments: shapes)
    func joinedBuildersMatchOneBuilder(leafCapacity: Int, branchCapacity: Int) throws {
        let leaf = leafCapacity
        for size in [0, 1, leaf / 2, leaf, leaf + 1, 2 * leaf + 3, leaf * branchCapacity + leaf / 2] {
            let keys = sortedKeys(size, seed: 7)
            let elements = keys.enumerated().map { ($1, entry(UInt64($0))) }
            let whole = try KeyIndex(sortedUnique: elements, leafCapacity: leafCapacity, branchCapacity: branchCapacity)
            var cuts = Set([0, size, size / 2, leaf - 1, leaf, leaf + 1, leaf / 2, size - leaf / 2].filter { $0 >= 0 && $0 <= size })
            if size <= 4 * leaf { cuts.formUnion(0...size) }
            for cut in cuts.sorted() {
                var low = KeyIndex.Builder(leafCapacity: leafCapacity, branchCapacity: branchCapacity)
                var high = KeyIndex.Builder(leafCapacity: leafCapacity, branchCapacity: branchCapacity)
                for (key, value) in elements[..<cut] { key.withUnsafeBytes { low.appendAscending($0, value) } }
                for (key, value) in elements[cut...] { key.withUnsafeBytes { high.appendAscending($0, value) } }
                low.append(high)
                let joined = low.finish()
                try joined.checkInvariants()
                #expect(joined.count == size)
                expectSame(contents(joined), contents(whole), "size \(size) cut at \(cut)")
                // The joined tree takes keys after its last one, in order.
                var builder = KeyIndex.Builder(leafCapacity: leafCapacity, branchCapacity: branchCapacity)
                for (key, value) in elements[..<cut] { key.withUnsafeBytes { builder.appendAscending($0, value) } }
                var rest = KeyIndex.Builder(leafCapacity: leafCapacity, branchCapacity: branchCapacity)
                for (key, value) in elements[cut...] { key.withUnsafeBytes { rest.appendAscending($0, value) } }
                builder.append(rest)
                if size > 0 { #expect(throws: StoreError.self) { try elements[0].0.withBytes { (raw) throws(StoreError) in try builder.append(raw, entry(0)) } } }
            }
        }
    }

    @Test("bulk build equals incremental build at sizes around node boundaries", arguments: shapes)
    func bulkBuildMatchesIncremental(leafCapacity: Int, branchCapacity: Int) throws {
        let leaf = leafCapacity
        let twoLevels = leafCapacity * branchCapacity
        var sizes: Set<Int> = [0, 1, 2, leaf / 2, leaf - 1, leaf, leaf + 1, 2 * leaf - 1, 2 * leaf,
            2 * leaf + 1, leaf + leaf / 2 - 1, twoLevels - 1, twoLevels, twoLevels + 1, 3 * twoLevels + 5]
        if leaf < 10 { sizes.insert(leaf * branchCapacity * branchCapacity + 1) }
        let keys = sortedKeys(try #require(sizes.max()), seed: 99)
        for size in sizes.sorted() where size >= 0 {
            let elements = keys.prefix(size).enumerated().map { ($1, entry(UInt64($0))) }
            let bulk = try KeyIndex(
                sortedUnique: elements, leafCapacity: leafCapacity, branchCapacity: branchCapacity)
            var incremental = KeyIndex(leafCapacity: leafCapacity, branchCapacity: branchCapacity)
            for (key, value) in elements { incremental.upsert(key, value) }
            try bulk.checkInvariants()
            #expect(bulk.count == size)
            expectSame(contents(bulk), contents(incremental), "size \(size)")
            for (key, value) in elements { #expect(bulk.lookup(key) == value) }

            // A bulk-built tree stays valid under mutation.
            var mutated = bulk
            for (key, _) in elements.prefix(size / 2) { mutated.remove(key) }
            mutated.upsert([0xFF, 0xFF], entry(1))
            try mutated.checkInvariants()
            #expect(mutated.count == size - size / 2 + 1)
        }
    }

    @Test("bulk build rejects unsorted or duplicate keys")
    func bulkBuildRejectsBadOrder() {
        let duplicate: [(key: [UInt8], entry: IndexEntry)] = [([1], entry(1)), ([2], entry(2)), ([2], entry(3))]
        let unsorted: [(key: [UInt8], entry: IndexEntry)] = [([1], entry(1)), ([1, 0], entry(2)), ([0, 9], entry(3))]
        let emptyTwice: [(key: [UInt8], entry: IndexEntry)] = [([], entry(1)), ([], entry(2))]
        for bad in [duplicate, unsorted, emptyTwice] {
            #expect(throws: StoreError.self) { try KeyIndex(sortedUnique: bad) }
            do {
                _ = try KeyIndex(sortedUnique: bad)
            } catch {
                #expect(error.code == .invalidArgument)
            }
        }
        // Out of order only after the first full leaf.
        var late = sortedKeys(300, seed: 3).map { (key: $0, entry: entry(0)) }
        late.swapAt(200, 201)
        #expect(throws: StoreError.self) { try KeyIndex(sortedUnique: late) }
    }

    @Test("range and prefix iteration handle edge cases", arguments: shapes)
    func rangeAndPrefixEdgeCases(leafCapacity: Int, branchCapacity: Int) throws {
        let keys: [[UInt8]] = [
            [], [0], [0, 0], [1], [1, 0], [1, 0xFF], [1, 0xFF, 0xFF], [2], [0x61], [0x61, 0x62],
            [0x61, 0x62, 0x63], [0x61, 0x62, 0x64], [0x62], [0xFF], [0xFF, 0xFF], [0xFF, 0xFF, 0xFF],
        ]
        var index = KeyIndex(leafCapacity: leafCapacity, branchCapacity: branchCapacity)
        for (i, key) in keys.enumerated().reversed() { index.upsert(key, entry(UInt64(i))) }
        try index.checkInvariants()
        #expect(contents(index).map(\.0) == keys)  // the list above is in key order

        func prefixed(_ prefix: [UInt8]) -> [[UInt8]] {
            var found: [[UInt8]] = []
            index.forEach(prefix: prefix) { key, _ in
                found.append(key)
                return true
            }
            return found
        }
        #expect(prefixed([]) == keys)
        #expect(prefixed([0xFF]) == [[0xFF], [0xFF, 0xFF], [0xFF, 0xFF, 0xFF]])
        #expect(prefixed([0xFF, 0xFF, 0xFF]) == [[0xFF, 0xFF, 0xFF]])
        #expect(prefixed([0xFF, 0xFF, 0xFF, 0]).isEmpty)  // past every key
        #expect(prefixed([1, 0xFF]) == [[1, 0xFF], [1, 0xFF, 0xFF]])
        #expect(prefixed([1]) == [[1], [1, 0], [1, 0xFF], [1, 0xFF, 0xFF]])
        #expect(prefixed([0x61, 0x62]) == [[0x61, 0x62], [0x61, 0x62, 0x63], [0x61, 0x62, 0x64]])
        #expect(prefixed([0]) == [[0], [0, 0]])
        #expect(prefixed([3]).isEmpty)

        var visited = 0
        index.forEach(prefix: []) { _, _ in
            visited += 1
            return visited < 3
        }
        #expect(visited == 3)

        // Every pair of bounds (keys and in-between probes) against a filter of the list.
        let probes = keys + [[0, 0, 0], [0x61, 0x63], [0x60], [0xFF, 0xFF, 0xFF, 0xFF]]
        for lower in probes {
            #expect(drain(index.cursor(from: lower)).map(\.0)
                == keys.filter { compareKeys($0, lower) >= 0 })
            for upper in probes {
                let expected = keys.filter { compareKeys($0, lower) >= 0 && compareKeys($0, upper) < 0 }
                let found = drain(index.cursor(from: lower, to: upper))
                #expect(found.map(\.0) == expected)
                #expect(found.allSatisfy { index.lookup($0.0) == $0.1 })
            }
        }
        #expect(drain(index.cursor(from: [0x61], to: [0x61])).isEmpty)
        #expect(drain(index.cursor(to: [0])).map(\.0) == [[]])
        #expect(KeyIndex.prefixEnd([1, 0xFF, 0xFF]) == [2])
        #expect(KeyIndex.prefixEnd([0xFF, 0xFF]) == nil)
    }

    @Test("leaf-at-a-time walks and counts yield what next() yields, and stop when told", arguments: shapes)
    func leafWalksMatchTheCursor(leafCapacity: Int, branchCapacity: Int) throws {
        var rng = SeededRandom(seed: UInt64(leafCapacity * 31 + branchCapacity))
        var index = KeyIndex(leafCapacity: leafCapacity, branchCapacity: branchCapacity)
        var keys = Set<[UInt8]>()
        for n in 0..<400 {
            let key = n % 3 == 0 ? smallKey(&rng) : largeKey(&rng)
            index.upsert(key, entry(UInt64(n)))
            keys.insert(key)
        }
        let probes = Array(keys.prefix(12)) + [[], [0x61], [0xFF, 0xFF], [0x00, 0x01, 0x02]]
        for lower in probes {
            for upper in [nil] + probes.map(Optional.some) {
                let expected = drain(index.cursor(from: lower, to: upper))
                for stopAfter in [0, 1, expected.count / 2, expected.count, expected.count + 1] {
                    var entries: [([UInt8], IndexEntry)] = []
                    var cursor = index.cursor(from: lower, to: upper)
                    try cursor.forEachEntry { (key, entry) throws(StoreError) -> Bool in
                        entries.append((Array(key), entry))
                        return entries.count < stopAfter
                    }
                    expectSame(entries, Array(expected.prefix(max(1, stopAfter))), "entries from \(lower) to \(String(describing: upper)), stop after \(stopAfter)")
                    #expect(cursor.next() == nil, "a stopped walk is over")
                    var keysSeen: [[UInt8]] = []
                    var keyCursor = index.cursor(from: lower, to: upper)
                    keyCursor.forEachKey { key in
                        keysSeen.append(Array(key))
                        return keysSeen.count < stopAfter
                    }
                    #expect(keysSeen == expected.prefix(max(1, stopAfter)).map(\.0))
                    var counter = index.cursor(from: lower, to: upper)
                    #expect(counter.count(limit: stopAfter) == min(stopAfter, expected.count), "count from \(lower) to \(String(describing: upper)), limit \(stopAfter)")
                    #expect(counter.next() == nil, "a count exhausts the cursor")
                    #expect(
                        index.countKeys(from: lower, to: upper, limit: stopAfter) == min(stopAfter, expected.count),
                        "countKeys from \(lower) to \(String(describing: upper)), limit \(stopAfter)")
                }
                var counter = index.cursor(from: lower, to: upper)
                #expect(counter.count() == expected.count)
                #expect(index.countKeys(from: lower, to: upper) == expected.count, "countKeys from \(lower) to \(String(describing: upper))")
            }
        }
        // Narrow ranges, most inside one leaf (counted there without a cursor), some across a
        // leaf's end, between keys and just past them, with limits.
        let ordered = keys.sorted { compareKeys($0, $1) < 0 }
        for i in stride(from: 0, to: ordered.count, by: 3) {
            for width in 0...6 where i + width < ordered.count {
                for (lower, upper) in [(ordered[i], ordered[i + width]), (ordered[i] + [0], ordered[i + width] + [0]), (ordered[i + width], ordered[i])] {
                    let expected = drain(index.cursor(from: lower, to: upper)).count
                    #expect(index.countKeys(from: lower, to: upper) == expected, "countKeys from \(lower) to \(upper)")
                    #expect(index.countKeys(from: lower, to: upper, limit: 2) == min(2, expected))
                }
            }
        }
        // After removals (leaves emptied, merged and rebalanced), every range still counts as
        // the cursor walks it.
        for key in ordered where Bool.random(using: &rng) { _ = index.remove(key) }
        try index.checkInvariants()
        for lower in probes {
            for upper in [nil] + probes.map(Optional.some) {
                let expected = drain(index.cursor(from: lower, to: upper)).count
                #expect(index.countKeys(from: lower, to: upper) == expected, "after removals: countKeys from \(lower) to \(String(describing: upper))")
                #expect(index.countKeys(from: lower, to: upper, limit: expected / 2 + 1) == min(expected, expected / 2 + 1))
            }
        }
    }

    @Test("lookups through a finger answer as lookups from the root, in any order", arguments: shapes)
    func fingerLookupsMatchPlainLookups(leafCapacity: Int, branchCapacity: Int) {
        var rng = SeededRandom(seed: UInt64(leafCapacity * 7 + branchCapacity))
        var index = KeyIndex(leafCapacity: leafCapacity, branchCapacity: branchCapacity)
        var present: [[UInt8]] = []
        for n in 0..<500 {
            let key = n % 4 == 0 ? smallKey(&rng) : largeKey(&rng)
            index.upsert(key, entry(UInt64(n)))
            present.append(key)
        }
        let absent = (0..<200).map { _ in largeKey(&rng) } + [[], [0], [0xFF, 0xFF, 0xFF, 0xFF]]
        let sorted = present.sorted { compareKeys($0, $1) < 0 }
        // In key order (the finger's good case), shuffled, absent keys mixed in, and one
        // finger carried from each sequence to the next.
        var finger = KeyIndex.Finger()
        for probes in [sorted, present.shuffled(using: &rng), (present + absent).shuffled(using: &rng), sorted.reversed()] {
            for key in probes {
                let expected = index.lookup(key)
                let found = key.withUnsafeBytes { index.lookup($0, finger: &finger) }
                #expect(found == expected, "\(key)")
            }
        }
    }

    @Test("lookup accepts arrays, slices and raw buffers")
    func lookupKeyForms() {
        var index = KeyIndex()
        index.upsert([1, 2, 3], entry(5))
        let padded: [UInt8] = [9, 1, 2, 3, 9]
        #expect(index.lookup(padded[1..<4]) == entry(5))
        #expect(padded.withUnsafeBytes { index.lookup(UnsafeRawBufferPointer(rebasing: $0[1..<4])) } == entry(5))
        #expect(index.lookup([1, 2, 3]) == entry(5))
        #expect(index.lookup([1, 2]) == nil)
        #expect(index.lookup(padded.lazy.filter { $0 != 9 }) == entry(5))
    }

    @Test("removing every key leaves an empty, valid tree", arguments: shapes)
    func removeEverything(leafCapacity: Int, branchCapacity: Int) throws {
        var rng = SeededRandom(seed: 11)
        let keys = sortedKeys(5_000, seed: 12)
        var index = try KeyIndex(
            sortedUnique: keys.map { ($0, entry(1)) }, leafCapacity: leafCapacity,
            branchCapacity: branchCapacity)
        for (step, key) in keys.shuffled(using: &rng).enumerated() {
            #expect(index.remove(key) == entry(1))
            if step % 500 == 0 { try index.checkInvariants() }
        }
        #expect(index.count == 0)
        #expect(index.isEmpty)
        #expect(index.root.isLeaf)
        #expect(contents(index).isEmpty)
        #expect(index.remove(keys[0]) == nil)
        try index.checkInvariants()
        index.upsert(keys[0], entry(2))
        #expect(contents(index).map(\.0) == [keys[0]])
        try index.checkInvariants()
    }

    @Test("every insertion and removal order of seven keys keeps the tree valid")
    func exhaustiveSmallOrders() throws {
        let keys: [[UInt8]] = [[], [0], [0, 0], [1], [0x61, 0x62], [0xFF], [0xFF, 0xFF]]
        var order = Array(keys.indices)
        var permutations = 0
        // Visit all permutations in lexicographic order.
        repeat {
            permutations += 1
            var index = KeyIndex(leafCapacity: 2, branchCapacity: 4)
            for (n, i) in order.enumerated() {
                index.upsert(keys[i], entry(UInt64(i)))
                try index.checkInvariants()
                #expect(contents(index).map(\.0) == order.prefix(n + 1).sorted().map { keys[$0] })
            }
            for (n, i) in order.reversed().enumerated() {
                #expect(index.remove(keys[i]) == entry(UInt64(i)))
                try index.checkInvariants()
                #expect(index.count == keys.count - n - 1)
            }
            #expect(index.isEmpty)
        } while nextPermutation(&order)
        #expect(permutations == 5_040)
    }

    @Test("memory estimate is near the per-key budget for bulk-built and random-built trees")
    func memoryEstimate() throws {
        let keys = sortedKeys(20_000, seed: 5)
        let bulk = try KeyIndex(sortedUnique: keys.map { ($0, entry(1)) })
        var rng = SeededRandom(seed: 6)
        var random = KeyIndex()
        for key in keys.shuffled(using: &rng) { random.upsert(key, entry(1)) }
        for index in [bulk, random] {
            let perKey = Double(index.estimatedMemoryBytes) / Double(keys.count) - 16
            #expect(perKey > 28)  // entry and end offset at least
            #expect(perKey <= 48)
        }
    }
}

/// Advances `a` to the next permutation in lexicographic order; `false` after the last.
private func nextPermutation(_ a: inout [Int]) -> Bool {
    guard var i = a.indices.last, i > 0 else { return false }
    while i > 0, a[i - 1] >= a[i] { i -= 1 }
    guard i > 0 else { return false }
    var j = a.count - 1
    while a[j] <= a[i - 1] { j -= 1 }
    a.swapAt(i - 1, j)
    a[i...].reverse()
    return true
}

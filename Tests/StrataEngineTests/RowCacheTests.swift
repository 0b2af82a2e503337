import Dispatch
import Synchronization
import Testing
@testable import StrataEngine

/// Row-cache test helpers on the shared seeded generator.
extension SeededRandom {
    mutating func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &self) < percent }
    /// A row value: usually 0 to 60 bytes, sometimes 300 (bigger than small budgets).
    mutating func row() -> [UInt8] { bytes(chance(5) ? 300 : Int.random(in: 0...60, using: &self)) }
    mutating func keys(_ count: Int, from keys: [[UInt8]]) -> [[UInt8]] {
        (0..<count).map { _ in keys[Int.random(in: 0..<keys.count, using: &self)] }
    }
}

private func key(_ name: String) -> [UInt8] { Array(name.utf8) }
private func cost(_ key: [UInt8], _ value: [UInt8]) -> Int { key.count + value.count + RowCache.entryOverheadBytes }

/// The cache's specification written the slow, obvious way: an array for recency order.
private struct RowCacheModel {
    let budget: Int
    var pins: [[UInt8]: Int] = [:]
    var entries: [[UInt8]: (sequence: UInt64, value: [UInt8])] = [:]
    /// Unpinned cached keys, least recently used first.
    var recency: [[UInt8]] = []
    var hits = 0, misses = 0, evictions = 0, unbalancedUnpins = 0

    func isPinned(_ key: [UInt8]) -> Bool { pins[key] != nil }
    func bytes(pinned: Bool) -> Int {
        entries.filter { isPinned($0.key) == pinned }.reduce(0) { $0 + cost($1.key, $1.value.value) }
    }

    var stats: RowCacheStats {
        RowCacheStats(
            hits: hits, misses: misses, evictions: evictions, entries: entries.count, pinnedKeys: pins.count,
            pinnedEntries: entries.keys.filter(isPinned).count, pinnedBytes: bytes(pinned: true),
            unpinnedBytes: bytes(pinned: false), budgetBytes: budget, unbalancedUnpins: unbalancedUnpins)
    }

    mutating func drop(_ key: [UInt8]) {
        entries[key] = nil
        recency.removeAll { $0 == key }
    }

    mutating func makeNewest(_ key: [UInt8]) {
        recency.removeAll { $0 == key }
        recency.append(key)
    }

    /// Drops `key` if it is cached, unpinned and bigger than the whole budget.
    mutating func dropIfOversized(_ key: [UInt8]) {
        guard let entry = entries[key], !isPinned(key), cost(key, entry.value) > budget else { return }
        drop(key)
        evictions += 1
    }

    mutating func evict() {
        while bytes(pinned: false) > budget, let oldest = recency.first {
            drop(oldest)
            evictions += 1
        }
    }

    mutating func lookup(_ key: [UInt8], sequence: UInt64) -> [UInt8]? {
        guard let entry = entries[key], entry.sequence == sequence else {
            misses += 1
            return nil
        }
        hits += 1
        if !isPinned(key) { makeNewest(key) }
        return entry.value
    }

    mutating func insert(_ key: [UInt8], sequence: UInt64, value: [UInt8]) {
        if let entry = entries[key] {
            guard entry.sequence <= sequence else { return }
            entries[key] = (sequence, value)
            if !isPinned(key) { makeNewest(key) }
            dropIfOversized(key)
        } else {
            guard isPinned(key) || cost(key, value) <= budget else { return }
            entries[key] = (sequence, value)
            if !isPinned(key) { recency.append(key) }
        }
        evict()
    }

    /// A commit's change: an empty value is never written through (index and relationship
    /// keys), so it drops a cached entry like a delete.
    mutating func update(_ key: [UInt8], sequence: UInt64, value: [UInt8]?) {
        if let entry = entries[key] {
            guard entry.sequence <= sequence else { return }
            guard let value, !value.isEmpty else { return drop(key) }
            entries[key] = (sequence, value)
            dropIfOversized(key)
        } else if let value, !value.isEmpty, isPinned(key) {
            entries[key] = (sequence, value)
        }
        evict()
    }

    mutating func pin(_ key: [UInt8]) {
        pins[key, default: 0] += 1
        recency.removeAll { $0 == key }
    }

    /// Returns false, changing only `unbalancedUnpins`, if some key is unpinned more often than pinned.
    mutating func unpin(_ keys: [[UInt8]]) -> Bool {
        var wanted: [[UInt8]: Int] = [:]
        for key in keys { wanted[key, default: 0] += 1 }
        guard wanted.allSatisfy({ $0.value <= pins[$0.key] ?? 0 }) else {
            unbalancedUnpins += 1
            return false
        }
        for key in keys {
            let count = pins[key, default: 0] - 1
            pins[key] = count == 0 ? nil : count
            if count == 0, entries[key] != nil {
                recency.append(key)
                dropIfOversized(key)
            }
        }
        evict()
        return true
    }

    mutating func removeAll() {
        for key in recency { entries[key] = nil }
        recency = []
    }
}

@Suite struct RowCacheTests {
    /// Random operations over 8 keys, checked against the model after every step.
    @Test(arguments: [(UInt64(1), 0), (2, 300), (3, 600), (4, 900), (5, 4_000)])
    func randomOperationsMatchTheModel(seed: UInt64, budget: Int) throws {
        var rng = SeededRandom(seed: seed)
        let cache = RowCache(budgetBytes: budget)
        var model = RowCacheModel(budget: budget)
        let keys = (0..<8).map { key("row-\($0)") }
        var commitSequence: UInt64 = 1
        for step in 0..<4_000 {
            let k = keys[Int.random(in: 0..<keys.count, using: &rng)]
            let pinsBefore = keys.map { cache.pinCount($0) }
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<14:
                cache.pin(k)
                model.pin(k)
            case 14..<17:
                let batch = rng.keys(Int.random(in: 1...3, using: &rng), from: keys)
                cache.pin(batch)
                batch.forEach { model.pin($0) }
            case 17..<34:
                let batch = rng.chance(25) ? rng.keys(Int.random(in: 2...4, using: &rng), from: keys) : [k]
                let balanced = model.unpin(batch)
                var thrown: StoreError? = nil
                do {
                    if batch.count == 1 { try cache.unpin(batch[0]) } else { try cache.unpin(batch) }
                } catch {
                    thrown = error
                }
                try #require((thrown == nil) == balanced, "step \(step): unpin \(batch): \(String(describing: thrown))")
                if let thrown {
                    #expect(thrown.code == .invalidArgument && thrown.message.contains("must balance"))
                    try #require(keys.map { cache.pinCount($0) } == pinsBefore, "step \(step): unpin changed pins")
                }
            case 34..<58:
                // A reader of some snapshot, possibly older than the latest commit.
                let sequence = UInt64.random(in: 0...commitSequence, using: &rng)
                let value = rng.row()
                cache.insert(k, sequence: sequence, value: value)
                model.insert(k, sequence: sequence, value: value)
            case 58..<72:
                commitSequence += 1
                let value = rng.chance(25) ? nil : rng.row()
                cache.update(k, sequence: commitSequence, value: value)
                model.update(k, sequence: commitSequence, value: value)
            case 72..<99:
                let cached = model.entries[k]?.sequence ?? 0
                let sequence = rng.chance(70) ? cached : UInt64.random(in: 0...commitSequence, using: &rng)
                let found = cache.lookup(k, sequence: sequence)
                let expected = model.lookup(k, sequence: sequence)
                try #require(found == expected, "step \(step): lookup of \(k) at \(sequence)")
                if found != nil { try #require(cache.cachedEntry(k)?.sequence == sequence) }
            default:
                cache.removeAll()
                model.removeAll()
            }
            for k in keys {
                try #require(cache.pinCount(k) == model.pins[k] ?? 0, "step \(step): pin count of \(k)")
                let cached = cache.cachedEntry(k), expected = model.entries[k]
                try #require(
                    cached?.sequence == expected?.sequence && cached?.value == expected?.value, "step \(step): entry \(k)")
                if model.isPinned(k), let expected {
                    // Pinned entries survive any pressure, with the latest value.
                    try #require(cache.contains(k) && cached?.value == expected.value)
                }
            }
            let stats = cache.stats
            try #require(stats == model.stats, "step \(step)")
            try #require(stats.unpinnedBytes <= budget)
            try cache.checkInvariants()
        }
        #expect(model.hits > 0 && model.misses > 0 && model.unbalancedUnpins > 0)
        // The largest budget holds every entry at once; the others must have evicted.
        #expect(budget >= 4_000 || model.evictions > 0)
    }

    @Test func touchedEntryStaysWhileLeastRecentlyUsedIsEvicted() throws {
        let value = [UInt8](repeating: 7, count: 10)
        let cache = RowCache(budgetBytes: 3 * cost(key("a"), value))
        for name in ["a", "b", "c"] { cache.insert(key(name), sequence: 1, value: value) }
        #expect(cache.lookup(key("a"), sequence: 1) == value)
        cache.insert(key("d"), sequence: 1, value: value)
        #expect(["a", "b", "c", "d"].map { cache.contains(key($0)) } == [true, false, true, true])
        cache.insert(key("e"), sequence: 1, value: value)
        #expect(["a", "c", "d", "e"].map { cache.contains(key($0)) } == [true, false, true, true])
        #expect(cache.stats.evictions == 2)
        try cache.checkInvariants()
    }

    @Test func keyPinnedBeforeLoadingStaysUnderPressure() throws {
        let cache = RowCache(budgetBytes: 200)
        cache.pin(key("p"))
        #expect(!cache.contains(key("p")) && cache.stats.pinnedKeys == 1 && cache.stats.pinnedEntries == 0)
        cache.insert(key("p"), sequence: 3, value: [1, 2, 3])
        for n in 0..<50 { cache.insert(key("x\(n)"), sequence: 1, value: [UInt8](repeating: 0, count: 40)) }
        #expect(cache.lookup(key("p"), sequence: 3) == [1, 2, 3])
        #expect(cache.stats.pinnedEntries == 1 && cache.stats.pinnedBytes == cost(key("p"), [1, 2, 3]))
        try cache.checkInvariants()
    }

    @Test func unpinningToZeroMakesEntryEvictable() throws {
        let value = [UInt8](repeating: 1, count: 30)
        let cache = RowCache(budgetBytes: 2 * cost(key("a"), value))
        cache.pin([key("a"), key("a")])
        cache.insert(key("a"), sequence: 1, value: value)
        for name in ["b", "c"] { cache.insert(key(name), sequence: 1, value: value) }
        try cache.unpin(key("a"))
        #expect(cache.pinCount(key("a")) == 1 && cache.contains(key("a")))
        try cache.unpin(key("a"))
        // Unpinned now and newest, so b (the oldest) went to make room.
        #expect(cache.pinCount(key("a")) == 0 && !cache.contains(key("b")))
        cache.insert(key("d"), sequence: 1, value: value)
        cache.insert(key("e"), sequence: 1, value: value)
        #expect(!cache.contains(key("a")))
        #expect(cache.stats.pinnedKeys == 0)
        try cache.checkInvariants()
    }

    @Test func insertNeverReplacesNewerSequence() throws {
        let cache = RowCache(budgetBytes: 1_000)
        cache.insert(key("k"), sequence: 9, value: [9])
        cache.insert(key("k"), sequence: 4, value: [4])
        #expect(cache.lookup(key("k"), sequence: 4) == nil)
        #expect(cache.lookup(key("k"), sequence: 9) == [9])
        cache.insert(key("k"), sequence: 12, value: [12])
        #expect(cache.cachedEntry(key("k"))?.sequence == 12)
        cache.update(key("k"), sequence: 10, value: nil)
        #expect(cache.cachedEntry(key("k"))?.value == [12])
        try cache.checkInvariants()
    }

    @Test func updateOfUncachedUnpinnedKeyInsertsNothing() throws {
        let cache = RowCache(budgetBytes: 1_000)
        cache.update(key("k"), sequence: 5, value: [5])
        #expect(!cache.contains(key("k")) && cache.stats.entries == 0)
        cache.insert(key("k"), sequence: 5, value: [5])
        cache.update(key("k"), sequence: 6, value: [6])
        #expect(cache.lookup(key("k"), sequence: 6) == [6])
        try cache.checkInvariants()
    }

    @Test func updateWithNilDropsValueButKeepsPin() throws {
        let cache = RowCache(budgetBytes: 1_000)
        cache.pin(key("k"))
        cache.update(key("k"), sequence: 2, value: [2])  // Pinned: a commit fills it.
        #expect(cache.cachedEntry(key("k"))?.value == [2])
        cache.update(key("k"), sequence: 3, value: nil)
        #expect(!cache.contains(key("k")) && cache.pinCount(key("k")) == 1)
        #expect(cache.stats.pinnedKeys == 1 && cache.stats.pinnedBytes == 0)
        cache.update(key("k"), sequence: 4, value: [4])
        #expect(cache.lookup(key("k"), sequence: 4) == [4])
        try cache.checkInvariants()
    }

    @Test func entryLargerThanBudgetIsNotKeptUnlessPinned() throws {
        let cache = RowCache(budgetBytes: 200)
        let big = [UInt8](repeating: 0xAB, count: 500)
        cache.insert(key("small"), sequence: 1, value: [1])
        cache.insert(key("big"), sequence: 1, value: big)
        #expect(!cache.contains(key("big")) && cache.contains(key("small")))
        cache.pin(key("big"))
        cache.insert(key("big"), sequence: 1, value: big)
        #expect(cache.lookup(key("big"), sequence: 1) == big && cache.contains(key("small")))
        #expect(cache.stats.pinnedBytes == cost(key("big"), big))
        try cache.unpin(key("big"))  // Too big to keep once ordinary; nothing else is evicted for it.
        #expect(!cache.contains(key("big")) && cache.contains(key("small")))
        cache.insert(key("small"), sequence: 2, value: big)  // Replacing with an oversized value drops it.
        #expect(!cache.contains(key("small")) && cache.stats.unpinnedBytes == 0)
        try cache.checkInvariants()
    }

    @Test func unbalancedUnpinThrowsNamingTheKeyAndChangesNothing() throws {
        let cache = RowCache(budgetBytes: 1_000)
        cache.pin(key("row-7"))
        try cache.unpin(key("row-7"))
        let error = try #require(throws: StoreError.self) { try cache.unpin(key("row-7")) }
        #expect(error.code == .invalidArgument)
        #expect(error.message.contains("\"row-7\"") && error.message.contains("must balance"))
        let binary = try #require(throws: StoreError.self) { try cache.unpin([0x00, 0xFF]) }
        #expect(binary.message.contains("0x00ff"))
        #expect(cache.pinCount(key("row-7")) == 0 && cache.stats.unbalancedUnpins == 2)
        try cache.checkInvariants()
    }

    @Test func batchUnpinIsAllOrNothing() throws {
        let cache = RowCache(budgetBytes: 1_000)
        cache.pin([key("a"), key("b"), key("a")])
        // b is pinned once but listed twice: the whole batch fails.
        #expect(throws: StoreError.self) { try cache.unpin([key("a"), key("b"), key("b")]) }
        #expect(cache.pinCount(key("a")) == 2 && cache.pinCount(key("b")) == 1)
        try cache.unpin([key("a"), key("b"), key("a")])
        #expect(cache.stats.pinnedKeys == 0 && cache.stats.unbalancedUnpins == 1)
        try cache.checkInvariants()
    }

    @Test func removeAllKeepsPinsAndPinnedEntries() throws {
        let cache = RowCache(budgetBytes: 1_000)
        cache.pin([key("p"), key("q")])
        for name in ["p", "u", "v"] { cache.insert(key(name), sequence: 1, value: [1]) }
        cache.removeAll()
        #expect(cache.contains(key("p")) && !cache.contains(key("u")) && !cache.contains(key("v")))
        #expect(cache.stats.pinnedKeys == 2 && cache.stats.unpinnedBytes == 0 && cache.stats.evictions == 0)
        try cache.checkInvariants()
    }

    @Test func lookupCountsHitsAndMissesAndRequiresExactSequence() throws {
        let cache = RowCache(budgetBytes: 1_000)
        #expect(cache.lookup(key("k"), sequence: 1) == nil)
        cache.insert(key("k"), sequence: 1, value: [1])
        #expect(cache.lookup(key("k"), sequence: 2) == nil)
        #expect(cache.lookup(key("k"), sequence: 1) == [1])
        #expect(cache.stats.hits == 1 && cache.stats.misses == 2 && cache.stats.entries == 1)
        #expect(cache.stats.unpinnedBytes == 1 + 1 + RowCache.entryOverheadBytes)
        // The fixed overhead covers at least the slot, a dictionary bucket and two array headers.
        #expect(MemoryLayout<RowCache.Slot>.stride + MemoryLayout<CacheKey>.stride + MemoryLayout<Int>.stride + 64 <= RowCache.entryOverheadBytes)
    }

    /// Eviction that meets a pinned entry in the recency list (a bug) keeps it and counts it.
    @Test func evictionKeepsAndCountsPinnedEntryFoundInRecencyList() throws {
        let value = [UInt8](repeating: 1, count: 50)
        let cache = RowCache(budgetBytes: cost(key("a"), value))
        cache.insert(key("a"), sequence: 1, value: value)
        cache.state.withLock { $0.pinCounts[CacheKey(key("a"))] = 1 }  // Pinned behind the cache's back.
        #expect(throws: StoreError.self) { try cache.checkInvariants() }
        cache.insert(key("b"), sequence: 1, value: value)
        #expect(cache.pinnedEvictions == 1 && cache.contains(key("a")) && cache.contains(key("b")))
        let error = try #require(throws: StoreError.self) { try cache.checkInvariants() }
        #expect(error.message.contains("eviction met 1 pinned"))
    }

    /// Threads work on distinct keys; each knows its own pin counts and value versions exactly.
    @Test func concurrentOperationsOnDistinctKeysKeepInvariants() throws {
        let cache = RowCache(budgetBytes: 2_000)
        let failures = Mutex<[String]>([])
        let group = DispatchGroup()
        let threads = 4
        for thread in 0..<threads {
            DispatchQueue.global().async(group: group) {
                var rng = SeededRandom(seed: 100 + UInt64(thread))
                var pins: [[UInt8]: Int] = [:]
                // The version each pinned key must hold: written while pinned, so no eviction by
                // any thread may drop it.
                var pinnedVersion: [[UInt8]: UInt64] = [:]
                var sequence: UInt64 = 0
                let keys = (0..<6).map { key("t\(thread)-\($0)") }
                func value(_ k: [UInt8], _ s: UInt64) -> [UInt8] { k + Array("@\(s)".utf8) }
                for step in 0..<3_000 {
                    let k = keys.randomElement(using: &rng) ?? keys[0]
                    switch Int.random(in: 0..<10, using: &rng) {
                    case 0:
                        cache.pin(k)
                        pins[k, default: 0] += 1
                    case 1:
                        do {
                            try cache.unpin(k)
                            pins[k, default: 0] -= 1
                            if pins[k] == 0 { pinnedVersion[k] = nil }
                        } catch {
                            if pins[k, default: 0] > 0 { failures.withLock { $0.append("unpin of \(k) threw") } }
                        }
                    case 2, 3, 4:
                        sequence += 1
                        cache.insert(k, sequence: sequence, value: value(k, sequence))
                        if pins[k, default: 0] > 0 { pinnedVersion[k] = sequence }
                    case 5:
                        sequence += 1
                        let deleted = rng.chance(20)
                        cache.update(k, sequence: sequence, value: deleted ? nil : value(k, sequence))
                        if pins[k, default: 0] > 0 { pinnedVersion[k] = deleted ? nil : sequence }
                    case 6:
                        if let version = pinnedVersion[k], cache.lookup(k, sequence: version) != value(k, version) {
                            failures.withLock { $0.append("pinned \(k) lost version \(version)") }
                        }
                    default:
                        let asked = UInt64.random(in: 0...sequence, using: &rng)
                        if let found = cache.lookup(k, sequence: asked), found != value(k, asked) {
                            failures.withLock { $0.append("lookup of \(k) at \(asked) returned another version") }
                        }
                    }
                    if step % 500 == 0 {
                        do { try cache.checkInvariants() } catch { failures.withLock { $0.append("\(error)") } }
                    }
                }
                for k in keys where cache.pinCount(k) != pins[k, default: 0] {
                    failures.withLock { $0.append("pin count of \(k)") }
                }
            }
        }
        group.wait()
        #expect(failures.withLock { $0 } == [])
        try cache.checkInvariants()
        #expect(cache.stats.unpinnedBytes <= 2_000 && cache.pinnedEvictions == 0)
    }
}

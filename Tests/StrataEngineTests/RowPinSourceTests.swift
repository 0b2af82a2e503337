import Synchronization
import Testing
@testable import StrataEngine

/// A pin source that pins the keys in a set (counts live outside the cache, as a store's).
private final class SetPins: RowPinSource {
    let keys = Mutex<[[UInt8]: Int]>([:])
    let asked = Atomic<Int>(0)
    func pin(_ key: [UInt8]) { keys.withLock { $0[key, default: 0] += 1 } }
    func unpin(_ key: [UInt8]) {
        keys.withLock { keys in
            guard let count = keys[key] else { return }
            keys[key] = count > 1 ? count - 1 : nil
        }
    }
    func isPinned(_ key: [UInt8]) -> Bool {
        asked.add(1, ordering: .relaxed)
        return keys.withLock { $0[key] != nil }
    }
    var pinnedKeyCount: Int { keys.withLock { $0.count } }
}

private func key(_ name: String) -> [UInt8] { Array(name.utf8) }

@Suite struct RowPinSourceTests {
    /// Random inserts, commits, lookups, source pins and the cache's own pins: an entry pinned
    /// either way is never evicted, values are never wrong, and the invariants hold after
    /// every step; once every pin is gone, the budget holds again.
    @Test(arguments: [(UInt64(11), 0), (12, 400), (13, 900), (14, 3_000)])
    func entriesPinnedBySourceSurviveAnyPressure(seed: UInt64, budget: Int) throws {
        var rng = SeededRandom(seed: seed)
        let cache = RowCache(budgetBytes: budget)
        let source = SetPins()
        cache.addPinSource(source)
        let keys = (0..<12).map { key("row-\($0)") }
        var internalPins: [[UInt8]: Int] = [:]
        var latest: [[UInt8]: (sequence: UInt64, value: [UInt8])] = [:]  // the newest value written
        var sequence: UInt64 = 0
        var held = 0
        for step in 0..<5_000 {
            let k = keys[Int.random(in: 0..<keys.count, using: &rng)]
            let before = Set(keys.filter { cache.contains($0) })
            var changed: [UInt8]? = nil
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<15: source.pin(k)
            case 15..<30: source.unpin(k)
            case 30..<34:
                cache.pin(k)
                internalPins[k, default: 0] += 1
            case 34..<38:
                if internalPins[k, default: 0] > 0 {
                    try cache.unpin(k)
                    internalPins[k]! -= 1
                    if internalPins[k] == 0 { internalPins[k] = nil }
                }
            case 38..<65:
                sequence += 1
                let value = rng.row()
                cache.insert(k, sequence: sequence, value: value)
                latest[k] = (sequence, value)
                changed = k
            case 65..<78:
                sequence += 1
                let value: [UInt8]? = rng.chance(20) ? nil : rng.row()
                cache.update(k, sequence: sequence, value: value)
                latest[k] = value.map { (sequence, $0) }
                changed = k
            case 78..<98:
                if let (s, v) = latest[k], let found = cache.lookup(k, sequence: s) {
                    try #require(found == v, "step \(step): wrong value for \(k)")
                }
            default:
                cache.removeAll()
            }
            for k in before where k != changed {
                let pinned = source.isPinned(k) || internalPins[k] != nil
                try #require(!pinned || cache.contains(k), "step \(step): pinned \(k) was evicted")
            }
            for k in keys {
                if let entry = cache.cachedEntry(k) {
                    try #require(latest[k].map { entry.sequence == $0.sequence && entry.value == $0.value } ?? false, "step \(step): \(k)")
                }
            }
            held = max(held, cache.state.withLock { $0.heldSlots.count })
            try cache.checkInvariants()
        }
        #expect(budget >= 3_000 || held > 0, "eviction met an entry the source pins")
        for k in keys { while source.keys.withLock({ $0[k] != nil }) { source.unpin(k) } }
        for (k, count) in internalPins { for _ in 0..<count { try cache.unpin(k) } }
        let stats = cache.stats  // sweeps what was held
        #expect(stats.pinnedKeys == 0 && stats.pinnedEntries == 0 && stats.pinnedBytes == 0)
        cache.insert(key("last"), sequence: sequence + 1, value: [1])
        #expect(cache.stats.unpinnedBytes <= budget)
        try cache.checkInvariants()
    }

    /// Held entries are swept back in amortised batches, not one scan per eviction.
    @Test func heldEntriesAreSweptInBatches() throws {
        let value = [UInt8](repeating: 3, count: 40)
        let cache = RowCache(budgetBytes: 0)
        let source = SetPins()
        cache.addPinSource(source)
        let keys = (0..<1_000).map { key("k\($0)") }
        for k in keys { source.pin(k) }
        for (i, k) in keys.enumerated() { cache.insert(k, sequence: UInt64(i + 1), value: value) }
        #expect(keys.allSatisfy(cache.contains), "a budget of 0 evicts nothing pinned")
        // Each insert asks about its own entry once, a sweep about every held entry: O(n) in all.
        #expect(source.asked.load(ordering: .relaxed) < 4 * keys.count)
        for k in keys { source.unpin(k) }
        #expect(cache.stats.entries == 0, "reading the statistics sweeps: nothing is pinned, the budget is 0")
        try cache.checkInvariants()
    }

    /// Removing a source makes what only it pinned evictable at once.
    @Test func removingTheSourceReleasesItsEntries() throws {
        let cache = RowCache(budgetBytes: 0)
        let source = SetPins()
        cache.addPinSource(source)
        source.pin(key("a"))
        cache.insert(key("a"), sequence: 1, value: [1, 2])
        #expect(cache.contains(key("a")) && cache.stats.pinnedKeys == 1)
        cache.removePinSource(source)
        #expect(!cache.contains(key("a")) && cache.stats.pinnedKeys == 0)
        try cache.checkInvariants()
    }
}

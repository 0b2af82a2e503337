import Synchronization
import StrataSync

/// A bounded, thread-safe cache of row values by key, with reference-counted pins.
///
/// Each entry holds a key, the sequence (version) of its value and the value. The engine
/// validates a hit by asking for the sequence its key index holds for the key, so a stale
/// entry is never returned. Unpinned entries are evicted least-recently-used first once their
/// bytes exceed the budget. Pinned keys follow the register / unregister counting of Core
/// Data's `managedObjectContextDidRegisterObjects(with:)`: a count starts at 0, each ``pin(_:)``
/// adds 1, each ``unpin(_:)`` removes 1, and while it is above 0 the key's entry is never
/// evicted and does not count against the budget.
///
/// For example:
///
/// ```swift
/// let cache = RowCache(budgetBytes: 1 << 20)
/// cache.insert(key, sequence: 7, value: row)
/// cache.lookup(key, sequence: 7)   // row
/// cache.lookup(key, sequence: 8)   // nil: the cached value is an older version
/// ```
///
/// Cost: an entry costs `key.count + value.count +` ``entryOverheadBytes`` bytes. Every
/// operation is O(1) amortised apart from hashing the key (O(key length)), plus O(1) per entry
/// it evicts; ``removeAll()`` is O(unpinned entries), batch pins are O(keys).
final class RowCache: Sendable {
    /// Bytes added to each entry's cost for its bookkeeping, on 64-bit platforms: its ``Slot``
    /// (64, the key's hash included), its key-to-slot dictionary bucket (24) and the heap
    /// headers of its key and value arrays (2 × 32). Malloc rounding and free-slot capacity are
    /// not counted.
    static let entryOverheadBytes = 152

    // Constant after construction.

    /// The most bytes the unpinned entries may occupy (pinned entries are not limited).
    let budgetBytes: Int

    /// Protects every entry, the recency list, the pin counts, the byte totals and the
    /// statistics counters: all of the cache's mutable state.
    let state: Locked<State>

    /// Point reads answered from a WAL's image without consulting the cache ([WAL-5]: those
    /// values are in memory already and never cached). Atomic: counting one takes no lock.
    private let walReadCount = Atomic<Int>(0)

    /// Counts a point read of a value in a WAL (``RowCacheStats/walReads``).
    func countWALRead() { walReadCount.add(1, ordering: .relaxed) }

    /// Creates an empty cache whose unpinned entries may occupy up to `budgetBytes` bytes (a
    /// negative budget is treated as 0: only pinned entries are kept). O(1).
    init(budgetBytes: Int) {
        self.budgetBytes = max(0, budgetBytes)
        self.state = Locked(State())
    }

    /// The cost of an entry, in bytes. O(1).
    static func cost(key: [UInt8], value: [UInt8]) -> Int {
        key.count + value.count + entryOverheadBytes
    }

    /// Returns the cached value of `key` if its sequence is exactly `sequence`, and marks the
    /// entry recently used; counts a hit or a miss. O(1) amortised.
    func lookup(_ key: [UInt8], sequence: UInt64) -> [UInt8]? {
        let key = CacheKey(key)
        return state.withLock { state in
            guard let slot = state.slotOfKey[key], state.slots[slot].sequence == sequence else {
                state.misses += 1
                return nil
            }
            state.hits += 1
            state.touch(slot)
            return state.slots[slot].value
        }
    }

    /// Caches `value` as version `sequence` of `key`, unless the cache holds a newer version,
    /// then evicts least-recently-used unpinned entries until the budget holds. O(1) amortised.
    ///
    /// An equal or older cached version is replaced and the entry becomes the most recently
    /// used. An unpinned entry that costs more than the whole budget is not kept (an older
    /// version it would have replaced is dropped); a pinned one always is.
    func insert(_ key: [UInt8], sequence: UInt64, value: [UInt8]) {
        let key = CacheKey(key)
        let budget = budgetBytes
        state.withLock { state in
            if let slot = state.slotOfKey[key] {
                guard state.slots[slot].sequence <= sequence else { return }
                state.replace(slot, sequence: sequence, value: value)
                if state.slots[slot].isLinked { state.touch(slot) }
                state.dropIfOversized(slot, budget: budget)
            } else {
                let pinned = state.pinCounts[key] != nil
                // A source's pin is asked only of an entry too big for the budget; any other
                // is linked and held when eviction reaches it.
                guard pinned || Self.cost(key: key.bytes, value: value) <= budget || state.isPinnedBySource(key) else { return }
                state.add(key, sequence: sequence, value: value, pinned: pinned)
            }
            state.evict(budget: budget)
        }
    }

    /// Applies a committed change of `key` to the cache, if the key is cached or pinned:
    /// stores `value` as version `sequence`, or drops the entry when `value` is `nil` (a
    /// delete), keeping the pin count either way. O(1) amortised.
    ///
    /// A key that is neither cached nor pinned is left alone: commits do not fill the cache.
    /// A cached version newer than `sequence` is kept (commits applied out of order). The
    /// entry's recency is unchanged: a write is not a read.
    func update(_ key: [UInt8], sequence: UInt64, value: [UInt8]?) {
        update([(key, sequence, value)])
    }

    /// Applies a commit's changes (see ``update(_:sequence:value:)``) under one lock
    /// acquisition, evicting once at the end. An empty value is never cached (see
    /// ``Snapshot/get(_:)``) nor written through, so its key costs one lookup.
    func update(_ changes: [(key: [UInt8], sequence: UInt64, value: [UInt8]?)]) {
        guard !changes.isEmpty else { return }
        let budget = budgetBytes
        state.withLock { state in
            for (bytes, sequence, value) in changes {
                let key = CacheKey(bytes)
                if let slot = state.slotOfKey[key] {
                    guard state.slots[slot].sequence <= sequence else { continue }
                    guard let value, !value.isEmpty else {
                        state.remove(slot)
                        continue
                    }
                    state.replace(slot, sequence: sequence, value: value)
                    state.dropIfOversized(slot, budget: budget)
                } else if let value, !value.isEmpty {
                    if state.pinCounts[key] != nil {
                        state.add(key, sequence: sequence, value: value, pinned: true)
                    } else if state.isPinnedBySource(key) {
                        state.add(key, sequence: sequence, value: value, pinned: false)
                    }
                }
            }
            state.evict(budget: budget)
        }
    }

    /// Adds 1 to the pin count of `key`; while the count is above 0 the key's entry, cached now
    /// or later, is never evicted. O(1) amortised.
    func pin(_ key: [UInt8]) {
        let key = CacheKey(key)
        state.withLock { $0.pin(key) }
    }

    /// Adds 1 to the pin count of each key in `keys` (a key listed twice is pinned twice).
    /// O(keys).
    func pin(_ keys: [[UInt8]]) {
        let keys = keys.map(CacheKey.init)
        state.withLock { state in
            for key in keys { state.pin(key) }
        }
    }

    /// Adds a source of pins counted outside the cache: from now on no entry it pins is
    /// evicted. O(1).
    func addPinSource(_ source: any RowPinSource) {
        state.withLock { $0.sources.append(source) }
    }

    /// Removes a source added by ``addPinSource(_:)`` (by identity); the entries it alone
    /// pinned become evictable. O(held entries).
    func removePinSource(_ source: any RowPinSource) {
        let budget = budgetBytes
        state.withLock { state in
            state.sources.removeAll { $0 === source }
            state.sweepHeld(budget: budget)
            state.evict(budget: budget)
        }
    }

    /// Removes 1 from the pin count of `key`; at 0 its entry becomes evictable again and the
    /// budget is enforced. O(1) amortised, plus O(1) per entry evicted.
    ///
    /// - Throws: ``StoreError/Code/invalidArgument`` if the count is already 0 (more unpins
    ///   than pins); nothing changes except ``RowCacheStats/unbalancedUnpins``.
    func unpin(_ key: [UInt8]) throws(StoreError) {
        try unpin([key])
    }

    /// Removes 1 from the pin count of each key in `keys` (a key listed twice is unpinned
    /// twice), all or nothing. O(keys), plus O(1) per entry evicted.
    ///
    /// - Throws: ``StoreError/Code/invalidArgument`` naming the first key whose count would go
    ///   below 0; nothing changes except ``RowCacheStats/unbalancedUnpins``, which grows by 1.
    func unpin(_ keys: [[UInt8]]) throws(StoreError) {
        let budget = budgetBytes
        if keys.count == 1 {
            // One key, the common case of an object going away: no tally of repeats.
            let key = CacheKey(keys[0])
            try state.withLock { (state: inout State) throws(StoreError) in
                guard state.unpin(key, budget: budget) else {
                    state.unbalancedUnpins += 1
                    throw Self.unbalanced(key.bytes, count: 0, times: 1)
                }
                state.evict(budget: budget)
            }
            return
        }
        let keys = keys.map(CacheKey.init)
        try state.withLock { (state: inout State) throws(StoreError) in
            var wanted: [CacheKey: Int] = [:]
            for key in keys {
                let times = wanted[key, default: 0] + 1
                wanted[key] = times
                let count = state.pinCounts[key] ?? 0
                if times > count {
                    state.unbalancedUnpins += 1
                    throw Self.unbalanced(key.bytes, count: count, times: times)
                }
            }
            for key in keys { state.unpin(key, budget: budget) }
            state.evict(budget: budget)
        }
    }

    /// The number of times `key` is pinned (0 if never, or balanced). O(1).
    func pinCount(_ key: [UInt8]) -> Int {
        let key = CacheKey(key)
        return state.withLock { $0.pinCounts[key] ?? 0 }
    }

    /// Whether an entry for `key` is cached, whatever its sequence. Does not count or touch.
    /// O(1).
    func contains(_ key: [UInt8]) -> Bool {
        let key = CacheKey(key)
        return state.withLock { $0.slotOfKey[key] != nil }
    }

    /// The cached entry of `key`, without counting a hit or marking it used: for tests and
    /// diagnostics. O(1).
    func cachedEntry(_ key: [UInt8]) -> (sequence: UInt64, value: [UInt8])? {
        let key = CacheKey(key)
        return state.withLock { state in
            state.slotOfKey[key].map { (state.slots[$0].sequence, state.slots[$0].value) }
        }
    }

    /// Drops every unpinned entry (O(entries) with pin sources, which are asked about each);
    /// pin counts and pinned entries stay, and statistics are not
    /// reset (the dropped entries are not counted as evictions). O(unpinned entries).
    func removeAll() {
        let budget = budgetBytes
        state.withLock { state in
            state.settleSources(budget: budget)  // entries a source pins are held, so they stay
            while state.oldest != State.none { state.remove(state.oldest) }
        }
    }

    /// A snapshot of the cache's counters and sizes. O(1), or O(entries) with pin sources (each
    /// entry's pin is asked, so that pinned and unpinned figures are exact).
    var stats: RowCacheStats {
        let budget = budgetBytes
        return state.withLock { state in
            state.settleSources(budget: budget)
            state.evict(budget: budget)
            return RowCacheStats(
                hits: state.hits, misses: state.misses, evictions: state.evictions,
                entries: state.slotOfKey.count,
                pinnedKeys: state.pinCounts.count + state.sources.reduce(0) { $0 + $1.pinnedKeyCount },
                pinnedEntries: state.slotOfKey.count - state.linkedCount,
                pinnedBytes: state.pinnedBytes, unpinnedBytes: state.unpinnedBytes,
                budgetBytes: budget, unbalancedUnpins: state.unbalancedUnpins,
                walReads: walReadCount.load(ordering: .relaxed))
        }
    }
}

/// Pins counted outside the engine, for a user that already counts registrations (the store's
/// register / unregister calls): instead of a pin count per key inside the cache, the cache asks
/// the source, before evicting an entry, whether its key is pinned, and sets pinned entries
/// aside until a later sweep finds them unpinned. A source keeps its counts however it likes;
/// registering and unregistering costs the engine nothing.
///
/// Thread safety: the cache calls ``isPinned(_:)`` with its lock held, from any thread. It must
/// be quick, must not call into the engine, and must answer from the source's own state.
public protocol RowPinSource: AnyObject, Sendable {
    /// Whether the entry of `key` must stay cached.
    func isPinned(_ key: [UInt8]) -> Bool
    /// How many keys the source pins now (reported in ``RowCacheStats/pinnedKeys``).
    var pinnedKeyCount: Int { get }
}

/// Counters and sizes of a row cache, as `RowCache/stats` returns them.
public struct RowCacheStats: Sendable, Equatable {
    /// Lookups that found an entry with the requested sequence.
    public var hits = 0
    /// Lookups that found no entry, or one with another sequence.
    public var misses = 0
    /// Cached entries dropped to keep unpinned bytes within the budget.
    public var evictions = 0
    /// Entries cached, pinned or not.
    public var entries = 0
    /// Keys whose pin count is above 0, cached or not, with the keys pin sources pin.
    public var pinnedKeys = 0
    /// Cached entries whose key's pin count is above 0.
    public var pinnedEntries = 0
    /// Bytes (by entry cost) of the pinned entries; not limited by the budget.
    public var pinnedBytes = 0
    /// Bytes (by entry cost) of the unpinned entries; at most ``budgetBytes``.
    public var unpinnedBytes = 0
    /// The most bytes unpinned entries may occupy.
    public var budgetBytes = 0
    /// Unpin calls rejected because they had no matching pin.
    public var unbalancedUnpins = 0
    /// Point reads of values in a WAL, read from its image without a cache lookup: with
    /// ``hits`` and ``misses``, every point read.
    public var walReads = 0
}

extension RowCache {
    /// One cached entry, with its links in the recency list while it is unpinned.
    struct Slot {
        /// The entry's key.
        var key: CacheKey
        /// The version of ``value``.
        var sequence: UInt64
        /// The cached row value.
        var value: [UInt8]
        /// `key.count + value.count +` ``RowCache/entryOverheadBytes``.
        var cost: Int
        /// Whether the entry is in the recency list, which holds exactly the entries not known
        /// to be pinned.
        var isLinked = false
        /// Whether eviction found the entry pinned by a ``RowPinSource`` and set it aside (off
        /// the list, counted as pinned) until a sweep finds it unpinned.
        var isHeld = false
        /// The next less recently used slot, or ``State/none``.
        var older = State.none
        /// The next more recently used slot, or ``State/none``.
        var newer = State.none
    }

    /// All mutable state of a ``RowCache``; lives inside its `Mutex`.
    ///
    /// Entries live in `slots` (freed slots are reused through `freeSlots`). Unpinned entries
    /// form a doubly linked recency list through the slots' indices, from `newest` to
    /// `oldest`; pinned entries are not in it. Unpinned entries' costs sum to `unpinnedBytes`,
    /// pinned entries' to `pinnedBytes`.
    struct State {
        /// The index meaning "no slot".
        static let none = -1

        /// Entry storage; slots listed in `freeSlots` are unused.
        var slots: [Slot] = []
        /// Indices of unused slots in `slots`.
        var freeSlots: [Int] = []
        /// The slot of each cached key.
        var slotOfKey: [CacheKey: Int] = [:]
        /// The pin count of each pinned key; always at least 1 (a key at 0 is removed).
        var pinCounts: [CacheKey: Int] = [:]
        /// The most recently used unpinned entry, or `none`.
        var newest = none
        /// The least recently used unpinned entry (evicted first), or `none`.
        var oldest = none
        /// How many entries the recency list holds.
        var linkedCount = 0
        /// The summed cost of pinned entries.
        var pinnedBytes = 0
        /// The summed cost of unpinned entries.
        var unpinnedBytes = 0
        /// Statistics counters; see ``RowCacheStats``.
        var hits = 0, misses = 0, evictions = 0, unbalancedUnpins = 0
        /// Times eviction found a pinned entry in the recency list; must stay 0.
        var pinnedEvictions = 0
        /// Pins counted outside the cache (see ``RowPinSource``).
        var sources: [any RowPinSource] = []
        /// The slots held for a source's pin (see ``Slot/isHeld``); may list a freed or
        /// re-held slot more than once: a sweep skips what is no longer held.
        var heldSlots: [Int] = []
        /// The length of `heldSlots` at which the next sweep runs: twice what the last one
        /// kept, so sweeping costs O(1) amortised per held entry.
        var heldSweepAt = 64

        /// Whether a source pins `key`. O(sources), each a lookup of its own.
        func isPinnedBySource(_ key: CacheKey) -> Bool {
            for source in sources where source.isPinned(key.bytes) { return true }
            return false
        }

        /// Sets the linked entry in `slot`, pinned by a source, aside: off the list, counted as
        /// pinned. O(1) amortised (a sweep runs when enough are held).
        mutating func hold(_ slot: Int, budget: Int, sweeping: Bool = true) {
            unlink(slot)
            pinnedBytes += slots[slot].cost
            slots[slot].isHeld = true
            heldSlots.append(slot)
            if sweeping, heldSlots.count >= heldSweepAt { sweepHeld(budget: budget) }
        }

        /// Brings the list up to date with the sources: held entries no longer pinned go back
        /// on it, listed entries a source pins are held. Afterwards the list holds exactly the
        /// unpinned entries (the caller enforces the budget). O(entries).
        mutating func settleSources(budget: Int) {
            guard !sources.isEmpty || !heldSlots.isEmpty else { return }
            sweepHeld(budget: budget)
            var cursor = oldest
            while cursor != Self.none {
                let next = slots[cursor].newer
                if isPinnedBySource(slots[cursor].key) { hold(cursor, budget: budget, sweeping: false) }
                cursor = next
            }
            heldSweepAt = max(64, heldSlots.count * 2)
        }

        /// Puts back on the list every held entry that no source pins any more (an entry the
        /// cache's own count pins stays off it, as pinned). O(held entries).
        mutating func sweepHeld(budget: Int) {
            guard !heldSlots.isEmpty else { return }
            var kept: [Int] = []
            for slot in heldSlots where slots[slot].isHeld {
                slots[slot].isHeld = false  // visited: a repeated index is skipped
                if isPinnedBySource(slots[slot].key) {
                    kept.append(slot)
                } else if pinCounts[slots[slot].key] == nil {
                    pinnedBytes -= slots[slot].cost
                    link(slot)
                }
            }
            for slot in kept { slots[slot].isHeld = true }
            heldSlots = kept
            heldSweepAt = max(64, kept.count * 2)
        }

        /// Puts `slot` in the recency list as the newest entry and counts it unpinned. O(1).
        mutating func link(_ slot: Int) {
            slots[slot].isLinked = true
            slots[slot].older = newest
            slots[slot].newer = Self.none
            if newest != Self.none { slots[newest].newer = slot } else { oldest = slot }
            newest = slot
            linkedCount += 1
            unpinnedBytes += slots[slot].cost
        }

        /// Takes `slot` out of the recency list and out of the unpinned bytes. O(1).
        mutating func unlink(_ slot: Int) {
            let older = slots[slot].older, newer = slots[slot].newer
            if older != Self.none { slots[older].newer = newer } else { oldest = newer }
            if newer != Self.none { slots[newer].older = older } else { newest = older }
            slots[slot].isLinked = false
            slots[slot].older = Self.none
            slots[slot].newer = Self.none
            linkedCount -= 1
            unpinnedBytes -= slots[slot].cost
        }

        /// Marks an unpinned entry most recently used; pinned entries have no recency. O(1).
        mutating func touch(_ slot: Int) {
            guard slots[slot].isLinked, newest != slot else { return }
            unlink(slot)
            link(slot)
        }

        /// Caches a new entry for `key`, which must not be cached. O(1) amortised.
        mutating func add(_ key: CacheKey, sequence: UInt64, value: [UInt8], pinned: Bool) {
            let entry = Slot(
                key: key, sequence: sequence, value: value,
                cost: RowCache.cost(key: key.bytes, value: value))
            let slot: Int
            if let free = freeSlots.popLast() {
                slot = free
                slots[slot] = entry
            } else {
                slot = slots.count
                slots.append(entry)
            }
            slotOfKey[key] = slot
            if pinned { pinnedBytes += entry.cost } else { link(slot) }
        }

        /// Drops the entry in `slot` and frees the slot. O(1) amortised.
        mutating func remove(_ slot: Int) {
            if slots[slot].isLinked { unlink(slot) } else { pinnedBytes -= slots[slot].cost }
            slotOfKey[slots[slot].key] = nil
            slots[slot] = Slot(key: CacheKey([]), sequence: 0, value: [], cost: 0)
            freeSlots.append(slot)
        }

        /// Replaces the value and sequence of the entry in `slot`, keeping its place. O(1).
        mutating func replace(_ slot: Int, sequence: UInt64, value: [UInt8]) {
            let cost = RowCache.cost(key: slots[slot].key.bytes, value: value)
            let change = cost - slots[slot].cost
            if slots[slot].isLinked { unpinnedBytes += change } else { pinnedBytes += change }
            slots[slot].sequence = sequence
            slots[slot].value = value
            slots[slot].cost = cost
        }

        /// Drops the entry in `slot` if it is unpinned and costs more than the whole budget,
        /// rather than evicting every other entry first. O(1).
        mutating func dropIfOversized(_ slot: Int, budget: Int) {
            guard slots[slot].isLinked, slots[slot].cost > budget, !isPinnedBySource(slots[slot].key) else { return }
            remove(slot)
            evictions += 1
        }

        /// Evicts the least recently used unpinned entries until their bytes fit `budget`.
        /// O(1) per entry evicted.
        mutating func evict(budget: Int) {
            while unpinnedBytes > budget, oldest != Self.none {
                let victim = oldest
                if pinCounts[slots[victim].key] != nil {
                    // Impossible if the list holds exactly the unpinned entries; count the
                    // broken invariant for checkInvariants and keep the entry, as pinned.
                    pinnedEvictions += 1
                    unlink(victim)
                    pinnedBytes += slots[victim].cost
                    continue
                }
                if isPinnedBySource(slots[victim].key) {
                    hold(victim, budget: budget)
                    continue
                }
                remove(victim)
                evictions += 1
            }
        }

        /// Adds 1 to the pin count of `key`; the first pin takes its entry off the list. O(1).
        mutating func pin(_ key: CacheKey) {
            // One hash of the key for the count; a second only for a first pin.
            var count = 0
            pinCounts[key, default: 0].increment(to: &count)
            if count == 1, let slot = slotOfKey[key], slots[slot].isLinked {
                unlink(slot)
                pinnedBytes += slots[slot].cost
            }
        }

        /// Removes 1 from the pin count of `key`, which must be pinned; the last unpin makes
        /// its entry the newest unpinned one, or drops it if it is over budget by itself. O(1).
        /// Returns false, changing nothing, if `key` is not pinned.
        @discardableResult
        mutating func unpin(_ key: CacheKey, budget: Int) -> Bool {
            guard let index = pinCounts.index(forKey: key) else { return false }
            if pinCounts.values[index] > 1 {
                pinCounts.values[index] -= 1
                return true
            }
            pinCounts.remove(at: index)
            guard let slot = slotOfKey[key], !slots[slot].isLinked, !slots[slot].isHeld else { return true }
            pinnedBytes -= slots[slot].cost
            link(slot)
            dropIfOversized(slot, budget: budget)
            return true
        }
    }
}

extension Int {
    /// Adds 1 and reports the new value: one dictionary access for both.
    fileprivate mutating func increment(to result: inout Int) {
        self += 1
        result = self
    }
}

/// A row-cache key with its hash computed once, by a fast word-at-a-time mix: a lookup and a
/// pin hash the key bytes once, not once per table (row keys are a prefix and a reference the
/// store chose, so a non-cryptographic hash is enough here).
struct CacheKey: Hashable {
    let bytes: [UInt8]
    let hash: Int

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
        self.hash = bytes.withUnsafeBytes { raw in
            var h: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(raw.count)
            var offset = 0
            while offset + 8 <= raw.count {
                h = (h ^ raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) &* 0xBF58_476D_1CE4_E5B9
                h ^= h >> 31
                offset += 8
            }
            var tail: UInt64 = 0
            var shift: UInt64 = 0
            while offset < raw.count {
                tail |= UInt64(raw[offset]) << shift
                shift += 8
                offset += 1
            }
            h = (h ^ tail) &* 0x94D0_49BB_1331_11EB
            return Int(bitPattern: UInt(truncatingIfNeeded: h ^ (h >> 29)))
        }
    }

    static func == (a: CacheKey, b: CacheKey) -> Bool { a.hash == b.hash && a.bytes == b.bytes }
    func hash(into hasher: inout Hasher) { hasher.combine(hash) }
    /// The key's hash mixed with the table's seed (``seededHash(_:seed:)``), instead of a
    /// `Hasher` run per table operation: an insert looks its key up in two or three tables.
    func _rawHashValue(seed: Int) -> Int { seededHash(hash, seed: seed) }
}

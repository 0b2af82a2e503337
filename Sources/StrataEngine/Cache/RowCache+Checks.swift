import Synchronization

extension RowCache {
    /// Checks the cache's internal consistency and throws ``StoreError/Code/corruption``
    /// naming the first violation. O(entries + pinned keys).
    ///
    /// Checked: every pin count is at least 1 (a balanced key is removed), no pinned entry was
    /// ever evicted (`pinnedEvictions` is 0), the byte totals equal the sums of entry costs,
    /// unpinned bytes fit the budget, and the recency list holds exactly the unpinned entries,
    /// correctly linked both ways.
    func checkInvariants() throws(StoreError) {
        let budget = budgetBytes
        try state.withLock { (state: inout State) throws(StoreError) in
            try state.check(budget: budget)
        }
    }

    /// The number of times eviction met a pinned entry (and kept it); always 0 unless the
    /// cache is broken. O(1).
    var pinnedEvictions: Int {
        state.withLock { $0.pinnedEvictions }
    }

    static func unbalanced(_ key: [UInt8], count: Int, times: Int) -> StoreError {
        let pinned = count == 0 ? "is not pinned" : "is pinned \(count) time(s)"
        return StoreError(
            .invalidArgument,
            "row cache: cannot unpin key \(describe(key)) \(times) time(s): it \(pinned); "
                + "unregister (unpin) calls must balance register (pin) calls")
    }

    /// `key` as quoted text if it is printable ASCII, otherwise as hex; long keys are cut at 64
    /// bytes. O(key length).
    static func describe(_ key: [UInt8]) -> String {
        let shown = key.prefix(64)
        let more = key.count > shown.count ? "… (\(key.count) bytes)" : ""
        if !shown.isEmpty, shown.allSatisfy({ (0x20...0x7E).contains($0) && $0 != 0x22 }) {
            return "\"" + String(decoding: shown, as: UTF8.self) + "\"" + more
        }
        let hex = shown.map { byte in
            let digits = String(byte, radix: 16)
            return byte < 16 ? "0" + digits : digits
        }
        return "0x" + hex.joined() + more
    }
}


extension RowCache.State {
    /// Throws the first violated invariant; see ``RowCache/checkInvariants()``.
    func check(budget: Int) throws(StoreError) {
        func violation(_ message: String) -> StoreError {
            StoreError(.corruption, "row cache invariant violated: \(message)")
        }
        for (key, count) in pinCounts where count < 1 {
            throw violation("key \(RowCache.describe(key.bytes)) has pin count \(count)")
        }
        guard pinnedEvictions == 0 else {
            throw violation("eviction met \(pinnedEvictions) pinned entries")
        }
        guard slots.count == slotOfKey.count + freeSlots.count,
            Set(freeSlots).count == freeSlots.count
        else {
            throw violation(
                "\(slots.count) slots but \(slotOfKey.count) entries and \(freeSlots.count) free")
        }
        let free = Set(freeSlots)
        var pinned = 0, unpinned = 0, linked = 0
        for (key, slot) in slotOfKey {
            guard slots.indices.contains(slot), !free.contains(slot), slots[slot].key == key else {
                throw violation("key \(RowCache.describe(key.bytes)) maps to bad slot \(slot)")
            }
            let entry = slots[slot]
            guard entry.cost == RowCache.cost(key: entry.key.bytes, value: entry.value) else {
                throw violation("key \(RowCache.describe(key.bytes)) has cost \(entry.cost)")
            }
            let isPinned = pinCounts[key] != nil || entry.isHeld
            guard entry.isLinked != isPinned else {
                let what = isPinned ? "pinned entry is" : "unpinned entry is not"
                throw violation("\(what) in the recency list: key \(RowCache.describe(key.bytes))")
            }
            if isPinned {
                pinned += entry.cost
            } else {
                unpinned += entry.cost
                linked += 1
            }
        }
        guard pinned == pinnedBytes, unpinned == unpinnedBytes else {
            throw violation(
                "bytes pinned \(pinnedBytes) unpinned \(unpinnedBytes), entries sum to "
                    + "\(pinned) and \(unpinned)")
        }
        guard unpinnedBytes <= budget else {
            throw violation("unpinned bytes \(unpinnedBytes) exceed the budget \(budget)")
        }
        var walked = 0, previous = Self.none, cursor = newest
        while cursor != Self.none {
            guard walked < linked, slots.indices.contains(cursor), slots[cursor].isLinked,
                slots[cursor].newer == previous
            else {
                throw violation("recency list broken at slot \(cursor) after \(walked) entries")
            }
            walked += 1
            previous = cursor
            cursor = slots[cursor].older
        }
        guard previous == oldest, walked == linked, linkedCount == linked else {
            throw violation(
                "recency list holds \(walked) entries (count \(linkedCount)), expected \(linked)")
        }
    }
}

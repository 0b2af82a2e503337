import ObjectGraph
import StrataEngine
import StrataSync

/// The register counts of one store's rows: what `managedObjectContextDidRegisterObjects(with:)`
/// and its unregister counterpart add and remove, kept by the store and read by the engine's
/// row cache as a ``RowPinSource``. A row whose count is above zero is never evicted
/// (an invariant of the engine's design); a register or unregister costs one lookup here and nothing
/// in the engine.
///
/// Rows are named by their reference alone: references are allocated store-wide, never
/// reused and never shared between hierarchies ([KEY-3]), so a register or unregister needs
/// no entity or root name.
///
/// Thread safety: `counts` is protected by its own lock. The row cache calls ``isPinned(_:)``
/// with the cache's lock held; nothing here calls the engine, so the order is always cache,
/// then counts.
final class RowPins: RowPinSource {
    /// One row, by reference.
    struct Row: Hashable {
        let reference: Int64
    }

    /// Every row whose count is above zero, with its count.
    let counts = Locked(PinCounts())

    /// Adds 1 to the count of `row(i)` for each `i` in `0..<count` that has a row (a row
    /// given twice gets 2), under one lock and with no array of rows. O(count).
    func register(_ count: Int, _ row: (Int) -> Row?) {
        counts.withLock { counts in
            counts.reserveCapacity(counts.count + count)
            for index in 0..<count {
                if let row = row(index) { counts.increment(row.reference) }
            }
        }
    }

    /// Removes 1 from the count of `row(i)` for each `i` in `0..<count` that has a row, and
    /// returns the `i` whose count was already 0 (an unbalanced unregister; their counts are
    /// left at 0). O(count).
    func unregister(_ count: Int, _ row: (Int) -> Row?) -> [Int] {
        counts.withLock { counts in
            var failed: [Int] = []
            for index in 0..<count {
                if let row = row(index), !counts.decrement(row.reference) { failed.append(index) }
            }
            return failed
        }
    }

    /// Whether `key` is the row key ([KEY-1]) of a row whose count is above zero. O(key
    /// length).
    func isPinned(_ key: [UInt8]) -> Bool {
        guard let row = Self.row(ofKey: key) else { return false }
        return counts.withLock { $0.count(of: row.reference) > 0 }
    }

    /// How many rows have a count above zero.
    var pinnedKeyCount: Int { counts.withLock { $0.count } }

    /// The row a row key names, or `nil` for any other key: `rowTag root 0x00 ref(8)`.
    static func row(ofKey key: [UInt8]) -> Row? {
        let end = key.count - 9
        guard end >= 1, key[0] == KeyLayout.rowTag, key[end] == 0x00,
            let reference = KeyLayout.reference(fromRowKey: key)
        else { return nil }
        return Row(reference: reference)
    }
}

/// Register counts by row reference: an open-addressing table (linear probing from a seeded
/// mix of the reference, at most half full; a removed entry's successors shift back, so
/// there are no tombstones). A register or unregister is a mix and a probe or two, where a
/// dictionary runs its hasher and moves its storage around.
///
/// Thread safety: a value, kept in ``RowPins/counts``'s lock.
struct PinCounts {
    /// One slot: a reference and its count; a count of 0 marks an empty slot.
    private struct Entry {
        var key: Int64 = 0
        var count = 0
    }
    private var entries: [Entry] = []
    /// Rows with a count above zero.
    private(set) var count = 0
    private var mask = -1
    /// `64 - log2(capacity)`.
    private var shift = 64
    /// The table keeps this many slots however few rows are left (256 KiB): fetches of up
    /// to some thousand rows come and go without rebuilding it.
    private static let retainedCapacity = 16_384

    /// Whether no row is pinned.
    var isEmpty: Bool { count == 0 }
    /// Slots in the table.
    var capacity: Int { entries.count }

    /// The first slot of `key`'s probe: the top bits of the reference mixed with a
    /// per-process seed (``seededHash(_:seed:)``), so that references in sequence spread over
    /// the table and references chosen from outside (object IDs from URIs, registered as
    /// faults) cannot be made to collide.
    private static func home(of key: Int64, shift: Int) -> Int {
        Int(truncatingIfNeeded: UInt64(bitPattern: Int64(seededHash(Int(truncatingIfNeeded: key), seed: seed))) >> UInt64(shift))
    }
    private static let seed = Int.random(in: .min ... .max)

    /// The slot of `key`, or `nil`.
    private func slot(of key: Int64) -> Int? {
        guard count > 0 else { return nil }
        return entries.withUnsafeBufferPointer { entries in
            var index = Self.home(of: key, shift: shift)
            while entries[index].count != 0 {
                if entries[index].key == key { return index }
                index = (index + 1) & mask
            }
            return nil
        }
    }

    /// The count of `key` (0 when absent).
    func count(of key: Int64) -> Int { slot(of: key).map { entries[$0].count } ?? 0 }

    /// Makes room for `count` rows without growing on the way.
    mutating func reserveCapacity(_ count: Int) {
        if count * 2 > entries.count { resize(to: count) }
    }

    /// Adds 1 to the count of `key`.
    mutating func increment(_ key: Int64) {
        if (count + 1) * 2 > entries.count { resize(to: count + 1) }
        let (mask, shift) = (self.mask, self.shift)
        let added = entries.withUnsafeMutableBufferPointer { entries in
            var index = Self.home(of: key, shift: shift)
            while entries[index].count != 0 {
                if entries[index].key == key {
                    entries[index].count += 1
                    return false
                }
                index = (index + 1) & mask
            }
            entries[index] = Entry(key: key, count: 1)
            return true
        }
        if added { count += 1 }
    }

    /// Removes 1 from the count of `key`, removing it at 0; `false`, changing nothing, if
    /// its count is 0.
    mutating func decrement(_ key: Int64) -> Bool {
        guard let found = slot(of: key) else { return false }
        let (mask, shift) = (self.mask, self.shift)
        let removed = entries.withUnsafeMutableBufferPointer { entries in
            if entries[found].count > 1 {
                entries[found].count -= 1
                return false
            }
            // Backward shift: each later entry of the run whose probe would pass the hole
            // moves into it, so lookups never meet a gap inside their run.
            var hole = found
            var index = (found + 1) & mask
            while entries[index].count != 0 {
                let wanted = Self.home(of: entries[index].key, shift: shift)
                // The entry stays when its home lies cyclically in (hole, index].
                let stays = hole <= index ? (wanted > hole && wanted <= index) : (wanted > hole || wanted <= index)
                if !stays {
                    entries[hole] = entries[index]
                    hole = index
                }
                index = (index + 1) & mask
            }
            entries[hole].count = 0
            return true
        }
        guard removed else { return true }
        count -= 1
        // A table that held a very large fetch's rows shrinks once they are gone.
        if entries.count > Self.retainedCapacity && count * 8 < entries.count { resize(to: max(count, Self.retainedCapacity / 2)) }
        return true
    }

    /// Rebuilds the table at the smallest power of two (at least 16) at most half full with
    /// `minimumCount` rows.
    private mutating func resize(to minimumCount: Int) {
        var capacity = 16
        while capacity < minimumCount * 2 { capacity *= 2 }
        let old = entries
        entries = Array(repeating: Entry(), count: capacity)
        mask = capacity - 1
        shift = 64 - capacity.trailingZeroBitCount
        let (mask, shift) = (self.mask, self.shift)
        entries.withUnsafeMutableBufferPointer { entries in
            for entry in old where entry.count != 0 {
                var slot = Self.home(of: entry.key, shift: shift)
                while entries[slot].count != 0 { slot = (slot + 1) & mask }
                entries[slot] = entry
            }
        }
    }
}

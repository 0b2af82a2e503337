import StrataEngine

/// The distinct ASCII strings a scan has met, kept as their bytes, for a `distinct` dictionary
/// fetch of one string attribute: a row whose value was met before is dropped on the engine's
/// bytes, with no `String` made, hashed or released for it. ASCII only: two ASCII strings are
/// equal exactly when their bytes are (ASCII is its own normal form), where other text compares
/// by canonical equivalence and is left to the fetch's own distinct pass.
///
/// An open-addressing table (linear probing, at most half full) of positions in one buffer
/// holding every distinct value's bytes; hashes are `Hasher`'s (seeded per process), so values
/// chosen to collide cannot be made to.
///
/// Thread safety: one scan's, on its thread.
struct DistinctASCII {
    /// Each distinct value: its hash and where its bytes are in ``bytes``.
    private struct Entry {
        var hash: Int
        var start: Int
        var count: Int
    }

    private var bytes: [UInt8] = []
    private var entries: [Entry] = []
    /// Per slot, the position in ``entries`` plus one; 0 for an empty slot. A power of two.
    private var slots: [Int32] = Array(repeating: 0, count: 64)

    /// Records `value` (ASCII bytes) and returns whether it was not met before.
    mutating func insert(_ value: UnsafeRawBufferPointer) -> Bool {
        var hasher = Hasher()
        hasher.combine(bytes: value)
        let hash = hasher.finalize()
        let mask = slots.count - 1
        var index = hash & mask
        while slots[index] != 0 {
            let entry = entries[Int(slots[index]) - 1]
            if entry.hash == hash, entry.count == value.count,
                bytes.withUnsafeBytes({ UnsafeRawBufferPointer(rebasing: $0[entry.start..<(entry.start + entry.count)]).elementsEqualBytes(value) })
            {
                return false
            }
            index = (index + 1) & mask
        }
        entries.append(Entry(hash: hash, start: bytes.count, count: value.count))
        bytes.append(contentsOf: value)
        slots[index] = Int32(truncatingIfNeeded: entries.count)
        if entries.count * 2 > slots.count { grow() }
        return true
    }

    /// Doubles the table and places every entry again.
    private mutating func grow() {
        slots = Array(repeating: 0, count: slots.count * 2)
        let mask = slots.count - 1
        for (position, entry) in entries.enumerated() {
            var index = entry.hash & mask
            while slots[index] != 0 { index = (index + 1) & mask }
            slots[index] = Int32(truncatingIfNeeded: position + 1)
        }
    }
}

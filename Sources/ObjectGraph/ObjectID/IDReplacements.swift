/// The permanent IDs that replace temporary ones (a save's, or ``ManagedObjectContext/obtainPermanentIDs(for:)``'s),
/// for rewriting the relationship values that hold the temporary ones.
///
/// A save rewrites every pending relationship value of every inserted object, one lookup per
/// destination (a to-many of a hundred new members is a hundred lookups). A temporary ID's
/// home is its own object with its hash computed at creation, so a lookup here is a test that
/// the ID is temporary (a permanent ID never is a key: it answers at once), a probe by that
/// hash, and a comparison of homes by identity; only two distinct homes of one temporary ID
/// (an ID decoded again from its URI, say) are compared field by field, as a dictionary would.
///
/// Thread safety: a value, used by one context at a time.
struct IDReplacements {
    /// The temporary IDs and their replacements, in the order given.
    private var pairs: [(old: ManagedObjectID, new: ManagedObjectID)] = []
    /// Per slot, the position in ``pairs`` plus one; 0 for an empty slot. A power of two at
    /// least twice the pairs.
    private var slots: [Int32] = []

    /// The temporary keys of `map` (others are never looked up) with their images.
    init(_ map: [ManagedObjectID: ManagedObjectID]) {
        pairs.reserveCapacity(map.count)
        for (old, new) in map where old.isTemporaryID { pairs.append((old, new)) }
        var size = 8
        while size < pairs.count * 2 { size <<= 1 }
        slots = Array(repeating: 0, count: size)
        let mask = size - 1
        for position in pairs.indices {
            var slot = pairs[position].old.fieldHash & mask
            while slots[slot] != 0 { slot = (slot + 1) & mask }
            slots[slot] = Int32(truncatingIfNeeded: position + 1)
        }
    }

    /// Whether nothing is replaced.
    var isEmpty: Bool { pairs.isEmpty }

    /// The ID that replaces `id`, or `nil` when none does.
    @inline(__always)
    subscript(_ id: ManagedObjectID) -> ManagedObjectID? {
        guard !pairs.isEmpty, id.isTemporaryID else { return nil }
        return lookUp(id)
    }

    /// `id`'s image, or `id` itself when none replaces it.
    @inline(__always)
    func image(of id: ManagedObjectID) -> ManagedObjectID { self[id] ?? id }

    /// The probe of ``subscript(_:)`` for a temporary ID.
    private func lookUp(_ id: ManagedObjectID) -> ManagedObjectID? {
        let mask = slots.count - 1
        let home = id.home
        var slot = id.fieldHash & mask
        return slots.withUnsafeBufferPointer { slots in
            pairs.withUnsafeBufferPointer { pairs in
                while true {
                    let entry = Int(slots[slot])
                    guard entry != 0 else { return nil }
                    let pair = pairs[entry - 1]
                    if pair.old.home === home || pair.old == id { return pair.new }
                    slot = (slot + 1) & mask
                }
            }
        }
    }

    /// Whether any of `ids` is replaced.
    func replacesAny(of ids: [ManagedObjectID]) -> Bool {
        guard !pairs.isEmpty else { return false }
        return ids.contains { $0.isTemporaryID && lookUp($0) != nil }
    }
}

import StrataSync

/// A context's object registry: one entry per registered ID (uniquing), each with its object
/// unretained and whether the ID's row is registered with its store.
///
/// An open-addressing table (linear probing from a seeded mix of the ID's field hash,
/// tombstones for removed entries) whose objects know their slot
/// (``ManagedObject/registrySlot``): an object that goes away clears its own slot with no
/// hashing and no probe, where a dictionary would hash its ID and search for it. The table
/// keeps that slot up to date as entries move (only when it grows or drops its tombstones).
///
/// A class, not a value: the context's calls reach the table without copying (and retaining)
/// it.
///
/// Thread safety: owned by its context's thread, as the context is.
final class ObjectRegistry {
    /// One slot, 32 bytes and no reference to count: empty (no object, tag 0), a tombstone
    /// (no object, ``tombstoneBit``) or an entry: its object, unretained; its ID's home
    /// (compared by address, never read) and reference; and a tag holding the ID's field hash
    /// (``hashBits``) and whether the row is registered with its store. The entry's ID is its
    /// object's ``ManagedObject/objectID``, which does not change while the object is
    /// registered (a save's new IDs re-register their objects), so the home stays alive.
    private struct Slot {
        var object: UnsafeMutableRawPointer?
        var home: UnsafeMutableRawPointer?
        var reference: Int64 = 0
        var tag: UInt64 = 0
    }
    private static let inStoreBit: UInt64 = 1
    private static let tombstoneBit: UInt64 = 2
    private static let hashBits: UInt64 = ~3

    @exclusivity(unchecked) private var slots: [Slot] = []
    /// Entries in the table.
    @exclusivity(unchecked) private(set) var count = 0
    /// Slots in the table (entries, tombstones and empty slots).
    var capacity: Int { slots.count }
    /// Removed entries whose slots are not reused yet: probes pass over them.
    @exclusivity(unchecked) private var tombstones = 0
    /// `slots.count - 1`; `slots.count` is a power of two (or zero).
    @exclusivity(unchecked) private var mask = -1
    /// `64 - log2(slots.count)`: the shift that takes a mixed hash's top bits.
    @exclusivity(unchecked) private var shift = 64
    /// Counts every change to the table, so that a ``Probe`` taken before one is not used.
    @exclusivity(unchecked) private var version = 0

    /// Where an ID is in the table, or where it would go: one probe serving a lookup and the
    /// insert that follows a miss (``insert(_:for:at:)``), valid until the table changes.
    struct Probe {
        /// The ID's slot, if it has an entry.
        var found: Int?
        /// The slot an entry for the ID would take: the first tombstone or empty slot of its
        /// probe (meaningless when ``found`` is set or the table has no slot).
        fileprivate var free: Int
        fileprivate var hash: UInt64
        fileprivate var version: Int
    }

    /// The tag bits of an ID's hash.
    private static func hashTag(_ id: ManagedObjectID) -> UInt64 { UInt64(bitPattern: Int64(id.fieldHash)) & hashBits }

    /// The first slot of a hash tag's probe: the top bits of the tag mixed with a per-process
    /// seed (``seededHash(_:seed:)``), so that references in sequence spread over the table
    /// and references chosen from outside (object IDs from URIs) cannot be made to collide.
    private func home(of hash: UInt64) -> Int {
        Int(truncatingIfNeeded: UInt64(bitPattern: Int64(seededHash(Int(truncatingIfNeeded: hash), seed: seed))) >> UInt64(shift))
    }
    /// The table's seed, drawn once per table: a field, not a `static let`, whose every read
    /// would pass through a once-guard (most of a probe's cost when the table grows).
    private let seed = Int.random(in: .min ... .max)

    /// The object at an entry's slot (alive: an entry never outlives its object).
    private static func object(_ pointer: UnsafeMutableRawPointer) -> ManagedObject {
        Unmanaged<ManagedObject>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Whether the entry in `slot` (whose object is at `pointer`) is `id`'s: one shared home
    /// and the references decide (a boxed home is one ID's own); else the IDs are compared.
    private static func matches(_ slot: Slot, _ pointer: UnsafeMutableRawPointer, _ id: ManagedObjectID) -> Bool {
        if slot.home == Unmanaged.passUnretained(id.home).toOpaque() { return slot.reference == id.reference }
        return object(pointer).objectID == id
    }

    /// The slot holding `id`, if it is registered.
    func slot(of id: ManagedObjectID) -> Int? {
        guard count > 0 else { return nil }
        let hash = Self.hashTag(id)
        var index = home(of: hash)
        while true {
            let slot = slots[index]
            if let pointer = slot.object {
                if slot.tag & Self.hashBits == hash && Self.matches(slot, pointer, id) { return index }
            } else if slot.tag & Self.tombstoneBit == 0 {
                return nil
            }
            index = (index + 1) & mask
        }
    }

    /// `id`'s slot, or where an entry for it would go.
    func probe(_ id: ManagedObjectID) -> Probe {
        let hash = Self.hashTag(id)
        guard !slots.isEmpty else { return Probe(found: nil, free: -1, hash: hash, version: version) }
        var index = home(of: hash)
        var free: Int? = nil
        while true {
            let slot = slots[index]
            if let pointer = slot.object {
                if slot.tag & Self.hashBits == hash && Self.matches(slot, pointer, id) {
                    return Probe(found: index, free: -1, hash: hash, version: version)
                }
            } else if slot.tag & Self.tombstoneBit != 0 {
                if free == nil { free = index }
            } else {
                return Probe(found: nil, free: free ?? index, hash: hash, version: version)
            }
            index = (index + 1) & mask
        }
    }

    /// Registers `registration` for `id`, which `probe` (taken for `id`) found absent, in the
    /// slot the probe chose, when the table has not changed since and has room: no second
    /// probe. Otherwise it registers as ``update(_:for:)`` does.
    func insert(_ registration: Registration, for id: ManagedObjectID, at probe: Probe) {
        guard probe.found == nil, probe.version == version, probe.free >= 0,
            (count + tombstones + 1) * 10 <= slots.count * 7
        else {
            update(registration, for: id)
            return
        }
        place(registration, for: id, at: probe)
    }

    /// Puts a new entry for `id` in the free slot `probe` (current, and for `id`) chose.
    private func place(_ registration: Registration, for id: ManagedObjectID, at probe: Probe) {
        let target = probe.free
        if slots[target].tag & Self.tombstoneBit != 0 { tombstones -= 1 }
        slots[target] = Self.entry(registration, for: id, hash: probe.hash)
        registration.object.registrySlot = Int32(truncatingIfNeeded: target)
        count += 1
        version &+= 1
    }

    /// The slot of `registration` for `id`. The slot keeps the ID's home (equal IDs may have
    /// distinct homes): it stays alive with the object.
    private static func entry(_ registration: Registration, for id: ManagedObjectID, hash: UInt64) -> Slot {
        Slot(
            object: registration.pointer, home: Unmanaged.passUnretained(id.home).toOpaque(), reference: id.reference,
            tag: hash | (registration.inStore ? inStoreBit : 0))
    }

    /// Whether `object` is registered here: its slot holds it. No hashing, no probe.
    func holds(_ object: ManagedObject) -> Bool {
        registration(at: Int(object.registrySlot))?.pointer == Unmanaged.passUnretained(object).toOpaque()
    }

    /// The registration of `id`, if any.
    subscript(id: ManagedObjectID) -> Registration? {
        slot(of: id).flatMap { registration(at: $0) }
    }

    /// The registration at a slot that holds an entry; `nil` for any other slot. Reads no
    /// object: safe with the slot of an object whose `deinit` is running.
    func registration(at index: Int) -> Registration? {
        guard index >= 0, index < slots.count, let pointer = slots[index].object else { return nil }
        return Registration(pointer: pointer, inStore: slots[index].tag & Self.inStoreBit != 0)
    }

    /// Registers `registration` for `id` (its object's ID), replacing (and returning) an
    /// entry it had; the object learns its slot.
    @discardableResult
    func update(_ registration: Registration, for id: ManagedObjectID) -> Registration? {
        if (count + tombstones + 1) * 10 > slots.count * 7 { grow(minimumCount: count + 1) }
        // One probe: `id`'s entry, or the first tombstone or empty slot on its path.
        let probe = self.probe(id)
        guard let index = probe.found else {
            place(registration, for: id, at: probe)
            return nil
        }
        version &+= 1
        let replaced = self.registration(at: index)
        slots[index] = Self.entry(registration, for: id, hash: probe.hash)
        registration.object.registrySlot = Int32(truncatingIfNeeded: index)
        return replaced
    }

    /// Removes the entry at `index` (which holds one) and returns its registration. No probe
    /// and no object read: the slot becomes a tombstone.
    @discardableResult
    func remove(at index: Int) -> Registration {
        guard let registration = registration(at: index) else { preconditionFailure("no registry entry at slot \(index)") }
        version &+= 1
        slots[index] = Slot(tag: Self.tombstoneBit)
        count -= 1
        tombstones += 1
        return registration
    }

    /// Removes `id`'s entry, if any, and returns its registration.
    @discardableResult
    func removeValue(forKey id: ManagedObjectID) -> Registration? {
        slot(of: id).map { remove(at: $0) }
    }

    /// Marks the entry at `index` as registered with its store.
    func setInStore(at index: Int) {
        version &+= 1
        if slots[index].object != nil { slots[index].tag |= Self.inStoreBit }
    }

    /// Makes room for `count` entries in all without growing on the way.
    func reserveCapacity(_ count: Int) {
        if (count + tombstones) * 10 > slots.count * 7 { grow(minimumCount: count) }
    }

    /// Forgets every entry.
    func removeAll(keepingCapacity: Bool = false) {
        version &+= 1
        if keepingCapacity && !slots.isEmpty {
            for index in slots.indices { slots[index] = Slot() }
        } else {
            slots = []
            mask = -1
            shift = 64
        }
        count = 0
        tombstones = 0
    }

    /// Every entry, in slot order.
    var entries: [(id: ManagedObjectID, registration: Registration)] {
        var entries: [(id: ManagedObjectID, registration: Registration)] = []
        entries.reserveCapacity(count)
        for index in slots.indices {
            if let registration = registration(at: index) { entries.append((registration.object.objectID, registration)) }
        }
        return entries
    }

    /// Puts an entry known to be absent in the first free slot of its probe.
    private func insertNew(_ entry: Slot) {
        guard let pointer = entry.object else { return }
        var index = home(of: entry.tag & Self.hashBits)
        while slots[index].object != nil { index = (index + 1) & mask }
        if slots[index].tag & Self.tombstoneBit != 0 { tombstones -= 1 }
        slots[index] = entry
        Self.object(pointer).registrySlot = Int32(truncatingIfNeeded: index)
        count += 1
    }

    /// Rebuilds the table with room for `minimumCount` entries below the load limit and no
    /// tombstones; every object learns its new slot.
    private func grow(minimumCount: Int) {
        version &+= 1
        var capacity = max(16, slots.count)
        while minimumCount * 10 > capacity * 7 { capacity *= 2 }
        // At the same size, a rebuild pays when tombstones are most of the load; else double.
        if capacity == slots.count && count * 20 > capacity * 7 { capacity *= 2 }
        let old = slots
        slots = Array(repeating: Slot(), count: capacity)
        mask = capacity - 1
        shift = 64 - capacity.trailingZeroBitCount
        count = 0
        tombstones = 0
        for slot in old {
            if slot.object != nil { insertNew(slot) }
        }
    }
}

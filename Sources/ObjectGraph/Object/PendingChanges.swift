import Foundation

/// The destinations of a to-many relationship while it is being changed: an ordered list
/// with constant-time membership, appending and (for unordered relationships) removal, so
/// that building a relationship of n objects one at a time costs O(n), not O(n²).
///
/// Short lists (most relationships) are searched linearly; a position table is built only
/// for a list past ``indexedCount`` that has been searched ``searchesBeforeIndexing`` times
/// since it was made (a few members added to or removed from a long list hash nothing; a
/// list built or emptied one member at a time gets its table early), and a list whose IDs
/// were replaced (a save's temporary IDs, just before its changes are committed) builds none
/// until it is searched again that often.
///
/// A list made from the committed members (``init(base:ordered:baseVersion:)``) also keeps
/// what changed since, as a ``MemberJournal``, while that stays short: a store writes a
/// relationship's keys from it without comparing the committed and current member sets.
struct ObjectIDList: Equatable {
    private(set) var ids: [ManagedObjectID] = []
    /// Position of each ID, kept only while ``indexed``.
    private var positions: [ManagedObjectID: Int] = [:]
    /// The journal, boxed (most lists have none, and a slot of pending changes stays small),
    /// copied before a change when another list shares it.
    private var journalBox: JournalBox?
    /// Linear searches made since the list was made or last dropped its table (counted up to
    /// ``searchesBeforeIndexing``).
    private var searches: Int32 = 0
    /// Whether ``positions`` holds every ID's position.
    private var indexed = false
    /// Whether removal must keep the order (ordered relationships).
    let ordered: Bool

    /// The members added and removed since the list was made from its base, or `nil` when
    /// the base is unknown (a whole value was set) or the journal grew past
    /// ``MemberJournal/limit``.
    var journal: MemberJournal? { journalBox?.journal }

    /// A list's ``MemberJournal``, by reference.
    private final class JournalBox {
        var journal: MemberJournal
        init(_ journal: MemberJournal) { self.journal = journal }
    }

    /// The length above which membership can go through a position table.
    static let indexedCount = 16
    /// The linear searches a long list takes before it builds its position table: about
    /// what building the table costs (hashing every member, against comparing them).
    static let searchesBeforeIndexing: Int32 = 16

    init(_ ids: [ManagedObjectID], ordered: Bool) {
        self.ordered = ordered
        self.ids.reserveCapacity(ids.count)
        for id in ids { append(id) }
    }

    /// A list of IDs known to be distinct (a one-to-one mapping of another list's IDs); its
    /// position table is built when it is searched often enough.
    init(distinct ids: [ManagedObjectID], ordered: Bool) {
        self.ordered = ordered
        self.ids = ids
    }

    /// The committed members `ids` (distinct, as a store gives them) of a row at version
    /// `baseVersion`, about to change: the list journals its changes from here.
    init(base ids: [ManagedObjectID], ordered: Bool, baseVersion: UInt64) {
        self.ordered = ordered
        self.ids = ids
        journalBox = JournalBox(MemberJournal(baseVersion: baseVersion))
    }

    /// Replaces each member (and journalled member) that `map` replaces: the storage is
    /// rewritten where this list holds it alone (a save's lists are mostly shared with the
    /// changes the store was given, and copied once), and a position table it had is dropped
    /// (built again when the list is searched often enough).
    mutating func replace(_ map: IDReplacements) {
        var replacedAny = false
        for index in ids.indices {
            if let new = map[ids[index]] {
                ids[index] = new
                replacedAny = true
            }
        }
        if replacedAny, indexed {
            positions = [:]
            indexed = false
            searches = 0
        }
        guard let box = journalBox, map.replacesAny(of: box.journal.added) || map.replacesAny(of: box.journal.removed) else { return }
        var mapped = box.journal
        mapped.added = mapped.added.map { map.image(of: $0) }
        mapped.removed = mapped.removed.map { map.image(of: $0) }
        journalBox = JournalBox(mapped)
    }

    static func == (a: ObjectIDList, b: ObjectIDList) -> Bool { a.ordered == b.ordered && a.ids == b.ids }

    private mutating func position(of id: ManagedObjectID) -> Int? {
        if indexed { return positions[id] }
        if searches < Self.searchesBeforeIndexing { searches += 1 }
        return Self.linearPosition(of: id, in: ids)
    }

    /// Where `id` is in `ids`, searched in place: an ID of the same shared home (the same
    /// entity and store, as nearly every member of a list is) is compared by its reference
    /// alone, and no element is copied out (which retained and released its home each time).
    @inline(__always)
    static func linearPosition(of id: ManagedObjectID, in ids: [ManagedObjectID]) -> Int? {
        let home = id.home, reference = id.reference
        return ids.withUnsafeBufferPointer { buffer -> Int? in
            for index in buffer.indices {
                if buffer[index].home === home {
                    if buffer[index].reference == reference { return index }
                } else if buffer[index] == id {
                    return index
                }
            }
            return nil
        }
    }

    /// Builds the position table of a long list that has none, once it has been searched
    /// often enough.
    private mutating func index() {
        guard !indexed, ids.count > Self.indexedCount, searches >= Self.searchesBeforeIndexing else { return }
        positions.reserveCapacity(ids.count * 2)
        for (index, member) in ids.enumerated() { positions[member] = index }
        indexed = true
    }

    func contains(_ id: ManagedObjectID) -> Bool { indexed ? positions[id] != nil : Self.linearPosition(of: id, in: ids) != nil }

    /// Appends `id` unless present; returns whether it was added.
    @discardableResult
    mutating func append(_ id: ManagedObjectID) -> Bool {
        index()
        guard position(of: id) == nil else { return false }
        ids.append(id)
        if indexed {
            positions[id] = ids.count - 1
        } else {
            index()
        }
        note(id, added: true)
        return true
    }

    /// Removes `id` if present; returns whether it was removed. Unordered lists move
    /// their last element into the gap.
    @discardableResult
    mutating func remove(_ id: ManagedObjectID) -> Bool {
        index()
        guard let index = indexed ? positions.removeValue(forKey: id) : position(of: id) else { return false }
        if ordered {
            ids.remove(at: index)
            if indexed { for position in index..<ids.count { positions[ids[position]] = position } }
        } else {
            let last = ids.removeLast()
            if index < ids.count {
                ids[index] = last
                if indexed { positions[last] = index }
            }
        }
        if indexed && ids.count <= Self.indexedCount {
            positions = [:]
            indexed = false
            searches = 0
        }
        note(id, added: false)
        return true
    }

    /// Records a change in the journal, dropping the journal once it is past its limit.
    private mutating func note(_ id: ManagedObjectID, added: Bool) {
        guard journalBox != nil else { return }
        if !isKnownUniquelyReferenced(&journalBox), let shared = journalBox { journalBox = JournalBox(shared.journal) }
        guard let box = journalBox else { return }
        box.journal.record(id, added: added)
        if box.journal.added.count + box.journal.removed.count > MemberJournal.limit { journalBox = nil }
    }
}

/// What changed in a to-many relationship since its members were read from a row
/// (``ObjectIDList/init(base:ordered:baseVersion:)``): the members added and those removed,
/// each at most once and never both, so that the members now are the base's plus `added`
/// less `removed`.
struct MemberJournal: Equatable {
    /// The version of the row the base members were read with (``ObjectSnapshot/version``).
    let baseVersion: UInt64
    /// Members not in the base that are in the list now.
    var added: [ManagedObjectID] = []
    /// Members of the base that are not in the list now.
    var removed: [ManagedObjectID] = []
    /// The changes a journal keeps; past this, a store compares the member sets instead
    /// (the journal's own searches would cost more).
    static let limit = 64

    init(baseVersion: UInt64) { self.baseVersion = baseVersion }

    /// Records that `id` was added to (`added`) or removed from the list; an add cancels an
    /// earlier removal of the same member, and the other way round.
    mutating func record(_ id: ManagedObjectID, added isAdded: Bool) {
        if isAdded {
            if let index = ObjectIDList.linearPosition(of: id, in: removed) { removed.remove(at: index) } else { added.append(id) }
        } else {
            if let index = ObjectIDList.linearPosition(of: id, in: added) { added.remove(at: index) } else { removed.append(id) }
        }
    }
}

/// Changes to an unordered to-many relationship whose committed members were never
/// loaded: the members added and those removed since the row at `baseVersion`, each at most
/// once and never both. Inverse maintenance records them (an order deleted leaves each of its
/// products without it) so that a change of one member costs the same whatever the number of
/// members; the members are loaded, and these changes applied to them, when anything reads
/// the relationship or the object's pending values (``ManagedObject/changes``).
struct UnloadedMembers {
    /// The version of the row the object had loaded when the first change was recorded.
    let baseVersion: UInt64
    /// Members added (not in the committed members, unless the graph was inconsistent).
    private(set) var added: ObjectIDList
    /// Members removed (in the committed members, unless the graph was inconsistent).
    private(set) var removed: ObjectIDList

    init(baseVersion: UInt64) {
        self.baseVersion = baseVersion
        added = ObjectIDList([], ordered: false)
        removed = ObjectIDList([], ordered: false)
    }

    /// Records that `id` was added (`adding`) or removed; an add cancels an earlier removal
    /// of the same member, and the other way round. Constant time, amortised (the lists
    /// build position tables once long).
    mutating func record(_ id: ManagedObjectID, adding: Bool) {
        if adding {
            if !removed.remove(id) { added.append(id) }
        } else {
            if !added.remove(id) { removed.append(id) }
        }
    }

    /// Replaces each ID that `map` replaces (temporary to permanent), in place.
    mutating func replace(_ map: IDReplacements) {
        added.replace(map)
        removed.replace(map)
    }
}

/// An object's uncommitted values, one slot per property ordinal (allocated at the first
/// change): attribute and to-one values as given, to-many relationships as
/// ``ObjectIDList``s that change one member at a time, or as ``UnloadedMembers`` when the
/// committed members were never loaded. The committed value of a changed slot stays in the
/// object's ``ObjectSnapshot``, so old and new sit side by side.
///
/// Reading a value (``subscript(_:)``, ``forEachChange(_:)``, ``all(in:)``) requires that no
/// slot holds unloaded members: ``ManagedObject/changes`` loads them before it hands the
/// changes out, and the few readers that can do without values go through
/// ``ManagedObject``'s own accessors.
struct PendingChanges {
    private enum Slot {
        case value(PropertyValue)
        case members(ObjectIDList)
        case unloaded(UnloadedBox)

        var value: PropertyValue {
            switch self {
            case .value(let value): return value
            case .members(let list): return .relationship(.toMany(list.ids))
            case .unloaded:
                // ManagedObject.changes loads unloaded members before handing the changes out.
                preconditionFailure("A to-many relationship's unloaded member changes were read as a value before being loaded")
            }
        }
    }

    /// ``UnloadedMembers`` by reference, so that a slot stays as small as the other kinds
    /// (every object's table of slots is that much smaller); copied before a change when
    /// another table shares it.
    private final class UnloadedBox {
        var members: UnloadedMembers
        init(_ members: UnloadedMembers) { self.members = members }
    }

    private var slots: [Slot?] = []
    /// How many slots hold a change.
    private(set) var count = 0
    /// How many slots hold ``UnloadedMembers``.
    private(set) var unloadedCount = 0

    var isEmpty: Bool { count == 0 }
    /// Whether a slot holds member changes whose committed members are not loaded.
    var hasUnloadedMembers: Bool { unloadedCount != 0 }

    /// The pending value of the property at `ordinal`, if it has one.
    subscript(ordinal: Int) -> PropertyValue? {
        guard ordinal < slots.count, let slot = slots[ordinal] else { return nil }
        return slot.value
    }

    /// Whether the property at `ordinal` has a pending value.
    func contains(_ ordinal: Int) -> Bool { ordinal < slots.count && slots[ordinal] != nil }

    /// Calls `body` with each pending value and its ordinal, in order (no array of ordinals
    /// made, no empty slot copied).
    func forEachChange(_ body: (_ ordinal: Int, _ value: PropertyValue) throws -> Void) rethrows {
        for ordinal in slots.indices {
            if case let slot? = slots[ordinal] { try body(ordinal, slot.value) }
        }
    }

    /// Every pending value, by property name.
    func all(in entity: EntityDescription) -> [String: PropertyValue] {
        var result: [String: PropertyValue] = [:]
        for ordinal in slots.indices { if let slot = slots[ordinal] { result[entity.properties[ordinal].name] = slot.value } }
        return result
    }

    /// Makes the slots for an entity of `count` properties before the first change, so
    /// later changes never grow the table one property at a time.
    mutating func reserve(_ count: Int) {
        if slots.count < count { slots.append(contentsOf: repeatElement(nil, count: count - slots.count)) }
    }

    /// Sets (or, with `nil`, clears) the pending value of a property.
    mutating func set(_ value: PropertyValue?, for property: PropertyDescription) {
        let ordinal = property.ordinal
        if ordinal >= slots.count {
            guard value != nil else { return }
            reserve(ordinal + 1)
        }
        let had = slots[ordinal] != nil
        if case .unloaded? = slots[ordinal] { unloadedCount -= 1 }
        if let value {
            // The slot kind says which properties are to-many: no dynamic cast per change.
            if property.slotKind == .toMany, case .relationship(.toMany(let ids)) = value {
                let relationship = unsafeDowncast(property, to: RelationshipDescription.self)
                slots[ordinal] = .members(ObjectIDList(ids, ordered: relationship.isOrdered))
            } else {
                slots[ordinal] = .value(value)
            }
            if !had { count += 1 }
        } else {
            slots[ordinal] = nil
            if had { count -= 1 }
        }
    }

    /// Makes `ids`, the committed members of `relationship` in a row at version
    /// `baseVersion`, its pending value, about to change one member at a time: the list
    /// journals what changes (``MemberJournal``).
    mutating func setBase(_ ids: [ManagedObjectID], of relationship: RelationshipDescription, baseVersion: UInt64) {
        setMembers(ObjectIDList(base: ids, ordered: relationship.isOrdered, baseVersion: baseVersion), at: relationship.ordinal)
    }

    /// Makes `list` the pending members of the to-many relationship at `ordinal`.
    mutating func setMembers(_ list: ObjectIDList, at ordinal: Int) {
        reserve(ordinal + 1)
        switch slots[ordinal] {
        case nil: count += 1
        case .unloaded?: unloadedCount -= 1
        default: break
        }
        slots[ordinal] = .members(list)
    }

    /// The member changes recorded without loading the committed members of the to-many
    /// relationship at `ordinal`, if that is what its slot holds.
    func unloadedMembers(at ordinal: Int) -> UnloadedMembers? {
        guard ordinal < slots.count, case .unloaded(let box)? = slots[ordinal] else { return nil }
        return box.members
    }

    /// Records that `id` joined (`adding`) or left the unordered to-many relationship at
    /// `ordinal`, whose committed members (of the row at `baseVersion`) are not loaded. The
    /// slot must be empty or hold unloaded members already.
    mutating func recordUnloaded(_ id: ManagedObjectID, at ordinal: Int, adding: Bool, baseVersion: UInt64) {
        reserve(ordinal + 1)
        if slots[ordinal] == nil {
            slots[ordinal] = .unloaded(UnloadedBox(UnloadedMembers(baseVersion: baseVersion)))
            count += 1
            unloadedCount += 1
        }
        guard recordIfUnloaded(id, at: ordinal, adding: adding) else {
            preconditionFailure("Unloaded member changes recorded over loaded ones")
        }
    }

    /// Records that `id` joined (`adding`) or left the to-many relationship at `ordinal` if
    /// its slot holds unloaded members; returns whether it did.
    mutating func recordIfUnloaded(_ id: ManagedObjectID, at ordinal: Int, adding: Bool) -> Bool {
        guard ordinal < slots.count, case .unloaded(var box)? = slots[ordinal] else { return false }
        // Taken out of the slot, the box is uniquely referenced unless another table shares it.
        slots[ordinal] = nil
        if !isKnownUniquelyReferenced(&box) { box = UnloadedBox(box.members) }
        box.members.record(id, adding: adding)
        slots[ordinal] = .unloaded(box)
        return true
    }

    /// Takes every slot of unloaded members out (they no longer count as changes), with its
    /// ordinal, for the object to load their committed members and set the result.
    mutating func takeUnloaded() -> [(ordinal: Int, members: UnloadedMembers)] {
        guard unloadedCount != 0 else { return [] }
        var taken: [(ordinal: Int, members: UnloadedMembers)] = []
        for ordinal in slots.indices {
            guard case .unloaded(let box)? = slots[ordinal] else { continue }
            taken.append((ordinal, box.members))
            slots[ordinal] = nil
            count -= 1
        }
        unloadedCount = 0
        return taken
    }

    /// Calls `body` with each pending value that holds one (not unloaded members) and its
    /// ordinal, in order, and `unloaded` with the ordinal of each slot of unloaded members.
    func forEachChange(
        _ body: (_ ordinal: Int, _ value: PropertyValue) throws -> Void, unloaded: (_ ordinal: Int) throws -> Void
    ) rethrows {
        for ordinal in slots.indices {
            switch slots[ordinal] {
            case nil: continue
            case .unloaded?: try unloaded(ordinal)
            case let slot?: try body(ordinal, slot.value)
            }
        }
    }

    /// The pending values as a snapshot's slots, `count` of them (`nil` where nothing is
    /// pending; to-many members as their IDs), in one pass: what a new object's first save
    /// commits. Requires that no slot holds unloaded members.
    func committedSlots(count: Int) -> [PropertyValue?] {
        var result: [PropertyValue?] = []
        result.reserveCapacity(count)
        let known = min(count, slots.count)
        for ordinal in 0..<known {
            switch slots[ordinal] {
            case .value(let value)?: result.append(value)
            case .members(let list)?: result.append(.relationship(.toMany(list.ids)))
            case .unloaded?: preconditionFailure("A slot of unloaded members was committed as a value")
            case nil: result.append(nil)
            }
        }
        for _ in known..<count { result.append(nil) }
        return result
    }

    /// The journal of the to-many relationship at `ordinal`, when its pending members were
    /// made from committed ones and changed one at a time since (``ObjectIDList/journal``).
    func journal(at ordinal: Int) -> MemberJournal? {
        guard ordinal < slots.count, case .members(let list)? = slots[ordinal] else { return nil }
        return list.journal
    }

    /// Changes the members of a to-many relationship in place; the relationship must
    /// already have a pending value. Returns what `body` returns.
    mutating func updateMembers(of relationship: RelationshipDescription, _ body: (inout ObjectIDList) -> Bool) -> Bool {
        let ordinal = relationship.ordinal
        reserve(ordinal + 1)
        // Taking the list out of its slot leaves it uniquely referenced, so `body` mutates
        // it without copying.
        var list: ObjectIDList
        switch slots[ordinal] {
        case .members(let existing)?: list = existing
        case .value(.relationship(.toMany(let ids)))?: list = ObjectIDList(ids, ordered: relationship.isOrdered)
        case .unloaded?: preconditionFailure("Members changed in place over unloaded member changes")
        default:
            list = ObjectIDList([], ordered: relationship.isOrdered)
            count += 1
        }
        slots[ordinal] = nil
        let changed = body(&list)
        slots[ordinal] = .members(list)
        return changed
    }

    mutating func removeAll() {
        slots = []
        count = 0
        unloadedCount = 0
    }

    /// Replaces object IDs (temporary to permanent) in the pending value of the relationship
    /// at `ordinal`, if it has one. A list of members is rewritten in place where nothing
    /// else holds its storage.
    mutating func replaceReferences(_ map: IDReplacements, atOrdinal ordinal: Int) {
        guard ordinal < slots.count else { return }
        // Taken out of its slot (no copy), so that the slot does not hold a second reference
        // to a list's storage while it is rewritten.
        var slot = slots[ordinal].take()
        switch slot {
        case .value(.relationship(.toOne(let id?)))?:
            if let new = map[id] { slot = .value(.relationship(.toOne(new))) }
        case .value(.relationship(.toMany(let ids)))?:
            if map.replacesAny(of: ids) { slot = .value(.relationship(.toMany(ids.map { map.image(of: $0) }))) }
        case .members(var list)?:
            slot = nil
            list.replace(map)
            slot = .members(list)
        case .unloaded(let box)?:
            // A new box: the old one may be shared with a copy of these changes.
            var members = box.members
            members.replace(map)
            slot = .unloaded(UnloadedBox(members))
        default:
            break
        }
        slots[ordinal] = slot
    }
}

import ObjectGraph
import StrataEngine

/// [MIG-5] Pending relationship keys: a relationship stored in rows (a to-one, an ordered
/// to-many) that a lightweight migration makes a many-to-many or a to-many without inverse
/// (keys its owners write, [REL-1]) gets its keys after the load, in the background. Until
/// then a row in an older layout holds its members in a field of that layout, which every
/// reader of one owner's members adds to the owner's keys.
extension StrataStore {
    /// The key spaces ([KEY-2]) whose rows give pending keys, in name order: for keys the
    /// owners write, those of entities with an older layout that lists pending keys (the
    /// owners' rows hold the members); for a one-to-many, those of its destination (the
    /// members' to-one names the owner). Empty once the keys are written.
    static func pendingKeySpaces(_ layout: StoreLayout) -> [String] {
        guard layout.hasPendingKeys else { return [] }
        var spaces = Set<String>()
        for legacy in layout.legacy.values {
            if !legacy.pendingLists.isEmpty, let entity = layout.entity(number: legacy.current.number) {
                spaces.insert(layout.keySpace(of: entity))
            }
            for (relationship, _) in legacy.pendingKeys {
                if RelationshipKeys.storage(of: relationship) == .join {
                    if let entity = layout.entity(number: legacy.current.number) { spaces.insert(layout.keySpace(of: entity)) }
                } else if let destination = relationship.destinationEntity {
                    spaces.insert(layout.keySpace(of: destination))
                }
            }
        }
        return spaces.sorted()
    }

    /// Puts into `batch` the pending keys ([REL-1]) and lists the rows of key space `root`
    /// give, from `cursor` on, reading at most `limit` rows: a key for each member a row of an
    /// older layout holds for keys the owners write; for each row whose to-one indexes a
    /// one-to-many with pending keys, the key under the owner it names; and a row of an older
    /// layout whose ordered list is still keys, rewritten in the current layout at the same
    /// version with that list. Returns the number of
    /// rows read, and the key to go on from when rows remain (`nil` when the key space is
    /// done). Keys that exist already are put again (puts are idempotent), so a build cut
    /// short starts over.
    ///
    /// - Throws: `storeCorrupted` for a row in an older layout that fails its checks.
    static func writePendingKeys(
        layout: StoreLayout, root: String, in snapshot: Snapshot, from cursor: [UInt8], limit: Int = .max,
        into batch: inout WriteBatch
    ) throws -> (rows: Int, next: [UInt8]?) {
        var rows = 0
        var next: [UInt8]? = nil
        var failure: (any Error)? = nil
        // Prefixes by relationship instance: a few relationships per store.
        var prefixes: [(relationship: RelationshipDescription, prefix: [UInt8])] = []
        func prefix(_ relationship: RelationshipDescription, owner: EntityDescription) -> [UInt8] {
            if let known = prefixes.first(where: { $0.relationship === relationship }) { return known.prefix }
            let made = layout.relationshipPrefix(relationship, owner: owner)
            prefixes.append((relationship, made))
            return made
        }
        try mappingEngineErrors("scan \(root) rows") { () throws(StoreError) in
            try snapshot.forEachView(from: cursor, to: KeyLayout.rowPrefixEnd(root: root)) { key, value in
                if rows >= limit {
                    next = Array(key)
                    return false
                }
                rows += 1
                guard let reference = KeyLayout.reference(fromKeyBytes: key), value.count >= 4 else { return true }
                do {
                    let number = RowFields.load(UInt16.self, value, 2)
                    guard let entity = layout.entity(number: number) else { return true }
                    if let legacy = layout.legacyLayout(ofRow: value), !legacy.pendingLists.isEmpty {
                        // An ordered list still held as keys: the row rewritten in the current
                        // layout at the same version, with the list from the keys.
                        var lists: [Int: FieldValue] = [:]
                        for (relationship, field, _) in legacy.pendingLists {
                            guard let list = layout.pendingList(of: relationship, row: value, reference: reference, members: { RelationshipKeys.members($0, in: snapshot) }),
                                !list.isEmpty
                            else { continue }
                            lists[field] = .objects(list)
                        }
                        if !lists.isEmpty {
                            let old = try RowFields.current(value, store: layout, context: .key(root: root, reference: reference), readByEngine: true)
                            let bytes = try RowEncoder.encode(layout: legacy.current, version: old.fields.version, entityName: entity.name) { index in
                                try lists[index] ?? old.value(index)
                            }
                            batch.put(Array(key), bytes)
                        }
                    }
                    for (relationship, members) in try layout.pendingCandidates(inRow: value, context: .key(root: root, reference: reference))
                    where RelationshipKeys.storage(of: relationship) == .join {
                        let relationshipPrefix = prefix(relationship, owner: entity)
                        // (Not a member of a removed entity: its row is retired, [MIG-4].)
                        for member in members where layout.entity(number: member.entity) != nil {
                            batch.put(RelationshipKeys.key(relationshipPrefix: relationshipPrefix, owner: reference, member: member), [])
                        }
                    }
                    let foreignKeys = layout.pendingForeignKeys(ofEntity: number)
                    if !foreignKeys.isEmpty {
                        let row = try RowFields.current(value, store: layout, context: .key(root: root, reference: reference), readByEngine: true)
                        for (toOne, inversePrefix) in foreignKeys {
                            guard let owner = try row.object(atOrdinal: toOne.ordinal), layout.entity(number: owner.entity) != nil else { continue }
                            batch.put(
                                RelationshipKeys.key(relationshipPrefix: inversePrefix, owner: owner.reference, member: StoredObject(entity: number, reference: reference)), [])
                        }
                    }
                    return true
                } catch {
                    failure = error
                    return false
                }
            }
        }
        if let failure { throw failure }
        return (rows, next)
    }

    /// Puts into `batch` every pending key of the store ([MIG-5]), all key spaces at once: for
    /// a migration or a synchronous rebuild, which write them in their own transaction.
    static func writeAllPendingKeys(layout: StoreLayout, in snapshot: Snapshot, into batch: inout WriteBatch) throws {
        for root in pendingKeySpaces(layout) {
            _ = try writePendingKeys(layout: layout, root: root, in: snapshot, from: KeyLayout.rowPrefix(root: root), into: &batch)
        }
    }

    /// `keys` (members in reference order, as the keys list them) with `pending` added: in
    /// reference order, each once.
    static func merging(_ keys: [StoredObject], _ pending: [StoredObject]) -> [StoredObject] {
        guard !pending.isEmpty else { return keys }
        var seen = Set(keys.map(\.reference))
        var merged = keys
        for member in pending where seen.insert(member.reference).inserted { merged.append(member) }
        merged.sort { $0.reference < $1.reference }
        return merged
    }
}

extension StoreLayout {
    /// The members of the keyed `relationship` of the owner `reference` (of `owner`'s
    /// hierarchy) that its row holds in a field of an older layout, while its keys are
    /// pending ([MIG-5]); empty otherwise (no row read).
    func pendingMembers(
        of relationship: RelationshipDescription, owner: EntityDescription, reference: Int64, in snapshot: Snapshot
    ) throws -> [StoredObject] {
        guard keysPending(relationship, in: snapshot), let key = rowKey(of: owner, reference: reference) else { return [] }
        var members: [StoredObject] = []
        var failure: (any Error)? = nil
        _ = try mappingEngineErrors("read a row") { () throws(StoreError) in
            try snapshot.withValue(key) { raw in
                do {
                    members = try pendingMembers(
                        of: relationship, row: raw, context: .key(root: keySpace(of: owner), reference: reference), owner: reference
                    ) { key in try mappingEngineErrors("read a member") { () throws(StoreError) in try snapshot.get(key) } }
                } catch {
                    failure = error
                }
            }
        }
        if let failure { throw failure }
        return members
    }

    /// [MIG-5] The list of the ordered `relationship` of the owner `reference` (of `owner`'s
    /// hierarchy) when its row is in an older layout whose list is still keys
    /// (``pendingList(of:row:reference:members:)``), read from `snapshot`; `nil`
    /// when the row's field is its list.
    func pendingList(
        of relationship: RelationshipDescription, owner: EntityDescription, reference: Int64, in snapshot: Snapshot
    ) throws -> [StoredObject]? {
        guard keysPending(relationship, in: snapshot), let key = rowKey(of: owner, reference: reference) else { return nil }
        var list: [StoredObject]? = nil
        _ = try mappingEngineErrors("read a row") { () throws(StoreError) in
            try snapshot.withValue(key) { raw in
                list = pendingList(of: relationship, row: raw, reference: reference) { RelationshipKeys.members($0, in: snapshot) }
            }
        }
        return list
    }
}

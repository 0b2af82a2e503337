import ObjectGraph
import StrataEngine

extension StrataStore.RowSource {
    /// [FETCH-S10] One fetch's reads of one attribute of a one-to-many relationship's members
    /// (`ALL tracks.milliseconds > 60000`, `tracks.@avg.milliseconds`): how many members were
    /// read one by one so far, and, once that passed a share of the members' rows, the values
    /// of every owner's members from one scan of those rows.
    struct MemberGroups {
        /// The to-many relationship and the key path read from its members.
        let relationship: ObjectIdentifier
        let keyPath: String
        /// What the fetch reads, or `nil` when the relationship or key path do not qualify.
        var plan: Plan?

        struct Plan {
            /// The members' entity (its subentities' rows are members too).
            let destination: EntityDescription
            /// The inverse to-one, whose field in each member's row names its owner.
            let inverse: RelationshipDescription
            /// The members read one by one so far, and how many make a scan cheaper.
            var read = 0
            let threshold: Int
            /// The capacity each owner's values start with: the average number of members.
            let membersPerOwner: Int
            /// Each owner's member values in member reference order, by owner reference,
            /// once the scan ran.
            var values: [Int64: [FetchValue]]?
        }
    }

    /// [FETCH-S10] One fetch's counts of a keyed to-many's members (`albums.@count`,
    /// `playlists.@count`): how many owners were counted from their keys so far, and, once that
    /// passed a share of the relationship's keys, every owner's count from one walk of them.
    struct MemberCounts {
        let relationship: ObjectIdentifier
        /// The prefix of every key of the relationship ([REL-1]).
        let prefix: [UInt8]
        var counted = 0
        /// The relationship's keys, counted when the plan was made.
        let keys: Int
        let threshold: Int
        /// Once grouped: every owner with members, in reference order (the keys' order,
        /// [KEY-2]), and its count.
        var owners: [Int64]?
        var counts: [Int] = []
        /// Where the last owner looked up was, or would be: a scan looks owners up in
        /// reference order, so most lookups start there.
        var hint = 0

        /// The count of the owner `reference` (0 when it has no member), found from the last
        /// lookup's position, else by binary search; nothing is hashed.
        mutating func count(of reference: Int64) -> Int {
            guard let owners else { return 0 }
            var low = 0, high = owners.count
            // The answer is the first owner at or after `reference`: at the hint when the
            // owner before the hint comes before `reference` and the one at it does not.
            if hint == 0 || owners[hint - 1] < reference {
                if hint == owners.count || owners[hint] >= reference { low = hint; high = hint } else { low = hint + 1 }
            } else {
                high = hint - 1
            }
            while low < high {
                let middle = (low + high) / 2
                if owners[middle] < reference { low = middle + 1 } else { high = middle }
            }
            hint = low
            return low < owners.count && owners[low] == reference ? counts[low] : 0
        }
    }

    /// Each owner's number of members of the keyed `relationship` of `owner`'s hierarchy,
    /// counted in one walk of the relationship's keys once owners counted one key range at a
    /// time reached a tenth of those keys (at least 32; callgrind on the real-data suite's
    /// `playlists.@count == 0`: an owner's key range costs ~1.4k instructions, a key met in
    /// the walk ~0.13k); `nil` before that, and for relationships of more than
    /// ``memberGroupRowCap`` keys.
    func groupedMemberCount(_ relationship: RelationshipDescription, of owner: EntityDescription, reference: Int64) -> Int? {
        let id = ObjectIdentifier(relationship)
        guard let index = memberCounts.firstIndex(where: { $0.relationship == id }) else {
            guard memberCounts.count < 16 else { return nil }
            let prefix = store.relationshipPrefix(relationship, owner: owner)
            let keys = snapshot.countKeys(from: prefix, to: RelationshipKeys.end(of: prefix))
            let threshold = keys <= Self.memberGroupRowCap ? max(32, keys / 10) : .max
            memberCounts.append(MemberCounts(relationship: id, prefix: prefix, counted: 1, keys: keys, threshold: threshold))
            return nil
        }
        if memberCounts[index].owners != nil { return memberCounts[index].count(of: reference) }
        memberCounts[index].counted += 1
        guard memberCounts[index].counted > memberCounts[index].threshold else { return nil }
        let prefix = memberCounts[index].prefix
        var owners: [Int64] = [], counts: [Int] = []
        snapshot.forEachKeyBytes(from: prefix, to: RelationshipKeys.end(of: prefix)) { key in
            // `prefix owner member memberEntity`: the owner's 8 bytes come before the member's 10.
            guard key.count == prefix.count + 18,
                let owner = KeyLayout.reference(fromKeyBytes: UnsafeRawBufferPointer(rebasing: key[..<(key.count - 10)]))
            else { return true }
            // An owner's keys are together, owners in reference order.
            if owners.last == owner { counts[counts.count - 1] += 1 } else { owners.append(owner); counts.append(1) }
            return true
        }
        memberCounts[index].owners = owners
        memberCounts[index].counts = counts
        return memberCounts[index].count(of: reference)
    }

    /// The most rows of a members' hierarchy (or keys of a relationship) a fetch groups (above
    /// that, members are read and counted one owner at a time: the groups would hold too
    /// much memory).
    static let memberGroupRowCap = 1_000_000

    /// The index in ``memberGroups`` of the reads of `keyPath` through `relationship`.
    func memberGroup(_ relationship: RelationshipDescription, keyPath: String) -> Int? {
        let id = ObjectIdentifier(relationship)
        if let index = memberGroups.firstIndex(where: { $0.relationship == id && $0.keyPath == keyPath }) {
            return memberGroups[index].plan == nil ? nil : index
        }
        guard memberGroups.count < 16 else { return nil }
        memberGroups.append(MemberGroups(relationship: id, keyPath: keyPath, plan: memberGroupPlan(relationship, keyPath: keyPath)))
        return memberGroups[memberGroups.count - 1].plan == nil ? nil : memberGroups.count - 1
    }

    /// The plan for reading `keyPath` from the members of `relationship`: a one-to-many
    /// (keys maintained from the members' to-one, [REL-2]) whose key path is a stored
    /// attribute of the members, and whose members' hierarchy holds at most
    /// ``memberGroupRowCap`` rows.
    private func memberGroupPlan(_ relationship: RelationshipDescription, keyPath: String) -> MemberGroups.Plan? {
        guard case .foreignKey(let inverse) = RelationshipKeys.storage(of: relationship),
            let destination = relationship.destinationEntity,
            let attribute = destination.attributesByName[keyPath], !attribute.isTransient, attribute.ordinal >= 0,
            let root = try? store.model().entity(named: destination.rootEntityName),
            let rows = try? store.cachedRecord(in: snapshot).rowCount(of: root.selfAndAllSubentities.map(\.name)),
            rows <= Self.memberGroupRowCap
        else { return nil }
        // A scanned row costs about a fifth of a member read by key (callgrind, the real-data
        // suite's `tracks.@avg.milliseconds`): once a sixteenth of the rows were read one by one,
        // the scan is at most that much again, and a fetch that reads most members (every
        // owner of a whole entity) pays little before it.
        let owners = (try? store.cachedRecord(in: snapshot).rowCount(of: (relationship.entity?.selfAndAllSubentities ?? []).map(\.name))) ?? 0
        return MemberGroups.Plan(
            destination: destination, inverse: inverse, threshold: max(64, rows / 16),
            membersPerOwner: min(64, max(1, rows / max(1, owners))))
    }

    /// Counts `count` members read one by one for the plan at `index`.
    func noteMemberReads(_ count: Int, in index: Int) {
        memberGroups[index].plan?.read += count
    }

    /// Each owner's member values for the plan at `index`, scanning the members' rows once
    /// when the members read one by one reached the plan's threshold; `nil` before that.
    func groupedMemberValues(_ index: Int) throws -> [Int64: [FetchValue]]? {
        guard let plan = memberGroups[index].plan else { return nil }
        if let values = plan.values { return values }
        guard plan.read >= plan.threshold else { return nil }
        let values = try groupMemberValues(
            of: plan.destination, inverse: plan.inverse, keyPath: memberGroups[index].keyPath, capacity: plan.membersPerOwner)
        memberGroups[index].plan?.values = values
        return values
    }

    /// One scan of the hierarchy of `destination`: for each row of it or a subentity, its
    /// `inverse` to-one's owner and its `keyPath` attribute, as a member read one by one gives
    /// it (a row without the attribute's field is no member value), in reference order.
    private func groupMemberValues(
        of destination: EntityDescription, inverse: RelationshipDescription, keyPath: String, capacity: Int
    ) throws -> [Int64: [FetchValue]] {
        // Per entity number: the ordinals of the inverse and the attribute in that entity (an
        // entity outside `destination`'s subtree holds no members).
        var ordinals = [(inverse: Int, attribute: Int)?](repeating: nil, count: layout.numberCount)
        for entity in destination.selfAndAllSubentities {
            guard let number = layout.number(of: entity), let owner = entity.relationshipsByName[inverse.name],
                let attribute = entity.attributesByName[keyPath], owner.ordinal >= 0, attribute.ordinal >= 0
            else { continue }
            ordinals[Int(number)] = (owner.ordinal, attribute.ordinal)
        }
        var groups: [Int64: [FetchValue]] = [:]
        try forEachRow(inKeySpace: layout.keySpace(of: destination)) { row in
            let fields = row.fields
            guard Int(fields.entityNumber) < ordinals.count, let (inverse, attribute) = ordinals[Int(fields.entityNumber)],
                let owner = try fields.object(atOrdinal: inverse), let member = try fields.attribute(atOrdinal: attribute)
            else { return }
            if let index = groups.index(forKey: owner.reference) {
                groups.values[index].append(.attribute(member))
            } else {
                var values: [FetchValue] = []
                values.reserveCapacity(capacity)
                values.append(.attribute(member))
                groups[owner.reference] = values
            }
        }
        return groups
    }

    /// Calls `body` with every row of the key space `root` ([KEY-2]: a hierarchy's), in reference order,
    /// each checked ([ROW-1]) and seen where the engine holds it ([FETCH-S7]); an error from
    /// a row or from `body` stops the scan and is thrown.
    func forEachRow(inKeySpace root: String, _ body: (StrataStore.BorrowedRowView) throws -> Void) throws {
        let layout = self.layout
        let scratch = layout.hasLegacy ? RowScratch() : nil
        var failure: (any Error)? = nil
        _ = try mappingEngineErrors("scan \(root) rows") { () throws(StoreError) in
            try snapshot.forEachView(from: KeyLayout.rowPrefix(root: root), to: KeyLayout.rowPrefixEnd(root: root)) { key, value in
                do {
                    guard let reference = KeyLayout.reference(fromKeyBytes: key), !layout.isRetiredRow(value) else { return true }
                    let fields = try RowFields(
                        value, store: layout, context: .key(root: root, reference: reference), readByEngine: true, scratch: scratch)
                    guard let entity = layout.unretainedEntity(number: fields.entityNumber) else { return true }
                    try body(StrataStore.BorrowedRowView(fields: fields, reference: reference, entity: entity.takeUnretainedValue(), source: self))
                    return true
                } catch {
                    failure = error
                    return false
                }
            }
        }
        if let failure { throw failure }
    }
}

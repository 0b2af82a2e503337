import ObjectGraph
import StrataEngine

extension StrataStore {
    /// [FETCH-S1] A comparison through a relationship (`artist.name == "X"`, `ANY tags.name ==
    /// "jazz"`) answered from the destination's matches: one fetch of the destination entity
    /// for `rest op constant` (through its indexes when it has them), then each row's
    /// destination reference is looked up in that set instead of reading the destination row.
    /// Only comparisons that no row without a destination satisfies (`null op constant` is
    /// false) qualify, so a missing or dangling destination answers false either way; `nil`
    /// leaves the comparison to the default evaluation.
    func semiJoin(
        _ leaf: FetchPredicate, entity: EntityDescription, in snapshot: Snapshot, layout: StoreLayout
    ) throws -> SemiJoin? {
        if case .comparison(.member(.subquery(.keyPath(let path), let variable, let inner), "@count"), let op, .constant(let constant), .direct, let options) = leaf,
            let relationship = entity.relationshipsByName[path], !relationship.isTransient, relationship.ordinal >= 0,
            case .foreignKey(let inverse) = RelationshipKeys.storage(of: relationship), let destination = relationship.destinationEntity,
            let element = FetchPredicate.elementPredicate(inner, variable: variable),
            let root = try? model().entity(named: destination.rootEntityName),
            try cachedRecord(in: snapshot).rowCount(of: root.selfAndAllSubentities.map(\.name)) <= RowSource.memberGroupRowCap
        {
            // [FETCH-S14] One fetch of the members that match, read for their owner.
            var members = FetchRequest(entityName: destination.name)
            members.entity = destination
            members.predicate = element
            members.resultType = .dictionary
            members.propertiesToFetch = [.keyPath(inverse.name)]
            // The owners come back as one column of values, not a dictionary per member.
            let columns = ColumnValues()
            guard case .dictionaries(let rows) = try execute(members, with: nil, reading: snapshot, columns: columns) else { return nil }
            var counts: [Int64: Int] = [:]
            func count(_ owner: FetchValue?) {
                guard case .object(let owner)? = owner, case .int64(let reference)? = owner.referenceObject else { return }
                counts[reference, default: 0] += 1
            }
            if let values = columns.values {
                for value in values { count(value) }
            } else {
                for row in rows { count(row[inverse.name]) }
            }
            return SemiJoin(.subqueryCount(counts: counts, op: op, constant: constant, options: options))
        }
        if case .comparison(.keyPath(let path), let op, .constant(let constant), .direct, _) = leaf, op == .equal || op == .notEqual,
            !path.containsByte(UInt8(ascii: ".")), let relationship = entity.relationshipsByName[path], relationship.isToOne,
            !relationship.isTransient, relationship.ordinal >= 0
        {
            // [FETCH-S15] A to-one against nil, or not equal to an object: its stored reference
            // tested in place, no ID made per row.
            switch constant {
            case .attribute(.null):
                return SemiJoin(.toOne(ordinal: relationship.ordinal, objects: nil, equal: op == .equal))
            case .object(let id) where op == .notEqual:
                // An object of another store, or a temporary one, no row names.
                let objects = Set((try? storedObject(id, layout: layout)).map { [$0] } ?? [])
                return SemiJoin(.toOne(ordinal: relationship.ordinal, objects: objects, equal: false))
            default:
                break
            }
        }
        if let objects = Self.selfComparison(leaf) {
            // [FETCH-S13] `SELF IN %@` on a scanned row: a set lookup by entity and reference.
            return SemiJoin(.selfObjects(Set(objects.compactMap { try? storedObject($0, layout: layout) })))
        }
        if let (path, op, constant) = Self.objectComparison(leaf), !path.containsByte(UInt8(ascii: ".")),
            let relationship = entity.relationshipsByName[path], !relationship.isTransient, relationship.ordinal >= 0,
            relationship.isToOne || RelationshipKeys.isKeyed(relationship)
        {
            // A to-one compares as itself: `album == %@` or `album IN %@`, not CONTAINS.
            if relationship.isToOne {
                guard case .comparison(.keyPath, let written, .constant, .direct, _) = leaf, written == .equal || written == .in else {
                    return nil
                }
            }
            return try objectSemiJoin(relationship, op: op, constant: constant, in: snapshot, layout: layout)
        }
        guard case .comparison(.keyPath(let path), let op, .constant(let constant), let modifier, let options) = leaf,
            let dot = path.utf8.firstIndex(of: UInt8(ascii: ".")), !path.containsByte(UInt8(ascii: "@")), !path.containsByte(UInt8(ascii: "$"))
        else { return nil }
        // By UTF-8 position: a search by `Character` costs more than the rest of the plan.
        let head = String(path[..<dot]), rest = String(path[path.utf8.index(after: dot)...])
        guard let relationship = entity.relationshipsByName[head], !relationship.isTransient, relationship.ordinal >= 0,
            let destination = relationship.destinationEntity, !rest.isEmpty, rest != "self", rest != "SELF",
            (relationship.isToOne && modifier == .direct) || (relationship.isToMany && modifier == .any),
            !FetchPredicate.comparisonHoldsForNull(op, constant, options: options)
        else { return nil }
        // [FETCH-S1] A fetched hierarchy of a few rows is cheaper to read whole, each row's
        // destination value read once per destination (the key path's reader keeps it), than a
        // fetch of the destination's matches (callgrind, the real-data suite's
        // `reportsTo.lastName` over 8 employees: 117k instructions a fetch through the semi-join,
        // of which its inner fetch 31k; 107k reading the rows).
        let rowCount = try cachedRecord(in: snapshot).rowCount(of: entity.selfAndAllSubentities.map(\.name))
        if relationship.isToOne, rowCount <= Self.smallHierarchyRows { return nil }
        // [FETCH-S17] `genre.name == "Rock"` on the destination: its matches are the members
        // of the matching genres' keys, no destination row read or ID made.
        let memberRows = relationship.isToMany ? rowCount : 0
        if let matches = try foreignKeyMatches(
            rest, op: op, constant: constant, options: options, of: destination,
            cap: relationship.isToMany ? max(1_024, 128 * memberRows) : nil, in: snapshot, layout: layout)
        {
            var references = Set<Int64>(minimumCapacity: matches.count)
            for match in matches { references.insert(match.reference) }
            let owners = try semiJoinOwners(relationship, matches: matches, rowCount: memberRows, in: snapshot, layout: layout)
            return SemiJoin(.destinations(relationship, references: references, owners: owners))
        }
        var inner = FetchRequest(entityName: destination.name)
        inner.entity = destination
        inner.predicate = .comparison(.keyPath(rest), op, .constant(constant), modifier: .direct, options: options)
        inner.resultType = .managedObjectID
        // [FETCH-S5] Through a to-many, more matching destinations than a few per row of the
        // fetched entity make the row-by-row test cheaper (each row's members are read until
        // one matches): the inner fetch stops past that many, and the comparison is left to it.
        let cap = relationship.isToMany ? max(64, 4 * memberRows) : nil
        if let cap { inner.fetchLimit = cap + 1 }
        guard case .objectIDs(let ids) = try execute(inner, with: nil, reading: snapshot) else { return nil }
        if let cap, ids.count > cap { return nil }
        var references = Set<Int64>(minimumCapacity: ids.count)
        for id in ids { if case .int64(let reference)? = id.referenceObject { references.insert(reference) } }
        let matches = ids.compactMap { id -> StoredObject? in
            guard case .int64(let reference)? = id.referenceObject, let number = layout.number(of: id.entity) else { return nil }
            return StoredObject(entity: number, reference: reference)
        }
        let owners = try semiJoinOwners(relationship, matches: matches, rowCount: memberRows, in: snapshot, layout: layout)
        return SemiJoin(.destinations(relationship, references: references, owners: owners))
    }

    /// The most rows of a fetched hierarchy that a comparison through a to-one tests by
    /// reading each row's destination rather than through a semi-join ([FETCH-S1]).
    static let smallHierarchyRows = 32

    /// [FETCH-S17] The rows of `destination` (or its subentities) whose key path `rest` — a
    /// to-one whose inverse is a one-to-many kept as keys ([REL-2]), then more — satisfies
    /// `op constant`: one fetch of the to-one's destination for the rest of the path (through
    /// its indexes), then the keys of each match, whose members are exactly the rows naming it
    /// (each row once: it names one). A row naming no destination, or one that is gone, names
    /// no match, as the comparison (false for null) says. `rest` the to-one alone, compared
    /// with objects, needs no fetch: ``foreignKeyObjectMatches(_:op:constant:of:cap:in:layout:)``.
    /// `nil` when `rest` has no such head, while the keys are pending or rows retired, when
    /// more than 1,024 destinations match (each costs a seek), or when the members pass `cap`.
    private func foreignKeyMatches(
        _ rest: String, op: FetchComparisonOperator, constant: FetchValue, options: ComparisonOptions, of destination: EntityDescription,
        cap: Int?, in snapshot: Snapshot, layout: StoreLayout
    ) throws -> [StoredObject]? {
        guard let dot = rest.utf8.firstIndex(of: UInt8(ascii: ".")) else {
            return try foreignKeyObjectMatches(rest, op: op, constant: constant, of: destination, cap: cap, in: snapshot, layout: layout)
        }
        let head = String(rest[..<dot]), tail = String(rest[rest.utf8.index(after: dot)...])
        guard !tail.isEmpty, let toOne = destination.relationshipsByName[head], toOne.isToOne, !toOne.isTransient, toOne.ordinal >= 0,
            let inverse = toOne.inverseRelationship, RelationshipKeys.storage(of: inverse) == .foreignKey(inverse: toOne),
            let target = toOne.destinationEntity, !layout.keysPending(inverse, in: snapshot), !layout.hasRetiredRows(in: snapshot)
        else { return nil }
        var matches = FetchRequest(entityName: target.name)
        matches.entity = target
        matches.predicate = .comparison(.keyPath(tail), op, .constant(constant), modifier: .direct, options: options)
        matches.resultType = .managedObjectID
        matches.fetchLimit = 1_025
        guard case .objectIDs(let ids) = try execute(matches, with: nil, reading: snapshot), ids.count <= 1_024 else { return nil }
        let owners = ids.compactMap { id -> Int64? in
            guard case .int64(let owner)? = id.referenceObject else { return nil }
            return owner
        }
        return members(of: owners, under: inverse, owner: target, in: destination, cap: cap, snapshot: snapshot, layout: layout)
    }

    /// [FETCH-S17] The rows of `destination` (or its subentities) whose to-one `rest` (its
    /// inverse a one-to-many kept as keys, [REL-2]) is `== object` or `IN objects`: the members
    /// under each object's keys, with no fetch. Each object's row is read, as [FETCH-S12]
    /// reads it: one that is missing leaves the comparison to the rows (`nil`: rows may
    /// still name a deleted object whose keys went with it), and an object of another entity,
    /// of another store or temporary names no row. `nil` as
    /// ``foreignKeyMatches(_:op:constant:options:of:cap:in:layout:)`` says otherwise.
    private func foreignKeyObjectMatches(
        _ rest: String, op: FetchComparisonOperator, constant: FetchValue, of destination: EntityDescription,
        cap: Int?, in snapshot: Snapshot, layout: StoreLayout
    ) throws -> [StoredObject]? {
        guard let toOne = destination.relationshipsByName[rest], toOne.isToOne, !toOne.isTransient, toOne.ordinal >= 0,
            let inverse = toOne.inverseRelationship, RelationshipKeys.storage(of: inverse) == .foreignKey(inverse: toOne),
            let target = toOne.destinationEntity, !layout.keysPending(inverse, in: snapshot), !layout.hasRetiredRows(in: snapshot)
        else { return nil }
        let values: [FetchValue]
        switch (op, constant) {
        case (.equal, .object): values = [constant]
        case (.in, .collection(let list)) where list.count <= 1_024: values = list
        default: return nil
        }
        let source = RowSource(snapshot: snapshot, store: self, layout: layout)
        var owners: [Int64] = []
        var seen = Set<Int64>(minimumCapacity: values.count)
        for value in values {
            guard case .object(let id) = value else { return nil }
            guard id.entity.isKind(of: target), let object = try? storedObject(id, layout: layout) else { continue }
            guard let found = try source.rowIsOfItsEntity(object, entity: id.entity) else { return nil }
            if found, seen.insert(object.reference).inserted { owners.append(object.reference) }
        }
        return members(of: owners, under: inverse, owner: target, in: destination, cap: cap, snapshot: snapshot, layout: layout)
    }

    /// The members of `destination`'s hierarchy (the keys may name rows of its superentity's
    /// other subentities) under each of `owners`' keys of the one-to-many `inverse` of `owner`,
    /// owner after owner; `nil` once they pass `cap`.
    private func members(
        of owners: [Int64], under inverse: RelationshipDescription, owner: EntityDescription, in destination: EntityDescription,
        cap: Int?, snapshot: Snapshot, layout: StoreLayout
    ) -> [StoredObject]? {
        let numbers = destination.selfAndAllSubentities.compactMap { layout.number(of: $0) }
        var members: [StoredObject] = []
        for reference in owners {
            let prefix = ownerPrefix(inverse, owner: owner, reference: reference)
            // Counted first (the index alone, a leaf at a time): past the cap nothing is walked.
            let keys = snapshot.countKeys(from: prefix, to: RelationshipKeys.end(of: prefix), limit: cap.map { $0 + 1 - members.count } ?? .max)
            if let cap, members.count + keys > cap { return nil }
            members.reserveCapacity(members.count + keys)
            RelationshipKeys.forEachMember(prefix, in: snapshot) { member in
                if numbers.contains(member.entity) { members.append(member) }
                return true
            }
        }
        return members
    }

    /// A comparison of a relationship with objects, as (key path, `==` or `IN`, constant):
    /// `album == %@`, `album IN %@`, and for a to-many `ANY playlists == %@`, `playlists
    /// CONTAINS %@`, `%@ IN playlists`, `ANY playlists IN %@` (a to-many's `==` without `ANY`
    /// is `ANY` too, as the fetch language evaluates it). `nil` for anything else.
    static func objectComparison(_ leaf: FetchPredicate) -> (path: String, op: FetchComparisonOperator, constant: FetchValue)? {
        switch leaf {
        case .comparison(.keyPath(let path), let op, .constant(let constant), let modifier, _)
        where modifier == .direct || modifier == .any:
            switch (op, constant, modifier) {
            case (.equal, .object, _), (.in, .collection, _): return (path, op, constant)
            case (.contains, .object, .direct): return (path, .equal, constant)
            default: return nil
            }
        case .comparison(.constant(let constant), .in, .keyPath(let path), .direct, _):
            guard case .object = constant else { return nil }
            return (path, .equal, constant)
        default:
            return nil
        }
    }

    /// [FETCH-S12] `album == %@` and `album IN %@` with objects of this store: a semi-join whose
    /// destinations are those objects, with no inner fetch. Each object's row is checked
    /// (``RowSource/rowIsOfItsEntity(_:entity:)``): that it exists and is of the entity its ID names (a row's to-one then equals the ID
    /// exactly when it holds the object's reference); an object whose row is of another entity,
    /// an object of another store and a temporary ID match no row. `nil`, leaving the
    /// comparison to row-by-row evaluation, when a constant is not an object or an object's
    /// row is missing (rows may still point at it).
    private func objectSemiJoin(
        _ relationship: RelationshipDescription, op: FetchComparisonOperator, constant: FetchValue, in snapshot: Snapshot,
        layout: StoreLayout
    ) throws -> SemiJoin? {
        let values: [FetchValue]
        switch (op, constant) {
        case (.equal, .object): values = [constant]
        case (.in, .collection(let list)): values = list
        default: return nil
        }
        guard values.count <= 1_024 else { return nil }
        var ids: [ManagedObjectID] = []
        for value in values {
            guard case .object(let id) = value else { return nil }
            ids.append(id)
        }
        let source = RowSource(snapshot: snapshot, store: self, layout: layout)
        var references = Set<Int64>(minimumCapacity: ids.count)
        for id in ids {
            guard let object = try? storedObject(id, layout: layout) else { continue }
            guard let found = try source.rowIsOfItsEntity(object, entity: id.entity) else { return nil }
            if found { references.insert(object.reference) }
        }
        return SemiJoin(.destinations(relationship, references: references, owners: nil))
    }

    /// [FETCH-S16] The count of `toOne == nil`, `toOne != nil`, `toOne == object` or
    /// `toOne != object` from the one-to-many's keys ([REL-2]): a row names a destination
    /// exactly when its key is under that destination, so the rows with one are the keys of
    /// the fetched entities, the rest are `nil`, and the rows naming `object` are the keys
    /// under it. The keys are counted a
    /// leaf at a time when only fetched entities write them, else walked for their member's
    /// entity. `nil` when the predicate is not that comparison alone, when `object` is not a
    /// saved object of this store of the destination's entity (the rows are then read), or
    /// when the inverse's delete rule is no action (a deleted destination's keys go with it
    /// while its members still name it: they are neither `nil` nor keyed).
    func foreignKeyNullCount(
        _ predicate: FetchPredicate?, entity: EntityDescription, wanted: [Bool], rowCount: () throws -> Int,
        layout: StoreLayout, in snapshot: Snapshot
    ) throws -> Int? {
        guard case .comparison(.keyPath(let path), let op, .constant(let constant), .direct, _)? = predicate,
            let relationship = entity.relationshipsByName[path], relationship.isToOne, !relationship.isTransient,
            relationship.ordinal >= 0, let inverse = relationship.inverseRelationship, inverse.deleteRule != .noAction,
            RelationshipKeys.storage(of: inverse) == .foreignKey(inverse: relationship), let owner = inverse.entity,
            // [MIG-5] Not while the keys are pending: they would miss rows; [MIG-4] nor while
            // retired rows remain, whose keys (as owners or members) are not rows' of the model.
            !layout.keysPending(inverse, in: snapshot), !layout.hasRetiredRows(in: snapshot)
        else { return nil }
        var prefix = layout.relationshipPrefix(inverse, owner: owner)
        // Against an object: the keys under it, the rows that name it.
        var namesObject = false
        switch (constant, op) {
        case (.attribute(.null), .equal), (.attribute(.null), .notEqual):
            break
        case (.object(let id), .notEqual), (.object(let id), .equal):
            guard !id.isTemporaryID, id.entity.isKind(of: owner), let reference = try? integerReference(id) else { return nil }
            KeyLayout.appendReference(reference, to: &prefix)
            namesObject = true
        default:
            return nil
        }
        // The entities whose rows write keys under this prefix: a one-to-many of the owner's
        // hierarchy with this name, kept by their to-one.
        let writesKeys = layout.layoutsByNumber.map { rowLayout in
            rowLayout?.foreignKeys.contains { $0.inverse.name == inverse.name && $0.inverse.entity?.rootEntityName == owner.rootEntityName } ?? false
        }
        let keyed: Int
        if zip(writesKeys, wanted).allSatisfy({ !$0 || $1 }) {
            keyed = snapshot.countKeys(from: prefix, to: RelationshipKeys.end(of: prefix))
        } else {
            var counted = 0
            snapshot.forEachKeyBytes(from: prefix, to: RelationshipKeys.end(of: prefix)) { key in
                if let member = RelationshipKeys.member(fromKeyBytes: key), Int(member.entity) < wanted.count, wanted[Int(member.entity)] {
                    counted += 1
                }
                return true
            }
            keyed = counted
        }
        // `!= nil` and `== object` are the keyed rows; `== nil` and `!= object` the others.
        return (op == .notEqual) != namesObject ? keyed : max(0, try rowCount() - keyed)
    }

    /// [FETCH-S1] The owners of the matching destinations of a one-to-many (keys kept from the
    /// members' to-one, [REL-2]): each match's to-one, read from its row. A row then satisfies
    /// the semi-join exactly when it is one of them, with none of its keys read. `nil` for
    /// other relationships, and when the matches outnumber the fetched entities' rows
    /// (`rowCount`): reading each match's row would then cost more than the rows' keys.
    private func semiJoinOwners(
        _ relationship: RelationshipDescription, matches: [StoredObject], rowCount: Int, in snapshot: Snapshot, layout: StoreLayout
    ) throws -> Set<Int64>? {
        guard relationship.isToMany, case .foreignKey(let inverse) = RelationshipKeys.storage(of: relationship),
            matches.count <= rowCount
        else { return nil }
        let source = RowSource(snapshot: snapshot, store: self, layout: layout)
        var owners = Set<Int64>(minimumCapacity: matches.count)
        for match in matches {
            let owner = try source.withRowOnce(of: match) { fields, entity -> Int64? in
                guard let toOne = entity.relationshipsByName[inverse.name], toOne.ordinal >= 0 else { return nil }
                return try fields.object(atOrdinal: toOne.ordinal)?.reference
            }
            if let owner { owners.insert(owner) }
        }
        return owners
    }

    /// The semi-joins a fetch's compiled predicate found, by the leaf they answer.
    struct SemiJoins {
        private var entries: [(leaf: FetchPredicate, join: SemiJoin)] = []

        mutating func add(_ join: SemiJoin, for leaf: FetchPredicate) {
            if let index = entries.firstIndex(where: { $0.leaf == leaf }) { entries[index].join = join } else { entries.append((leaf, join)) }
        }

        func join(for leaf: FetchPredicate) -> SemiJoin? { entries.first { $0.leaf == leaf }?.join }
    }

    /// A Boolean shared between a fetch's plan and the closures it compiled; one fetch, one
    /// thread.
    final class Flag {
        var value = false
    }

    /// A comparison a fetch answers from what it read before the rows ([FETCH-S1]), tested on
    /// each row's stored references.
    struct SemiJoin {
        enum Test {
            /// Through `relationship` to the destination rows of `references` ([FETCH-S1],
            /// [FETCH-S12]); for a one-to-many whose matches' owners were read, the rows that
            /// satisfy the comparison are `owners`.
            case destinations(RelationshipDescription, references: Set<Int64>, owners: Set<Int64>?)
            /// `SELF IN %@` ([FETCH-S13]): the objects' rows, by concrete entity number and reference.
            case selfObjects(Set<StoredObject>)
            /// `album == nil`, `album != nil`, `album != %@` ([FETCH-S15]): the to-one's ordinal,
            /// the objects compared with (`nil` for nil), and whether the comparison is `==`.
            case toOne(ordinal: Int, objects: Set<StoredObject>?, equal: Bool)
            /// `SUBQUERY(rel, $x, …).@count op constant` ([FETCH-S14]): each owner's number of
            /// matching members, and the comparison.
            case subqueryCount(counts: [Int64: Int], op: FetchComparisonOperator, constant: FetchValue, options: ComparisonOptions)
        }

        let kind: Test
        /// Set when the rows tested are known to satisfy the comparison (they are candidates
        /// read from this join's relationship keys, [FETCH-S2]): the test then answers true.
        let exact = Flag()

        init(_ kind: Test) { self.kind = kind }

        /// The relationship of a join through one, whose destinations' keys can give candidates.
        var relationship: RelationshipDescription? {
            if case .destinations(let relationship, _, _) = kind { return relationship }
            return nil
        }

        /// The destination rows of a join through a relationship.
        var references: Set<Int64> {
            if case .destinations(_, let references, _) = kind { return references }
            return []
        }

        /// Whether a row satisfies the comparison.
        func test<Row: StoredRowAccess>(_ row: Row) throws -> Bool {
            if exact.value { return true }
            switch kind {
            case .selfObjects(let objects):
                return objects.contains(StoredObject(entity: row.entityNumber, reference: row.reference))
            case .toOne(let ordinal, let objects, let equal):
                let target = try row.storedObject(atOrdinal: ordinal)
                guard let objects else { return (target == nil) == equal }
                return !(target.map(objects.contains) ?? false)
            case .subqueryCount(let counts, let op, let constant, let options):
                return try FetchPredicate.compareValues(.attribute(.int64(Int64(counts[row.reference] ?? 0))), op, constant, options: options)
            case .destinations(let relationship, let references, let owners):
                if let owners { return owners.contains(row.reference) }
                if relationship.isToOne {
                    guard let target = try row.storedObject(atOrdinal: relationship.ordinal) else { return false }
                    return references.contains(target.reference)
                }
                // Read until a member matches ([FETCH-S17]: its keys, in order).
                return try row.containsStoredObject(atOrdinal: relationship.ordinal) { references.contains($0.reference) }
            }
        }
    }

    /// [FETCH-S2] The candidate rows of a fetch one of whose top-level conjuncts is a semi-join
    /// through a relationship whose inverse is keyed ([REL-1]): the members of each matching
    /// destination, read from its keys, in reference order, with the semi-join and the conjunct
    /// they satisfy; `nil` when no conjunct qualifies or the candidates would be more than a
    /// third of the rows `rowCount` (a scan is cheaper), unless `keysAnswer` (the fetch is
    /// answered from the candidates' keys, [FETCH-S3], reading no row). Of several qualifying
    /// conjuncts, the one with the fewest destinations is used.
    func keyCandidates(
        _ predicate: FetchPredicate, entity: EntityDescription, joins: SemiJoins, snapshot: Snapshot, rowCount: Int,
        keysAnswer: Bool = false
    ) throws -> (members: [StoredObject], join: SemiJoin, leaf: FetchPredicate)? {
        let layout = try storeLayout()
        let usable = Self.conjuncts(predicate).compactMap { leaf in joins.join(for: leaf).map { (leaf, $0) } }.filter { _, join in
            guard let inverse = join.relationship?.inverseRelationship else { return false }
            // [MIG-5] Not while the inverse's keys are pending: they would miss members.
            return RelationshipKeys.isKeyed(inverse) && !layout.keysPending(inverse, in: snapshot) && join.relationship?.destinationEntity != nil
        }
        guard let (leaf, best) = usable.min(by: { $0.1.references.count < $1.1.references.count }),
            let inverse = best.relationship?.inverseRelationship, let destination = best.relationship?.destinationEntity,
            // Each destination's keys cost a seek, more than a row of a scan.
            best.references.count <= max(64, rowCount)
        else { return nil }
        let cap = keysAnswer ? Int.max : max(rowCount / 3, 64)
        if cap < Int.max, best.references.count > 8 {
            // Counted from the index first (a leaf at a time): members of many destinations
            // past the cap are not collected only to be dropped for a scan (a few destinations'
            // are collected at once: counting costs them a second seek each). A member under
            // several destinations counts for each.
            var counted = 0
            for owner in best.references {
                let prefix = ownerPrefix(inverse, owner: destination, reference: owner)
                counted += snapshot.countKeys(from: prefix, to: RelationshipKeys.end(of: prefix), limit: cap + 1 - counted)
                if counted > cap { return nil }
            }
        }
        if best.references.count == 1, let owner = best.references.first {
            // One destination: its members' keys are in reference order, each once.
            let members = RelationshipKeys.members(ownerPrefix(inverse, owner: destination, reference: owner), in: snapshot)
            return members.count > cap ? nil : (members, best, leaf)
        }
        // The members of every destination, then in reference order, each once (a member of a
        // many-to-many may be under several): an array sorted once costs less than a table
        // hashing each member. A reference names one row, so duplicates are equal objects.
        var members: [StoredObject] = []
        for owner in best.references {
            RelationshipKeys.forEachMember(ownerPrefix(inverse, owner: destination, reference: owner), in: snapshot) { member in
                members.append(member)
                return true
            }
            if members.count > cap {
                members.sortDroppingRepeats { $0.reference }
                if members.count > cap { return nil }
            }
        }
        members.sortDroppingRepeats { $0.reference }
        return (members, best, leaf)
    }

    /// [FETCH-S13] The references a top-level conjunct `SELF == %@` or `SELF IN %@` (objects)
    /// allows in the hierarchy whose key space ([KEY-2]) is `root`, ascending and each once: the integer
    /// references of this store's objects of that hierarchy (an object of another store or
    /// hierarchy, or a temporary ID, is no row of it). `nil` when no conjunct has that shape,
    /// or a constant is not an object. (The fetch reads them only while they are at most a third
    /// of the rows: more, and a scan costs less.)
    ///
    /// `joins` are the fetch's semi-joins: the objects a compiled `SELF IN %@` already made
    /// stored objects of are not looked up a second time.
    func selfCandidates(_ predicate: FetchPredicate, root: String, layout: StoreLayout, joins: SemiJoins) -> [Int64]? {
        for conjunct in Self.conjuncts(predicate) {
            var references: [Int64] = []
            if let join = joins.join(for: conjunct), case .selfObjects(let objects) = join.kind {
                references.reserveCapacity(objects.count)
                for object in objects where layout.entity(number: object.entity).map({ layout.keySpace(of: $0) == root }) == true {
                    references.append(object.reference)
                }
            } else {
                guard let ids = Self.selfComparison(conjunct) else { continue }
                references.reserveCapacity(ids.count)
                for id in ids where layout.keySpace(of: id.entity) == root {
                    if let object = try? storedObject(id, layout: layout) { references.append(object.reference) }
                }
            }
            references.sortDroppingRepeats { $0 }
            return references
        }
        return nil
    }

    /// The top-level conjuncts of a predicate (itself, unless it is an `AND`).
    static func conjuncts(_ predicate: FetchPredicate) -> [FetchPredicate] {
        if case .and(let parts) = predicate { return parts.flatMap(conjuncts) }
        return [predicate]
    }

    /// The objects of `SELF == %@`, `%@ == SELF` or `SELF IN %@` when every constant is an
    /// object; `nil` for anything else.
    static func selfComparison(_ leaf: FetchPredicate) -> [ManagedObjectID]? {
        let values: [FetchValue]
        switch leaf {
        case .comparison(.evaluatedObject, .equal, .constant(let value), .direct, _),
            .comparison(.constant(let value), .equal, .evaluatedObject, .direct, _):
            values = [value]
        case .comparison(.evaluatedObject, .in, .constant(.collection(let list)), .direct, _):
            values = list
        default:
            return nil
        }
        var ids: [ManagedObjectID] = []
        ids.reserveCapacity(values.count)
        for value in values {
            guard case .object(let id) = value else { return nil }
            ids.append(id)
        }
        return ids
    }
}

extension Array {
    /// Sorts the elements by `key` and keeps one of each run of equal keys: each key once, in
    /// ascending order (for references gathered from several places, which name a row each).
    mutating func sortDroppingRepeats<Key: Comparable>(by key: (Element) -> Key) {
        sort { key($0) < key($1) }
        var kept = 0
        for index in indices where kept == 0 || key(self[index]) != key(self[kept - 1]) {
            self[kept] = self[index]
            kept += 1
        }
        removeLast(count - kept)
    }
}

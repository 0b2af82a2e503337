import Foundation
import ObjectGraph
import StrataEngine

extension StrataStore {
    /// The layouts `model` reads a store with whose model record is `record`: the record's
    /// numbers and older layouts when its current version is `model`'s (no difference in what
    /// version hashes cover), else the entities in name order (a store without a readable
    /// record).
    static func storeLayout(for model: ManagedObjectModel, record: ModelRecord?) throws -> StoreLayout {
        if let record, model.differences(fromStoreModel: record.current.model).isEmpty {
            return try StoreLayout(model: model, record: record)
        }
        return try StoreLayout(model: model)
    }

    /// The model record of `snapshot`, or `nil` when it is missing or does not decode (fsck
    /// reports it; [IDX-S6] rewrites it).
    static func modelRecord(in snapshot: Snapshot) throws -> ModelRecord? {
        guard let bytes = try mappingEngineErrors("read the model record", { () throws(StoreError) in try snapshot.get(KeyLayout.modelKey) }) else {
            return nil
        }
        return try? ModelRecord.decodeRecord(bytes)
    }

    /// [CMP-7] The rewrite compaction applies to rows of older layouts `layout` keeps: each
    /// in its entity's newest layout, at the same version; `nil` when it keeps none. A row that
    /// does not upgrade (damage) is copied as it is, for fsck to report, and so is one that
    /// holds members of a relationship whose keys are pending or whose list is still keys
    /// ([MIG-5]: the upgrade would drop them before the build writes them).
    static func compactionRewriter(_ layout: StoreLayout) -> (@Sendable ([UInt8], [UInt8]) -> [UInt8]?)? {
        guard layout.hasLegacy else { return nil }
        return { key, value in
            guard key.first == KeyLayout.rowTag else { return nil }
            return value.withUnsafeBytes { raw in
                if layout.hasPendingKeys {
                    if layout.legacyLayout(ofRow: raw)?.pendingLists.isEmpty == false { return nil }
                    guard let held = try? layout.pendingCandidates(inRow: raw, context: .key(root: "", reference: 0)),
                        held.allSatisfy({ $0.members.isEmpty })
                    else { return nil }
                }
                return (try? RowFields.upgradedIfLegacy(raw, store: layout, context: .key(root: "", reference: 0), readByEngine: true)) ?? nil
            }
        }
    }

    /// What a lightweight migration of a store to another model does ([MIG-1]).
    struct LightweightMigration {
        /// The inferred mapping.
        let mapping: MappingModel
        /// The model record after it.
        var record: ModelRecord
        /// The layouts after it.
        var layout: StoreLayout
        /// The writes besides the two records: relationship keys moved, built or deleted, rows
        /// of removed entities deleted (their index entries go at the index build that
        /// follows), owners' rows given lists, key spaces moved ([MIG-1]).
        var batch = WriteBatch()
        /// Hierarchies that split: per old key space, the entities (by number) that leave it and
        /// the key space each goes to, with its rows, index entries and keys ([MIG-1]).
        var splits: [String: [UInt16: String]] = [:]
        /// Rows the migration rewrites (owners given lists from keys), by key: a split moves
        /// them as rewritten.
        var rewrittenRows: [[UInt8]: [UInt8]] = [:]
    }

    /// [MIG-1] The lightweight migration of the store in `snapshot`, whose model record says
    /// it holds `record.current`, to `model`: the inferred mapping, the new record and layouts,
    /// and the writes it needs besides them. Reads only what the writes need (the keys of a
    /// renamed or removed relationship, the rows of a removed entity).
    ///
    /// - Throws: `ObjectGraphError/Code/inferredMappingFailed` naming every change that
    ///   lightweight migration cannot infer; `incompatibleModel` naming a change StrataStore
    ///   cannot make in place.
    static func planLightweightMigration(
        from record: ModelRecord, to model: ManagedObjectModel, in snapshot: Snapshot, url: URL?
    ) throws -> LightweightMigration {
        let source = record.current.model
        let location = url?.path ?? "(no URL)"
        // Models that share no entity (another application's): never migrated, which would
        // delete every object; refused as [OPEN-1] says.
        let mapping = try MappingModel.inferred(from: source, to: model)
        guard mapping.mapsAnyEntity else {
            var error = ObjectGraphError.incompatibleModel(model.differences(fromStoreModel: source), storeURL: url)
            error.message += " The models share no entity: the store is not migrated (that would delete every object)."
            throw error
        }
        // A change not made in place is refused as an incompatible model, which a coordinator
        // adding the store read-write with the migrate options answers by copying it ([MIG-3]).
        func refuse(_ entity: String, _ property: String?, _ what: String) -> ObjectGraphError {
            ObjectGraphError(
                .incompatibleModel,
                "The StrataStore at \(location) cannot migrate in place: \(what). Nothing was written; added read-write with the migrate options, it is migrated by copy (MigrationManager.migrateStore(at:type:options:mapping:)).",
                entityName: entity, key: property)
        }
        let metadataRecord = (try? recordIfReadable(in: snapshot)) ?? nil
        let rowCounts = metadataRecord?.rowCounts ?? [:]
        // [MIG-5] Keys an earlier migration left pending are written before another one
        // (``migrateLightweight(in:from:to:url:)`` does, in a transaction of its own).
        guard !record.hasPendingKeys, record.retiredRows.isEmpty else {
            throw ObjectGraphError(
                .migrationFailed,
                "The StrataStore at \(location) is still finishing its last migration (\(record.hasPendingKeys ? "writing relationship keys" : "deleting the rows of removed entities")); open it read-write with the model it was last opened with to finish, then migrate it. Nothing was written.")
        }
        let migrated = try record.migrated(to: model, mapping: mapping, rowCounts: rowCounts)
        var plan = LightweightMigration(mapping: mapping, record: migrated, layout: try StoreLayout(model: model, record: migrated))
        // A hierarchy keeps its key space ([KEY-2]) whatever its root is now called: only
        // hierarchies merged under a new root move their keys, into the key space of the one
        // with most rows. Relationship keys ([REL-1]) are moved, built or deleted as their
        // relationships change.
        func oldSpace(_ entity: EntityDescription) -> String { record.keySpace(ofRoot: entity.rootEntityName) }
        func newSpace(_ entity: EntityDescription) -> String { migrated.keySpace(ofRoot: entity.rootEntityName) }
        // The key name ([REL-1], [ROW-5]) and prefix of an old keyed relationship of `entity`.
        func oldKeyName(_ name: String, _ entity: EntityDescription) -> String { record.keyName(keySpace: oldSpace(entity), relationship: name) }
        func oldKeyPrefix(_ name: String, _ entity: EntityDescription) -> [UInt8] {
            RelationshipKeys.relationshipPrefix(root: oldSpace(entity), relationship: oldKeyName(name, entity))
        }
        var keptRelationshipKeys = Set<[UInt8]>()
        // Each old key space and the key space its rows are in now.
        var spaceMoves: [String: String] = [:]
        // Keyed relationships that become lists in rows: the new owner entity and relationship,
        // and the old keys' prefix.
        var listsFromKeys: [(owner: EntityDescription, relationship: RelationshipDescription, keys: [UInt8])] = []
        // The entities kept, each with the entity it was.
        let kept: [(mapping: EntityMapping, entity: EntityDescription, old: EntityDescription)] = mapping.entityMappings.compactMap {
            guard let destinationName = $0.destinationEntityName, let sourceName = $0.sourceEntityName,
                let entity = model.entitiesByName[destinationName], let old = source.entitiesByName[sourceName]
            else { return nil }
            return ($0, entity, old)
        }
        // Hierarchies that split: per old key space, the numbers of the entities that leave it
        // and the key space each goes to ([MIG-1]).
        var splits: [String: [UInt16: String]] = [:]
        var oldRootsOfNewRoot: [String: Set<String>] = [:]
        for (_, entity, old) in kept {
            oldRootsOfNewRoot[entity.rootEntityName, default: []].insert(old.rootEntityName)
            // Of a hierarchy that splits, the part that keeps the old key space stays.
            let from = oldSpace(old), to = newSpace(entity)
            if spaceMoves[from] == nil || to == from { spaceMoves[from] = to }
        }
        for (_, entity, old) in kept where newSpace(entity) != spaceMoves[oldSpace(old)] {
            guard let number = record.current.numbers[old.name] else { continue }
            splits[oldSpace(old), default: [:]][number] = newSpace(entity)
        }
        plan.splits = splits
        if let (space, _) = splits.first {
            // In place only when nothing else moves keys: no hierarchies merge.
            if let merged = oldRootsOfNewRoot.first(where: { $0.value.count > 1 }) {
                throw refuse(
                    merged.key, nil,
                    "the hierarchy of key space \(space) splits while \(merged.value.sorted().joined(separator: " and ")) merge under \(merged.key)")
            }
        }
        // [MIG-4] Keys no entity or relationship reads any more are retired: recorded in the
        // model record and deleted in the background, not here. A key space none of the model's
        // hierarchies keeps (its entities all removed) is retired whole; a removed keyed
        // relationship's keys in a kept one by prefix. Retired keys a prefix of the model
        // claims again (a new relationship of a retired one's name) are deleted first, here.
        let keptSpaces = Set(spaceMoves.keys)
        var retired = migrated.retired
        for old in source.entities where !keptSpaces.contains(oldSpace(old)) { retired.insert(.keySpace(oldSpace(old))) }
        var claimed = Set<[UInt8]>()
        for entity in model.entities {
            for relationship in entity.relationships where relationship.entity === entity && RelationshipKeys.isKeyed(relationship) {
                claimed.insert(plan.layout.relationshipPrefix(relationship, owner: entity))
            }
        }
        for (entityMapping, entity, old) in kept {
            for relationship in entity.relationships where relationship.entity === entity && RelationshipKeys.isKeyed(relationship) {
                guard let before = entityMapping.propertyMapping(named: relationship.name)?.sourcePropertyName
                    .flatMap({ old.relationshipsByName[$0] }), RelationshipKeys.isKeyed(before)
                else { continue }
                keptRelationshipKeys.insert(oldKeyPrefix(before.name, old))
            }
        }
        for entity in source.entities where keptSpaces.contains(oldSpace(entity)) {
            for relationship in entity.relationships where relationship.entity === entity && RelationshipKeys.isKeyed(relationship) {
                if !keptRelationshipKeys.contains(oldKeyPrefix(relationship.name, entity)) {
                    retired.insert(.relationship(keySpace: oldSpace(entity), name: oldKeyName(relationship.name, entity)))
                }
            }
        }
        for entry in retired.sorted() {
            guard case .relationship = entry, let prefix = entry.prefixes.first, claimed.contains(prefix) else { continue }
            snapshot.forEachKey(from: prefix, to: RelationshipKeys.end(of: prefix)) { key in
                plan.batch.delete(key)
                return true
            }
            retired.remove(entry)
        }
        plan.record.retired = retired
        plan.layout = try StoreLayout(model: model, record: plan.record)
        for (entityMapping, entity, old) in kept {
            for relationship in entity.relationships where !relationship.isTransient && relationship.entity === entity {
                let keyed = RelationshipKeys.isKeyed(relationship)
                let before = entityMapping.propertyMapping(named: relationship.name)?.sourcePropertyName
                    .flatMap { old.relationshipsByName[$0] }
                guard let before else { continue }
                let wasKeyed = RelationshipKeys.isKeyed(before)
                switch (wasKeyed, keyed) {
                case (true, true), (false, false):
                    // A keyed relationship keeps its keys where they are, renamed or not: the
                    // record names them for it ([ROW-5]).
                    break
                case (false, true):
                    // A to-one (or ordered to-many) that becomes an unordered to-many: its keys
                    // ([REL-1]) are pending ([MIG-5]): the record lists the old rows' field,
                    // which readers read meanwhile, and the background build writes them.
                    break
                case (true, false):
                    // An unordered to-many made ordered: its members, keys until now, become a
                    // list in each owner's row. The record reads the keys as the list of a row
                    // of an older layout until the background build writes it ([MIG-5]);
                    // unless a new relationship claims the keys' name (deleted above), or the
                    // owner leaves its hierarchy (its list would be read from keys of the key
                    // space it leaves), when the lists are written here (below, once per row).
                    let keys = oldKeyPrefix(before.name, old)
                    let leaves = record.current.numbers[old.name].map { splits[oldSpace(old)]?[$0] != nil } ?? false
                    if claimed.contains(keys) || leaves { listsFromKeys.append((entity, relationship, keys)) }
                }
            }
        }
        // Rows of removed entities of kept hierarchies (subentities) are retired ([MIG-4]):
        // readers skip them by their headers, and the background build deletes them with their
        // index entries and every relationship key naming them. (An entity the metadata record
        // counts no row of has none: nothing is listed.)
        for entityMapping in mapping.entityMappings where entityMapping.mappingType == .remove {
            guard let name = entityMapping.sourceEntityName, let entity = source.entitiesByName[name],
                let number = record.current.numbers[name], keptSpaces.contains(oldSpace(entity)),
                metadataRecord == nil || (rowCounts[name] ?? 0) > 0
            else { continue }
            // A key space merged into another moves with its rows (below).
            let space = spaceMoves[oldSpace(entity)] ?? oldSpace(entity)
            plan.record.retired.insert(.rows(keySpace: space, entity: number))
        }
        plan.layout = try StoreLayout(model: model, record: plan.record)
        if !listsFromKeys.isEmpty {
            try writeLists(
                listsFromKeys, source: source, mapping: mapping, record: record, layout: plan.layout, snapshot: snapshot,
                into: &plan.rewrittenRows)
            for key in plan.rewrittenRows.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                if let bytes = plan.rewrittenRows[key] { plan.batch.put(key, bytes) }
            }
            // Their rows no longer read the keys: those left in older layouts have no members.
            let written = Set(listsFromKeys.map { ObjectIdentifier($0.relationship) })
            for index in plan.record.versions.indices.dropFirst() {
                for (entityName, program) in plan.record.versions[index].upgrades {
                    for (target, upgrade) in program {
                        guard case .listFromKeys = upgrade,
                            let relationship = plan.layout.entity(number: plan.record.versions[index].numbers[entityName] ?? .max)?.relationshipsByName[target],
                            written.contains(ObjectIdentifier(relationship))
                        else { continue }
                        plan.record.versions[index].upgrades[entityName]?[target] = .constant(.null)
                    }
                }
            }
            plan.layout = try StoreLayout(model: model, record: plan.record)
        }
        // Hierarchies that split: the rows that leave, with their index entries and keys, move
        // to their new key spaces, and keys that name them through a relationship that no longer
        // reaches them go to the relationship that does.
        // (Rows given lists above move as rewritten.)
        for (space, leaving) in splits.sorted(by: { $0.key < $1.key }) {
            try splitKeySpace(
                space, leaving: leaving, source: source, model: model, mapping: mapping, record: record, plan: plan, in: snapshot,
                refuse: refuse)
                .forEach { key, value in if let value { plan.batch.put(key, value) } else { plan.batch.delete(key) } }
        }
        // Hierarchies merged under a new root: every key of each merged key space, as the writes
        // above leave it, moves into the key space the new hierarchy keeps.
        for (from, to) in spaceMoves.sorted(by: { $0.key < $1.key }) where from != to {
            try moveKeySpace(from: from, to: to, in: snapshot, batch: &plan.batch)
        }
        return plan
    }

    /// [MIG-1] The rows of the owners of keyed relationships made ordered, rewritten in their
    /// entity's new layout at the same version with each such relationship's members (its old
    /// keys, in key order: by reference) as the list, into `rows` by key; owners without
    /// members keep their rows.
    private static func writeLists(
        _ lists: [(owner: EntityDescription, relationship: RelationshipDescription, keys: [UInt8])], source: ManagedObjectModel,
        mapping: MappingModel, record: ModelRecord, layout: StoreLayout, snapshot: Snapshot, into rows: inout [[UInt8]: [UInt8]]
    ) throws {
        var oldRoots = Set<String>()
        for list in lists {
            if let sourceName = mapping.mapping(ofDestinationEntity: list.owner.name)?.sourceEntityName,
                let old = source.entitiesByName[sourceName]
            {
                oldRoots.insert(record.keySpace(ofRoot: old.rootEntityName))
            }
        }
        for root in oldRoots.sorted() {
            var failure: (any Error)? = nil
            try mappingEngineErrors("scan \(root) rows") { () throws(StoreError) in
                try snapshot.forEachView(from: KeyLayout.rowPrefix(root: root), to: KeyLayout.rowPrefixEnd(root: root)) { key, value in
                    do {
                        guard let reference = KeyLayout.reference(fromKeyBytes: key), !layout.isRetiredRow(value) else { return true }
                        let row = try RowBytes(raw: value, store: layout, context: .key(root: root, reference: reference), readByEngine: true)
                        guard let entity = layout.entity(number: row.entityNumber), let rowLayout = layout.layout(of: entity) else { return true }
                        var members: [Int: [StoredObject]] = [:]  // field index → members
                        for list in lists where entity.isKind(of: list.owner) {
                            guard let field = row.field(ofOrdinal: list.relationship.ordinal) else { continue }
                            var prefix = list.keys
                            KeyLayout.appendReference(reference, to: &prefix)
                            let found = RelationshipKeys.members(prefix, in: snapshot)
                            if !found.isEmpty { members[field] = found }
                        }
                        guard !members.isEmpty else { return true }
                        let bytes = try RowEncoder.encode(layout: rowLayout, version: row.version, entityName: entity.name) { index in
                            if let list = members[index] { return .objects(list) }
                            return try row.value(index)
                        }
                        rows[Array(key)] = bytes
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

    /// [MIG-1] The writes that split the hierarchy of key space `space`: the rows of the
    /// entities (by number) in `leaving` move to the key space each goes to (as the plan
    /// rewrote them, when it gave them lists), with their index entries ([IDX-S1]); each key of
    /// the hierarchy's own relationships ([REL-1]) goes to the relationship of its owner's
    /// entity that reaches its member now, or to the new inverse of the member's, or is
    /// dropped; a keyed relationship of another hierarchy that reached the leaving entities and
    /// no longer does loses their keys, which go to the relationship that does (the inverse of
    /// the moved entity's relationship mapped from its old inverse), if any. Each key maps to
    /// its value, or `nil` for a delete.
    ///
    /// - Throws: `refuse`'s error (the store is then migrated by copy, [MIG-3]) when a split
    ///   cannot be made in place: a relationship that reached entities of the hierarchy it no
    ///   longer reaches and changes storage (keys against a field), one stored in rows whose
    ///   lost destinations' new inverse is stored in rows but of the other kind, or staying
    ///   owners whose entities would route one member's keys differently.
    private static func splitKeySpace(
        _ space: String, leaving: [UInt16: String], source: ManagedObjectModel, model: ManagedObjectModel, mapping: MappingModel,
        record: ModelRecord, plan: LightweightMigration, in snapshot: Snapshot, refuse: (String, String?, String) -> ObjectGraphError
    ) throws -> [([UInt8], [UInt8]?)] {
        let layout = plan.layout, splits = plan.splits
        let oldLayout = try StoreLayout(model: source, record: record)
        func oldNumbers(of entity: EntityDescription) -> Set<UInt16> {
            Set(entity.selfAndAllSubentities.compactMap { record.current.numbers[$0.name] })
        }
        func newNumbers(of entity: EntityDescription) -> Set<UInt16> { Set(entity.selfAndAllSubentities.compactMap { layout.number(of: $0) }) }
        // The numbers of the hierarchy's entities still in the model (staying or leaving).
        let hierarchy = Set(source.entities.filter { oldLayout.keySpace(of: $0) == space }.compactMap { old in
            record.current.numbers[old.name].flatMap { layout.entity(number: $0) == nil ? nil : $0 }
        })
        /// Where `member`'s keys or destinations go for `owner` when the relationship it had (whose
        /// old inverse is `inverseName`) no longer reaches it: the inverse of the relationship of
        /// the member's entity mapped from `inverseName`, when it is a relationship of `owner`.
        func newInverse(
            member: UInt16, inverseName: String?, owner: EntityDescription
        ) -> (moved: EntityDescription, back: RelationshipDescription, target: RelationshipDescription)? {
            guard let inverseName, let moved = layout.entity(number: member),
                let movedMapping = mapping.mapping(ofDestinationEntity: moved.name),
                let back = moved.relationships.first(where: { movedMapping.propertyMapping(named: $0.name)?.sourcePropertyName == inverseName }),
                let target = back.inverseRelationship, owner.isKind(of: target.entity ?? owner)
            else { return nil }
            return (moved, back, target)
        }
        var writes: [([UInt8], [UInt8]?)] = []
        // Relationships that reached the hierarchy's entities and no longer do (one of another
        // hierarchy that reached the leaving ones, or one of this hierarchy that reached across).
        var rehomed: [(prefix: [UInt8], lost: Set<UInt16>, to: [UInt16: [UInt8]])] = []
        for entity in model.entities {
            guard let entityMapping = mapping.mapping(ofDestinationEntity: entity.name),
                let old = entityMapping.sourceEntityName.flatMap({ source.entitiesByName[$0] })
            else { continue }
            for relationship in entity.relationships where relationship.entity === entity && !relationship.isTransient {
                guard let sourceName = entityMapping.propertyMapping(named: relationship.name)?.sourcePropertyName,
                    let before = old.relationshipsByName[sourceName], let oldDestination = before.destinationEntity,
                    let destination = relationship.destinationEntity
                else { continue }
                let lost = oldNumbers(of: oldDestination).subtracting(newNumbers(of: destination)).intersection(hierarchy)
                guard !lost.isEmpty else { continue }
                // A relationship stored in rows (a to-one, an ordered to-many) reads through its
                // entity's upgrades ([ROW-5] `fieldOf`, `listOf`: only the destinations it still
                // reaches) when no row of the entity is in its new layout (the migration gives
                // its entity a new one, [ROW-1]); its rows move unchanged. The new inverse of a
                // lost entity's relationship reads the others through the same upgrades when it
                // is of the same kind.
                if !RelationshipKeys.isKeyed(relationship), !RelationshipKeys.isKeyed(before),
                    entity.selfAndAllSubentities.allSatisfy({ member in
                        // (Numbers are kept: the entity's old layout is its number's.)
                        guard let current = layout.layout(of: member), let previous = oldLayout.unretainedLayout(number: current.number) else { return true }
                        return previous.takeUnretainedValue().layoutID != current.layoutID
                    })
                {
                    for number in lost.sorted() {
                        guard let (moved, back, target) = newInverse(member: number, inverseName: before.inverseName, owner: entity) else { continue }
                        // (A keyed one gets its keys from the same field after the load, [MIG-5].)
                        guard RelationshipKeys.isKeyed(target) || target.isToOne == before.isToOne else {
                            throw refuse(
                                entity.name, target.name,
                                "\(target.name), the new inverse of \(moved.name).\(back.name), is of another kind than \(relationship.name)")
                        }
                    }
                    continue
                }
                guard RelationshipKeys.isKeyed(relationship), RelationshipKeys.isKeyed(before) else {
                    throw refuse(
                        entity.name, relationship.name,
                        "\(entity.name).\(relationship.name) reached entities of \(oldDestination.name)'s hierarchy, which splits, that it no longer reaches, and its storage changes")
                }
                // Keys go to the new inverse when it is keyed too.
                var to: [UInt16: [UInt8]] = [:]
                for number in lost {
                    guard let (moved, back, target) = newInverse(member: number, inverseName: before.inverseName, owner: entity) else { continue }
                    guard RelationshipKeys.isKeyed(target) else {
                        throw refuse(entity.name, target.name, "\(target.name), the new inverse of \(moved.name).\(back.name), is stored in rows")
                    }
                    to[number] = layout.relationshipPrefix(target, owner: entity)
                }
                // (A splitting hierarchy's own keys are routed one by one below.)
                if splits[oldLayout.keySpace(of: old)] == nil { rehomed.append((oldLayout.relationshipPrefix(before, owner: old), lost, to)) }
            }
        }
        // The leaving rows, found by their headers; they move as they are.
        // (By entity number, in an array: most rows stay, and each is asked.)
        var targets = [String?](repeating: nil, count: Int(leaving.keys.max() ?? 0) + 1)
        for (number, target) in leaving { targets[Int(number)] = target }
        var moved = HierarchySplitRows()
        try mappingEngineErrors("read the rows of \(space)") { () throws(StoreError) in
            try snapshot.forEachView(from: KeyLayout.rowPrefix(root: space), to: KeyLayout.rowPrefixEnd(root: space)) { key, value in
                guard value.count >= 4 else { return true }
                let number = RowFields.load(UInt16.self, value, 2)
                guard Int(number) < targets.count, let target = targets[Int(number)], let reference = KeyLayout.reference(fromKeyBytes: key)
                else { return true }
                moved.insert(reference, number: number, space: target)
                let oldKey = Array(key)
                writes.append((oldKey, nil))
                writes.append((KeyLayout.rowKey(root: target, reference: reference), plan.rewrittenRows[oldKey] ?? Array(value)))
                return true
            }
        }
        moved.seal()
        guard !moved.isEmpty || !rehomed.isEmpty else { return writes }
        // Their index entries: the same entry under the new key space.
        let indexPrefix = [IndexKey.tag] + Array(space.utf8) + [0x00]
        snapshot.forEachKeyBytes(from: indexPrefix, to: StrataStore.prefixEnd(indexPrefix)) { bytes in
            guard let reference = KeyLayout.reference(fromKeyBytes: bytes), let target = moved[reference]?.space else { return true }
            let key = Array(bytes)
            writes.append((key, nil))
            writes.append(([IndexKey.tag] + Array(target.utf8) + [0x00] + key[indexPrefix.count...], []))
            return true
        }
        // The hierarchy's own keys. A key of a leaving owner goes under its entity's
        // relationship mapped from the old one, in its new key space; a key of a staying owner
        // stays. Either goes instead, when that relationship no longer reaches the member (or
        // the owner's entity has none), to the inverse of the member's relationship mapped from
        // the old one's inverse, when that is keyed and of the owner's entity; else it is
        // dropped (a relationship stored in rows as that inverse was refused above).
        func route(owner: EntityDescription, oldName: String, member: UInt16) -> [UInt8]? {
            let ownerMapping = mapping.mapping(ofDestinationEntity: owner.name)
            if let relationship = owner.relationships.first(where: {
                RelationshipKeys.isKeyed($0) && ownerMapping?.propertyMapping(named: $0.name)?.sourcePropertyName == oldName
            }), let destination = relationship.destinationEntity, newNumbers(of: destination).contains(member) {
                return layout.relationshipPrefix(relationship, owner: owner)
            }
            let inverseName = ownerMapping?.sourceEntityName.flatMap { source.entitiesByName[$0]?.relationshipsByName[oldName]?.inverseName }
            guard let (_, _, target) = newInverse(member: member, inverseName: inverseName, owner: owner), RelationshipKeys.isKeyed(target)
            else { return nil }
            return layout.relationshipPrefix(target, owner: owner)
        }
        // Per key name of the hierarchy: the relationship's old name, and a new entity of the
        // staying owners that have it (the entities that stay and are kinds of the old entity
        // declaring it, which may itself leave); they must route every member alike.
        var keyRelationships: [String: (oldName: String, staying: EntityDescription?)] = [:]
        // The member numbers some key of a staying owner goes elsewhere for: only keys of
        // staying owners naming one of these are read whole.
        var stayingLost = Set<UInt16>()
        let staying = source.entities.filter { old in
            oldLayout.keySpace(of: old) == space && record.current.numbers[old.name].map { leaving[$0] == nil } == true
        }
        for old in source.entities where oldLayout.keySpace(of: old) == space {
            for relationship in old.relationships where relationship.entity === old && RelationshipKeys.isKeyed(relationship) {
                let keyName = record.keyName(keySpace: space, relationship: relationship.name)
                let owners = staying.filter { $0.isKind(of: old) }.compactMap { entity in
                    mapping.mapping(ofSourceEntity: entity.name)?.destinationEntityName.flatMap { model.entitiesByName[$0] }
                }
                keyRelationships[keyName] = (relationship.name, owners.first)
                let oldPrefix = RelationshipKeys.relationshipPrefix(root: space, relationship: keyName)
                // (Its keys' members are of its old destination's entities still in the model.)
                let members = relationship.destinationEntity.map { oldNumbers(of: $0).filter { layout.entity(number: $0) != nil } } ?? []
                for member in members.sorted() {
                    let routes = owners.map { route(owner: $0, oldName: relationship.name, member: member) }
                    guard let first = routes.first else { break }
                    guard routes.allSatisfy({ $0 == first }) else {
                        throw refuse(
                            old.name, relationship.name,
                            "the entities that keep \(old.name).\(relationship.name) in the hierarchy of key space \(space) no longer share one relationship for it")
                    }
                    if first != oldPrefix { stayingLost.insert(member) }
                }
            }
        }
        let keyPrefix = [RelationshipKeys.tag] + Array(space.utf8) + [0x00]
        var routes: [String: [UInt8]?] = [:]  // "owner number (or s)\0keyName\0member number" → new prefix
        snapshot.forEachKeyBytes(from: keyPrefix, to: RelationshipKeys.end(of: keyPrefix)) { bytes in
            // The owner and member read in place: most keys are of owners that stay, naming
            // members their relationships still reach.
            guard let ownerReference = RelationshipKeys.owner(fromKeyBytes: bytes) else { return true }
            let movedOwner = moved[ownerReference]
            if movedOwner == nil {
                guard !stayingLost.isEmpty, let member = RelationshipKeys.member(fromKeyBytes: bytes), stayingLost.contains(member.entity) else {
                    return true
                }
            }
            let key = Array(bytes)
            guard let parts = RelationshipKeys.parse(key), let relationship = keyRelationships[parts.relationship] else { return true }
            let cacheKey = "\(movedOwner.map { String($0.number) } ?? "s")\u{0}\(parts.relationship)\u{0}\(parts.member.entity)"
            if routes[cacheKey] == nil {
                let owner = movedOwner.flatMap { layout.entity(number: $0.number) } ?? relationship.staying
                routes[cacheKey] = .some(owner.flatMap { route(owner: $0, oldName: relationship.oldName, member: parts.member.entity) })
            }
            guard case .some(let prefix) = routes[cacheKey] else { return true }
            if let prefix, key.starts(with: prefix), key.count == prefix.count + 18 { return true }  // unchanged
            writes.append((key, nil))
            if let prefix {
                writes.append((RelationshipKeys.key(relationshipPrefix: prefix, owner: parts.owner, member: parts.member), []))
            }
            return true
        }
        // Keys naming them through relationships that no longer reach them.
        for (prefix, lost, to) in rehomed {
            snapshot.forEachKeyBytes(from: prefix, to: RelationshipKeys.end(of: prefix)) { bytes in
                // The member's entity read in place: most members stay.
                guard let member = RelationshipKeys.member(fromKeyBytes: bytes), lost.contains(member.entity) else { return true }
                let key = Array(bytes)
                guard let parts = RelationshipKeys.parse(key) else { return true }
                writes.append((key, nil))
                if let target = to[parts.member.entity] {
                    writes.append((RelationshipKeys.key(relationshipPrefix: target, owner: parts.owner, member: parts.member), []))
                }
                return true
            }
        }
        return writes
    }

    /// Appends to `batch` the move of every row, index entry and relationship key of the key
    /// space `oldRoot` ([KEY-2], [IDX-S1], [REL-1]) into the key space `newRoot`: the keys as
    /// `batch` leaves them (a later operation on a key replaces an earlier one), each deleted
    /// and put again under the new name with its value. References are unique across a store,
    /// so key spaces merge without collisions.
    private static func moveKeySpace(from oldRoot: String, to newRoot: String, in snapshot: Snapshot, batch: inout WriteBatch) throws {
        let prefixes = [KeyLayout.rowTag, IndexKey.tag, RelationshipKeys.tag].map { [$0] + Array(oldRoot.utf8) + [0x00] }
        func prefix(of key: [UInt8]) -> [UInt8]? { prefixes.first { key.starts(with: $0) } }
        var final: [[UInt8]: [UInt8]] = [:]
        for prefix in prefixes {
            try mappingEngineErrors("read the keys of \(oldRoot)") { () throws(StoreError) in
                try snapshot.forEach(from: prefix, to: StrataStore.prefixEnd(prefix)) { key, value in
                    final[key] = value
                    return true
                }
            }
        }
        batch.forEach { key, value in
            guard prefix(of: key) != nil else { return }
            final[key] = value
        }
        for (key, value) in final.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            guard let old = prefix(of: key) else { continue }
            batch.delete(key)
            batch.put([key[0]] + Array(newRoot.utf8) + [0x00] + key[old.count...], value)
        }
    }

    /// [MIG-1] Migrates the store in `shared` to `model` in place, in one engine transaction:
    /// the new model record (the old version kept for its rows' layouts), the metadata record
    /// with `model`'s version hashes and the row counts under the new entity names, and the
    /// plan's other writes. Returns the store's layouts under `model`.
    static func migrateLightweight(
        in shared: SharedEngine, from record: ModelRecord, to model: ManagedObjectModel, url: URL?
    ) throws -> StoreLayout {
        try shared.withSavesSettled { _ -> StoreLayout in
            let engine = shared.engine
            var snapshot = try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try engine.snapshot() }
            var record = record
            if record.hasPendingKeys || !record.retiredRows.isEmpty {
                // [MIG-5] Keys an earlier migration left pending (its build cut short) are
                // written first, and [MIG-4] the rows it retired deleted, with the record that
                // no longer lists them.
                var batch = WriteBatch()
                try writeAllPendingKeys(layout: StoreLayout(model: record.current.model, record: record), in: snapshot, into: &batch)
                try deleteAllRetiredRows(of: record, in: snapshot, into: &batch)
                record = record.withoutPendingKeys()
                record.retired = record.retired.filter { if case .rows = $0 { return false } else { return true } }
                batch.put(KeyLayout.modelKey, record.encode())
                _ = try mappingEngineErrors("write the pending relationship keys") { () throws(StoreError) in try engine.commit(batch) }
                snapshot = try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try engine.snapshot() }
            }
            var plan = try planLightweightMigration(from: record, to: model, in: snapshot, url: url)
            try refuseBrokenNewConstraints(of: plan, from: record, to: model, in: snapshot, url: url)
            var metadata = try Self.record(in: snapshot)
            metadata.metadata = migratedMetadata(metadata.metadata, to: model)
            metadata.rowCounts = migratedCounts(metadata.rowCounts, mapping: plan.mapping)
            // [MIG-1] The record names the index entries that exist, not those the model asks
            // for: [IDX-S6] then builds the rest, now or at the next open after a crash.
            var written = plan.record
            written.versions[0].indexEntries = existingIndexEntries(after: plan, from: record, to: model)
            plan.batch.put(KeyLayout.modelKey, written.encode())
            plan.batch.put(KeyLayout.metadataKey, metadata.encode())
            _ = try mappingEngineErrors("commit the migration") { () throws(StoreError) in try engine.commit(plan.batch) }
            engine.logger.notice("migrated the store lightweight, in place", metadata: [
                "path": "\(engine.path)",
                "changedEntities": "\(plan.mapping.entityMappings.filter { $0.mappingType != .copy }.map(\.name))",
                "keptVersions": "\(plan.record.versions.count)",
            ])
            return plan.layout
        }
    }

    /// The index entries ([IDX-S1]) a store holds after the migration `plan` from `record`'s
    /// current model to `model`, as `Entity.attribute` for `model`'s entities: an attribute has
    /// them when the attribute it maps from had them under the same name in the same key space
    /// ([KEY-2]) (a deleted row's entries are deleted with it).
    static func existingIndexEntries(after plan: LightweightMigration, from record: ModelRecord, to model: ManagedObjectModel) -> Set<String> {
        let source = record.current.model
        func oldSpace(_ entity: EntityDescription) -> String { record.keySpace(ofRoot: entity.rootEntityName) }
        var entries = Set<String>()
        for entity in model.entities {
            let space = plan.layout.keySpace(of: entity)
            guard let entityMapping = plan.mapping.mapping(ofDestinationEntity: entity.name),
                let old = entityMapping.sourceEntityName.flatMap({ source.entitiesByName[$0] }),
                oldSpace(old) == space || record.current.numbers[old.name].flatMap({ plan.splits[oldSpace(old)]?[$0] }) == space
            else { continue }
            for attribute in entity.properties.compactMap({ $0 as? AttributeDescription }) {
                guard let from = entityMapping.propertyMapping(named: attribute.name)?.sourcePropertyName, from == attribute.name,
                    old.attributesByName[from]?.hasIndexEntries == true
                else { continue }
                entries.insert(entity.name + "." + attribute.name)
            }
        }
        return entries
    }

    /// Row counts by entity name after a migration: each destination entity takes its source
    /// entity's count.
    static func migratedCounts(_ counts: [String: Int], mapping: MappingModel) -> [String: Int] {
        var result: [String: Int] = [:]
        for entityMapping in mapping.entityMappings {
            guard let destination = entityMapping.destinationEntityName, let source = entityMapping.sourceEntityName else { continue }
            if let rows = counts[source] { result[destination] = rows }
        }
        return result
    }

    /// The coordinator metadata after a migration to `model`: the version hashes are
    /// `model`'s (an entity no longer in it loses its hash); everything else is kept.
    static func migratedMetadata(_ metadata: [String: AttributeValue], to model: ManagedObjectModel) -> [String: AttributeValue] {
        var result = metadata.filter { !$0.key.hasPrefix(PersistentStore.modelVersionHashKeyPrefix) }
        for entity in model.entities {
            result[PersistentStore.modelVersionHashKeyPrefix + entity.name] = .data(entity.versionHash)
        }
        return result
    }

    /// Whether the store's options ask for inferred lightweight migration (Core Data's
    /// `NSMigratePersistentStoresAutomaticallyOption` and
    /// `NSInferMappingModelAutomaticallyOption`, both needed; a persistent container sets
    /// both, a bare coordinator neither).
    var migratesAutomatically: Bool {
        options[PersistentStore.migratePersistentStoresAutomaticallyOption]?.boolValue == true
            && options[PersistentStore.inferMappingModelAutomaticallyOption]?.boolValue == true
    }
}

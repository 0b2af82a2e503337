import Foundation
import ObjectGraph
import StrataEngine
import Synchronization

/// The row layouts of every entity of a model, numbered as the store's model record numbers
/// them ([ROW-1], [ROW-5]), with the layouts of older model versions whose rows a store may
/// still hold, each with the upgrade that reads such a row in its entity's current layout
/// ([MIG-2]).
///
/// Thread safety: immutable after init.
final class StoreLayout: Sendable {
    /// The model the layouts describe.
    let model: ManagedObjectModel
    /// The model record these layouts write ([ROW-5]): the model's version with its numbers
    /// first, then the older versions kept.
    let record: ModelRecord
    /// One more than the largest entity number: the size of tables indexed by number.
    let numberCount: Int
    /// The layouts by entity number (`nil` for a number no entity of the model has).
    let layoutsByNumber: [RowLayout?]
    /// ``layoutsByNumber`` unretained, for readers of many rows (a lookup that counts no
    /// reference); `layoutsByNumber` keeps them alive as long as this object.
    private let unretainedLayouts: [Unmanaged<RowLayout>?]
    /// The entities by number, likewise.
    private let entitiesByNumber: [EntityDescription?]
    private let unretainedEntities: [Unmanaged<EntityDescription>?]
    private let numbers: [String: UInt16]
    /// Numbers by entity object, for the entities of ``model`` (a pointer hash, not a name's).
    private let numbersByEntity: [ObjectIdentifier: UInt16]
    /// A row key ([KEY-1]) of each entity's hierarchy with a zero reference, by entity number:
    /// a row's key is a copy with its reference written in.
    private let rowKeyTemplates: [[UInt8]]
    /// The layouts of older versions, by ``legacyKey(number:layoutID:)``.
    let legacy: [UInt64: LegacyLayout]
    /// Whether ``legacy`` has any layout (a row's layout is looked up only then).
    let hasLegacy: Bool
    /// The key space ([KEY-2]) of each hierarchy, by its root's name.
    private let keySpaces: [String: String]
    /// Whether any hierarchy's key space is not its root's name (when none is, a key space is
    /// read off the entity, with no lookup: saves ask once per object).
    private let renamesKeySpaces: Bool
    /// The hierarchy root of each key space.
    private let rootsByKeySpace: [String: String]
    /// Per key space, the relationships whose keys are under another name, by that name.
    private let relationshipsByKeyName: [String: [String: String]]
    /// The key prefix ([REL-1]) of each relationship of `model`'s entities, by the
    /// relationship's identity (``relationshipPrefix(_:owner:)``): asked per owner a
    /// traversal fires and per semi-join, so made once (the relationships stay alive with
    /// `model`, so no identity is reused).
    private let relationshipPrefixes: [ObjectIdentifier: [UInt8]]

    /// The layouts of `model` alone, its entities numbered in name order (a new store's, or
    /// one whose model record is of format 1).
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidModel`` for a model of more than 65,536
    ///   entities (rows number entities in 16 bits).
    convenience init(model: ManagedObjectModel) throws {
        try self.init(model: model, record: ModelRecord(model: model))
    }

    /// The layouts of the current version of a model record (tools, which have no
    /// application model).
    convenience init(record: ModelRecord) throws {
        try self.init(model: record.current.model, record: record)
    }

    /// The layouts of `model`, whose entities `record`'s current version numbers by name (an
    /// entity it lacks is refused: ``ModelRecord/numbered(_:mapping:)`` numbers a new one);
    /// the record's older versions give the legacy layouts.
    init(model: ManagedObjectModel, record: ModelRecord) throws {
        guard model.entities.count <= Int(UInt16.max) + 1 else {
            throw ObjectGraphError(.invalidModel, "A Strata store holds at most 65,536 entities; the model has \(model.entities.count).")
        }
        var numbers: [String: UInt16] = [:]
        var numbersByEntity: [ObjectIdentifier: UInt16] = [:]
        var count = 0
        for entity in model.entities {
            guard let number = record.current.numbers[entity.name] else {
                throw ObjectGraphError(.storeCorrupted, "The store's model record numbers no entity \(entity.name).", entityName: entity.name)
            }
            numbers[entity.name] = number
            numbersByEntity[ObjectIdentifier(entity)] = number
            count = max(count, Int(number) + 1)
        }
        self.model = model
        var keySpaces: [String: String] = [:], rootsByKeySpace: [String: String] = [:]
        for root in model.entities where root.rootEntityName == root.name {
            let space = record.keySpace(ofRoot: root.name)
            keySpaces[root.name] = space
            rootsByKeySpace[space] = root.name
        }
        self.keySpaces = keySpaces
        renamesKeySpaces = !record.keySpaces.isEmpty
        self.rootsByKeySpace = rootsByKeySpace
        var byKeyName: [String: [String: String]] = [:]
        for (key, name) in record.keyNames {
            let parts = key.split(separator: "\u{0}", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            if parts.count == 2 { byKeyName[parts[0], default: [:]][name] = parts[1] }
        }
        relationshipsByKeyName = byKeyName
        let keySpace = { (root: String) in keySpaces[root] ?? root }
        let keyPrefix = { (relationship: RelationshipDescription, owner: EntityDescription) -> [UInt8] in
            let space = keySpace(owner.rootEntityName)
            return RelationshipKeys.relationshipPrefix(root: space, relationship: record.keyName(keySpace: space, relationship: relationship.name))
        }
        var relationshipPrefixes: [ObjectIdentifier: [UInt8]] = [:]
        for entity in model.entities {
            for relationship in entity.relationships {
                relationshipPrefixes[ObjectIdentifier(relationship)] = keyPrefix(relationship, relationship.entity ?? entity)
            }
        }
        self.relationshipPrefixes = relationshipPrefixes
        var currentLayoutIDs: [String: UInt32] = [:]
        var layouts = [RowLayout?](repeating: nil, count: count)
        var entities = [EntityDescription?](repeating: nil, count: count)
        var templates = [[UInt8]](repeating: [], count: count)
        for entity in model.entities {
            let number = numbers[entity.name] ?? 0
            // The record's layout: a migration may have given one that is not the hash's.
            let layout = RowLayout(entity: entity, number: number, layoutID: record.current.layoutIDs[entity.name], keyPrefix: keyPrefix)
            layouts[Int(number)] = layout
            entities[Int(number)] = entity
            templates[Int(number)] = KeyLayout.rowKey(root: keySpace(entity.rootEntityName), reference: 0)
            currentLayoutIDs[entity.name] = layout.layoutID
        }
        var versions = record.versions
        versions[0] = ModelRecord.Version(model: model, numbers: numbers, layoutIDs: currentLayoutIDs)
        self.record = ModelRecord(
            versions: versions, nextEntity: max(record.nextEntity, UInt16(truncatingIfNeeded: min(count, Int(UInt16.max)))),
            keySpaces: record.keySpaces, retired: record.retired, keyNames: record.keyNames)
        numberCount = count
        layoutsByNumber = layouts
        unretainedLayouts = layouts.map { $0.map { Unmanaged.passUnretained($0) } }
        entitiesByNumber = entities
        unretainedEntities = entities.map { $0.map { Unmanaged.passUnretained($0) } }
        self.numbers = numbers
        self.numbersByEntity = numbersByEntity
        rowKeyTemplates = templates
        var legacy: [UInt64: LegacyLayout] = [:]
        for version in versions.dropFirst() {
            for old in version.model.entities {
                guard let number = version.numbers[old.name], let layoutID = version.layoutIDs[old.name],
                    Int(number) < count, let current = layouts[Int(number)], current.layoutID != layoutID,
                    let entity = entities[Int(number)]
                else { continue }
                let key = Self.legacyKey(number: number, layoutID: layoutID)
                if legacy[key] == nil {
                    legacy[key] = LegacyLayout(
                        old: RowLayout(entity: old, number: number, layoutID: layoutID), current: current, entityName: entity.name,
                        upgrades: version.upgrades[old.name] ?? [:], relationships: entity.relationships)
                }
            }
        }
        self.legacy = legacy
        hasLegacy = !legacy.isEmpty
        var pending = Set<ObjectIdentifier>()
        for layout in legacy.values {
            for (relationship, _) in layout.pendingKeys { pending.insert(ObjectIdentifier(relationship)) }
            for (relationship, _, _) in layout.pendingLists { pending.insert(ObjectIdentifier(relationship)) }
        }
        pendingRelationships = pending
        retiredNumbers = record.retiredRows.values.reduce(into: Set()) { $0.formUnion($1) }
        hasRemovedEntities = Int(self.record.nextEntity) > model.entities.count
        var masks: [ObjectIdentifier: (alone: [Bool], withSubentities: [Bool])] = [:]
        for entity in model.entities {
            func mask(_ entities: [EntityDescription]) -> [Bool] {
                var mask = [Bool](repeating: false, count: count)
                for entity in entities { if let number = numbersByEntity[ObjectIdentifier(entity)] { mask[Int(number)] = true } }
                return mask
            }
            masks[ObjectIdentifier(entity)] = (mask([entity]), mask(entity.selfAndAllSubentities))
        }
        fetchMasks = masks
    }

    /// Each entity's fetch masks (``fetchMask(of:includesSubentities:)``), made once.
    private let fetchMasks: [ObjectIdentifier: (alone: [Bool], withSubentities: [Bool])]

    /// The entity numbers a fetch of `entity` matches, as a flag per number: the entity's, and
    /// its subentities' when they are included. `nil` for an entity of another model (the
    /// layout's model holds its entities, so no other live entity has their identifiers).
    func fetchMask(of entity: EntityDescription, includesSubentities: Bool) -> [Bool]? {
        guard let masks = fetchMasks[ObjectIdentifier(entity)] else { return nil }
        return includesSubentities ? masks.withSubentities : masks.alone
    }

    /// [MIG-4] The entity numbers of retired rows (of removed subentities, still to delete):
    /// every reader skips a row whose header names one.
    let retiredNumbers: Set<UInt16>

    /// [MIG-4] Whether the row `bytes` is a retired one (of a removed entity, still to delete).
    @inline(__always)
    func isRetiredRow(_ bytes: UnsafeRawBufferPointer) -> Bool {
        !retiredNumbers.isEmpty && bytes.count >= 4 && retiredNumbers.contains(RowFields.load(UInt16.self, bytes, 2))
    }

    /// [MIG-4] Whether the row `bytes` is a retired one.
    func isRetiredRow(_ bytes: [UInt8]) -> Bool {
        !retiredNumbers.isEmpty && bytes.withUnsafeBytes { isRetiredRow($0) }
    }

    /// [MIG-1] Whether `number` is the number of an entity a migration removed: below
    /// ``ModelRecord/nextEntity`` (numbers are never reused) and no entity's now. A destination
    /// of such a number is no object (the row, retired, is or will be deleted, [MIG-4]).
    @inline(__always)
    func isRemovedEntity(_ number: UInt16) -> Bool {
        hasRemovedEntities && number < record.nextEntity && entity(number: number) == nil
    }

    /// [MIG-1] Whether some number below ``ModelRecord/nextEntity`` is no entity's now (an
    /// entity a migration removed).
    let hasRemovedEntities: Bool

    /// [MIG-4] Whether retired rows (and the keys naming them) may remain as `snapshot` sees
    /// the store: shortcuts that read index entries or relationship keys across rows without
    /// reading the rows (index-only counts, one-walk key counts, candidates from keys) decline.
    func hasRetiredRows(in snapshot: Snapshot) -> Bool { !retiredNumbers.isEmpty && precedesBuildEnd(snapshot) }

    /// [MIG-5] The keyed relationships (by instance) some rows of older layouts hold members
    /// of in a field, whose keys the background build has not written yet.
    private let pendingRelationships: Set<ObjectIdentifier>
    /// The sequence of the transaction that wrote the last pending key and list ([MIG-5]), 0
    /// until then: a snapshot from that sequence on reads keys and lists alone; an older one
    /// (a fetch that began before) still reads the rows' old fields.
    private let pendingWrittenAt = Atomic<UInt64>(0)

    /// [MIG-5] Whether keys or lists are still pending, for the store as it is now (saves,
    /// compaction, the build).
    var hasPendingKeys: Bool { !pendingRelationships.isEmpty && pendingWrittenAt.load(ordering: .acquiring) == 0 }

    /// [MIG-5] Whether keys or lists are pending as `snapshot` sees the store.
    func hasPendingKeys(in snapshot: Snapshot) -> Bool { !pendingRelationships.isEmpty && precedesBuildEnd(snapshot) }

    /// Whether `snapshot` sees the store before the transaction that ended the build's
    /// migration work ([MIG-4], [MIG-5]), or the build has not ended.
    private func precedesBuildEnd(_ snapshot: Snapshot) -> Bool {
        let written = pendingWrittenAt.load(ordering: .acquiring)
        return written == 0 || snapshot.sequence < written
    }

    /// [MIG-5] Whether, as `snapshot` sees the store, the keys of `relationship` may be
    /// incomplete (readers of one owner's members add those its row holds, and readers of the
    /// keys across owners read owner by owner instead), or its list may still be keys.
    @inline(__always)
    func keysPending(_ relationship: RelationshipDescription, in snapshot: Snapshot) -> Bool {
        !pendingRelationships.isEmpty && pendingRelationships.contains(ObjectIdentifier(relationship)) && hasPendingKeys(in: snapshot)
    }

    /// Records that every pending key and list is written ([MIG-5]) by the transaction of
    /// `sequence`: called by the build once that transaction (which writes the record without
    /// them) has committed.
    func notePendingKeysWritten(at sequence: UInt64) { pendingWrittenAt.store(max(1, sequence), ordering: .releasing) }

    /// Whether `relationship` is one of those an older layout holds pending keys or lists of
    /// (whatever the build has done).
    private func hasPendingWork(_ relationship: RelationshipDescription) -> Bool {
        !pendingRelationships.isEmpty && pendingRelationships.contains(ObjectIdentifier(relationship))
    }

    /// The key of an older layout in ``legacy``.
    static func legacyKey(number: UInt16, layoutID: UInt32) -> UInt64 { UInt64(number) << 32 | UInt64(layoutID) }

    /// The older layout `layoutID` of entity `number`, if the record keeps it.
    @inline(__always)
    func legacyLayout(number: UInt16, layoutID: UInt32) -> LegacyLayout? {
        hasLegacy ? legacy[Self.legacyKey(number: number, layoutID: layoutID)] : nil
    }

    /// The key of the row `reference` of `entity` ([KEY-1], [KEY-2]): a copy of the
    /// hierarchy's key made with the layout, its reference replaced; `nil` for an entity of
    /// another model.
    func rowKey(of entity: EntityDescription, reference: Int64) -> [UInt8]? {
        guard let number = numbersByEntity[ObjectIdentifier(entity)] else { return nil }
        var key = rowKeyTemplates[Int(number)]
        KeyLayout.replaceReference(reference, in: &key)
        return key
    }

    /// The key space ([KEY-2]) of `entity`'s hierarchy: where its rows, index entries and
    /// relationship keys are. The root's name unless the model record names another ([ROW-5]).
    @inline(__always)
    func keySpace(of entity: EntityDescription) -> String { keySpace(ofRoot: entity.rootEntityName) }

    /// The key space of the hierarchy whose root is named `root`.
    func keySpace(ofRoot root: String) -> String { renamesKeySpaces ? keySpaces[root] ?? root : root }

    /// The prefix of the keys ([REL-1]) of `relationship`, a keyed relationship of `owner`
    /// (or of its superentity): in the hierarchy's key space, under the relationship's key
    /// name ([ROW-5]).
    func relationshipPrefix(_ relationship: RelationshipDescription, owner: EntityDescription) -> [UInt8] {
        if relationship.entity != nil, let prefix = relationshipPrefixes[ObjectIdentifier(relationship)] { return prefix }
        let space = keySpace(of: relationship.entity ?? owner)
        return RelationshipKeys.relationshipPrefix(root: space, relationship: record.keyName(keySpace: space, relationship: relationship.name))
    }

    /// The relationship of the hierarchy of key space `space` whose keys are under `keyName`
    /// (the relationship's own name unless the model record names another), if any.
    func relationshipName(keySpace space: String, keyName: String) -> String? {
        if let named = relationshipsByKeyName[space]?[keyName] { return named }
        guard record.keyName(keySpace: space, relationship: keyName) == keyName else { return nil }
        return keyName
    }

    /// The root of the hierarchy whose key space is `space`, if one has it.
    func root(ofKeySpace space: String) -> EntityDescription? {
        rootsByKeySpace[space].flatMap { model.entitiesByName[$0] }
    }

    /// The number of an entity (by name), if the model has it.
    func number(of entityName: String) -> UInt16? { numbers[entityName] }

    /// The number of an entity: by identity for this model's entities, else by name.
    func number(of entity: EntityDescription) -> UInt16? {
        numbersByEntity[ObjectIdentifier(entity)] ?? numbers[entity.name]
    }

    /// The layout of an entity.
    func layout(of entity: EntityDescription) -> RowLayout? {
        number(of: entity).flatMap { layoutsByNumber[Int($0)] }
    }

    /// The layout of entity `number`, unretained (``unretainedLayouts``), if in range.
    @inline(__always)
    func unretainedLayout(number: UInt16) -> Unmanaged<RowLayout>? {
        Int(number) < unretainedLayouts.count ? unretainedLayouts[Int(number)] : nil
    }

    /// The entity numbered `number`, unretained (``unretainedEntities``), if in range.
    @inline(__always)
    func unretainedEntity(number: UInt16) -> Unmanaged<EntityDescription>? {
        Int(number) < unretainedEntities.count ? unretainedEntities[Int(number)] : nil
    }

    /// The entity of a number, if the model numbers one so.
    func entity(number: UInt16) -> EntityDescription? {
        Int(number) < entitiesByNumber.count ? entitiesByNumber[Int(number)] : nil
    }

    /// [MIG-5] What the row `bytes` holds, in fields of an older layout, for the keyed
    /// relationships whose keys are pending, each with its relationship: the members for keys
    /// the owners write; for a one-to-many (keys kept from the members' to-one) candidates
    /// that are members only while their to-one names this owner
    /// (``pendingMembers(inRow:context:owner:read:)`` checks). Empty for a row in a current layout.
    ///
    /// - Throws: `storeCorrupted` for a row that fails its checks or a field that does not
    ///   decode.
    func pendingCandidates(
        inRow bytes: UnsafeRawBufferPointer, context: @autoclosure () -> RowOrigin
    ) throws -> [(relationship: RelationshipDescription, members: [StoredObject])] {
        guard !pendingRelationships.isEmpty else { return [] }
        let row = try RowFields.current(bytes, store: self, context: context(), readByEngine: true)
        guard let legacy = row.legacy, !legacy.pendingKeys.isEmpty else { return [] }
        return try legacy.pendingKeys.map { relationship, field in
            // Only destinations the relationship reaches ([MIG-1]: the field may be one a
            // relationship of a split hierarchy shares with the new inverse of a moved entity's).
            func reached(_ target: StoredObject) -> Bool {
                guard let destination = relationship.destinationEntity, let entity = entity(number: target.entity) else { return false }
                return entity.isKind(of: destination)
            }
            do {
                switch try row.fields.value(field) {
                case .object(let target): return (relationship, reached(target) ? [target] : [])
                case .objects(let targets): return (relationship, targets.filter(reached))
                default: return (relationship, [])
                }
            } catch {
                throw context().locating(error)
            }
        }
    }

    /// [MIG-5] The members of the pending keyed relationships the row `bytes` of the owner
    /// `owner` holds in fields of an older layout: ``pendingCandidates(inRow:context:)``, a
    /// one-to-many's kept when the member's row (`read` gives a row's bytes by key) names
    /// the owner in its to-one.
    func pendingMembers(
        inRow bytes: UnsafeRawBufferPointer, context: @autoclosure () -> RowOrigin, owner: Int64, read: ([UInt8]) throws -> [UInt8]?
    ) throws -> [(relationship: RelationshipDescription, members: [StoredObject])] {
        try pendingCandidates(inRow: bytes, context: context()).map { relationship, candidates in
            (relationship, try confirmed(candidates, of: relationship, owner: owner, read: read))
        }
    }

    /// [MIG-5] The members of `relationship` the row `bytes` of the owner `owner` holds in a
    /// field of an older layout while its keys are pending (as
    /// ``pendingMembers(inRow:context:owner:read:)``); empty otherwise.
    func pendingMembers(
        of relationship: RelationshipDescription, row bytes: UnsafeRawBufferPointer, context: @autoclosure () -> RowOrigin,
        owner: Int64, read: ([UInt8]) throws -> [UInt8]?
    ) throws -> [StoredObject] {
        guard hasPendingWork(relationship),
            let candidates = try pendingCandidates(inRow: bytes, context: context()).first(where: { $0.relationship === relationship })?.members
        else { return [] }
        return try confirmed(candidates, of: relationship, owner: owner, read: read)
    }

    /// `candidates` that are members of `relationship` of `owner`: all of them for keys the
    /// owners write; for a one-to-many, those whose row names `owner` in the to-one inverse
    /// (a member moved to another owner, or deleted, since the migration is not one).
    private func confirmed(
        _ candidates: [StoredObject], of relationship: RelationshipDescription, owner: Int64, read: ([UInt8]) throws -> [UInt8]?
    ) throws -> [StoredObject] {
        guard !candidates.isEmpty, case .foreignKey(let inverse) = RelationshipKeys.storage(of: relationship) else { return candidates }
        return try candidates.filter { member in
            guard let entity = entity(number: member.entity), let key = rowKey(of: entity, reference: member.reference),
                let bytes = try read(key)
            else { return false }
            return try bytes.withUnsafeBytes { raw in
                let row = try RowFields.current(
                    raw, store: self, context: .key(root: keySpace(of: entity), reference: member.reference), readByEngine: true)
                guard let toOne = self.entity(number: row.entityNumber)?.relationshipsByName[inverse.name] else { return false }
                return try row.object(atOrdinal: toOne.ordinal)?.reference == owner
            }
        }
    }

    /// The older layout the row `bytes` is in, if it is in one the record keeps ([MIG-2]).
    func legacyLayout(ofRow bytes: UnsafeRawBufferPointer) -> LegacyLayout? {
        guard hasLegacy, bytes.count >= RowLayout.headerSize else { return nil }
        return legacyLayout(number: RowFields.load(UInt16.self, bytes, 2), layoutID: RowFields.load(UInt32.self, bytes, 4))
    }

    /// [MIG-5] The list of the ordered `relationship` of the owner `reference` whose row is
    /// `bytes`, when the row is in an older layout that held it as keys and lists are still
    /// pending: the keys under the old key name in the owner's key space, in key order
    /// (`members` reads an owner's keys by prefix). `nil` when the row's own field is its list.
    func pendingList(
        of relationship: RelationshipDescription, row bytes: UnsafeRawBufferPointer, reference: Int64,
        members: ([UInt8]) throws -> [StoredObject]
    ) rethrows -> [StoredObject]? {
        guard hasPendingWork(relationship), relationship.isOrdered, let legacy = legacyLayout(ofRow: bytes),
            let pending = legacy.pendingLists.first(where: { $0.relationship === relationship }),
            let entity = entity(number: legacy.current.number)
        else { return nil }
        var prefix = RelationshipKeys.relationshipPrefix(root: keySpace(of: entity), relationship: pending.keyName)
        KeyLayout.appendReference(reference, to: &prefix)
        return try members(prefix)
    }

    /// [MIG-5] The one-to-many relationships whose keys are pending that rows of entity
    /// `number` index through their to-one: each to-one, and the prefix of its inverse's keys.
    func pendingForeignKeys(ofEntity number: UInt16) -> [(toOne: RelationshipDescription, inversePrefix: [UInt8])] {
        guard hasPendingKeys, let layout = unretainedLayout(number: number)?.takeUnretainedValue() else { return [] }
        return layout.foreignKeys.compactMap { hasPendingWork($0.inverse) ? ($0.toOne, $0.inversePrefix) : nil }
    }
}

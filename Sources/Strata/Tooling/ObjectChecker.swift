import Foundation
import ObjectGraph
import StrataEngine

/// One inconsistency between a StrataStore's rows, indexes and metadata.
public struct ObjectProblem: Sendable, Equatable, Codable, CustomStringConvertible {
    /// What kind of inconsistency.
    public enum Kind: String, Sendable, Equatable, Codable {
        /// The metadata record ([ROW-4]) is missing or does not decode.
        case metadata
        /// The model record ([ROW-5]) does not decode.
        case model
        /// A key in no StrataStore key space, or a row key of the wrong shape.
        case strayKey
        /// A row does not decode ([ROW-1]).
        case undecodableRow
        /// A row names an entity the stored model lacks, or sits in another hierarchy's key space.
        case unknownEntity
        /// A stored property the entity lacks, or a value of the wrong type.
        case attributeMismatch
        /// A relationship names an object that is not in the store or not of the destination entity.
        case danglingReference
        /// A relationship whose inverse in the destination row does not point back.
        case inverseMismatch
        /// A relationship key ([REL-1]) that a member's to-one calls for and is missing, or
        /// one whose owner is not in the store or has no such keyed relationship.
        case relationshipKey
        /// A secondary index lacks the entry of a row ([IDX-S1]).
        case missingIndexEntry
        /// A secondary index entry that no row accounts for.
        case extraIndexEntry
        /// The metadata's row count of an entity differs from the rows present.
        case rowCount
        /// The metadata's next reference is not above every stored reference ([KEY-3]).
        case nextReference
    }

    /// What kind.
    public var kind: Kind
    /// The engine key concerned, in hex, if any.
    public var key: String?
    /// The object concerned, as its URI (`x-coredata://<store>/<Entity>/p<ref>`), if known.
    public var object: String?
    /// What is wrong.
    public var message: String

    /// Creates a problem.
    public init(kind: Kind, key: String? = nil, object: String? = nil, message: String) {
        self.kind = kind
        self.key = key
        self.object = object
        self.message = message
    }

    public var description: String {
        var text = "error: \(kind.rawValue)"
        if let object { text += " \(object)" } else if let key { text += " key 0x\(key)" }
        return text + ": " + message
    }
}

/// What ``ObjectChecker/check(engine:repair:)`` found and, when repairing, changed.
public struct ObjectCheckReport: Sendable, Equatable, Codable {
    /// Whether the engine holds a StrataStore at all: a metadata or model record, or rows,
    /// relationship keys or index entries in StrataStore's layout (SPEC.md [META-1]); a bare
    /// engine store gets no object checks.
    public var isObjectStore = false
    /// Whether the store carries its model ([ROW-5]); without it only row decoding and the
    /// metadata are checked.
    public var hasModel = false
    /// Rows read.
    public var rows = 0
    /// Relationship destinations followed.
    public var references = 0
    /// Secondary index entries read.
    public var indexEntries = 0
    /// Relationship keys ([REL-1]) read.
    public var relationshipKeys = 0
    /// Keys a migration retired, not checked: no part of the model reads them, and a
    /// read-write load deletes them in the background (SPEC.md [MIG-4]).
    public var retiredKeys = 0
    /// Every problem, in key order.
    public var problems: [ObjectProblem] = []
    /// What a repair changed, one line per change (empty when not repairing).
    public var repairs: [String] = []
}

/// The object-level half of `strata fsck`: checks that a StrataStore's rows decode under the
/// stored model, that every relationship destination (in a row or a relationship key) exists
/// and points back through its inverse, that secondary indexes hold exactly one entry per
/// indexed attribute of each row, that every relationship key has its owner, and that the
/// metadata's row counts and next reference match the rows.
///
/// Repair removes what cannot be trusted and rebuilds what can be derived: rows that do not
/// decode are deleted, dangling and one-sided relationship links are removed from the rows
/// (or relationship keys) that hold them, a one-to-many's missing key is added from the
/// member's to-one (the row is the truth, the key its index), keys without an owner are
/// deleted, index entries are added or deleted to match the rows, and the metadata's counts
/// and next reference are recomputed, all in one engine transaction. A lost metadata record
/// is rebuilt from the rows ([META-2]): whole with the model record (a new store UUID),
/// else with the next reference only (the application's model completes it). Attribute
/// mismatches and rows of unknown entities are reported, never rewritten; a lost model record
/// is reported, never rebuilt (only the application's model can).
///
/// For example:
///
/// ```swift
/// let engine = try Engine.open(at: path, options: options)
/// let report = try ObjectChecker.check(engine: engine, repair: false)
/// for problem in report.problems { print(problem) }
/// ```
public enum ObjectChecker {
    /// Checks (and with `repair`, mends) the StrataStore in `engine`.
    ///
    /// - Throws: engine errors reading or committing (as `ObjectGraphError`); inconsistencies
    ///   are reported, not thrown.
    public static func check(engine: Engine, repair: Bool) throws -> ObjectCheckReport {
        try check(engine: engine, repair: repair, lost: [])
    }

    /// ``check(engine:repair:)`` knowing what an engine repair dropped ([REC-7]): a rebuilt
    /// next reference also rises above the references of lost keys ([META-2]).
    /// `progress` is told rows checked and rows in all, every 1,024 rows and at the end.
    static func check(
        engine: Engine, repair: Bool, lost: [LostEntry], progress: (@Sendable (Int, Int) -> Void)? = nil
    ) throws -> ObjectCheckReport {
        var run = Run(snapshot: try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try engine.snapshot() }, repair: repair)
        run.progress = progress
        run.lostReference = lost.reduce(0) { max($0, StoreSurvey.references(inKey: $1.key).max() ?? 0) }
        try run.run()
        if repair, !run.batch.isEmpty {
            let batch = run.batch
            _ = try mappingEngineErrors("commit the repairs") { () throws(StoreError) in try engine.commit(batch) }
        }
        return run.report
    }

    /// One check.
    struct Run {
        let snapshot: Snapshot
        let repair: Bool
        var report = ObjectCheckReport()
        var batch = WriteBatch()
        var model: ManagedObjectModel?
        /// Whether the missing model record was reported (once, not per row).
        var reportedMissingModel = false
        /// The row layouts of the stored model ([ROW-1]): rows decode only through it.
        var layout: StoreLayout?
        /// The prefixes of keys the model record retired ([MIG-4]): not checked.
        var retiredPrefixes: [[UInt8]] = []
        /// The references of retired rows ([MIG-4]: of removed entities, whose headers name a
        /// number the model record lists as retired): not checked, nor the keys naming them.
        var retiredReferences = Set<Int64>()
        /// Whether a key is retired (and counted as such).
        mutating func isRetired(_ key: [UInt8]) -> Bool {
            guard !retiredPrefixes.isEmpty, retiredPrefixes.contains(where: { key.starts(with: $0) }) else { return false }
            report.retiredKeys += 1
            return true
        }
        /// Whether an index entry or relationship key names a retired row ([MIG-4]) (and is
        /// counted as retired): an entry of its reference, a key it owns or one naming a
        /// retired entity as member.
        mutating func namesRetiredRow(_ key: [UInt8], relationshipKey: Bool) -> Bool {
            guard let layout, !layout.retiredNumbers.isEmpty else { return false }
            let retired = relationshipKey
                ? RelationshipKeys.parse(key) != nil && key.withUnsafeBytes {
                    StrataStore.RetiredRowDeletion.namesRetired(relationshipKey: $0, references: retiredReferences, numbers: layout.retiredNumbers)
                }
                : IndexKey.reference(fromIndexKey: key).map(retiredReferences.contains) ?? false
            if retired { report.retiredKeys += 1 }
            return retired
        }
        /// The key space ([KEY-2]) of an entity's hierarchy by the stored model record.
        func keySpace(of entity: EntityDescription) -> String { layout?.keySpace(of: entity) ?? entity.rootEntityName }
        var record: MetadataRecord?
        var storeIdentifier = ""
        /// Told rows checked and rows in all as ``checkRows()`` goes.
        var progress: (@Sendable (Int, Int) -> Void)?
        /// Index keys the rows call for.
        var expectedIndex = Set<[UInt8]>()
        /// Links to drop, per row key: (relationship, destination entity, reference).
        var dropLinks: [[UInt8]: [(String, String, Int64)]] = [:]
        /// Rows that are deleted by the repair (they do not decode).
        var deletedRows = Set<[UInt8]>()
        /// One-to-many keys ([REL-2]) that members' to-ones call for and that are missing.
        var missingKeys = Set<[UInt8]>()
        var counts: [String: Int] = [:]
        /// Rows by the entity number and layout their headers name, per hierarchy: what can be
        /// counted without a model.
        var rowKinds: [StoreSurvey.RowKind: Int] = [:]
        /// Whether the metadata record was present (it may not decode).
        var hasMetadataRecord = false
        /// The largest reference a row key or a row's relationship field names, or a key an
        /// engine repair dropped: a surviving next reference must be above it ([KEY-3]).
        var maxReference: Int64 = 0
        /// The largest reference any relationship key or index entry names: a rebuilt next
        /// reference is above it too ([META-2]), since a key may outlive a lost row.
        var maxKeyReference: Int64 = 0
        /// The largest reference of a key an engine repair dropped ([REC-7]).
        var lostReference: Int64 = 0
        /// Destination rows decoded recently (nil: missing or undecodable), so rows many others
        /// point at are decoded once. Bounded: cleared when it passes `targetCacheLimit`.
        var targets: [[UInt8]: TargetRow] = [:]
        static let targetCacheLimit = 100_000

        /// A destination row as the inverse check needs it: its entity and the set of
        /// (entity, reference) pairs each relationship holds.
        struct TargetRow {
            var entity: String
            var links: [String: Set<Link>]
        }

        struct Link: Hashable {
            var entity: String
            var reference: Int64
        }

        init(snapshot: Snapshot, repair: Bool) {
            self.snapshot = snapshot
            self.repair = repair
        }

        mutating func problem(_ kind: ObjectProblem.Kind, key: [UInt8]? = nil, object: String? = nil, _ message: String) {
            report.problems.append(ObjectProblem(kind: kind, key: key.map(hex), object: object, message: message))
        }

        func get(_ key: [UInt8]) throws -> [UInt8]? {
            try mappingEngineErrors("read key 0x\(hex(key))") { () throws(StoreError) in try snapshot.get(key) }
        }

        func uri(_ entity: String, _ reference: Int64) -> String {
            "x-coredata://\(storeIdentifier)/\(entity)/p\(reference)"
        }

        mutating func run() throws {
            let metadataBytes = try get(KeyLayout.metadataKey)
            let modelBytes = try get(KeyLayout.modelKey)
            // [META-1] A StrataStore has a metadata record from its first save on (and a model
            // record); one that lost both is still recognised by its rows and keys. An engine
            // store whose keys merely start with the same bytes is not checked as one.
            guard try metadataBytes != nil || modelBytes != nil || StoreSurvey.survey(snapshot).isStrataStore else { return }
            report.isObjectStore = true
            hasMetadataRecord = metadataBytes != nil
            maxReference = lostReference

            if let metadataBytes {
                do {
                    record = try MetadataRecord.decode(metadataBytes)
                } catch {
                    problem(.metadata, key: KeyLayout.metadataKey, "the metadata record does not decode: \(error)")
                }
            }
            storeIdentifier = record?.metadata["NSStoreUUID"]?.stringValue ?? ""
            if let modelBytes {
                do {
                    let decoded = try ModelRecord.decodeRecord(modelBytes)
                    layout = try StoreLayout(record: decoded)
                    model = decoded.current.model
                    retiredPrefixes = decoded.retired.sorted().flatMap(\.prefixes)
                    report.hasModel = true
                } catch {
                    problem(.model, key: KeyLayout.modelKey, "the model record does not decode: \(error)")
                }
            }

            try checkRows()
            try checkIndexes()
            try checkRelationshipKeys()
            try checkOtherKeys()
            try checkMetadata()
            if repair { try repairRows() }
        }

        // MARK: Rows

        mutating func checkRows() throws {
            // Keys only: each row's value is read once, by `checkRow`.
            var keys: [[UInt8]] = []
            snapshot.forEachKey(from: [KeyLayout.rowTag], to: [KeyLayout.rowTag + 1]) { key in
                keys.append(key)
                return true
            }
            for (done, key) in keys.enumerated() {
                if done % 1024 == 0 { progress?(done, keys.count) }
                try checkRow(key)
            }
            progress?(keys.count, keys.count)
        }

        /// The root name and reference of a row key, if it has the [KEY-2] shape.
        static func parseRowKey(_ key: [UInt8]) -> (root: String, reference: Int64)? {
            guard key.count >= 11, key[0] == KeyLayout.rowTag, key[key.count - 9] == 0,
                let reference = KeyLayout.reference(fromRowKey: key)
            else { return nil }
            let rootBytes = key[1..<(key.count - 9)]
            guard !rootBytes.contains(0), let root = String(validating: rootBytes, as: UTF8.self) else { return nil }
            return (root, reference)
        }

        mutating func checkRow(_ key: [UInt8]) throws {
            if isRetired(key) { return }
            report.rows += 1
            guard let (root, reference) = Self.parseRowKey(key) else {
                problem(.strayKey, key: key, "a key in the row space that is not `0x01 root 0x00 ref`")
                return
            }
            maxReference = max(maxReference, reference)
            guard let bytes = try get(key) else { return }
            if let layout, layout.isRetiredRow(bytes) {
                // [MIG-4] A retired row (of a removed entity, still to delete): counted as
                // retired, not as a row, and not checked.
                report.rows -= 1
                report.retiredKeys += 1
                retiredReferences.insert(reference)
                return
            }
            if let header = bytes.withUnsafeBytes({ RowHeader($0) }) {
                rowKinds[StoreSurvey.RowKind(root: root, number: header.entity, layoutID: header.layoutID), default: 0] += 1
            }
            guard let layout else {
                // Without the model record no row can be read; nothing is judged or repaired.
                if !reportedMissingModel {
                    reportedMissingModel = true
                    problem(
                        .model, key: KeyLayout.modelKey,
                        "the store has rows but no readable model record ([ROW-5]): rows cannot be decoded or checked, and strata fsck cannot rebuild the record; the application's model can: open the store read-write with it (it must match every row, [OPEN-1]) or call StrataStore.rebuildMetadata(at:model:)")
                }
                return
            }
            var row: StoredRow
            do {
                row = try StoredRow.decode(bytes, store: layout, context: "row")
            } catch {
                problem(.undecodableRow, key: key, object: uri(root, reference), "the row does not decode: \(error)")
                deletedRows.insert(key)
                return
            }
            counts[row.entity, default: 0] += 1
            let object = uri(row.entity, reference)
            guard let model else { return }
            do {
                try row.loadRelationshipKeys(reference: reference, store: layout, snapshot: snapshot)
            } catch {
                problem(.relationshipKey, key: key, object: object, "a relationship key does not decode: \(error)")
            }
            guard let entity = model.entitiesByName[row.entity] else {
                problem(.unknownEntity, key: key, object: object, "the stored model has no entity \(row.entity)")
                return
            }
            guard keySpace(of: entity) == root else {
                problem(.unknownEntity, key: key, object: object, "\(row.entity) belongs to the key space of \(entity.rootEntityName)'s hierarchy, \(keySpace(of: entity)), not \(root)")
                return
            }
            for (name, value) in row.attributes.sorted(by: { $0.key < $1.key }) {
                guard let attribute = entity.attributesByName[name], !attribute.isTransient else {
                    problem(.attributeMismatch, key: key, object: object, "\(row.entity) has no stored attribute \(name)")
                    continue
                }
                if let type = value.type, type != attribute.attributeType {
                    problem(.attributeMismatch, key: key, object: object, "\(row.entity).\(name) holds a \(type), the model says \(attribute.attributeType)")
                }
            }
            for name in Array(row.toOne.keys) + Array(row.toMany.keys) where entity.relationshipsByName[name] == nil {
                problem(.attributeMismatch, key: key, object: object, "\(row.entity) has no relationship \(name)")
            }
            for attributeKey in IndexKey.keys(of: row, reference: reference, entity: entity, root: root) {
                expectedIndex.insert(attributeKey)
            }
            for relationship in entity.relationships.sorted(by: { $0.name < $1.name }) where !relationship.isTransient {
                let targets: [(entity: String, reference: Int64)]
                if relationship.isToMany {
                    targets = row.toMany[relationship.name] ?? []
                } else {
                    targets = (row.toOne[relationship.name] ?? nil).map { [$0] } ?? []
                }
                for target in targets {
                    report.references += 1
                    maxReference = max(maxReference, target.reference)
                    try checkLink(from: key, row: row, reference: reference, relationship: relationship, to: target, model: model)
                }
            }
        }

        mutating func checkLink(
            from key: [UInt8], row: StoredRow, reference: Int64, relationship: RelationshipDescription,
            to target: (entity: String, reference: Int64), model: ManagedObjectModel
        ) throws {
            let object = uri(row.entity, reference), targetURI = uri(target.entity, target.reference)
            func drop(_ kind: ObjectProblem.Kind, _ message: String) {
                problem(kind, key: key, object: object, "\(row.entity).\(relationship.name) → \(targetURI): \(message)")
                dropLinks[key, default: []].append((relationship.name, target.entity, target.reference))
            }
            guard let targetEntity = model.entitiesByName[target.entity],
                let destination = relationship.destinationEntity, targetEntity.isKind(of: destination)
            else {
                drop(.danglingReference, "\(target.entity) is not a kind of \(relationship.destinationEntityName)")
                return
            }
            let targetKey = KeyLayout.rowKey(root: keySpace(of: targetEntity), reference: target.reference)
            guard let targetRow = try targetRow(targetKey), targetRow.entity == target.entity else {
                drop(.danglingReference, "the destination is not in the store")
                return
            }
            guard let inverse = relationship.inverseRelationship, !inverse.isTransient else { return }
            if targetRow.links[inverse.name]?.contains(Link(entity: row.entity, reference: reference)) != true {
                if case .foreignKey = RelationshipKeys.storage(of: inverse), let layout, let number = layout.number(of: row.entity) {
                    // The member's to-one is the truth; the owner's key is its index.
                    var prefix = layout.relationshipPrefix(inverse, owner: targetEntity)
                    KeyLayout.appendReference(target.reference, to: &prefix)
                    let missing = RelationshipKeys.key(ownerPrefix: prefix, member: StoredObject(entity: number, reference: reference))
                    problem(.relationshipKey, key: missing, object: object, "\(row.entity).\(relationship.name) → \(targetURI): the key of \(target.entity).\(inverse.name) is missing")
                    missingKeys.insert(missing)
                    return
                }
                drop(.inverseMismatch, "its inverse \(target.entity).\(inverse.name) does not point back")
            }
        }

        /// The destination row at `key`, decoded once while it stays in the bounded cache.
        mutating func targetRow(_ key: [UInt8]) throws -> TargetRow? {
            if let cached = targets[key] { return cached }
            guard let layout, let bytes = try get(key), var row = try? StoredRow.decode(bytes, store: layout, context: "row") else { return nil }
            if let reference = Self.parseRowKey(key)?.reference {
                try? row.loadRelationshipKeys(reference: reference, store: layout, snapshot: snapshot)
            }
            var links: [String: Set<Link>] = [:]
            for (name, target) in row.toOne { links[name] = target.map { [Link(entity: $0.entity, reference: $0.reference)] } ?? [] }
            for (name, list) in row.toMany { links[name] = Set(list.map { Link(entity: $0.entity, reference: $0.reference) }) }
            let decoded = TargetRow(entity: row.entity, links: links)
            if targets.count >= Self.targetCacheLimit { targets.removeAll(keepingCapacity: true) }
            targets[key] = decoded
            return decoded
        }

        // MARK: Indexes

        mutating func checkIndexes() throws {
            var present = Set<[UInt8]>()
            var retired: [[UInt8]] = []
            snapshot.forEachKey(from: [IndexKey.tag], to: [IndexKey.tag + 1]) { key in
                if (retiredPrefixes.isEmpty || !retiredPrefixes.contains(where: { key.starts(with: $0) })) && !namesRetiredRow(key, relationshipKey: false) {
                    present.insert(key)
                } else {
                    retired.append(key)
                }
                return true
            }
            for key in retired { _ = isRetired(key) }
            report.indexEntries = present.count
            for key in present where StoreSurvey.isIndexKey(key) {
                maxKeyReference = max(maxKeyReference, IndexKey.reference(fromIndexKey: key) ?? 0)
            }
            guard model != nil else { return }
            for key in present.subtracting(expectedIndex).sorted(by: { $0.precedes($1) }) {
                let reference = IndexKey.reference(fromIndexKey: key)
                problem(.extraIndexEntry, key: key, "an index entry no row accounts for\(reference.map { " (reference \($0))" } ?? "")")
                if repair {
                    batch.delete(key)
                    report.repairs.append("deleted index entry 0x\(hex(key))")
                }
            }
            for key in expectedIndex.subtracting(present).sorted(by: { $0.precedes($1) }) {
                problem(.missingIndexEntry, key: key, "a row's index entry is missing\(IndexKey.reference(fromIndexKey: key).map { " (reference \($0))" } ?? "")")
                if repair {
                    batch.put(key, [])
                    report.repairs.append("added index entry 0x\(hex(key))")
                }
            }
        }

        mutating func checkOtherKeys() throws {
            var stray: [[UInt8]] = []
            snapshot.forEachKey(from: [], to: [KeyLayout.rowTag]) { key in
                if key != KeyLayout.metadataKey && key != KeyLayout.modelKey { stray.append(key) }
                return true
            }
            snapshot.forEachKey(from: [RelationshipKeys.tag + 1], to: nil) { key in
                stray.append(key)
                return true
            }
            for key in stray { problem(.strayKey, key: key, "a key outside StrataStore's key spaces ([KEY-1], [KEY-2], [IDX-S1], [REL-1])") }
        }

        /// Every relationship key must parse and have an owner row of an entity with that
        /// keyed relationship; its member is checked with the owner's row ([REL-1]).
        mutating func checkRelationshipKeys() throws {
            var keys: [[UInt8]] = []
            snapshot.forEachKey(from: [RelationshipKeys.tag], to: [RelationshipKeys.tag + 1]) { key in
                keys.append(key)
                return true
            }
            if !retiredPrefixes.isEmpty { keys.removeAll { isRetired($0) } }
            keys.removeAll { namesRetiredRow($0, relationshipKey: true) }
            report.relationshipKeys = keys.count
            for key in keys {
                if let parts = RelationshipKeys.parse(key) { maxKeyReference = max(maxKeyReference, parts.owner, parts.member.reference) }
            }
            guard let model, let layout else { return }
            var owners: [[UInt8]: String?] = [:]  // row key → entity name (nil: no usable row)
            for key in keys {
                guard let parts = RelationshipKeys.parse(key) else {
                    problem(.strayKey, key: key, "a key in the relationship space that is not `0x03 root 0x00 relationship 0x00 owner member entity`")
                    continue
                }
                let rowKey = KeyLayout.rowKey(root: parts.root, reference: parts.owner)
                let ownerEntity: String?
                if let known = owners[rowKey] {
                    ownerEntity = known
                } else {
                    let decoded = deletedRows.contains(rowKey) ? nil : try get(rowKey).flatMap { try? RowBytes($0, store: layout, context: "row") }
                    ownerEntity = decoded.flatMap { layout.entity(number: $0.entityNumber)?.name }
                    owners[rowKey] = ownerEntity
                }
                let object = uri(ownerEntity ?? parts.root, parts.owner)
                guard let ownerEntity, let entity = model.entitiesByName[ownerEntity],
                    let name = layout.relationshipName(keySpace: parts.root, keyName: parts.relationship),
                    let relationship = entity.relationshipsByName[name], RelationshipKeys.isKeyed(relationship)
                else {
                    problem(
                        .relationshipKey, key: key, object: object,
                        ownerEntity == nil
                            ? "a relationship key whose owner is not in the store (or does not decode)"
                            : "\(ownerEntity ?? "").\(parts.relationship) is not a keyed to-many relationship")
                    if repair {
                        batch.delete(key)
                        report.repairs.append("deleted relationship key 0x\(hex(key))")
                    }
                    continue
                }
            }
        }

        // MARK: Metadata

        /// Rows per entity by name (with a model), else per hierarchy and entity number.
        func rowSummary() -> String {
            if layout != nil {
                let total = counts.values.reduce(0, +)
                guard total > 0 else { return "no rows" }
                return counts.keys.sorted().map { "\($0) \(counts[$0] ?? 0)" }.joined(separator: ", ") + " (\(total) object\(total == 1 ? "" : "s"))"
            }
            var survey = StoreSurvey()
            survey.rows = rowKinds
            return "\(survey.rowCount) row\(survey.rowCount == 1 ? "" : "s") (\(survey.rowSummary))"
        }

        mutating func checkMetadata() throws {
            guard var record else {
                let lost = hasMetadataRecord ? "does not decode" : "is missing"
                if !hasMetadataRecord {
                    let model = layout == nil ? " and so is the model record ([ROW-5])" : ""
                    problem(
                        .metadata, key: KeyLayout.metadataKey,
                        "the metadata record ([ROW-4]) \(lost)\(model): the row counts, next reference, store UUID and version hashes are lost; the store holds \(rowSummary()), \(report.relationshipKeys) relationship keys and \(report.indexEntries) index entries, references up to \(max(maxReference, maxKeyReference))")
                }
                guard repair else { return }
                var rebuilt = MetadataRecord()
                rebuilt.nextReference = max(maxReference, maxKeyReference) + 1
                if let model {
                    // [META-2] With the model record: everything but the store's identifier.
                    rebuilt.rowCounts = counts
                    let identifier = UUID().uuidString
                    rebuilt.metadata[PersistentStore.storeUUIDKey] = .string(identifier)
                    rebuilt.metadata[PersistentStore.storeTypeKey] = .string(PersistentStore.StoreType.strata.rawValue)
                    for entity in model.entities {
                        rebuilt.metadata[PersistentStore.modelVersionHashKeyPrefix + entity.name] = .data(entity.versionHash)
                    }
                    report.repairs.append(
                        "rebuilt the metadata record from the rows and the model record: rows \(rowSummary()), next reference \(rebuilt.nextReference), version hashes of the model record, a new store UUID \(identifier) (object URIs made before the loss do not resolve)")
                } else {
                    // [META-2] Without a model the rows cannot be named: the record keeps the
                    // references safe, and the application's model completes it at its next
                    // read-write load ([OPEN-1] checks every row's header against it first).
                    report.repairs.append(
                        "rebuilt the metadata record partly: next reference \(rebuilt.nextReference) (above every reference a key names); the row counts (of \(rowSummary())), store UUID and version hashes need the application's model: open the store read-write with it (it must match every row, [OPEN-1]) or call StrataStore.rebuildMetadata(at:model:)")
                }
                batch.put(KeyLayout.metadataKey, rebuilt.encode())
                return
            }
            var changed = false
            if layout != nil {
                for entity in Set(record.rowCounts.keys).union(counts.keys).sorted() {
                    let stored = record.rowCounts[entity] ?? 0, actual = counts[entity] ?? 0
                    if stored != actual {
                        problem(.rowCount, key: KeyLayout.metadataKey, "the metadata counts \(stored) rows of \(entity); the store holds \(actual)")
                        record.rowCounts[entity] = actual == 0 ? nil : actual
                        changed = true
                    }
                }
            } else {
                // Without a model only the total can be checked (and not repaired).
                let stored = record.rowCounts.values.reduce(0, +), actual = rowKinds.values.reduce(0, +)
                if stored != actual {
                    problem(
                        .rowCount, key: KeyLayout.metadataKey,
                        "the metadata counts \(stored) rows in all; the store holds \(rowSummary()) (without a model record they cannot be counted per entity)")
                }
            }
            if record.nextReference <= maxReference {
                problem(.nextReference, key: KeyLayout.metadataKey, "the next reference \(record.nextReference) is not above the largest stored reference \(maxReference): new objects would reuse references")
                record.nextReference = maxReference + 1
                changed = true
            }
            if repair && changed {
                batch.put(KeyLayout.metadataKey, record.encode())
                report.repairs.append("rewrote the metadata record: rows \(rowSummary()), next reference \(record.nextReference)")
            }
        }

        // MARK: Repair

        mutating func repairRows() throws {
            for key in deletedRows.sorted(by: { $0.precedes($1) }) {
                batch.delete(key)
                report.repairs.append("deleted undecodable row 0x\(hex(key))")
            }
            for key in missingKeys.sorted(by: { $0.precedes($1) }) {
                batch.put(key, [])
                report.repairs.append("added relationship key 0x\(hex(key))")
            }
            for key in dropLinks.keys.sorted(by: { $0.precedes($1) }) where !deletedRows.contains(key) {
                guard let layout, let bytes = try get(key), var row = try? StoredRow.decode(bytes, store: layout, context: "row") else { continue }
                var rowChanged = false
                for (name, entity, reference) in dropLinks[key] ?? [] {
                    let object = Self.parseRowKey(key).map { uri(row.entity, $0.reference) } ?? "0x" + hex(key)
                    if let owner = model?.entitiesByName[row.entity], let relationship = owner.relationshipsByName[name],
                        RelationshipKeys.isKeyed(relationship), let (_, ownerReference) = Self.parseRowKey(key),
                        let number = layout.number(of: entity)
                    {
                        var prefix = layout.relationshipPrefix(relationship, owner: owner)
                        KeyLayout.appendReference(ownerReference, to: &prefix)
                        batch.delete(RelationshipKeys.key(ownerPrefix: prefix, member: StoredObject(entity: number, reference: reference)))
                        report.repairs.append("removed \(object).\(name) → \(uri(entity, reference)) (its key)")
                        continue
                    }
                    rowChanged = true
                    if var list = row.toMany[name] {
                        list.removeAll { $0.entity == entity && $0.reference == reference }
                        row.toMany[name] = list
                    } else if let stored = row.toOne[name], let target = stored, target.entity == entity, target.reference == reference {
                        let none: (entity: String, reference: Int64)? = nil
                        row.toOne[name] = none
                    }
                    report.repairs.append("removed \(object).\(name) → \(uri(entity, reference))")
                }
                guard rowChanged else { continue }
                row.version += 1
                batch.put(key, try row.encode(layout))
            }
        }
    }
}

/// Bytes as lowercase hex.
func hex(_ bytes: some Sequence<UInt8>) -> String {
    bytes.map { $0 < 16 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
}

import ObjectGraph
import StrataEngine

/// One object as StrataStore stores it, decoded whole and keyed by name: the form tools
/// (`strata fsck`, `inspect`, `dump`) and repairs work with. Saves, faults and fetches read
/// rows in place through ``RowBytes`` instead. The bytes are format 3 ([ROW-1], see
/// ``RowEncoder``); keyed to-many relationships are added from their keys by
/// ``loadRelationshipKeys(reference:store:snapshot:)``.
struct StoredRow: Equatable {
    /// The concrete entity.
    var entity: String
    /// 1 for a new row, one more per saved change.
    var version: UInt64
    /// Stored attribute values and relationship destinations, by property name.
    var attributes: [String: AttributeValue]
    var toOne: [String: (entity: String, reference: Int64)?]
    var toMany: [String: [(entity: String, reference: Int64)]]

    static func == (a: StoredRow, b: StoredRow) -> Bool {
        a.entity == b.entity && a.version == b.version && a.attributes == b.attributes
            && a.toOne.mapValues { $0.map { "\($0.entity)#\($0.reference)" } } == b.toOne.mapValues { $0.map { "\($0.entity)#\($0.reference)" } }
            && a.toMany.mapValues { $0.map { "\($0.entity)#\($0.reference)" } } == b.toMany.mapValues { $0.map { "\($0.entity)#\($0.reference)" } }
    }

    /// The format of the metadata record ([ROW-4]); it follows the row format (3: unordered
    /// to-many relationships as keys, [REL-1]), so a store of an earlier format is recognised
    /// before any row is read.
    static let formatVersion: UInt8 = 3

    /// The row's bytes under `store`'s layouts.
    ///
    /// - Throws: ``ObjectGraphError/Code/unknownEntity`` for an entity or destination entity
    ///   the model does not have, ``ObjectGraphError/Code/wrongValueType`` for a value that
    ///   does not fit its field.
    func encode(_ store: StoreLayout) throws -> [UInt8] {
        guard let entityDescription = store.model.entitiesByName[entity], let layout = store.layout(of: entityDescription) else {
            throw ObjectGraphError(.unknownEntity, "A row of entity \(entity), which the model does not have.", entityName: entity)
        }
        func object(_ target: (entity: String, reference: Int64)) throws -> StoredObject {
            guard let number = store.number(of: target.entity) else {
                throw ObjectGraphError(.unknownEntity, "\(entity) refers to entity \(target.entity), which the model does not have.", entityName: target.entity)
            }
            return StoredObject(entity: number, reference: target.reference)
        }
        return try RowEncoder.encode(layout: layout, version: version, entityName: entity) { index in
            let field = layout.fields[index]
            switch field.kind {
            case .toOne: return try (toOne[field.name] ?? nil).map { .object(try object($0)) } ?? .null
            case .toMany:
                let list = toMany[field.name] ?? []
                return list.isEmpty ? .null : .objects(try list.map(object))
            default: return .attribute(attributes[field.name] ?? .null)
            }
        }
    }

    /// Decodes a whole row.
    ///
    /// - Throws: ``ObjectGraphError/Code/storeCorrupted`` naming `context` and what is wrong.
    static func decode(_ bytes: [UInt8], store: StoreLayout, context: RowOrigin) throws -> StoredRow {
        try StoredRow(RowBytes(bytes, store: store, context: context), store: store)
    }

}

extension StoredRow {
    /// Adds the row's keyed to-many relationships ([REL-1]), read from `snapshot`'s keys
    /// under `reference`, to ``toMany`` (an owner without members gets an empty list).
    ///
    /// - Throws: ``ObjectGraphError/Code/storeCorrupted`` for a key naming an entity number
    ///   the model does not have.
    mutating func loadRelationshipKeys(reference: Int64, store: StoreLayout, snapshot: Snapshot) throws {
        guard let entity = store.model.entitiesByName[self.entity], let layout = store.layout(of: entity) else { return }
        func named(_ members: [StoredObject], _ relationship: RelationshipDescription) throws -> [(entity: String, reference: Int64)] {
            // [MIG-1] A member of a removed entity is none (its row is retired, [MIG-4]).
            try members.filter { !store.isRemovedEntity($0.entity) }.map { member in
                guard let destination = store.entity(number: member.entity) else {
                    throw ObjectGraphError(.storeCorrupted, "\(self.entity).\(relationship.name) of reference \(reference): a key names entity number \(member.entity), which the model does not have")
                }
                return (destination.name, member.reference)
            }
        }
        for relationship in layout.keyedRelationships {
            var prefix = store.relationshipPrefix(relationship, owner: entity)
            KeyLayout.appendReference(reference, to: &prefix)
            // [MIG-5] With the members the row holds in an older layout while keys are pending.
            let members = StrataStore.merging(
                RelationshipKeys.members(prefix, in: snapshot), try store.pendingMembers(of: relationship, owner: entity, reference: reference, in: snapshot))
            toMany[relationship.name] = try named(members, relationship)
        }
        // [MIG-5] An ordered to-many whose list a row of an older layout still has as keys.
        for relationship in entity.relationships where relationship.isOrdered {
            if let list = try store.pendingList(of: relationship, owner: entity, reference: reference, in: snapshot) {
                toMany[relationship.name] = try named(list, relationship)
            }
        }
    }

    /// Decodes every field of a row read in place.
    init(_ row: RowBytes, store: StoreLayout) throws {
        guard let entity = store.entity(number: row.entityNumber) else {
            throw ObjectGraphError(.storeCorrupted, "\(row.context): entity number \(row.entityNumber)")
        }
        self.init(entity: entity.name, version: row.version, attributes: [:], toOne: [:], toMany: [:])
        func target(_ object: StoredObject) throws -> (entity: String, reference: Int64) {
            guard let destination = store.entity(number: object.entity) else {
                throw ObjectGraphError(.storeCorrupted, "\(row.context): a destination names entity number \(object.entity), which the model does not have")
            }
            return (destination.name, object.reference)
        }
        for (index, field) in row.layout.fields.enumerated() {
            switch try row.value(index) {
            case .null:
                if field.kind == .toOne { toOne[field.name] = .some(nil) }
            case .attribute(let value): attributes[field.name] = value
            // [MIG-1] A destination of a removed entity is none (its row is retired, [MIG-4]).
            case .object(let object): toOne[field.name] = .some(store.isRemovedEntity(object.entity) ? nil : try target(object))
            case .objects(let objects): toMany[field.name] = try objects.filter { !store.isRemovedEntity($0.entity) }.map(target)
            }
        }
    }

}

/// The store-wide record (SPEC.md [ROW-4]): the next reference, per-entity row counts and the
/// coordinator's metadata.
///
/// ```
/// metadata := formatVersion u8 (3) | nextReference varint | count varint | (entity string | rows varint) × count
///             | count varint | (key string | value [ROW-2]) × count
/// ```
struct MetadataRecord: Equatable {
    var nextReference: Int64 = 1
    var rowCounts: [String: Int] = [:] {
        didSet { if rowCounts.count != oldValue.count { sortedNames = nil } }
    }
    var metadata: [String: AttributeValue] = [:] {
        didSet { if encodedMetadata != nil, metadata != oldValue { encodedMetadata = nil } }
    }
    /// ``rowCounts``'s names in order, kept while the set of names is the same (every save
    /// encodes the record; its entities rarely change).
    private var sortedNames: [String]?
    /// ``metadata`` encoded, kept until it changes (a save re-encodes the record, not the
    /// store's metadata).
    private var encodedMetadata: [UInt8]?

    init(nextReference: Int64 = 1, rowCounts: [String: Int] = [:], metadata: [String: AttributeValue] = [:]) {
        self.nextReference = nextReference
        self.rowCounts = rowCounts
        self.metadata = metadata
    }

    static func == (a: MetadataRecord, b: MetadataRecord) -> Bool {
        a.nextReference == b.nextReference && a.rowCounts == b.rowCounts && a.metadata == b.metadata
    }

    /// The rows of the named entities, summed.
    func rowCount<Names: Sequence<String>>(of names: Names) -> Int {
        names.reduce(0) { $0 + (rowCounts[$1] ?? 0) }
    }

    /// The record's bytes.
    func encode() -> [UInt8] {
        var copy = self
        return copy.encodeKeepingCaches()
    }

    /// The record's bytes, keeping the order of the names and the encoded metadata for the
    /// next encoding while they still hold (every save encodes the record; its entities and
    /// the store's metadata rarely change). The bytes are those of ``encode()``.
    mutating func encodeKeepingCaches() -> [UInt8] {
        var writer = RowWriter()
        writer.u8(StoredRow.formatVersion)
        writer.varint(UInt64(nextReference))
        writer.varint(UInt64(rowCounts.count))
        let names: [String]
        if let sortedNames, sortedNames.count == rowCounts.count, sortedNames.allSatisfy({ rowCounts[$0] != nil }) {
            names = sortedNames
        } else {
            names = rowCounts.keys.sorted()
            sortedNames = names
        }
        for name in names {
            writer.string(name)
            writer.varint(UInt64(max(0, rowCounts[name] ?? 0)))
        }
        if let encodedMetadata {
            writer.bytes += encodedMetadata
        } else {
            var tail = RowWriter()
            tail.varint(UInt64(metadata.count))
            for key in metadata.keys.sorted() {
                tail.string(key)
                tail.value(metadata[key] ?? .null)
            }
            encodedMetadata = tail.bytes
            writer.bytes += tail.bytes
        }
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8]) throws -> MetadataRecord {
        var reader = RowReader(bytes, context: "metadata record")
        let format = try reader.u8()
        if format == 1 || format == 2 {
            throw ObjectGraphError(
                .storeOpenFailed,
                "The store was written by an earlier Strata (row format \(format)); this build reads format \(StoredRow.formatVersion). Copy its objects out with the earlier build (`strata dump` shows them; a fetch of each entity reads them) and insert them into a new store made by this build: model migration, lightweight or staged, converts stores of this format only.")
        }
        guard format == StoredRow.formatVersion else { throw reader.fail("unsupported metadata format \(format)") }
        var record = MetadataRecord()
        let next = try reader.varint()
        guard next <= UInt64(Int64.max) else { throw reader.fail("next reference out of range") }
        record.nextReference = Int64(next)
        let counts = try reader.varint()
        guard counts <= UInt64(bytes.count) else { throw reader.fail("count") }
        for _ in 0..<counts {
            let name = try reader.string()
            let rows = try reader.varint()
            guard rows <= UInt64(Int.max) else { throw reader.fail("row count out of range") }
            record.rowCounts[name] = Int(rows)
        }
        let entries = try reader.varint()
        guard entries <= UInt64(bytes.count) else { throw reader.fail("count") }
        for _ in 0..<entries { record.metadata[try reader.string()] = try reader.value() }
        guard reader.isAtEnd else { throw reader.fail("trailing bytes") }
        return record
    }
}

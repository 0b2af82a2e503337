import Foundation
import ObjectGraph
import StrataEngine
import Synchronization

/// How the rows of one entity are laid out (SPEC.md [ROW-1], format 3): its stored
/// properties in name order (unordered to-many relationships excepted: they are keys,
/// [REL-1]), each a fixed-width field or a variable-width one.
///
/// Built once per entity and store; every row of the entity is read and written through it,
/// so no row carries a property name. The order is by name, not by ordinal, so that two
/// models whose entities declare the same properties in another order (and so have the same
/// version hash) read the same bytes the same way.
final class RowLayout: Sendable {
    /// What a field holds and how wide it is.
    enum Kind: Sendable, Equatable {
        case int16, int32, int64, bool, double, float, date, uuid
        /// A destination: entity number u16, reference i64.
        case toOne
        /// Variable width: string, decimal text, URI text, bytes, or destinations.
        case string, decimal, uri, data, transformable, toMany

        /// The bytes a fixed-width field takes; 0 for a variable-width one.
        var width: Int {
            switch self {
            case .int16: return 2
            case .int32, .float: return 4
            case .int64, .double, .date: return 8
            case .bool: return 1
            case .uuid: return 16
            case .toOne: return RowLayout.objectWidth
            case .string, .decimal, .uri, .data, .transformable, .toMany: return 0
            }
        }
    }

    /// One stored property in the layout.
    struct Field: Sendable {
        /// The property's ordinal in its entity (``PropertyDescription/ordinal``).
        let ordinal: Int
        let name: String
        let kind: Kind
        /// Fixed width: byte offset in the fixed area. Variable width: index in the ends table.
        let position: Int
    }

    /// The bytes of one object reference: entity number (u16) and reference (i64).
    static let objectWidth = 10
    /// The bytes before the null bitmap: format, flags, entity, layout, version.
    static let headerSize = 16
    /// The bytes of the checksum that ends a row.
    static let trailerSize = 4

    /// The entity's number in the store ([ROW-1]).
    let number: UInt16
    /// The first four bytes of the entity's version hash: names the layout a row was written in.
    let layoutID: UInt32
    /// The stored properties, in name order.
    let fields: [Field]
    /// For each ordinal of the entity, the index of its field, or -1 (transient).
    let fieldOfOrdinal: [Int]
    /// Bytes of the fixed area.
    let fixedSize: Int
    /// Variable-width fields.
    let variableCount: Int
    /// The entity's unordered to-many relationships, stored as keys ([REL-1]), not fields.
    let keyedRelationships: [RelationshipDescription]
    /// The keyed relationships whose keys the owner writes (many-to-many, or no inverse), each
    /// with its key prefix ([REL-1], made once: a save writes keys under it).
    let joins: [(relationship: RelationshipDescription, prefix: [UInt8])]
    /// The entity's to-one relationships whose inverse is a keyed one-to-many: each change of
    /// the to-one moves the member's key from owner to owner ([REL-2]); with the inverse's key
    /// prefix ([REL-1], made once).
    let foreignKeys: [(toOne: RelationshipDescription, inverse: RelationshipDescription, inversePrefix: [UInt8])]

    /// Bytes of the null bitmap.
    var nullBytes: Int { (fields.count + 7) / 8 }
    /// Offset of the fixed area (stored, like the offsets after it: every field read uses them).
    let fixedStart: Int
    /// Offset of the ends table.
    let endsStart: Int
    /// Offset of the variable area.
    let variableStart: Int

    /// The layout an entity's rows carry when nothing else names it: the first four bytes of
    /// its version hash, big-endian ([ROW-1]).
    static func layoutID(of entity: EntityDescription) -> UInt32 {
        var id: UInt32 = 0
        for byte in entity.storageHash.prefix(4) { id = id << 8 | UInt32(byte) }
        return id
    }

    /// The layout of `entity`'s rows, numbered `number`, named `layoutID` (its hash's by
    /// default; a model record names the layouts of older versions, [ROW-5]), its relationship
    /// keys under the prefixes `keyPrefix` gives a relationship and the entity that has it
    /// ([REL-1]; by default in the root's key space, under the relationship's name).
    init(
        entity: EntityDescription, number: UInt16, layoutID: UInt32? = nil,
        keyPrefix: (RelationshipDescription, EntityDescription) -> [UInt8] = {
            RelationshipKeys.relationshipPrefix(root: $1.rootEntityName, relationship: $0.name)
        }
    ) {
        self.number = number
        self.layoutID = layoutID ?? Self.layoutID(of: entity)
        // Unordered to-many relationships are keys, not fields ([REL-1]).
        let stored = entity.properties.filter { property in
            guard !property.isTransient else { return false }
            guard let relationship = property as? RelationshipDescription else { return true }
            return !RelationshipKeys.isKeyed(relationship)
        }.sorted { $0.name < $1.name }
        keyedRelationships = entity.relationships.filter(RelationshipKeys.isKeyed)
        joins = keyedRelationships.filter { RelationshipKeys.storage(of: $0) == .join }.map {
            ($0, keyPrefix($0, $0.entity ?? entity))
        }
        foreignKeys = entity.relationships.compactMap { toOne in
            guard toOne.isToOne, !toOne.isTransient, let inverse = toOne.inverseRelationship,
                RelationshipKeys.storage(of: inverse) == .foreignKey(inverse: toOne),
                let owner = inverse.entity ?? toOne.destinationEntity
            else { return nil }
            return (toOne, inverse, keyPrefix(inverse, owner))
        }
        var fields: [Field] = []
        var fixed = 0, variable = 0
        var fieldOfOrdinal = [Int](repeating: -1, count: entity.properties.count)
        for property in stored {
            let kind = Self.kind(of: property)
            let position: Int
            if kind.width > 0 {
                position = fixed
                fixed += kind.width
            } else {
                position = variable
                variable += 1
            }
            if property.ordinal >= 0 && property.ordinal < fieldOfOrdinal.count { fieldOfOrdinal[property.ordinal] = fields.count }
            fields.append(Field(ordinal: property.ordinal, name: property.name, kind: kind, position: position))
        }
        self.fields = fields
        self.fieldOfOrdinal = fieldOfOrdinal
        self.fixedSize = fixed
        self.variableCount = variable
        fixedStart = Self.headerSize + (fields.count + 7) / 8
        endsStart = fixedStart + fixed
        variableStart = endsStart + 4 * variable
    }

    static func kind(of property: PropertyDescription) -> Kind {
        if let relationship = property as? RelationshipDescription { return relationship.isToMany ? .toMany : .toOne }
        switch (property as? AttributeDescription)?.attributeType ?? .binaryData {
        case .integer16: return .int16
        case .integer32: return .int32
        case .integer64: return .int64
        case .double: return .double
        case .float: return .float
        case .decimal: return .decimal
        case .boolean: return .bool
        case .string: return .string
        case .date: return .date
        case .binaryData: return .data
        case .uuid: return .uuid
        case .uri: return .uri
        case .transformable: return .transformable
        }
    }
}

/// An older layout of an entity's rows ([MIG-2]): how each field of the entity's current
/// layout is read from a row written in it.
///
/// Thread safety: immutable after init.
final class LegacyLayout: Sendable {
    /// Where a current field's value comes from.
    enum Source: Sendable {
        /// The old row's field, or `fallback` when it is null (a required attribute's default).
        case field(Int, fallback: FieldValue)
        /// The old row's to-one field as an ordered to-many of one destination.
        case listOfOne(Int)
        /// A constant: the property's default value (null for a relationship).
        case constant(FieldValue)
        /// [MIG-1] The old row's to-one field when its destination's entity is one of these.
        case fieldOf(Int, Set<UInt16>)
        /// [MIG-1] The old row's to-one or ordered to-many field as an ordered to-many of the
        /// destinations whose entity is one of these.
        case listOf(Int, Set<UInt16>)
    }

    /// The old layout.
    let old: RowLayout
    /// The entity's current layout.
    let current: RowLayout
    /// One source per field of ``current``.
    let sources: [Source]
    /// The entity's name, for errors.
    let entityName: String
    /// [MIG-5] The keyed relationships of the current entity whose members a row in this
    /// layout may hold in a field of its own (the old to-one or ordered list), each with that
    /// field of ``old``: their keys may not be written yet.
    let pendingKeys: [(relationship: RelationshipDescription, field: Int)]
    /// [MIG-5] The ordered to-many relationships of the current entity that a row in this
    /// layout held as keys: each with its field of ``current`` and the key name its keys are
    /// under in the owner's key space. The row's list is those keys until the build writes it.
    let pendingLists: [(relationship: RelationshipDescription, field: Int, keyName: String)]

    /// How the current fields read a row laid out as `old`, by the record's `upgrades` (per
    /// current property name, [ROW-5]); a field without one reads null. `relationships` are
    /// the current entity's, which pending upgrades name ([MIG-5]).
    init(
        old: RowLayout, current: RowLayout, entityName: String, upgrades: [String: ModelRecord.Upgrade],
        relationships: [RelationshipDescription] = []
    ) {
        self.old = old
        self.current = current
        self.entityName = entityName
        var fieldOfName: [String: Int] = [:]
        for (index, field) in old.fields.enumerated() { fieldOfName[field.name] = index }
        pendingKeys = relationships.filter(RelationshipKeys.isKeyed).compactMap { relationship in
            guard case .pendingKeys(let source)? = upgrades[relationship.name], let field = fieldOfName[source] else { return nil }
            return (relationship, field)
        }
        pendingLists = current.fields.indices.compactMap { index in
            guard case .listFromKeys(let keyName)? = upgrades[current.fields[index].name],
                let relationship = relationships.first(where: { $0.ordinal == current.fields[index].ordinal })
            else { return nil }
            return (relationship, index, keyName)
        }
        func value(_ value: AttributeValue) -> FieldValue { value.isNull ? .null : .attribute(value) }
        sources = current.fields.map { field in
            switch upgrades[field.name] {
            case .field(let name, let fallback)?:
                return fieldOfName[name].map { .field($0, fallback: value(fallback)) } ?? .constant(.null)
            case .listOfOne(let name)?:
                return fieldOfName[name].map { .listOfOne($0) } ?? .constant(.null)
            case .constant(let constant)?:
                return .constant(value(constant))
            case .fieldOf(let name, let entities)?:
                return fieldOfName[name].map { .fieldOf($0, entities) } ?? .constant(.null)
            case .listOf(let name, let entities)?:
                return fieldOfName[name].map { .listOf($0, entities) } ?? .constant(.null)
            case .pendingKeys?, .listFromKeys?, nil:
                return .constant(.null)
            }
        }
    }

    /// The bytes of `row` (checked against ``old``) in the current layout, at the same version.
    ///
    /// - Throws: `storeCorrupted` for a field of the old row that does not decode.
    func upgrade(_ row: RowFields) throws -> [UInt8] {
        try RowEncoder.encode(layout: current, version: row.version, entityName: entityName) { index in try value(index, of: row) }
    }

    /// The value of field `index` of ``current`` for `row` (checked against ``old``), read
    /// from the old row's field it comes from without encoding the rest.
    ///
    /// - Throws: `storeCorrupted` for the old row's field that does not decode.
    func value(_ index: Int, of row: RowFields) throws -> FieldValue {
        switch sources[index] {
        case .field(let field, let fallback):
            let value = try row.value(field)
            return value == .null || value == .attribute(.null) ? fallback : value
        case .listOfOne(let field):
            if case .object(let target) = try row.value(field) { return .objects([target]) }
            return .null
        case .constant(let value):
            return value
        case .fieldOf(let field, let entities):
            if case .object(let target) = try row.value(field), entities.contains(target.entity) { return .object(target) }
            return .null
        case .listOf(let field, let entities):
            switch try row.value(field) {
            case .object(let target): return entities.contains(target.entity) ? .objects([target]) : .null
            case .objects(let targets): return .objects(targets.filter { entities.contains($0.entity) })
            default: return .null
            }
        }
    }
}

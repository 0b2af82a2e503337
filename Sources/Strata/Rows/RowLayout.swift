import Foundation
import ObjectGraph

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

    init(entity: EntityDescription, number: UInt16) {
        self.number = number
        var id: UInt32 = 0
        for byte in entity.versionHash.prefix(4) { id = id << 8 | UInt32(byte) }
        self.layoutID = id
        // Unordered to-many relationships are keys, not fields ([REL-1]).
        let stored = entity.properties.filter { property in
            guard !property.isTransient else { return false }
            guard let relationship = property as? RelationshipDescription else { return true }
            return !RelationshipKeys.isKeyed(relationship)
        }.sorted { $0.name < $1.name }
        keyedRelationships = entity.relationships.filter(RelationshipKeys.isKeyed)
        joins = keyedRelationships.filter { RelationshipKeys.storage(of: $0) == .join }.map {
            ($0, RelationshipKeys.relationshipPrefix(root: ($0.entity ?? entity).rootEntityName, relationship: $0.name))
        }
        foreignKeys = entity.relationships.compactMap { toOne in
            guard toOne.isToOne, !toOne.isTransient, let inverse = toOne.inverseRelationship,
                RelationshipKeys.storage(of: inverse) == .foreignKey(inverse: toOne),
                let owner = inverse.entity ?? toOne.destinationEntity
            else { return nil }
            return (toOne, inverse, RelationshipKeys.relationshipPrefix(root: owner.rootEntityName, relationship: inverse.name))
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

/// The row layouts of every entity of a model, numbered by the entities' names in sorted
/// order (the order of the model record, [ROW-5]).
///
/// Thread safety: immutable after init.
final class StoreLayout: Sendable {
    /// The model the layouts describe.
    let model: ManagedObjectModel
    /// The entities by number.
    let entities: [EntityDescription]
    /// The layouts by entity number.
    let layouts: [RowLayout]
    /// ``layouts`` unretained, for readers of many rows (a lookup that counts no reference);
    /// `layouts` keeps them alive as long as this object.
    private let unretainedLayouts: [Unmanaged<RowLayout>]
    /// ``entities`` unretained, likewise.
    private let unretainedEntities: [Unmanaged<EntityDescription>]
    private let numbers: [String: UInt16]
    /// Numbers by entity object, for the entities of ``model`` (a pointer hash, not a name's).
    private let numbersByEntity: [ObjectIdentifier: UInt16]
    /// A row key ([KEY-1]) of each entity's hierarchy with a zero reference, by entity number:
    /// a row's key is a copy with its reference written in.
    private let rowKeyTemplates: [[UInt8]]

    /// - Throws: ``ObjectGraphError/Code/invalidModel`` for a model of more than 65,536
    ///   entities (rows number entities in 16 bits).
    init(model: ManagedObjectModel) throws {
        guard model.entities.count <= Int(UInt16.max) + 1 else {
            throw ObjectGraphError(.invalidModel, "A Strata store holds at most 65,536 entities; the model has \(model.entities.count).")
        }
        self.model = model
        let sorted = model.entities.sorted { $0.name < $1.name }
        entities = sorted
        layouts = sorted.enumerated().map { RowLayout(entity: $1, number: UInt16(truncatingIfNeeded: $0)) }
        unretainedLayouts = layouts.map { Unmanaged.passUnretained($0) }
        unretainedEntities = sorted.map { Unmanaged.passUnretained($0) }
        var numbers: [String: UInt16] = [:]
        var numbersByEntity: [ObjectIdentifier: UInt16] = [:]
        for (index, entity) in sorted.enumerated() {
            numbers[entity.name] = UInt16(truncatingIfNeeded: index)
            numbersByEntity[ObjectIdentifier(entity)] = UInt16(truncatingIfNeeded: index)
        }
        self.numbers = numbers
        self.numbersByEntity = numbersByEntity
        rowKeyTemplates = sorted.map { KeyLayout.rowKey(root: $0.rootEntityName, reference: 0) }
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

    /// The number of an entity (by name), if the model has it.
    func number(of entityName: String) -> UInt16? { numbers[entityName] }

    /// The number of an entity: by identity for this model's entities, else by name.
    func number(of entity: EntityDescription) -> UInt16? {
        numbersByEntity[ObjectIdentifier(entity)] ?? numbers[entity.name]
    }

    /// The layout of an entity.
    func layout(of entity: EntityDescription) -> RowLayout? {
        number(of: entity).map { layouts[Int($0)] }
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

    /// The entity of a number, if in range.
    func entity(number: UInt16) -> EntityDescription? {
        Int(number) < entities.count ? entities[Int(number)] : nil
    }
}

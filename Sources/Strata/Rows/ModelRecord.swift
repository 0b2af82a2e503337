import ObjectGraph

/// The model a store was last saved with (SPEC.md [ROW-5]), so tools can decode and check a
/// store's rows without the application's code.
///
/// ```
/// model    := format u8 (1) | count varint | entity × count
/// entity   := name string | superentity string ("" for none) | flags u8 (1 abstract)
///             | count varint | property × count
/// property := name string | kind u8 | flags u8 (1 optional, 2 transient, 4 index entries) | payload
///             kind 0 attribute:    type string (AttributeType's raw value)
///             kind 1 relationship: destination string | inverse string ("" for none)
///                                  | toMany u8 | ordered u8 | deleteRule string
///                                  | minCount varint | maxCount varint
/// ```
///
/// What is stored is what describes the bytes of rows and index entries; defaults, validation
/// rules and classes stay in the application's model.
enum ModelRecord {
    static let formatVersion: UInt8 = 1

    /// The record of `model`, entities in name order and properties in their model order.
    static func encode(_ model: ManagedObjectModel) -> [UInt8] {
        var writer = RowWriter()
        writer.u8(formatVersion)
        let entities = model.entities.sorted { $0.name < $1.name }
        writer.varint(UInt64(entities.count))
        for entity in entities {
            writer.string(entity.name)
            writer.string(entity.superentityName ?? "")
            writer.u8(entity.isAbstract ? 1 : 0)
            writer.varint(UInt64(entity.ownProperties.count))
            for property in entity.ownProperties {
                writer.string(property.name)
                // Bit 4: the attribute has index entries (indexed, or uniqueness-constrained).
                let indexed = (property as? AttributeDescription)?.hasIndexEntries ?? property.isIndexed
                let flags: UInt8 = (property.isOptional ? 1 : 0) | (property.isTransient ? 2 : 0) | (indexed ? 4 : 0)
                if let attribute = property as? AttributeDescription {
                    writer.u8(0)
                    writer.u8(flags)
                    writer.string(attribute.attributeType.rawValue)
                } else if let relationship = property as? RelationshipDescription {
                    writer.u8(1)
                    writer.u8(flags)
                    writer.string(relationship.destinationEntityName)
                    writer.string(relationship.inverseName ?? "")
                    writer.u8(relationship.isToMany ? 1 : 0)
                    writer.u8(relationship.isOrdered ? 1 : 0)
                    writer.string(relationship.deleteRule.rawValue)
                    writer.varint(UInt64(max(0, relationship.minCount)))
                    writer.varint(UInt64(max(0, relationship.maxCount)))
                }
            }
        }
        return writer.bytes
    }

    /// The model a record describes.
    ///
    /// - Throws: ``ObjectGraphError`` (`storeCorrupted`) naming what does not decode, or the
    ///   model's own validation error when the entities do not form a valid model.
    static func decode(_ bytes: [UInt8]) throws -> ManagedObjectModel {
        var reader = RowReader(bytes, context: "model record")
        let format = try reader.u8()
        guard format == formatVersion else { throw reader.fail("model format \(format) is not supported") }
        let count = try reader.varint()
        guard count <= UInt64(bytes.count) else { throw reader.fail("entity count \(count)") }
        var entities: [EntityDescription] = []
        for _ in 0..<count {
            let name = try reader.string()
            let superentity = try reader.string()
            let isAbstract = try reader.u8() & 1 != 0
            let propertyCount = try reader.varint()
            guard propertyCount <= UInt64(bytes.count) else { throw reader.fail("property count \(propertyCount)") }
            var properties: [PropertyDescription] = []
            for _ in 0..<propertyCount {
                let propertyName = try reader.string()
                let kind = try reader.u8()
                let flags = try reader.u8()
                let optional = flags & 1 != 0, transient = flags & 2 != 0, indexed = flags & 4 != 0
                switch kind {
                case 0:
                    let typeName = try reader.string()
                    guard let type = AttributeType(rawValue: typeName) else { throw reader.fail("attribute type \"\(typeName)\"") }
                    properties.append(AttributeDescription(
                        name: propertyName, type: type, isOptional: optional, isTransient: transient, isIndexed: indexed))
                case 1:
                    let destination = try reader.string()
                    let inverse = try reader.string()
                    let toMany = try reader.u8() != 0
                    let ordered = try reader.u8() != 0
                    let ruleName = try reader.string()
                    guard let rule = DeleteRule(rawValue: ruleName) else { throw reader.fail("delete rule \"\(ruleName)\"") }
                    let minCount = try reader.varint(), maxCount = try reader.varint()
                    guard minCount <= UInt64(Int32.max), maxCount <= UInt64(Int32.max) else { throw reader.fail("relationship counts") }
                    properties.append(RelationshipDescription(
                        name: propertyName, destination: destination, inverse: inverse.isEmpty ? nil : inverse,
                        isToMany: toMany, isOrdered: ordered, isOptional: optional, minCount: Int(minCount),
                        maxCount: Int(maxCount), deleteRule: rule, isTransient: transient))
                default:
                    throw reader.fail("property kind \(kind)")
                }
            }
            entities.append(EntityDescription(
                name: name, superentity: superentity.isEmpty ? nil : superentity, isAbstract: isAbstract, properties: properties))
        }
        guard reader.isAtEnd else { throw reader.fail("trailing bytes") }
        return try ManagedObjectModel(entities: entities)
    }
}

import ObjectGraph

/// The bytes of a model record ([ROW-5]; the grammar is on ``ModelRecord``): writing it, and
/// reading it back with every check a decoded record must pass.
extension ModelRecord {
    /// The record's bytes.
    func encode() -> [UInt8] {
        var writer = RowWriter()
        writer.u8(keySpaces.isEmpty && retired.isEmpty && keyNames.isEmpty ? Self.formatVersion : Self.keySpaceFormatVersion)
        writer.varint(UInt64(nextEntity))
        writer.varint(UInt64(versions.count))
        for version in versions { Self.write(version, to: &writer) }
        if !keySpaces.isEmpty || !retired.isEmpty || !keyNames.isEmpty {
            writer.varint(UInt64(keySpaces.count))
            for (root, space) in keySpaces.sorted(by: { $0.key < $1.key }) {
                writer.string(root)
                writer.string(space)
            }
            writer.varint(UInt64(retired.count))
            for entry in retired.sorted() {
                switch entry {
                case .keySpace(let space):
                    writer.u8(0)
                    writer.string(space)
                case .relationship(let space, let name):
                    writer.u8(1)
                    writer.string(space)
                    writer.string(name)
                case .rows(let space, let number):
                    writer.u8(2)
                    writer.string(space)
                    writer.varint(UInt64(number))
                }
            }
            writer.varint(UInt64(keyNames.count))
            for (key, name) in keyNames.sorted(by: { $0.key < $1.key }) {
                let parts = key.split(separator: "\u{0}", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                writer.string(parts[0])
                writer.string(parts.count > 1 ? parts[1] : "")
                writer.string(name)
            }
        }
        return writer.bytes
    }

    /// The record of `model` alone (a store whose rows are all in its layouts).
    static func encode(_ model: ManagedObjectModel) -> [UInt8] { ModelRecord(model: model).encode() }

    /// One version's bytes (what two versions compare by).
    static func encode(version: Version) -> [UInt8] {
        var writer = RowWriter()
        write(version, to: &writer)
        return writer.bytes
    }

    private static func write(_ version: Version, to writer: inout RowWriter) {
        let entities = version.model.entities.sorted { $0.name < $1.name }
        writer.varint(UInt64(entities.count))
        for entity in entities {
            writer.varint(UInt64(version.numbers[entity.name] ?? 0))
            writer.varint(UInt64(version.layoutIDs[entity.name] ?? 0))
            writer.string(entity.name)
            writer.string(entity.superentityName ?? "")
            writer.string(entity.versionHashModifier ?? "")
            // Bit 2: the entity declares uniqueness constraints, listed next.
            writer.u8((entity.isAbstract ? 1 : 0) | (entity.uniquenessConstraints.isEmpty ? 0 : 2))
            if !entity.uniquenessConstraints.isEmpty {
                writer.varint(UInt64(entity.uniquenessConstraints.count))
                for names in entity.uniquenessConstraints {
                    writer.varint(UInt64(names.count))
                    for name in names { writer.string(name) }
                }
            }
            writer.varint(UInt64(entity.ownProperties.count))
            for property in entity.ownProperties {
                writer.string(property.name)
                writer.string(property.versionHashModifier ?? "")
                // Bit 4: the attribute has index entries (indexed, or uniqueness-constrained).
                let indexed = version.indexEntries.map { $0.contains(entity.name + "." + property.name) }
                    ?? (property as? AttributeDescription)?.hasIndexEntries ?? property.isIndexed
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
            let upgrades = (version.upgrades[entity.name] ?? [:]).sorted { $0.key < $1.key }
            writer.varint(UInt64(upgrades.count))
            for (target, upgrade) in upgrades {
                writer.string(target)
                switch upgrade {
                case .field(let source, let fallback):
                    writer.u8(0)
                    writer.string(source)
                    writer.value(fallback)
                case .listOfOne(let source):
                    writer.u8(1)
                    writer.string(source)
                case .constant(let value):
                    writer.u8(2)
                    writer.value(value)
                case .pendingKeys(let source):
                    writer.u8(3)
                    writer.string(source)
                case .listFromKeys(let keyName):
                    writer.u8(4)
                    writer.string(keyName)
                case .fieldOf(let source, let entities), .listOf(let source, let entities):
                    if case .fieldOf = upgrade { writer.u8(5) } else { writer.u8(6) }
                    writer.string(source)
                    writer.varint(UInt64(entities.count))
                    for number in entities.sorted() { writer.varint(UInt64(number)) }
                }
            }
        }
    }

    /// The current model of a record (format 1, 2 or 3).
    ///
    /// - Throws: as ``decodeRecord(_:)``.
    static func decode(_ bytes: [UInt8]) throws -> ManagedObjectModel { try decodeRecord(bytes).current.model }

    /// A record, of format 1, 2 or 3.
    ///
    /// - Throws: ``ObjectGraphError`` (`storeCorrupted`) naming what does not decode (a
    ///   number used twice in a version or not below `nextEntity` included, and key spaces
    ///   that are not one per hierarchy root), or the model's
    ///   own validation error when the entities do not form a valid model.
    static func decodeRecord(_ bytes: [UInt8]) throws -> ModelRecord {
        var reader = RowReader(bytes, context: "model record")
        let format = try reader.u8()
        switch format {
        case 1:
            let model = try decodeVersion(&reader, bytes: bytes, numbered: false).model
            guard reader.isAtEnd else { throw reader.fail("trailing bytes") }
            return ModelRecord(model: model)
        case formatVersion, keySpaceFormatVersion:
            let next = try reader.varint()
            guard next <= UInt64(UInt16.max) + 1 else { throw reader.fail("next entity number \(next)") }
            let count = try reader.varint()
            guard count >= 1, count <= UInt64(bytes.count) else { throw reader.fail("version count \(count)") }
            var versions: [Version] = []
            for _ in 0..<count {
                let version = try decodeVersion(&reader, bytes: bytes, numbered: true)
                guard Set(version.numbers.values).count == version.numbers.count, version.numbers.values.allSatisfy({ UInt64($0) < next }) else {
                    throw reader.fail("entity numbers \(version.numbers.values.sorted()) repeat or are not below \(next)")
                }
                versions.append(version)
            }
            var keySpaces: [String: String] = [:]
            var retired = Set<Retired>()
            var keyNames: [String: String] = [:]
            if format == keySpaceFormatVersion {
                let count = try reader.varint()
                guard count <= UInt64(bytes.count) else { throw reader.fail("key space count \(count)") }
                for _ in 0..<count {
                    let root = try reader.string(), space = try reader.string()
                    guard keySpaces[root] == nil else { throw reader.fail("key space of \(root) appears twice") }
                    keySpaces[root] = space
                }
                let retiredCount = try reader.varint()
                guard retiredCount <= UInt64(bytes.count) else { throw reader.fail("retired count \(retiredCount)") }
                for _ in 0..<retiredCount {
                    let kind = try reader.u8()
                    let space = try reader.string()
                    guard !space.isEmpty, !space.utf8.contains(0) else { throw reader.fail("retired key space \"\(space)\"") }
                    switch kind {
                    case 0: retired.insert(.keySpace(space))
                    case 1:
                        let name = try reader.string()
                        guard !name.isEmpty, !name.utf8.contains(0) else { throw reader.fail("retired relationship \"\(name)\"") }
                        retired.insert(.relationship(keySpace: space, name: name))
                    case 2:
                        // The rows of a removed entity: a number no version of the record
                        // gives an entity now, below the next one.
                        let number = try reader.varint()
                        guard number < next, !versions[0].numbers.values.contains(UInt16(truncatingIfNeeded: number)) else {
                            throw reader.fail("retired rows of entity number \(number)")
                        }
                        retired.insert(.rows(keySpace: space, entity: UInt16(truncatingIfNeeded: number)))
                    default: throw reader.fail("retired kind \(kind)")
                    }
                }
                let nameCount = try reader.varint()
                guard nameCount <= UInt64(bytes.count), count + retiredCount + nameCount >= 1 else { throw reader.fail("key name count \(nameCount)") }
                for _ in 0..<nameCount {
                    let space = try reader.string(), relationship = try reader.string(), name = try reader.string()
                    let key = keyNameKey(keySpace: space, relationship: relationship)
                    guard keyNames[key] == nil, !name.isEmpty, !name.utf8.contains(0) else {
                        throw reader.fail("key name \"\(name)\" of \(relationship) in \(space)")
                    }
                    keyNames[key] = name
                }
                try checkKeySpaces(keySpaces, retired: retired, of: versions[0].model, reader: reader)
                try checkKeyNames(keyNames, keySpaces: keySpaces, retired: retired, of: versions[0].model, reader: reader)
            }
            guard reader.isAtEnd else { throw reader.fail("trailing bytes") }
            return ModelRecord(
                versions: versions, nextEntity: UInt16(truncatingIfNeeded: min(next, UInt64(UInt16.max))), keySpaces: keySpaces,
                retired: retired, keyNames: keyNames)
        default:
            throw reader.fail("model format \(format) is not supported")
        }
    }

    /// Refuses key spaces that are not one per hierarchy: each named root a root of `model`,
    /// each name non-empty without a zero byte, no two hierarchies (named or not) with the
    /// same key space, and none retired ([MIG-4]).
    private static func checkKeySpaces(
        _ keySpaces: [String: String], retired: Set<Retired>, of model: ManagedObjectModel, reader: RowReader
    ) throws {
        var seen = Set(retired.compactMap { if case .keySpace(let space) = $0 { return space } else { return nil } })
        for root in model.entities where root.rootEntityName == root.name {
            let space = keySpaces[root.name] ?? root.name
            guard !space.isEmpty, !space.utf8.contains(0) else { throw reader.fail("key space \"\(space)\" of \(root.name)") }
            guard seen.insert(space).inserted else { throw reader.fail("key space \"\(space)\" named twice") }
        }
        for root in keySpaces.keys where model.entitiesByName[root].map({ $0.rootEntityName != $0.name }) ?? true {
            throw reader.fail("key space for \(root), which is not a hierarchy root")
        }
    }

    /// Refuses key names ([REL-1]) that are not one per keyed relationship of `model`: each
    /// names a keyed relationship of a hierarchy with that key space, and no two relationships
    /// of a key space, nor one and a retired one, share a name.
    private static func checkKeyNames(
        _ keyNames: [String: String], keySpaces: [String: String], retired: Set<Retired>, of model: ManagedObjectModel, reader: RowReader
    ) throws {
        var named = Set<String>()
        var used: [String: Set<String>] = [:]
        for entry in retired {
            if case .relationship(let space, let name) = entry { used[space, default: []].insert(name) }
        }
        for entity in model.entities {
            let space = keySpaces[entity.rootEntityName] ?? entity.rootEntityName
            for relationship in entity.relationships where relationship.entity === entity && RelationshipKeys.isKeyed(relationship) {
                let key = keyNameKey(keySpace: space, relationship: relationship.name)
                named.insert(key)
                let name = keyNames[key] ?? relationship.name
                guard used[space, default: []].insert(name).inserted else {
                    throw reader.fail("key name \"\(name)\" of \(entity.name).\(relationship.name) is used twice in \(space)")
                }
            }
        }
        if let stray = keyNames.keys.first(where: { !named.contains($0) }) {
            throw reader.fail("key name for \(stray.replacingOccurrences(of: "\u{0}", with: ".")), which is no keyed relationship")
        }
    }

    /// One version's entities: format 2 gives each a number and a layout; format 1 numbers
    /// them in name order with layouts from their hashes.
    private static func decodeVersion(
        _ reader: inout RowReader, bytes: [UInt8], numbered: Bool
    ) throws -> Version {
        let count = try reader.varint()
        guard count <= UInt64(bytes.count) else { throw reader.fail("entity count \(count)") }
        var entities: [EntityDescription] = []
        var numbers: [String: UInt16] = [:], layouts: [String: UInt32] = [:]
        var upgrades: [String: [String: Upgrade]] = [:]
        for _ in 0..<count {
            var number: UInt64 = 0, layout: UInt64 = 0
            if numbered {
                number = try reader.varint()
                layout = try reader.varint()
                guard number <= UInt64(UInt16.max), layout <= UInt64(UInt32.max) else { throw reader.fail("entity number \(number) or layout \(layout)") }
            }
            let name = try reader.string()
            let superentity = try reader.string()
            let entityModifier = numbered ? try reader.string() : ""
            let entityFlags = try reader.u8()
            guard entityFlags & ~3 == 0, numbered || entityFlags & 2 == 0 else { throw reader.fail("flags \(entityFlags) of entity \(name)") }
            let isAbstract = entityFlags & 1 != 0
            var constraints: [[String]] = []
            if entityFlags & 2 != 0 {
                let count = try reader.varint()
                guard count > 0, count <= UInt64(bytes.count) else { throw reader.fail("constraint count \(count) of entity \(name)") }
                for _ in 0..<count {
                    let names = try reader.varint()
                    guard names > 0, names <= UInt64(bytes.count) else { throw reader.fail("constraint of \(names) attributes of entity \(name)") }
                    var constraint: [String] = []
                    for _ in 0..<names { constraint.append(try reader.string()) }
                    constraints.append(constraint)
                }
            }
            let propertyCount = try reader.varint()
            guard propertyCount <= UInt64(bytes.count) else { throw reader.fail("property count \(propertyCount)") }
            var properties: [PropertyDescription] = []
            for _ in 0..<propertyCount {
                let propertyName = try reader.string()
                let modifier = numbered ? try reader.string() : ""
                let kind = try reader.u8()
                let flags = try reader.u8()
                let optional = flags & 1 != 0, transient = flags & 2 != 0, indexed = flags & 4 != 0
                switch kind {
                case 0:
                    let typeName = try reader.string()
                    guard let type = AttributeType(rawValue: typeName) else { throw reader.fail("attribute type \"\(typeName)\"") }
                    let attribute = AttributeDescription(
                        name: propertyName, type: type, isOptional: optional, isTransient: transient, isIndexed: indexed,
                        versionHashModifier: modifier.isEmpty ? nil : modifier)
                    // Bit 4 says whether the store holds the entries, constrained or not.
                    attribute.entriesFollowIndexing = true
                    properties.append(attribute)
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
                        maxCount: Int(maxCount), deleteRule: rule, isTransient: transient,
                        versionHashModifier: modifier.isEmpty ? nil : modifier))
                default:
                    throw reader.fail("property kind \(kind)")
                }
            }
            if numbered {
                let count = try reader.varint()
                guard count <= UInt64(bytes.count) else { throw reader.fail("upgrade count \(count)") }
                var program: [String: Upgrade] = [:]
                for _ in 0..<count {
                    let target = try reader.string()
                    switch try reader.u8() {
                    case 0: program[target] = .field(try reader.string(), fallback: try reader.value())
                    case 1: program[target] = .listOfOne(try reader.string())
                    case 2: program[target] = .constant(try reader.value())
                    case 3: program[target] = .pendingKeys(try reader.string())
                    case 4: program[target] = .listFromKeys(try reader.string())
                    case let kind where kind == 5 || kind == 6:
                        let source = try reader.string()
                        let numberCount = try reader.varint()
                        guard numberCount <= UInt64(bytes.count) else { throw reader.fail("entity count \(numberCount) of \(target)") }
                        var entities = Set<UInt16>()
                        for _ in 0..<numberCount {
                            let number = try reader.varint()
                            guard number <= UInt64(UInt16.max) else { throw reader.fail("entity number \(number) of \(target)") }
                            entities.insert(UInt16(number))
                        }
                        program[target] = kind == 5 ? .fieldOf(source, entities: entities) : .listOf(source, entities: entities)
                    case let kind: throw reader.fail("upgrade kind \(kind)")
                    }
                }
                if !program.isEmpty { upgrades[name] = program }
            }
            guard numbers[name] == nil else { throw reader.fail("entity \(name) appears twice") }
            entities.append(EntityDescription(
                name: name, superentity: superentity.isEmpty ? nil : superentity, isAbstract: isAbstract, properties: properties,
                uniquenessConstraints: constraints, versionHashModifier: entityModifier.isEmpty ? nil : entityModifier))
            numbers[name] = UInt16(truncatingIfNeeded: number)
            layouts[name] = UInt32(truncatingIfNeeded: layout)
        }
        let model = try ManagedObjectModel(entities: entities)
        guard numbered else { return ModelRecord(model: model).current }
        return Version(model: model, numbers: numbers, layoutIDs: layouts, upgrades: upgrades)
    }
}

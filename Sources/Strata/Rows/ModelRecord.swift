import ObjectGraph

/// The models a store's rows were written with (SPEC.md [ROW-5]): the current one first, then
/// every older version whose row layouts rows may still have, each entity with the number
/// rows give it ([ROW-1]) and the layout its rows carry, so tools decode and check a store's
/// rows without the application's code, and a store opened after a lightweight migration reads
/// rows of older layouts ([MIG-2]).
///
/// ```
/// record   := format u8 (2 or 3) | nextEntity varint | count varint | version × count
///             | (format 3) count varint | keySpace × count       (roots in name order)
///                          count varint | retired × count        (in order)
///                          count varint | keyName × count        (in order)
/// keySpace := root string | name string                         (a root whose key space is not its name)
/// keyName  := keySpace string | relationship string | name string (a keyed relationship whose keys
///                                                                  are not under its own name)
/// retired  := kind u8 | keySpace string | (kind 1) relationship string
///             kind 0: a whole key space; kind 1: one relationship's keys in it
/// version  := count varint | entity × count                      (entities in name order)
/// entity   := number varint | layout varint | name string | superentity string | modifier string
///             | flags u8 (1 abstract) | count varint | property × count
///             | count varint | upgrade × count                   (none in the current version)
/// upgrade  := target string | kind u8 | payload                  (how old rows read a current field)
///             kind 0 field:       source string | fallback value [ROW-2]
///             kind 1 list of one: source string
///             kind 2 constant:    value [ROW-2]
///             kind 3 pending keys: source string                 (target a keyed relationship, [MIG-5])
///             kind 4 list from keys: key name string             (target an ordered to-many, [MIG-5])
/// property := name string | modifier string | kind u8 | flags u8 (1 optional, 2 transient, 4 index entries) | payload
///             kind 0 attribute:    type string (AttributeType's raw value)
///             kind 1 relationship: destination string | inverse string ("" for none)
///                                  | toMany u8 | ordered u8 | deleteRule string
///                                  | minCount varint | maxCount varint
/// ```
///
/// Format 1 (written before [MIG-1]) is one version without numbers or layouts: its entities
/// are numbered in name order and their layouts come from their version hashes. Format 2 is
/// format 3 without key spaces, retired keys and key names: every hierarchy's key space is its
/// root's name ([KEY-2]) and every keyed relationship's keys are under its own name ([REL-1]);
/// a record without any of the three is written in format 2.
///
/// What is stored is what describes the bytes of rows and index entries; defaults, validation
/// rules and classes stay in the application's model.
struct ModelRecord: Equatable {
    /// The format of a record whose hierarchies all have their roots' names as key spaces.
    static let formatVersion: UInt8 = 2
    /// The format of a record that names some key spaces ([KEY-2]) or retired keys ([MIG-4]).
    static let keySpaceFormatVersion: UInt8 = 3

    /// Keys a migration left that no entity or relationship of the model reads any more,
    /// deleted in the background after it ([MIG-4]).
    enum Retired: Hashable, Comparable {
        /// Every row, index entry and relationship key of a key space ([KEY-2]): a removed
        /// hierarchy's.
        case keySpace(String)
        /// The keys ([REL-1]) of a removed keyed relationship, in its hierarchy's key space.
        case relationship(keySpace: String, name: String)

        /// The key prefixes it covers.
        var prefixes: [[UInt8]] {
            switch self {
            case .keySpace(let space):
                return [KeyLayout.rowTag, IndexKey.tag, RelationshipKeys.tag].map { [$0] + Array(space.utf8) + [0x00] }
            case .relationship(let space, let name):
                return [RelationshipKeys.relationshipPrefix(root: space, relationship: name)]
            }
        }
    }

    /// How a row of an older version reads one field of its entity's current layout ([MIG-2]).
    enum Upgrade: Equatable {
        /// The old row's field of this property, or `fallback` when it is null (a default
        /// value an attribute made required takes).
        case field(String, fallback: AttributeValue)
        /// The old row's to-one field of this name, as a to-many of one destination.
        case listOfOne(String)
        /// A value the row never held: the default of an attribute added since (null for a
        /// relationship).
        case constant(AttributeValue)
        /// [MIG-5] The target is a keyed relationship (an unordered to-many, [REL-1]) that was
        /// stored in rows: the old row's field of this name (a to-one or an ordered list) holds
        /// members whose keys may not be written yet. Listed until the background build has
        /// written every such row's keys.
        case pendingKeys(String)
        /// [MIG-5] The target is an ordered to-many that was an unordered one (keys,
        /// [REL-1]): the old row's members are the keys under this key name in the owner's key
        /// space, in key order. Listed until the background build has written every such row's
        /// list.
        case listFromKeys(String)

        /// Whether it names work the background build still has to do ([MIG-5]).
        var isPending: Bool {
            switch self {
            case .pendingKeys, .listFromKeys: return true
            case .field, .listOfOne, .constant: return false
            }
        }
    }

    /// One model version: the model, and for each of its entities (by name) its number and
    /// the layout of its rows.
    struct Version: Equatable {
        let model: ManagedObjectModel
        let numbers: [String: UInt16]
        let layoutIDs: [String: UInt32]
        /// The attributes (`Entity.attribute`, inherited ones under each entity) whose index
        /// entries the store holds, when not those `model` asks for: a migration records the
        /// entries that exist, so that [IDX-S6] builds the missing ones at this open or, after
        /// a crash, at the next.
        var indexEntries: Set<String>? = nil
        /// For an older version: per entity of this version (by name), how its rows read each
        /// field of the current entity with its number (by the current property's name). Made
        /// when the store migrates, from the mapping then, and composed with each later one;
        /// so reading an old row needs no renaming identifier of the application's model.
        var upgrades: [String: [String: Upgrade]] = [:]

        init(
            model: ManagedObjectModel, numbers: [String: UInt16], layoutIDs: [String: UInt32], indexEntries: Set<String>? = nil,
            upgrades: [String: [String: Upgrade]] = [:]
        ) {
            self.model = model
            self.numbers = numbers
            self.layoutIDs = layoutIDs
            self.indexEntries = indexEntries
            self.upgrades = upgrades
        }

        static func == (a: Version, b: Version) -> Bool {
            a.numbers == b.numbers && a.layoutIDs == b.layoutIDs && ModelRecord.encode(version: a) == ModelRecord.encode(version: b)
        }

        /// The pairs (number, layout) of its entities: the row layouts it describes.
        var layoutKeys: Set<UInt64> {
            Set(numbers.compactMap { name, number in layoutIDs[name].map { StoreLayout.legacyKey(number: number, layoutID: $0) } })
        }
    }

    /// The current version first, then older ones.
    var versions: [Version]
    /// The number the next new entity takes: numbers are never reused.
    var nextEntity: UInt16
    /// The key space ([KEY-2]) of each hierarchy of the current version (by its root's name)
    /// whose key space is not named after its root: a hierarchy keeps its key space when its
    /// root is renamed or gets a superentity, so that no key moves ([MIG-1]).
    var keySpaces: [String: String] = [:]
    /// Keys no part of the model reads, still to be deleted ([MIG-4]).
    var retired: Set<Retired> = []
    /// The name under which each keyed relationship of the current version whose keys
    /// ([REL-1]) are not under its own name keeps them, by ``keyNameKey(keySpace:relationship:)``:
    /// a renamed relationship keeps its keys where they are ([MIG-1]).
    var keyNames: [String: String] = [:]

    /// The record of a store that knows only `model`: numbers in name order, layouts from the
    /// version hashes (what format 1 means).
    init(model: ManagedObjectModel) {
        let sorted = model.entities.sorted { $0.name < $1.name }
        var numbers: [String: UInt16] = [:], layoutIDs: [String: UInt32] = [:]
        for (index, entity) in sorted.enumerated() {
            numbers[entity.name] = UInt16(truncatingIfNeeded: index)
            layoutIDs[entity.name] = RowLayout.layoutID(of: entity)
        }
        versions = [Version(model: model, numbers: numbers, layoutIDs: layoutIDs)]
        nextEntity = UInt16(truncatingIfNeeded: sorted.count)
    }

    init(
        versions: [Version], nextEntity: UInt16, keySpaces: [String: String] = [:], retired: Set<Retired> = [],
        keyNames: [String: String] = [:]
    ) {
        self.versions = versions
        self.nextEntity = nextEntity
        self.keySpaces = keySpaces
        self.retired = retired
        self.keyNames = keyNames
    }

    /// The key of ``keyNames`` for relationship `relationship` of the hierarchy whose key
    /// space is `keySpace`.
    static func keyNameKey(keySpace: String, relationship: String) -> String { keySpace + "\u{0}" + relationship }

    /// The name the keys ([REL-1]) of `relationship` in key space `keySpace` are under.
    func keyName(keySpace: String, relationship: String) -> String {
        keyNames[Self.keyNameKey(keySpace: keySpace, relationship: relationship)] ?? relationship
    }

    /// The record with `retired` as its keys still to delete ([MIG-4]).
    func retiring(_ retired: Set<Retired>) -> ModelRecord {
        var record = self
        record.retired = retired
        return record
    }

    /// [MIG-5] Whether an older version lists members of keyed relationships whose keys may
    /// not be written yet.
    var hasPendingKeys: Bool {
        versions.dropFirst().contains { version in
            version.upgrades.values.contains { program in program.values.contains(where: \.isPending) }
        }
    }

    /// [MIG-5] The record once every pending relationship key is written: no version lists
    /// pending keys (an older version is kept while its layouts are still rows' layouts, as
    /// before).
    func withoutPendingKeys() -> ModelRecord {
        var record = self
        for index in record.versions.indices.dropFirst() {
            record.versions[index].upgrades = record.versions[index].upgrades.mapValues { program in
                program.filter { !$0.value.isPending }
            }.filter { !$0.value.isEmpty }
        }
        return record
    }

    /// The key space of the hierarchy whose root (in the current version) is `root`.
    func keySpace(ofRoot root: String) -> String { keySpaces[root] ?? root }

    /// The current version.
    var current: Version { versions[0] }

    /// The record after a migration to `model` by `mapping` ([MIG-1]): each entity of `model`
    /// keeps the number of the current version's entity it maps from, a new entity takes
    /// ``nextEntity`` onwards; the current version becomes an older one. Every older version
    /// gets, per entity, how its rows read the new layout's fields: the mapping composed with
    /// what the version's rows read before. An older version is kept while one of its layouts
    /// is not its entity's newest (its rows are read through it, [MIG-2]).
    ///
    /// Each hierarchy of `model` keeps the key space ([KEY-2]) of the hierarchy its entities'
    /// rows were in, whatever its root is called now; of several (hierarchies merged under a
    /// new root) the one with the most rows by `rowCounts` (per entity of the current version),
    /// whose keys then stay where they are while the others' move ([MIG-1]). A hierarchy with
    /// no rows yet takes its root's name, or, when a kept key space has it, the first free
    /// `name~2`, `name~3`, ….
    func migrated(to model: ManagedObjectModel, mapping: MappingModel, rowCounts: [String: Int] = [:]) throws -> ModelRecord {
        var sources: [String: EntityMapping] = [:]
        for entityMapping in mapping.entityMappings {
            if let destination = entityMapping.destinationEntityName, entityMapping.sourceEntityName != nil { sources[destination] = entityMapping }
        }
        var numbers: [String: UInt16] = [:], layoutIDs: [String: UInt32] = [:]
        var next = Int(nextEntity)
        var destinationOfNumber: [UInt16: (entity: EntityDescription, mapping: EntityMapping)] = [:]
        for entity in model.entities.sorted(by: { $0.name < $1.name }) {
            if let entityMapping = sources[entity.name], let source = entityMapping.sourceEntityName, let number = current.numbers[source] {
                numbers[entity.name] = number
                destinationOfNumber[number] = (entity, entityMapping)
            } else {
                guard next <= Int(UInt16.max) else {
                    throw ObjectGraphError(.invalidModel, "The store has numbered 65,536 entities; \(entity.name) cannot take a new number.", entityName: entity.name)
                }
                numbers[entity.name] = UInt16(next)
                next += 1
            }
            layoutIDs[entity.name] = RowLayout.layoutID(of: entity)
        }
        var currentOfNumber: [UInt16: EntityDescription] = [:]
        for (name, number) in current.numbers { currentOfNumber[number] = current.model.entitiesByName[name] }
        var layoutOf: [UInt16: UInt32] = [:]
        for (name, number) in numbers { layoutOf[number] = layoutIDs[name] }
        var older: [Version] = []
        for (index, version) in versions.enumerated() {
            var upgrades: [String: [String: Upgrade]] = [:]
            for old in version.model.entities {
                guard let number = version.numbers[old.name], let (entity, entityMapping) = destinationOfNumber[number],
                    let before = currentOfNumber[number]
                else { continue }
                // How this version's rows read the fields of the entity before the migration.
                let reads = index == 0
                    ? Dictionary(uniqueKeysWithValues: Self.fieldProperties(of: before).map { ($0.name, Upgrade.field($0.name, fallback: .null)) })
                    : version.upgrades[old.name] ?? [:]
                var program: [String: Upgrade] = [:]
                for property in Self.fieldProperties(of: entity) {
                    let attribute = property as? AttributeDescription
                    let defaultValue = attribute?.defaultValue ?? .null
                    let fallback = attribute.map { $0.isOptional ? .null : $0.defaultValue } ?? .null
                    guard let source = entityMapping.propertyMapping(named: property.name)?.sourcePropertyName,
                        let sourceProperty = before.propertiesByName[source]
                    else {
                        program[property.name] = .constant(defaultValue)
                        continue
                    }
                    let becomesList = (property as? RelationshipDescription)?.isToMany == true
                        && (sourceProperty as? RelationshipDescription)?.isToMany == false
                    if let sourceRelationship = sourceProperty as? RelationshipDescription, RelationshipKeys.isKeyed(sourceRelationship) {
                        // [MIG-5] An unordered to-many (keys) made ordered: the owner's keys
                        // are its list until the background build writes it into the row.
                        program[property.name] = .listFromKeys(keyName(keySpace: keySpace(ofRoot: before.rootEntityName), relationship: source))
                        continue
                    }
                    switch reads[source] {
                    case .field(let field, let previous)?:
                        program[property.name] = becomesList ? .listOfOne(field) : .field(field, fallback: previous.isNull ? fallback : previous)
                    case .listOfOne(let field)?:
                        program[property.name] = .listOfOne(field)
                    case .constant(let value)?:
                        program[property.name] = .constant(value.isNull ? fallback : value)
                    case .pendingKeys(let field)?:
                        // (Not met: a store's pending keys are built before it migrates again.)
                        program[property.name] = becomesList ? .listOfOne(field) : .field(field, fallback: .null)
                    case .listFromKeys?:
                        // (Not met either: a source read from keys is keyed, above.)
                        program[property.name] = .constant(defaultValue)
                    case nil:
                        program[property.name] = .constant(defaultValue)
                    }
                }
                // [MIG-5] A relationship stored in rows (a to-one, an ordered to-many) that
                // becomes an unordered to-many (keys, [REL-1]) reads its members from the old
                // rows' field until the background build has written their keys.
                for relationship in entity.relationships where RelationshipKeys.isKeyed(relationship) {
                    guard let source = entityMapping.propertyMapping(named: relationship.name)?.sourcePropertyName,
                        let sourceRelationship = before.relationshipsByName[source], !RelationshipKeys.isKeyed(sourceRelationship)
                    else { continue }
                    switch reads[source] {
                    case .field(let field, _)?, .listOfOne(let field)?, .pendingKeys(let field)?:
                        program[relationship.name] = .pendingKeys(field)
                    case .constant?, .listFromKeys?, nil:
                        break
                    }
                }
                upgrades[old.name] = program
            }
            older.append(Version(model: version.model, numbers: version.numbers, layoutIDs: version.layoutIDs, upgrades: upgrades))
        }
        let newest = Version(model: model, numbers: numbers, layoutIDs: layoutIDs)
        let kept = older.filter { version in
            version.numbers.contains { name, number in
                guard let current = layoutOf[number], let layout = version.layoutIDs[name] else { return false }
                return current != layout
            }
        }
        return try ModelRecord(
            versions: [newest] + kept, nextEntity: UInt16(truncatingIfNeeded: min(next, Int(UInt16.max))),
            keySpaces: migratedKeySpaces(to: model, sources: sources, rowCounts: rowCounts), retired: retired
        ).keyingRelationships(of: model, from: self, sources: sources)
    }

    /// This record (of `model`, made from `old` by a migration) with the key names ([REL-1])
    /// of `model`'s keyed relationships: a relationship that was keyed keeps the name its keys
    /// were under (they do not move, [MIG-1]); a new one takes its own name, or when a kept
    /// relationship's keys or retired keys ([MIG-4]) of its key space have it, the first free
    /// `name~2`, `name~3`, ….
    ///
    /// - Throws: `incompatibleModel` when hierarchies merged under one root have keyed
    ///   relationships whose keys are under the same name (the store is then migrated by copy,
    ///   [MIG-3]).
    private func keyingRelationships(
        of model: ManagedObjectModel, from old: ModelRecord, sources: [String: EntityMapping]
    ) throws -> ModelRecord {
        var names: [String: String] = [:]
        var taken: [String: Set<String>] = [:]  // key space → key names in use
        for entry in retired {
            if case .relationship(let space, let name) = entry { taken[space, default: []].insert(name) }
        }
        var fresh: [(space: String, relationship: String)] = []
        for entity in model.entities.sorted(by: { $0.name < $1.name }) {
            let space = keySpace(ofRoot: entity.rootEntityName)
            for relationship in entity.relationships.sorted(by: { $0.name < $1.name })
            where relationship.entity === entity && RelationshipKeys.isKeyed(relationship) {
                if let mapping = sources[entity.name], let sourceEntity = mapping.sourceEntityName,
                    let before = old.current.model.entitiesByName[sourceEntity],
                    let sourceName = mapping.propertyMapping(named: relationship.name)?.sourcePropertyName,
                    let source = before.relationshipsByName[sourceName], RelationshipKeys.isKeyed(source)
                {
                    let name = old.keyName(keySpace: old.keySpace(ofRoot: before.rootEntityName), relationship: source.name)
                    names[Self.keyNameKey(keySpace: space, relationship: relationship.name)] = name
                    guard taken[space, default: []].insert(name).inserted else {
                        throw ObjectGraphError(
                            .incompatibleModel,
                            "Hierarchies merged under \(entity.rootEntityName) both keep relationship keys under \"\(name)\": the store cannot migrate in place; it is migrated by copy.",
                            entityName: entity.name, key: relationship.name)
                    }
                } else {
                    fresh.append((space, relationship.name))
                }
            }
        }
        for (space, relationship) in fresh {
            var name = relationship, suffix = 2
            while taken[space, default: []].contains(name) {
                name = relationship + "~\(suffix)"
                suffix += 1
            }
            taken[space, default: []].insert(name)
            names[Self.keyNameKey(keySpace: space, relationship: relationship)] = name
        }
        var record = self
        record.keyNames = names.filter { key, name in !key.hasSuffix("\u{0}" + name) }
        return record
    }

    /// The key spaces of `model`'s hierarchies after a migration ([KEY-2], [MIG-1]), as
    /// ``migrated(to:mapping:rowCounts:)`` says: only those not named after their roots.
    private func migratedKeySpaces(
        to model: ManagedObjectModel, sources: [String: EntityMapping], rowCounts: [String: Int]
    ) -> [String: String] {
        let old = current.model
        var rows: [String: Int] = [:]
        // Key spaces still being deleted are not reused.
        var taken = Set(retired.compactMap { if case .keySpace(let space) = $0 { return space } else { return nil } })
        for entity in old.entities {
            let space = keySpace(ofRoot: entity.rootEntityName)
            rows[space, default: 0] += rowCounts[entity.name] ?? 0
            taken.insert(space)
        }
        var inherited: [String: Set<String>] = [:]
        for entity in model.entities {
            guard let source = sources[entity.name]?.sourceEntityName, let before = old.entitiesByName[source] else { continue }
            inherited[entity.rootEntityName, default: []].insert(keySpace(ofRoot: before.rootEntityName))
        }
        var spaces: [String: String] = [:]
        let roots = model.entities.filter { $0.rootEntityName == $0.name }.map(\.name).sorted()
        for root in roots {
            guard let candidates = inherited[root] else { continue }
            spaces[root] = candidates.sorted { a, b in
                let (rowsA, rowsB) = (rows[a] ?? 0, rows[b] ?? 0)
                return rowsA != rowsB ? rowsA > rowsB : a < b
            }.first
        }
        for root in roots where spaces[root] == nil {
            var name = root, suffix = 2
            while taken.contains(name) {
                name = root + "~\(suffix)"
                suffix += 1
            }
            taken.insert(name)
            spaces[root] = name
        }
        return spaces.filter { $0.key != $0.value }
    }

    /// The properties an entity's rows hold as fields ([ROW-1]): stored, and not unordered
    /// to-many relationships (keys, [REL-1]).
    static func fieldProperties(of entity: EntityDescription) -> [PropertyDescription] {
        entity.properties.filter { property in
            guard !property.isTransient else { return false }
            guard let relationship = property as? RelationshipDescription else { return true }
            return !RelationshipKeys.isKeyed(relationship)
        }
    }

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

    private static func encode(version: Version) -> [UInt8] {
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
            writer.u8(entity.isAbstract ? 1 : 0)
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
            let isAbstract = try reader.u8() & 1 != 0
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
                    properties.append(AttributeDescription(
                        name: propertyName, type: type, isOptional: optional, isTransient: transient, isIndexed: indexed,
                        versionHashModifier: modifier.isEmpty ? nil : modifier))
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
                    case let kind: throw reader.fail("upgrade kind \(kind)")
                    }
                }
                if !program.isEmpty { upgrades[name] = program }
            }
            guard numbers[name] == nil else { throw reader.fail("entity \(name) appears twice") }
            entities.append(EntityDescription(
                name: name, superentity: superentity.isEmpty ? nil : superentity, isAbstract: isAbstract, properties: properties,
                versionHashModifier: entityModifier.isEmpty ? nil : entityModifier))
            numbers[name] = UInt16(truncatingIfNeeded: number)
            layouts[name] = UInt32(truncatingIfNeeded: layout)
        }
        let model = try ManagedObjectModel(entities: entities)
        guard numbered else { return ModelRecord(model: model).current }
        return Version(model: model, numbers: numbers, layoutIDs: layouts, upgrades: upgrades)
    }
}

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
/// retired  := kind u8 | keySpace string | (kind 1) relationship string | (kind 2) number varint
///             kind 0: a whole key space; kind 1: one relationship's keys in it; kind 2: the
///             rows of a removed entity (by number) in it, with every key naming them
/// version  := count varint | entity × count                      (entities in name order)
/// entity   := number varint | layout varint | name string | superentity string | modifier string
///             | flags u8 (1 abstract, 2 constrained) | (flag 2) count varint | constraint × count
///             | count varint | property × count
///             | count varint | upgrade × count                   (none in the current version)
/// constraint := count varint | attribute string × count        (a uniqueness constraint, as declared)
/// upgrade  := target string | kind u8 | payload                  (how old rows read a current field)
///             kind 0 field:       source string | fallback value [ROW-2]
///             kind 1 list of one: source string
///             kind 2 constant:    value [ROW-2]
///             kind 3 pending keys: source string                 (target a keyed relationship, [MIG-5])
///             kind 4 list from keys: key name string             (target an ordered to-many, [MIG-5])
///             kind 5 field of entities: source string | count varint | number varint × count
///                                                                (target a to-one, [MIG-1])
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
        /// The rows of a removed entity of a kept hierarchy (a subentity), whose header names
        /// `entity`, in that hierarchy's key space, with their index entries and every
        /// relationship key naming them as owner or member ([MIG-4]).
        case rows(keySpace: String, entity: UInt16)

        /// The key prefixes it covers (none for retired rows: they are found by their headers,
        /// and their keys by reference, among the hierarchy's).
        var prefixes: [[UInt8]] {
            switch self {
            case .keySpace(let space):
                return [KeyLayout.rowTag, IndexKey.tag, RelationshipKeys.tag].map { [$0] + Array(space.utf8) + [0x00] }
            case .relationship(let space, let name):
                return [RelationshipKeys.relationshipPrefix(root: space, relationship: name)]
            case .rows:
                return []
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
        /// [MIG-1] The old row's to-one field of this name when its destination's entity is one
        /// of these numbers, else null: a to-one whose destination's hierarchy split reads only
        /// the destinations it still reaches, and the new inverse of the moved entity's
        /// relationship reads the others.
        case fieldOf(String, entities: Set<UInt16>)
        /// [MIG-1] The old row's to-one or ordered to-many field of this name as an ordered
        /// to-many of the destinations whose entity is one of these numbers, in their order: an
        /// ordered to-many whose destination's hierarchy split reads only the destinations it
        /// still reaches, and the new inverse of the moved entity's relationship the others.
        case listOf(String, entities: Set<UInt16>)

        /// Whether it names work the background build still has to do ([MIG-5]).
        var isPending: Bool {
            switch self {
            case .pendingKeys, .listFromKeys: return true
            case .field, .listOfOne, .constant, .fieldOf, .listOf: return false
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

    /// [MIG-4] The entity numbers of retired rows, per key space.
    var retiredRows: [String: Set<UInt16>] {
        var rows: [String: Set<UInt16>] = [:]
        for entry in retired {
            if case .rows(let space, let number) = entry { rows[space, default: []].insert(number) }
        }
        return rows
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
        // [MIG-1] Hierarchy splits: the numbers a relationship's destination reaches, before
        // (in the current version) and now.
        func oldReach(_ destination: EntityDescription?) -> Set<UInt16> {
            Set((destination?.selfAndAllSubentities ?? []).compactMap { current.numbers[$0.name] })
        }
        func newReach(_ destination: EntityDescription?) -> Set<UInt16> {
            Set((destination?.selfAndAllSubentities ?? []).compactMap { numbers[$0.name] })
        }
        /// The numbers a relationship `property` stored in rows (a to-one, an ordered to-many;
        /// mapped from `source`, stored in rows too) reaches now, when its destination no longer
        /// reaches some entity the old one did that is still in the model (moved out of its
        /// hierarchy); `nil` otherwise.
        func splitReach(_ property: PropertyDescription, from source: PropertyDescription) -> Set<UInt16>? {
            guard let relationship = property as? RelationshipDescription, !RelationshipKeys.isKeyed(relationship),
                let old = source as? RelationshipDescription, !RelationshipKeys.isKeyed(old)
            else { return nil }
            let reach = newReach(relationship.destinationEntity)
            let lost = oldReach(old.destinationEntity).subtracting(reach)
            let kept = Set(numbers.values)
            return lost.contains(where: kept.contains) ? reach : nil
        }
        /// For a new relationship of the entity that was `owner`: the old relationship of
        /// `owner` stored in rows it takes destinations from (the old inverse of the relationship
        /// its inverse is mapped from, on a moved entity; of the same kind, unless the new one is
        /// keyed) and the numbers it reaches.
        func splitInverse(_ relationship: RelationshipDescription, owner: EntityDescription) -> (String, Set<UInt16>)? {
            guard let inverse = relationship.inverseRelationship, let moved = inverse.entity,
                let movedSource = sources[moved.name]?.propertyMapping(named: inverse.name)?.sourcePropertyName,
                let movedOld = sources[moved.name]?.sourceEntityName.flatMap({ current.model.entitiesByName[$0] }),
                let oldInverse = movedOld.relationshipsByName[movedSource]?.inverseRelationship, !RelationshipKeys.isKeyed(oldInverse),
                RelationshipKeys.isKeyed(relationship) || oldInverse.isToOne == relationship.isToOne,
                owner.isKind(of: oldInverse.entity ?? owner)
            else { return nil }
            return (oldInverse.name, newReach(relationship.destinationEntity))
        }
        // [ROW-1] Layouts: an entity whose version hash is unchanged keeps the layout it had
        // (a layout given below included). A new one is given when its rows must read through
        // upgrades though the hash is unchanged (a to-one into a hierarchy that split reads only
        // what it still reaches), or when the hash's layout is one an older version names for
        // the number (its rows would read as current).
        for entity in model.entities {
            guard let number = numbers[entity.name], let before = currentOfNumber[number], var id = layoutIDs[entity.name] else { continue }
            let currentID = current.layoutIDs[before.name]
            if before.storageHash == entity.storageHash, let currentID { id = currentID }
            let mapping = destinationOfNumber[number]?.mapping
            let narrowed = Self.fieldProperties(of: entity).contains { property in
                guard let source = mapping?.propertyMapping(named: property.name)?.sourcePropertyName,
                    let sourceProperty = before.propertiesByName[source]
                else { return false }
                return splitReach(property, from: sourceProperty) != nil
            }
            var used = Set<UInt32>()
            for version in versions {
                for (name, taken) in version.numbers where taken == number {
                    if let layout = version.layoutIDs[name] { used.insert(layout) }
                }
            }
            if (narrowed && id == currentID) || (id != currentID && used.contains(id)) {
                layoutIDs[entity.name] = Self.freshLayoutID(from: id, avoiding: used)
            } else {
                layoutIDs[entity.name] = id
            }
        }
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
                    // [MIG-1] A to-one whose destination's hierarchy split reads only what it still
                    // reaches.
                    if let reach = splitReach(property, from: sourceProperty) {
                        let isList = (property as? RelationshipDescription)?.isToMany == true
                        switch reads[source] {
                        case .field(let field, _)?:
                            program[property.name] = isList ? .listOf(field, entities: reach) : .fieldOf(field, entities: reach)
                        case .fieldOf(let field, let before)?:
                            let entities = before.intersection(reach)
                            program[property.name] = isList ? .listOf(field, entities: entities) : .fieldOf(field, entities: entities)
                        case .listOfOne(let field)? where isList:
                            program[property.name] = .listOf(field, entities: reach)
                        case .listOf(let field, let before)? where isList:
                            program[property.name] = .listOf(field, entities: before.intersection(reach))
                        default:
                            program[property.name] = .constant(.null)
                        }
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
                    case .fieldOf(let field, let entities)?:
                        program[property.name] = becomesList ? .listOf(field, entities: entities) : .fieldOf(field, entities: entities)
                    case .listOf(let field, let entities)?:
                        program[property.name] = .listOf(field, entities: entities)
                    case nil:
                        program[property.name] = .constant(defaultValue)
                    }
                }
                // [MIG-1] A new to-one (ordered to-many), the inverse of a moved entity's
                // relationship whose old inverse was a to-one (ordered to-many) of this entity,
                // reads that relationship's old field for the destinations it reaches.
                for case let relationship as RelationshipDescription in Self.fieldProperties(of: entity) {
                    guard !RelationshipKeys.isKeyed(relationship),
                        program[relationship.name].map({ if case .constant = $0 { return true } else { return false } }) ?? true,
                        let (old, reach) = splitInverse(relationship, owner: before)
                    else { continue }
                    switch reads[old] {
                    case .field(let field, _)?:
                        program[relationship.name] = relationship.isToOne ? .fieldOf(field, entities: reach) : .listOf(field, entities: reach)
                    case .fieldOf(let field, let entities)? where relationship.isToOne:
                        program[relationship.name] = .fieldOf(field, entities: entities.intersection(reach))
                    case .listOfOne(let field)? where relationship.isToMany:
                        program[relationship.name] = .listOf(field, entities: reach)
                    case .listOf(let field, let entities)? where relationship.isToMany:
                        program[relationship.name] = .listOf(field, entities: entities.intersection(reach))
                    default:
                        break
                    }
                }
                // [MIG-5] A relationship stored in rows (a to-one, an ordered to-many) that
                // becomes an unordered to-many (keys, [REL-1]) reads its members from the old
                // rows' field until the background build has written their keys.
                for relationship in entity.relationships where RelationshipKeys.isKeyed(relationship) {
                    let mapped = entityMapping.propertyMapping(named: relationship.name)?.sourcePropertyName.flatMap { before.relationshipsByName[$0] }
                    // [MIG-1] A new keyed relationship, the inverse of a moved entity's
                    // relationship whose old inverse was stored in rows of this entity, has its
                    // keys pending from that field (members it reaches only).
                    if mapped == nil, let (old, _) = splitInverse(relationship, owner: before) {
                        switch reads[old] {
                        case .field(let field, _)?, .listOfOne(let field)?, .pendingKeys(let field)?, .fieldOf(let field, _)?, .listOf(let field, _)?:
                            program[relationship.name] = .pendingKeys(field)
                        case .constant?, .listFromKeys?, nil:
                            break
                        }
                        continue
                    }
                    guard let source = mapped?.name, let sourceRelationship = mapped, !RelationshipKeys.isKeyed(sourceRelationship)
                    else { continue }
                    switch reads[source] {
                    case .field(let field, _)?, .listOfOne(let field)?, .pendingKeys(let field)?, .fieldOf(let field, _)?, .listOf(let field, _)?:
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
        // Per old key space, the new root of the entity that was its root, and the rows each
        // new hierarchy takes from it (for a hierarchy that splits).
        var rootHeir: [String: String] = [:], rowsTaken: [String: [String: Int]] = [:]
        for entity in model.entities {
            guard let source = sources[entity.name]?.sourceEntityName, let before = old.entitiesByName[source] else { continue }
            let space = keySpace(ofRoot: before.rootEntityName)
            inherited[entity.rootEntityName, default: []].insert(space)
            if before.superentity == nil { rootHeir[space] = entity.rootEntityName }
            rowsTaken[space, default: [:]][entity.rootEntityName, default: 0] += rowCounts[before.name] ?? 0
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
        // A hierarchy that splits (its entities under several roots now) leaves its key space to
        // the new hierarchy that takes the most of its rows (ties: the one of its root entity,
        // then by name): the others take new ones below, and their rows and keys move ([MIG-1]).
        for (space, takers) in rowsTaken where takers.count > 1 {
            let keeper = takers.sorted { a, b in
                if a.value != b.value { return a.value > b.value }
                if (a.key == rootHeir[space]) != (b.key == rootHeir[space]) { return a.key == rootHeir[space] }
                return a.key < b.key
            }[0].key
            for root in takers.keys where root != keeper && spaces[root] == space { spaces[root] = nil }
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

    /// [ROW-1] A layout for an entity numbered as one whose layouts are `used`: `id` mixed
    /// with a counter 1, 2, … until the result is neither `id` nor used.
    static func freshLayoutID(from id: UInt32, avoiding used: Set<UInt32>) -> UInt32 {
        var counter: UInt32 = 0, candidate = id
        repeat {
            counter &+= 1
            candidate = id ^ (counter &* 0x9E37_79B9)
        } while candidate == id || used.contains(candidate)
        return candidate
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
}

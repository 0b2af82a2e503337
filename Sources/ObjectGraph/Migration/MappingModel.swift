import Foundation

/// How the objects of a store written with one model become objects of another (Core Data's
/// `NSMappingModel`): one ``EntityMapping`` per entity of either model.
///
/// A mapping is either inferred, for the changes Core Data migrates lightweight
/// (``inferred(from:to:)``), or written by hand for the rest, with
/// ``PropertyMapping/Value/expression(_:)`` values in the fetch language.
///
/// For example, the mapping a store needs after a model adds an attribute and renames
/// another:
///
/// ```swift
/// let mapping = try MappingModel.inferred(from: version1, to: version2)
/// for entity in mapping.entityMappings where entity.mappingType != .copy {
///     print(entity.name, entity.mappingType, entity.attributeMappings)
/// }
/// ```
public struct MappingModel: Sendable, Hashable {
    /// The entities' mappings, in the destination model's entity order, then the source's
    /// removed entities.
    public var entityMappings: [EntityMapping]

    /// Creates a mapping from entity mappings.
    public init(entityMappings: [EntityMapping]) {
        self.entityMappings = entityMappings
    }

    /// The mapping of the source entity named `name`, if it maps to a destination entity.
    public func mapping(ofSourceEntity name: String) -> EntityMapping? {
        entityMappings.first { $0.sourceEntityName == name && $0.destinationEntityName != nil }
    }

    /// The mapping that makes the destination entity named `name`, if any.
    public func mapping(ofDestinationEntity name: String) -> EntityMapping? {
        entityMappings.first { $0.destinationEntityName == name }
    }

    /// Whether the mapping changes nothing: every entity copied as it is.
    public var isIdentity: Bool { entityMappings.allSatisfy { $0.mappingType == .copy } }

    /// Whether some entity of the source maps to one of the destination. Automatic migration
    /// refuses a mapping that maps none: the models share nothing (a store opened with another
    /// application's model), and migrating would delete every object.
    public var mapsAnyEntity: Bool {
        entityMappings.contains { $0.sourceEntityName != nil && $0.destinationEntityName != nil }
    }
}

/// How the objects of one entity migrate (Core Data's `NSEntityMapping`).
public struct EntityMapping: Sendable, Hashable {
    /// What the mapping does (Core Data's `NSEntityMappingType`).
    public enum MappingType: String, Sendable, Hashable {
        /// The destination entity is new: no object migrates into it.
        case add
        /// The source entity is gone: its objects are not migrated.
        case remove
        /// The entity's stored form is unchanged (equal version hashes, the same name).
        case copy
        /// The objects migrate with their properties mapped (``attributeMappings``,
        /// ``relationshipMappings``).
        case transform
    }

    /// The mapping's name: `SourceToDestination`, or the one entity's name for an added or
    /// removed entity.
    public var name: String
    /// What the mapping does.
    public var mappingType: MappingType
    /// The entity in the source model, `nil` for an added entity.
    public var sourceEntityName: String?
    /// The entity in the destination model, `nil` for a removed entity.
    public var destinationEntityName: String?
    /// One mapping per stored attribute of the destination entity (inherited ones included).
    public var attributeMappings: [PropertyMapping]
    /// One mapping per stored relationship of the destination entity (inherited ones
    /// included).
    public var relationshipMappings: [PropertyMapping]

    /// Creates an entity mapping.
    public init(
        name: String, mappingType: MappingType, sourceEntityName: String?, destinationEntityName: String?,
        attributeMappings: [PropertyMapping] = [], relationshipMappings: [PropertyMapping] = []
    ) {
        self.name = name
        self.mappingType = mappingType
        self.sourceEntityName = sourceEntityName
        self.destinationEntityName = destinationEntityName
        self.attributeMappings = attributeMappings
        self.relationshipMappings = relationshipMappings
    }

    /// The mapping of the destination property named `name`.
    public func propertyMapping(named name: String) -> PropertyMapping? {
        attributeMappings.first { $0.name == name } ?? relationshipMappings.first { $0.name == name }
    }
}

/// How one property of a destination entity gets its value (Core Data's `NSPropertyMapping`).
public struct PropertyMapping: Sendable, Hashable, CustomStringConvertible {
    /// Where the value comes from.
    public enum Value: Sendable, Hashable {
        /// The source object's stored property of this name, unchanged (a to-one read as a
        /// to-many of one destination, or a to-many as ordered or unordered, where the
        /// destination property is).
        case source(String)
        /// The destination property's default value (null, or no destinations, for a
        /// relationship).
        case defaultValue
        /// An expression in the fetch language, evaluated on the source object (a custom
        /// mapping: `firstName + " " + lastName` is written `FetchExpression` of a function).
        case expression(FetchExpression)
    }

    /// The destination property's name.
    public var name: String
    /// Where its value comes from.
    public var value: Value

    /// Creates a property mapping.
    public init(name: String, value: Value) {
        self.name = name
        self.value = value
    }

    /// `name <- $source.old`, `name <- default`, `name <- expression`.
    public var description: String {
        switch value {
        case .source(let source): return "\(name) <- $source.\(source)"
        case .defaultValue: return "\(name) <- default"
        case .expression(let expression): return "\(name) <- \(expression)"
        }
    }

    /// The source property this mapping copies, if it copies one.
    public var sourcePropertyName: String? {
        if case .source(let name) = value { return name }
        return nil
    }
}

extension MappingModel {
    /// The mapping Core Data infers between two models for a lightweight migration (Core
    /// Data's `NSMappingModel.inferredMappingModel(forSourceModel:destinationModel:)`), or an
    /// error naming every change it cannot infer.
    ///
    /// Entities and properties are matched by renaming identifier (a description's
    /// ``EntityDescription/renamingIdentifier``, or its name when it has none), then by name.
    /// What is inferred:
    /// - an entity added (``EntityMapping/MappingType/add``) or removed
    ///   (``EntityMapping/MappingType/remove``: its objects are dropped), renamed, given a new
    ///   superentity, or made concrete;
    /// - a stored attribute or relationship added (optional, or an attribute with a default
    ///   value), removed or renamed; an attribute made optional, or required with a default
    ///   value (a stored null becomes the default); a changed default;
    /// - a relationship made optional, to-one to to-many, ordered to unordered or back.
    ///
    /// What is not (each named in the error's ``ObjectGraphError/detailedErrors``, with its
    /// entity and property): an attribute's type changed, an attribute that becomes a
    /// relationship or the reverse, a required property added without a default value, an
    /// attribute made required without a default value, a relationship made required, a
    /// to-many made to-one, a relationship whose destination is not the mapped destination,
    /// an entity made abstract.
    ///
    /// Transient properties are not stored, so they are not mapped.
    ///
    /// - Throws: ``ObjectGraphError/Code/inferredMappingFailed`` listing every change that
    ///   cannot be inferred.
    public static func inferred(from source: ManagedObjectModel, to destination: ManagedObjectModel) throws -> MappingModel {
        try inferred(from: source, to: destination, overriding: [:])
    }

    /// The inferred mapping with the values of some destination properties given by `values`
    /// (keys `Entity.property`): a custom mapping that states only what inference cannot know,
    /// such as a changed attribute type converted by an expression. A change inference refuses
    /// is no error when the property it concerns has a value here.
    ///
    /// - Throws: ``ObjectGraphError/Code/inferredMappingFailed`` listing every change that
    ///   cannot be inferred and has no value; ``ObjectGraphError/Code/invalidArgument`` for a
    ///   key that names no stored property of the destination model.
    public static func inferred(
        from source: ManagedObjectModel, to destination: ManagedObjectModel, overriding values: [String: PropertyMapping.Value]
    ) throws -> MappingModel {
        for key in values.keys.sorted() {
            let parts = key.split(separator: ".", maxSplits: 1).map(String.init)
            guard parts.count == 2, let property = destination.entitiesByName[parts[0]]?.propertiesByName[parts[1]], !property.isTransient else {
                throw ObjectGraphError(.invalidArgument, "The mapping gives a value for \(key), which is no stored property of the destination model.")
            }
        }
        var problems: [ObjectGraphError] = []
        var mappings: [EntityMapping] = []
        var matched: [String: EntityDescription] = [:]  // destination name → source entity
        var taken = Set<String>()
        // Renaming identifiers first (a renamed entity), then names.
        for entity in destination.entities {
            if let identifier = entity.renamingIdentifier,
                let old = source.entities.first(where: { ($0.renamingIdentifier ?? $0.name) == identifier && !taken.contains($0.name) })
                    ?? source.entitiesByName[identifier].flatMap({ taken.contains($0.name) ? nil : $0 })
            {
                matched[entity.name] = old
                taken.insert(old.name)
            }
        }
        for entity in destination.entities where matched[entity.name] == nil {
            if let old = source.entitiesByName[entity.name], !taken.contains(old.name) {
                matched[entity.name] = old
                taken.insert(old.name)
            }
        }
        // Source entity name → destination entity name, for relationship destinations.
        var destinationOf: [String: String] = [:]
        for (name, old) in matched { destinationOf[old.name] = name }

        for entity in destination.entities {
            guard let old = matched[entity.name] else {
                mappings.append(EntityMapping(name: entity.name, mappingType: .add, sourceEntityName: nil, destinationEntityName: entity.name))
                continue
            }
            if entity.isAbstract && !old.isAbstract {
                problems.append(ObjectGraphError(
                    .inferredMappingFailed,
                    "entity \(entity.name) becomes abstract; the store's \(old.name) objects could not be instances of it",
                    entityName: entity.name))
            }
            var attributes: [PropertyMapping] = [], relationships: [PropertyMapping] = []
            let oldStored = old.properties.filter { !$0.isTransient }
            var takenProperties = Set<String>()
            func match(_ property: PropertyDescription) -> PropertyDescription? {
                if let identifier = property.renamingIdentifier,
                    let found = oldStored.first(where: { ($0.renamingIdentifier ?? $0.name) == identifier && !takenProperties.contains($0.name) })
                        ?? oldStored.first(where: { $0.name == identifier && !takenProperties.contains($0.name) })
                {
                    return found
                }
                return oldStored.first { $0.name == property.name && !takenProperties.contains($0.name) }
            }
            for property in entity.properties where !property.isTransient {
                let previous = match(property)
                if let previous { takenProperties.insert(previous.name) }
                func fail(_ what: String) {
                    // A property the caller gives a value needs no inference.
                    if values[entity.name + "." + property.name] != nil { return }
                    // A change a subentity inherits is named once, at the entity that declares it.
                    let owner = property.entity?.name ?? entity.name
                    guard !problems.contains(where: { $0.entityName == owner && $0.key == property.name }) else { return }
                    problems.append(ObjectGraphError(.inferredMappingFailed, "\(owner).\(property.name): \(what)", entityName: owner, key: property.name))
                }
                switch (property, previous) {
                case (let attribute as AttributeDescription, nil):
                    if !attribute.isOptional && attribute.defaultValue.isNull {
                        fail("a new required attribute without a default value; existing objects would have no value")
                    }
                    attributes.append(PropertyMapping(name: attribute.name, value: .defaultValue))
                case (let relationship as RelationshipDescription, nil):
                    if !relationship.isOptional || relationship.minCount > 0 {
                        fail("a new required relationship; existing objects would have no destination")
                    }
                    relationships.append(PropertyMapping(name: relationship.name, value: .defaultValue))
                case (let attribute as AttributeDescription, let before as AttributeDescription):
                    if before.attributeType != attribute.attributeType {
                        fail("the type changes from \(before.attributeType) to \(attribute.attributeType) (stored as \(before.name)); lightweight migration does not convert values")
                    } else if before.isOptional && !attribute.isOptional && attribute.defaultValue.isNull {
                        fail("becomes required without a default value; objects without a value would have none")
                    }
                    attributes.append(PropertyMapping(name: attribute.name, value: .source(before.name)))
                case (let relationship as RelationshipDescription, let before as RelationshipDescription):
                    let mappedDestination = destinationOf[before.destinationEntityName]
                    if mappedDestination.map({ !Self.isKind($0, of: relationship.destinationEntityName, in: destination) }) ?? true {
                        fail("the destination changes from \(before.destinationEntityName) to \(relationship.destinationEntityName); lightweight migration keeps destinations")
                    } else if before.isToMany && !relationship.isToMany {
                        fail("becomes to-one; objects with more than one destination would lose some")
                    } else if before.isOptional && !relationship.isOptional || relationship.minCount > before.minCount {
                        fail("becomes required; objects without destinations would not validate")
                    }
                    relationships.append(PropertyMapping(name: relationship.name, value: .source(before.name)))
                case (_, let before?):
                    fail("was \(before is AttributeDescription ? "an attribute" : "a relationship") (stored as \(before.name)), is \(property is AttributeDescription ? "an attribute" : "a relationship"); lightweight migration does not convert between them")
                    if property is AttributeDescription {
                        attributes.append(PropertyMapping(name: property.name, value: .defaultValue))
                    } else {
                        relationships.append(PropertyMapping(name: property.name, value: .defaultValue))
                    }
                default:
                    break
                }
            }
            for (index, mapping) in attributes.enumerated() {
                if let value = values[entity.name + "." + mapping.name] { attributes[index].value = value }
            }
            for (index, mapping) in relationships.enumerated() {
                if let value = values[entity.name + "." + mapping.name] { relationships[index].value = value }
            }
            let unchanged = values.isEmpty && old.name == entity.name && old.versionHash == entity.versionHash
                && attributes.allSatisfy { $0.sourcePropertyName == $0.name }
                && relationships.allSatisfy { $0.sourcePropertyName == $0.name }
            mappings.append(EntityMapping(
                name: unchanged ? entity.name : "\(old.name)To\(entity.name)", mappingType: unchanged ? .copy : .transform,
                sourceEntityName: old.name, destinationEntityName: entity.name,
                attributeMappings: attributes, relationshipMappings: relationships))
        }
        for entity in source.entities where !taken.contains(entity.name) {
            mappings.append(EntityMapping(name: entity.name, mappingType: .remove, sourceEntityName: entity.name, destinationEntityName: nil))
        }
        guard problems.isEmpty else {
            throw ObjectGraphError(
                .inferredMappingFailed,
                "Lightweight migration cannot infer a mapping (\(problems.count == 1 ? "1 change" : "\(problems.count) changes")): "
                    + problems.map(\.message).joined(separator: "; ")
                    + ". Migrate with a custom stage or mapping model.",
                entityName: problems.first?.entityName, key: problems.first?.key, detailedErrors: problems)
        }
        return MappingModel(entityMappings: mappings)
    }

    /// Whether `name` is `ancestor` or one of its subentities in `model`.
    private static func isKind(_ name: String, of ancestor: String, in model: ManagedObjectModel) -> Bool {
        var current = model.entitiesByName[name]
        while let entity = current {
            if entity.name == ancestor { return true }
            current = entity.superentityName.flatMap { model.entitiesByName[$0] }
        }
        return false
    }
}

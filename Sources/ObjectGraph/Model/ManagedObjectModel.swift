import Foundation
import StrataSync

/// A set of entities and the configurations that group them (Core Data's
/// `NSManagedObjectModel`), checked for consistency when created.
///
/// For example:
///
/// ```swift
/// let model = try ManagedObjectModel(entities: [
///     EntityDescription(name: "Department", properties: [
///         .attribute("name", .string, optional: false),
///         .toMany("employees", "Person", inverse: "department", deleteRule: .cascade),
///     ]),
///     EntityDescription(name: "Person", properties: [
///         .attribute("name", .string),
///         .toOne("department", "Department", inverse: "employees"),
///     ]),
/// ])
/// ```
///
/// A model is immutable once created; every problem found (duplicate names, an unknown
/// destination or superentity, an inverse that does not exist or does not point back,
/// a default value of the wrong type) is reported in one
/// ``ObjectGraphError/Code/invalidModel`` error whose ``ObjectGraphError/detailedErrors``
/// name each problem.
public final class ManagedObjectModel: Sendable, CustomStringConvertible {
    /// The entities, in the order given.
    public let entities: [EntityDescription]
    /// The entities by name.
    public let entitiesByName: [String: EntityDescription]
    /// Named groups of entities; a store added with a configuration holds only those entities.
    public let configurations: [String: [String]]
    /// Each entity's version hash, by entity name.
    public let entityVersionHashesByName: [String: Data]
    /// The model's version names (Core Data's `versionIdentifiers`): yours to tell versions
    /// apart; they do not enter any version hash.
    public let versionIdentifiers: Set<String>
    /// The predicates a context has checked against this model's entities (``checkedPredicates``):
    /// a fetch of the same shape skips the checks, which depend on the predicate and entity
    /// alone. A cache, protected by its own lock.
    let checkedPredicates = Locked(RecentTable<EntityPredicate, Void>(capacity: 256))

    /// Creates and checks a model.
    ///
    /// - Parameters:
    ///   - entities: The entities; superentities and relationship destinations are named.
    ///   - configurations: Configuration names mapped to the names of their entities.
    ///   - versionIdentifiers: The model's version names (``versionIdentifiers``).
    /// - Throws: ``ObjectGraphError/Code/invalidModel`` naming every inconsistency.
    public init(entities: [EntityDescription], configurations: [String: [String]] = [:], versionIdentifiers: Set<String> = []) throws {
        self.versionIdentifiers = versionIdentifiers
        var problems: [String] = []
        var byName: [String: EntityDescription] = [:]
        for entity in entities {
            if entity.name.isEmpty { problems.append("An entity has an empty name.") }
            if byName[entity.name] != nil {
                problems.append("Duplicate entity name \"\(entity.name)\".")
            }
            byName[entity.name] = entity
            if entity.managedObjectModel != nil {
                problems.append("Entity \(entity.name) already belongs to another model.")
            }
            for property in entity.ownProperties where property.owningModel != nil {
                problems.append("Property \(property.name) of \(entity.name) already belongs to another model.")
            }
        }
        // Entities and properties of a live model are not touched: their links stay its own.
        if !problems.isEmpty { throw Self.invalid(problems) }
        // Links left by a model that is gone (or by a failed init) are not read: reset them.
        for entity in entities {
            entity.superentityLink = nil
            entity.subentities = []
            for case let relationship as RelationshipDescription in entity.ownProperties {
                relationship.destinationLink = nil
                relationship.inverseLink = nil
            }
        }
        Self.linkInheritance(entities, byName, &problems)
        var linked: Set<ObjectIdentifier> = []
        for entity in entities { Self.collectProperties(of: entity, linked: &linked, &problems) }
        for entity in entities {
            for case let relationship as RelationshipDescription in entity.ownProperties {
                Self.link(relationship, in: entity, byName, &problems)
            }
        }
        for entity in entities {
            for case let attribute as AttributeDescription in entity.ownProperties { attribute.isConstrained = false }
        }
        for entity in entities { Self.checkConstraints(of: entity, &problems) }
        for entity in entities { Self.checkTypedDefaults(of: entity, &problems) }
        for (configuration, names) in configurations {
            for name in names where byName[name] == nil {
                problems.append("Configuration \"\(configuration)\" names unknown entity \"\(name)\".")
            }
        }
        if !problems.isEmpty { throw Self.invalid(problems) }
        for entity in entities { entity.computeLayout() }
        for entity in entities { Self.checkManagedKeys(of: entity, &problems) }
        if !problems.isEmpty { throw Self.invalid(problems) }
        var hashes: [String: Data] = [:]
        for entity in entities {
            entity.storageHash = VersionHash.digest(of: Self.versionText(of: entity))
            entity.versionHash = entity.uniquenessConstraints.isEmpty
                ? entity.storageHash : VersionHash.digest(of: Self.versionText(of: entity) + Self.constraintText(of: entity))
            hashes[entity.name] = entity.versionHash
            for property in entity.ownProperties { property.versionHash = VersionHash.digest(of: property.versionHashText) }
        }
        self.entities = entities
        self.entitiesByName = byName
        self.configurations = configurations
        self.entityVersionHashesByName = hashes
        for entity in entities {
            entity.managedObjectModel = self
            for property in entity.ownProperties { property.owningModel = self }
        }
    }

    /// A typed entity class's required transformable properties read the attribute's default
    /// when the object holds no value (they have no empty value of their own): the entity must
    /// have one, whether the model was built from the types or by name with the class.
    private static func checkTypedDefaults(of entity: EntityDescription, _ problems: inout [String]) {
        guard let type = entity.managedObjectClass as? any EntityType.Type else { return }
        for property in type.entityProperties {
            guard case .attribute(.transformable, optional: false, _) = property.kind else { continue }
            guard let attribute = entity.attributesByName[property.name] else {
                problems.append("\(entity.name) has no attribute \(property.name), which its class \(type) declares.")
                continue
            }
            if attribute.defaultValue.isNull {
                problems.append(
                    "\(entity.name).\(property.name) is a required \(property.valueTypeName ?? "Codable") property of \(type) with no default: give it an initial value, or make it optional.")
            }
        }
    }

    /// Every `@Managed` property of an entity's class names a property of the entity: a
    /// misspelled key is refused here, where it would otherwise read nil and drop writes. The
    /// keys are read off an instance made without a context (a class's own initializer runs,
    /// as when a context makes a fault), through its stored properties.
    private static func checkManagedKeys(of entity: EntityDescription, _ problems: inout [String]) {
        let type = entity.managedObjectClass
        guard type != ManagedObject.self else { return }
        let object = type.init(entity: entity, insertInto: nil)
        var mirror: Mirror? = Mirror(reflecting: object)
        while let current = mirror, current.subjectType != ManagedObject.self {
            for child in current.children {
                guard let managed = child.value as? any ManagedKeyed, entity.propertiesByName[managed.key] == nil else { continue }
                let property = child.label.map { $0.hasPrefix("_") ? String($0.dropFirst()) : $0 } ?? "?"
                problems.append(
                    "\(entity.name)'s class \(type) declares @Managed(\"\(managed.key)\") var \(property), but \(entity.name) has no property \(managed.key).")
            }
            mirror = current.superclassMirror
        }
    }

    /// The error for `problems`: one ``ObjectGraphError/Code/invalidModel`` naming each.
    private static func invalid(_ problems: [String]) -> ObjectGraphError {
        ObjectGraphError(
            .invalidModel,
            problems.count == 1 ? "Invalid model: \(problems[0])" : "Invalid model: \(problems.count) problems; see detailedErrors.",
            detailedErrors: problems.map { ObjectGraphError(.invalidModel, $0) })
    }

    /// A one-line summary of the model.
    public var description: String { "ManagedObjectModel(\(entities.map(\.name).joined(separator: ", ")))" }

    /// The entity of the given name, or an ``ObjectGraphError/Code/unknownEntity`` error.
    public func entity(named name: String) throws -> EntityDescription {
        guard let entity = entitiesByName[name] else {
            throw ObjectGraphError(.unknownEntity, "The model has no entity named \"\(name)\".", entityName: name)
        }
        return entity
    }

    /// The entities of a configuration; all entities for `nil`.
    public func entities(forConfigurationName configuration: String?) -> [EntityDescription] {
        guard let configuration else { return entities }
        return (configurations[configuration] ?? []).compactMap { entitiesByName[$0] }
    }

    /// Whether a store's metadata records the same version hashes as this model for every
    /// entity of a configuration (all entities for `nil`), and none for an entity the model
    /// does not have: ``differences(ofConfiguration:fromStoreMetadata:)`` finds nothing.
    public func isConfiguration(_ configuration: String?, compatibleWithStoreMetadata metadata: [String: AttributeValue]) -> Bool {
        differences(ofConfiguration: configuration, fromStoreMetadata: metadata).isEmpty
    }

    /// ``isConfiguration(_:compatibleWithStoreMetadata:)`` under Core Data's name
    /// (`isConfiguration(withName:compatibleWithStoreMetadata:)`).
    public func isConfiguration(withName configuration: String?, compatibleWithStoreMetadata metadata: [String: AttributeValue]) -> Bool {
        isConfiguration(configuration, compatibleWithStoreMetadata: metadata)
    }

    /// The entity whose objects are instances of `type`, if exactly that class is used.
    public func entity(for type: ManagedObject.Type) -> EntityDescription? {
        entities.first { $0.managedObjectClass == type }
    }

    // MARK: - Checking and linking

    private static func linkInheritance(
        _ entities: [EntityDescription], _ byName: [String: EntityDescription], _ problems: inout [String]
    ) {
        for entity in entities {
            guard let parentName = entity.superentityName else { continue }
            guard let parent = byName[parentName] else {
                problems.append("Entity \(entity.name) names unknown superentity \"\(parentName)\".")
                continue
            }
            entity.superentityLink = parent
            parent.subentities.append(entity)
        }
        for entity in entities {
            var seen: Set<String> = [entity.name]
            var current = entity.superentityLink
            while let next = current {
                if !seen.insert(next.name).inserted {
                    problems.append("Entity \(entity.name) is part of an inheritance cycle.")
                    entity.superentityLink = nil
                    break
                }
                current = next.superentityLink
            }
        }
    }

    /// `linked`: the properties given an entity by this model so far.
    private static func collectProperties(
        of entity: EntityDescription, linked: inout Set<ObjectIdentifier>, _ problems: inout [String]
    ) {
        var chain: [EntityDescription] = []
        var current: EntityDescription? = entity
        while let next = current, chain.count < 1_000 {
            chain.insert(next, at: 0)
            current = next.superentityLink
        }
        var properties: [PropertyDescription] = []
        var byName: [String: PropertyDescription] = [:]
        for owner in chain {
            for property in owner.ownProperties {
                if property.name.isEmpty { problems.append("Entity \(owner.name) has a property with an empty name.") }
                if byName[property.name] != nil {
                    if owner === entity {
                        problems.append("Duplicate property name \"\(property.name)\" in entity \(entity.name).")
                    }
                    continue
                }
                byName[property.name] = property
                properties.append(property)
            }
        }
        entity.properties = properties
        entity.propertiesByName = byName
        entity.propertyNames = PropertyNameTable(properties)
        entity.attributesByName = byName.compactMapValues { $0 as? AttributeDescription }
        entity.relationshipsByName = byName.compactMapValues { $0 as? RelationshipDescription }
        for (ordinal, property) in properties.enumerated() where entity.ownProperties.contains(where: { $0 === property }) {
            // Inherited properties come first, so an own property's ordinal is the same in
            // every subentity.
            property.ordinal = ordinal
        }
        for property in entity.ownProperties {
            if !linked.insert(ObjectIdentifier(property)).inserted, property.entityLink !== entity {
                problems.append("Property \(property.name) of \(entity.name) is already used by entity \(property.entityLink?.name ?? "?").")
            }
            property.entityLink = entity
            if let attribute = property as? AttributeDescription { check(attribute, in: entity, &problems) }
        }
    }

    /// Checks an entity's uniqueness constraints (each names stored attributes of the entity,
    /// at least one, none twice) and marks the attributes they name.
    private static func checkConstraints(of entity: EntityDescription, _ problems: inout [String]) {
        for names in entity.uniquenessConstraints {
            let label = "Uniqueness constraint [\(names.joined(separator: ", "))] of \(entity.name)"
            if names.isEmpty { problems.append("A uniqueness constraint of \(entity.name) names no attribute.") }
            if Set(names).count != names.count { problems.append("\(label) names an attribute twice.") }
            for name in names {
                guard let property = entity.propertiesByName[name] else {
                    problems.append("\(label) names \"\(name)\", which is not a property of \(entity.name).")
                    continue
                }
                guard let attribute = property as? AttributeDescription else {
                    problems.append("\(label) names relationship \"\(name)\"; only attributes can be constrained.")
                    continue
                }
                if attribute.isTransient {
                    problems.append("\(label) names transient attribute \"\(name)\", which no store holds.")
                    continue
                }
                attribute.isConstrained = true
            }
        }
    }

    private static func check(_ attribute: AttributeDescription, in entity: EntityDescription, _ problems: inout [String]) {
        let label = "\(entity.name).\(attribute.name)"
        if attribute.defaultValue.converted(to: attribute.attributeType) == nil {
            problems.append("Default value of \(label) is \(attribute.defaultValue.typeName), expected \(attribute.attributeType).")
        }
        for rule in attribute.validationRules {
            switch rule {
            case .pattern(let pattern):
                if (try? Regex(pattern)) == nil { problems.append("Pattern /\(pattern)/ of \(label) is not a valid regular expression.") }
            case .minimum(let bound), .maximum(let bound):
                if AttributeValue.compare(bound, bound) == nil || bound.isNull {
                    problems.append("Bound \(bound) of \(label) cannot be compared.")
                }
            case .minimumLength(let n), .maximumLength(let n):
                if n < 0 { problems.append("Length bound \(n) of \(label) is negative.") }
            }
        }
    }

    private static func link(
        _ relationship: RelationshipDescription, in entity: EntityDescription,
        _ byName: [String: EntityDescription], _ problems: inout [String]
    ) {
        let label = "\(entity.name).\(relationship.name)"
        guard let destination = byName[relationship.destinationEntityName] else {
            problems.append("Relationship \(label) names unknown destination entity \"\(relationship.destinationEntityName)\".")
            return
        }
        relationship.destinationLink = destination
        if relationship.minCount < 0 || relationship.maxCount < 0
            || (relationship.maxCount > 0 && relationship.minCount > relationship.maxCount)
        {
            problems.append("Relationship \(label) has inconsistent counts \(relationship.minCount)...\(relationship.maxCount).")
        }
        guard let inverseName = relationship.inverseName else { return }
        guard let inverse = destination.relationshipsByName[inverseName] else {
            problems.append("Relationship \(label) names inverse \"\(inverseName)\", which is not a relationship of \(destination.name).")
            return
        }
        guard let inverseTarget = byName[inverse.destinationEntityName], entity.inherits(from: inverseTarget) else {
            problems.append("Inverse \(destination.name).\(inverseName) of \(label) points to \(inverse.destinationEntityName), not \(entity.name).")
            return
        }
        if let back = inverse.inverseName, back != relationship.name {
            problems.append("Inverse \(destination.name).\(inverseName) of \(label) names \"\(back)\" as its own inverse, not \"\(relationship.name)\".")
            return
        }
        relationship.inverseLink = inverse
        if inverse.inverseName == nil { inverse.inverseLink = relationship }
    }

    /// What the entity's own uniqueness constraints add to its version hash (Core Data: they
    /// "form part of the entity's version hash"): each constraint's names in order, the
    /// constraints in their order. Empty constraints add nothing, so that an entity without
    /// any keeps the hash it had before constraints entered it.
    private static func constraintText(of entity: EntityDescription) -> String {
        "|unique:" + entity.uniquenessConstraints.map { $0.joined(separator: ",") }.joined(separator: ";")
    }

    private static func versionText(of entity: EntityDescription) -> String {
        let stored = entity.properties.filter { !$0.isTransient }.sorted { $0.name < $1.name }
        let text = "\(entity.name)|\(entity.superentityName ?? "")|\(entity.isAbstract)|" + stored.map(\.versionHashText).joined(separator: ";")
        return entity.versionHashModifier.map { text + "|modifier:" + $0 } ?? text
    }
}

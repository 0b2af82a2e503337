import Foundation

/// One way the model a store was saved with differs from the model that opens it, in what
/// entity version hashes cover (``EntityDescription/versionHash``): which entities there are,
/// their superentity, abstractness and uniqueness constraints, and their stored properties'
/// names, kinds, optionality, attribute types and relationships' destinations, inverses,
/// to-many and ordered flags. Indexing, default values, validation rules, delete rules, relationship
/// counts, classes and transient properties are not differences: they do not change what a
/// store holds.
///
/// For example, `Member.score: integer64 in the store, string in the model`.
public struct ModelDifference: Sendable, Hashable, CustomStringConvertible {
    /// The entity that differs.
    public var entityName: String
    /// The property that differs, if the difference is one property's.
    public var propertyName: String?
    /// What differs, as a sentence fragment naming the entity (and property).
    public var description: String

    /// Creates a difference.
    public init(entityName: String, propertyName: String? = nil, description: String) {
        self.entityName = entityName
        self.propertyName = propertyName
        self.description = description
    }
}

extension ManagedObjectModel {
    /// How this model differs from `stored`, the model a store was saved with, entity by entity
    /// and property by property, in the terms of ``ModelDifference``; empty when every entity
    /// of either model is in the other with the same version hash.
    ///
    /// A property change an entity inherits is named once, at the superentity that declares
    /// it; the subentity is named as inheriting it.
    public func differences(fromStoreModel stored: ManagedObjectModel) -> [ModelDifference] {
        var differences: [ModelDifference] = [], inheriting: [ModelDifference] = []
        // Every changed entity's property differences first: a subentity's are compared with
        // its superentity's, whatever their names' order.
        var propertyLines: [String: [String: String]] = [:]
        for entity in entities {
            guard let old = stored.entitiesByName[entity.name], old.versionHash != entity.versionHash else { continue }
            propertyLines[entity.name] = Self.propertyDifferences(stored: old, model: entity)
        }
        for name in Set(entitiesByName.keys).union(stored.entitiesByName.keys).sorted() {
            guard let entity = entitiesByName[name] else {
                differences.append(ModelDifference(entityName: name, description: "entity \(name) is in the store but not in the model"))
                continue
            }
            guard let old = stored.entitiesByName[name] else {
                differences.append(ModelDifference(entityName: name, description: "entity \(name) is in the model but not in the store"))
                continue
            }
            guard old.versionHash != entity.versionHash else { continue }
            var found: [ModelDifference] = []
            if old.superentityName != entity.superentityName {
                found.append(ModelDifference(
                    entityName: name,
                    description: "entity \(name): superentity \(old.superentityName ?? "none") in the store, \(entity.superentityName ?? "none") in the model"))
            }
            if old.isAbstract != entity.isAbstract {
                found.append(ModelDifference(
                    entityName: name,
                    description: "entity \(name): \(old.isAbstract ? "abstract" : "concrete") in the store, \(entity.isAbstract ? "abstract" : "concrete") in the model"))
            }
            if old.uniquenessConstraints != entity.uniquenessConstraints {
                func text(_ constraints: [[String]]) -> String {
                    constraints.isEmpty ? "none" : constraints.map { "(" + $0.joined(separator: ", ") + ")" }.joined(separator: ", ")
                }
                found.append(ModelDifference(
                    entityName: name,
                    description: "entity \(name): uniqueness constraints \(text(old.uniquenessConstraints)) in the store, \(text(entity.uniquenessConstraints)) in the model"))
            }
            let lines = propertyLines[name] ?? [:]
            // A change the superentity declares (the same property, the same way) is its own.
            let inherited = entity.superentityName == old.superentityName ? entity.superentityName.flatMap { propertyLines[$0] } : nil
            for property in lines.keys.sorted() where inherited?[property] != lines[property] {
                found.append(ModelDifference(entityName: name, propertyName: property, description: "\(name).\(property): \(lines[property] ?? "")"))
            }
            if found.isEmpty {
                if let superentity = entity.superentityName, inherited?.isEmpty == false {
                    inheriting.append(ModelDifference(entityName: name, description: "entity \(name) inherits the changes of \(superentity)"))
                } else {
                    found.append(ModelDifference(entityName: name, description: "entity \(name): its version hash differs from the store's"))
                }
            }
            differences += found
        }
        // Subentities that only inherit a change come after the changes themselves.
        return differences + inheriting
    }

    /// How this model's entities differ from the version hashes a store's metadata records
    /// (`NSStoreModelVersionHashes.<Entity>`), entity by entity, over the entities of the
    /// configuration (Core Data's `isConfiguration(withName:compatibleWithStoreMetadata:)`):
    /// an entity of the configuration without a hash, or whose hash differs; and, for the
    /// `nil` configuration (every entity), an entity the store has a hash for that the model
    /// lacks. Hashes of entities outside a named configuration are not compared: another
    /// configuration's changes do not concern this store. Metadata without any version hash
    /// (a new store) differs in every entity of the configuration.
    public func differences(ofConfiguration configuration: String?, fromStoreMetadata metadata: [String: AttributeValue]) -> [ModelDifference] {
        let prefix = PersistentStore.modelVersionHashKeyPrefix
        var stored: [String: AttributeValue] = [:]
        for (key, value) in metadata where key.hasPrefix(prefix) { stored[String(key.dropFirst(prefix.count))] = value }
        var differences: [ModelDifference] = []
        let held = Set(entities(forConfigurationName: configuration).map(\.name))
        for name in (configuration == nil ? held.union(stored.keys) : held).sorted() {
            guard let entity = entitiesByName[name] else {
                differences.append(ModelDifference(entityName: name, description: "entity \(name) is in the store but not in the model"))
                continue
            }
            guard let hash = stored[name] else {
                differences.append(ModelDifference(entityName: name, description: "entity \(name) is in the model but not in the store"))
                continue
            }
            if hash != .data(entity.versionHash) {
                differences.append(ModelDifference(
                    entityName: name, description: "entity \(name) differs from the store's (its version hash differs; the store records no model to say how)"))
            }
        }
        return differences
    }

    /// The differences between the stored properties of one entity in two models, by property
    /// name: what differs, from the store's side to the model's.
    private static func propertyDifferences(stored old: EntityDescription, model new: EntityDescription) -> [String: String] {
        func storedProperties(_ entity: EntityDescription) -> [String: PropertyDescription] {
            Dictionary(entity.properties.filter { !$0.isTransient }.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        }
        let before = storedProperties(old), after = storedProperties(new)
        var lines: [String: String] = [:]
        for name in Set(before.keys).union(after.keys) {
            switch (before[name], after[name]) {
            case (let property?, nil):
                lines[name] = "\(summary(of: property)) is in the store but not in the model"
            case (nil, let property?):
                lines[name] = "\(summary(of: property)) is in the model but not in the store"
            case (let a as AttributeDescription, let b as AttributeDescription):
                var parts: [String] = []
                if a.attributeType != b.attributeType { parts.append("\(a.attributeType) in the store, \(b.attributeType) in the model") }
                if a.isOptional != b.isOptional { parts.append(optionality(a, b)) }
                if !parts.isEmpty { lines[name] = parts.joined(separator: ", ") }
            case (let a as RelationshipDescription, let b as RelationshipDescription):
                var parts: [String] = []
                if a.destinationEntityName != b.destinationEntityName {
                    parts.append("destination \(a.destinationEntityName) in the store, \(b.destinationEntityName) in the model")
                }
                if a.inverseName != b.inverseName {
                    parts.append("inverse \(a.inverseName ?? "none") in the store, \(b.inverseName ?? "none") in the model")
                }
                if a.isToMany != b.isToMany {
                    parts.append("\(a.isToMany ? "to-many" : "to-one") in the store, \(b.isToMany ? "to-many" : "to-one") in the model")
                }
                if a.isOrdered != b.isOrdered {
                    parts.append("\(a.isOrdered ? "ordered" : "unordered") in the store, \(b.isOrdered ? "ordered" : "unordered") in the model")
                }
                if a.isOptional != b.isOptional { parts.append(optionality(a, b)) }
                if !parts.isEmpty { lines[name] = parts.joined(separator: ", ") }
            case (let a?, let b?):
                lines[name] = "\(summary(of: a)) in the store, \(summary(of: b)) in the model"
            case (nil, nil):
                break
            }
        }
        return lines
    }

    private static func optionality(_ a: PropertyDescription, _ b: PropertyDescription) -> String {
        "\(a.isOptional ? "optional" : "required") in the store, \(b.isOptional ? "optional" : "required") in the model"
    }

    /// A property as a difference names it: `attribute (string, optional)`,
    /// `to-one relationship to Team`.
    private static func summary(of property: PropertyDescription) -> String {
        let optional = property.isOptional ? "optional" : "required"
        if let attribute = property as? AttributeDescription { return "attribute (\(attribute.attributeType), \(optional))" }
        if let relationship = property as? RelationshipDescription {
            let kind = relationship.isToMany ? (relationship.isOrdered ? "ordered to-many" : "to-many") : "to-one"
            return "\(kind) relationship to \(relationship.destinationEntityName) (\(optional))"
        }
        return "property"
    }
}

extension ObjectGraphError {
    /// The ``Code/incompatibleModel`` error for a store at `url` whose model differs from the
    /// opening one: the message lists every difference, and ``detailedErrors`` holds one error
    /// per difference (with its entity and property).
    public static func incompatibleModel(_ differences: [ModelDifference], storeURL url: URL?) -> ObjectGraphError {
        let location = url.map { $0.isFileURL ? $0.path : $0.absoluteString } ?? "(no URL)"
        let count = differences.count == 1 ? "1 difference" : "\(differences.count) differences"
        return ObjectGraphError(
            .incompatibleModel,
            "The model used to open the store at \(location) is incompatible with the one the store was saved with (\(count)): "
                + differences.map(\.description).joined(separator: "; ")
                + ". Nothing was written; open the store with its own model, or migrate it (with the migrate and infer-mapping options, a store that keeps its model migrates lightweight changes).",
            entityName: differences.first?.entityName,
            key: differences.first?.propertyName,
            detailedErrors: differences.map {
                ObjectGraphError(.incompatibleModel, $0.description, entityName: $0.entityName, key: $0.propertyName)
            })
    }
}

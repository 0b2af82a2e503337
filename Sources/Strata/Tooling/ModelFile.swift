import Foundation
import ObjectGraph

/// A model written as JSON, for tools that have no application code (`strata migrate`): the
/// entities, their properties and what the model says of each, as `ManagedObjectModel`
/// holds them (object classes and validation rules excepted).
///
/// For example:
///
/// ```json
/// {"entities": [
///   {"name": "Author", "properties": [
///     {"name": "name", "kind": "attribute", "type": "string", "indexed": true},
///     {"name": "books", "kind": "relationship", "destination": "Book", "inverse": "author", "toMany": true}]},
///   {"name": "Book", "properties": [
///     {"name": "title", "kind": "attribute", "type": "string", "optional": false, "default": ""},
///     {"name": "author", "kind": "relationship", "destination": "Author", "inverse": "books"}]}]}
/// ```
///
/// Omitted keys take the model's defaults (optional, not indexed, not transient, to-one,
/// unordered, `nullify`). A default value is a JSON string, number or boolean, converted to
/// the attribute's type.
public struct ModelFile: Codable, Sendable, Equatable {
    /// One entity.
    public struct Entity: Codable, Sendable, Equatable {
        public var name: String
        public var superentity: String?
        public var abstract: Bool?
        public var renamingIdentifier: String?
        public var versionHashModifier: String?
        public var uniquenessConstraints: [[String]]?
        public var properties: [Property]

        /// Creates an entity.
        public init(
            name: String, superentity: String? = nil, abstract: Bool? = nil, renamingIdentifier: String? = nil,
            versionHashModifier: String? = nil, uniquenessConstraints: [[String]]? = nil, properties: [Property]
        ) {
            self.name = name
            self.superentity = superentity
            self.abstract = abstract
            self.renamingIdentifier = renamingIdentifier
            self.versionHashModifier = versionHashModifier
            self.uniquenessConstraints = uniquenessConstraints
            self.properties = properties
        }
    }

    /// One property: an attribute (`kind` "attribute", with `type`) or a relationship (`kind`
    /// "relationship", with `destination`).
    public struct Property: Codable, Sendable, Equatable {
        public var name: String
        public var kind: String
        public var type: String?
        public var optional: Bool?
        public var transient: Bool?
        public var indexed: Bool?
        public var `default`: JSONValue?
        public var destination: String?
        public var inverse: String?
        public var toMany: Bool?
        public var ordered: Bool?
        public var deleteRule: String?
        public var minCount: Int?
        public var maxCount: Int?
        public var renamingIdentifier: String?
        public var versionHashModifier: String?

        /// Creates a property; see ``ModelFile/Property``.
        public init(name: String, kind: String) {
            self.name = name
            self.kind = kind
        }
    }

    /// The entities.
    public var entities: [Entity]

    /// Creates a model file of `entities`.
    public init(entities: [Entity]) { self.entities = entities }

    /// The file of `model`: every entity and its own properties, keys at their defaults left out.
    public init(model: ManagedObjectModel) {
        entities = model.entities.map { entity in
            Entity(
                name: entity.name, superentity: entity.superentityName, abstract: entity.isAbstract ? true : nil,
                renamingIdentifier: entity.renamingIdentifier, versionHashModifier: entity.versionHashModifier,
                uniquenessConstraints: entity.uniquenessConstraints.isEmpty ? nil : entity.uniquenessConstraints,
                properties: entity.ownProperties.map { property in
                    var file = Property(name: property.name, kind: property is RelationshipDescription ? "relationship" : "attribute")
                    file.optional = property.isOptional ? nil : false
                    file.transient = property.isTransient ? true : nil
                    file.indexed = property.isIndexed ? true : nil
                    file.renamingIdentifier = property.renamingIdentifier
                    file.versionHashModifier = property.versionHashModifier
                    if let attribute = property as? AttributeDescription {
                        file.type = attribute.attributeType.rawValue
                        file.default = Self.json(attribute.defaultValue)
                    } else if let relationship = property as? RelationshipDescription {
                        file.destination = relationship.destinationEntityName
                        file.inverse = relationship.inverseName
                        file.toMany = relationship.isToMany ? true : nil
                        file.ordered = relationship.isOrdered ? true : nil
                        file.deleteRule = relationship.deleteRule == .nullify ? nil : relationship.deleteRule.rawValue
                        file.minCount = relationship.minCount == 0 ? nil : relationship.minCount
                        file.maxCount = relationship.maxCount == 0 ? nil : relationship.maxCount
                    }
                    return file
                })
        }
    }

    /// A default value as JSON (`nil` for none, or for a value JSON does not carry).
    private static func json(_ value: AttributeValue) -> JSONValue? {
        switch value {
        case .null: return nil
        case .bool(let flag): return .bool(flag)
        case .string(let text): return .string(text)
        default:
            if let integer = value.integer { return .number(Double(integer)) }
            if let number = value.doubleValue { return .number(number) }
            return .string(value.description)
        }
    }

    /// The model the file describes.
    ///
    /// - Throws: `ObjectGraphError/Code/invalidModel` naming the entity and property of an
    ///   unknown kind, type or delete rule, or a default that does not convert; the model's own
    ///   validation errors.
    public func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: try entities.map { entity in
            EntityDescription(
                name: entity.name, superentity: entity.superentity, isAbstract: entity.abstract ?? false,
                properties: try entity.properties.map { try property($0, of: entity.name) },
                uniquenessConstraints: entity.uniquenessConstraints ?? [], versionHashModifier: entity.versionHashModifier,
                renamingIdentifier: entity.renamingIdentifier)
        })
    }

    private func property(_ file: Property, of entity: String) throws -> PropertyDescription {
        func fail(_ what: String) -> ObjectGraphError {
            ObjectGraphError(.invalidModel, "\(entity).\(file.name): \(what).", entityName: entity, key: file.name)
        }
        switch file.kind {
        case "attribute":
            guard let typeName = file.type, let type = AttributeType(rawValue: typeName) else {
                throw fail("type \"\(file.type ?? "")\" is not one of \(AttributeType.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            var defaultValue = AttributeValue.null
            if let given = file.default {
                let raw: AttributeValue
                switch given {
                case .string(let text): raw = .string(text)
                case .number(let number): raw = number.rounded() == number && abs(number) < 9e15 ? .int64(Int64(number)) : .double(number)
                case .bool(let flag): raw = .bool(flag)
                case .null: raw = .null
                default: throw fail("the default is not a string, number or boolean")
                }
                guard let converted = raw.converted(to: type) else { throw fail("the default \(raw) does not convert to \(type)") }
                defaultValue = converted
            }
            return AttributeDescription(
                name: file.name, type: type, isOptional: file.optional ?? true, defaultValue: defaultValue,
                isTransient: file.transient ?? false, isIndexed: file.indexed ?? false,
                versionHashModifier: file.versionHashModifier, renamingIdentifier: file.renamingIdentifier)
        case "relationship":
            guard let destination = file.destination else { throw fail("a relationship needs a destination") }
            guard let rule = DeleteRule(rawValue: file.deleteRule ?? "nullify") else {
                throw fail("delete rule \"\(file.deleteRule ?? "")\" is not one of \(DeleteRule.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            return RelationshipDescription(
                name: file.name, destination: destination, inverse: file.inverse, isToMany: file.toMany ?? false,
                isOrdered: file.ordered ?? false, isOptional: file.optional ?? true, minCount: file.minCount ?? 0,
                maxCount: file.maxCount ?? 0, deleteRule: rule, isTransient: file.transient ?? false,
                versionHashModifier: file.versionHashModifier, renamingIdentifier: file.renamingIdentifier)
        default:
            throw fail("kind \"\(file.kind)\" is neither attribute nor relationship")
        }
    }
}

import Foundation

/// A Swift type whose stored values are an attribute's: it names the attribute type the model
/// gives a property declared with it (`String` a string, `Int32?` an optional 32-bit integer).
///
/// It refines `Codable` so that a typed entity's property of one of these types is that
/// attribute type, while a property of any other `Codable` type is a transformable attribute
/// (the more refined overload of the typed accessors wins).
public protocol TypedAttributeValue: AttributeValueConvertible, Codable {
    /// The attribute type of a property of this type.
    static var attributeType: AttributeType { get }
    /// Whether a property of this type may be null (an `Optional`).
    static var isOptionalAttribute: Bool { get }
    /// What a required property of this type reads while it holds no value (an object
    /// inserted without one; saving it is refused as missing, [SAVE-2]).
    static var emptyAttributeValue: Self { get }
}

extension TypedAttributeValue {
    /// Not optional.
    public static var isOptionalAttribute: Bool { false }
}

extension Int16: TypedAttributeValue {
    public static var attributeType: AttributeType { .integer16 }
    public static var emptyAttributeValue: Int16 { 0 }
}
extension Int32: TypedAttributeValue {
    public static var attributeType: AttributeType { .integer32 }
    public static var emptyAttributeValue: Int32 { 0 }
}
extension Int64: TypedAttributeValue {
    public static var attributeType: AttributeType { .integer64 }
    public static var emptyAttributeValue: Int64 { 0 }
}
extension Int: TypedAttributeValue {
    public static var attributeType: AttributeType { .integer64 }
    public static var emptyAttributeValue: Int { 0 }
}
extension Double: TypedAttributeValue {
    public static var attributeType: AttributeType { .double }
    public static var emptyAttributeValue: Double { 0 }
}
extension Float: TypedAttributeValue {
    public static var attributeType: AttributeType { .float }
    public static var emptyAttributeValue: Float { 0 }
}
extension Decimal: TypedAttributeValue {
    public static var attributeType: AttributeType { .decimal }
    public static var emptyAttributeValue: Decimal { 0 }
}
extension Bool: TypedAttributeValue {
    public static var attributeType: AttributeType { .boolean }
    public static var emptyAttributeValue: Bool { false }
}
extension String: TypedAttributeValue {
    public static var attributeType: AttributeType { .string }
    public static var emptyAttributeValue: String { "" }
}
extension Date: TypedAttributeValue {
    public static var attributeType: AttributeType { .date }
    public static var emptyAttributeValue: Date { Date(timeIntervalSince1970: 0) }
}
extension Data: TypedAttributeValue {
    public static var attributeType: AttributeType { .binaryData }
    public static var emptyAttributeValue: Data { Data() }
}
extension UUID: TypedAttributeValue {
    public static var attributeType: AttributeType { .uuid }
    public static var emptyAttributeValue: UUID { UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)) }
}
extension URL: TypedAttributeValue {
    public static var attributeType: AttributeType { .uri }
    public static var emptyAttributeValue: URL { URL(fileURLWithPath: "/") }
}
extension Optional: TypedAttributeValue where Wrapped: TypedAttributeValue {
    public static var attributeType: AttributeType { Wrapped.attributeType }
    public static var isOptionalAttribute: Bool { true }
    public static var emptyAttributeValue: Wrapped? { nil }
}

/// An `Optional` of any type, asked at run time: a `Codable` property's type is optional or not.
protocol NullableValue {
    /// `nil`.
    static var null: Self { get }
    /// The wrapped type.
    static var wrappedType: Any.Type { get }
}

extension Optional: NullableValue {
    static var null: Wrapped? { nil }
    static var wrappedType: Any.Type { Wrapped.self }
}

/// Whether `value` is an optional's `nil` (a generic value of an optional type).
private func isNilOptional<T>(_ value: T) -> Bool {
    let mirror = Mirror(reflecting: value)
    return mirror.displayStyle == .optional && mirror.children.isEmpty
}

/// A property's options, as `@Attribute` and `@Relationship` give them.
public enum PropertyOption: Sendable, Hashable {
    /// The attribute has an index ([IDX-S1] in a StrataStore).
    case indexed
    /// No two objects of the entity (and its subentities) have the same value: a uniqueness
    /// constraint of this attribute alone.
    case unique
    /// Kept in objects, never stored.
    case transient
}

/// One property of a typed entity, as its declaration gives it: what ``EntityType`` types
/// list, and ``ManagedObjectModel/init(types:)`` builds the model from.
public struct PropertySchema {
    /// What the property is.
    public enum Kind {
        /// An attribute of a type, optional or not, with a default (null for none).
        case attribute(AttributeType, optional: Bool, defaultValue: AttributeValue)
        /// A to-one relationship to an entity type.
        case toOne(any EntityType.Type)
        /// A to-many relationship to an entity type, ordered for an array.
        case toMany(any EntityType.Type, ordered: Bool)
    }

    /// The property's name (the Swift property's).
    public var name: String
    /// What it is.
    public var kind: Kind
    /// Its options.
    public var options: Set<PropertyOption>
    /// Its name in the model version before (``PropertyDescription/renamingIdentifier``).
    public var originalName: String?
    /// For a relationship: the inverse's name, when this side declares it.
    public var inverse: String?
    /// For a relationship: its delete rule.
    public var deleteRule: DeleteRule
    /// For a transformable attribute: its type's name (``AttributeDescription/valueTypeName``).
    public var valueTypeName: String?
    /// Why the declaration cannot make a property (a default that does not encode), which
    /// ``ManagedObjectModel/init(types:)`` throws; `nil` when it can.
    var problem: String?

    /// An attribute declared with Swift type `T` (an optional type for an optional attribute).
    public static func property<T: TypedAttributeValue>(
        _ name: String, _ type: T.Type, default value: T? = nil, options: [PropertyOption] = [], originalName: String? = nil
    ) -> PropertySchema {
        PropertySchema(
            name: name, kind: .attribute(T.attributeType, optional: T.isOptionalAttribute, defaultValue: value?.attributeValue ?? .null),
            options: Set(options), originalName: originalName, inverse: nil, deleteRule: .nullify, valueTypeName: nil, problem: nil)
    }

    /// A transformable attribute, declared with any other `Codable` type `T` (an optional type
    /// for an optional attribute): its values are stored encoded ([ROW-2]'s transformable
    /// values: JSON with sorted keys, ``AttributeValue/transformable(encoding:)``), as ``AttributeDescription/init(name:transformable:isOptional:)``
    /// declares them. A required one needs a default (the property's initial value): a typed
    /// read of it has no other value to fall back on, so ``ManagedObjectModel/init(types:)``
    /// refuses one without.
    @_disfavoredOverload
    public static func property<T: Codable>(
        _ name: String, _ type: T.Type, default value: T? = nil, options: [PropertyOption] = [], originalName: String? = nil
    ) -> PropertySchema {
        let optional = T.self is any NullableValue.Type
        var defaultValue = AttributeValue.null
        var problem: String?
        if let value, !isNilOptional(value) {
            do { defaultValue = try AttributeValue.transformable(encoding: value) } catch {
                problem = "The default of \(name) (\(T.self)) does not encode: \((error as? ObjectGraphError)?.message ?? "\(error)")."
            }
        }
        let typeName = String(describing: (T.self as? any NullableValue.Type)?.wrappedType ?? T.self)
        return PropertySchema(
            name: name, kind: .attribute(.transformable, optional: optional, defaultValue: defaultValue), options: Set(options),
            originalName: originalName, inverse: nil, deleteRule: .nullify, valueTypeName: typeName, problem: problem)
    }

    /// A to-one relationship, declared as an optional of an entity type.
    public static func property<T: EntityType>(
        _ name: String, _ type: T?.Type, default value: T?? = nil, options: [PropertyOption] = [], inverse: String? = nil,
        deleteRule: DeleteRule = .nullify, originalName: String? = nil
    ) -> PropertySchema {
        PropertySchema(
            name: name, kind: .toOne(T.self), options: Set(options), originalName: originalName, inverse: inverse, deleteRule: deleteRule,
            valueTypeName: nil, problem: nil)
    }

    /// An unordered to-many relationship, declared as a set of an entity type.
    public static func property<T: EntityType>(
        _ name: String, _ type: Set<T>.Type, default value: Set<T>? = nil, options: [PropertyOption] = [], inverse: String? = nil,
        deleteRule: DeleteRule = .nullify, originalName: String? = nil
    ) -> PropertySchema {
        PropertySchema(
            name: name, kind: .toMany(T.self, ordered: false), options: Set(options), originalName: originalName, inverse: inverse,
            deleteRule: deleteRule, valueTypeName: nil, problem: nil)
    }

    /// An ordered to-many relationship, declared as an array of an entity type.
    public static func property<T: EntityType>(
        _ name: String, _ type: [T].Type, default value: [T]? = nil, options: [PropertyOption] = [], inverse: String? = nil,
        deleteRule: DeleteRule = .nullify, originalName: String? = nil
    ) -> PropertySchema {
        PropertySchema(
            name: name, kind: .toMany(T.self, ordered: true), options: Set(options), originalName: originalName, inverse: inverse,
            deleteRule: deleteRule, valueTypeName: nil, problem: nil)
    }
}

/// An entity declared once, as a Swift class: the `@Entity` macro (module `StrataMacros`)
/// makes a `ManagedObject` subclass adopt it from its stored properties, and
/// ``ManagedObjectModel/init(types:)`` builds the model from such types.
public protocol EntityType: ManagedObject, FetchableEntity {
    /// The entity's properties, in declaration order.
    static var entityProperties: [PropertySchema] { get }
    /// The entity's name in the model version before (``EntityDescription/renamingIdentifier``).
    static var entityOriginalName: String? { get }
    /// The class the entity's class inherits from: another entity type makes it a subentity.
    static var entitySuperclass: AnyClass { get }
    /// Uniqueness constraints of several attributes (by name), besides the single-attribute
    /// ones ``PropertyOption/unique`` declares.
    static var entityUniquenessConstraints: [[String]] { get }
}

extension EntityType {
    /// None.
    public static var entityUniquenessConstraints: [[String]] { [] }
}

extension ManagedObjectModel {
    /// The model of typed entities (each declared with `@Entity`): one entity per type, named
    /// and typed as declared, subentities of the entity types their classes inherit from, each
    /// relationship's inverse named on either side (or, when neither names one, the only
    /// relationship of the destination back to the entity). A model built from types and one
    /// built from the same entities by name are the same model.
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidModel`` for a relationship to a type not in
    ///   `types`, an inverse that names no relationship, or what the model's own checks refuse.
    public convenience init(types: [any EntityType.Type]) throws {
        var names: [ObjectIdentifier: String] = [:]
        for type in types { names[ObjectIdentifier(type)] = type.entityName }
        func destination(_ type: any EntityType.Type, of entity: String, _ property: String) throws -> String {
            guard let name = names[ObjectIdentifier(type)] else {
                throw ObjectGraphError(
                    .invalidModel, "\(entity).\(property) relates to \(type), which is not among the model's types.", entityName: entity,
                    key: property)
            }
            return name
        }
        // Inverses: each side that names one, then the other side; else the only way back.
        var inverses: [String: String] = [:]  // "Entity.relationship" → inverse name
        var relationships: [(entity: String, name: String, destination: String)] = []
        for type in types {
            for property in type.entityProperties {
                switch property.kind {
                case .toOne(let target), .toMany(let target, _):
                    let target = try destination(target, of: type.entityName, property.name)
                    relationships.append((type.entityName, property.name, target))
                    if let inverse = property.inverse {
                        inverses[type.entityName + "." + property.name] = inverse
                        inverses[target + "." + inverse] = property.name
                    }
                case .attribute: continue
                }
            }
        }
        for relationship in relationships where inverses[relationship.entity + "." + relationship.name] == nil {
            let back = relationships.filter { $0.entity == relationship.destination && $0.destination == relationship.entity && $0.name != relationship.name }
                .filter { inverses[$0.entity + "." + $0.name] == nil }
            if back.count == 1, relationships.filter({ $0.entity == relationship.entity && $0.destination == relationship.destination }).count == 1 {
                inverses[relationship.entity + "." + relationship.name] = back[0].name
            }
        }
        var entities: [EntityDescription] = []
        var problems: [String] = []
        for type in types {
            var properties: [PropertyDescription] = []
            var constraints = type.entityUniquenessConstraints
            for property in type.entityProperties {
                let transient = property.options.contains(.transient)
                if let problem = property.problem { problems.append("\(type.entityName): \(problem)") }
                switch property.kind {
                case .attribute(let attributeType, let optional, let defaultValue):
                    properties.append(AttributeDescription(
                        name: property.name, type: attributeType, isOptional: optional, defaultValue: defaultValue,
                        isTransient: transient, isIndexed: property.options.contains(.indexed), valueTypeName: property.valueTypeName,
                        renamingIdentifier: property.originalName))
                    if property.options.contains(.unique) { constraints.append([property.name]) }
                case .toOne(let target):
                    properties.append(RelationshipDescription(
                        name: property.name, destination: try destination(target, of: type.entityName, property.name),
                        inverse: inverses[type.entityName + "." + property.name], isToMany: false, deleteRule: property.deleteRule,
                        isTransient: transient, renamingIdentifier: property.originalName))
                case .toMany(let target, let ordered):
                    properties.append(RelationshipDescription(
                        name: property.name, destination: try destination(target, of: type.entityName, property.name),
                        inverse: inverses[type.entityName + "." + property.name], isToMany: true, isOrdered: ordered,
                        deleteRule: property.deleteRule, isTransient: transient, renamingIdentifier: property.originalName))
                }
            }
            let superentity = names[ObjectIdentifier(type.entitySuperclass)]
            entities.append(EntityDescription(
                name: type.entityName, superentity: superentity, managedObjectClass: type, properties: properties,
                uniquenessConstraints: constraints, renamingIdentifier: type.entityOriginalName))
        }
        if !problems.isEmpty {
            throw ObjectGraphError(
                .invalidModel, problems.count == 1 ? "Invalid model: \(problems[0])" : "Invalid model: \(problems.count) problems; see detailedErrors.",
                detailedErrors: problems.map { ObjectGraphError(.invalidModel, $0) })
        }
        try self.init(entities: entities)
    }
}

extension ManagedObjectContext {
    /// Inserts a new object of a typed entity, as ``insertNewObject(forEntityName:)`` does.
    ///
    /// - Throws: ``ObjectGraphError/Code/unknownEntity`` when the coordinator's model has no
    ///   such entity, ``ObjectGraphError/Code/wrongValueType`` when the model's entity has
    ///   another class.
    public func insert<T: EntityType>(_ type: T.Type) throws -> T {
        let object = try insertNewObject(forEntityName: T.entityName)
        guard let typed = object as? T else {
            throw ObjectGraphError(
                .wrongValueType, "The model's \(T.entityName) makes \(Swift.type(of: object)) objects, not \(T.self).", entityName: T.entityName)
        }
        return typed
    }
}

// MARK: - Typed accessors

/// The accessors the `@Entity` macro gives each stored property. A typed property's key and
/// type come from its declaration, so neither can be wrong; a read that fails (the object's
/// row gone from its store) reads as the type's empty value, and a write that fails (the
/// object deleted, or its context gone) leaves the value unchanged; both say why in
/// ``ManagedObject/lastAccessError``, and the key-value API throws instead.
extension ManagedObject {
    /// Reads an attribute.
    public func _entityValue<T: TypedAttributeValue>(forKey key: String) -> T {
        do {
            return T(attributeValue: try value(forKey: key)) ?? T.emptyAttributeValue
        } catch {
            lastAccessError = error as? ObjectGraphError
            return T.emptyAttributeValue
        }
    }

    /// Writes an attribute.
    public func _setEntityValue<T: TypedAttributeValue>(_ newValue: T, forKey key: String) {
        do { try setValue(newValue.attributeValue, forKey: key) } catch { lastAccessError = error as? ObjectGraphError }
    }

    /// Reads a transformable attribute of any other `Codable` type: the stored value decoded,
    /// `nil` for an optional type holding none, else the attribute's default (the model
    /// guarantees a required one has a default).
    @_disfavoredOverload
    public func _entityValue<T: Codable>(forKey key: String) -> T {
        do {
            let value = try value(forKey: key)
            if let decoded = try value.decoded(as: T.self) { return decoded }
        } catch {
            lastAccessError = error as? ObjectGraphError
        }
        if let null = (T.self as? any NullableValue.Type)?.null as? T { return null }
        if let fallback = try? entity.attributesByName[key]?.defaultValue.decoded(as: T.self) { return fallback }
        // ManagedObjectModel refuses a typed entity whose required transformable attribute
        // has no default (or no attribute), so a model holding this object has one.
        preconditionFailure("\(entity.name).\(key) of \(T.self) has no value and no default")
    }

    /// Writes a transformable attribute of any other `Codable` type, encoded.
    @_disfavoredOverload
    public func _setEntityValue<T: Codable>(_ newValue: T, forKey key: String) {
        do {
            let value: AttributeValue = (T.self is any NullableValue.Type && isNilOptional(newValue)) ? .null : try .transformable(encoding: newValue)
            try setValue(value, forKey: key)
        } catch { lastAccessError = error as? ObjectGraphError }
    }

    /// Reads a to-one relationship.
    public func _entityValue<T: EntityType>(forKey key: String) -> T? {
        do { return try object(forKey: key) as? T } catch {
            lastAccessError = error as? ObjectGraphError
            return nil
        }
    }

    /// Writes a to-one relationship.
    public func _setEntityValue<T: EntityType>(_ newValue: T?, forKey key: String) {
        do { try setValue(newValue as ManagedObject?, forKey: key) } catch { lastAccessError = error as? ObjectGraphError }
    }

    /// Reads an unordered to-many relationship.
    public func _entityValue<T: EntityType>(forKey key: String) -> Set<T> {
        Set((_entityValue(forKey: key) as [T]))
    }

    /// Writes an unordered to-many relationship.
    public func _setEntityValue<T: EntityType>(_ newValue: Set<T>, forKey key: String) {
        _setEntityValue(Array(newValue), forKey: key)
    }

    /// Reads an ordered to-many relationship (or an unordered one, in no particular order).
    public func _entityValue<T: EntityType>(forKey key: String) -> [T] {
        do { return try objects(forKey: key).compactMap { $0 as? T } } catch {
            lastAccessError = error as? ObjectGraphError
            return []
        }
    }

    /// Writes an ordered to-many relationship.
    public func _setEntityValue<T: EntityType>(_ newValue: [T], forKey key: String) {
        do { try setValue(newValue as [ManagedObject], forKey: key) } catch { lastAccessError = error as? ObjectGraphError }
    }
}

import Foundation

/// An attribute of an entity: a typed value (Core Data's `NSAttributeDescription`).
///
/// For example:
///
/// ```swift
/// AttributeDescription(name: "age", type: .integer16, defaultValue: 0,
///                      validationRules: [.minimum(0), .maximum(150)])
/// ```
public final class AttributeDescription: PropertyDescription, @unchecked Sendable {
    /// The attribute's storage type.
    public let attributeType: AttributeType
    /// The value a newly inserted object starts with, converted to ``attributeType``.
    public let defaultValue: AttributeValue
    /// The rules a non-null value must satisfy at save.
    public let validationRules: [ValidationRule]
    /// For transformable attributes, the name of the Codable type stored (documentation only).
    public let valueTypeName: String?
    /// Whether a uniqueness constraint of the model names the attribute; set when the model
    /// is created.
    @exclusivity(unchecked) package internal(set) var isConstrained = false
    /// Whether stores keep index entries for the attribute: it is indexed, or a uniqueness
    /// constraint names it (a save looks its values up).
    package var hasIndexEntries: Bool { isIndexed || (isConstrained && !entriesFollowIndexing) }
    /// Whether ``hasIndexEntries`` is ``PropertyDescription/isIndexed`` alone: set on the
    /// attributes of a model a store decodes from its own record of what it holds, where an
    /// attribute is marked indexed exactly when the store has its entries (a constrained
    /// attribute whose entries are still to be built has none).
    @exclusivity(unchecked) package var entriesFollowIndexing = false

    /// Creates an attribute.
    public init(
        name: String, type: AttributeType, isOptional: Bool = true, defaultValue: AttributeValue = .null,
        isTransient: Bool = false, isIndexed: Bool = false, validationRules: [ValidationRule] = [],
        valueTypeName: String? = nil, versionHashModifier: String? = nil, renamingIdentifier: String? = nil
    ) {
        self.attributeType = type
        // Literals arrive as int64/double; store the default in the attribute's own type.
        // A default that cannot convert is kept as given and rejected by the model.
        self.defaultValue = defaultValue.converted(to: type) ?? defaultValue
        self.validationRules = validationRules
        self.valueTypeName = valueTypeName
        super.init(
            name: name, isOptional: isOptional, isTransient: isTransient, isIndexed: isIndexed, slotKind: .attribute,
            versionHashModifier: versionHashModifier, renamingIdentifier: renamingIdentifier)
    }

    /// Creates a transformable attribute that stores a `Codable` type.
    public convenience init<T: Codable>(name: String, transformable type: T.Type, isOptional: Bool = true) {
        self.init(name: name, type: .transformable, isOptional: isOptional, valueTypeName: String(describing: T.self))
    }

    override var versionHashText: String { "A|\(super.versionHashText)|\(attributeType)" }

    /// Converts a value to this attribute's type, throwing a type error naming the
    /// entity and key when it cannot.
    func coerce(_ value: AttributeValue, entityName: String) throws -> AttributeValue {
        guard let converted = value.converted(to: attributeType) else {
            throw ObjectGraphError(
                .wrongValueType,
                "\(entityName).\(name) expects \(attributeType), got \(value.typeName) (\(value)).",
                entityName: entityName, key: name)
        }
        return converted
    }

    /// Every rule the value breaks, for one object.
    func validationErrors(for value: AttributeValue, entityName: String, objectID: ManagedObjectID?) -> [ObjectGraphError] {
        func failure(_ code: ObjectGraphError.Code, _ text: String) -> ObjectGraphError {
            ObjectGraphError(code, "\(entityName).\(name) \(text).", entityName: entityName, key: name, objectID: objectID)
        }
        if value.isNull {
            return isOptional ? [] : [failure(.missingMandatoryProperty, "is mandatory but has no value")]
        }
        var errors: [ObjectGraphError] = []
        for rule in validationRules {
            switch rule {
            case .minimum(let bound):
                if let order = AttributeValue.compare(value, bound), order == .orderedAscending {
                    errors.append(failure(.valueTooSmall, "is \(value), below the minimum \(bound)"))
                }
            case .maximum(let bound):
                if let order = AttributeValue.compare(value, bound), order == .orderedDescending {
                    errors.append(failure(.valueTooLarge, "is \(value), above the maximum \(bound)"))
                }
            case .minimumLength(let length):
                if let s = value.stringValue, s.count < length {
                    errors.append(failure(.stringTooShort, "has \(s.count) characters, fewer than \(length)"))
                }
            case .maximumLength(let length):
                if let s = value.stringValue, s.count > length {
                    errors.append(failure(.stringTooLong, "has \(s.count) characters, more than \(length)"))
                }
            case .pattern(let pattern):
                if let s = value.stringValue, (try? Regex(pattern).wholeMatch(in: s)) == nil {
                    errors.append(failure(.patternMismatch, "value \"\(s)\" does not match /\(pattern)/"))
                }
            }
        }
        return errors
    }
}

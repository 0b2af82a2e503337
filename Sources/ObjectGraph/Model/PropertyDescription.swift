import Foundation

/// The common part of an entity's attributes and relationships (Core Data's
/// `NSPropertyDescription`).
///
/// Create properties through ``AttributeDescription`` and ``RelationshipDescription``
/// or the factory methods such as ``attribute(_:_:optional:defaultValue:transient:indexed:rules:versionHashModifier:renamingIdentifier:)``.
/// A property belongs to one model; it becomes immutable once the model that
/// contains it is created.
///
/// Thread safety: `@unchecked Sendable` because the model links (``entity``, the owning
/// model, the ordinal) are set exactly once while ``ManagedObjectModel`` is initialised and
/// never changed afterwards; the unretained links are read only while a strong reference to
/// the owning model is held.
public class PropertyDescription: @unchecked Sendable, CustomStringConvertible, CustomReflectable {
    /// The property's name, unique within its entity and the entity's superentities.
    public let name: String
    /// Whether a `nil` value passes validation.
    public let isOptional: Bool
    /// Whether the value lives only in memory and is never given to a store. Changing a
    /// transient value does not make its object updated.
    public let isTransient: Bool
    /// Whether stores should index the property (a hint).
    public let isIndexed: Bool
    /// Text that enters the property's version hash (Core Data's `versionHashModifier`): change
    /// it to mark the property's stored form as changed when nothing else in the model says so
    /// (the values it holds mean something else now). `nil`: no effect on the hash.
    public let versionHashModifier: String?
    /// The property's name in an earlier model version (Core Data's `renamingIdentifier`):
    /// migration reads the property under that name. It does not enter the version hash.
    public let renamingIdentifier: String?
    /// The digest of the property's stored shape (Core Data's `versionHash`): name, kind, type,
    /// optionality, relationship shape and ``versionHashModifier``; set when the model is
    /// created (empty before).
    @exclusivity(unchecked) public internal(set) var versionHash = Data()
    /// The entity that declares the property; set when the model is created, `nil` once
    /// the model is gone.
    public var entity: EntityDescription? {
        guard let model = owningModel else { return nil }
        return withExtendedLifetime(model) { entityLink }
    }
    /// The model the property belongs to (it holds the property's entity).
    weak var owningModel: ManagedObjectModel?
    /// The declaring entity, unretained: read only while ``owningModel`` is alive or while
    /// the model is being created (see ``EntityDescription/superentityLink``).
    @exclusivity(unchecked) unowned(unsafe) var entityLink: EntityDescription?
    /// The property's position in its entity's ``EntityDescription/properties`` (inherited
    /// properties first), the same in every subentity: managed objects, store nodes and rows
    /// hold values by this ordinal. Set when the model is created; -1 before.
    @exclusivity(unchecked) public internal(set) var ordinal: Int = -1
    /// What kind of value the property holds, decided once (no dynamic casts on hot paths).
    let slotKind: SlotKind

    init(
        name: String, isOptional: Bool, isTransient: Bool, isIndexed: Bool, slotKind: SlotKind,
        versionHashModifier: String? = nil, renamingIdentifier: String? = nil
    ) {
        self.versionHashModifier = versionHashModifier
        self.renamingIdentifier = renamingIdentifier
        self.slotKind = slotKind
        self.name = name
        self.isOptional = isOptional
        self.isTransient = isTransient
        self.isIndexed = isIndexed
    }

    /// The property's kind and name.
    public var description: String { "\(type(of: self))(\(name))" }

    /// The kind and the name: reflection never walks the unretained model links (see
    /// ``EntityDescription/customMirror``).
    public var customMirror: Mirror {
        Mirror(self, children: ["name": name, "ordinal": ordinal], displayStyle: .class)
    }

    /// Text that changes whenever the stored shape of the property changes; feeds the version hash.
    var versionHashText: String {
        let base = "\(name)|\(isOptional)|\(isTransient)"
        return versionHashModifier.map { base + "|modifier:" + $0 } ?? base
    }

    /// Creates an attribute; see ``AttributeDescription``.
    public static func attribute(
        _ name: String, _ type: AttributeType, optional: Bool = true,
        defaultValue: AttributeValue = .null, transient: Bool = false, indexed: Bool = false,
        rules: [ValidationRule] = [], versionHashModifier: String? = nil, renamingIdentifier: String? = nil
    ) -> PropertyDescription {
        AttributeDescription(
            name: name, type: type, isOptional: optional, defaultValue: defaultValue,
            isTransient: transient, isIndexed: indexed, validationRules: rules,
            versionHashModifier: versionHashModifier, renamingIdentifier: renamingIdentifier)
    }

    /// Creates a to-one relationship; see ``RelationshipDescription``.
    public static func toOne(
        _ name: String, _ destination: String, inverse: String? = nil, optional: Bool = true,
        deleteRule: DeleteRule = .nullify, versionHashModifier: String? = nil, renamingIdentifier: String? = nil
    ) -> PropertyDescription {
        RelationshipDescription(
            name: name, destination: destination, inverse: inverse, isToMany: false,
            isOptional: optional, deleteRule: deleteRule,
            versionHashModifier: versionHashModifier, renamingIdentifier: renamingIdentifier)
    }

    /// Creates a to-many relationship; see ``RelationshipDescription``.
    public static func toMany(
        _ name: String, _ destination: String, inverse: String? = nil, ordered: Bool = false,
        minCount: Int = 0, maxCount: Int = 0, deleteRule: DeleteRule = .nullify,
        versionHashModifier: String? = nil, renamingIdentifier: String? = nil
    ) -> PropertyDescription {
        RelationshipDescription(
            name: name, destination: destination, inverse: inverse, isToMany: true,
            isOrdered: ordered, minCount: minCount, maxCount: maxCount, deleteRule: deleteRule,
            versionHashModifier: versionHashModifier, renamingIdentifier: renamingIdentifier)
    }
}

/// The kind of value a property holds in an object's slots.
enum SlotKind: UInt8, Sendable {
    /// An ``AttributeValue``.
    case attribute
    /// One destination ID or none.
    case toOne
    /// Destination IDs.
    case toMany
}

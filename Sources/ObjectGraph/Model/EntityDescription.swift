import Foundation

/// An entity: a kind of managed object, its properties and its place in an
/// inheritance tree (Core Data's `NSEntityDescription`).
///
/// For example:
///
/// ```swift
/// let person = EntityDescription(name: "Person", properties: [
///     .attribute("name", .string, optional: false),
///     .toOne("department", "Department", inverse: "employees"),
/// ])
/// let manager = EntityDescription(name: "Manager", superentity: "Person", properties: [
///     .attribute("level", .integer16, defaultValue: 1),
/// ])
/// ```
///
/// Thread safety: `@unchecked Sendable` because every `internal(set)` property and link below
/// is set exactly once while ``ManagedObjectModel`` is initialised, and never changed
/// afterwards; the unretained links are read only while a strong reference to the model
/// (which holds every entity) is held.
public final class EntityDescription: @unchecked Sendable, CustomStringConvertible, CustomReflectable {
    /// The entity's name, unique in its model.
    public let name: String
    /// Whether the entity has no instances of its own (only of its subentities).
    public let isAbstract: Bool
    /// The name of the superentity, if any.
    public let superentityName: String?
    /// The properties declared by this entity itself (not inherited).
    public let ownProperties: [PropertyDescription]
    /// The class instantiated for objects of this entity.
    public let managedObjectClass: ManagedObject.Type
    /// The entity's own uniqueness constraints (Core Data's `uniquenessConstraints`): each
    /// is a list of attribute names whose values, taken together, no two objects of this
    /// entity (or of its subentities) may share in a store. Subentities inherit them.
    ///
    /// A constraint names stored attributes of the entity, its own or inherited. A value
    /// list with a null value is not constrained (as SQL's `UNIQUE`). A save that would
    /// duplicate a constrained value list fails with
    /// ``ObjectGraphError/Code/constraintConflict``, or is resolved by the context's
    /// ``ManagedObjectContext/mergePolicy``; see ``ConstraintConflict``.
    ///
    /// The constraints are part of the entity's ``versionHash`` (as in Core Data): a store
    /// saved without a constraint opens with a model that adds it only by migration, which
    /// fails with ``ObjectGraphError/Code/migrationFailed`` when stored objects share its
    /// values.
    public let uniquenessConstraints: [[String]]
    /// Text that enters the entity's version hash (Core Data's `versionHashModifier`): change it
    /// to mark the entity's stored form as changed when nothing else in the model says so.
    /// `nil`: no effect on the hash.
    public let versionHashModifier: String?
    /// The entity's name in an earlier model version (Core Data's `renamingIdentifier`):
    /// migration reads its objects under that name. It does not enter the version hash.
    public let renamingIdentifier: String?

    /// The model the entity belongs to; set when the model is created.
    public internal(set) weak var managedObjectModel: ManagedObjectModel?
    /// The superentity; set when the model is created, `nil` once the model is gone.
    public var superentity: EntityDescription? {
        guard let model = managedObjectModel else { return nil }
        return withExtendedLifetime(model) { superentityLink }
    }
    /// The superentity, unretained: read only while the model that set it is alive (it
    /// holds every entity), or while that model is being created. Model links are not
    /// `weak` because a weak reference gives its target a side table, and every retain of
    /// an entity (each object and object ID holds one) then takes the runtime's slow path.
    @exclusivity(unchecked) unowned(unsafe) var superentityLink: EntityDescription?
    /// The direct subentities; set when the model is created.
    @exclusivity(unchecked) public internal(set) var subentities: [EntityDescription] = []
    /// Inherited properties first, then the entity's own; set when the model is created.
    @exclusivity(unchecked) public internal(set) var properties: [PropertyDescription] = []
    /// ``properties`` by name.
    @exclusivity(unchecked) public internal(set) var propertiesByName: [String: PropertyDescription] = [:]
    /// ``properties`` by the bytes of their names, for the lookups of the key-based API.
    @exclusivity(unchecked) var propertyNames = PropertyNameTable([])
    /// The attributes among ``properties``, by name.
    @exclusivity(unchecked) public internal(set) var attributesByName: [String: AttributeDescription] = [:]
    /// The relationships among ``properties``, by name.
    @exclusivity(unchecked) public internal(set) var relationshipsByName: [String: RelationshipDescription] = [:]
    /// A digest of what the entity's stores hold (Core Data's `versionHash`): it changes when
    /// the entity's name, superentity or abstractness, a stored property, the entity's own
    /// ``uniquenessConstraints`` or its ``versionHashModifier`` changes. Stores record it in
    /// their metadata; a model whose hashes differ from a store's opens it only by migration.
    @exclusivity(unchecked) public internal(set) var versionHash = Data()
    /// A digest of the stored form of the entity's objects alone: ``versionHash`` without the
    /// uniqueness constraints, which change what a store checks, not what its rows hold. Row
    /// layouts are named after it ([ROW-1]), so that a constraint added or removed rewrites no
    /// row.
    @exclusivity(unchecked) package internal(set) var storageHash = Data()

    // Layout, computed once when the model is created: values travel by ordinal (a
    // property's index in ``properties``), never by name, below the API boundary.
    /// The stored (non-transient) properties, in ordinal order.
    @exclusivity(unchecked) var storedProperties: [PropertyDescription] = []
    /// The stored properties that validation has something to check on (a mandatory value,
    /// a rule, a count); the others are skipped at save.
    @exclusivity(unchecked) var validatedProperties: [PropertyDescription] = []
    /// The properties a new object starts with a value for: attributes with a non-null
    /// default and every relationship (empty).
    @exclusivity(unchecked) var initialProperties: [PropertyDescription] = []
    /// The pending values a new object starts with (``initialProperties`` that are stored),
    /// made once: an insert copies them instead of setting each.
    @exclusivity(unchecked) var initialPendingChanges = PendingChanges()
    /// The transient attributes with a non-null default.
    @exclusivity(unchecked) var initialTransientAttributes: [AttributeDescription] = []
    /// The relationships with a `deny` delete rule.
    @exclusivity(unchecked) var denyRelationships: [RelationshipDescription] = []
    /// Every uniqueness constraint objects of this entity are held to: its own and its
    /// superentities', resolved to attributes; set when the model is created.
    @exclusivity(unchecked) package internal(set) var constraints: [UniquenessConstraint] = []
    /// The stored attributes a store keeps an index of: the indexed ones and those in a
    /// uniqueness constraint (see `AttributeDescription.hasIndexEntries`).
    @exclusivity(unchecked) package internal(set) var attributesWithIndexEntries: [AttributeDescription] = []
    /// The hash of ``name``, computed once (object IDs combine it into theirs).
    let nameHash: Int
    /// The name of the root of the entity's inheritance tree (``rootEntity``), computed when
    /// the model is created: stores name a hierarchy's rows by it on every registration.
    @exclusivity(unchecked) package internal(set) var rootEntityName: String

    /// Creates an entity.
    public init(
        name: String, superentity: String? = nil, isAbstract: Bool = false,
        managedObjectClass: ManagedObject.Type = ManagedObject.self, properties: [PropertyDescription] = [],
        uniquenessConstraints: [[String]] = [], versionHashModifier: String? = nil, renamingIdentifier: String? = nil
    ) {
        self.uniquenessConstraints = uniquenessConstraints
        self.versionHashModifier = versionHashModifier
        self.renamingIdentifier = renamingIdentifier
        self.name = name
        self.superentityName = superentity
        self.isAbstract = isAbstract
        self.managedObjectClass = managedObjectClass
        self.ownProperties = properties
        self.nameHash = name.hashValue
        self.rootEntityName = name
    }

    /// Computes the ordinal lists above from ``properties``; called once by the model.
    func computeLayout() {
        var root = self
        while let parent = root.superentityLink { root = parent }
        rootEntityName = root.name
        attributes = properties.compactMap { $0 as? AttributeDescription }
        relationships = properties.compactMap { $0 as? RelationshipDescription }
        storedProperties = properties.filter { !$0.isTransient }
        validatedProperties = storedProperties.filter { property in
            switch property {
            case let attribute as AttributeDescription:
                return !attribute.isOptional || !attribute.validationRules.isEmpty
            case let relationship as RelationshipDescription:
                return !relationship.isOptional || relationship.minCount > 0 || relationship.maxCount > 0
            default:
                return false
            }
        }
        initialProperties = properties.filter { property in
            if let attribute = property as? AttributeDescription { return !attribute.defaultValue.isNull }
            return property is RelationshipDescription
        }
        var initial = PendingChanges()
        initial.reserve(properties.count)
        for property in initialProperties where !property.isTransient {
            initial.set(ManagedObject.initialValue(of: property), for: property)
        }
        initialPendingChanges = initial
        initialTransientAttributes = initialProperties.compactMap { $0 as? AttributeDescription }.filter(\.isTransient)
        denyRelationships = relationships.filter { $0.deleteRule == .deny }
        var constraints: [UniquenessConstraint] = []
        var owner: EntityDescription? = self
        while let declaring = owner {
            for (index, names) in declaring.uniquenessConstraints.enumerated() {
                let attributes = names.compactMap { attributesByName[$0] }
                if attributes.count == names.count {
                    constraints.append(UniquenessConstraint(scope: declaring, index: index, attributes: attributes))
                }
            }
            owner = declaring.superentityLink
        }
        self.constraints = constraints
        attributesWithIndexEntries = attributes.filter { $0.hasIndexEntries && !$0.isTransient }
    }

    /// The entity's name.
    public var description: String { "EntityDescription(\(name))" }

    /// The name and the properties' names: reflection (`dump`, test failure messages) never
    /// walks the unretained model links, which may be stale once the model is gone.
    public var customMirror: Mirror {
        Mirror(self, children: ["name": name, "properties": ownProperties.map(\.name)], displayStyle: .class)
    }

    /// The attributes in declaration order, inherited ones first; set when the model is created.
    @exclusivity(unchecked) public internal(set) var attributes: [AttributeDescription] = []
    /// The relationships in declaration order, inherited ones first; set when the model is created.
    @exclusivity(unchecked) public internal(set) var relationships: [RelationshipDescription] = []

    /// Whether this entity is `other` or inherits from it.
    public func isKind(of other: EntityDescription) -> Bool {
        if self === other { return true }
        guard let model = managedObjectModel else { return false }
        return withExtendedLifetime(model) { inherits(from: other) }
    }

    /// ``isKind(of:)`` along the unretained links: only while the model is alive or being
    /// created.
    func inherits(from other: EntityDescription) -> Bool {
        var current: EntityDescription? = self
        while let entity = current {
            if entity === other { return true }
            current = entity.superentityLink
        }
        return false
    }

    /// This entity and every entity below it.
    public var selfAndAllSubentities: [EntityDescription] {
        [self] + subentities.flatMap(\.selfAndAllSubentities)
    }

    /// The topmost entity of this entity's inheritance tree (this entity outside a model).
    public var rootEntity: EntityDescription {
        guard let model = managedObjectModel else { return self }
        return withExtendedLifetime(model) {
            var entity = self
            while let parent = entity.superentityLink { entity = parent }
            return entity
        }
    }

    /// The entity of a name in a context's model (Core Data's `entity(forEntityName:in:)`).
    public static func entity(forEntityName name: String, in context: ManagedObjectContext) throws -> EntityDescription {
        try context.requireCoordinator().managedObjectModel.entity(named: name)
    }

    /// Inserts a new object of the named entity into a context (Core Data's
    /// `insertNewObject(forEntityName:into:)`).
    public static func insertNewObject(forEntityName name: String, into context: ManagedObjectContext) throws -> ManagedObject {
        try context.insertNewObject(forEntityName: name)
    }

    /// The property of the given name, if any: ``property(named:)`` without the error (which
    /// costs more to make than the lookup), for callers that only ask.
    package func propertyIfAny(named key: String) -> PropertyDescription? {
        propertyNames.property(named: key) ?? propertiesByName[key]
    }

    /// The property of the given name, or an ``ObjectGraphError/Code/unknownKey`` error.
    public func property(named key: String) throws -> PropertyDescription {
        if let property = propertyNames.property(named: key) { return property }
        // A name spelled with other code units (canonically equivalent), or none.
        guard let property = propertiesByName[key] else {
            throw ObjectGraphError(
                .unknownKey, "Entity \(name) has no property \"\(key)\".", entityName: name, key: key)
        }
        return property
    }
}

/// An entity's properties by the UTF-8 bytes of their names: an open-addressing table hashed
/// with FNV-1a, which for the short names of a model costs a fraction of a `String` hash.
/// Every name of `value(forKey:)`, `setValue(_:forKey:)` and their kin goes through it. A
/// key spelled with other code units than the name (a canonically equivalent string) is not
/// found here; callers fall back to ``EntityDescription/propertiesByName``.
///
/// Before hashing any byte, a key is looked up by its representation: the two words of the
/// `String` value. A name of up to 15 UTF-8 bytes is stored in those words (a small string),
/// so a key with the same words has the same bytes, and most keys are found with one mix of
/// two words and one comparison. A longer name's words hold a pointer to its storage, which
/// the table keeps alive through the property, so equal words still mean the same storage
/// (a shared buffer is copied, not changed, when written to). A key not found that way (a
/// long name in other storage, a name built as a large string) goes the FNV-1a way.
///
/// Thread safety: immutable once built (with the model).
struct PropertyNameTable {
    /// Power-of-two slots, at most half full; `nil` where empty.
    private let slots: [PropertyDescription?]
    private let hashes: [UInt64]
    /// The same properties by the representation of their names, in as many slots.
    private let representations: [Representation]

    /// A property and the two words of its name.
    private struct Representation {
        var words: (UInt64, UInt64) = (0, 0)
        var property: PropertyDescription?
    }

    init(_ properties: [PropertyDescription]) {
        var capacity = 8
        while capacity < 2 * properties.count { capacity *= 2 }
        var slots = [PropertyDescription?](repeating: nil, count: capacity)
        var hashes = [UInt64](repeating: 0, count: capacity)
        var representations = [Representation](repeating: Representation(), count: capacity)
        for property in properties {
            let hash = Self.hash(property.name)
            var index = Int(truncatingIfNeeded: hash) & (capacity - 1)
            while slots[index] != nil { index = (index + 1) & (capacity - 1) }
            slots[index] = property
            hashes[index] = hash
            let words = Self.words(of: property.name)
            index = Self.slot(of: words, mask: capacity - 1)
            while representations[index].property != nil { index = (index + 1) & (capacity - 1) }
            representations[index] = Representation(words: words, property: property)
        }
        self.slots = slots
        self.hashes = hashes
        self.representations = representations
    }

    /// Whether a `String` value is two 64-bit words (on 64-bit platforms); elsewhere names are
    /// only looked up by their bytes.
    private static var hasTwoWordStrings: Bool { MemoryLayout<String>.size == MemoryLayout<(UInt64, UInt64)>.size }

    /// The two words of a `String` value, as they are (nothing is retained or read); zero
    /// where a `String` is not two words.
    @inline(__always)
    private static func words(of string: String) -> (UInt64, UInt64) {
        guard hasTwoWordStrings else { return (0, 0) }
        return unsafeBitCast(string, to: (UInt64, UInt64).self)
    }

    /// The first slot to probe for a representation: the words mixed (SplitMix's finalizer).
    @inline(__always)
    private static func slot(of words: (UInt64, UInt64), mask: Int) -> Int {
        var mixed = words.0 ^ (words.1 &* 0x9E37_79B9_7F4A_7C15)
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE9_E4B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return Int(truncatingIfNeeded: mixed ^ (mixed >> 31)) & mask
    }

    /// FNV-1a over the name's UTF-8 bytes.
    @inline(__always)
    static func hash(_ name: String) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in name.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        return hash
    }

    /// The property whose name has exactly the bytes of `key`, if any.
    func property(named key: String) -> PropertyDescription? {
        guard !slots.isEmpty else { return nil }
        let mask = slots.count - 1
        if Self.hasTwoWordStrings {
            let words = Self.words(of: key)
            var probe = Self.slot(of: words, mask: mask)
            while let property = representations[probe].property {
                if representations[probe].words == words { return property }
                probe = (probe + 1) & mask
            }
        }
        let hash = Self.hash(key)
        var index = Int(truncatingIfNeeded: hash) & mask
        while let property = slots[index] {
            if hashes[index] == hash, property.name == key { return property }
            index = (index + 1) & mask
        }
        return nil
    }
}

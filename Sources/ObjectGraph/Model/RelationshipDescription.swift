import Foundation

/// What deleting an object does to the objects at the end of one of its relationships.
public enum DeleteRule: String, Sendable, Hashable, CaseIterable {
    /// Remove the deleted object from the destinations' inverse relationship.
    case nullify
    /// Delete the destinations too.
    case cascade
    /// Refuse the save while the relationship has any destination.
    case deny
    /// Do nothing; the destinations keep pointing at the deleted object.
    case noAction
}

/// A relationship from one entity to another (Core Data's `NSRelationshipDescription`).
///
/// The model resolves ``destinationEntity`` and ``inverseRelationship`` by name when it
/// is created, and rejects unknown names.
public final class RelationshipDescription: PropertyDescription, @unchecked Sendable {
    /// The name of the destination entity.
    public let destinationEntityName: String
    /// The name of the inverse relationship on the destination, if any.
    public let inverseName: String?
    /// Whether the relationship holds many objects.
    public let isToMany: Bool
    /// Whether a to-many relationship keeps its objects in order.
    public let isOrdered: Bool
    /// The least number of objects a to-many relationship may hold (0: no minimum).
    public let minCount: Int
    /// The most objects a to-many relationship may hold (0: no maximum).
    public let maxCount: Int
    /// What deleting the source does to the destinations.
    public let deleteRule: DeleteRule
    /// The destination entity; set when the model is created, `nil` once the model is gone.
    public var destinationEntity: EntityDescription? {
        guard let model = owningModel else { return nil }
        return withExtendedLifetime(model) { destinationLink }
    }
    /// The inverse relationship; set when the model is created, `nil` once the model is gone.
    public var inverseRelationship: RelationshipDescription? {
        guard let model = owningModel else { return nil }
        return withExtendedLifetime(model) { inverseLink }
    }
    /// The destination, unretained (see ``EntityDescription/superentityLink``).
    @exclusivity(unchecked) unowned(unsafe) var destinationLink: EntityDescription?
    /// The inverse, unretained (see ``EntityDescription/superentityLink``).
    @exclusivity(unchecked) unowned(unsafe) var inverseLink: RelationshipDescription?

    /// Creates a relationship.
    public init(
        name: String, destination: String, inverse: String? = nil, isToMany: Bool = false,
        isOrdered: Bool = false, isOptional: Bool = true, minCount: Int = 0, maxCount: Int = 0,
        deleteRule: DeleteRule = .nullify, isTransient: Bool = false,
        versionHashModifier: String? = nil, renamingIdentifier: String? = nil
    ) {
        self.destinationEntityName = destination
        self.inverseName = inverse
        self.isToMany = isToMany
        self.isOrdered = isToMany && isOrdered
        self.minCount = minCount
        self.maxCount = maxCount
        self.deleteRule = deleteRule
        super.init(
            name: name, isOptional: isOptional, isTransient: isTransient, isIndexed: false, slotKind: isToMany ? .toMany : .toOne,
            versionHashModifier: versionHashModifier, renamingIdentifier: renamingIdentifier)
    }

    /// Whether the relationship holds at most one object.
    public var isToOne: Bool { !isToMany }

    override var versionHashText: String {
        "R|\(super.versionHashText)|\(destinationEntityName)|\(inverseName ?? "")|\(isToMany)|\(isOrdered)"
    }

    /// Count and optionality errors for a relationship's current destinations.
    func validationErrors(count: Int, entityName: String, objectID: ManagedObjectID?) -> [ObjectGraphError] {
        func failure(_ code: ObjectGraphError.Code, _ text: String) -> ObjectGraphError {
            ObjectGraphError(code, "\(entityName).\(name) \(text).", entityName: entityName, key: name, objectID: objectID)
        }
        if isToMany {
            var errors: [ObjectGraphError] = []
            if count == 0 && !isOptional {
                errors.append(failure(.missingMandatoryProperty, "is mandatory but empty"))
            }
            if minCount > 0 && count < minCount && !(count == 0 && isOptional) {
                errors.append(failure(.tooFewObjects, "holds \(count) objects, fewer than \(minCount)"))
            }
            if maxCount > 0 && count > maxCount {
                errors.append(failure(.tooManyObjects, "holds \(count) objects, more than \(maxCount)"))
            }
            return errors
        }
        if count == 0 && !isOptional { return [failure(.missingMandatoryProperty, "is mandatory but has no object")] }
        return []
    }
}

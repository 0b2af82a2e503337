import Foundation

/// Keeping both ends of a relationship consistent.
extension ManagedObject {
    /// Sets a to-one relationship and, when asked, its inverse on the old and new destinations.
    func setToOne(_ id: ManagedObjectID?, for relationship: RelationshipDescription, maintainInverse: Bool) throws {
        let old = try currentValue(for: relationship).relationshipValue?.objectIDs.first
        guard old != id else { return }
        try record(.relationship(.toOne(id)), for: relationship)
        guard maintainInverse else { return }
        if let old { try inverseRemove(old, relationship) }
        if let id { try inverseAdd(id, relationship) }
    }

    /// The destination `id` gained this object through `relationship`: add this object to
    /// the destination's inverse (taking it from a previous one-to-one partner).
    func inverseAdd(_ id: ManagedObjectID, _ relationship: RelationshipDescription) throws {
        guard let inverse = relationship.inverseRelationship else { return }
        let destination = try resolve(id)
        if inverse.isToMany {
            try destination.changeMember(objectID, of: inverse, adding: true, deferringLoad: true)
        } else {
            let previous = try destination.currentValue(for: inverse).relationshipValue?.objectIDs.first
            guard previous != objectID else { return }
            try destination.record(.relationship(.toOne(objectID)), for: inverse)
            if let previous {
                // The destination's previous partner no longer points at it.
                let partner = try resolve(previous)
                if relationship.isToMany {
                    try partner.removeID(id, from: relationship)
                } else {
                    try partner.record(.relationship(.toOne(nil)), for: relationship)
                }
            }
        }
    }

    /// The destination `id` lost this object through `relationship`: remove this object
    /// from the destination's inverse.
    func inverseRemove(_ id: ManagedObjectID, _ relationship: RelationshipDescription) throws {
        guard let inverse = relationship.inverseRelationship else { return }
        let destination = try resolve(id)
        if inverse.isToMany {
            try destination.removeID(objectID, from: inverse)
        } else if try destination.currentValue(for: inverse).relationshipValue?.objectIDs.first == objectID {
            try destination.record(.relationship(.toOne(nil)), for: inverse)
        }
    }

    /// Removes one ID from a to-many relationship without touching inverses (for inverse
    /// maintenance: the members need not be loaded).
    func removeID(_ id: ManagedObjectID, from relationship: RelationshipDescription) throws {
        try changeMember(id, of: relationship, adding: false, deferringLoad: true)
    }
}

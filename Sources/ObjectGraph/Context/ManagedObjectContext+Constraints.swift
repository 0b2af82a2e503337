import Foundation

/// Resolving uniqueness-constraint conflicts (``ConstraintConflict``) by a merge policy, as
/// Core Data's `NSMergePolicy` does. The policy changes objects of the context (values,
/// relationships, deletes); the save is then tried again with the objects as they are left.
///
/// With the store (``ConstraintConflict/databaseObject`` `D`, the save's object `C`):
/// - rollback: `C`'s changes are discarded (an inserted `C` is deleted);
/// - overwrite: `C` takes over `D`'s to-many members, and `D` is deleted: `C` replaces it;
/// - store trump: `D` takes `C`'s to-many members and keeps its values; `C` is deleted;
/// - object trump: `D` takes `C`'s values (every attribute of an inserted `C`, the changed
///   ones of an updated one), its to-one destinations (those set) and its to-many members;
///   `C` is deleted. The row in the store is updated in place and keeps its ID.
///
/// Within the save (no database object): one object is kept (an updated object before an
/// inserted one; among inserted ones, the first inserted), the others are deleted; with a
/// merging policy the kept object first takes each other's changed values where it did not
/// change its own, their to-one destinations and their to-many members.
extension ManagedObjectContext {
    /// Gives each conflict with the store its ``ConstraintConflict/databaseObject``: the object
    /// of the stored row in this context (registered as a fault when it is not yet).
    func attachDatabaseObjects(_ conflicts: [ConstraintConflict]) {
        for conflict in conflicts where conflict.databaseObject == nil {
            if let id = conflict.databaseObjectID { conflict.databaseObject = object(with: id) }
        }
    }

    /// Resolves one constraint conflict by a policy of type `type` (anything but
    /// ``MergePolicy/MergeType/error``). A conflict that no longer holds (an object gone,
    /// deleted, or no longer with the values) is left alone.
    func resolve(_ conflict: ConstraintConflict, by type: MergePolicy.MergeType) throws {
        guard type != .error else { return }
        if let database = conflict.databaseObject {
            guard let object = conflict.conflictingObjects.last, object.managedObjectContext === self, !object.deleted,
                database.managedObjectContext === self, !database.deleted, try holds(conflict, object)
            else { return }
            try resolve(object, duplicating: database, by: type)
        } else {
            let objects = try conflict.conflictingObjects.filter { try $0.managedObjectContext === self && !$0.deleted && holds(conflict, $0) }
            guard objects.count > 1 else { return }
            let kept = keptObject(of: objects)
            for other in objects where other !== kept {
                if type == .mergeByPropertyObjectTrump || type == .mergeByPropertyStoreTrump {
                    try mergeChanges(of: other, into: kept)
                }
                delete(other)
            }
        }
    }

    /// Whether `object` still has the conflict's values.
    private func holds(_ conflict: ConstraintConflict, _ object: ManagedObject) throws -> Bool {
        for name in conflict.constraint {
            guard let expected = conflict.constraintValues[name] else { return false }
            if try object.value(forKey: name) != expected { return false }
        }
        return true
    }

    /// A conflict with the store, resolved: see the type's documentation.
    private func resolve(_ object: ManagedObject, duplicating database: ManagedObject, by type: MergePolicy.MergeType) throws {
        switch type {
        case .error:
            return
        case .rollback:
            if object.inserted { delete(object) } else { refresh(object, mergeChanges: false) }
        case .overwrite:
            try moveToManyMembers(from: database, to: object)
            delete(database)
        case .mergeByPropertyStoreTrump:
            try moveToManyMembers(from: object, to: database)
            delete(object)
        case .mergeByPropertyObjectTrump:
            // An inserted object's every attribute is its own (Core Data copies them all); an
            // updated one's changed ones are.
            for attribute in object.entity.attributes where !attribute.isTransient {
                let value = try object.currentValue(for: attribute)
                guard try object.inserted || !sameValue(value, object.committedValue(for: attribute), for: attribute) else { continue }
                try database.setValue(value.attributeValue ?? .null, forKey: attribute.name)
            }
            for relationship in object.entity.relationships where !relationship.isToMany && !relationship.isTransient {
                let target = try object.object(forKey: relationship.name)
                // A destination an inserted object never set does not clear the stored one.
                if object.inserted {
                    guard target != nil else { continue }
                } else {
                    let committed = try object.committedValue(for: relationship).relationshipValue?.objectIDs.first
                    guard committed != target?.objectID else { continue }
                }
                try moveToOne(relationship, of: object, to: database, target: target)
            }
            try moveToManyMembers(from: object, to: database)
            delete(object)
        }
    }

    /// The object a conflict within a save keeps: an updated object (the one with the
    /// smallest ID when several are), else the first inserted of them.
    private func keptObject(of objects: [ManagedObject]) -> ManagedObject {
        let saved = objects.filter { !$0.inserted }
        if let first = saved.first {
            return saved.dropFirst().reduce(first) { kept, next in
                "\(next.objectID.uriRepresentation())" < "\(kept.objectID.uriRepresentation())" ? next : kept
            }
        }
        let inserted = Set(objects.map(ObjectIdentifier.init))
        return insertedInOrder.first { inserted.contains(ObjectIdentifier($0)) } ?? objects[0]
    }

    /// A merging policy's resolution within a save: `kept` takes each value `other` changed
    /// (set, for an inserted one) where `kept` did not change its own (an inserted `kept`
    /// changed none), `other`'s changed to-one destinations, and its to-many members.
    private func mergeChanges(of other: ManagedObject, into kept: ManagedObject) throws {
        func changed(_ object: ManagedObject, _ property: PropertyDescription) throws -> Bool {
            let value = try object.currentValue(for: property)
            guard !object.inserted else {
                if case .attribute(let attribute) = value { return !attribute.isNull }
                return value.relationshipValue?.objectIDs.isEmpty == false
            }
            return !sameValue(value, try object.committedValue(for: property), for: property)
        }
        for attribute in kept.entity.attributes where !attribute.isTransient && other.entity.attributesByName[attribute.name] === attribute {
            guard try kept.inserted || !changed(kept, attribute), try changed(other, attribute) else { continue }
            try kept.setValue(try other.currentValue(for: attribute).attributeValue ?? .null, forKey: attribute.name)
        }
        for relationship in kept.entity.relationships
        where !relationship.isToMany && !relationship.isTransient && other.entity.relationshipsByName[relationship.name] === relationship {
            guard try kept.inserted || !changed(kept, relationship), try changed(other, relationship) else { continue }
            try moveToOne(relationship, of: other, to: kept, target: try other.object(forKey: relationship.name))
        }
        try moveToManyMembers(from: other, to: kept)
    }

    /// `to` takes `from`'s destination of a to-one relationship; `from` is left without one.
    /// A destination `to` had under a cascade rule is deleted, as Core Data's policies do.
    private func moveToOne(_ relationship: RelationshipDescription, of from: ManagedObject, to: ManagedObject, target: ManagedObject?) throws {
        let previous = try to.object(forKey: relationship.name)
        guard previous !== target else { return }
        try from.setValue(nil as ManagedObject?, forKey: relationship.name)
        try to.setValue(target, forKey: relationship.name)
        if let previous, relationship.deleteRule == .cascade { delete(previous) }
    }

    /// `to` takes every member of `from`'s to-many relationships (those both entities have),
    /// after its own, in order; the inverses follow.
    private func moveToManyMembers(from: ManagedObject, to: ManagedObject) throws {
        for relationship in from.entity.relationships
        where relationship.isToMany && !relationship.isTransient && to.entity.relationshipsByName[relationship.name] === relationship {
            for member in try from.objects(forKey: relationship.name) {
                try from.removeObject(member, fromRelationship: relationship.name)
                try to.addObject(member, toRelationship: relationship.name)
            }
        }
    }
}

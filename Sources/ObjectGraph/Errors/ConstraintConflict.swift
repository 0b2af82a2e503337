/// A uniqueness constraint a save would break: Core Data's `NSConstraintConflict`.
///
/// A store that finds a save would give two objects of an entity the same values for one of
/// the entity's ``EntityDescription/uniquenessConstraints`` throws one ``ObjectGraphError``
/// of code ``ObjectGraphError/Code/constraintConflict`` whose
/// ``ObjectGraphError/constraintConflicts`` lists the conflicts, and writes nothing. The
/// context's ``ManagedObjectContext/mergePolicy`` resolves them (and the save is tried
/// again), or, with ``MergePolicy/error``, the default, the error reaches the caller.
///
/// A conflict is of one of two kinds:
/// - with the store (``databaseObject`` set): an object of the save has the values of a row
///   already in the store, which is ``databaseObject``; ``conflictingObjects`` holds the
///   one object of the save;
/// - within the save (``databaseObject`` `nil`): several objects of the save have the same
///   values, and no row of the store has them; ``conflictingObjects`` holds them all.
///
/// ```swift
/// do {
///     try context.save()
/// } catch let error as ObjectGraphError where error.code == .constraintConflict {
///     for conflict in error.constraintConflicts {
///         print(conflict.constraint, conflict.constraintValues, conflict.databaseObject?.objectID as Any)
///     }
/// }
/// ```
///
/// Sendable only so that it can travel in an error: the objects belong to their context's
/// queue, and are read there (the snapshots and values are values, safe anywhere).
public final class ConstraintConflict: @unchecked Sendable, CustomStringConvertible {
    // @unchecked: the fields are immutable but `databaseObject`, which the saving context
    // sets, on its queue, before any merge policy sees the conflict; the objects are used on
    // their context's queue only, as every managed object is.

    /// The names of the constrained attributes, as the entity declares them.
    public let constraint: [String]
    /// The values the objects share, by attribute name.
    public let constraintValues: [String: AttributeValue]
    /// The ID of the row in the store that holds the values already; `nil` for a conflict
    /// within the save.
    public let databaseObjectID: ManagedObjectID?
    /// The object of ``databaseObjectID`` in the saving context (a fault until read); `nil`
    /// for a conflict within the save.
    public internal(set) var databaseObject: ManagedObject?
    /// The stored row's attributes and to-one relationships (as object IDs), by name; `nil`
    /// for a conflict within the save.
    public let databaseSnapshot: [String: PropertyValue]?
    /// The objects of the save that have the values.
    public let conflictingObjects: [ManagedObject]
    /// For each of ``conflictingObjects``, the values it last read or saved (attributes and
    /// to-one relationships, by name); `nil` for an object never saved.
    public let conflictingSnapshots: [[String: PropertyValue]?]

    /// Creates a conflict record; `databaseObjectID` is `databaseObject`'s ID when there is
    /// one. `constraintValues` are read from the snapshot of the database object or, without
    /// one, from the first conflicting object.
    public init(
        constraint: [String], databaseObject: ManagedObject?, databaseSnapshot: [String: PropertyValue]?,
        conflictingObjects: [ManagedObject], conflictingSnapshots: [[String: PropertyValue]?]
    ) {
        self.constraint = constraint
        self.databaseObject = databaseObject
        self.databaseObjectID = databaseObject?.objectID
        self.databaseSnapshot = databaseSnapshot
        self.conflictingObjects = conflictingObjects
        self.conflictingSnapshots = conflictingSnapshots
        var values: [String: AttributeValue] = [:]
        for name in constraint {
            if let value = databaseSnapshot?[name]?.attributeValue {
                values[name] = value
            } else if let object = conflictingObjects.first, let value = try? object.value(forKey: name) {
                values[name] = value
            }
        }
        self.constraintValues = values
    }

    /// The record a store makes: the context fills ``databaseObject`` in from
    /// `databaseObjectID` before its merge policy sees the record.
    package init(
        constraint: [String], constraintValues: [String: AttributeValue], databaseObjectID: ManagedObjectID?,
        databaseSnapshot: [String: PropertyValue]?, conflictingObjects: [ManagedObject]
    ) {
        self.constraint = constraint
        self.constraintValues = constraintValues
        self.databaseObjectID = databaseObjectID
        self.databaseSnapshot = databaseSnapshot
        self.conflictingObjects = conflictingObjects
        self.conflictingSnapshots = conflictingObjects.map { MergeConflict.snapshot(of: $0) }
    }

    /// Whether the conflict is with a row already in the store.
    public var isDatabaseConflict: Bool { databaseObjectID != nil }

    /// The constraint, the values and the objects involved.
    public var description: String {
        let values = constraint.map { "\($0) = \(constraintValues[$0].map { "\($0)" } ?? "?")" }.joined(separator: ", ")
        let objects = conflictingObjects.map { "\($0.objectID)" }.joined(separator: ", ")
        if let databaseObjectID {
            return "[\(values)]: \(objects) duplicates \(databaseObjectID) in the store"
        }
        return "[\(values)]: \(objects) share the values"
    }
}

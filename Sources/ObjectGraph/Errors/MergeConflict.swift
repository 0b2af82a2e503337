/// One object a save could not write because its row changed (or went) after the context
/// read it: optimistic locking's conflict record (Core Data's `NSMergeConflict`).
///
/// A store that finds conflicts throws one ``ObjectGraphError`` of code
/// ``ObjectGraphError/Code/mergeConflict`` whose ``ObjectGraphError/conflicts`` lists every
/// object in conflict; the context's ``ManagedObjectContext/mergePolicy`` then resolves them
/// and the save is tried again, or (``MergePolicy/error``, the default) the error reaches the
/// caller. For example:
///
/// ```swift
/// do {
///     try context.save()
/// } catch let error as ObjectGraphError where error.code == .mergeConflict {
///     for conflict in error.conflicts {
///         print(conflict.sourceObject.objectID, conflict.oldVersionNumber, "->", conflict.newVersionNumber)
///         print("store now has", conflict.persistedSnapshot ?? [:])
///     }
/// }
/// ```
///
/// Snapshots hold attributes and to-one relationships by name (to-one values as object IDs),
/// never to-many relationships, as Core Data's do; a store reads those on demand.
///
/// Sendable only so that it can travel in an error: ``sourceObject`` belongs to its context's
/// queue, and is read there (the snapshots are values, safe anywhere).
public final class MergeConflict: @unchecked Sendable, CustomStringConvertible {
    // @unchecked: every field is immutable; the one non-Sendable field, `sourceObject`, is used
    // on its context's queue only, as every managed object is.

    /// The object whose save conflicted.
    public let sourceObject: ManagedObject
    /// The object's ID when the conflict was found.
    public let objectID: ManagedObjectID
    /// The values the context last read or saved for the object (its committed values):
    /// attributes and to-one relationships, by name.
    public let objectSnapshot: [String: PropertyValue]?
    /// The values the store's cache holds for the object; the same as ``persistedSnapshot``
    /// for the stores of this package, whose caches follow every commit.
    public let cachedSnapshot: [String: PropertyValue]?
    /// The values in the store at the time of the save; `nil` when the row was deleted.
    public let persistedSnapshot: [String: PropertyValue]?
    /// The version of the row in the store; 0 when the row was deleted (as in Core Data).
    public let newVersionNumber: UInt64
    /// The version the context's values belong to (the one it read or last saved).
    public let oldVersionNumber: UInt64

    /// Creates a conflict record with every part given.
    public init(
        sourceObject: ManagedObject, newVersion: UInt64, oldVersion: UInt64,
        objectSnapshot: [String: PropertyValue]?, cachedSnapshot: [String: PropertyValue]?,
        persistedSnapshot: [String: PropertyValue]?
    ) {
        self.sourceObject = sourceObject
        self.objectID = sourceObject.objectID
        self.newVersionNumber = newVersion
        self.oldVersionNumber = oldVersion
        self.objectSnapshot = objectSnapshot
        self.cachedSnapshot = cachedSnapshot
        self.persistedSnapshot = persistedSnapshot
    }

    /// The record a store makes for an object whose row is now `storedRow` (`nil`: deleted):
    /// the object's snapshot is its committed values, and the cached and persisted snapshots
    /// are the stored row's attributes and to-one relationships.
    ///
    /// Call it outside any lock of the store: reading the object's committed values may load
    /// them.
    public convenience init(sourceObject: ManagedObject, storedRow: IncrementalStoreNode?) {
        let stored = storedRow.map { MergeConflict.snapshot(of: $0, entity: sourceObject.entity) }
        self.init(
            sourceObject: sourceObject, newVersion: storedRow?.version ?? 0, oldVersion: sourceObject.committedVersion ?? 0,
            objectSnapshot: MergeConflict.snapshot(of: sourceObject), cachedSnapshot: stored, persistedSnapshot: stored)
    }

    /// Whether the object's row was deleted from the store.
    public var isDeletedInStore: Bool { persistedSnapshot == nil }

    /// The object's ID, the two versions and whether the row is gone.
    public var description: String {
        "\(objectID): read at version \(oldVersionNumber), store has \(persistedSnapshot == nil ? "no row" : "version \(newVersionNumber)")"
    }

    /// An object's committed attributes and to-one relationships, by name.
    static func snapshot(of object: ManagedObject) -> [String: PropertyValue]? {
        guard object.committedVersion != nil else { return nil }
        var values: [String: PropertyValue] = [:]
        for property in object.entity.storedProperties where property.slotKind != .toMany {
            if let value = try? object.committedValue(for: property) { values[property.name] = value }
        }
        return values
    }

    /// A node's attributes and to-one relationships, by name.
    static func snapshot(of node: IncrementalStoreNode, entity: EntityDescription) -> [String: PropertyValue] {
        var values: [String: PropertyValue] = [:]
        for property in entity.storedProperties where property.slotKind != .toMany {
            values[property.name] = node.value(for: property) ?? ManagedObject.emptyValue(of: property)
        }
        return values
    }
}

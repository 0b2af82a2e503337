import Foundation

/// The changes of one save, for one store (Core Data's `NSSaveChangesRequest`).
///
/// When every set is `nil` the request asks the store to save its metadata.
/// Inserted objects already carry the permanent IDs the store returned from
/// ``IncrementalStore/obtainPermanentIDs(for:)``.
public struct SaveChangesRequest: PersistentStoreRequest {
    /// Always ``PersistentStoreRequestType/save``.
    public var requestType: PersistentStoreRequestType { .save }
    /// The store the request is for.
    public var affectedStores: [PersistentStore]?
    /// Objects to add.
    public var insertedObjects: Set<ManagedObject>?
    /// Objects whose values changed.
    public var updatedObjects: Set<ManagedObject>?
    /// Objects to remove.
    public var deletedObjects: Set<ManagedObject>?
    /// Unchanged objects marked for optimistic locking.
    public var lockedObjects: Set<ManagedObject>?

    /// Creates a save request.
    public init(
        inserted: Set<ManagedObject>? = nil, updated: Set<ManagedObject>? = nil,
        deleted: Set<ManagedObject>? = nil, locked: Set<ManagedObject>? = nil
    ) {
        self.insertedObjects = inserted
        self.updatedObjects = updated
        self.deletedObjects = deleted
        self.lockedObjects = locked
    }

    /// Whether this request only asks the store to save its metadata.
    public var isMetadataSave: Bool {
        insertedObjects == nil && updatedObjects == nil && deletedObjects == nil && lockedObjects == nil
    }
}

import Foundation

extension ManagedObjectContext {
    /// Posted at the end of an event in which objects were inserted, updated, deleted,
    /// refreshed or invalidated, and by ``reset()``. The object is the context.
    public static let objectsDidChangeNotification = Notification.Name("ObjectGraph.ManagedObjectContextObjectsDidChange")
    /// Posted when a save starts, before validation. The object is the context; no user info.
    public static let willSaveObjectsNotification = Notification.Name("ObjectGraph.ManagedObjectContextWillSave")
    /// Posted after a save succeeded, with the inserted, updated and deleted objects and
    /// their IDs (the IDs are what another queue's context may use, as in
    /// ``ManagedObjectContext/mergeChanges(fromContextDidSave:)``).
    public static let didSaveObjectsNotification = Notification.Name("ObjectGraph.ManagedObjectContextDidSave")
    /// Posted after a save succeeded, with only the IDs of the inserted, updated and deleted
    /// objects (Core Data's `didSaveObjectIDsNotification`): safe to read on any thread.
    public static let didSaveObjectIDsNotification = Notification.Name("ObjectGraph.ManagedObjectContextDidSaveObjectIDs")

    /// The user-info keys of the context's notifications (Core Data's `NSInsertedObjectsKey`, …).
    public enum NotificationKey: String, Sendable, CaseIterable {
        /// `Set<ManagedObject>` of inserted objects.
        case insertedObjects = "inserted"
        /// `Set<ManagedObject>` of updated objects.
        case updatedObjects = "updated"
        /// `Set<ManagedObject>` of deleted objects.
        case deletedObjects = "deleted"
        /// `Set<ManagedObject>` of refreshed objects.
        case refreshedObjects = "refreshed"
        /// `Set<ManagedObject>` of objects whose values could no longer be loaded.
        case invalidatedObjects = "invalidated"
        /// `[ManagedObjectID]` of every object a ``ManagedObjectContext/reset()`` forgot.
        case invalidatedAllObjects = "invalidatedAll"
        /// `Set<ManagedObjectID>` of the objects a save inserted.
        case insertedObjectIDs = "insertedObjectIDs"
        /// `Set<ManagedObjectID>` of the objects a save updated.
        case updatedObjectIDs = "updatedObjectIDs"
        /// `Set<ManagedObjectID>` of the objects a save deleted.
        case deletedObjectIDs = "deletedObjectIDs"
        /// `[ManagedObjectID: ManagedObjectID]`: the temporary IDs a save replaced with
        /// permanent ones (only when it replaced some).
        case permanentObjectIDs = "permanentObjectIDs"
    }
}

/// The contents of an objects-did-change, will-save or did-save notification, typed.
///
/// For example:
///
/// ```swift
/// NotificationCenter.default.addObserver(forName: ManagedObjectContext.didSaveObjectsNotification,
///                                        object: context, queue: nil) { note in
///     let changes = ObjectChangeNotification(note)
///     print(changes?.inserted.count ?? 0)
/// }
/// ```
public struct ObjectChangeNotification {
    /// The context that posted the notification.
    public let context: ManagedObjectContext?
    /// Inserted objects.
    public let inserted: Set<ManagedObject>
    /// Updated objects.
    public let updated: Set<ManagedObject>
    /// Deleted objects.
    public let deleted: Set<ManagedObject>
    /// Refreshed objects.
    public let refreshed: Set<ManagedObject>
    /// Invalidated objects.
    public let invalidated: Set<ManagedObject>
    /// The IDs of all objects invalidated at once by a reset, if that is what happened.
    public let invalidatedAll: [ManagedObjectID]?
    /// The IDs of the inserted objects (of a save notification).
    public let insertedObjectIDs: Set<ManagedObjectID>
    /// The IDs of the updated objects (of a save notification).
    public let updatedObjectIDs: Set<ManagedObjectID>
    /// The IDs of the deleted objects (of a save notification).
    public let deletedObjectIDs: Set<ManagedObjectID>

    /// Reads a notification posted by a ``ManagedObjectContext``; `nil` for any other.
    public init?(_ notification: Notification) {
        let names = [
            ManagedObjectContext.objectsDidChangeNotification, ManagedObjectContext.willSaveObjectsNotification,
            ManagedObjectContext.didSaveObjectsNotification, ManagedObjectContext.didSaveObjectIDsNotification,
        ]
        guard names.contains(notification.name) else { return nil }
        let info = notification.userInfo ?? [:]
        func objects(_ key: ManagedObjectContext.NotificationKey) -> Set<ManagedObject> {
            info[key.rawValue] as? Set<ManagedObject> ?? []
        }
        context = notification.object as? ManagedObjectContext
        inserted = objects(.insertedObjects)
        updated = objects(.updatedObjects)
        deleted = objects(.deletedObjects)
        refreshed = objects(.refreshedObjects)
        invalidated = objects(.invalidatedObjects)
        invalidatedAll = info[ManagedObjectContext.NotificationKey.invalidatedAllObjects.rawValue] as? [ManagedObjectID]
        let changes = SavedChanges(info)
        insertedObjectIDs = Set(changes.inserted)
        updatedObjectIDs = Set(changes.updated)
        deletedObjectIDs = Set(changes.deleted)
    }
}

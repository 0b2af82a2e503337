/// One object a save could not write because its row changed after the context read it
/// (optimistic locking): Core Data's merge-conflict record, as a value.
///
/// For example:
///
/// ```swift
/// do { try context.save() } catch let error as ObjectGraphError where !error.conflicts.isEmpty {
///     for conflict in error.conflicts { print(conflict.objectID, conflict.snapshotVersion, conflict.databaseVersion) }
/// }
/// ```
public struct SaveConflict: Sendable, Hashable, CustomStringConvertible {
    /// The object whose row changed.
    public var objectID: ManagedObjectID
    /// The row version the context's snapshot was taken at.
    public var snapshotVersion: UInt64
    /// The row version the store's cache held when the save checked (the same as
    /// ``databaseVersion`` for a store whose cache follows every commit).
    public var cachedVersion: UInt64?
    /// The row version in the store at the time of the save; `nil` if the row was deleted.
    public var databaseVersion: UInt64?

    /// Creates a conflict record.
    public init(objectID: ManagedObjectID, snapshotVersion: UInt64, cachedVersion: UInt64?, databaseVersion: UInt64?) {
        self.objectID = objectID
        self.snapshotVersion = snapshotVersion
        self.cachedVersion = cachedVersion
        self.databaseVersion = databaseVersion
    }

    public var description: String {
        "\(objectID): read at version \(snapshotVersion), store has \(databaseVersion.map(String.init) ?? "no row")"
    }
}

/// How a context resolves the conflicts a save finds (Core Data's `NSMergePolicy`).
///
/// A save conflicts when an object it writes (or deletes, or locks with
/// ``ManagedObjectContext/detectConflicts(for:)``) changed or went in its store since the
/// context read it. The context hands the conflicts to its ``ManagedObjectContext/mergePolicy``,
/// then tries the save again with the objects as the policy left them. For example:
///
/// ```swift
/// context.mergePolicy = .mergeByPropertyObjectTrump
/// try context.save()   // conflicts resolved, property by property; this context's changes win
/// ```
///
/// The five policies, by ``MergeType``:
///
/// | policy | an object both sides changed | deleted here, changed in the store | changed here, deleted in the store |
/// |---|---|---|---|
/// | ``error`` (default) | the save throws ``ObjectGraphError/Code/mergeConflict`` | throws | throws |
/// | ``mergeByPropertyStoreTrump`` | the store's values for the properties it changed, this context's for the rest | the delete is saved | the object is forgotten, as a merged delete |
/// | ``mergeByPropertyObjectTrump`` | this context's values for the properties it changed, the store's for the rest | the delete is saved | the object is forgotten |
/// | ``overwrite`` | every value this context holds is written, changed or not | the delete is saved | the object is forgotten |
/// | ``rollback`` | this context's changes are discarded; the object takes the store's values | the delete is undone | the object is forgotten |
///
/// To-many relationships merge member by member: a member added or removed on one side only
/// is added or removed; one the two sides disagree on follows the side that trumps.
///
/// Subclass it to resolve conflicts your own way: override
/// ``resolve(optimisticLockingConflicts:)``, change the objects (``ManagedObjectContext/refresh(_:mergeChanges:)``
/// moves an object to the store's current version and keeps its changes), and call `super` for
/// the conflicts you leave to the policy you were created with. A conflict still there when the
/// save is tried again is found again; after a few rounds the save throws it.
///
/// Immutable, so `Sendable`; a subclass must stay so.
open class MergePolicy: @unchecked Sendable {
    // @unchecked: the class is open; its one stored property is immutable.

    /// The five ways of resolving conflicts (Core Data's `NSMergePolicyType`).
    public enum MergeType: Int, Sendable, CaseIterable, CustomStringConvertible {
        /// The save fails with every conflict (`NSErrorMergePolicyType`).
        case error = 0
        /// Property by property, the store's changes win (`NSMergeByPropertyStoreTrumpMergePolicyType`).
        case mergeByPropertyStoreTrump = 1
        /// Property by property, this context's changes win (`NSMergeByPropertyObjectTrumpMergePolicyType`).
        case mergeByPropertyObjectTrump = 2
        /// The whole in-memory object is written over the store's row (`NSOverwriteMergePolicyType`).
        case overwrite = 3
        /// This context's changes to the objects in conflict are discarded (`NSRollbackMergePolicyType`).
        case rollback = 4

        /// The policy's name, as in Core Data without its prefix and suffix.
        public var description: String {
            switch self {
            case .error: return "error"
            case .mergeByPropertyStoreTrump: return "mergeByPropertyStoreTrump"
            case .mergeByPropertyObjectTrump: return "mergeByPropertyObjectTrump"
            case .overwrite: return "overwrite"
            case .rollback: return "rollback"
            }
        }
    }

    /// How this policy resolves conflicts.
    public let mergeType: MergeType

    /// A policy of the given type. A subclass passes the type closest to what it does, so
    /// that `super` resolves what it leaves.
    public init(merge type: MergeType) {
        mergeType = type
    }

    /// The default: a save with conflicts fails (`NSErrorMergePolicy`).
    public static let error = MergePolicy(merge: .error)
    /// Property by property, the store's changes win (`NSMergeByPropertyStoreTrumpMergePolicy`).
    public static let mergeByPropertyStoreTrump = MergePolicy(merge: .mergeByPropertyStoreTrump)
    /// Property by property, this context's changes win (`NSMergeByPropertyObjectTrumpMergePolicy`).
    public static let mergeByPropertyObjectTrump = MergePolicy(merge: .mergeByPropertyObjectTrump)
    /// The in-memory state of the changed objects is forced upon the store (`NSOverwriteMergePolicy`).
    public static let overwrite = MergePolicy(merge: .overwrite)
    /// The in-memory changes of the objects in conflict are discarded (`NSRollbackMergePolicy`).
    public static let rollback = MergePolicy(merge: .rollback)

    /// Resolves conflicts of any kind; the context calls it with the conflicts of one failed
    /// save attempt. The default implementation passes them to
    /// ``resolve(optimisticLockingConflicts:)``.
    ///
    /// - Throws: the conflicts it does not resolve, as an ``ObjectGraphError``.
    open func resolve(mergeConflicts list: [MergeConflict]) throws {
        try resolve(optimisticLockingConflicts: list)
    }

    /// Resolves uniqueness-constraint conflicts (``ConstraintConflict``) by ``mergeType``;
    /// ``MergeType/error`` throws them all as one ``ObjectGraphError/Code/constraintConflict``
    /// error. The context calls it with the conflicts of one failed save attempt, each
    /// conflict with the store already holding its ``ConstraintConflict/databaseObject``.
    ///
    /// By type, for a conflict with a row in the store (`D`, the database object) and the
    /// save's object `C`: ``MergeType/rollback`` discards `C`'s changes (deletes it when it is
    /// inserted); ``MergeType/overwrite`` moves `D`'s to-many members to `C` and deletes `D`,
    /// so `C` replaces the row; ``MergeType/mergeByPropertyStoreTrump`` moves `C`'s to-many
    /// members to `D` and deletes `C`; ``MergeType/mergeByPropertyObjectTrump`` gives `D`
    /// `C`'s values (every attribute of an inserted `C`, the changed ones of an updated one),
    /// the to-one destinations `C` set and its to-many members, and deletes `C`: the stored
    /// row is updated in place. For a conflict within the save, one object is kept (an updated
    /// one before inserted ones, else the first inserted) and the others are deleted; the two
    /// merging types first give the kept object the values the others changed where it did
    /// not change its own, and their relationships.
    ///
    /// Call it on the context's queue (the context does, during ``ManagedObjectContext/save()``).
    open func resolve(constraintConflicts list: [ConstraintConflict]) throws {
        guard mergeType != .error else { throw ObjectGraphError.constraintConflicts(list) }
        for conflict in list {
            let context = conflict.databaseObject?.managedObjectContext ?? conflict.conflictingObjects.first?.managedObjectContext
            try context?.resolve(conflict, by: mergeType)
        }
    }

    /// Resolves optimistic-locking conflicts by ``mergeType``; ``MergeType/error`` throws
    /// them all as one ``ObjectGraphError/Code/mergeConflict`` error.
    ///
    /// Call it on the context's queue (the context does, during ``ManagedObjectContext/save()``).
    open func resolve(optimisticLockingConflicts list: [MergeConflict]) throws {
        guard mergeType != .error else { throw ObjectGraphError.mergeConflicts(list) }
        // An object no longer in a context (resolved already, or gone) is left alone.
        for conflict in list { try conflict.sourceObject.managedObjectContext?.resolve(conflict, by: mergeType) }
    }
}

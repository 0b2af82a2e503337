import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// One step of a ``MigrationPlan``: from one model version to the next (SwiftData's
/// `MigrationStage`).
///
/// A lightweight stage migrates with the mapping ``MappingModel/inferred(from:to:)`` gives;
/// a store that migrates lightweight changes in place (StrataStore) does so, others are
/// copied. A custom stage runs `willMigrate` on a context of the old model (its changes are
/// saved), copies the store into a new one by its mapping (inferred when `nil`), with
/// `customizeObject` filling each copy from its source, swaps the copy in, and runs
/// `didMigrate` on a context of the new model (its changes are saved).
public struct MigrationStage: @unchecked Sendable {
    /// What kind of stage it is.
    public enum Kind: Sendable, Equatable {
        /// Inferred, in place where the store can.
        case lightweight
        /// Copied by a mapping, with the stage's closures.
        case custom
    }

    /// The stage's kind.
    public let kind: Kind
    /// The model the store is in before the stage.
    public let fromModel: ManagedObjectModel
    /// The model the store is in after it.
    public let toModel: ManagedObjectModel
    /// A custom stage's mapping; inferred when `nil`.
    public let mapping: MappingModel?
    /// Runs on a context of ``fromModel`` before the copy.
    public let willMigrate: ((ManagedObjectContext) throws -> Void)?
    /// Runs on a context of ``toModel`` after the copy is swapped in.
    public let didMigrate: ((ManagedObjectContext) throws -> Void)?
    /// Fills each copy from its source object after the mapping has: `(source, copy)`.
    public let customizeObject: ((ManagedObject, ManagedObject) throws -> Void)?

    /// A lightweight stage.
    public static func lightweight(from: ManagedObjectModel, to: ManagedObjectModel) -> MigrationStage {
        MigrationStage(kind: .lightweight, fromModel: from, toModel: to, mapping: nil, willMigrate: nil, didMigrate: nil, customizeObject: nil)
    }

    /// A custom stage: see ``MigrationStage``.
    public static func custom(
        from: ManagedObjectModel, to: ManagedObjectModel, mapping: MappingModel? = nil,
        willMigrate: ((ManagedObjectContext) throws -> Void)? = nil, didMigrate: ((ManagedObjectContext) throws -> Void)? = nil,
        customizeObject: ((ManagedObject, ManagedObject) throws -> Void)? = nil
    ) -> MigrationStage {
        MigrationStage(
            kind: .custom, fromModel: from, toModel: to, mapping: mapping, willMigrate: willMigrate, didMigrate: didMigrate,
            customizeObject: customizeObject)
    }
}

/// The versions of a model and how a store moves from each to the next (SwiftData's
/// `SchemaMigrationPlan`): a store of any version the plan names is brought to the last one,
/// stage by stage, each stage leaving a whole store (crash-safe: the old store or the new one,
/// never a mix).
///
/// For example, version 2 splits `name` into `firstName` and `lastName`:
///
/// ```swift
/// let plan = MigrationPlan(stages: [
///     .lightweight(from: v1, to: v2a),
///     .custom(from: v2a, to: v3, customizeObject: { source, copy in
///         let parts = try source.value(forKey: "name").stringValue?.split(separator: " ") ?? []
///         try copy.setValue(.string(parts.first.map(String.init) ?? ""), forKey: "firstName")
///         try copy.setValue(.string(parts.dropFirst().joined(separator: " ")), forKey: "lastName")
///     }),
/// ])
/// try plan.migrateStore(at: url, type: .strata)
/// ```
public struct MigrationPlan: @unchecked Sendable {
    /// The stages, oldest first; each stage's ``MigrationStage/fromModel`` is the model the
    /// stage before it ends with.
    public let stages: [MigrationStage]
    /// Called with the stage running (its index) and the fraction of its copy done.
    public var progressHandler: ((Int, Double) -> Void)?

    /// Creates a plan.
    public init(stages: [MigrationStage]) {
        self.stages = stages
    }

    /// The models of the plan, oldest first.
    public var models: [ManagedObjectModel] { (stages.first.map { [$0.fromModel] } ?? []) + stages.map(\.toModel) }

    /// Brings the store of `type` at `url` to the plan's last model: finds the version the
    /// store's metadata matches (its version hashes, [OPEN-1]) and runs the stages after it.
    /// A store of the last version is left as it is. The store must not be added to a
    /// coordinator.
    ///
    /// - Throws: ``ObjectGraphError/Code/migrationFailed`` when the store matches none of the
    ///   plan's models (naming the differences from the last), or a stage fails (the store is
    ///   then whole at the version before the stage); the stage's own errors.
    public func migrateStore(at url: URL, type: PersistentStore.StoreType, options: [String: AttributeValue] = [:]) throws {
        guard let last = models.last else { return }
        let storeClass = try PersistentStoreCoordinator.storeClass(for: type)
        try storeClass.finishInterruptedMigration(at: url)
        guard FileManager.default.fileExists(atPath: url.path) else { return }
        let metadata = try PersistentStoreCoordinator.metadataForPersistentStore(ofType: type, at: url, options: options)
        guard metadata.keys.contains(where: { $0.hasPrefix(PersistentStore.modelVersionHashKeyPrefix) }) else { return }
        if last.isConfiguration(withName: nil, compatibleWithStoreMetadata: metadata) { return }
        guard let start = stages.firstIndex(where: { $0.fromModel.isConfiguration(withName: nil, compatibleWithStoreMetadata: metadata) }) else {
            let differences = last.differences(ofConfiguration: nil, fromStoreMetadata: metadata)
            throw ObjectGraphError(
                .migrationFailed,
                "The store at \(url.path) was saved with a model none of the plan's \(models.count) versions matches (from the last: "
                    + differences.map(\.description).joined(separator: "; ") + "). Nothing was written.",
                entityName: differences.first?.entityName)
        }
        for index in start..<stages.count {
            try run(stages[index], index: index, at: url, type: type, storeClass: storeClass, options: options)
        }
    }

    private func run(
        _ stage: MigrationStage, index: Int, at url: URL, type: PersistentStore.StoreType, storeClass: PersistentStore.Type,
        options: [String: AttributeValue]
    ) throws {
        var migrating = options
        migrating[PersistentStore.migratePersistentStoresAutomaticallyOption] = .bool(true)
        migrating[PersistentStore.inferMappingModelAutomaticallyOption] = .bool(true)
        if stage.kind == .lightweight {
            // In place, where the store type migrates lightweight changes itself.
            do {
                let coordinator = PersistentStoreCoordinator(managedObjectModel: stage.toModel)
                let store = try coordinator.addPersistentStore(type: type, at: url, options: migrating)
                try coordinator.remove(store)
                progressHandler?(index, 1)
                return
            } catch let error as ObjectGraphError where error.code == .incompatibleModel || error.code == .migrationFailed {
                // Copied below.
            }
        }
        if let willMigrate = stage.willMigrate {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: stage.fromModel)
            let store = try coordinator.addPersistentStore(type: type, at: url, options: options)
            do {
                let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
                try willMigrate(context)
                if context.hasChanges { try context.save() }
            } catch {
                try? coordinator.remove(store)
                throw error
            }
            try coordinator.remove(store)
        }
        let mapping = try stage.mapping ?? MappingModel.inferred(from: stage.fromModel, to: stage.toModel)
        let manager = MigrationManager(sourceModel: stage.fromModel, destinationModel: stage.toModel)
        manager.customizeObject = stage.customizeObject
        let progressHandler = self.progressHandler
        manager.progressHandler = { progressHandler?(index, $0) }
        try manager.migrateStore(at: url, type: type, options: options, mapping: mapping)
        if let didMigrate = stage.didMigrate {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: stage.toModel)
            let store = try coordinator.addPersistentStore(type: type, at: url, options: options)
            defer { try? coordinator.remove(store) }
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            try didMigrate(context)
            if context.hasChanges { try context.save() }
        }
    }
}

extension PersistentStore {
    /// Where a migration by copy builds the new store of the store at `url`: a hidden sibling,
    /// `.<name>.migrating`.
    public static func migratingURL(for url: URL) -> URL {
        url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).migrating")
    }

    /// Where the old store waits while the new one takes its place: `.<name>.premigration`.
    static func premigrationURL(for url: URL) -> URL {
        url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).premigration")
    }

    /// Puts the store built at ``migratingURL(for:)`` in the place of the store at `url`, so
    /// that a crash at any point leaves one whole store there, old or new: the old store is
    /// renamed aside (`.<name>.premigration`), the new one renamed into place, the old one
    /// destroyed; each rename is made durable (the directory synced) before the next step.
    /// ``finishInterruptedMigration(at:)`` completes a swap a crash interrupted.
    public class func swapInMigratedStore(at url: URL) throws {
        let migrating = migratingURL(for: url), aside = premigrationURL(for: url)
        try destroyPersistentStore(at: aside)
        try renameDurably(url, to: aside)
        try renameDurably(migrating, to: url)
        try destroyPersistentStore(at: aside)
    }

    /// Completes or undoes a migration a crash interrupted at `url` (the coordinator calls it
    /// before adding a store): the new store moved into place if the old one was already
    /// aside, the old one destroyed if the new one is in place, an unfinished copy destroyed.
    public class func finishInterruptedMigration(at url: URL) throws {
        guard url.isFileURL else { return }
        let manager = FileManager.default
        let migrating = migratingURL(for: url), aside = premigrationURL(for: url)
        if manager.fileExists(atPath: aside.path) {
            if !manager.fileExists(atPath: url.path) {
                // Aside, not yet replaced: the copy is whole (it was made before the first
                // rename), so it takes the place; without it, the old store goes back.
                try renameDurably(manager.fileExists(atPath: migrating.path) ? migrating : aside, to: url)
            }
            try? destroyPersistentStore(at: aside)
        } else if manager.fileExists(atPath: migrating.path) {
            // A copy that never got swapped in: the store at `url` is the old one, whole.
            try? destroyPersistentStore(at: migrating)
        }
    }

    /// Renames `source` to `destination` and syncs their directory.
    private static func renameDurably(_ source: URL, to destination: URL) throws {
        guard rename(source.path, destination.path) == 0 else {
            let code = errno
            throw ObjectGraphError(
                .migrationFailed, "Could not rename \(source.path) to \(destination.path): \(String(cString: strerror(code))) (errno \(code)).")
        }
        let directory = open(destination.deletingLastPathComponent().path, O_RDONLY)
        if directory >= 0 {
            _ = fsync(directory)
            close(directory)
        }
    }
}

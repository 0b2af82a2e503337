import Foundation
import ObjectGraph

/// `strata migrate`: brings a store (a StrataStore directory or a binary store file) to
/// another model without the application: lightweight, in place where the store can
/// (SPEC.md [MIG-1]), or by copy with a custom mapping whose property values are fetch-language
/// expressions ([MIG-3]).
///
/// For example, a model that stores a year as a string where it held an integer:
///
/// ```swift
/// let model = try JSONDecoder().decode(ModelFile.self, from: Data(contentsOf: modelURL)).model()
/// let report = try OfflineMigration.run(
///     at: "/var/lib/app/store", to: model,
///     values: ["Book.year": .expression(try FetchExpression(format: "year"))]) { print($0) }
/// ```
public enum OfflineMigration {
    /// What a migration did.
    public struct Report: Codable, Sendable, Equatable {
        /// The store.
        public var path: String
        /// `none` (the store already had the model), `in place` or `copy`.
        public var kind: String
        /// The entity mappings that change something, as `Source → Destination (type)`.
        public var changes: [String]
        /// Wall time of the migration.
        public var seconds: Double
    }

    /// The model the store at `path` was last saved with (its model record).
    ///
    /// - Throws: `ObjectGraphError/Code/storeOpenFailed` when the store keeps no model.
    public static func storedModel(at path: String) throws -> ManagedObjectModel {
        let (type, url) = try store(at: path)
        guard let model = try PersistentStoreCoordinator.storeClass(for: type).storedModel(at: url) else {
            throw ObjectGraphError(.storeOpenFailed, "The store at \(path) has no model record ([ROW-5]) to migrate from.")
        }
        return model
    }

    /// Migrates the store at `path` to `model`. With no `values`, lightweight: the inferred
    /// mapping, in place where the store can (a StrataStore), its index entries built before it
    /// returns; else by copy. With `values` (destination properties as `Entity.property`), the
    /// inferred mapping with those values, by copy ([MIG-3]). `progress` hears the share done
    /// (0 to 1) of a copy.
    ///
    /// - Throws: `ObjectGraphError/Code/inferredMappingFailed` naming every change that
    ///   needs a value; the store's errors. A failure leaves the store as it was.
    public static func run(
        at path: String, to model: ManagedObjectModel, values: [String: PropertyMapping.Value] = [:],
        progress: @escaping (Double) -> Void = { _ in }
    ) throws -> Report {
        let started = ContinuousClock.now
        let (type, url) = try store(at: path)
        let storeClass = try PersistentStoreCoordinator.storeClass(for: type)
        try storeClass.finishInterruptedMigration(at: url)
        let source = try storedModel(at: path)
        let mapping = try MappingModel.inferred(from: source, to: model, overriding: values)
        let changes = mapping.entityMappings.filter { $0.mappingType != .copy }.map {
            "\($0.sourceEntityName ?? "-") → \($0.destinationEntityName ?? "-") (\($0.mappingType.rawValue))"
        }
        func report(_ kind: String) -> Report {
            let elapsed = ContinuousClock.now - started
            return Report(
                path: path, kind: kind, changes: changes,
                seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        }
        if source.differences(fromStoreModel: model).isEmpty && values.isEmpty { return report("none") }
        if values.isEmpty {
            let before = try storeClass.metadataForPersistentStore(at: url)[PersistentStore.storeUUIDKey]
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            let store = try coordinator.addPersistentStore(type: type, at: url, options: [
                PersistentStore.migratePersistentStoresAutomaticallyOption: .bool(true),
                PersistentStore.inferMappingModelAutomaticallyOption: .bool(true),
                StrataStore.indexBuildOption: .string("synchronous"),
            ])
            let after = store.metadata[PersistentStore.storeUUIDKey]
            try coordinator.remove(store)
            progress(1)
            return report(before == after ? "in place" : "copy")
        }
        let manager = MigrationManager(sourceModel: source, destinationModel: model)
        manager.progressHandler = progress
        try manager.migrateStore(at: url, type: type, mapping: mapping)
        return report("copy")
    }

    /// The store type of `path` (a directory: a StrataStore; a file: a binary store) and its URL.
    private static func store(at path: String) throws -> (PersistentStore.StoreType, URL) {
        StrataStore.register()
        BinaryStore.register()
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw ObjectGraphError(.storeOpenFailed, "There is no store at \(path).")
        }
        return (isDirectory.boolValue ? .strata : .binary, URL(fileURLWithPath: path))
    }
}

import Foundation
import Synchronization
import StrataSync

/// The link between contexts and stores (Core Data's `NSPersistentStoreCoordinator`):
/// it owns the model, adds and removes stores, and routes every request to the stores
/// that hold each entity.
///
/// For example:
///
/// ```swift
/// let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
/// try coordinator.addPersistentStore(type: .inMemory, configuration: nil, at: nil, options: [:])
/// ```
///
/// Thread safety: shared by every context, on any thread; its mutable state (the stores)
/// is inside one `Mutex` and the save generation is atomic; stores are called outside the
/// lock. Rows read for objects are cached by the objects (`ManagedObject/faultRow`),
/// and the register counts of the contract are the stores' own.
public final class PersistentStoreCoordinator: Sendable {
    /// The model of every store and context of this coordinator.
    public let managedObjectModel: ManagedObjectModel

    struct State {
        var stores: [PersistentStore] = [] {
            didSet {
                let incremental = stores.compactMap { $0 as? IncrementalStore }
                // The stores every fetch goes to when none names its stores: all of them are
                // incremental and none is limited to a configuration (no cast, filter or array
                // per fetch).
                wholeModelStores = incremental.count == stores.count && stores.allSatisfy { $0.configurationName == nil }
                    ? incremental : nil
            }
        }
        /// ``stores`` as incremental stores, when every store is one and holds every entity.
        private(set) var wholeModelStores: [IncrementalStore]? = nil
    }

    // State below is protected by `state`.
    let state = Locked(State())

    /// Bumped by every save through this coordinator (and when a store is removed): a row an
    /// object cached (``ManagedObject/faultRow``) is used only if no save came after it.
    let saveGeneration = Atomic<UInt64>(0)

    /// The contexts on this coordinator that merge the others' saves
    /// (``ManagedObjectContext/automaticallyMergesChangesFromParent``), held weakly.
    let mergingContexts = Locked<[WeakContext]>([])

    /// Store classes by type name, shared by every coordinator.
    private static let storeTypes = Locked<[String: PersistentStore.Type]>([
        PersistentStore.StoreType.inMemory.rawValue: InMemoryStore.self
    ])

    /// Creates a coordinator for a model.
    public init(managedObjectModel: ManagedObjectModel) {
        self.managedObjectModel = managedObjectModel
    }

    // MARK: Store types

    /// Registers a store class under a type name, so ``addPersistentStore(type:configuration:at:options:)``
    /// can create it; `nil` removes the registration.
    public static func registerStoreClass(_ storeClass: PersistentStore.Type?, type: PersistentStore.StoreType) {
        storeTypes.withLock { $0[type.rawValue] = storeClass }
    }

    /// The registered store types and their classes.
    public static var registeredStoreTypes: [PersistentStore.StoreType: PersistentStore.Type] {
        storeTypes.withLock { types in
            Dictionary(uniqueKeysWithValues: types.map { (PersistentStore.StoreType($0.key), $0.value) })
        }
    }

    /// The store class registered for `type` (``registerStoreClass(_:type:)``), for its class
    /// methods (``PersistentStore/storedModel(at:)``, ``PersistentStore/destroyPersistentStore(at:)``).
    ///
    /// - Throws: ``ObjectGraphError/Code/unknownStoreType`` when none is.
    public static func storeClass(for type: PersistentStore.StoreType) throws -> PersistentStore.Type {
        guard let storeClass = storeTypes.withLock({ $0[type.rawValue] }) else {
            throw ObjectGraphError(
                .unknownStoreType, "No store class is registered for type \"\(type)\"; call registerStoreClass(_:type:) first.")
        }
        return storeClass
    }

    // MARK: Adding and removing stores

    /// The stores, in the order they were added.
    public var persistentStores: [PersistentStore] { state.withLock { $0.stores } }

    /// Creates a store of a registered type, loads its metadata and adds it.
    ///
    /// - Parameters:
    ///   - type: A registered store type, such as ``PersistentStore/StoreType/inMemory``.
    ///   - configuration: The model configuration whose entities the store holds; `nil` for all.
    ///   - url: The store's location, if it has one.
    ///   - options: Store options, such as ``PersistentStore/readOnlyOption``.
    /// - Throws: ``ObjectGraphError/Code/unknownStoreType``,
    ///   ``ObjectGraphError/Code/invalidArgument`` for an unknown configuration,
    ///   ``ObjectGraphError/Code/storeMismatch`` if a store at `url` is already added,
    ///   ``ObjectGraphError/Code/storeTypeMismatch`` if the store's metadata says another type
    ///   made it,
    ///   ``ObjectGraphError/Code/incompatibleModel`` naming every difference if the store's
    ///   metadata records version hashes other than this model's (an entity missing, added or
    ///   changed; nothing is written), or the store's own error.
    @discardableResult
    public func addPersistentStore(
        type: PersistentStore.StoreType, configuration: String? = nil, at url: URL? = nil,
        options: [String: AttributeValue] = [:]
    ) throws -> PersistentStore {
        do {
            return try addStore(type: type, configuration: configuration, at: url, options: options)
        } catch let error as ObjectGraphError where error.code == .incompatibleModel {
            // Lightweight migration by copy ([MIG-3]): with both options, read-write, a store
            // whose type says what model it was saved with is copied by the inferred mapping
            // into a new store swapped in, and then added.
            guard let url, options[PersistentStore.migratePersistentStoresAutomaticallyOption]?.boolValue == true,
                options[PersistentStore.inferMappingModelAutomaticallyOption]?.boolValue == true,
                options[PersistentStore.readOnlyOption]?.boolValue != true,
                let source = try Self.storeClass(for: type).storedModel(at: url)
            else { throw error }
            let mapping = try MappingModel.inferred(from: source, to: managedObjectModel)
            // Models that share no entity are not migrated: that would delete every object.
            guard mapping.mapsAnyEntity else { throw error }
            var copyOptions = options
            copyOptions[PersistentStore.migratePersistentStoresAutomaticallyOption] = nil
            copyOptions[PersistentStore.inferMappingModelAutomaticallyOption] = nil
            try MigrationManager(sourceModel: source, destinationModel: managedObjectModel)
                .migrateStore(at: url, type: type, options: copyOptions, mapping: mapping)
            return try addStore(type: type, configuration: configuration, at: url, options: options)
        }
    }

    private func addStore(
        type: PersistentStore.StoreType, configuration: String?, at url: URL?, options: [String: AttributeValue]
    ) throws -> PersistentStore {
        let storeClass = try Self.storeClass(for: type)
        if let configuration, managedObjectModel.configurations[configuration] == nil {
            throw ObjectGraphError(.invalidArgument, "The model has no configuration named \"\(configuration)\".")
        }
        if let url, persistentStore(for: url) != nil {
            throw ObjectGraphError(.storeMismatch, "A store at \(url.absoluteString) is already added to this coordinator.")
        }
        // A migration a crash interrupted is completed (or undone) first.
        if let url { try storeClass.finishInterruptedMigration(at: url) }
        let store = storeClass.init(persistentStoreCoordinator: self, configurationName: configuration, at: url, options: options)
        try store.loadMetadata()
        var metadata = store.metadata
        // A store records the type that made it: another type may not take it over.
        if let recorded = metadata[PersistentStore.storeTypeKey]?.stringValue, !recorded.isEmpty, recorded != store.type.rawValue {
            throw ObjectGraphError(
                .storeTypeMismatch,
                "The store at \(url?.absoluteString ?? "(no URL)") was made by a \(recorded) store and cannot be added as \(store.type.rawValue); add it with type \"\(recorded)\".")
        }
        if metadata[PersistentStore.storeUUIDKey]?.stringValue?.isEmpty ?? true {
            metadata[PersistentStore.storeUUIDKey] = .string(storeClass.identifierForNewStore(at: url))
        }
        metadata[PersistentStore.storeTypeKey] = .string(store.type.rawValue)
        // A store that records version hashes was saved with a model: it must be this one (no
        // entity missing, added or changed). One without any is new and takes this model's.
        if metadata.keys.contains(where: { $0.hasPrefix(PersistentStore.modelVersionHashKeyPrefix) }) {
            let differences = managedObjectModel.differences(ofConfiguration: configuration, fromStoreMetadata: metadata)
            // Nothing has been written: the store is left exactly as it was.
            if !differences.isEmpty { throw ObjectGraphError.incompatibleModel(differences, storeURL: url) }
        }
        // Every entity's hash, whatever the configuration: the store is then checked against
        // the whole model, when opened with this configuration or another.
        for entity in managedObjectModel.entities {
            metadata[PersistentStore.modelVersionHashKeyPrefix + entity.name] = .data(entity.versionHash)
        }
        if metadata != store.metadata {
            store.metadata = metadata
            // An empty save request asks the store to write its metadata now.
            if let incremental = store as? IncrementalStore, !store.isReadOnly {
                _ = try incremental.execute(SaveChangesRequest(), with: nil)
            }
        }
        let identifier = store.identifier
        try state.withLock { state in
            if state.stores.contains(where: { $0.identifier == identifier }) {
                throw ObjectGraphError(.storeMismatch, "A store with identifier \(identifier) is already added to this coordinator.")
            }
            state.stores.append(store)
        }
        store.didAdd(to: self)
        return store
    }

    /// Removes a store; objects from it can no longer be loaded or saved.
    public func remove(_ store: PersistentStore) throws {
        store.willRemove(from: self)
        try state.withLock { state in
            guard let index = state.stores.firstIndex(where: { $0 === store }) else {
                throw ObjectGraphError(.storeMismatch, "Store \(store.identifier) is not part of this coordinator.")
            }
            state.stores.remove(at: index)
        }
        // Rows objects cached from it are not used again: their faults go to the store.
        saveGeneration.add(1, ordering: .releasing)
    }

    /// The store added at a URL.
    public func persistentStore(for url: URL) -> PersistentStore? {
        state.withLock { $0.stores.first { $0.url?.standardizedFileURL == url.standardizedFileURL } }
    }

    /// The store with an identifier.
    public func persistentStore(withIdentifier identifier: String) -> PersistentStore? {
        state.withLock { $0.stores.first { $0.identifier == identifier } }
    }

    /// The URL of a store.
    public func url(for store: PersistentStore) -> URL? { store.url }

    // MARK: Metadata

    /// Reads the metadata of the store of a type at a URL, without adding it.
    public static func metadataForPersistentStore(type: PersistentStore.StoreType, at url: URL) throws -> [String: AttributeValue] {
        try storeClass(for: type).metadataForPersistentStore(at: url)
    }

    /// ``metadataForPersistentStore(type:at:)`` under Core Data's name
    /// (`metadataForPersistentStore(ofType:at:options:)`).
    public static func metadataForPersistentStore(ofType type: PersistentStore.StoreType, at url: URL, options: [String: AttributeValue] = [:]) throws -> [String: AttributeValue] {
        try metadataForPersistentStore(type: type, at: url)
    }

    /// ``setMetadata(_:forPersistentStoreOfType:at:)``, with Core Data's `options` argument.
    public static func setMetadata(
        _ metadata: [String: AttributeValue], forPersistentStoreOfType type: PersistentStore.StoreType, at url: URL,
        options: [String: AttributeValue]
    ) throws {
        try setMetadata(metadata, forPersistentStoreOfType: type, at: url)
    }

    /// Writes the metadata of the store of a type at a URL, without adding it.
    public static func setMetadata(_ metadata: [String: AttributeValue], forPersistentStoreOfType type: PersistentStore.StoreType, at url: URL) throws {
        try storeClass(for: type).setMetadata(metadata, forPersistentStoreAt: url)
    }

    /// The metadata of an added store.
    public func metadata(for store: PersistentStore) -> [String: AttributeValue] { store.metadata }

    /// Replaces the metadata of an added store; the store saves it with its next save.
    public func setMetadata(_ metadata: [String: AttributeValue], for store: PersistentStore) {
        var merged = metadata
        merged[PersistentStore.storeUUIDKey] = .string(store.identifier)
        merged[PersistentStore.storeTypeKey] = .string(store.type.rawValue)
        store.metadata = merged
    }

    /// Removes the store of a type at a URL, with its files.
    public static func destroyPersistentStore(at url: URL, type: PersistentStore.StoreType) throws {
        try storeClass(for: type).destroyPersistentStore(at: url)
    }

    /// Removes the store of `type` at `url` with its files (Core Data's
    /// `destroyPersistentStore(at:type:options:)`); a store of this coordinator at `url` is
    /// removed from it first.
    ///
    /// - Throws: ``ObjectGraphError/Code/unknownStoreType``, or the store's error (a store open
    ///   in another coordinator or process is not destroyed).
    public func destroyPersistentStore(at url: URL, type: PersistentStore.StoreType, options: [String: AttributeValue] = [:]) throws {
        let storeClass = try Self.storeClass(for: type)
        if let added = persistentStore(for: url) { try remove(added) }
        try storeClass.destroyPersistentStore(at: url)
    }

    /// Makes the store of `type` at `destination` a copy of the one at `source`, store UUID
    /// included (Core Data's `replacePersistentStore(at:destinationOptions:withPersistentStoreFrom:sourceOptions:type:)`):
    /// what was at `destination` is destroyed first. Neither may be added to this coordinator.
    ///
    /// - Throws: ``ObjectGraphError/Code/storeMismatch`` when one is added here,
    ///   ``ObjectGraphError/Code/invalidArgument`` when there is no store at `source`, or the
    ///   store's error.
    public func replacePersistentStore(
        at destination: URL, destinationOptions: [String: AttributeValue] = [:], withPersistentStoreFrom source: URL,
        sourceOptions: [String: AttributeValue] = [:], type: PersistentStore.StoreType
    ) throws {
        let storeClass = try Self.storeClass(for: type)
        for url in [destination, source] where persistentStore(for: url) != nil {
            throw ObjectGraphError(.storeMismatch, "The store at \(url.absoluteString) is added to this coordinator; remove it before replacing.")
        }
        guard destination.standardizedFileURL != source.standardizedFileURL else { return }
        try storeClass.replacePersistentStore(at: destination, withPersistentStoreFrom: source)
    }

    // MARK: Object IDs

    /// The object ID a URI from ``ManagedObjectID/uriRepresentation()`` names, if its
    /// store is added to this coordinator and its entity is in the model.
    public func managedObjectID(forURIRepresentation uri: URL) -> ManagedObjectID? {
        guard uri.scheme == "x-coredata", let components = URLComponents(url: uri, resolvingAgainstBaseURL: false) else { return nil }
        // Split the still-escaped path, so an escaped "/" inside a string reference stays put.
        let parts = components.percentEncodedPath.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard parts.count == 2, let entityName = parts[0].removingPercentEncoding,
            let entity = managedObjectModel.entitiesByName[entityName], let key = parts[1].first
        else { return nil }
        let body = String(parts[1].dropFirst())
        switch key {
        case "t":
            guard let uuid = UUID(uuidString: body) else { return nil }
            return ManagedObjectID(entity: entity, store: nil, kind: .temporary(uuid))
        case "p":
            guard let host = components.host, let store = persistentStore(withIdentifier: host) as? IncrementalStore,
                store.holds(entity), let reference = ReferenceObject(uriComponent: body)
            else { return nil }
            return store.newObjectID(for: entity, referenceObject: reference)
        default:
            return nil
        }
    }
}

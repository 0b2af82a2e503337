import Foundation
import Synchronization
import StrataSync

/// The base class of every store (Core Data's `NSPersistentStore`).
///
/// A store is created by a ``PersistentStoreCoordinator`` from the class registered
/// for its ``StoreType``, then asked to ``loadMetadata()``. Stores are shared by every
/// context of their coordinator, possibly on several threads, so subclasses must be
/// thread-safe.
///
/// Thread safety: `@unchecked Sendable` because an open class cannot be checked; the
/// base class's mutable state (metadata) is inside a `Mutex`, the rest is constant.
open class PersistentStore: @unchecked Sendable {
    /// The name of a store type, used to register and add stores.
    public struct StoreType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The type's name.
        public let rawValue: String
        /// Creates a store type from its name.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// Creates a store type from its name.
        public init(_ rawValue: String) { self.rawValue = rawValue }
        /// The type's name.
        public var description: String { rawValue }
        /// ``InMemoryStore``.
        public static let inMemory = StoreType("InMemory")
    }

    /// Metadata key holding the store type's name.
    public static let storeTypeKey = "NSStoreType"
    /// Metadata key holding the store identifier.
    public static let storeUUIDKey = "NSStoreUUID"
    /// Prefix of the metadata keys holding each entity's version hash (`NSStoreModelVersionHashes.<Entity>`).
    public static let modelVersionHashKeyPrefix = "NSStoreModelVersionHashes."
    /// Option key: open the store read-only (a ``AttributeValue/bool(_:)``).
    public static let readOnlyOption = "NSReadOnlyPersistentStoreOption"
    /// Option key: migrate a store written with an older model when it is added (a
    /// ``AttributeValue/bool(_:)``; Core Data's `NSMigratePersistentStoresAutomaticallyOption`).
    /// With ``inferMappingModelAutomaticallyOption`` too, a store that knows the model it was
    /// saved with (StrataStore keeps it in its model record) migrates lightweight: the mapping
    /// is ``MappingModel/inferred(from:to:)``. Off on a bare coordinator, on in a persistent
    /// container, as in Core Data. A store type that cannot migrate refuses a store written
    /// with another model whatever it says.
    public static let migratePersistentStoresAutomaticallyOption = "NSMigratePersistentStoresAutomaticallyOption"
    /// Option key: infer the mapping of such a migration (a ``AttributeValue/bool(_:)``; Core
    /// Data's `NSInferMappingModelAutomaticallyOption`). Needs
    /// ``migratePersistentStoresAutomaticallyOption``.
    public static let inferMappingModelAutomaticallyOption = "NSInferMappingModelAutomaticallyOption"

    // Constant after construction.
    /// The coordinator the store belongs to.
    public weak let persistentStoreCoordinator: PersistentStoreCoordinator?
    /// The configuration whose entities the store holds; `nil` for every entity.
    public let configurationName: String?
    /// The store's location, if it has one.
    public let url: URL?
    /// The options the store was added with.
    public let options: [String: AttributeValue]

    // State below is protected by `metadataLock`: the metadata, and the token object IDs
    // hold (made again when the identifier in the metadata changes).
    private let metadataLock = Locked<(metadata: [String: AttributeValue], token: StoreToken?, tokens: [StoreToken])>(([:], nil, []))
    /// ``idToken`` as published for readers that take no lock (a fault, a fetched row); `nil`
    /// until made and after the identifier changes. Every token published stays alive in the
    /// locked state's `tokens`, so an unretained one read here stays valid.
    private let publishedToken = Atomic<Unmanaged<StoreToken>?>(nil)

    /// Creates a store; the coordinator then calls ``loadMetadata()``.
    public required init(
        persistentStoreCoordinator: PersistentStoreCoordinator?, configurationName: String?,
        at url: URL?, options: [String: AttributeValue] = [:]
    ) {
        self.persistentStoreCoordinator = persistentStoreCoordinator
        self.configurationName = configurationName
        self.url = url
        self.options = options
    }

    /// The store's type; by default the name of its class.
    open var type: StoreType { StoreType(String(describing: Swift.type(of: self))) }

    /// Whether the store refuses saves.
    open var isReadOnly: Bool { options[Self.readOnlyOption]?.boolValue ?? false }

    /// The store's identifier, kept in its metadata; object URIs name it.
    public var identifier: String { idToken.identifier }

    /// The store's metadata.
    public var metadata: [String: AttributeValue] {
        get { metadataLock.withLock { $0.metadata } }
        set {
            metadataLock.withLock { state in
                let old = state.metadata[Self.storeUUIDKey]
                state.metadata = newValue
                if newValue[Self.storeUUIDKey] != old {
                    state.token = nil
                    publishedToken.store(nil, ordering: .releasing)
                }
            }
        }
    }

    /// A maker of this store's object IDs that takes no lock per ID, for a store's hot
    /// paths (a fetch making thousands). It makes the IDs ``IncrementalStore/newObjectID(for:referenceObject:)``
    /// would, with the identifier the store has now.
    package var objectIDMaker: ObjectIDMaker { ObjectIDMaker(token: idToken) }

    /// The identity object IDs of this store hold, made once per identifier.
    var idToken: StoreToken {
        if let token = publishedToken.load(ordering: .acquiring) { return token.takeUnretainedValue() }
        return metadataLock.withLock { state in
            if let token = state.token { return token }
            let token = StoreToken(identifier: state.metadata[Self.storeUUIDKey]?.stringValue ?? "", store: self)
            state.token = token
            state.tokens.append(token)
            publishedToken.store(Unmanaged.passUnretained(token), ordering: .releasing)
            return token
        }
    }

    /// Reads the store's metadata and checks the location is usable; throws if not.
    ///
    /// A store that sets no identifier gets one from ``identifierForNewStore(at:)``.
    open func loadMetadata() throws {}

    /// The identifier for a new store at `url`; a new UUID by default.
    open class func identifierForNewStore(at url: URL?) -> String { UUID().uuidString }

    /// Reads the metadata of the store at `url` without adding it to a coordinator.
    open class func metadataForPersistentStore(at url: URL) throws -> [String: AttributeValue] {
        throw ObjectGraphError(.unsupportedRequest, "\(self) cannot read metadata without opening the store at \(url.path).")
    }

    /// Writes the metadata of the store at `url` without adding it to a coordinator.
    open class func setMetadata(_ metadata: [String: AttributeValue], forPersistentStoreAt url: URL) throws {
        throw ObjectGraphError(.unsupportedRequest, "\(self) cannot write metadata without opening the store at \(url.path).")
    }

    /// The model the store at `url` was last saved with, for a store type that keeps it
    /// (StrataStore and the binary store do, in their model records); `nil` by default. With
    /// it, a coordinator adding the store with another model and the migrate options migrates
    /// the store by copy when it cannot migrate in place (``MigrationManager``).
    open class func storedModel(at url: URL) throws -> ManagedObjectModel? { nil }

    /// Removes the store at `url` and its files. The default removes the file or directory at
    /// `url`, if there is one (a store of another kind overrides it).
    open class func destroyPersistentStore(at url: URL) throws {
        guard url.isFileURL, FileManager.default.fileExists(atPath: url.path) else { return }
        do {
            try FileManager.default.removeItem(at: url)
        } catch {
            throw ObjectGraphError(.invalidArgument, "Could not remove the store at \(url.path): \(error)")
        }
    }

    /// Makes the store at `destination` a copy of the store at `source` (whatever was at
    /// `destination` is destroyed first). The default copies the file or directory at `source`;
    /// a store that must not be copied while open elsewhere overrides it.
    open class func replacePersistentStore(at destination: URL, withPersistentStoreFrom source: URL) throws {
        guard source.isFileURL, destination.isFileURL, FileManager.default.fileExists(atPath: source.path) else {
            throw ObjectGraphError(.invalidArgument, "There is no store at \(source.absoluteString) to copy.")
        }
        try destroyPersistentStore(at: destination)
        do {
            try FileManager.default.copyItem(at: source, to: destination)
        } catch {
            throw ObjectGraphError(.invalidArgument, "Could not copy the store at \(source.path) to \(destination.path): \(error)")
        }
    }

    /// Called after the coordinator added the store.
    open func didAdd(to coordinator: PersistentStoreCoordinator) {}

    /// Called before the coordinator removes the store.
    open func willRemove(from coordinator: PersistentStoreCoordinator) {}

    /// The entities this store holds: its configuration's, or the whole model's.
    public var entities: [EntityDescription] {
        persistentStoreCoordinator?.managedObjectModel.entities(forConfigurationName: configurationName) ?? []
    }

    /// Whether this store holds instances of `entity`.
    public func holds(_ entity: EntityDescription) -> Bool {
        guard let configurationName else { return true }
        return persistentStoreCoordinator?.managedObjectModel.configurations[configurationName]?.contains(entity.name) ?? false
    }
}

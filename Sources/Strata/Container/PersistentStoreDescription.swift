import Foundation
import StrataSync

/// How a ``PersistentContainer`` adds one store (Core Data's `NSPersistentStoreDescription`):
/// its type, location, configuration and options.
///
/// For example:
///
/// ```swift
/// let description = PersistentStoreDescription(url: URL(filePath: "/var/lib/app/Library.strata"))
/// description.setOption(.string("normal"), forKey: StrataStore.durabilityOption)
/// container.persistentStoreDescriptions = [description]
/// ```
///
/// Thread safety: a reference type, as in Core Data, whose properties are behind a lock, so
/// it may be handed to the completion handler of an asynchronous load.
public final class PersistentStoreDescription: Sendable, CustomStringConvertible {
    private struct State {
        var type: PersistentStore.StoreType = .strata
        var configuration: String?
        var url: URL?
        var options: [String: AttributeValue] = [:]
        var shouldAddStoreAsynchronously = false
        var migrationPlan: MigrationPlan?
    }

    // Every property lives here.
    private let state: Locked<State>

    /// A description of a store of type `PersistentStore/StoreType/strata` at `url`.
    public init(url: URL) {
        var state = State()
        state.url = url
        self.state = Locked(state)
        shouldMigrateStoreAutomatically = true
        shouldInferMappingModelAutomatically = true
    }

    /// A description of a store of type `PersistentStore/StoreType/strata` without a location
    /// yet; set ``url`` (or ``type`` to a store type that needs none) before loading it.
    public init() {
        state = Locked(State())
        shouldMigrateStoreAutomatically = true
        shouldInferMappingModelAutomatically = true
    }

    /// The store's type; `PersistentStore/StoreType/strata` by default.
    public var type: PersistentStore.StoreType {
        get { state.withLock { $0.type } }
        set { state.withLock { $0.type = newValue } }
    }

    /// The model configuration whose entities the store holds; `nil` for every entity.
    public var configuration: String? {
        get { state.withLock { $0.configuration } }
        set { state.withLock { $0.configuration = newValue } }
    }

    /// Where the store is.
    public var url: URL? {
        get { state.withLock { $0.url } }
        set { state.withLock { $0.url = newValue } }
    }

    /// The options the store is added with.
    public var options: [String: AttributeValue] { state.withLock { $0.options } }

    /// Sets an option (`nil` removes it), such as `PersistentStore/readOnlyOption` or
    /// `StrataStore.durabilityOption`.
    public func setOption(_ value: AttributeValue?, forKey key: String) {
        state.withLock { $0.options[key] = value }
    }

    /// Whether the store is opened read-only (the `PersistentStore/readOnlyOption` option).
    public var isReadOnly: Bool {
        get { options[PersistentStore.readOnlyOption]?.boolValue ?? false }
        set { setOption(newValue ? .bool(true) : nil, forKey: PersistentStore.readOnlyOption) }
    }

    /// Whether ``PersistentContainer/loadPersistentStores(completionHandler:)`` adds the store
    /// on a background queue and calls its handler there; `false` by default (added at once).
    public var shouldAddStoreAsynchronously: Bool {
        get { state.withLock { $0.shouldAddStoreAsynchronously } }
        set { state.withLock { $0.shouldAddStoreAsynchronously = newValue } }
    }

    /// Whether an older store is migrated to the model when added (the
    /// `PersistentStore/migratePersistentStoresAutomaticallyOption` option); `true` by
    /// default in a description, as in Core Data's container. With
    /// ``shouldInferMappingModelAutomatically``, a StrataStore saved with an earlier model
    /// migrates lightweight changes in place when the container loads it (SPEC.md [MIG-1]).
    public var shouldMigrateStoreAutomatically: Bool {
        get { options[PersistentStore.migratePersistentStoresAutomaticallyOption]?.boolValue ?? false }
        set { setOption(.bool(newValue), forKey: PersistentStore.migratePersistentStoresAutomaticallyOption) }
    }

    /// The model versions of the store and the stages between them (SwiftData's schema
    /// migration plan): loading the store first brings it from whichever version it was
    /// saved with to the plan's last, stage by stage (`MigrationPlan/migrateStore(at:type:options:)`);
    /// the plan's last model should be the container's. `nil` by default: only lightweight
    /// changes migrate, as the migrate options say.
    public var migrationPlan: MigrationPlan? {
        get { state.withLock { $0.migrationPlan } }
        set { state.withLock { $0.migrationPlan = newValue } }
    }

    /// Whether the mapping of a migration is inferred (the
    /// `PersistentStore/inferMappingModelAutomaticallyOption` option); `true` by default in a
    /// description; it needs ``shouldMigrateStoreAutomatically``.
    public var shouldInferMappingModelAutomatically: Bool {
        get { options[PersistentStore.inferMappingModelAutomaticallyOption]?.boolValue ?? false }
        set { setOption(.bool(newValue), forKey: PersistentStore.inferMappingModelAutomaticallyOption) }
    }

    /// The type, the location and the options.
    public var description: String {
        let state = state.withLock { $0 }
        let options = state.options.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", ")
        return "<\(state.type) store at \(state.url?.path ?? "(no location)")\(state.configuration.map { ", configuration \($0)" } ?? "")\(options.isEmpty ? "" : ", \(options)")>"
    }
}

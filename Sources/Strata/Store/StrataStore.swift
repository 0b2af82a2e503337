import Foundation
import ObjectGraph
import StrataEngine
import Synchronization
import StrataSync

/// The incremental store on StrataEngine: Core Data's contract on a log-structured engine.
///
/// For example:
///
/// ```swift
/// StrataStore.register()
/// let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
/// try coordinator.addPersistentStore(type: .strata, at: URL(fileURLWithPath: "/var/lib/app/store"))
/// ```
///
/// The URL names a directory (created if missing) or a zero-length file, which becomes the
/// store directory. Options: ``durabilityOption`` (`"full"`, the default; `"normal"`;
/// `"none"`), ``compactionOption`` (`false` stops the background compactor),
/// ``rowCacheBytesOption``, ``repairOption`` (rebuild a lost metadata record),
/// ``indexBuildOption`` and ``indexBuildBatchOption`` (how indexes a new model adds are
/// built), and Core Data's migrate options (a changed model migrates lightweight, in place:
/// SPEC.md [MIG-1]). Each save
/// is one engine transaction; rows a context has registered stay pinned in the engine's row
/// cache until it unregisters them.
///
/// Thread safety: `@unchecked Sendable` as an `IncrementalStore` subclass; the engine is
/// thread-safe, `saveLock` serialises saves (version checks and the commit), and `state`
/// holds the counters.
open class StrataStore: IncrementalStore, @unchecked Sendable {
    /// Durability of saves: `"full"` (default), `"normal"` or `"none"`.
    public static let durabilityOption = "StrataDurability"
    /// `false` turns the background compactor off. Default `true`.
    public static let compactionOption = "StrataCompaction"
    /// Bytes of unpinned rows the engine's cache keeps. Default 64 MiB.
    public static let rowCacheBytesOption = "StrataRowCacheBytes"

    struct State {
        var shared: SharedEngine?
        var unbalancedUnregisters: [ObjectGraphError] = []
        /// Whether the store's model record ([ROW-5]) is known to describe this store's model
        /// (checked by the first save after loading).
        var modelRecordCurrent = false
        /// The metadata record last read, with the sequence of the entry it came from: counts
        /// read the record once per save, not once per count.
        var metadataCache: (sequence: UInt64, record: MetadataRecord)?
        /// The row layouts of the coordinator's model ([ROW-1]), made once.
        var layout: StoreLayout?
        /// The background index build of this load ([IDX-S9]), if one was started.
        var indexBuild: IndexBuildTask?
        /// While a build runs: the attributes whose index entries the store holds, which a
        /// model record a save writes must name instead of the model's ([IDX-S9]).
        var indexEntriesOnDisk: Set<String>?
        /// While a build runs: the indexes it has not finished, as `root NUL attribute`; no
        /// fetch uses them ([IDX-S9]).
        var unbuiltIndexes: Set<String> = []
    }
    /// The shared engine while the store is loaded.
    let state = Locked(State())
    /// Row-key prefixes ([KEY-1]) by entity instance; a cache, protected by its own lock. The
    /// entry holds its entity, so the identifier cannot be reused by another one.
    let rowPrefixes = Locked<[ObjectIdentifier: (entity: EntityDescription, prefix: [UInt8])]>([:])
    /// The register counts of this store's rows, which pin them in the engine's cache (the
    /// engine asks them before evicting); kept across a reopen of the engine.
    let rowPins = RowPins()
    /// Whether the store's index entries are those of the coordinator's model ([IDX-S1]), so
    /// fetches may use them: `false` after a read-only load with a model that indexes other
    /// attributes than the store's ([IDX-S6] needs a write to rebuild them); fetches then scan.
    let indexesServeFetches = Atomic<Bool>(true)
    /// Whether a background index build runs ([IDX-S9]): a fetch then reads which indexes it
    /// has not finished (``State/unbuiltIndexes``).
    let indexBuildRunning = Atomic<Bool>(false)
    /// Relationship-key prefixes ([REL-1]) by relationship instance; a cache, as ``rowPrefixes``.
    let relationshipPrefixes = Locked<[ObjectIdentifier: (relationship: RelationshipDescription, prefix: [UInt8])]>([:])
    /// The fetch plans of recent request shapes ([FETCH-S18]), by entity and predicate. A cache,
    /// protected by its own lock (taken for a lookup or an insert, never while compiling).
    let fetchPlans = Locked<[EntityPredicate: FetchPlan]>([:])

    /// Registers this class for `PersistentStore/StoreType/strata`. Call once at start-up.
    public static func register() {
        PersistentStoreCoordinator.registerStoreClass(StrataStore.self, type: .strata)
    }

    /// `PersistentStore/StoreType/strata`.
    open override var type: StoreType { .strata }

    /// How many saves are submitted to the engine and not yet committed ([SAVE-3]).
    var savesInFlight: Int { state.withLock { $0.shared }?.saveLock.withLock { $0.saves.count } ?? 0 }

    /// The shared engine, or an error if the store is not loaded.
    func sharedEngine() throws -> SharedEngine {
        guard let shared = state.withLock({ $0.shared }) else {
            throw ObjectGraphError(.noPersistentStore, "StrataStore at \(url?.path ?? "?") is not loaded.")
        }
        return shared
    }

    /// The open engine, or an error if the store is not loaded.
    func openEngine() throws -> Engine { try sharedEngine().engine }

    /// Opens (or creates) the store directory and reads the metadata record.
    ///
    /// Before anything is written, the coordinator's model is checked against the store's
    /// (SPEC.md [OPEN-1]); a model that differs only in indexing then has the indexes rebuilt
    /// ([IDX-S6]).
    ///
    /// - Throws: `ObjectGraphError/Code/storeLocked` if another process has the store open,
    ///   `ObjectGraphError/Code/storeOpenFailed` for a path that is not a Strata store,
    ///   `ObjectGraphError/Code/incompatibleModel` naming every difference when the store
    ///   was saved with another model (nothing is written),
    ///   `ObjectGraphError/Code/storeCorrupted` naming file and offset for damage, and for a
    ///   store that holds rows or keys but has lost its metadata record (SPEC.md [META-1]; it
    ///   says to run `strata fsck --repair`; nothing is written) unless ``repairOption`` is set.
    open override func loadMetadata() throws {
        guard let url, url.isFileURL else {
            throw ObjectGraphError(.storeOpenFailed, "StrataStore needs a file URL naming its directory.")
        }
        var options = EngineOptions()
        switch self.options[Self.durabilityOption]?.stringValue ?? "full" {
        case "full": options.durability = .full
        case "normal": options.durability = .normal
        case "none": options.durability = .none
        case let other: throw ObjectGraphError(.invalidArgument, "\(Self.durabilityOption) must be full, normal or none, not \"\(other)\".")
        }
        if self.options[Self.compactionOption]?.boolValue == false { options.compaction.automatic = false }
        if case .int64(let bytes)? = self.options[Self.rowCacheBytesOption] { options.rowCacheBytes = Int(bytes) }
        options.readOnly = isReadOnly
        options = engineOptions(options)
        let shared = try Self.sharedEngine(at: url, options: options)
        var record: MetadataRecord
        var countsFromRows: (sequence: UInt64, record: MetadataRecord)?
        var loadedLayout: StoreLayout?
        // [IDX-S9] Index entries the model adds, built in the background once loaded (or left
        // to a later load when the build is deferred).
        var backgroundBuild: IndexBuild?
        let deferredBuild = self.options[Self.indexBuildOption]?.stringValue == "deferred"
        do {
            var snapshot = try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try shared.engine.snapshot() }
            let model = persistentStoreCoordinator?.managedObjectModel
            var repairing = false
            if snapshot.sequence(of: KeyLayout.metadataKey) == nil {
                // [META-1] Rows or keys without a metadata record: a damaged StrataStore, not a
                // new one. Only a repair with the application's model may rebuild the record.
                let survey = try StoreSurvey.survey(snapshot)
                if survey.isStrataStore {
                    guard self.options[Self.repairOption]?.boolValue == true, !isReadOnly, model != nil else {
                        throw Self.lostMetadataError(survey, at: url, readOnly: isReadOnly)
                    }
                    repairing = true
                }
            }
            record = try Self.record(in: snapshot)
            if let model {
                // [OPEN-1] The model must be the store's before anything is written, unless the
                // options ask for a lightweight migration ([MIG-1]), made in place.
                var migrated: StoreLayout?
                // The model record, decoded once for every step below (again after a migration).
                var modelRecord = try Self.modelRecord(in: snapshot)
                let differences = try Self.modelDifferences(
                    of: model, configuration: configurationName, record: record, modelRecord: modelRecord, in: snapshot)
                if !differences.isEmpty {
                    guard migratesAutomatically, !repairing, let stored = modelRecord else {
                        throw ObjectGraphError.incompatibleModel(differences, storeURL: url)
                    }
                    if isReadOnly {
                        // Read in memory through the new layouts; nothing is written.
                        let plan = try Self.planLightweightMigration(from: stored, to: model, in: snapshot, url: url)
                        guard plan.batch.isEmpty else {
                            throw ObjectGraphError(
                                .migrationFailed,
                                "The StrataStore at \(url.path) is opened read-only, and migrating it to the model deletes or moves \(plan.batch.count) keys (a removed entity or relationship, a renamed relationship); open it read-write once to migrate it. Nothing was written.")
                        }
                        migrated = plan.layout
                        record.metadata = Self.migratedMetadata(record.metadata, to: model)
                        record.rowCounts = Self.migratedCounts(record.rowCounts, mapping: plan.mapping)
                        if let sequence = snapshot.sequence(of: KeyLayout.metadataKey) { countsFromRows = (sequence, record) }
                    } else {
                        migrated = try Self.migrateLightweight(in: shared, from: stored, to: model, url: url)
                        snapshot = try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try shared.engine.snapshot() }
                        record = try Self.record(in: snapshot)
                        modelRecord = try Self.modelRecord(in: snapshot)
                    }
                }
                loadedLayout = try migrated ?? Self.storeLayout(for: model, record: modelRecord)
                if isReadOnly {
                    indexesServeFetches.store(try Self.indexesAreCurrent(for: model, in: snapshot), ordering: .relaxed)
                    // [META-3] A record rebuilt without a model counts no rows: a read-only load
                    // counts them from the rows' headers, in memory.
                    if let sequence = snapshot.sequence(of: KeyLayout.metadataKey), !Self.hasVersionHashes(record),
                        try mappingEngineErrors("read the model record", { () throws(StoreError) in try snapshot.get(KeyLayout.modelKey) }) == nil
                    {
                        var counted = record
                        counted.rowCounts = try Self.rowCounts(of: StoreSurvey.survey(snapshot), model: model)
                        countsFromRows = (sequence, counted)
                    }
                } else {
                    if !repairing, self.options[Self.indexBuildOption]?.stringValue != "synchronous" {
                        backgroundBuild = try Self.plannedIndexBuild(for: model, record: modelRecord, in: snapshot)
                        // [SAVE-4] Entries of constrained attributes are built in the background
                        // with the rest (saves that check a constraint wait for the build), or
                        // now when the build is deferred.
                        if let build = backgroundBuild, !build.constrained.isEmpty, let loadedLayout {
                            backgroundBuild = deferredBuild
                                ? try Self.buildConstrainedEntries(build, shared: shared, layout: loadedLayout, batchRows: indexBuildBatchRows)
                                : build.constrainedInBackground()
                        }
                    }
                    if backgroundBuild == nil {
                        _ = try Self.reconcile(in: shared, model: model, layout: loadedLayout, force: repairing)
                    }
                    indexesServeFetches.store(true, ordering: .relaxed)
                    if repairing {
                        snapshot = try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try shared.engine.snapshot() }
                        record = try Self.record(in: snapshot)
                    }
                }
            }
        } catch {
            shared.release()
            throw error
        }
        let previous = state.withLock { state -> SharedEngine? in
            defer {
                state.shared = shared
                state.modelRecordCurrent = false
                state.metadataCache = countsFromRows
                state.layout = loadedLayout
            }
            return state.shared
        }
        if previous?.engine !== shared.engine {
            shared.engine.addPinSource(rowPins)
            previous?.engine.removePinSource(rowPins)
        }
        previous?.release()
        metadata = record.metadata
        if !isReadOnly, let loadedLayout { shared.engine.setCompactionRewriter(Self.compactionRewriter(loadedLayout)) }
        if let backgroundBuild, let loadedLayout {
            startIndexBuild(
                backgroundBuild, shared: shared, layout: loadedLayout,
                rowsTotal: Self.rowsRead(by: backgroundBuild, counts: record.rowCounts, layout: loadedLayout),
                checksConstraints: !backgroundBuild.constrainedNames.isEmpty,
                deferred: deferredBuild)
        }
    }

    /// The engine options ``loadMetadata()`` opens the engine with, given those the store's
    /// options chose (durability, compaction, row cache, read-only). Override it in a subclass
    /// to set what the store's options do not carry: the engine's logger
    /// (`EngineOptions/logger`), its metrics factory, cache sizes. For example:
    ///
    /// ```swift
    /// final class LoggedStore: StrataStore {
    ///     override func engineOptions(_ options: EngineOptions) -> EngineOptions {
    ///         var options = options
    ///         options.logger = Logger(label: "myapp.store")
    ///         return options
    ///     }
    /// }
    /// ```
    ///
    /// The tests open stores on a `FaultInjectingFileSystem` this way too.
    open func engineOptions(_ options: EngineOptions) -> EngineOptions { options }

    /// The engine of the store at `url`, shared with this process's other users of it; a first
    /// acquire starts references after the metadata record's next reference ([KEY-3]).
    static func sharedEngine(at url: URL, options: EngineOptions = EngineOptions()) throws -> SharedEngine {
        try SharedEngine.acquire(path: url.path, options: options) { engine in
            try record(in: try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try engine.snapshot() }).nextReference
        }
    }

    /// The metadata of the store at `url`, read without adding it to a coordinator (shares the
    /// engine if this process has the store open).
    ///
    /// - Throws: `ObjectGraphError/Code/storeLocked` if another process has it open.
    open override class func metadataForPersistentStore(at url: URL) throws -> [String: AttributeValue] {
        let shared = try sharedEngine(at: url)
        defer { shared.release() }
        let snapshot = try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try shared.engine.snapshot() }
        try refuseLostMetadata(in: snapshot, at: url)
        return try record(in: snapshot).metadata
    }

    /// The model the store at `url` was last saved with: its model record's current version
    /// ([ROW-5]); `nil` when it has none (or it does not decode).
    ///
    /// - Throws: `ObjectGraphError/Code/storeLocked` if another process has it open.
    open override class func storedModel(at url: URL) throws -> ManagedObjectModel? {
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        let shared = try sharedEngine(at: url)
        defer { shared.release() }
        return try modelRecord(in: try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try shared.engine.snapshot() })?.current.model
    }

    /// Removes the store directory at `url`, after taking its lock: a store open in this
    /// process or another is not destroyed (`ObjectGraphError/Code/storeLocked`), nor is a
    /// directory that is not a Strata store (`ObjectGraphError/Code/invalidArgument`).
    open override class func destroyPersistentStore(at url: URL) throws {
        let path = url.path
        guard FileManager.default.fileExists(atPath: path) else { return }
        try withStoreLock(path, doing: "destroy") { try FileManager.default.removeItem(at: url) }
    }

    /// Copies the store directory at `source` over `destination` (destroyed first), holding
    /// both stores' locks: neither may be open in this process or another.
    open override class func replacePersistentStore(at destination: URL, withPersistentStoreFrom source: URL) throws {
        guard FileManager.default.fileExists(atPath: source.path) else {
            throw ObjectGraphError(.invalidArgument, "There is no Strata store at \(source.path) to copy.")
        }
        try withStoreLock(source.path, doing: "copy") {
            try destroyPersistentStore(at: destination)
            try FileManager.default.copyItem(at: source, to: destination)
            try? FileManager.default.removeItem(at: destination.appendingPathComponent("LOCK"))
        }
    }

    /// Runs `body` holding the engine lock of the store directory at `path`, which must look
    /// like a Strata store (a MANIFEST, or nothing but a LOCK).
    private static func withStoreLock(_ path: String, doing: String, _ body: () throws -> Void) throws {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        guard entries.contains("MANIFEST") || entries.allSatisfy({ $0 == "LOCK" }) else {
            throw ObjectGraphError(.invalidArgument, "\(path) is not a Strata store (it has no MANIFEST); nothing was changed.")
        }
        guard !SharedEngine.isOpen(path: path) else {
            throw ObjectGraphError(.storeLocked, "The store at \(path) is open in this process; remove it from its coordinators to \(doing) it.")
        }
        let lock = try mappingEngineErrors("lock the store at \(path) to \(doing) it") { () throws(StoreError) in
            try PosixFileSystem().lock(path + "/LOCK")
        }
        defer { lock.unlock() }
        do {
            try body()
        } catch let error as ObjectGraphError {
            throw error
        } catch {
            throw ObjectGraphError(.storeIOFailed, "Could not \(doing) the store at \(path): \(error)")
        }
    }

    /// [META-1] Throws ``ObjectGraphError/Code/storeCorrupted`` when `snapshot` holds rows or
    /// keys but no metadata record.
    static func refuseLostMetadata(in snapshot: Snapshot, at url: URL) throws {
        guard snapshot.sequence(of: KeyLayout.metadataKey) == nil else { return }
        let survey = try StoreSurvey.survey(snapshot)
        if survey.isStrataStore { throw lostMetadataError(survey, at: url, readOnly: false) }
    }

    /// Replaces the metadata of the store at `url`, in one engine transaction.
    open override class func setMetadata(_ metadata: [String: AttributeValue], forPersistentStoreAt url: URL) throws {
        let shared = try sharedEngine(at: url)
        defer { shared.release() }
        try shared.withSavesSettled { _ in
            let snapshot = try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try shared.engine.snapshot() }
            // A record written over a lost one would start references from 1 again.
            try refuseLostMetadata(in: snapshot, at: url)
            var record = try self.record(in: snapshot)
            record.metadata = metadata
            var batch = WriteBatch()
            batch.put(KeyLayout.metadataKey, record.encode())
            _ = try mappingEngineErrors("write the metadata") { () throws(StoreError) in try shared.engine.commit(batch) }
        }
    }

    /// Gives the engine back when the coordinator removes the store (the last store using it
    /// closes it).
    open override func willRemove(from coordinator: PersistentStoreCoordinator) {
        releaseEngine()
    }

    deinit { releaseEngine() }

    /// Closes the engine and opens the store again from its files (when no other store in
    /// this process shares the engine; otherwise the shared engine stays open). The register
    /// counts are the store's, so registered rows stay pinned in the reopened engine (tests use
    /// this to read back every save from disk).
    open func reopenStorage() throws {
        releaseEngine()
        try loadMetadata()
    }

    private func releaseEngine() {
        cancelIndexBuild()
        let shared = state.withLock { state -> SharedEngine? in
            defer { state.shared = nil }
            return state.shared
        }
        shared?.engine.removePinSource(rowPins)
        shared?.release()
    }

    /// The engine under this store (for tools, tests and statistics).
    public var storageEngine: Engine? { state.withLock { $0.shared?.engine } }

    // MARK: The contract

    /// Everything: fetches go through `FetchRequest/apply(to:objectID:)` on the store's rows,
    /// which computes grouping, aggregates, having and distinct results.
    open override var fetchCapabilities: FetchCapabilities { .all }

    /// Executes fetch and save requests; any other request throws
    /// `ObjectGraphError/Code/unsupportedRequest`.
    open override func execute(_ request: any PersistentStoreRequest, with context: ManagedObjectContext?) throws -> PersistentStoreResult {
        try executeRequest(request, with: context)
    }

    /// The row's attributes and to-one destinations, with its version (from the engine's row
    /// cache when the row is pinned or recently read).
    open override func newValuesForObject(with objectID: ManagedObjectID, with context: ManagedObjectContext) throws -> IncrementalStoreNode {
        try node(for: objectID)
    }

    /// The stored destinations of one relationship, in order.
    open override func newValue(
        forRelationship relationship: RelationshipDescription, forObjectWith objectID: ManagedObjectID,
        with context: ManagedObjectContext?
    ) throws -> RelationshipValue {
        try storedDestinations(of: relationship, for: objectID)
    }

    // MARK: IDs

    /// Reserves one new integer reference per object, in order. References are persisted with
    /// the next save; a crash before it leaves a harmless gap.
    open override func obtainPermanentIDs(for objects: [ManagedObject]) throws -> [ManagedObjectID] {
        let first = try sharedEngine().nextReference.withLock { next in
            defer { next += Int64(objects.count) }
            return next
        }
        return objects.enumerated().map { index, object in
            newObjectID(for: object.entity, referenceObject: .int64(first + Int64(index)))
        }
    }

    func integerReference(_ objectID: ManagedObjectID) throws -> Int64 {
        // An ID this store made: its token compared, no weak load of the store.
        if let reference = objectID.integerReference(madeLike: objectIDMaker) { return reference }
        guard case .int64(let reference) = try referenceObject(for: objectID) else {
            throw ObjectGraphError(.invalidArgument, "\(objectID) does not have an integer reference.", objectID: objectID)
        }
        return reference
    }

    /// The row layouts of the coordinator's model, made on first use. The coordinator and its
    /// model are fixed for the store's life (both `let`), so a layout made once stays valid:
    /// later calls take neither the coordinator nor the model.
    func storeLayout() throws -> StoreLayout {
        if let layout = state.withLock({ $0.layout }) { return layout }
        let model = try model()
        let layout = try StoreLayout(model: model)
        state.withLock { $0.layout = layout }
        return layout
    }

    /// The key of the row of `objectID`: the hierarchy's row prefix and the reference, from
    /// `layout` (the store's layout when `nil`), or from ``rowPrefix(of:)`` for an entity
    /// object of another model.
    func rowKey(_ objectID: ManagedObjectID, layout: StoreLayout? = nil) throws -> [UInt8] {
        let reference = try integerReference(objectID)
        let entity = objectID.entity
        // With the store's layout: its prefix, no lock, one allocation.
        if let key = try (layout ?? storeLayout()).rowKey(of: entity, reference: reference) { return key }
        var key = rowPrefix(of: entity)
        KeyLayout.appendReference(reference, to: &key)
        return key
    }

    /// The key space ([KEY-2]) of an entity's hierarchy in this store.
    func keySpace(of entity: EntityDescription) -> String {
        (try? storeLayout())?.keySpace(of: entity) ?? entity.rootEntityName
    }

    /// The row prefix of an entity's hierarchy ([KEY-1]), cached per entity instance.
    func rowPrefix(of entity: EntityDescription) -> [UInt8] {
        let key = ObjectIdentifier(entity)
        if let prefix = rowPrefixes.withLock({ $0[key]?.prefix }) { return prefix }
        let prefix = KeyLayout.rowPrefix(root: keySpace(of: entity))
        rowPrefixes.withLock { $0[key] = (entity, prefix) }
        return prefix
    }

    /// The prefix of `relationship`'s keys ([REL-1]) in the hierarchy of `owner`, the entity
    /// that has it; cached per relationship instance like ``rowPrefix(of:)``.
    func relationshipPrefix(_ relationship: RelationshipDescription, owner: EntityDescription) -> [UInt8] {
        let key = ObjectIdentifier(relationship)
        if let prefix = relationshipPrefixes.withLock({ $0[key]?.prefix }) { return prefix }
        let prefix = (try? storeLayout())?.relationshipPrefix(relationship, owner: owner)
            ?? RelationshipKeys.relationshipPrefix(root: (relationship.entity ?? owner).rootEntityName, relationship: relationship.name)
        relationshipPrefixes.withLock { $0[key] = (relationship, prefix) }
        return prefix
    }

    /// How a destination is stored in a row or a relationship key ([ROW-3]): its entity's
    /// number in `layout` and its integer reference.
    ///
    /// - Throws: ``ObjectGraphError/Code/unknownEntity`` for an entity the store's model does
    ///   not have; ``ObjectGraphError/Code/invalidArgument`` for an ID of another store.
    func storedObject(_ id: ManagedObjectID, layout: StoreLayout) throws -> StoredObject {
        guard let number = layout.number(of: id.entity) else {
            throw ObjectGraphError(.unknownEntity, "\(id) is of an entity the store's model does not have.", entityName: id.entityName, objectID: id)
        }
        return StoredObject(entity: number, reference: try integerReference(id))
    }

    /// The prefix of one owner's keys of `relationship`.
    func ownerPrefix(_ relationship: RelationshipDescription, owner: EntityDescription, reference: Int64) -> [UInt8] {
        var prefix = relationshipPrefix(relationship, owner: owner)
        KeyLayout.appendReference(reference, to: &prefix)
        return prefix
    }

    // MARK: Register counts → pins

    /// Counts a registration of each row: while a row is registered, the engine's cache never
    /// evicts it. The counts live in the store (`rowPins`), which the engine's cache asks
    /// before evicting; IDs that are not this store's integer references are ignored.
    open override func managedObjectContextDidRegisterObjects(with objectIDs: [ManagedObjectID]) {
        let ids = objectIDMaker
        // One lock for the batch, no array of rows: a fetch registers every result here.
        rowPins.register(objectIDs.count) { pinnedRow(objectIDs[$0], ids: ids) }
    }

    /// Counts down a registration of each row; an unregister without a registration is
    /// recorded in ``bookkeepingErrors`` and changes no count.
    open override func managedObjectContextDidUnregisterObjects(with objectIDs: [ManagedObjectID]) {
        let ids = objectIDMaker
        let failed = rowPins.unregister(objectIDs.count) { pinnedRow(objectIDs[$0], ids: ids) }
        guard !failed.isEmpty else { return }
        let failures = failed.map { index in
            let id = objectIDs[index]
            return ObjectGraphError(.unbalancedUnregister, "\(id) was unregistered more often than registered.", entityName: id.entityName, objectID: id)
        }
        state.withLock { $0.unbalancedUnregisters += failures }
    }

    /// The row an ID's registration pins, or `nil` for an ID of another store or without an
    /// integer reference.
    private func pinnedRow(_ id: ManagedObjectID, ids: ObjectIDMaker) -> RowPins.Row? {
        id.integerReference(madeLike: ids).map(RowPins.Row.init)
    }

    /// The engine's row-cache statistics (its pinned keys include this store's registered
    /// rows); `nil` while the store is not loaded.
    public func rowCacheStats() -> RowCacheStats? {
        storageEngine?.cacheStats()
    }

    /// The unbalanced unregisters seen so far.
    public var bookkeepingErrors: [ObjectGraphError] {
        state.withLock { $0.unbalancedUnregisters }
    }
}

extension PersistentStore.StoreType {
    /// StrataStore's type.
    public static let strata = PersistentStore.StoreType("Strata")
}

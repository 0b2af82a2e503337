import Foundation
import Synchronization
import StrataSync

/// An incremental store that keeps its rows in memory: the reference implementation of
/// the store contract, against which every other store is tested.
///
/// Stores added with the same URL in one process share their rows, so a test can
/// "reopen" a store by adding it again at its URL; a store added without a URL is
/// private to its coordinator. Row keys are 64-bit integers from 1 up; row versions start
/// at 1 and grow by one per saved change. Register counts never go below zero: an
/// unbalanced unregister is recorded in ``bookkeepingErrors``.
///
/// Fetches evaluate the whole fetch language on the stored rows, following relationships
/// between rows without making managed objects, through ``FetchRequest/apply(to:objectID:)``.
///
/// Thread safety: rows live in a `Mutex` shared by the stores at one URL; register
/// counts in a `Mutex` of this store. A fetch works on a copy of the rows taken under the
/// lock, so it sees all of a concurrent save or none of it.
open class InMemoryStore: IncrementalStore, @unchecked Sendable {
    // @unchecked: an IncrementalStore subclass cannot be checked; all mutable state is in
    // the two Mutexes below.

    struct Row {
        var entityName: String
        /// Values by ordinal of the row's entity; `nil` where nothing is stored.
        var slots: [PropertyValue?]
        var version: UInt64
    }

    struct Database {
        var rows: [Int64: Row] = [:]
        var nextReference: Int64 = 1
        var metadata: [String: AttributeValue] = [:]
    }

    final class Backing: Sendable {
        let database = Locked(Database())
    }

    struct Registration {
        var counts: [ManagedObjectID: Int] = [:]
        var errors: [ObjectGraphError] = []
    }

    /// Backings of stores added with a URL, shared across coordinators in this process.
    private static let backings = Locked<[URL: Backing]>([:])

    // Constant after construction.
    private let backing: Backing
    // State below is protected by `registration`.
    private let registration = Locked(Registration())

    /// Creates the store; rows are shared with other stores at the same URL.
    public required init(
        persistentStoreCoordinator: PersistentStoreCoordinator?, configurationName: String?,
        at url: URL?, options: [String: AttributeValue] = [:]
    ) {
        if let url {
            backing = Self.backings.withLock { backings in
                if let existing = backings[url] { return existing }
                let created = Backing()
                backings[url] = created
                return created
            }
        } else {
            backing = Backing()
        }
        super.init(persistentStoreCoordinator: persistentStoreCoordinator, configurationName: configurationName, at: url, options: options)
    }

    /// Everything: ``FetchRequest/apply(to:objectID:)`` computes every dictionary result.
    open override var fetchCapabilities: FetchCapabilities { .all }

    /// ``PersistentStore/StoreType/inMemory``.
    open override var type: StoreType { .inMemory }

    /// Reads the shared metadata, or creates it for a new store.
    open override func loadMetadata() throws {
        let stored = backing.database.withLock { database in
            if database.metadata.isEmpty {
                database.metadata = [
                    Self.storeUUIDKey: .string(Self.identifierForNewStore(at: url)),
                    Self.storeTypeKey: .string(StoreType.inMemory.rawValue),
                ]
            }
            return database.metadata
        }
        metadata = stored
    }

    /// The metadata of the store at `url` in this process.
    open override class func metadataForPersistentStore(at url: URL) throws -> [String: AttributeValue] {
        guard let backing = backings.withLock({ $0[url] }) else {
            throw ObjectGraphError(.storeOpenFailed, "No in-memory store exists at \(url.absoluteString) in this process.")
        }
        return backing.database.withLock { $0.metadata }
    }

    /// Replaces the metadata of the store at `url` in this process.
    open override class func setMetadata(_ metadata: [String: AttributeValue], forPersistentStoreAt url: URL) throws {
        guard let backing = backings.withLock({ $0[url] }) else {
            throw ObjectGraphError(.storeOpenFailed, "No in-memory store exists at \(url.absoluteString) in this process.")
        }
        backing.database.withLock { $0.metadata = metadata }
    }

    /// Forgets the rows of the store at `url`.
    open override class func destroyPersistentStore(at url: URL) throws {
        _ = backings.withLock { $0.removeValue(forKey: url) }
    }

    /// Copies the rows and metadata kept under `source` to `destination`.
    open override class func replacePersistentStore(at destination: URL, withPersistentStoreFrom source: URL) throws {
        try backings.withLock { backings in
            guard let from = backings[source] else {
                throw ObjectGraphError(.invalidArgument, "There is no in-memory store at \(source.absoluteString) to copy.")
            }
            let copy = Backing()
            let database = from.database.withLock { $0 }
            copy.database.withLock { $0 = database }
            backings[destination] = copy
        }
    }

    // MARK: Requests

    /// Executes fetch and save requests; any other request throws
    /// ``ObjectGraphError/Code/unsupportedRequest``.
    open override func execute(_ request: any PersistentStoreRequest, with context: ManagedObjectContext?) throws -> PersistentStoreResult {
        switch request {
        case let fetch as FetchRequest: return try execute(fetch, with: context)
        case let save as SaveChangesRequest: return try execute(save)
        default:
            throw ObjectGraphError(.unsupportedRequest, "InMemoryStore does not handle \(request.requestType) requests.")
        }
    }

    private func execute(_ request: FetchRequest, with context: ManagedObjectContext?) throws -> PersistentStoreResult {
        try answerInMemory(request, with: context) { request, names, model in
            let database = backing.database.withLock { $0 }
            let rows = database.rows.filter { names.contains($0.value.entityName) }.keys.sorted().compactMap {
                RowView(reference: $0, database: database, store: self, model: model)
            }
            return try request.apply(to: rows, objectID: \.objectID)
        }
    }

    private func execute(_ request: SaveChangesRequest) throws -> PersistentStoreResult {
        if request.isMetadataSave {
            let metadata = self.metadata
            backing.database.withLock { $0.metadata = metadata }
            return .saved
        }
        guard !isReadOnly else { throw ObjectGraphError(.invalidArgument, "The in-memory store \(identifier) is read-only.") }
        // Read every value before taking the lock: reading may fire faults, which call back
        // into this store.
        let inserts = try (request.insertedObjects ?? []).map {
            ($0, try integerReference($0.objectID), try $0.storedValues(skippingUnloadedRelationships: false))
        }
        // An update carries what the object has loaded; relationships it never loaded keep
        // their stored value (laid over under the lock).
        let updates = try (request.updatedObjects ?? []).map {
            ($0, try integerReference($0.objectID), try $0.storedValues(skippingUnloadedRelationships: true))
        }
        let deletes = try (request.deletedObjects ?? []).map { ($0, try integerReference($0.objectID)) }
        let locked = try (request.lockedObjects ?? []).map { ($0, try integerReference($0.objectID)) }
        let metadata = self.metadata
        // Optimistic locking: every updated, deleted and locked object's row must still be the
        // version its context read (a fault read none, so any version is). Rows in conflict
        // are copied out; their records are made after the lock is let go, as they read the
        // objects' values, which may call back into this store.
        // The objects checked, with the version each read (nil: a fault, which read none).
        let checked = updates.map { ($0.0, $0.1) } + deletes + locked
        let readVersions = checked.map { ($0.1, $0.0.committedVersion) }
        // Uniqueness constraints: the values the save gives, looked up under the lock.
        let uniqueness = try UniquenessCheck(request)
        let model = persistentStoreCoordinator?.managedObjectModel
        let (conflicts, duplicates) = try backing.database.withLock { database -> ([(index: Int, row: Row?)], [UniquenessCheck.Finding]) in
            for (object, reference, _) in inserts where database.rows[reference] != nil {
                throw ObjectGraphError(.invalidArgument, "Row \(reference) already exists; cannot insert \(object.objectID) again.", objectID: object.objectID)
            }
            var conflicts: [(index: Int, row: Row?)] = []
            for (index, (reference, read)) in readVersions.enumerated() {
                let row = database.rows[reference]
                if row == nil || read.map({ $0 != row?.version }) == true { conflicts.append((index, row)) }
            }
            guard conflicts.isEmpty else { return (conflicts, []) }
            if !uniqueness.isEmpty, let model {
                let duplicates = holdersByValues(uniqueness, in: database, model: model)
                guard duplicates.isEmpty else { return ([], duplicates) }
            }
            for (object, reference, slots) in inserts {
                database.rows[reference] = Row(entityName: object.entity.name, slots: slots, version: 1)
                database.nextReference = max(database.nextReference, reference + 1)
            }
            for (_, reference, slots) in updates {
                guard var row = database.rows[reference] else { continue }
                database.rows[reference] = nil
                for (ordinal, value) in slots.enumerated() where value != nil && ordinal < row.slots.count {
                    row.slots[ordinal] = value
                }
                row.version += 1
                database.rows[reference] = row
            }
            for (_, reference) in deletes { database.rows[reference] = nil }
            database.metadata = metadata
            return ([], [])
        }
        guard duplicates.isEmpty else { throw ObjectGraphError.constraintConflicts(uniqueness.conflicts(duplicates)) }
        guard conflicts.isEmpty else {
            throw ObjectGraphError.mergeConflicts(conflicts.map { index, row in
                let object = checked[index].0
                return MergeConflict(sourceObject: object, storedRow: row.map { node(of: $0, objectID: object.objectID) })
            })
        }
        return .saved
    }

    /// Under the database lock: the conflicts of a save's uniqueness probes with each other
    /// and with the rows. Each constraint the save touches gets one table, from values to
    /// rows, made by one pass over the rows.
    private func holdersByValues(_ check: UniquenessCheck, in database: Database, model: ManagedObjectModel) -> [UniquenessCheck.Finding] {
        var tables: [UniquenessConstraint.Key: [[AttributeValue]: [IncrementalStoreNode]]] = [:]
        for probe in check.probes where tables[probe.constraint.key] == nil {
            let constraint = probe.constraint
            var table: [[AttributeValue]: [IncrementalStoreNode]] = [:]
            for (reference, row) in database.rows {
                guard let entity = model.entitiesByName[row.entityName], entity.inherits(from: constraint.scope),
                    let values = constraint.values({ $0.ordinal < row.slots.count ? row.slots[$0.ordinal]?.attributeValue ?? .null : .null })
                else { continue }
                table[values, default: []].append(node(of: row, objectID: newObjectID(for: entity, referenceObject: .int64(reference))))
            }
            tables[constraint.key] = table
        }
        return check.findings { probe in tables[probe.constraint.key]?[probe.values] ?? [] }
    }

    // MARK: Faulting

    /// Every attribute and to-one relationship of the row, with its version.
    open override func newValuesForObject(with objectID: ManagedObjectID, with context: ManagedObjectContext) throws -> IncrementalStoreNode {
        let reference = try integerReference(objectID)
        guard let row = backing.database.withLock({ $0.rows[reference] }) else {
            throw ObjectGraphError(.objectNotFound, "\(objectID) is not in the store.", entityName: objectID.entityName, objectID: objectID)
        }
        return node(of: row, objectID: objectID)
    }

    /// A row's node: its attributes and to-one destinations (to-many ones fault separately).
    private func node(of row: Row, objectID: ManagedObjectID) -> IncrementalStoreNode {
        var slots = row.slots
        for property in objectID.entity.properties where property.ordinal < slots.count {
            switch property.slotKind {
            case .attribute: if property.isTransient { slots[property.ordinal] = nil }
            case .toOne: if slots[property.ordinal] == nil { slots[property.ordinal] = .relationship(.toOne(nil)) }
            case .toMany: slots[property.ordinal] = nil
            }
        }
        return IncrementalStoreNode(objectID: objectID, valuesByOrdinal: slots, version: row.version)
    }

    /// The stored destinations of one relationship.
    open override func newValue(
        forRelationship relationship: RelationshipDescription, forObjectWith objectID: ManagedObjectID,
        with context: ManagedObjectContext?
    ) throws -> RelationshipValue {
        let reference = try integerReference(objectID)
        guard let row = backing.database.withLock({ $0.rows[reference] }) else {
            throw ObjectGraphError(.objectNotFound, "\(objectID) is not in the store.", entityName: objectID.entityName, key: relationship.name, objectID: objectID)
        }
        let ordinal = relationship.ordinal
        let stored = ordinal >= 0 && ordinal < row.slots.count ? row.slots[ordinal] : nil
        return stored?.relationshipValue ?? (relationship.isToMany ? .toMany([]) : .toOne(nil))
    }

    /// Reserves one new integer reference per object, in order.
    open override func obtainPermanentIDs(for objects: [ManagedObject]) throws -> [ManagedObjectID] {
        let first = backing.database.withLock { database in
            let first = database.nextReference
            database.nextReference += Int64(objects.count)
            return first
        }
        return objects.enumerated().map { index, object in
            newObjectID(for: object.entity, referenceObject: .int64(first + Int64(index)))
        }
    }

    private func integerReference(_ objectID: ManagedObjectID) throws -> Int64 {
        guard case .int64(let reference) = try referenceObject(for: objectID) else {
            throw ObjectGraphError(.invalidArgument, "\(objectID) does not have an integer reference.", objectID: objectID)
        }
        return reference
    }

    // MARK: Register counts

    /// Adds one to each ID's register count.
    open override func managedObjectContextDidRegisterObjects(with objectIDs: [ManagedObjectID]) {
        registration.withLock { state in for id in objectIDs { state.counts[id, default: 0] += 1 } }
    }

    /// Subtracts one from each ID's register count; an ID already at zero stays at zero
    /// and the imbalance is recorded in ``bookkeepingErrors``.
    open override func managedObjectContextDidUnregisterObjects(with objectIDs: [ManagedObjectID]) {
        registration.withLock { state in
            for id in objectIDs {
                let count = state.counts[id, default: 0]
                if count == 0 {
                    state.errors.append(ObjectGraphError(
                        .unbalancedUnregister, "\(id) was unregistered more often than registered.",
                        entityName: id.entityName, objectID: id))
                } else if count == 1 {
                    state.counts[id] = nil
                } else {
                    state.counts[id] = count - 1
                }
            }
        }
    }

    /// How many contexts currently use the row of `objectID`.
    public func registrationCount(for objectID: ManagedObjectID) -> Int {
        registration.withLock { $0.counts[objectID] ?? 0 }
    }

    /// Every row in use and its register count (rows at zero are absent).
    public var registrationCounts: [ManagedObjectID: Int] {
        registration.withLock { $0.counts }
    }

    /// The unbalanced unregisters seen so far.
    public var bookkeepingErrors: [ObjectGraphError] {
        registration.withLock { $0.errors }
    }

    /// Every row's version, by object ID (for tests and inspection).
    public func rowVersions() -> [ManagedObjectID: UInt64] {
        guard let model = persistentStoreCoordinator?.managedObjectModel else { return [:] }
        let rows = backing.database.withLock { $0.rows }
        var versions: [ManagedObjectID: UInt64] = [:]
        for (reference, row) in rows {
            guard let entity = model.entitiesByName[row.entityName] else { continue }
            versions[newObjectID(for: entity, referenceObject: .int64(reference))] = row.version
        }
        return versions
    }
}

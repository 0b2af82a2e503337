import Foundation
import ObjectGraph
import Synchronization

/// An in-memory store that records every contract call the coordinator makes, to
/// check that contexts drive the incremental-store contract correctly.
final class RecordingStore: InMemoryStore, @unchecked Sendable {
    // @unchecked: the log is inside a Mutex; the rest is InMemoryStore's.

    enum Call: Equatable, CustomStringConvertible {
        case fetch(FetchRequestResultType)
        case save(inserted: [ManagedObjectID], updated: Int, deleted: Int)
        case metadataSave
        case newValues(ManagedObjectID)
        case newRelationship(String)
        case obtainPermanentIDs(entities: [String], returned: [ManagedObjectID])
        case register([ManagedObjectID])
        case unregister([ManagedObjectID])

        var description: String {
            switch self {
            case .fetch(let type): return "fetch(\(type))"
            case .save(let inserted, let updated, let deleted): return "save(+\(inserted.count) ~\(updated) -\(deleted))"
            case .metadataSave: return "metadataSave"
            case .newValues: return "newValues"
            case .newRelationship(let key): return "newRelationship(\(key))"
            case .obtainPermanentIDs(let entities, _): return "obtainPermanentIDs(\(entities))"
            case .register(let ids): return "register(\(ids.count))"
            case .unregister(let ids): return "unregister(\(ids.count))"
            }
        }
    }

    static let type = StoreType("Recording")
    private let log = Mutex<[Call]>([])

    var calls: [Call] { log.withLock { $0 } }
    func clear() { log.withLock { $0 = [] } }
    private func record(_ call: Call) { log.withLock { $0.append(call) } }

    override func execute(_ request: any PersistentStoreRequest, with context: ManagedObjectContext?) throws -> PersistentStoreResult {
        if let fetch = request as? FetchRequest { record(.fetch(fetch.resultType)) }
        if let save = request as? SaveChangesRequest {
            if save.isMetadataSave {
                record(.metadataSave)
            } else {
                record(.save(
                    inserted: (save.insertedObjects ?? []).map(\.objectID).sorted { $0.description < $1.description },
                    updated: save.updatedObjects?.count ?? 0, deleted: save.deletedObjects?.count ?? 0))
            }
        }
        return try super.execute(request, with: context)
    }

    override func newValuesForObject(with objectID: ManagedObjectID, with context: ManagedObjectContext) throws -> IncrementalStoreNode {
        record(.newValues(objectID))
        return try super.newValuesForObject(with: objectID, with: context)
    }

    override func newValue(
        forRelationship relationship: RelationshipDescription, forObjectWith objectID: ManagedObjectID, with context: ManagedObjectContext?
    ) throws -> RelationshipValue {
        record(.newRelationship(relationship.name))
        return try super.newValue(forRelationship: relationship, forObjectWith: objectID, with: context)
    }

    override func obtainPermanentIDs(for objects: [ManagedObject]) throws -> [ManagedObjectID] {
        let ids = try super.obtainPermanentIDs(for: objects)
        record(.obtainPermanentIDs(entities: objects.map(\.entity.name), returned: ids))
        return ids
    }

    override func managedObjectContextDidRegisterObjects(with objectIDs: [ManagedObjectID]) {
        record(.register(objectIDs))
        super.managedObjectContextDidRegisterObjects(with: objectIDs)
    }

    override func managedObjectContextDidUnregisterObjects(with objectIDs: [ManagedObjectID]) {
        record(.unregister(objectIDs))
        super.managedObjectContextDidUnregisterObjects(with: objectIDs)
    }

    /// A coordinator with one recording store for the test model.
    static func makeStack() throws -> (PersistentStoreCoordinator, RecordingStore) {
        PersistentStoreCoordinator.registerStoreClass(RecordingStore.self, type: type)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try TestModel.make())
        let store = try coordinator.addPersistentStore(type: type)
        guard let recording = store as? RecordingStore else {
            throw ObjectGraphError(.invalidArgument, "registered class was not used")
        }
        recording.clear()
        return (coordinator, recording)
    }
}

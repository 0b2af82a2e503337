import Foundation
import ObjectGraph
import Synchronization

/// The minimal custom incremental store of the DocC article "Writing an Incremental
/// Store", compiled and run here so the article stays true. It also runs the whole
/// conformance suite, which shows the suite needs nothing InMemoryStore-specific.
final class DictionaryStore: IncrementalStore, @unchecked Sendable {
    // @unchecked: an IncrementalStore subclass cannot be checked; all state is in `table`.

    static let type = StoreType("Dictionary")

    private struct Row {
        var entityName: String
        var values: [String: PropertyValue]
        var version: UInt64
    }

    private struct Table {
        var nextKey: Int64 = 1
        var rows: [Int64: Row] = [:]
    }

    private let table = Mutex(Table())

    private var model: ManagedObjectModel {
        get throws {
            guard let model = persistentStoreCoordinator?.managedObjectModel else {
                throw ObjectGraphError(.noPersistentStore, "DictionaryStore is not added to a coordinator.")
            }
            return model
        }
    }

    private func key(_ id: ManagedObjectID) throws -> Int64 {
        guard case .int64(let key) = try referenceObject(for: id) else {
            throw ObjectGraphError(.invalidArgument, "\(id) has no integer key.", objectID: id)
        }
        return key
    }

    // MARK: Requests

    override func execute(_ request: any PersistentStoreRequest, with context: ManagedObjectContext?) throws -> PersistentStoreResult {
        switch request {
        case let fetch as FetchRequest:
            return try self.fetch(fetch, context)
        case let save as SaveChangesRequest:
            try self.save(save)
            return .saved
        default:
            throw ObjectGraphError(.unsupportedRequest, "DictionaryStore handles fetch and save requests only.")
        }
    }

    /// One stored row, seen by predicates and sort descriptors; dotted key paths follow
    /// relationships to other rows of the same snapshot.
    private struct Candidate: FetchEvaluable {
        let id: ManagedObjectID
        let values: [String: PropertyValue]
        let rows: [Int64: Row]

        func fetchValue(forKeyPath keyPath: String) throws -> FetchValue {
            let parts = keyPath.split(separator: ".", maxSplits: 1).map(String.init)
            let rest = parts.count > 1 ? parts[1] : nil
            func follow(_ target: ManagedObjectID) throws -> FetchValue {
                guard let rest else { return .object(target) }
                guard case .int64(let key)? = target.referenceObject, let row = rows[key] else { return .null }
                return try Candidate(id: target, values: row.values, rows: rows).fetchValue(forKeyPath: rest)
            }
            switch values[parts[0]] {
            case .attribute(let value)?: return .attribute(value)
            case .relationship(.toOne(let target))?: return try target.map(follow) ?? .null
            case .relationship(.toMany(let targets))?: return .collection(try targets.map(follow))
            case nil: throw ObjectGraphError(.unknownKey, "DictionaryStore cannot evaluate \"\(keyPath)\".", key: keyPath)
            }
        }

        /// Reads a key path of another row, for subqueries and `$x.key` variables.
        func fetchValue(forKeyPath keyPath: String, ofObject objectID: ManagedObjectID) throws -> FetchValue {
            guard case .int64(let key)? = objectID.referenceObject, let row = rows[key] else { return .null }
            return try Candidate(id: objectID, values: row.values, rows: rows).fetchValue(forKeyPath: keyPath)
        }

        /// The row's object ID.
        func fetchValueOfSelf() throws -> FetchValue { .object(id) }
    }

    private func fetch(_ request: FetchRequest, _ context: ManagedObjectContext?) throws -> PersistentStoreResult {
        let model = try self.model
        let names = request.matchingEntityNames()
        let rows = table.withLock { $0.rows }
        let candidates = try rows.keys.sorted().compactMap { key -> Candidate? in
            guard let row = rows[key], names.contains(row.entityName) else { return nil }
            let entity = try model.entity(named: row.entityName)
            return Candidate(id: newObjectID(for: entity, referenceObject: .int64(key)), values: row.values, rows: rows)
        }
        let result = try request.apply(to: candidates, objectID: \.id)
        if request.resultType == .managedObject, let context, case .objectIDs(let ids) = result {
            return .objects(ids.map { context.object(with: $0) })
        }
        return result
    }

    private func save(_ request: SaveChangesRequest) throws {
        // Read the objects' values before taking the lock: reading may fire faults,
        // which call back into this store.
        func values(of object: ManagedObject) throws -> [String: PropertyValue] {
            var values: [String: PropertyValue] = [:]
            for property in object.entity.properties where !property.isTransient {
                if let relationship = property as? RelationshipDescription {
                    let ids = try object.objectIDs(forRelationshipNamed: relationship.name)
                    values[property.name] = .relationship(relationship.isToMany ? .toMany(ids) : .toOne(ids.first))
                } else {
                    values[property.name] = .attribute(try object.value(forKey: property.name))
                }
            }
            return values
        }
        let inserted = try (request.insertedObjects ?? []).map { (try key($0.objectID), $0.entity.name, try values(of: $0)) }
        let updated = try (request.updatedObjects ?? []).map { (try key($0.objectID), try values(of: $0)) }
        let deleted = try (request.deletedObjects ?? []).map { try key($0.objectID) }
        table.withLock { table in
            for (key, entityName, values) in inserted { table.rows[key] = Row(entityName: entityName, values: values, version: 1) }
            for (key, values) in updated {
                table.rows[key]?.values = values
                table.rows[key]?.version += 1
            }
            for key in deleted { table.rows[key] = nil }
        }
    }

    // MARK: Faulting

    override func newValuesForObject(with objectID: ManagedObjectID, with context: ManagedObjectContext) throws -> IncrementalStoreNode {
        let key = try key(objectID)
        guard let row = table.withLock({ $0.rows[key] }) else {
            throw ObjectGraphError(.objectNotFound, "\(objectID) is not in the store.", objectID: objectID)
        }
        let toMany = Set(objectID.entity.relationships.filter(\.isToMany).map(\.name))
        return IncrementalStoreNode(objectID: objectID, values: row.values.filter { !toMany.contains($0.key) }, version: row.version)
    }

    override func newValue(
        forRelationship relationship: RelationshipDescription, forObjectWith objectID: ManagedObjectID, with context: ManagedObjectContext?
    ) throws -> RelationshipValue {
        let key = try key(objectID)
        guard let row = table.withLock({ $0.rows[key] }) else {
            throw ObjectGraphError(.objectNotFound, "\(objectID) is not in the store.", objectID: objectID)
        }
        return row.values[relationship.name]?.relationshipValue ?? (relationship.isToMany ? .toMany([]) : .toOne(nil))
    }

    override func obtainPermanentIDs(for objects: [ManagedObject]) throws -> [ManagedObjectID] {
        let first = table.withLock { table in
            defer { table.nextKey += Int64(objects.count) }
            return table.nextKey
        }
        return objects.enumerated().map { offset, object in
            newObjectID(for: object.entity, referenceObject: .int64(first + Int64(offset)))
        }
    }
}

/// The minimal store as a conformance fixture: no URL, so no reopening.
struct DictionaryStoreFixture: StoreFixture {
    var description: String { "DictionaryStore" }
    var supportsReopen: Bool { false }

    func makeStack(model: ManagedObjectModel) throws -> TestStack {
        PersistentStoreCoordinator.registerStoreClass(DictionaryStore.self, type: DictionaryStore.type)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let store = try coordinator.addPersistentStore(type: DictionaryStore.type)
        return TestStack(coordinator: coordinator, store: store, url: nil)
    }

    func reopen(_ stack: TestStack) throws -> TestStack {
        throw ObjectGraphError(.unsupportedRequest, "DictionaryStore cannot be reopened.")
    }
}

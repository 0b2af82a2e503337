import ObjectGraph
import StrataEngine

extension StrataStore {
    /// One save: every changed row and the metadata record in one engine transaction.
    func execute(_ request: SaveChangesRequest) throws -> PersistentStoreResult {
        guard !isReadOnly else { throw ObjectGraphError(.invalidArgument, "The Strata store \(identifier) is read-only.") }
        let shared = try sharedEngine()
        let engine = shared.engine
        // Read every value before taking the lock: reading may fire faults.
        let inserts = try (request.insertedObjects ?? []).map { ($0, try rowKey($0.objectID), try stored(values: $0, skippingUnloaded: false)) }
        // An update carries only what the object has loaded; it is laid over the current row
        // under the lock, which keeps the relationships the object never loaded.
        let updates = try (request.updatedObjects ?? []).map { ($0, try rowKey($0.objectID), try stored(values: $0, skippingUnloaded: true)) }
        let deletes = try (request.deletedObjects ?? []).map { ($0, try rowKey($0.objectID)) }
        let locked = try (request.lockedObjects ?? []).map { ($0, try rowKey($0.objectID)) }
        let metadata = self.metadata
        let model = try self.model()
        let modelRecordCurrent = state.withLock { $0.modelRecordCurrent }

        try shared.saveLock.withLock { saves in
            defer { saves += 1 }
            let snapshot = try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try engine.snapshot() }
            var record = try Self.record(in: snapshot)
            record.nextReference = max(record.nextReference, shared.nextReference.withLock { $0 })
            record.metadata = metadata
            var conflicts: [SaveConflict] = []
            var batch = WriteBatch()
            func current(_ object: ManagedObject, _ key: [UInt8]) throws -> StoredRow {
                guard let bytes = try mappingEngineErrors("read \(object.objectID)", { () throws(StoreError) in try snapshot.get(key) }) else {
                    throw ObjectGraphError(.objectNotFound, "Cannot save \(object.objectID): it is not in the store.", entityName: object.entity.name, objectID: object.objectID)
                }
                let row = try StoredRow.decode(bytes, context: "row of \(object.objectID)")
                // Optimistic locking: the row must still be the version the context read.
                if let read = object.committedVersion, read != row.version {
                    conflicts.append(SaveConflict(objectID: object.objectID, snapshotVersion: read, cachedVersion: row.version, databaseVersion: row.version))
                }
                return row
            }
            // [IDX-S3] Index entries change in the same transaction as their rows.
            func indexKeys(_ row: StoredRow, _ object: ManagedObject) throws -> Set<[UInt8]> {
                let root = Self.root(of: object.entity).name
                return Set(IndexKey.keys(of: row, reference: try integerReference(object.objectID), entity: object.entity, root: root))
            }
            for (object, key, var row) in inserts {
                if try mappingEngineErrors("check \(object.objectID)", { () throws(StoreError) in try snapshot.get(key) }) != nil {
                    throw ObjectGraphError(.invalidArgument, "Row of \(object.objectID) already exists; cannot insert it again.", objectID: object.objectID)
                }
                row.version = 1
                batch.put(key, row.encode())
                for indexKey in try indexKeys(row, object) { batch.put(indexKey, []) }
                record.rowCounts[row.entity, default: 0] += 1
            }
            for (object, key, loaded) in updates {
                let existing = try current(object, key)
                var row = existing.overlaid(with: loaded)
                row.version = existing.version + 1
                batch.put(key, row.encode())
                let before = try indexKeys(existing, object), after = try indexKeys(row, object)
                for stale in before.subtracting(after) { batch.delete(stale) }
                for fresh in after.subtracting(before) { batch.put(fresh, []) }
            }
            for (object, key) in deletes {
                let existing = try current(object, key)
                batch.delete(key)
                for indexKey in try indexKeys(existing, object) { batch.delete(indexKey) }
                record.rowCounts[existing.entity, default: 1] -= 1
            }
            for (object, key) in locked { _ = try current(object, key) }
            guard conflicts.isEmpty else {
                var error = ObjectGraphError(
                    .saveConflict,
                    "The save conflicts with changes saved since the objects were read: " + conflicts.map(\.description).joined(separator: "; "))
                error.conflicts = conflicts
                throw error
            }
            batch.put(KeyLayout.metadataKey, record.encode())
            // [ROW-5] The model travels with the data, for tools that have no application code.
            if !modelRecordCurrent {
                let encoded = ModelRecord.encode(model)
                if try mappingEngineErrors("read the model record", { () throws(StoreError) in try snapshot.get(KeyLayout.modelKey) }) != encoded {
                    batch.put(KeyLayout.modelKey, encoded)
                }
            }
            _ = try mappingEngineErrors("commit the save") { () throws(StoreError) in try engine.commit(batch) }
            state.withLock { $0.modelRecordCurrent = true }
        }
        return .saved
    }

    /// The row an object saves as: every stored attribute, and each relationship (with
    /// `skippingUnloaded`, only those whose destinations are loaded).
    private func stored(values object: ManagedObject, skippingUnloaded: Bool) throws -> StoredRow {
        var row = StoredRow(entity: object.entity.name, version: 1, attributes: [:], toOne: [:], toMany: [:])
        let values = try object.storedValues(skippingUnloadedRelationships: skippingUnloaded)
        for (property, value) in zip(object.entity.properties, values) {
            switch value {
            case .attribute(let attribute)?:
                row.attributes[property.name] = attribute
            case .relationship(.toOne(let id))?:
                row.toOne[property.name] = .some(try id.map { (entity: $0.entityName, reference: try integerReference($0)) })
            case .relationship(.toMany(let ids))?:
                row.toMany[property.name] = try ids.map { (entity: $0.entityName, reference: try integerReference($0)) }
            case nil:
                continue
            }
        }
        return row
    }
}

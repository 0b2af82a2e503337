import ObjectGraph
import StrataEngine

extension StrataStore {
    /// The indexed, stored attributes of a model, as `Entity.attribute`: what decides which
    /// index entries rows have ([IDX-S1]). Model version hashes do not cover indexing, so a
    /// store opens with a model that indexes other attributes than the one it was saved with.
    static func indexSignature(of model: ManagedObjectModel) -> Set<String> {
        var signature = Set<String>()
        for entity in model.entities {
            for attribute in entity.attributes where attribute.isIndexed && !attribute.isTransient {
                signature.insert(entity.name + "." + attribute.name)
            }
        }
        return signature
    }

    /// [OPEN-1] How `model` differs from the model the store was saved with: its model record
    /// ([ROW-5]) when it has a readable one (every entity of the whole model, property by
    /// property: entity numbers and row layouts depend on all of them); else the version
    /// hashes of its metadata ([ROW-4]) for the entities of `configuration`; else, with
    /// neither, every entity that has rows must be in the model. Empty when they match.
    static func modelDifferences(
        of model: ManagedObjectModel, configuration: String?, record: MetadataRecord, in snapshot: Snapshot
    ) throws -> [ModelDifference] {
        let bytes = try mappingEngineErrors("read the model record") { () throws(StoreError) in try snapshot.get(KeyLayout.modelKey) }
        // A record that does not decode is rewritten by the rebuild below ([IDX-S6]) once the
        // hashes have been checked; fsck reports it meanwhile.
        if let bytes, let stored = try? ModelRecord.decode(bytes) {
            return model.differences(fromStoreModel: stored)
        }
        if record.metadata.keys.contains(where: { $0.hasPrefix(PersistentStore.modelVersionHashKeyPrefix) }) {
            return model.differences(ofConfiguration: configuration, fromStoreMetadata: record.metadata)
        }
        return record.rowCounts.filter { $0.value > 0 && model.entitiesByName[$0.key] == nil }.sorted { $0.key < $1.key }.map { name, rows in
            ModelDifference(entityName: name, description: "entity \(name) has \(rows) row\(rows == 1 ? "" : "s") in the store but is not in the model")
        }
    }

    /// Whether the index entries in `snapshot` are those `model` asks for ([IDX-S6]): the model
    /// record indexes the same attributes, or the store has neither a model record nor rows.
    static func indexesAreCurrent(for model: ManagedObjectModel, in snapshot: Snapshot) throws -> Bool {
        let storedBytes = try mappingEngineErrors("read the model record") { () throws(StoreError) in try snapshot.get(KeyLayout.modelKey) }
        if let storedBytes, let stored = try? ModelRecord.decode(storedBytes) { return indexSignature(of: stored) == indexSignature(of: model) }
        return storedBytes == nil && snapshot.countKeys(from: [KeyLayout.rowTag], to: [KeyLayout.rowTag + 1], limit: 1) == 0
    }

    /// [IDX-S6] When the loading model indexes other attributes than the stored model
    /// ([ROW-5]) — or the store has rows but no model record — rebuilds every hierarchy's index
    /// entries from its rows in one transaction with the new model record, so index-served
    /// fetches never miss a row. Returns the number of index entries added and removed.
    static func reconcileIndexes(in shared: SharedEngine, model: ManagedObjectModel) throws -> Int {
        let engine = shared.engine
        return try shared.saveLock.withLock { _ -> Int in
            let snapshot = try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try engine.snapshot() }
            if try indexesAreCurrent(for: model, in: snapshot) { return 0 }
            var batch = WriteBatch()
            let layout = try StoreLayout(model: model)
            for root in model.entities where root.superentity == nil {
                var expected = Set<[UInt8]>()
                var failure: Error?
                try mappingEngineErrors("scan \(root.name) rows") { () throws(StoreError) in
                    try snapshot.forEach(from: KeyLayout.rowPrefix(root: root.name), to: KeyLayout.rowPrefixEnd(root: root.name)) { key, value in
                        do {
                            guard let reference = KeyLayout.reference(fromRowKey: key) else { return true }
                            let row = try StoredRow.decode(value, store: layout, context: .key(root: root.name, reference: reference))
                            guard let entity = model.entitiesByName[row.entity] else { return true }
                            expected.formUnion(IndexKey.keys(of: row, reference: reference, entity: entity, root: root.name))
                            return true
                        } catch {
                            failure = error
                            return false
                        }
                    }
                }
                if let failure { throw failure }
                let prefix = [IndexKey.tag] + Array(root.name.utf8) + [0x00]
                var present = Set<[UInt8]>()
                snapshot.forEachKey(from: prefix, to: prefixEnd(prefix)) { key in
                    present.insert(key)
                    return true
                }
                for stale in present.subtracting(expected) { batch.delete(stale) }
                for missing in expected.subtracting(present) { batch.put(missing, []) }
            }
            let changes = batch.count
            batch.put(KeyLayout.modelKey, ModelRecord.encode(model))
            _ = try mappingEngineErrors("rebuild the indexes") { () throws(StoreError) in try engine.commit(batch) }
            return changes
        }
    }
}

import Logging
import Foundation
import ObjectGraph
import StrataEngine

extension StrataStore {
    /// The stored attributes of a model that have index entries (indexed, or named by a
    /// uniqueness constraint), as `Entity.attribute`: what decides which index entries rows
    /// have ([IDX-S1]). Model version hashes do not cover indexing, so a
    /// store opens with a model that indexes other attributes than the one it was saved with.
    static func indexSignature(of model: ManagedObjectModel) -> Set<String> {
        var signature = Set<String>()
        for entity in model.entities {
            for attribute in entity.attributesWithIndexEntries {
                signature.insert(entity.name + "." + attribute.name)
            }
        }
        return signature
    }

    /// [OPEN-1] How `model` differs from the model the store was saved with: its model record
    /// ([ROW-5]) when it has a readable one (every entity of the whole model, property by
    /// property: entity numbers and row layouts depend on all of them); else the version
    /// hashes of its metadata ([ROW-4]) for the entities of `configuration`, and then the rows
    /// as below; else, with neither, the rows themselves: every entity with rows by the metadata's counts must be
    /// in the model, and every row's header must name, by number, an entity of the model in
    /// the row's hierarchy with the row's layout ([META-3]). Empty when they match.
    ///
    /// `modelRecord` is the store's, as ``modelRecord(in:)`` reads it (`nil`: missing, or it
    /// does not decode; the rebuild of [IDX-S6] rewrites it once the hashes have been checked,
    /// and fsck reports it meanwhile).
    static func modelDifferences(
        of model: ManagedObjectModel, configuration: String?, record: MetadataRecord, modelRecord: ModelRecord?, in snapshot: Snapshot
    ) throws -> [ModelDifference] {
        if let stored = modelRecord {
            return model.differences(fromStoreModel: stored.current.model)
        }
        if hasVersionHashes(record) {
            let differences = model.differences(ofConfiguration: configuration, fromStoreMetadata: record.metadata)
            // The rows must agree too: a store that lost the model record of a migration
            // ([ROW-5]: entity numbers, layouts and key spaces that are not the model's own) is
            // refused rather than read as empty.
            return differences.isEmpty ? try rowDifferences(of: model, survey: StoreSurvey.survey(snapshot)) : differences
        }
        let counted = record.rowCounts.filter { $0.value > 0 && model.entitiesByName[$0.key] == nil }.sorted { $0.key < $1.key }.map { name, rows in
            ModelDifference(entityName: name, description: "entity \(name) has \(rows) row\(rows == 1 ? "" : "s") in the store but is not in the model")
        }
        return counted + (try rowDifferences(of: model, survey: StoreSurvey.survey(snapshot)))
    }

    /// Whether a metadata record carries the coordinator's version hashes ([ROW-4]).
    static func hasVersionHashes(_ record: MetadataRecord) -> Bool {
        record.metadata.keys.contains { $0.hasPrefix(PersistentStore.modelVersionHashKeyPrefix) }
    }

    /// [META-3] How the rows' headers disagree with `model`: a row's entity number must name an
    /// entity of the model ([ROW-1], numbers by name order) whose hierarchy is the row's key
    /// space ([KEY-2]) and whose layout (the first bytes of its storage hash) is the row's.
    /// One difference per kind of row; empty when every row fits.
    static func rowDifferences(of model: ManagedObjectModel, survey: StoreSurvey) throws -> [ModelDifference] {
        guard !survey.rows.isEmpty else { return [] }
        let layout = try StoreLayout(model: model)
        var differences: [ModelDifference] = []
        for kind in survey.rows.keys.sorted() {
            let rows = survey.rows[kind] ?? 0
            let count = "\(rows) row\(rows == 1 ? "" : "s")"
            guard let entity = layout.entity(number: kind.number), let rowLayout = layout.layout(of: entity) else {
                differences.append(ModelDifference(
                    entityName: kind.root,
                    description: "\(count) in \(kind.root)'s key space are of entity #\(kind.number); the model has \(layout.numberCount) entities"))
                continue
            }
            if entity.rootEntityName != kind.root {
                differences.append(ModelDifference(
                    entityName: entity.name,
                    description: "\(count) in \(kind.root)'s key space are of entity #\(kind.number), which is \(entity.name) of hierarchy \(entity.rootEntityName) in the model"))
            } else if rowLayout.layoutID != kind.layoutID {
                differences.append(ModelDifference(
                    entityName: entity.name,
                    description: "\(count) of entity #\(kind.number) (\(entity.name) in the model) were written with layout \(hexLayout(kind.layoutID)), the model's \(entity.name) has layout \(hexLayout(rowLayout.layoutID))"))
            }
        }
        return differences
    }

    /// The row counts per entity name that the rows' headers give under `model` (rows whose
    /// entity number the model lacks are not counted: [OPEN-1] refuses such a model first).
    static func rowCounts(of survey: StoreSurvey, model: ManagedObjectModel) throws -> [String: Int] {
        let layout = try StoreLayout(model: model)
        var counts: [String: Int] = [:]
        for (kind, rows) in survey.rows {
            if let entity = layout.entity(number: kind.number) { counts[entity.name, default: 0] += rows }
        }
        return counts
    }

    /// Whether the index entries in `snapshot` are those `model` asks for ([IDX-S6]): the model
    /// record indexes the same attributes, or the store has neither a model record nor rows.
    static func indexesAreCurrent(for model: ManagedObjectModel, in snapshot: Snapshot) throws -> Bool {
        let storedBytes = try mappingEngineErrors("read the model record") { () throws(StoreError) in try snapshot.get(KeyLayout.modelKey) }
        if let storedBytes, let stored = try? ModelRecord.decode(storedBytes) { return indexSignature(of: stored) == indexSignature(of: model) }
        return storedBytes == nil && snapshot.countKeys(from: [KeyLayout.rowTag], to: [KeyLayout.rowTag + 1], limit: 1) == 0
    }

    /// [IDX-S6] [META-2] When the loading model indexes other attributes than the stored
    /// model ([ROW-5]) — or the store has rows but no model record, or no metadata record, or
    /// `force` — decodes every row with `model` and, in one transaction: rebuilds every
    /// hierarchy's index entries, writes the model record, and writes the metadata record when
    /// it is missing or its row counts or next reference disagree with the rows (the next
    /// reference rises above every reference a key or a row names; it never falls). A missing
    /// metadata record is rebuilt with `storeIdentifier` (a new UUID when `nil`), the store type
    /// and `model`'s version hashes. Call only after the model has passed [OPEN-1].
    static func reconcile(
        in shared: SharedEngine, model: ManagedObjectModel, layout knownLayout: StoreLayout? = nil, storeIdentifier: String? = nil,
        force: Bool = false
    ) throws -> MetadataRebuild {
        let engine = shared.engine
        return try shared.withSavesSettled { _ -> MetadataRebuild in
            let snapshot = try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try engine.snapshot() }
            let stored = try recordIfReadable(in: snapshot)
            var result = MetadataRebuild(rowCounts: stored?.rowCounts ?? [:], nextReference: stored?.nextReference ?? 1)
            let layout = try knownLayout ?? storeLayout(for: model, record: modelRecord(in: snapshot))
            if !force, layout.record.retired.isEmpty, !layout.hasPendingKeys, try indexesAreCurrent(for: model, in: snapshot) { return result }
            var batch = WriteBatch()
            // [MIG-5] Relationship keys a migration left pending are written in this transaction.
            try writeAllPendingKeys(layout: layout, in: snapshot, into: &batch)
            // [MIG-4] Retired rows go with every key naming them, in this transaction too.
            try deleteAllRetiredRows(of: layout.record, in: snapshot, into: &batch)
            let pendingKeys = batch.count
            // [MIG-4] Keys a migration retired are deleted in this transaction too.
            for prefix in layout.record.retired.sorted().flatMap(\.prefixes) {
                snapshot.forEachKey(from: prefix, to: prefixEnd(prefix)) { key in
                    batch.delete(key)
                    return true
                }
            }
            var counts: [String: Int] = [:]
            var maxReference: Int64 = 0
            for root in model.entities where root.superentity == nil {
                let space = layout.keySpace(of: root)
                var expected = Set<[UInt8]>()
                var failure: Error?
                try mappingEngineErrors("scan \(space) rows") { () throws(StoreError) in
                    try snapshot.forEach(from: KeyLayout.rowPrefix(root: space), to: KeyLayout.rowPrefixEnd(root: space)) { key, value in
                        do {
                            guard let reference = KeyLayout.reference(fromRowKey: key) else { return true }
                            // A retired row ([MIG-4]) goes in this transaction.
                            if layout.isRetiredRow(value) { return true }
                            let row = try StoredRow.decode(value, store: layout, context: .key(root: space, reference: reference))
                            guard let entity = model.entitiesByName[row.entity] else { return true }
                            counts[row.entity, default: 0] += 1
                            maxReference = max(maxReference, reference)
                            for case let target? in row.toOne.values { maxReference = max(maxReference, target.reference) }
                            for list in row.toMany.values { for target in list { maxReference = max(maxReference, target.reference) } }
                            expected.formUnion(IndexKey.keys(of: row, reference: reference, entity: entity, root: space))
                            return true
                        } catch {
                            failure = error
                            return false
                        }
                    }
                }
                if let failure { throw failure }
                let prefix = [IndexKey.tag] + Array(space.utf8) + [0x00]
                var present = Set<[UInt8]>()
                snapshot.forEachKey(from: prefix, to: prefixEnd(prefix)) { key in
                    present.insert(key)
                    return true
                }
                for stale in present.subtracting(expected) { batch.delete(stale) }
                for missing in expected.subtracting(present) { batch.put(missing, []) }
            }
            result.indexEntriesChanged = batch.count - pendingKeys
            // Relationship keys and index entries name references too (a key may outlive a row).
            maxReference = max(maxReference, StoreSurvey.surveyKeys(snapshot).maxReference)
            let encodedModel = layout.record.retiring([]).withoutPendingKeys().encode()
            if try mappingEngineErrors("read the model record", { () throws(StoreError) in try snapshot.get(KeyLayout.modelKey) }) != encodedModel {
                batch.put(KeyLayout.modelKey, encodedModel)
                result.rebuiltModelRecord = true
            }
            var record = stored ?? MetadataRecord()
            if stored == nil {
                var metadata: [String: AttributeValue] = [
                    PersistentStore.storeUUIDKey: .string(storeIdentifier ?? UUID().uuidString),
                    PersistentStore.storeTypeKey: .string(PersistentStore.StoreType.strata.rawValue),
                ]
                for entity in model.entities {
                    metadata[PersistentStore.modelVersionHashKeyPrefix + entity.name] = .data(entity.versionHash)
                }
                record.metadata = metadata
                result.rebuiltMetadataRecord = true
            }
            let next = max(record.nextReference, maxReference + 1, shared.nextReference.withLock { $0 })
            if stored == nil || record.rowCounts != counts || record.nextReference != next {
                record.rowCounts = counts
                record.nextReference = next
                batch.put(KeyLayout.metadataKey, record.encode())
                result.rewroteMetadataRecord = true
            }
            result.rowCounts = counts
            result.nextReference = next
            result.storeIdentifier = record.metadata[PersistentStore.storeUUIDKey]?.stringValue
            if !batch.isEmpty {
                let sequence = try mappingEngineErrors("rebuild the indexes and records") { () throws(StoreError) in try engine.commit(batch) }
                layout.notePendingKeysWritten(at: sequence)
                engine.logger.notice("reconciled the store with the model", metadata: [
                    "path": "\(engine.path)", "indexEntriesChanged": "\(result.indexEntriesChanged)",
                    "rebuiltModelRecord": "\(result.rebuiltModelRecord)", "rebuiltMetadataRecord": "\(result.rebuiltMetadataRecord)",
                    "rewroteMetadataRecord": "\(result.rewroteMetadataRecord)", "rows": "\(counts.values.reduce(0, +))",
                ])
            }
            shared.nextReference.withLock { $0 = max($0, next) }
            return result
        }
    }

    /// The metadata record of `snapshot`, or `nil` when it is missing or does not decode (a
    /// record of an earlier format still throws: it says to export the store).
    static func recordIfReadable(in snapshot: Snapshot) throws -> MetadataRecord? {
        guard let bytes = try mappingEngineErrors("read the metadata record", { () throws(StoreError) in try snapshot.get(KeyLayout.metadataKey) }) else {
            return nil
        }
        do {
            return try MetadataRecord.decode(bytes)
        } catch let error as ObjectGraphError where error.code == .storeOpenFailed {
            throw error
        } catch {
            return nil
        }
    }
}

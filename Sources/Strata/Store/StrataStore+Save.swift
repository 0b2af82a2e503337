import Foundation
import ObjectGraph
import StrataEngine

extension StrataStore {
    /// `rows` in the order of their keys (the engine's byte order): their positions are sorted,
    /// not the rows (whose moves would count references), and the keys are copied into one
    /// buffer, so no key array is retained per comparison. Row keys ([KEY-2]: the entity's part,
    /// then the reference in 8 big-endian bytes) are grouped by entity and sorted by reference as
    /// integers; other keys by `memcmp`. Rows already in order are returned as they are.
    static func inKeyOrder<Row>(_ rows: [Row], key: (Row) -> [UInt8]) -> [Row] {
        guard rows.count > 1 else { return rows }
        var bytes: [UInt8] = []
        var ends: [Int] = []
        ends.reserveCapacity(rows.count)
        for row in rows {
            bytes.append(contentsOf: key(row))
            ends.append(bytes.count)
        }
        var order = Array(rows.indices)
        let sorted = bytes.withUnsafeBufferPointer { bytes in
            ends.withUnsafeBufferPointer { ends in
                // Whether the key at `a` sorts before the key at `b`.
                func precedes(_ a: Int, _ b: Int) -> Bool {
                    let aStart = a == 0 ? 0 : ends[a - 1], bStart = b == 0 ? 0 : ends[b - 1]
                    let aCount = ends[a] - aStart, bCount = ends[b] - bStart
                    let common = min(aCount, bCount)
                    guard common > 0, let base = bytes.baseAddress else { return aCount < bCount }
                    let order = memcmp(base + aStart, base + bStart, common)
                    return order != 0 ? order < 0 : aCount < bCount
                }
                if !(1..<ends.count).contains(where: { precedes($0, $0 - 1) }) { return true }
                // Rows of a few entities (a save's, in no order): within an entity's group (the
                // key without its last 8 bytes, the reference, big-endian) the references order
                // the rows, compared as integers; the groups are ordered by their keys.
                func sameGroup(_ a: Int, _ b: Int) -> Bool {
                    let aStart = a == 0 ? 0 : ends[a - 1], bStart = b == 0 ? 0 : ends[b - 1]
                    let count = ends[a] - aStart
                    guard count == ends[b] - bStart, count > 8, let base = bytes.baseAddress else { return false }
                    return memcmp(base + aStart, base + bStart, count - 8) == 0
                }
                var firsts: [Int] = []
                var sortKeys: [(group: Int, reference: UInt64)] = []
                sortKeys.reserveCapacity(ends.count)
                for index in ends.indices {
                    let end = ends[index]
                    guard end - (index == 0 ? 0 : ends[index - 1]) > 8 else { firsts = []; break }
                    var group = firsts.firstIndex { sameGroup($0, index) }
                    if group == nil, firsts.count < 16 {
                        firsts.append(index)
                        group = firsts.count - 1
                    }
                    guard let group else { firsts = []; break }
                    var reference: UInt64 = 0
                    for offset in end - 8..<end { reference = reference << 8 | UInt64(bytes[offset]) }
                    sortKeys.append((group, reference))
                }
                if firsts.isEmpty {
                    order.sort(by: precedes)
                    return false
                }
                var rank = [UInt64](repeating: 0, count: firsts.count)
                for (position, group) in firsts.indices.sorted(by: { precedes(firsts[$0], firsts[$1]) }).enumerated() { rank[group] = UInt64(position) }
                // One integer per row: the group's rank (4 bits), the reference (39 bits: more
                // than any store allocates; its 8 bytes hold it offset by 2^63, [KEY-2], so the
                // top bit flipped gives it back) and the row's position (20 bits), sorted as
                // integers.
                let bias: UInt64 = 1 << 63
                if sortKeys.count < 1 << 20, sortKeys.allSatisfy({ $0.reference ^ bias < 1 << 39 }) {
                    var keyed = sortKeys.indices.map { rank[sortKeys[$0].group] << 59 | (sortKeys[$0].reference ^ bias) << 20 | UInt64($0) }
                    keyed.sort()
                    order = keyed.map { Int($0 & (1 << 20 - 1)) }
                } else {
                    order.sort(by: precedes)
                }
                // Checked: keys of other shapes fall back to comparing whole keys.
                if zip(order, order.dropFirst()).contains(where: { precedes($1, $0) }) { order.sort(by: precedes) }
                return false
            }
        }
        return sorted ? rows : order.map { rows[$0] }
    }

    /// One save: every changed row and the metadata record in one engine transaction, or,
    /// when rows changed since their objects were read, nothing and a
    /// ``ObjectGraphError/Code/mergeConflict`` error with a record per object.
    func execute(_ request: SaveChangesRequest) throws -> PersistentStoreResult {
        do {
            return try executeSave(request)
        } catch let found as SaveConflicts {
            // Made here, with no lock held: a record reads its object's committed values.
            let layout = try storeLayout()
            throw ObjectGraphError.mergeConflicts(found.rows.map { object, row in
                MergeConflict(sourceObject: object, storedRow: row.map { node(from: $0, objectID: object.objectID, layout: layout) })
            })
        } catch let found as SaveDuplicates {
            throw ObjectGraphError.constraintConflicts(found.check.conflicts(found.findings))
        }
    }

    /// The uniqueness-constraint conflicts a save found, thrown out of the save lock.
    ///
    /// `@unchecked Sendable`: thrown and caught on the saving thread, inside ``execute(_:)``.
    struct SaveDuplicates: Error, @unchecked Sendable {
        let check: UniquenessCheck
        let findings: [UniquenessCheck.Finding]
    }

    /// [SAVE-4] Under the save lock: the rows of the store (through the saves in flight) that
    /// hold a probe's values, of the constraint's scope or below it. The constraint's first
    /// attribute's index entries for the first value give the candidates; each candidate's row
    /// is read and compared on every attribute of the constraint (an index key may stand for
    /// several values, [IDX-S2]).
    func holders(
        of probe: UniquenessCheck.Probe, reads: SaveReads, inFlight: [(key: [UInt8], put: Bool)], layout: StoreLayout
    ) throws -> [IncrementalStoreNode] {
        let constraint = probe.constraint
        let root = layout.keySpace(of: constraint.scope)
        var prefix = IndexKey.prefix(root: root, attribute: constraint.attributes[0].name)
        IndexKey.encode(probe.values[0], into: &prefix)
        var nodes: [IncrementalStoreNode] = []
        let rowPrefix = KeyLayout.rowPrefix(root: root)
        for key in reads.keys(from: prefix, to: Self.prefixEnd(prefix), inFlight: inFlight) where key.count == prefix.count + 8 {
            guard let reference = IndexKey.reference(fromIndexKey: key) else { continue }
            var rowKey = rowPrefix
            KeyLayout.appendReference(reference, to: &rowKey)
            guard let bytes = try mappingEngineErrors("read a row of \(root)", { () throws(StoreError) in try reads.get(rowKey) }),
                !layout.isRetiredRow(bytes)
            else { continue }
            let row = try RowBytes(bytes, store: layout, context: .key(root: root, reference: reference), readByEngine: true)
            guard let entity = layout.entity(number: row.entityNumber), entity.isKind(of: constraint.scope) else { continue }
            var same = true
            for (attribute, value) in zip(constraint.attributes, probe.values) where try (row.attribute(atOrdinal: attribute.ordinal) ?? .null) != value {
                same = false
                break
            }
            guard same else { continue }
            nodes.append(node(from: row, objectID: newObjectID(for: entity, referenceObject: .int64(reference)), layout: layout))
        }
        return nodes
    }

    /// The rows a save found in conflict, thrown out of the save lock.
    ///
    /// `@unchecked Sendable`: thrown and caught on the saving thread, inside ``execute(_:)``.
    struct SaveConflicts: Error, @unchecked Sendable {
        let rows: [(ManagedObject, RowBytes?)]
    }

    private func executeSave(_ request: SaveChangesRequest) throws -> PersistentStoreResult {
        guard !isReadOnly else { throw ObjectGraphError(.invalidArgument, "The Strata store \(identifier) is read-only.") }
        let shared = try sharedEngine()
        let engine = shared.engine
        let layout = try storeLayout()
        // Read every value before taking the lock: reading may fire faults. Values come by
        // ordinal, straight from the objects' slots.
        // Rows go to the batch in key order, so the WAL holds them as scans read them.
        let inserts = Self.inKeyOrder(try (request.insertedObjects ?? []).map {
            ($0, try rowKey($0.objectID), try $0.storedValues(skippingUnloadedRelationships: false))
        }, key: \.1)
        // An update carries only what it changes in the row it read (the save writes only over
        // that version, `current` below); the other fields are copied from the row under the
        // lock. An object that read no row yet carries everything it has loaded. Member changes
        // recorded without loading the members stay so: their keys are written from the
        // changes themselves (`RelationshipKeyWriter`).
        let updates = Self.inKeyOrder(try (request.updatedObjects ?? []).map {
            ($0, try rowKey($0.objectID),
             $0.committedVersion != nil
                ? $0.changedStoredValues(leavingUnloadedMembers: true) : try $0.storedValues(skippingUnloadedRelationships: true))
        }, key: \.1)
        let deletes = try (request.deletedObjects ?? []).map { ($0, try rowKey($0.objectID)) }
        let locked = try (request.lockedObjects ?? []).map { ($0, try rowKey($0.objectID)) }
        // Uniqueness constraints: the values the save gives, looked up under the lock.
        let uniqueness = try UniquenessCheck(request)
        if !uniqueness.isEmpty { try waitForConstraintEntries() }
        let metadata = self.metadata

        // [SAVE-3] The save is built under the lock, on the snapshot seen through the saves
        // still in flight, and submitted; the lock is let go before the commit, so saves from
        // other contexts build meanwhile and share its sync.
        let (ticket, number, record) = try shared.saveLock.withLock { saves -> (CommitTicket, UInt64, MetadataRecord) in
            defer { saves.count += 1 }
            // Read under the save lock, which a background index build holds while it writes
            // the record that ends it ([IDX-S9]): a save never writes an older record after it.
            let (modelRecordCurrent, indexEntriesOnDisk) = state.withLock { ($0.modelRecordCurrent, $0.indexEntriesOnDisk) }
            let snapshot = try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try engine.snapshot() }
            let reads = saves.reads(over: snapshot)
            // The record the last save wrote is cached under its sequence: no decode per save.
            var record = try saves.saves.last?.record ?? cachedRecord(in: snapshot)
            record.nextReference = max(record.nextReference, shared.nextReference.withLock { $0 })
            record.metadata = metadata
            // Optimistic locking: rows in conflict, with the row in the store (`nil`: gone); their
            // records are made after the lock is let go (they read the objects' values).
            var conflicts: [(ManagedObject, RowBytes?)] = []
            var batch = WriteBatch()
            /// The object's current row, or `nil` (recorded as a conflict) when it is gone or
            /// not the version the context read.
            func current(_ object: ManagedObject, _ key: [UInt8]) throws -> RowBytes? {
                // [MIG-4] A retired row (of a removed entity) is no object.
                guard let bytes = try mappingEngineErrors("read \(object.objectID)", { () throws(StoreError) in try reads.get(key) }),
                    !layout.isRetiredRow(bytes)
                else {
                    conflicts.append((object, nil))
                    return nil
                }
                let row = try RowBytes(bytes, store: layout, context: .object(object.objectID), readByEngine: true)
                // A fault read no row, so any version is the one it will read.
                if let read = object.committedVersion, read != row.version {
                    conflicts.append((object, row))
                    return nil
                }
                return row
            }
            // [IDX-S3] Index entries change in the same transaction as their rows.
            func indexKeys(_ object: ManagedObject, _ value: (AttributeDescription) throws -> AttributeValue) throws -> [[UInt8]] {
                try IndexKey.keys(
                    reference: try integerReference(object.objectID), entity: object.entity,
                    root: layout.keySpace(of: object.entity), value: value)
            }
            func storedValue(_ row: RowBytes, _ attribute: AttributeDescription) throws -> AttributeValue {
                try row.attribute(atOrdinal: attribute.ordinal) ?? .null
            }
            let relationshipKeys = RelationshipKeyWriter(store: self, layout: layout, reads: reads)
            // An insert's rows, index keys and relationship keys go to the batch kind by kind:
            // the rows are in key order and the engine's sort of the commit finds them as one
            // run instead of interleaved with the other keys.
            var insertedIndexKeys = WriteBatch(), insertedRelationshipKeys = WriteBatch()
            // Row counts added per run of one entity (the inserts are in key order, so an
            // entity's rows are one run): no lookup by entity name per row.
            var run: (entity: EntityDescription, count: Int)? = nil
            for (object, key, values) in inserts {
                if try mappingEngineErrors("check \(object.objectID)", { () throws(StoreError) in try reads.get(key) }) != nil {
                    throw ObjectGraphError(.invalidArgument, "Row of \(object.objectID) already exists; cannot insert it again.", objectID: object.objectID)
                }
                batch.put(key, try encodeRow(values, of: object, version: 1, existing: nil, layout: layout))
                for indexKey in try indexKeys(object, { values[$0.ordinal]?.attributeValue ?? .null }) { insertedIndexKeys.put(indexKey, []) }
                try relationshipKeys.write(object, values: values, existing: nil, into: &insertedRelationshipKeys)
                if let current = run, current.entity === object.entity {
                    run = (current.entity, current.count + 1)
                } else {
                    if let current = run { record.rowCounts[current.entity.name, default: 0] += current.count }
                    run = (object.entity, 1)
                }
            }
            if let current = run { record.rowCounts[current.entity.name, default: 0] += current.count }
            batch.append(contentsOf: insertedIndexKeys)
            batch.append(contentsOf: insertedRelationshipKeys)
            if layout.hasPendingKeys {
                // [MIG-5] A row in an older layout holding members whose keys are pending loses
                // that field when rewritten: its keys go first, as the store holds them before
                // the save (the key changes below, of this row's relationships and of members'
                // to-ones, come after them in the batch and win).
                for (object, key, _) in updates { try putPendingKeys(of: object, rowKey: key, reads: reads, layout: layout, into: &batch) }
            }
            for (object, key, values) in updates {
                guard let existing = try current(object, key) else { continue }
                // [MIG-5] An ordered list a row of an older layout still has as keys is kept
                // from them when the object did not load it.
                let lists = layout.hasPendingKeys ? try pendingLists(of: object, rowKey: key, reads: reads, layout: layout) : [:]
                batch.put(key, try encodeRow(values, of: object, version: existing.version + 1, existing: existing, layout: layout, lists: lists))
                try relationshipKeys.write(object, values: values, existing: existing, into: &batch)
                // [IDX-S3] An attribute's entry moves when its value does. `values` holds the
                // attributes the update writes (the changed ones when the object read this row's
                // version, above): each is compared with the row's (equal values have equal
                // keys; unequal ones with equal keys are deleted then put, and the put wins).
                let reference = try integerReference(object.objectID), root = layout.keySpace(of: object.entity)
                for attribute in object.entity.attributesWithIndexEntries {
                    guard let new = values[attribute.ordinal]?.attributeValue else { continue }
                    let old = try storedValue(existing, attribute)
                    if old == new { continue }
                    batch.delete(IndexKey.key(root: root, attribute: attribute.name, value: old, reference: reference))
                    batch.put(IndexKey.key(root: root, attribute: attribute.name, value: new, reference: reference), [])
                }
            }
            for (object, key) in deletes {
                guard let existing = try current(object, key) else { continue }
                batch.delete(key)
                for indexKey in try indexKeys(object, { try storedValue(existing, $0) }) { batch.delete(indexKey) }
                try relationshipKeys.write(object, values: nil, existing: existing, into: &batch)
                let name = layout.entity(number: existing.entityNumber)?.name ?? object.entity.name
                record.rowCounts[name, default: 1] -= 1
            }
            for (object, key) in locked { _ = try current(object, key) }
            guard conflicts.isEmpty else { throw SaveConflicts(rows: conflicts) }
            if !uniqueness.isEmpty {
                let inFlight = reads.inFlightIndexWrites()
                let duplicates = try uniqueness.findings { try holders(of: $0, reads: reads, inFlight: inFlight, layout: layout) }
                guard duplicates.isEmpty else { throw SaveDuplicates(check: uniqueness, findings: duplicates) }
            }
            batch.put(KeyLayout.metadataKey, record.encodeKeepingCaches())
            // [ROW-5] The model travels with the data, for tools that have no application code.
            if !modelRecordCurrent {
                // [IDX-S9] While a build runs, the record names the entries that exist.
                var written = layout.record
                if let indexEntriesOnDisk { written.versions[0].indexEntries = indexEntriesOnDisk }
                let encoded = written.encode()
                if try mappingEngineErrors("read the model record", { () throws(StoreError) in try reads.get(KeyLayout.modelKey) }) != encoded {
                    batch.put(KeyLayout.modelKey, encoded)
                }
            }
            let ticket = try mappingEngineErrors("commit the save") { () throws(StoreError) in
                try engine.submit(batch, after: saves.saves.last?.ticket)
            }
            return (ticket, saves.submitted(batch, ticket: ticket, record: record), record)
        }
        let sequence: UInt64
        do {
            sequence = try mappingEngineErrors("commit the save") { () throws(StoreError) in try engine.wait(for: ticket) }
        } catch {
            shared.saveLock.withLock { $0.failed(number) }
            throw error
        }
        shared.saveLock.withLock { $0.committed(number) }
        state.withLock {
            $0.modelRecordCurrent = true
            // The record as written, under the commit's sequence (the sequence of every key of
            // the batch): the next save and fetch read it without decoding. A later save's
            // may be there already.
            if ($0.metadataCache?.sequence ?? 0) < sequence { $0.metadataCache = (sequence, record) }
        }
        return .saved
    }

    /// [MIG-5] Puts into `batch` a key for each member the row at `rowKey` (of `object`, as
    /// `reads` sees it) holds in an older layout for a relationship whose keys are pending.
    private func putPendingKeys(
        of object: ManagedObject, rowKey: [UInt8], reads: SaveReads, layout: StoreLayout, into batch: inout WriteBatch
    ) throws {
        guard let bytes = try mappingEngineErrors("read \(object.objectID)", { () throws(StoreError) in try reads.get(rowKey) }) else { return }
        let reference = try integerReference(object.objectID)
        let held = try bytes.withUnsafeBytes { raw in
            try layout.pendingMembers(inRow: raw, context: .object(object.objectID), owner: reference) { key in
                try mappingEngineErrors("read a member of \(object.objectID)") { () throws(StoreError) in try reads.get(key) }
            }
        }
        guard !held.isEmpty else { return }
        for (relationship, members) in held {
            let prefix = ownerPrefix(relationship, owner: object.entity, reference: reference)
            for member in members { batch.put(RelationshipKeys.key(ownerPrefix: prefix, member: member), []) }
        }
    }

    /// [MIG-5] The ordered lists the row at `rowKey` (of `object`, as `reads` sees it) still
    /// has as keys, being in an older layout: by field index of the current layout.
    private func pendingLists(of object: ManagedObject, rowKey: [UInt8], reads: SaveReads, layout: StoreLayout) throws -> [Int: FieldValue] {
        guard let rowLayout = layout.layout(of: object.entity),
            let bytes = try mappingEngineErrors("read \(object.objectID)", { () throws(StoreError) in try reads.get(rowKey) })
        else { return [:] }
        let reference = try integerReference(object.objectID)
        var lists: [Int: FieldValue] = [:]
        for relationship in object.entity.relationships where relationship.isOrdered && layout.keysPending(relationship, in: reads.snapshot) {
            guard let index = RowFields.field(ofOrdinal: relationship.ordinal, in: rowLayout),
                let list = bytes.withUnsafeBytes({ raw in layout.pendingList(of: relationship, row: raw, reference: reference) { reads.members($0) } })
            else { continue }
            lists[index] = list.isEmpty ? .null : .objects(list)
        }
        return lists
    }

    /// The bytes of an object's row ([ROW-1]) from its values by ordinal; a field whose value
    /// is `nil` (a relationship never loaded) keeps `existing`'s value, or the list `lists`
    /// gives for it ([MIG-5]).
    func encodeRow(
        _ values: [PropertyValue?], of object: ManagedObject, version: UInt64, existing: RowBytes?, layout: StoreLayout,
        lists: [Int: FieldValue] = [:]
    ) throws -> [UInt8] {
        let entity = object.entity
        guard let rowLayout = layout.layout(of: entity) else {
            throw ObjectGraphError(.unknownEntity, "Entity \(entity.name) is not in the store's model.", entityName: entity.name)
        }
        func stored(_ id: ManagedObjectID) throws -> StoredObject { try storedObject(id, layout: layout) }
        let keep = existing.flatMap { $0.entityNumber == rowLayout.number ? $0 : nil }
        return try RowEncoder.encode(layout: rowLayout, version: version, entityName: entity.name) { index in
            let field = rowLayout.fields[index]
            guard field.ordinal < values.count, let value = values[field.ordinal] else {
                if let list = lists[index] { return list }
                return try keep?.value(index) ?? .null
            }
            switch value {
            case .attribute(let attribute): return .attribute(attribute)
            case .relationship(.toOne(let id)): return try id.map { .object(try stored($0)) } ?? .null
            case .relationship(.toMany(let ids)): return ids.isEmpty ? .null : .objects(try ids.map(stored))
            }
        }
    }
}

/// The relationship keys ([REL-2]) one save puts and deletes, object by object, in the save's
/// transaction.
struct RelationshipKeyWriter {
    let store: StrataStore
    let layout: StoreLayout
    let reads: SaveReads

    /// The prefix of one owner's keys of `relationship` ([REL-1]).
    private func ownerPrefix(_ relationship: RelationshipDescription, owner: EntityDescription, reference: Int64) -> [UInt8] {
        store.ownerPrefix(relationship, owner: owner, reference: reference)
    }

    /// The key changes of one object: `values` are its values by ordinal (`nil` when the
    /// object is deleted; a `nil` value is a property the update leaves as stored: unchanged,
    /// or a relationship it never loaded),
    /// `existing` its stored row (`nil` when inserted).
    func write(_ object: ManagedObject, values: [PropertyValue?]?, existing: RowBytes?, into batch: inout WriteBatch) throws {
        let entity = object.entity
        guard let rowLayout = layout.layout(of: entity) else { return }
        let reference = try store.integerReference(object.objectID)
        let me = StoredObject(entity: rowLayout.number, reference: reference)
        // A one-to-many's key follows the member's to-one: under the old owner it goes, under
        // the new one it comes.
        for (toOne, _, inversePrefix) in rowLayout.foreignKeys {
            let old = try existing?.object(atOrdinal: toOne.ordinal)
            let new: StoredObject?
            if let values {
                guard toOne.ordinal < values.count, let value = values[toOne.ordinal] else { continue }
                new = try value.relationshipValue?.objectIDs.first.map(stored)
            } else {
                new = nil
            }
            guard old != new else { continue }
            if let old, layout.entity(number: old.entity) != nil {
                batch.delete(RelationshipKeys.key(relationshipPrefix: inversePrefix, owner: old.reference, member: me))
            }
            if let new, layout.entity(number: new.entity) != nil {
                batch.put(RelationshipKeys.key(relationshipPrefix: inversePrefix, owner: new.reference, member: me), [])
            }
        }
        // A deleted owner takes its keys along: a one-to-many's (members whose delete rule left
        // them pointing here dangle, as they would in rows) and a join's.
        if values == nil {
            for relationship in rowLayout.keyedRelationships {
                let prefix = ownerPrefix(relationship, owner: entity, reference: reference)
                for member in reads.members(prefix) { batch.delete(RelationshipKeys.key(ownerPrefix: prefix, member: member)) }
            }
            return
        }
        // A join's keys in this object's direction; the inverse direction is written by the
        // members' saves (the context changes both ends, so both are in the save).
        for (relationship, relationshipPrefix) in rowLayout.joins {
            guard existing == nil || object.hasChange(atOrdinal: relationship.ordinal) else { continue }
            let prefix = relationshipPrefix + KeyLayout.referenceBytes(reference)
            // The old members are the committed value the context holds: this object's keys
            // change only with its row, whose version the save checks, so they are the stored
            // keys whenever the save goes through (a conflict discards the batch). When the
            // object kept what changed since those members, that is the difference itself (the
            // only record of a change made without loading the members: `values` has none).
            if existing != nil, let (added, removed) = object.memberChanges(atOrdinal: relationship.ordinal) {
                for id in removed { batch.delete(RelationshipKeys.key(ownerPrefix: prefix, member: try stored(id))) }
                for id in added { batch.put(RelationshipKeys.key(ownerPrefix: prefix, member: try stored(id)), []) }
                continue
            }
            guard let values, relationship.ordinal < values.count, let value = values[relationship.ordinal] else { continue }
            let ids = value.relationshipValue?.objectIDs ?? []
            if existing == nil {
                for id in ids { batch.put(RelationshipKeys.key(ownerPrefix: prefix, member: try stored(id)), []) }
                continue
            }
            let committed = try object.committedValues(forKeys: [relationship.name])[relationship.name]?.relationshipValue?.objectIDs ?? []
            let oldSet = Set(committed), newSet = Set(ids)
            for id in committed where !newSet.contains(id) { batch.delete(RelationshipKeys.key(ownerPrefix: prefix, member: try stored(id))) }
            for id in ids where !oldSet.contains(id) { batch.put(RelationshipKeys.key(ownerPrefix: prefix, member: try stored(id)), []) }
        }
    }

    func stored(_ id: ManagedObjectID) throws -> StoredObject { try store.storedObject(id, layout: layout) }
}

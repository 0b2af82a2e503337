import ObjectGraph
import StrataEngine

/// [MIG-4] Rows of removed entities of kept hierarchies (subentities), retired by a
/// migration: readers skip them by their headers' entity numbers, and the background build
/// (or a synchronous load, or the next migration) deletes them with every key naming them.
///
/// Their keys are found without decoding a row (the entity no longer has a layout): the
/// references of the retired rows come from the rows' headers; an index entry ([IDX-S1]) ends
/// with its row's reference, a relationship key ([REL-1]) names its owner's reference and its
/// member's entity number, which no later entity reuses ([MIG-1]). So the deletion is, in
/// order, the hierarchy's index entries of those references, every relationship key owned by
/// one or naming a retired entity as member, then the rows: a deletion cut short leaves rows
/// whose keys are gone or still to go, never keys whose rows are gone.
extension StrataStore {
    /// The work of deleting retired rows: the references of the rows, per key space, and
    /// every retired entity number.
    struct RetiredRowDeletion: Sendable {
        /// Per key space, the references of its retired rows.
        var references: [String: Set<Int64>] = [:]
        /// The entity numbers of retired rows, in any key space.
        var numbers: Set<UInt16> = []
        /// The rows whose headers were read to find them.
        var rowsScanned = 0

        var isEmpty: Bool { references.values.allSatisfy(\.isEmpty) && numbers.isEmpty }

        /// Every retired reference, in any key space (references are unique across a store).
        var allReferences: Set<Int64> { references.values.reduce(into: Set()) { $0.formUnion($1) } }

        /// The passes, in order: (start, end, whether a key goes).
        func passes() -> [(from: [UInt8], to: [UInt8], deletes: @Sendable ([UInt8]) -> Bool)] {
            let all = allReferences
            let numbers = numbers
            var passes: [(from: [UInt8], to: [UInt8], deletes: @Sendable ([UInt8]) -> Bool)] = []
            for (space, references) in references.sorted(by: { $0.key < $1.key }) where !references.isEmpty {
                let prefix = [IndexKey.tag] + Array(space.utf8) + [0x00]
                passes.append((prefix, StrataStore.prefixEnd(prefix), { key in IndexKey.reference(fromIndexKey: key).map(references.contains) ?? false }))
            }
            passes.append(([RelationshipKeys.tag], [RelationshipKeys.tag + 1], { key in
                key.withUnsafeBytes { raw in
                    guard raw.count >= 18, let member = RelationshipKeys.member(fromKeyBytes: raw) else { return false }
                    if numbers.contains(member.entity) { return true }
                    let owner = KeyLayout.reference(fromKeyBytes: UnsafeRawBufferPointer(rebasing: raw[..<(raw.count - 10)]))
                    return owner.map(all.contains) ?? false
                }
            }))
            for (space, references) in references.sorted(by: { $0.key < $1.key }) where !references.isEmpty {
                passes.append((KeyLayout.rowPrefix(root: space), KeyLayout.rowPrefixEnd(root: space), { key in
                    KeyLayout.reference(fromRowKey: key).map(references.contains) ?? false
                }))
            }
            return passes
        }
    }

    /// The retired rows `record` lists, found in `snapshot` by their headers (one scan of each
    /// key space that has some).
    static func retiredRowDeletion(of record: ModelRecord, in snapshot: Snapshot) throws -> RetiredRowDeletion {
        var deletion = RetiredRowDeletion()
        for (space, numbers) in record.retiredRows.sorted(by: { $0.key < $1.key }) {
            deletion.numbers.formUnion(numbers)
            var references = Set<Int64>()
            try mappingEngineErrors("scan \(space) rows") { () throws(StoreError) in
                try snapshot.forEachView(from: KeyLayout.rowPrefix(root: space), to: KeyLayout.rowPrefixEnd(root: space)) { key, value in
                    deletion.rowsScanned += 1
                    if value.count >= 4, numbers.contains(RowFields.load(UInt16.self, value, 2)), let reference = KeyLayout.reference(fromKeyBytes: key) {
                        references.insert(reference)
                    }
                    return true
                }
            }
            deletion.references[space] = references
        }
        return deletion
    }

    /// Deletes, into `batch`, every retired row `record` lists and every key naming one,
    /// all at once (a synchronous load, or a migration that starts from such a record).
    static func deleteAllRetiredRows(of record: ModelRecord, in snapshot: Snapshot, into batch: inout WriteBatch) throws {
        guard !record.retiredRows.isEmpty else { return }
        for pass in try retiredRowDeletion(of: record, in: snapshot).passes() {
            snapshot.forEachKey(from: pass.from, to: pass.to) { key in
                if pass.deletes(key) { batch.delete(key) }
                return true
            }
        }
    }

    /// Deletes, into `batch`, the keys of `pass` from `cursor` on that it deletes, stopping
    /// after `limit` keys read; returns the keys read and where to go on (`nil`: the pass is
    /// done).
    static func deleteRetired(
        _ pass: (from: [UInt8], to: [UInt8], deletes: @Sendable ([UInt8]) -> Bool), from cursor: [UInt8], limit: Int,
        in snapshot: Snapshot, into batch: inout WriteBatch
    ) -> (read: Int, next: [UInt8]?) {
        var read = 0
        var next: [UInt8]? = nil
        snapshot.forEachKey(from: cursor, to: pass.to) { key in
            if pass.deletes(key) { batch.delete(key) }
            read += 1
            if read >= limit {
                next = key + [0x00]
                return false
            }
            return true
        }
        return (read, next)
    }
}

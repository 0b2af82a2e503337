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
        /// One pass: a key range, and whether a key of it goes (read in place).
        typealias Pass = (from: [UInt8], to: [UInt8], deletes: @Sendable (UnsafeRawBufferPointer) -> Bool)

        /// Per key space, the references of its retired rows.
        var references: [String: Set<Int64>] = [:]
        /// The entity numbers of retired rows, in any key space.
        var numbers: Set<UInt16> = []
        /// The rows whose headers were read to find them.
        var rowsScanned = 0

        /// Whether the relationship key `key` ([REL-1]) names a retired row: owned by one of
        /// `references` (unique across a store) or naming one of `numbers` as member's entity.
        static func namesRetired(relationshipKey key: UnsafeRawBufferPointer, references: Set<Int64>, numbers: Set<UInt16>) -> Bool {
            guard let member = RelationshipKeys.member(fromKeyBytes: key) else { return false }
            return numbers.contains(member.entity) || (RelationshipKeys.owner(fromKeyBytes: key).map(references.contains) ?? false)
        }

        /// The passes, in order.
        func passes() -> [Pass] {
            let all = references.values.reduce(into: Set<Int64>()) { $0.formUnion($1) }
            let numbers = numbers
            let spaces = references.sorted(by: { $0.key < $1.key }).filter { !$0.value.isEmpty }
            var passes: [Pass] = spaces.map { space, references in
                let prefix = [IndexKey.tag] + Array(space.utf8) + [0x00]
                return (prefix, StrataStore.prefixEnd(prefix), { key in KeyLayout.reference(fromKeyBytes: key).map(references.contains) ?? false })
            }
            passes.append(([RelationshipKeys.tag], [RelationshipKeys.tag + 1], { key in
                Self.namesRetired(relationshipKey: key, references: all, numbers: numbers)
            }))
            passes += spaces.map { space, references in
                (KeyLayout.rowPrefix(root: space), KeyLayout.rowPrefixEnd(root: space), { key in
                    KeyLayout.reference(fromKeyBytes: key).map(references.contains) ?? false
                })
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
            _ = deleteRetired(pass, from: pass.from, limit: .max, in: snapshot, into: &batch)
        }
    }

    /// Deletes, into `batch`, the keys of `pass` from `cursor` on that it deletes, stopping
    /// after `limit` keys read; returns where to go on (`nil`: the pass is done).
    static func deleteRetired(
        _ pass: RetiredRowDeletion.Pass, from cursor: [UInt8], limit: Int, in snapshot: Snapshot, into batch: inout WriteBatch
    ) -> [UInt8]? {
        var read = 0
        var next: [UInt8]? = nil
        snapshot.forEachKeyBytes(from: cursor, to: pass.to) { key in
            if pass.deletes(key) { batch.delete(Array(key)) }
            read += 1
            if read >= limit {
                next = Array(key) + [0x00]
                return false
            }
            return true
        }
        return next
    }
}

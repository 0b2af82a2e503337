import ObjectGraph
import StrataEngine
import StrataSync

/// The register counts of one store's rows: what `managedObjectContextDidRegisterObjects(with:)`
/// and its unregister counterpart add and remove, kept by the store and read by the engine's
/// row cache as a ``RowPinSource``. A row whose count is above zero is never evicted
/// (DESIGN.md, engine invariant 5); a register or unregister costs one lookup here and nothing
/// in the engine.
///
/// Rows are named by their reference alone: references are allocated store-wide, never
/// reused and never shared between hierarchies ([KEY-3]), so a register or unregister needs
/// no entity or root name.
///
/// Thread safety: `counts` is protected by its own lock. The row cache calls ``isPinned(_:)``
/// with the cache's lock held; nothing here calls the engine, so the order is always cache,
/// then counts.
final class RowPins: RowPinSource {
    /// One row, by reference.
    struct Row: Hashable {
        let reference: Int64

        /// The reference mixed with the table's seed (``seededHash(_:seed:)``; references
        /// are allocated by the store, not chosen by callers): one per register and unregister.
        func _rawHashValue(seed: Int) -> Int {
            seededHash(Int(truncatingIfNeeded: reference), seed: seed)
        }
    }

    /// Every row whose count is above zero, with its count (never 0: a row at 0 is removed).
    let counts = Locked<[Row: Int]>([:])

    /// Adds 1 to the count of `row(i)` for each `i` in `0..<count` that has a row (a row
    /// given twice gets 2), under one lock and with no array of rows. O(count).
    func register(_ count: Int, _ row: (Int) -> Row?) {
        counts.withLock { counts in
            for index in 0..<count {
                if let row = row(index) { counts[row, default: 0] += 1 }
            }
        }
    }

    /// Removes 1 from the count of `row(i)` for each `i` in `0..<count` that has a row, and
    /// returns the `i` whose count was already 0 (an unbalanced unregister; their counts are
    /// left at 0). O(count).
    func unregister(_ count: Int, _ row: (Int) -> Row?) -> [Int] {
        counts.withLock { counts in
            var failed: [Int] = []
            for index in 0..<count {
                if let row = row(index), !Self.decrement(row, in: &counts) { failed.append(index) }
            }
            return failed
        }
    }

    /// Removes 1 from the count of `row` in `counts`; `false`, changing nothing, if it is 0.
    private static func decrement(_ row: Row, in counts: inout [Row: Int]) -> Bool {
        guard let index = counts.index(forKey: row) else { return false }
        if counts.values[index] > 1 {
            counts.values[index] -= 1
        } else {
            counts.remove(at: index)
        }
        return true
    }

    /// Whether `key` is the row key ([KEY-1]) of a row whose count is above zero. O(key
    /// length).
    func isPinned(_ key: [UInt8]) -> Bool {
        guard let row = Self.row(ofKey: key) else { return false }
        return counts.withLock { $0[row] != nil }
    }

    /// How many rows have a count above zero.
    var pinnedKeyCount: Int { counts.withLock { $0.count } }

    /// The row a row key names, or `nil` for any other key: `rowTag root 0x00 ref(8)`.
    static func row(ofKey key: [UInt8]) -> Row? {
        let end = key.count - 9
        guard end >= 1, key[0] == KeyLayout.rowTag, key[end] == 0x00,
            let reference = KeyLayout.reference(fromRowKey: key)
        else { return nil }
        return Row(reference: reference)
    }
}

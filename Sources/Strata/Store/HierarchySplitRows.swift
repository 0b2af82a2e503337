/// [MIG-1] The rows a hierarchy split moves (`StrataStore.splitKeySpace`), by reference, with
/// their entity numbers and new key spaces. Every index entry and relationship key of the
/// hierarchy asks it, and most are not moved: once sealed, a bitmap over the references' span
/// answers those without hashing (0.5 KiB of bitmap per moved row at most, 16 MiB in all; a
/// sparser span asks the dictionary alone).
struct HierarchySplitRows {
    private var rows: [Int64: (number: UInt16, space: String)] = [:]
    private var low: Int64 = 0
    private var bits: [UInt64] = []

    /// Whether no row moves.
    var isEmpty: Bool { rows.isEmpty }

    /// Records that the row of `reference` (entity `number`) moves to key space `space`.
    mutating func insert(_ reference: Int64, number: UInt16, space: String) {
        rows[reference] = (number, space)
    }

    /// Builds the bitmap; call once every row is inserted.
    mutating func seal() {
        guard let low = rows.keys.min(), let high = rows.keys.max() else { return }
        let (span, overflow) = high.subtractingReportingOverflow(low)
        guard !overflow, span < min(Int64(rows.count) * 4096, 1 << 27) else { return }
        self.low = low
        bits = [UInt64](repeating: 0, count: Int(span) / 64 + 1)
        for reference in rows.keys {
            let offset = Int(reference - low)
            bits[offset >> 6] |= 1 << UInt64(offset & 63)
        }
    }

    /// The entity number and new key space of the row of `reference`, if it moves.
    subscript(reference: Int64) -> (number: UInt16, space: String)? {
        if !bits.isEmpty {
            let (offset, overflow) = reference.subtractingReportingOverflow(low)
            guard !overflow, offset >= 0, offset < Int64(bits.count) * 64,
                bits[Int(offset >> 6)] & (1 << UInt64(offset & 63)) != 0
            else { return nil }
        }
        return rows[reference]
    }
}

import ObjectGraph

extension StrataStore {
    /// [FETCH-S8] The matching rows of a sorted fetch of objects with a batch size, kept as
    /// their sort keys, references and entities only: read as a scan meets each row, where the
    /// engine holds it, so no row is copied. Only the first batch's rows are read again (by key,
    /// after the sort); the later results are faults, as they would be with their rows copied.
    ///
    /// A first sort key that is a stored string compared without options is kept as its bytes
    /// while every row's is ASCII (byte order is `String` order there), as ``sorted(_:by:entity:keeping:)``
    /// does; a row whose key is not (null, other text) turns the bytes kept so far into strings.
    ///
    /// Thread safety: one fetch's, on its thread.
    final class KeyedRows {
        let descriptors: [FetchSortDescriptor]
        private let readers: [KeyPathReader]
        /// The first key's attribute ordinal when it can be kept as bytes.
        private let firstStringOrdinal: Int?
        /// Whether every first key so far is in ``firstBytes`` (else in ``keys``).
        @exclusivity(unchecked) private var bytesMode: Bool
        /// The rows' references, in reading order.
        @exclusivity(unchecked) private(set) var references: [Int64] = []
        /// The rows' entities (the model's, alive while the fetch is: not retained per row).
        @exclusivity(unchecked) private var entities: [Unmanaged<EntityDescription>] = []
        /// `descriptors.count` keys a row; the first a placeholder while ``bytesMode`` holds.
        @exclusivity(unchecked) private var keys: [FetchValue] = []
        @exclusivity(unchecked) private var firstBytes: [UInt8] = []
        @exclusivity(unchecked) private var ends: [Int] = []

        /// Keys for `descriptors`, or `nil` when a key path does not compile for `entity`.
        init?(descriptors: [FetchSortDescriptor], entity: EntityDescription, source: RowSource) {
            var readers: [KeyPathReader] = []
            for descriptor in descriptors {
                guard let reader = source.reader(of: entity, keyPath: descriptor.keyPath) else { return nil }
                readers.append(reader)
            }
            guard !descriptors.isEmpty else { return nil }
            self.descriptors = descriptors
            self.readers = readers
            firstStringOrdinal = StrataStore.byteOrderedStringOrdinal(of: descriptors[0], entity: entity)
            bytesMode = firstStringOrdinal != nil
        }

        /// The number of rows kept.
        var count: Int { references.count }

        /// The entity of the row at `position`.
        func entity(at position: Int) -> EntityDescription { entities[position].takeUnretainedValue() }

        /// Keeps a matching row's keys, reference and entity.
        func add(_ row: BorrowedRowView) throws {
            var first: FetchValue? = nil
            if bytesMode, let ordinal = firstStringOrdinal {
                let ascii = row.fields.testStringBytes(atOrdinal: ordinal) { bytes -> Bool? in
                    guard Text.isASCII(UnsafeRawBufferPointer(bytes)) else { return nil }
                    firstBytes.append(contentsOf: bytes)
                    ends.append(firstBytes.count)
                    return true
                }
                if ascii == true {
                    first = .null  // not read: the bytes order the rows
                } else {
                    leaveBytesMode()
                }
            }
            keys.append(try first ?? readers[0].value(of: row))
            for index in 1..<readers.count { keys.append(try readers[index].value(of: row)) }
            references.append(row.reference)
            entities.append(Unmanaged.passUnretained(row.entity))
        }

        /// Turns the first keys kept as bytes into strings in ``keys``.
        private func leaveBytesMode() {
            bytesMode = false
            let width = descriptors.count
            var start = 0
            for (index, end) in ends.enumerated() {
                keys[index * width] = .attribute(.string(String(decoding: firstBytes[start..<end], as: UTF8.self)))
                start = end
            }
            firstBytes = []
            ends = []
        }

        /// The rows' positions in sort order (ties in reading order).
        func order() -> [Int] {
            FetchSortDescriptor.sortedIndices(
                keys: keys, count: count, by: descriptors, keeping: nil,
                firstKeyBytes: bytesMode ? (firstBytes, ends) : nil)
        }
    }
}

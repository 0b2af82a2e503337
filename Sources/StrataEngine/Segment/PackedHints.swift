/// A segment's hints with their keys end to end in one buffer: what open reads to build the
/// index, with no array per key (SPEC.md [SEG-4], [REC-5]).
struct PackedHints {
    /// Every key, concatenated in hint order (ascending).
    var keyBytes: [UInt8] = []
    /// The end offset of each key in `keyBytes`.
    var keyEnds: [UInt32] = []
    var isDelete: [Bool] = []
    var sequences: [UInt64] = []
    var locations: [ValueLocation] = []

    var count: Int { keyEnds.count }

    /// The byte range of key `i` in `keyBytes`.
    func keyRange(_ i: Int) -> Range<Int> { (i == 0 ? 0 : Int(keyEnds[i - 1]))..<Int(keyEnds[i]) }

    mutating func append(key: UnsafeRawBufferPointer, isDelete: Bool, sequence: UInt64, location: ValueLocation) {
        keyBytes.append(contentsOf: key)
        keyEnds.append(UInt32(keyBytes.count))
        self.isDelete.append(isDelete)
        sequences.append(sequence)
        locations.append(location)
    }

    /// Hints made elsewhere (repair's salvaged hints), packed.
    init(_ hints: [SegmentReader.Hint]) {
        reserve(hints.count, keyBytes: hints.reduce(0) { $0 + $1.key.count })
        for hint in hints {
            hint.key.withUnsafeBytes { append(key: $0, isDelete: hint.isDelete, sequence: hint.sequence, location: hint.location) }
        }
    }

    init() {}

    mutating func reserve(_ count: Int, keyBytes bytes: Int) {
        keyBytes.reserveCapacity(bytes)
        keyEnds.reserveCapacity(count)
        isDelete.reserveCapacity(count)
        sequences.reserveCapacity(count)
        locations.reserveCapacity(count)
    }
}

extension SegmentReader {
    /// The hints, packed, with the same checks as ``readHints()``.
    func readPackedHints() throws(StoreError) -> PackedHints {
        var hints = PackedHints()
        // Capacity hints only, bounded by the file's size (the footer's count is not trusted yet).
        let expected = min(entryCount, fileSize / 8)
        hints.reserve(Int(expected), keyBytes: Int(min(fileSize, expected) &* 4))
        for block in hintBlocks {
            let raw = try readBlock(block)
            try raw.withBytes { (buffer) throws(StoreError) in
                var reader = ByteReader(buffer)
                while !reader.isAtEnd {
                    guard let kind = reader.u8(), kind == Format.entryPut || kind == Format.entryDelete,
                        let keyCount = reader.length(limit: Format.maxKeyLength), let key = reader.bytes(keyCount),
                        let sequence = reader.varint(), let position = reader.varint(),
                        let offset = reader.varint(), let length = reader.varint(),
                        position < UInt64(dataBlocks.count),
                        offset <= UInt64(dataBlocks[Int(position)].rawCount),
                        length <= UInt64(dataBlocks[Int(position)].rawCount) - offset
                    else {
                        throw StoreError.corruption("hint does not decode", path: path, offset: block.offset)
                    }
                    let keyBuffer = UnsafeRawBufferPointer(key)
                    // [SEG-4] Hints are in strictly ascending key order.
                    if hints.count > 0 {
                        let ascending = hints.keyBytes.withUnsafeBytes { all in
                            compareKeys(UnsafeRawBufferPointer(rebasing: all[hints.keyRange(hints.count - 1)]), keyBuffer) < 0
                        }
                        if !ascending {
                            throw StoreError.corruption("hints are not in ascending key order", path: path, offset: block.offset)
                        }
                    }
                    hints.append(
                        key: keyBuffer, isDelete: kind == Format.entryDelete, sequence: sequence,
                        location: ValueLocation(
                            fileNumber: fileNumber, position: UInt32(position), offset: UInt32(offset), length: UInt32(length)))
                }
            }
        }
        guard UInt64(hints.count) == entryCount else {
            throw StoreError.corruption(
                "footer counts \(entryCount) entries but hints hold \(hints.count)", path: path,
                offset: fileSize - UInt64(Format.segmentFooterSize))
        }
        return hints
    }
}

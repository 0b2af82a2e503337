/// A segment's hints with their keys end to end in one buffer, with no array per key
/// (SPEC.md [SEG-4], [REC-5]): what repair's salvaged hints and ``SegmentReader/readHints()``
/// are kept in. Open reads a segment's hints through a ``SegmentHintCursor`` instead, a block
/// at a time, and holds none of them.
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
        keyBytes.appendBytes(key)
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

/// Hints read one at a time in ascending key order, one segment's: what open merges into the
/// index ([REC-5]). A cursor starts on its first hint (or at its end) and holds one hint at a
/// time; ``advance()`` moves to the next.
protocol HintCursor {
    /// The number of the segment whose hints these are.
    var fileNumber: UInt32 { get }
    /// Whether every hint has been passed (there is no current one).
    var isAtEnd: Bool { get }
    /// The current hint's kind, sequence and location (meaningless at the end).
    var isDelete: Bool { get }
    var sequence: UInt64 { get }
    var location: ValueLocation { get }
    /// The smallest sequence of the hints read so far, the current one included (`nil` before any).
    var minimumSequence: UInt64? { get }
    /// Calls `body` with the current hint's key.
    func withKey<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R
    /// The order of the current hint's key and `other`'s (``compareKeys(_:_:)``).
    func compareKey(with other: borrowing Self) -> Int
    /// Moves to the next hint, checking it.
    mutating func advance() throws(StoreError)
}

/// A segment's hints read from its hint blocks one block at a time, with every check of
/// [SEG-4]: each hint decodes and points inside its data block, keys strictly ascend (across
/// blocks too), and the hints are as many as the footer counts. Only the current block is
/// held, so open makes no copy of a segment's keys besides the index's own.
///
/// A class, so that a merge's array of cursors is read without copying one per access. Thread
/// safety: used by one thread at a time (a build's half owns its cursors).
final class SegmentHintCursor: HintCursor {
    private let reader: SegmentReader
    /// The hint block after the current one.
    @exclusivity(unchecked) private var nextBlock = 0
    /// The current hint block, decompressed, and where its next hint starts.
    @exclusivity(unchecked) private var block: [UInt8] = []
    @exclusivity(unchecked) private var position = 0
    /// The current key's range in `block`; `nil` before the block's first hint.
    @exclusivity(unchecked) private var keyRange: Range<Int>? = nil
    /// The last key of the block before the current one (for the ascending check).
    @exclusivity(unchecked) private var carriedKey: [UInt8]? = nil
    /// Hints read so far, the current one included.
    @exclusivity(unchecked) private(set) var read: UInt64 = 0
    /// A cursor over the keys below a split key (the lower half of a split open): the key, and
    /// the hint block where the upper half's cursor starts. A key at or above the split key ends
    /// this cursor in that block or later, and is out of order before it.
    @exclusivity(unchecked) private var stopKey: [UInt8]? = nil
    @exclusivity(unchecked) private var splitBlock = 0
    /// The hints of the blocks before ``splitBlock``, counted when this cursor reaches it.
    @exclusivity(unchecked) private(set) var readBeforeSplitBlock: UInt64 = 0
    /// Whether the end checks the footer's count (a split's halves are checked together).
    @exclusivity(unchecked) private var checksCount = true
    var fileNumber: UInt32 { reader.fileNumber }
    @exclusivity(unchecked) private(set) var isAtEnd = false
    @exclusivity(unchecked) private(set) var isDelete = false
    @exclusivity(unchecked) private(set) var sequence: UInt64 = 0
    @exclusivity(unchecked) private(set) var location: ValueLocation
    @exclusivity(unchecked) private(set) var minimumSequence: UInt64? = nil

    /// A cursor on the first hint of `reader`'s segment.
    init(_ reader: SegmentReader) throws(StoreError) {
        self.reader = reader
        location = ValueLocation(fileNumber: reader.fileNumber, position: 0, offset: 0, length: 0)
        try advance()
    }

    /// A cursor on the first hint of hint block `block` or a later one (none past the last),
    /// that checks no count: for finding where a split key falls.
    init(_ reader: SegmentReader, startingAt block: Int) throws(StoreError) {
        self.reader = reader
        location = ValueLocation(fileNumber: reader.fileNumber, position: 0, offset: 0, length: 0)
        nextBlock = block
        checksCount = false
        try advance()
    }

    /// The lower half of a split: the hints below `key`, which falls in hint block `splitBlock`.
    init(_ reader: SegmentReader, below key: [UInt8], splitBlock: Int) throws(StoreError) {
        self.reader = reader
        location = ValueLocation(fileNumber: reader.fileNumber, position: 0, offset: 0, length: 0)
        stopKey = key
        self.splitBlock = splitBlock
        checksCount = false
        try advance()
    }

    /// The upper half of a split: the hints from `key` on, starting in hint block `block`.
    init(_ reader: SegmentReader, from key: [UInt8], startingAt block: Int) throws(StoreError) {
        self.reader = reader
        location = ValueLocation(fileNumber: reader.fileNumber, position: 0, offset: 0, length: 0)
        nextBlock = block
        checksCount = false
        try advance()
        // The hints below the key, at the start of the block, are the lower half's: checked
        // and counted here, not returned.
        while !isAtEnd, withKey({ current in key.withUnsafeBytes { compareKeys(current, $0) < 0 } }) {
            try advance()
        }
    }

    func withKey<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        guard let keyRange else { return body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return block.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[keyRange])) }
    }

    func compareKey(with other: SegmentHintCursor) -> Int {
        let mine = keyRange ?? 0..<0, theirs = other.keyRange ?? 0..<0
        return block.withUnsafeBytes { a in
            other.block.withUnsafeBytes { b in
                compareKeys(UnsafeRawBufferPointer(rebasing: a[mine]), UnsafeRawBufferPointer(rebasing: b[theirs]))
            }
        }
    }

    func advance() throws(StoreError) {
        guard !isAtEnd else { return }
        while position >= block.count {
            guard nextBlock < reader.hintBlocks.count else {
                if stopKey != nil, nextBlock <= splitBlock { readBeforeSplitBlock = read }
                guard !checksCount || read == reader.entryCount else {
                    throw StoreError.corruption(
                        "footer counts \(reader.entryCount) entries but hints hold \(read)", path: reader.path,
                        offset: reader.fileSize - UInt64(Format.segmentFooterSize))
                }
                isAtEnd = true
                return
            }
            if let keyRange { carriedKey = Array(block[keyRange]) }
            if stopKey != nil, nextBlock == splitBlock { readBeforeSplitBlock = read }
            block = try reader.readBlock(reader.hintBlocks[nextBlock])
            nextBlock += 1
            position = 0
            keyRange = nil
        }
        let blockOffset = reader.hintBlocks[nextBlock - 1].offset
        let dataBlocks = reader.dataBlocks
        let previous = keyRange
        var parsed: (kind: UInt8, key: Range<Int>, sequence: UInt64, position: UInt64, offset: UInt64, length: UInt64)?
        var end = position
        block.withUnsafeBytes { raw in
            var reader = ByteReader(raw, position: position)
            guard let kind = reader.u8(), kind == Format.entryPut || kind == Format.entryDelete,
                let keyCount = reader.length(limit: Format.maxKeyLength)
            else { return }
            let keyStart = reader.position
            guard reader.bytes(keyCount) != nil, let sequence = reader.varint(), let position = reader.varint(),
                let offset = reader.varint(), let length = reader.varint(),
                position < UInt64(dataBlocks.count),
                offset <= UInt64(dataBlocks[Int(position)].rawCount),
                length <= UInt64(dataBlocks[Int(position)].rawCount) - offset
            else { return }
            parsed = (kind, keyStart..<keyStart + keyCount, sequence, position, offset, length)
            end = reader.position
        }
        guard let parsed else { throw StoreError.corruption("hint does not decode", path: reader.path, offset: blockOffset) }
        // [SEG-4] Hints are in strictly ascending key order.
        let ascending = block.withUnsafeBytes { raw -> Bool in
            let key = UnsafeRawBufferPointer(rebasing: raw[parsed.key])
            if let previous { return compareKeys(UnsafeRawBufferPointer(rebasing: raw[previous]), key) < 0 }
            if let carriedKey { return carriedKey.withUnsafeBytes { compareKeys($0, key) < 0 } }
            return true
        }
        guard ascending else {
            throw StoreError.corruption("hints are not in ascending key order", path: reader.path, offset: blockOffset)
        }
        if let stopKey {
            let reached = block.withUnsafeBytes { raw in
                stopKey.withUnsafeBytes { compareKeys(UnsafeRawBufferPointer(rebasing: raw[parsed.key]), $0) >= 0 }
            }
            if reached {
                // The upper half starts here. Before the split block, a key this large is out of
                // order: the split block's first key, later in the segment, is at most the split key.
                guard nextBlock - 1 >= splitBlock else {
                    throw StoreError.corruption("hints are not in ascending key order", path: reader.path, offset: blockOffset)
                }
                isAtEnd = true
                return
            }
        }
        position = end
        keyRange = parsed.key
        isDelete = parsed.kind == Format.entryDelete
        sequence = parsed.sequence
        location.position = UInt32(parsed.position)
        location.offset = UInt32(parsed.offset)
        location.length = UInt32(parsed.length)
        minimumSequence = min(minimumSequence ?? sequence, sequence)
        read += 1
    }
}

/// Hints already read and packed (repair's salvaged hints), as a cursor.
struct PackedHintCursor: HintCursor {
    private let hints: PackedHints
    private var index = 0
    let fileNumber: UInt32
    private(set) var minimumSequence: UInt64?

    init(_ hints: PackedHints, fileNumber: UInt32) {
        self.hints = hints
        self.fileNumber = fileNumber
        minimumSequence = hints.sequences.first
    }

    var isAtEnd: Bool { index >= hints.count }
    var isDelete: Bool { hints.isDelete[index] }
    var sequence: UInt64 { hints.sequences[index] }
    var location: ValueLocation { hints.locations[index] }

    func withKey<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        hints.keyBytes.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[hints.keyRange(index)])) }
    }

    func compareKey(with other: borrowing PackedHintCursor) -> Int {
        withKey { mine in other.withKey { compareKeys(mine, $0) } }
    }

    mutating func advance() throws(StoreError) {
        guard !isAtEnd else { return }
        index += 1
        if !isAtEnd { minimumSequence = min(minimumSequence ?? hints.sequences[index], hints.sequences[index]) }
    }
}

extension SegmentReader {
    /// The hints, packed, with the checks of ``SegmentHintCursor``.
    func readPackedHints() throws(StoreError) -> PackedHints {
        var hints = PackedHints()
        // Capacity hints only, bounded by the file's size (the footer's count is not trusted yet).
        let expected = min(entryCount, fileSize / 8)
        hints.reserve(Int(expected), keyBytes: Int(min(fileSize, expected) &* 4))
        let cursor = try SegmentHintCursor(self)
        while !cursor.isAtEnd {
            cursor.withKey { hints.append(key: $0, isDelete: cursor.isDelete, sequence: cursor.sequence, location: cursor.location) }
            try cursor.advance()
        }
        return hints
    }
}

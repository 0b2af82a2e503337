/// Reads an immutable segment file (SPEC.md [SEG-*]). Immutable after ``open``; safe to share.
///
/// Open reads only the header, the footer and the block table. Hints are read once, when the
/// engine rebuilds its index; data blocks are read, checked and decompressed on demand.
final class SegmentReader: Sendable {
    /// One block's place in the file, from the block table.
    struct Block: Sendable {
        var offset: UInt64
        var storedCount: UInt32
        var rawCount: UInt32
    }

    /// A hint: what the index needs to know of one entry.
    struct Hint {
        var key: [UInt8]
        var isDelete: Bool
        var sequence: UInt64
        var location: ValueLocation
    }

    let path: String
    let fileNumber: UInt32
    let fileSize: UInt64
    let handle: any FileHandle
    let dataBlocks: [Block]
    let hintBlocks: [Block]
    let entryCount: UInt64
    let maxSequence: UInt64
    /// For a segment repair found by scanning ([SEG-8]): the hints rebuilt from its salvaged
    /// data blocks (positions index ``dataBlocks``), which replace its own. `nil` otherwise.
    let rebuiltHints: [Hint]?
    /// The engine's cache of decompressed blocks that ``cachedDataBlock(_:)`` reads through
    /// (`nil` for a reader outside an engine: the checker's, a salvaged one).
    let blockCache: BlockCache?
    /// This reader's number in ``blockCache``.
    let cacheReader: UInt64

    init(
        path: String, fileNumber: UInt32, fileSize: UInt64, handle: any FileHandle, dataBlocks: [Block],
        hintBlocks: [Block], entryCount: UInt64, maxSequence: UInt64, rebuiltHints: [Hint]? = nil,
        blockCache: BlockCache? = nil
    ) {
        self.path = path
        self.fileNumber = fileNumber
        self.fileSize = fileSize
        self.handle = handle
        self.dataBlocks = dataBlocks
        self.hintBlocks = hintBlocks
        self.entryCount = entryCount
        self.maxSequence = maxSequence
        self.rebuiltHints = rebuiltHints
        self.blockCache = blockCache
        self.cacheReader = blockCache?.newReader() ?? 0
    }

    deinit {
        blockCache?.drop(reader: cacheReader)
        handle.close()
    }

    /// Opens the segment, checking its header, footer and block table; its snapshot reads go
    /// through `blockCache` when given.
    static func open(
        fileSystem: any FileSystem, path: String, fileNumber: UInt32, blockCache: BlockCache? = nil
    ) throws(StoreError) -> SegmentReader {
        let handle = try fileSystem.open(path, mode: .readOnly)
        do throws(StoreError) {
            return try open(handle: handle, path: path, fileNumber: fileNumber, blockCache: blockCache)
        } catch {
            handle.close()
            throw error
        }
    }

    private static func open(
        handle: any FileHandle, path: String, fileNumber: UInt32, blockCache: BlockCache?
    ) throws(StoreError) -> SegmentReader {
        let size = try handle.size()
        let minimum = UInt64(Format.segmentHeaderSize + Format.segmentFooterSize)
        guard size >= minimum else {
            throw StoreError.corruption("segment is \(size) bytes, shorter than header and footer", path: path, offset: 0)
        }
        let header = try handle.read(exactly: Format.segmentHeaderSize, at: 0)
        try header.withBytes { (raw) throws(StoreError) in try checkHeader(raw, path: path, fileNumber: fileNumber) }
        let footerOffset = size - UInt64(Format.segmentFooterSize)
        let footer = try handle.read(exactly: Format.segmentFooterSize, at: footerOffset)
        let parsed = try footer.withBytes { (raw) throws(StoreError) -> Footer in
            try parseFooter(raw, path: path, footerOffset: footerOffset)
        }
        let tableLength = try parsed.checkTablePosition(footerOffset: footerOffset, path: path)
        let tableBytes = try handle.read(exactly: Int(tableLength), at: parsed.table)
        let blocks = try tableBytes.withBytes { (raw) throws(StoreError) -> [Block] in
            try parseTable(raw, footer: parsed, path: path)
        }
        return SegmentReader(
            path: path, fileNumber: fileNumber, fileSize: size, handle: handle,
            dataBlocks: Array(blocks[0..<parsed.data]), hintBlocks: Array(blocks[parsed.data...]),
            entryCount: parsed.entries, maxSequence: parsed.maxSequence, blockCache: blockCache)
    }

    /// [SEG-2] Checks a segment header: magic, CRC, reserved bytes, version, file number.
    static func checkHeader(_ raw: UnsafeRawBufferPointer, path: String, fileNumber: UInt32) throws(StoreError) {
        var reader = ByteReader(raw)
        guard let magic = reader.bytes(8), Array(magic) == Format.segmentMagic else {
            throw StoreError.corruption("segment does not start with the Strata segment magic", path: path, offset: 0)
        }
        let version = reader.u32() ?? 0
        let reserved = reader.u32() ?? 0
        let number = reader.u64() ?? 0
        let crc = reader.u32() ?? 0
        let reservedTail = reader.u32() ?? 0
        guard raw.count >= Format.segmentHeaderSize, crc == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[0..<24])),
            reserved == 0, reservedTail == 0
        else {
            throw StoreError.corruption("segment header checksum mismatch", path: path, offset: 0)
        }
        guard version <= Format.version else {
            throw StoreError(
                .unsupportedVersion, "segment has format version \(version); this build reads up to \(Format.version)",
                path: path, offset: 8)
        }
        guard number == UInt64(fileNumber) else {
            throw StoreError.corruption(
                "segment header names file number \(number), expected \(fileNumber)", path: path, offset: 16)
        }
    }

    /// The fields of a segment footer ([SEG-6]).
    struct Footer {
        var data: Int
        var hints: Int
        var table: UInt64
        var tableCRC: UInt32
        var entries: UInt64
        var maxSequence: UInt64

        /// [SEG-5] [SEG-6] The block table's length, checked against the footer's position
        /// with subtractions only (a crafted offset must not overflow).
        func checkTablePosition(footerOffset: UInt64, path: String) throws(StoreError) -> UInt64 {
            let tableLength = UInt64(data + hints) * UInt64(Format.blockTableEntrySize)
            guard table >= UInt64(Format.segmentHeaderSize), table <= footerOffset, footerOffset - table == tableLength else {
                throw StoreError.corruption(
                    "segment footer's block table position disagrees with the file size", path: path,
                    offset: footerOffset + 24)
            }
            return tableLength
        }
    }

    /// [SEG-6] Parses and checks the 64 footer bytes `raw`, found at `footerOffset`.
    static func parseFooter(_ raw: UnsafeRawBufferPointer, path: String, footerOffset: UInt64) throws(StoreError) -> Footer {
        var reader = ByteReader(raw)
        let magic = reader.bytes(8).map { Array($0) }
        let version = reader.u32() ?? 0
        let flags = reader.u32() ?? 0
        let data = Int(reader.u32() ?? 0), hints = Int(reader.u32() ?? 0)
        let table = reader.u64() ?? 0
        let tableCRC = reader.u32() ?? 0
        let reserved = reader.u32() ?? 0
        let entries = reader.u64() ?? 0, maxSeq = reader.u64() ?? 0
        let crc = reader.u32() ?? 0
        let reservedTail = reader.u32() ?? 0
        guard raw.count == Format.segmentFooterSize, magic == Format.segmentMagic,
            crc == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[0..<56])), flags == 0, reserved == 0, reservedTail == 0
        else { throw StoreError.corruption("segment footer is damaged", path: path, offset: footerOffset) }
        guard version <= Format.version else {
            throw StoreError(
                .unsupportedVersion, "segment footer has format version \(version)", path: path, offset: footerOffset + 8)
        }
        return Footer(data: data, hints: hints, table: table, tableCRC: tableCRC, entries: entries, maxSequence: maxSeq)
    }

    /// [SEG-5] The blocks the table bytes `raw` list, checked against the footer's CRC of them:
    /// contiguous from the header to the table, each within LZ4's largest expansion ([SEG-1]).
    static func parseTable(_ raw: UnsafeRawBufferPointer, footer: Footer, path: String) throws(StoreError) -> [Block] {
        guard CRC32C.checksum(raw) == footer.tableCRC else {
            throw StoreError.corruption("segment block table checksum mismatch", path: path, offset: footer.table)
        }
        let blockCount = footer.data + footer.hints
        var blocks: [Block] = []
        blocks.reserveCapacity(blockCount)
        var reader = ByteReader(raw)
        var expected = UInt64(Format.segmentHeaderSize)
        for index in 0..<blockCount {
            let block = Block(offset: reader.u64() ?? 0, storedCount: reader.u32() ?? 0, rawCount: reader.u32() ?? 0)
            // Blocks are contiguous and end where the table starts ([SEG-5]); LZ4 expands at
            // most 255-fold, which bounds what a crafted raw length can make us allocate.
            guard block.offset == expected, UInt64(block.rawCount) <= UInt64(block.storedCount) * 255 + 64 else {
                throw StoreError.corruption(
                    "block table entry \(index) points at \(block.offset), expected \(expected)", path: path,
                    offset: footer.table + UInt64(index * Format.blockTableEntrySize))
            }
            expected = block.offset + UInt64(Format.blockHeaderSize) + UInt64(block.storedCount)
            guard expected <= footer.table else {
                throw StoreError.corruption("block \(index) runs into the block table", path: path, offset: block.offset)
            }
            blocks.append(block)
        }
        guard expected == footer.table else {
            throw StoreError.corruption("blocks do not end where the block table starts", path: path, offset: footer.table)
        }
        return blocks
    }

    /// Reads, checks and decompresses one block.
    func readBlock(_ block: Block) throws(StoreError) -> [UInt8] {
        let total = Format.blockHeaderSize + Int(block.storedCount)
        let bytes = try handle.read(exactly: total, at: block.offset)
        return try bytes.withBytes { (raw) throws(StoreError) -> [UInt8] in
            try Self.unpack(raw, block: block, path: path)
        }
    }

    /// Checks and decompresses the bytes of `block` (its 16-byte header and stored bytes,
    /// [SEG-3]): the CRC, the lengths the block table recorded, the compression.
    static func unpack(_ raw: UnsafeRawBufferPointer, block: Block, path: String) throws(StoreError) -> [UInt8] {
        let payload = try checkedPayload(raw, block: block, path: path)
        switch payload.compression {
        case Format.compressionNone:
            return Array(payload.bytes)
        default:
            guard let output = LZ4.decompress(payload.bytes, rawCount: Int(block.rawCount)) else {
                throw StoreError.corruption("block does not decompress", path: path, offset: block.offset)
            }
            return output
        }
    }

    /// Reads data block `index` into a ``SegmentBlock``, decompressed in place (no array
    /// copied), with ``readBlock(_:)``'s checks.
    func readSegmentBlock(_ index: Int) throws(StoreError) -> SegmentBlock {
        guard index >= 0, index < dataBlocks.count else {
            throw StoreError.corruption("no data block \(index)", path: path, offset: 0)
        }
        let block = dataBlocks[index]
        let bytes = try handle.read(exactly: Format.blockHeaderSize + Int(block.storedCount), at: block.offset)
        return try bytes.withBytes { (raw) throws(StoreError) -> SegmentBlock in
            let payload = try Self.checkedPayload(raw, block: block, path: path)
            let result = SegmentBlock(count: Int(block.rawCount)) { output in
                payload.compression == Format.compressionNone
                    ? { output.copyMemory(from: payload.bytes); return true }()
                    : LZ4.decompress(payload.bytes, into: output)
            }
            guard let result else { throw StoreError.corruption("block does not decompress", path: path, offset: block.offset) }
            return result
        }
    }

    /// The checked payload of `block`'s bytes (its header and stored bytes, [SEG-3]) and its
    /// compression: the CRC, the lengths the block table recorded, a known compression.
    private static func checkedPayload(
        _ raw: UnsafeRawBufferPointer, block: Block, path: String
    ) throws(StoreError) -> (bytes: UnsafeRawBufferPointer, compression: UInt8) {
        var reader = ByteReader(raw)
        let crc = reader.u32() ?? 0, stored = reader.u32() ?? 0, rawCount = reader.u32() ?? 0
        let compression = reader.u8() ?? 0
        guard raw.count == Format.blockHeaderSize + Int(block.storedCount),
            crc == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[4...])), stored == block.storedCount,
            rawCount == block.rawCount
        else {
            throw StoreError.corruption("block checksum mismatch", path: path, offset: block.offset)
        }
        let payload = UnsafeRawBufferPointer(rebasing: raw[Format.blockHeaderSize...])
        switch compression {
        case Format.compressionNone where stored == rawCount, Format.compressionLZ4:
            return (payload, compression)
        default:
            throw StoreError.corruption("block has unknown compression \(compression)", path: path, offset: block.offset)
        }
    }

    /// The offset in the file of data block `index` (0 when there is none), for errors.
    func blockOffset(_ index: Int) -> UInt64 {
        index >= 0 && index < dataBlocks.count ? dataBlocks[index].offset : 0
    }

    /// Reads data block `index`.
    func readDataBlock(_ index: Int) throws(StoreError) -> [UInt8] {
        guard index >= 0, index < dataBlocks.count else {
            throw StoreError.corruption("no data block \(index)", path: path, offset: 0)
        }
        return try readBlock(dataBlocks[index])
    }

    /// Data block `index`, from the engine's block cache when it holds it, else read (and
    /// cached). For snapshot reads; compaction and open read with ``readDataBlock(_:)``, so
    /// that rewriting a segment does not push out the blocks readers use.
    func cachedDataBlock(_ index: Int) throws(StoreError) -> SegmentBlock {
        guard let blockCache, index >= 0, index < dataBlocks.count else { return try readSegmentBlock(index) }
        let key = BlockCache.Key(reader: cacheReader, position: UInt32(index))
        if let block = blockCache.block(key) { return block }
        let block = try readSegmentBlock(index)
        blockCache.insert(key, block)
        return block
    }

    /// Decodes the entry at `location` from an already decompressed data block.
    func entry(in block: [UInt8], at location: ValueLocation) throws(StoreError) -> LogEntry {
        try withEntryBytes(in: block, at: location) { (bytes, blockOffset) throws(StoreError) -> LogEntry in
            try LogEntry.decodeExactly(bytes, path: path, offset: blockOffset)
        }
    }

    /// Calls `body` with the bytes of the entry at `location` inside `block` (the decompressed
    /// data block `location.position`) and the block's offset in the file, for errors.
    func withEntryBytes<R>(
        in block: [UInt8], at location: ValueLocation, _ body: (UnsafeRawBufferPointer, UInt64) throws(StoreError) -> R
    ) throws(StoreError) -> R {
        let start = Int(location.offset), end = start + Int(location.length)
        guard Int(location.position) < dataBlocks.count else {
            throw StoreError.corruption("no data block \(location.position)", path: path, offset: 0)
        }
        let blockOffset = dataBlocks[Int(location.position)].offset
        guard end <= block.count else {
            throw StoreError.corruption("entry runs past the end of its block", path: path, offset: blockOffset)
        }
        return try block.withBytes { (raw) throws(StoreError) -> R in
            try body(UnsafeRawBufferPointer(rebasing: raw[start..<end]), blockOffset)
        }
    }

    /// Reads one entry (its whole block is read and checked).
    func readEntry(at location: ValueLocation) throws(StoreError) -> LogEntry {
        try entry(in: readDataBlock(Int(location.position)), at: location)
    }

    /// Reads every hint, in key order ([SEG-4]), each with its own key array (the checks are
    /// ``readPackedHints()``'s; open uses the packed form directly).
    func readHints() throws(StoreError) -> [Hint] {
        let packed = try readPackedHints()
        return packed.keyBytes.withUnsafeBytes { all in
            (0..<packed.count).map { i in
                Hint(
                    key: Array(UnsafeRawBufferPointer(rebasing: all[packed.keyRange(i)])), isDelete: packed.isDelete[i],
                    sequence: packed.sequences[i], location: packed.locations[i])
            }
        }
    }

    /// Repair: rebuilds hints by decoding every data block, skipping blocks that fail their checks.
    func salvageHints(dropped: inout [DroppedRange]) -> [Hint] {
        var hints: [Hint] = []
        for (index, block) in dataBlocks.enumerated() {
            guard let raw = try? readBlock(block) else {
                dropped.append(
                    DroppedRange(
                        path: path, offset: block.offset,
                        length: UInt64(Format.blockHeaderSize) + UInt64(block.storedCount),
                        reason: "data block failed its checksum"))
                continue
            }
            raw.withUnsafeBytes { buffer in
                var reader = ByteReader(buffer)
                while !reader.isAtEnd {
                    let start = reader.position
                    guard case .success(let entry) = LogEntry.decode(from: &reader) else {
                        dropped.append(
                            DroppedRange(
                                path: path, offset: block.offset, length: UInt64(buffer.count - start),
                                reason: "entry at \(start) of a block does not decode"))
                        return
                    }
                    hints.append(
                        Hint(
                            key: entry.key, isDelete: entry.isDelete, sequence: entry.sequence,
                            location: ValueLocation(
                                fileNumber: fileNumber, position: UInt32(index), offset: UInt32(start),
                                length: UInt32(reader.position - start))))
                }
            }
        }
        // Damaged files may hold keys out of order or twice: keep the newest entry per key, sorted.
        hints.sort { $0.key == $1.key ? $0.sequence > $1.sequence : $0.key.precedes($1.key) }
        var unique: [Hint] = []
        unique.reserveCapacity(hints.count)
        for hint in hints where unique.last?.key != hint.key { unique.append(hint) }
        return unique
    }
}

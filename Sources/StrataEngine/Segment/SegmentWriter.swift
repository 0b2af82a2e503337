/// Writes an immutable segment file (SPEC.md [SEG-1]…[SEG-6]) from entries in ascending key order.
///
/// ```
/// header (32) | data block… | hint block… | block table | footer (64)
/// ```
///
/// Data blocks hold encoded ``LogEntry`` values, LZ4-compressed. Hint blocks hold one hint per
/// entry (key, sequence, where its entry is), so open rebuilds the index without touching data
/// blocks. The file is written, synced, and only then named in the manifest by the caller.
struct SegmentWriter {
    /// An entry to write. Keys must be strictly ascending.
    struct Input {
        var isDelete: Bool
        var sequence: UInt64
        var key: [UInt8]
        var value: [UInt8]
    }

    /// What was written.
    struct Result {
        var fileSize: UInt64
        /// The location of each input entry, in input order.
        var locations: [ValueLocation]
        var entryCount: Int
        var maxSequence: UInt64
    }

    let fileSystem: any FileSystem
    let path: String
    let fileNumber: UInt32
    let blockSize: Int

    /// Writes and syncs the segment. Throws ``StoreError/Code/invalidArgument`` if keys are not
    /// ascending. A failed sync is passed through `syncFailed`, which gives the error to throw
    /// (the engine is poisoned there, [WAL-4]); the file is left for the next open to remove.
    /// The footer's largest sequence is at least `sequenceFloor` ([SEG-3]): a compaction's
    /// outputs account for the sequences of the segments they replace, tombstones it dropped
    /// included.
    func write(
        _ inputs: [Input], sequenceFloor: UInt64 = 0, syncFailed: (StoreError) -> StoreError = { $0 }
    ) throws(StoreError) -> Result {
        let handle = try fileSystem.open(path, mode: .createNew)
        defer { handle.close() }
        var out = ByteWriter(capacity: 1 << 20)
        var fileOffset: UInt64 = 0
        var table: [(offset: UInt64, stored: UInt32, raw: UInt32)] = []

        func flushOut() throws(StoreError) {
            guard out.count > 0 else { return }
            try handle.write(out.bytes, at: fileOffset)
            fileOffset += UInt64(out.count)
            out.bytes.removeAll(keepingCapacity: true)
        }
        func sealBlock(_ raw: inout ByteWriter) throws(StoreError) {
            guard raw.count > 0 else { return }
            let offset = fileOffset + UInt64(out.count)
            let compressed = raw.bytes.withUnsafeBytes { LZ4.compress($0) }
            let useLZ4 = compressed.count < raw.count
            let stored = useLZ4 ? compressed : raw.bytes
            out.append(Self.blockHeader(stored: stored, rawCount: raw.count, lz4: useLZ4))
            out.append(stored)
            table.append((offset, UInt32(stored.count), UInt32(raw.count)))
            raw.bytes.removeAll(keepingCapacity: true)
            if out.count >= 1 << 20 { try flushOut() }
        }

        out.append(Self.header(fileNumber: fileNumber))
        var locations: [ValueLocation] = []
        locations.reserveCapacity(inputs.count)
        var hints = ByteWriter(capacity: blockSize + 256)
        var block = ByteWriter(capacity: blockSize + 256)
        var maxSequence: UInt64 = sequenceFloor
        var previousKey: [UInt8]? = nil
        var hintList: [(index: Int, location: ValueLocation)] = []
        hintList.reserveCapacity(inputs.count)
        for (index, input) in inputs.enumerated() {
            if let previousKey, !previousKey.precedes(input.key) {
                throw StoreError(.invalidArgument, "segment keys must be strictly ascending", path: path)
            }
            previousKey = input.key
            if block.count >= blockSize { try sealBlock(&block) }
            let offsetInBlock = block.count
            let length = input.key.withUnsafeBytes { key in
                input.value.withUnsafeBytes { value in
                    LogEntry.encode(
                        isDelete: input.isDelete, sequence: input.sequence, key: key, value: value, into: &block)
                }
            }
            let location = ValueLocation(
                fileNumber: fileNumber, position: UInt32(table.count), offset: UInt32(offsetInBlock),
                length: UInt32(length))
            locations.append(location)
            hintList.append((index, location))
            maxSequence = max(maxSequence, input.sequence)
        }
        try sealBlock(&block)
        let dataBlockCount = table.count
        for (index, location) in hintList {
            if hints.count >= blockSize { try sealBlock(&hints) }
            let input = inputs[index]
            hints.u8(input.isDelete ? Format.entryDelete : Format.entryPut)
            hints.varint(UInt64(input.key.count))
            hints.append(input.key)
            hints.varint(input.sequence)
            hints.varint(UInt64(location.position))
            hints.varint(UInt64(location.offset))
            hints.varint(UInt64(location.length))
        }
        try sealBlock(&hints)
        let hintBlockCount = table.count - dataBlockCount

        let tableOffset = fileOffset + UInt64(out.count)
        var tableBytes = ByteWriter(capacity: table.count * Format.blockTableEntrySize)
        for entry in table {
            tableBytes.u64(entry.offset)
            tableBytes.u32(entry.stored)
            tableBytes.u32(entry.raw)
        }
        out.append(tableBytes.bytes)
        var footer = ByteWriter(capacity: Format.segmentFooterSize)
        footer.append(Format.segmentMagic)
        footer.u32(Format.version)
        footer.u32(0)
        footer.u32(UInt32(dataBlockCount))
        footer.u32(UInt32(hintBlockCount))
        footer.u64(tableOffset)
        footer.u32(CRC32C.checksum(tableBytes.bytes))
        footer.u32(0)
        footer.u64(UInt64(inputs.count))
        footer.u64(maxSequence)
        footer.u32(CRC32C.checksum(footer.bytes))
        footer.u32(0)
        out.append(footer.bytes)
        try flushOut()
        do throws(StoreError) { try handle.sync() } catch { throw syncFailed(error) }
        return Result(fileSize: fileOffset, locations: locations, entryCount: inputs.count, maxSequence: maxSequence)
    }

    /// The segment file header ([SEG-2]).
    static func header(fileNumber: UInt32) -> [UInt8] {
        Format.fileHeader(magic: Format.segmentMagic, fileNumber: fileNumber)
    }

    /// A block header ([SEG-3]): CRC of (header bytes 4..<16 + stored bytes), stored length,
    /// raw length, compression, three reserved bytes.
    static func blockHeader(stored: [UInt8], rawCount: Int, lz4: Bool) -> [UInt8] {
        var writer = ByteWriter(capacity: Format.blockHeaderSize)
        writer.u32(0)
        writer.u32(UInt32(stored.count))
        writer.u32(UInt32(rawCount))
        writer.u8(lz4 ? Format.compressionLZ4 : Format.compressionNone)
        writer.u8(0); writer.u8(0); writer.u8(0)
        var crc = writer.bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[4...])) }
        crc = stored.withUnsafeBytes { CRC32C.extend(crc, $0) }
        writer.patchU32(crc, at: 0)
        return writer.bytes
    }
}

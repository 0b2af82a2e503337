/// Encodes WAL records (SPEC.md [WAL-2], [WAL-3]):
///
/// ```
/// payloadCRC u32 | payloadLength u32 | type u8 | reserved u8[3] | headerCRC u32 | payload
/// payload (type 1, batch) = entryCount varint | entry…    (entries: LogEntry, one sequence)
/// ```
enum WALRecord {
    /// One operation of a batch as the WAL encodes it.
    struct Operation {
        var isDelete: Bool
        var key: [UInt8]
        var value: [UInt8]
    }

    /// Where one encoded entry landed, relative to the start of the encoded bytes.
    struct EncodedEntry {
        var offset: Int
        var length: Int
    }

    /// Appends one batch record for `operations` at `sequence` to `writer`, and the position of
    /// each entry to `entries` (in operation order).
    static func appendBatch(
        sequence: UInt64, operations: [Operation], to writer: inout ByteWriter, entries: inout [EncodedEntry]
    ) {
        let headerStart = writer.count
        writer.u32(0)  // payload CRC, patched below
        writer.u32(0)  // payload length, patched below
        writer.u8(Format.walRecordBatch)
        writer.u8(0); writer.u8(0); writer.u8(0)
        writer.u32(0)  // header CRC, patched below
        let payloadStart = writer.count
        writer.varint(UInt64(operations.count))
        // The operations read in place: a copy of each would retain and release its key and value.
        operations.withUnsafeBufferPointer { operations in
            for index in operations.indices {
                let offset = writer.count
                let length = operations[index].key.withUnsafeBytes { key in
                    operations[index].value.withUnsafeBytes { value in
                        LogEntry.encode(
                            isDelete: operations[index].isDelete, sequence: sequence, key: key, value: value, into: &writer)
                    }
                }
                entries.append(EncodedEntry(offset: offset, length: length))
            }
        }
        let payloadLength = writer.count - payloadStart
        let payloadCRC = writer.bytes.withUnsafeBytes {
            CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[payloadStart...]))
        }
        writer.patchU32(payloadCRC, at: headerStart)
        writer.patchU32(UInt32(payloadLength), at: headerStart + 4)
        let headerCRC = writer.bytes.withUnsafeBytes {
            CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[headerStart..<headerStart + 12]))
        }
        writer.patchU32(headerCRC, at: headerStart + 12)
    }

    /// The WAL file header ([WAL-1]).
    static func fileHeader(fileNumber: UInt32) -> [UInt8] {
        Format.fileHeader(magic: Format.walMagic, fileNumber: fileNumber)
    }
}

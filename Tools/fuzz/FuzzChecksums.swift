@testable import StrataEngine

/// Checksum fix-ups: recompute every CRC-32C ([CRC-1]) that a possibly damaged file's own
/// layout lets us locate, so that a mutation gets past the checksums and reaches the parsing
/// behind them. A CRC protects against accidents, not against every byte pattern, so the
/// decoders must be robust to well-checksummed nonsense too.
///
/// Each fix-up follows the file's own length and offset fields as far as they stay inside
/// the file and stops where they do not; it never traps on any input.
enum FuzzChecksums {
    // MARK: Little-endian helpers

    /// The `u32` at `offset` (the caller checks bounds).
    static func u32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[offset + $1]) << (8 * UInt32($1)) }
    }

    /// The `u64` at `offset` (the caller checks bounds).
    static func u64(_ bytes: [UInt8], _ offset: Int) -> UInt64 {
        (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[offset + $1]) << (8 * UInt64($1)) }
    }

    /// Overwrites the four bytes at `offset` with `value`, little-endian (the caller checks bounds).
    static func put(_ value: UInt32, into bytes: inout [UInt8], at offset: Int) {
        for i in 0..<4 { bytes[offset + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt32(i))) }
    }

    /// CRC-32C of `bytes[range]`.
    static func crc(_ bytes: [UInt8], _ range: Range<Int>) -> UInt32 {
        bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[range])) }
    }

    /// A LEB128 varint ([ENC-2]) at `position`, read no further than `end`: its value and
    /// the position after it, or `nil` if it is malformed or runs past `end`.
    static func varint(_ bytes: [UInt8], at position: Int, end: Int) -> (value: UInt64, next: Int)? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        var at = position
        while at < end, shift < 64 {
            let byte = bytes[at]
            at += 1
            if shift == 63 && byte > 1 { return nil }
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return (value, at) }
            shift += 7
        }
        return nil
    }

    // MARK: Structures

    /// [ENT-1] Fixes the CRC of each entry laid back to back in `bytes[start..<end]`, stopping
    /// at the first one that does not fit; returns where it stopped.
    @discardableResult
    static func fixEntries(in bytes: inout [UInt8], from start: Int, to end: Int) -> Int {
        var position = start
        while position < end {
            let kind = bytes[position]
            guard kind == Format.entryPut || kind == Format.entryDelete,
                let sequence = varint(bytes, at: position + 1, end: end),
                let keyCount = varint(bytes, at: sequence.next, end: end),
                let valueCount = varint(bytes, at: keyCount.next, end: end),
                keyCount.value <= UInt64(Format.maxKeyLength), valueCount.value <= UInt64(Format.maxValueLength)
            else { break }
            let crcAt = valueCount.next + Int(keyCount.value) + Int(valueCount.value)
            guard crcAt + 4 <= end else { break }
            put(crc(bytes, position..<crcAt), into: &bytes, at: crcAt)
            position = crcAt + 4
        }
        return position
    }

    /// [MAN-1] Recomputes the body length (from the file size) and the trailing CRC.
    static func fixManifest(_ input: [UInt8]) -> [UInt8] {
        var bytes = input
        guard bytes.count >= Format.manifestHeaderSize + 4 else { return bytes }
        put(UInt32(bytes.count - Format.manifestHeaderSize - 4), into: &bytes, at: 12)
        put(crc(bytes, 0..<bytes.count - 4), into: &bytes, at: bytes.count - 4)
        return bytes
    }

    /// [WAL-1] [WAL-2] [WAL-3] Recomputes the header CRC and, record by record, the entries'
    /// CRCs, the payload CRC and the record header CRC.
    static func fixWAL(_ input: [UInt8]) -> [UInt8] {
        var bytes = input
        guard bytes.count >= 28 else { return bytes }
        put(crc(bytes, 0..<24), into: &bytes, at: 24)
        var position = Format.walHeaderSize
        while position + Format.walRecordHeaderSize <= bytes.count {
            let payloadStart = position + Format.walRecordHeaderSize
            let end = payloadStart + Int(u32(bytes, position + 4))
            if end <= bytes.count {
                if let count = varint(bytes, at: payloadStart, end: end) {
                    fixEntries(in: &bytes, from: count.next, to: end)
                }
                put(crc(bytes, payloadStart..<end), into: &bytes, at: position)
            }
            put(crc(bytes, position..<position + 12), into: &bytes, at: position + 12)
            guard end <= bytes.count else { break }
            position = end
        }
        return bytes
    }

    /// [SEG-2]…[SEG-6] Recomputes the header CRC, the entries' CRCs in uncompressed data
    /// blocks, every block CRC the table points at, the table CRC and the footer CRC.
    static func fixSegment(_ input: [UInt8]) -> [UInt8] {
        var bytes = input
        let headerSize = Format.segmentHeaderSize, footerSize = Format.segmentFooterSize
        guard bytes.count >= headerSize + footerSize else { return bytes }
        put(crc(bytes, 0..<24), into: &bytes, at: 24)
        let footer = bytes.count - footerSize
        let dataCount = UInt64(u32(bytes, footer + 16))
        let blockCount = dataCount + UInt64(u32(bytes, footer + 20))
        let table = u64(bytes, footer + 24)
        let rowSize = UInt64(Format.blockTableEntrySize)
        if table <= UInt64(footer), blockCount <= (UInt64(footer) - table) / rowSize {
            for row in 0..<Int(blockCount) {
                let at = Int(table) + row * Format.blockTableEntrySize
                let offset = u64(bytes, at)
                let stored = UInt64(u32(bytes, at + 8))
                guard offset <= UInt64(footer) else { continue }
                let headerEnd = offset + UInt64(Format.blockHeaderSize)
                guard headerEnd + stored <= UInt64(footer) else { continue }
                let start = Int(offset), end = Int(headerEnd + stored)
                if UInt64(row) < dataCount && bytes[start + 12] == Format.compressionNone {
                    fixEntries(in: &bytes, from: Int(headerEnd), to: end)
                }
                put(crc(bytes, start + 4..<end), into: &bytes, at: start)
            }
            let tableStart = Int(table)
            put(crc(bytes, tableStart..<tableStart + Int(blockCount) * Format.blockTableEntrySize), into: &bytes, at: footer + 32)
        }
        put(crc(bytes, footer..<footer + 56), into: &bytes, at: footer + 56)
        return bytes
    }
}

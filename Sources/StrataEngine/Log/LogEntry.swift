/// One put or delete as it is stored in the WAL and in segment blocks (SPEC.md [ENT-1]):
///
/// ```
/// kind u8 | sequence varint | keyLength varint | valueLength varint | key | value | crc32c u32
/// ```
///
/// The checksum covers every byte of the entry before it, so a point read of one entry can
/// verify it without reading the record or block around it.
struct LogEntry: Equatable, Sendable {
    var isDelete: Bool
    var sequence: UInt64
    var key: [UInt8]
    var value: [UInt8]

    /// Appends the encoded entry to `writer`; returns its length in bytes.
    @discardableResult
    static func encode(
        isDelete: Bool, sequence: UInt64, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer,
        into writer: inout ByteWriter
    ) -> Int {
        let start = writer.count
        // The kind and the three varints (at most 1 + 10 + 10 + 10 bytes) made on the stack and
        // appended at once: a commit encodes every entry here, and a byte-by-byte append was
        // most of that.
        var head: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        withUnsafeMutableBytes(of: &head) { raw in
            raw[0] = isDelete ? Format.entryDelete : Format.entryPut
            var count = ByteWriter.putVarint(sequence, into: raw, at: 1)
            count = ByteWriter.putVarint(UInt64(key.count), into: raw, at: count)
            count = ByteWriter.putVarint(UInt64(value.count), into: raw, at: count)
            writer.append(UnsafeRawBufferPointer(rebasing: raw[0..<count]))
        }
        writer.append(key)
        writer.append(value)
        let crc = writer.bytes.withUnsafeBytes {
            CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[start...]))
        }
        writer.u32(crc)
        return writer.count - start
    }

    /// The encoded length of an entry, without encoding it.
    static func encodedLength(sequence: UInt64, keyCount: Int, valueCount: Int) -> Int {
        1 + varintLength(sequence) + varintLength(UInt64(keyCount)) + varintLength(UInt64(valueCount))
            + keyCount + valueCount + 4
    }

    static func varintLength(_ value: UInt64) -> Int {
        var v = value, n = 1
        while v >= 0x80 { v >>= 7; n += 1 }
        return n
    }

    /// Why an entry failed to decode.
    enum DecodeFailure: Error { case truncated, badKind, tooLong, checksum }

    /// Decodes the entry at `reader`'s position and advances past it.
    ///
    /// With `keyOnly`, the value is checked but not copied (the entry's `value` is empty): for
    /// readers that need only keys, such as recovery's replay. Reads that know the key from
    /// the index check entries in place instead (``valueRange(in:key:sequence:path:offset:)``).
    static func decode(from reader: inout ByteReader, keyOnly: Bool = false) -> Result<LogEntry, DecodeFailure> {
        let start = reader.position
        guard let kind = reader.u8() else { return .failure(.truncated) }
        guard kind == Format.entryPut || kind == Format.entryDelete else { return .failure(.badKind) }
        guard let sequence = reader.varint(), let keyCount = reader.varint(),
            let valueCount = reader.varint()
        else { return .failure(.truncated) }
        guard keyCount <= UInt64(Format.maxKeyLength), valueCount <= UInt64(Format.maxValueLength) else {
            return .failure(.tooLong)
        }
        guard let key = reader.array(Int(keyCount)) else { return .failure(.truncated) }
        let value: [UInt8]
        if keyOnly {
            guard reader.skip(Int(valueCount)) else { return .failure(.truncated) }
            value = []
        } else {
            guard let bytes = reader.array(Int(valueCount)) else { return .failure(.truncated) }
            value = bytes
        }
        let end = reader.position
        guard let stored = reader.u32() else { return .failure(.truncated) }
        let actual = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: reader.bytes[start..<end]))
        guard stored == actual else { return .failure(.checksum) }
        return .success(LogEntry(isDelete: kind == Format.entryDelete, sequence: sequence, key: key, value: value))
    }

    /// The value of the one put entry occupying all of `bytes`, its framing checked in place
    /// (its length, and that it is a put of `key` at `sequence`, the entry the index expects),
    /// as a range of `bytes`: a read that copies nothing. Throws a corruption error naming
    /// `path` and `offset` otherwise. The entry's checksum is not checked: its bytes were
    /// verified when read from disk (a segment block's CRC, [SEG-3]; a WAL record's, [WAL-5]).
    static func valueRange(
        in bytes: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, sequence: UInt64, path: @autoclosure () -> String, offset: UInt64
    ) throws(StoreError) -> Range<Int> {
        var reader = ByteReader(bytes)
        // The path only for an error (a read of a valid entry touches no string).
        func fail(_ what: String) -> StoreError { StoreError.corruption(what, path: path(), offset: offset) }
        guard let kind = reader.u8(), let stored = reader.varint(), let keyCount = reader.varint(),
            let valueCount = reader.varint()
        else { throw fail("entry does not decode (truncated)") }
        guard kind == Format.entryPut, stored == sequence, keyCount == UInt64(key.count) else {
            throw fail("entry on disk is not the one the index expects")
        }
        let keyStart = reader.position
        guard valueCount <= UInt64(Format.maxValueLength),
            bytes.count == keyStart + key.count + Int(valueCount) + 4
        else { throw fail("entry's recorded length does not match its bytes") }
        guard key.elementsEqualBytes(UnsafeRawBufferPointer(rebasing: bytes[keyStart..<keyStart + key.count])) else {
            throw fail("entry on disk is not the one the index expects")
        }
        return keyStart + key.count..<bytes.count - 4
    }

    /// Decodes exactly one entry occupying all of `bytes`, or throws a corruption error naming
    /// `path` and `offset` (the entry's position on disk).
    static func decodeExactly(_ bytes: UnsafeRawBufferPointer, path: String, offset: UInt64) throws(StoreError) -> LogEntry {
        var reader = ByteReader(bytes)
        switch decode(from: &reader) {
        case .success(let entry) where reader.isAtEnd:
            return entry
        case .success:
            throw StoreError.corruption("entry is shorter than its recorded length", path: path, offset: offset)
        case .failure(let failure):
            throw StoreError.corruption("entry does not decode (\(failure))", path: path, offset: offset)
        }
    }
}

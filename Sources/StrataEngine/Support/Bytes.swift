import Glibc

/// Appends little-endian integers and varints to a byte array. All on-disk integers are
/// little-endian (SPEC.md [ENC-1]); varints are LEB128, at most 10 bytes (SPEC.md [ENC-2]).
struct ByteWriter {
    var bytes: [UInt8]

    init(capacity: Int = 0) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    var count: Int { bytes.count }

    mutating func u8(_ value: UInt8) { bytes.append(value) }

    mutating func u32(_ value: UInt32) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func u64(_ value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func varint(_ value: UInt64) {
        // Made on the stack and appended at once, not appended a byte at a time.
        var buffer: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &buffer) { raw in
            let end = Self.putVarint(value, into: raw, at: 0)
            bytes.appendBytes(UnsafeRawBufferPointer(rebasing: raw[0..<end]))
        }
    }

    /// Writes `value` as a varint at `offset` of `raw`, which has room for its (at most 10)
    /// bytes; returns the offset after it.
    @inline(__always)
    static func putVarint(_ value: UInt64, into raw: UnsafeMutableRawBufferPointer, at offset: Int) -> Int {
        var v = value, position = offset
        while v >= 0x80 {
            raw[position] = UInt8(truncatingIfNeeded: v) | 0x80
            position += 1
            v >>= 7
        }
        raw[position] = UInt8(v)
        return position + 1
    }

    mutating func append(_ other: [UInt8]) { bytes.append(contentsOf: other) }

    mutating func append(_ other: UnsafeRawBufferPointer) { bytes.appendBytes(other) }

    /// Overwrites four bytes at `offset` with `value`, little-endian.
    mutating func patchU32(_ value: UInt32, at offset: Int) {
        withUnsafeBytes(of: value.littleEndian) { raw in
            for i in 0..<4 { bytes[offset + i] = raw[i] }
        }
    }
}

/// Reads little-endian integers and varints from a byte buffer, with every read bounds-checked.
/// A read past the end, or a malformed varint, returns `nil`: decoders turn that into a
/// corruption error that names the file and offset.
struct ByteReader {
    let bytes: UnsafeRawBufferPointer
    private(set) var position: Int

    init(_ bytes: UnsafeRawBufferPointer, position: Int = 0) {
        self.bytes = bytes
        self.position = position
    }

    var remaining: Int { bytes.count - position }
    var isAtEnd: Bool { position >= bytes.count }

    mutating func u8() -> UInt8? {
        guard remaining >= 1 else { return nil }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func u32() -> UInt32? {
        guard remaining >= 4 else { return nil }
        defer { position += 4 }
        return UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: UInt32.self))
    }

    mutating func u64() -> UInt64? {
        guard remaining >= 8 else { return nil }
        defer { position += 8 }
        return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: UInt64.self))
    }

    mutating func varint() -> UInt64? {
        // One byte (a value below 128): most lengths and many sequence numbers.
        if position < bytes.count, bytes[position] < 0x80 {
            position += 1
            return UInt64(bytes[position - 1])
        }
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while shift < 64 {
            guard let byte = u8() else { return nil }
            if shift == 63 && byte > 1 { return nil }
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return result }
            shift += 7
        }
        return nil
    }

    /// A varint that must fit in an `Int` no larger than `limit`.
    mutating func length(limit: Int) -> Int? {
        guard let value = varint(), value <= UInt64(limit) else { return nil }
        return Int(value)
    }

    mutating func bytes(_ count: Int) -> UnsafeRawBufferPointer? {
        guard count >= 0, remaining >= count else { return nil }
        defer { position += count }
        return UnsafeRawBufferPointer(rebasing: bytes[position..<position + count])
    }

    mutating func array(_ count: Int) -> [UInt8]? {
        bytes(count).map { Array($0) }
    }

    mutating func skip(_ count: Int) -> Bool {
        guard count >= 0, remaining >= count else { return false }
        position += count
        return true
    }
}

extension Array where Element == UInt8 {
    /// `withUnsafeBytes` that keeps the body's typed `StoreError` (the standard one `rethrows`,
    /// which erases the error type).
    @inline(__always)
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws(StoreError) -> R) throws(StoreError) -> R {
        let result: Result<R, StoreError> = withUnsafeBytes { raw in
            Result { () throws(StoreError) -> R in try body(raw) }
        }
        return try result.get()
    }
}

extension Array where Element == UInt8 {
    /// Whether `self` sorts before `other` in unsigned byte order (a prefix first), compared
    /// with `memcmp`: the one key order of the engine.
    @inline(__always)
    package func precedes(_ other: [UInt8]) -> Bool {
        withUnsafeBufferPointer { a in
            other.withUnsafeBufferPointer { b in
                let common = Swift.min(a.count, b.count)
                guard common > 0, let pa = a.baseAddress, let pb = b.baseAddress else { return a.count < b.count }
                let order = memcmp(pa, pb, common)
                return order != 0 ? order < 0 : a.count < b.count
            }
        }
    }
}

extension UnsafeRawBufferPointer {
    /// Whether `self` and `other` hold the same bytes, compared with `memcmp`.
    @inline(__always)
    package func elementsEqualBytes(_ other: UnsafeRawBufferPointer) -> Bool {
        guard count == other.count else { return false }
        guard count > 0, let a = baseAddress, let b = other.baseAddress else { return true }
        return memcmp(a, b, count) == 0
    }
}

extension Array where Element == UInt8 {
    /// Appends `raw`'s bytes with one copy. `append(contentsOf:)` given an
    /// `UnsafeRawBufferPointer` copies it a byte at a time through the sequence's iterator
    /// (about 90 instructions for a 30-byte key); a typed buffer of `UInt8` is copied whole.
    @inline(__always)
    package mutating func appendBytes(_ raw: UnsafeRawBufferPointer) {
        append(contentsOf: UnsafeBufferPointer(start: raw.baseAddress?.assumingMemoryBound(to: UInt8.self), count: raw.count))
    }
}

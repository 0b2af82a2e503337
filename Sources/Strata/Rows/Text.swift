/// Strings made from stored UTF-8 bytes.
enum Text {
    /// The text of `bytes`, or `nil` when they are not valid UTF-8. ASCII is copied without
    /// validation, and ASCII of up to 15 bytes (most names, words, codes) is made in place as
    /// a small string: no allocation, and none of the repairing decoder's work, which is most
    /// of reading such a value.
    @inline(__always)
    static func decode(_ bytes: UnsafeRawBufferPointer) -> String? {
        guard isASCII(bytes) else { return String(validating: bytes, as: UTF8.self) }
        guard bytes.count <= 15, let base = bytes.baseAddress else { return String(decoding: bytes, as: UTF8.self) }
        // A capacity of at most 15 makes a small string; ASCII takes its fast path (no
        // validation or repair).
        return String(unsafeUninitializedCapacity: bytes.count) { buffer in
            buffer.baseAddress?.initialize(from: base.assumingMemoryBound(to: UInt8.self), count: bytes.count)
            return bytes.count
        }
    }

    /// Whether every byte of `bytes` is below 0x80, read eight bytes at a time.
    @inline(__always)
    static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var bits: UInt64 = 0
        var index = 0
        while index + 8 <= bytes.count {
            bits |= bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            index += 8
        }
        while index < bytes.count {
            bits |= UInt64(bytes[index])
            index += 1
        }
        return bits & 0x8080_8080_8080_8080 == 0
    }
}

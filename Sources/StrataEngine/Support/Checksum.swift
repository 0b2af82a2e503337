import CISAL

/// CRC-32C (Castagnoli), computed by Intel ISA-L's hardware-accelerated `crc32_iscsi`.
///
/// Every checksum StrataEngine writes is a standard CRC-32C: initial value `0xFFFFFFFF`, final
/// XOR `0xFFFFFFFF`, check value `0xE3069283` for the ASCII bytes `123456789` (SPEC.md [CRC-1]).
public enum CRC32C {
    /// The CRC-32C of `bytes`.
    @inlinable
    public static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        extend(0, bytes)
    }

    /// The CRC-32C of `bytes`.
    public static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0) }
    }

    /// The CRC-32C of the concatenation of the bytes that gave `crc` and `bytes`.
    @inlinable
    public static func extend(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return crc }
        var state = ~crc
        var pointer = UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: UInt8.self))
        var remaining = bytes.count
        // crc32_iscsi takes an Int32 length; feed large buffers in pieces.
        while remaining > 0 {
            let piece = min(remaining, 1 << 30)
            state = crc32_iscsi(pointer, Int32(piece), state)
            pointer += piece
            remaining -= piece
        }
        return ~state
    }
}

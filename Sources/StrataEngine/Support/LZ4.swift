import CLZ4

/// LZ4 block compression through liblz4 (`LZ4_compress_default` / `LZ4_decompress_safe`).
public enum LZ4 {
    /// The largest input liblz4 accepts in one block.
    public static let maxInputSize = Int(LZ4_MAX_INPUT_SIZE)

    /// Compresses `input` into a new LZ4 block. `input.count` must not exceed ``maxInputSize``.
    public static func compress(_ input: UnsafeRawBufferPointer) -> [UInt8] {
        precondition(input.count <= maxInputSize, "LZ4 input larger than LZ4_MAX_INPUT_SIZE")
        let bound = Int(LZ4_compressBound(Int32(input.count)))
        var output = [UInt8](repeating: 0, count: max(bound, 1))
        let written = output.withUnsafeMutableBytes { out -> Int32 in
            guard let source = input.baseAddress, input.count > 0 else { return 0 }
            return LZ4_compress_default(
                source.assumingMemoryBound(to: CChar.self),
                // The output holds at least one byte, so its base address exists.
                out.baseAddress!.assumingMemoryBound(to: CChar.self),
                Int32(input.count), Int32(out.count))
        }
        output.removeLast(output.count - Int(written))
        return output
    }

    /// Decompresses an LZ4 block into `output`, which it must fill exactly. Returns whether
    /// it did; never reads or writes out of bounds (a short result leaves the rest zeroed).
    public static func decompress(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) -> Bool {
        guard output.count <= maxInputSize, input.count <= Int(Int32.max) else { return false }
        guard let target = output.baseAddress, output.count > 0 else { return input.count == 0 }
        guard let source = input.baseAddress, input.count > 0 else { return false }
        let produced = LZ4_decompress_safe(
            source.assumingMemoryBound(to: CChar.self), target.assumingMemoryBound(to: CChar.self),
            Int32(input.count), Int32(output.count))
        let written = Int(max(produced, 0))
        if written < output.count { (target + written).initializeMemory(as: UInt8.self, repeating: 0, count: output.count - written) }
        return produced == Int32(output.count)
    }

    /// Decompresses an LZ4 block that must expand to exactly `rawCount` bytes.
    /// Returns `nil` when the block is malformed; never reads or writes out of bounds.
    public static func decompress(_ input: UnsafeRawBufferPointer, rawCount: Int) -> [UInt8]? {
        guard rawCount >= 0, rawCount <= maxInputSize, input.count <= Int(Int32.max) else { return nil }
        if rawCount == 0 { return input.count == 0 ? [] : nil }
        guard let source = input.baseAddress, input.count > 0 else { return nil }
        var produced: Int32 = 0
        // No zero-fill: LZ4 writes every byte it reports; anything short is zeroed before use.
        let output = [UInt8](unsafeUninitializedCapacity: rawCount) { buffer, initialized in
            guard let base = buffer.baseAddress else { return }
            produced = LZ4_decompress_safe(
                source.assumingMemoryBound(to: CChar.self),
                UnsafeMutableRawPointer(base).assumingMemoryBound(to: CChar.self),
                Int32(input.count), Int32(rawCount))
            let written = Int(max(produced, 0))
            if written < rawCount { (base + written).initialize(repeating: 0, count: rawCount - written) }
            initialized = rawCount
        }
        return produced == Int32(rawCount) ? output : nil
    }
}

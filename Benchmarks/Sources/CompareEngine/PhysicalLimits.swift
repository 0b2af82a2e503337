import BenchmarkSupport
import CLZ4
import Foundation
import Glibc

/// What the machine does without any store, measured in the same run: sequential write
/// bandwidth, the latency of a small write plus `fdatasync`, and LZ4 speed on the benchmark's
/// own keys and values (liblz4 called directly, the library StrataEngine links).
enum PhysicalLimits {
    /// Writes `mebibytes` MiB of random bytes to a fresh file at `path` in 1 MiB `pwrite`s,
    /// then one `fdatasync`; returns MB/s (10^6 bytes) from `open` to the end of the sync. The
    /// file is removed.
    static func sequentialWrite(path: String, mebibytes: Int) throws -> Double {
        Double(mebibytes << 20) / 1e6 / (try RawDisk.sequentialWriteSeconds(path: path, mebibytes: mebibytes))
    }

    /// Microseconds each of `samples` rounds of one `bytes`-byte `pwrite` plus `fdatasync` took,
    /// sorted. With `append`, every write extends the file (as a log append does, so the sync
    /// also commits the new size); otherwise it rewrites the first bytes of a preallocated file.
    static func syncLatencies(path: String, samples: Int, bytes: Int, append: Bool) throws -> [Double] {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw rawError("open", path) }
        defer {
            close(fd)
            unlink(path)
        }
        let record = [UInt8](repeating: 0x5A, count: bytes)
        if !append {
            guard posix_fallocate(fd, 0, off_t(max(bytes, 4096))) == 0, fdatasync(fd) == 0 else {
                throw rawError("preallocate", path)
            }
        }
        var latencies: [Double] = []
        latencies.reserveCapacity(samples)
        for sample in 0..<samples {
            let offset = append ? off_t(sample * bytes) : 0
            let start = ContinuousClock.now
            let written = record.withUnsafeBytes { pwrite(fd, $0.baseAddress, bytes, offset) }
            guard written == bytes else { throw rawError("pwrite", path) }
            guard fdatasync(fd) == 0 else { throw rawError("fdatasync", path) }
            latencies.append(seconds(ContinuousClock.now - start) * 1e6)
        }
        return latencies.sorted()
    }

    /// LZ4 (`LZ4_compress_default`, `LZ4_decompress_safe`) on 16 KiB blocks of keys and values
    /// laid out as a log would hold them, `megabytes` MB in all, on one thread: the ratio
    /// (input / output) and MB/s of uncompressed data each way, the better of three passes.
    static func lz4Speed(megabytes: Int) throws -> (ratio: Double, compress: Double, decompress: Double) {
        let blockSize = 16 << 10
        let data = Workload.logBytes(megabytes: megabytes)
        let blocks = data.count / blockSize
        let bound = Int(LZ4_compressBound(Int32(blockSize)))
        var compressed = [UInt8](repeating: 0, count: blocks * bound)
        var sizes = [Int](repeating: 0, count: blocks)
        var restored = [UInt8](repeating: 0, count: blockSize)
        var bestCompress = Double.infinity, bestDecompress = Double.infinity
        for _ in 0..<3 {
            let (_, compressSeconds) = try timed { () throws in
                try data.withUnsafeBytes { input in
                    try compressed.withUnsafeMutableBytes { output in
                        for block in 0..<blocks {
                            let size = LZ4_compress_default(
                                input.baseAddress.map { ($0 + block * blockSize).assumingMemoryBound(to: CChar.self) },
                                output.baseAddress.map { ($0 + block * bound).assumingMemoryBound(to: CChar.self) },
                                Int32(blockSize), Int32(bound))
                            guard size > 0 else { throw lz4Error("LZ4_compress_default returned \(size)") }
                            sizes[block] = Int(size)
                        }
                    }
                }
            }
            bestCompress = min(bestCompress, compressSeconds)
            let (_, decompressSeconds) = try timed { () throws in
                try compressed.withUnsafeBytes { input in
                    try restored.withUnsafeMutableBytes { output in
                        for block in 0..<blocks {
                            let size = LZ4_decompress_safe(
                                input.baseAddress.map { ($0 + block * bound).assumingMemoryBound(to: CChar.self) },
                                output.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(sizes[block]),
                                Int32(blockSize))
                            guard size == Int32(blockSize) else { throw lz4Error("LZ4_decompress_safe returned \(size)") }
                        }
                    }
                }
            }
            bestDecompress = min(bestDecompress, decompressSeconds)
        }
        guard restored[...] == data[((blocks - 1) * blockSize)..<(blocks * blockSize)] else {
            throw lz4Error("the last block did not round-trip")
        }
        let total = Double(blocks * blockSize)
        return (total / Double(sizes.reduce(0, +)), total / 1e6 / bestCompress, total / 1e6 / bestDecompress)
    }

    private static func rawError(_ operation: String, _ path: String) -> EngineComparisonError {
        EngineComparisonError(system: "raw disk", operation: operation, path: path, message: errnoMessage())
    }

    private static func lz4Error(_ message: String) -> EngineComparisonError {
        EngineComparisonError(system: "LZ4", operation: "benchmark", path: nil, message: message)
    }
}

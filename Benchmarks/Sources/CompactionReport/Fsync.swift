import BenchmarkSupport
import Glibc

/// The disk's sync latency, for reading the commit tails: a WAL rollover and a compaction swap
/// each sync files and the directory while commits wait for the writer lock.
enum FsyncProbe {
    /// Writes 4 KiB at the start of a fresh file at `path` and `fdatasync`s it, `count` times;
    /// returns each sync's latency in milliseconds, sorted. The file is removed.
    static func latencies(path: String, count: Int = 20) throws -> [Double] {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw BenchmarkError("open \(path): \(String(cString: strerror(errno)))") }
        defer {
            close(fd)
            unlink(path)
        }
        let block = [UInt8](repeating: 0x5A, count: 4096)
        var results: [Double] = []
        for _ in 0..<count {
            let written = block.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
            guard written == block.count else { throw BenchmarkError("pwrite: \(String(cString: strerror(errno)))") }
            let (status, elapsed) = timed { fdatasync(fd) }
            guard status == 0 else { throw BenchmarkError("fdatasync: \(String(cString: strerror(errno)))") }
            results.append(elapsed * 1e3)
        }
        return results.sorted()
    }
}

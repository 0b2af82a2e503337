import Foundation
import Glibc

/// What the disk does without any store, for the reports' physical-limit rows.
public enum RawDisk {
    /// Writes `mebibytes` MiB of random bytes to a fresh file at `path` in 1 MiB `pwrite`s,
    /// then one `fdatasync`. Returns the seconds from `open` to the end of the sync. The file
    /// is removed.
    public static func sequentialWriteSeconds(path: String, mebibytes: Int) throws -> Double {
        var random = SplitMix64(seed: 0xB10C)
        let chunk = (0..<(1 << 20)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        defer { unlink(path) }
        func failure(_ call: String) -> BenchmarkError { BenchmarkError("\(call) \(path): \(String(cString: strerror(errno)))") }
        let (_, elapsed) = try timed { () throws in
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw failure("open") }
            defer { close(fd) }
            try chunk.withUnsafeBytes { buffer in
                guard let base = buffer.baseAddress else { return }
                for index in 0..<mebibytes {
                    var done = 0
                    while done < buffer.count {
                        let written = pwrite(fd, base + done, buffer.count - done, off_t(index) << 20 + off_t(done))
                        if written < 0 && errno == EINTR { continue }
                        guard written > 0 else { throw failure("pwrite") }
                        done += written
                    }
                }
            }
            guard fdatasync(fd) == 0 else { throw failure("fdatasync") }
        }
        return elapsed
    }
}

extension Workload {
    /// At least `megabytes` MB of the workload's keys and values, one after the other, as a
    /// log lays them out: the data the LZ4 baselines compress.
    public static func logBytes(megabytes: Int) -> [UInt8] {
        let values = Workload.values()
        var data: [UInt8] = []
        data.reserveCapacity(megabytes * 1_000_000 + 4096)
        var index = 0
        while data.count < megabytes * 1_000_000 {
            data += Workload.key(index)
            data += values[index % values.count]
            index += 1
        }
        return data
    }
}

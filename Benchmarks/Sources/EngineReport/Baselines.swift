import BenchmarkSupport
import Foundation
import Glibc

/// What the machine does without the engine: sequential write bandwidth and LZ4 speed.
enum Baselines {
    /// Writes `mebibytes` MiB to a fresh file in 1 MiB `pwrite`s, then one `fdatasync`.
    /// Returns the seconds from `open` to the end of the sync. The file is removed.
    static func pwriteBandwidth(path: String, mebibytes: Int) throws -> Double {
        try RawDisk.sequentialWriteSeconds(path: path, mebibytes: mebibytes)
    }

    /// Runs `dd if=/dev/zero of=path bs=1M count=mebibytes conv=fdatasync`. Returns the seconds
    /// it took and dd's own summary line, or `nil` when dd is not installed.
    static func ddBandwidth(path: String, mebibytes: Int) throws -> (seconds: Double, summary: String)? {
        guard let dd = executable("dd") else { return nil }
        defer { unlink(path) }
        let ((status, output), elapsed) = try timed {
            try run(dd, ["if=/dev/zero", "of=\(path)", "bs=1M", "count=\(mebibytes)", "conv=fdatasync"])
        }
        guard status == 0 else { throw BenchmarkError("dd failed: \(output)") }
        let summary = output.split(separator: "\n").last.map(String.init) ?? ""
        return (elapsed, summary)
    }

    /// LZ4 level 1 compression and decompression speed from `lz4 -b1` on `file` (lz4's own
    /// synthetic data when `nil`): (ratio, compress MB/s, decompress MB/s), or `nil` without lz4.
    static func lz4Speed(file: String?) throws -> (ratio: Double, compress: Double, decompress: Double)? {
        guard let lz4 = executable("lz4") else { return nil }
        let (status, output) = try run(lz4, ["-b1", "-i1", "-q"] + (file.map { [$0] } ?? []))
        guard status == 0 else { throw BenchmarkError("lz4 -b1 failed: \(output)") }
        // The result line: "-1   5859357 (1.707) 1171.46 MB/s 7193.5 MB/s  Synthetic 50%".
        for line in output.split(whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            let words = line.split(separator: " ")
            guard words.first == "-1" else { continue }
            let speeds = words.indices.filter { $0 > 0 && words[$0] == "MB/s" }.compactMap { Double(words[$0 - 1]) }
            let ratio = words.first { $0.hasPrefix("(") }.flatMap { Double($0.dropFirst().dropLast()) }
            if speeds.count == 2, let ratio { return (ratio, speeds[0], speeds[1]) }
        }
        throw BenchmarkError("could not read lz4 -b1 output: \(output)")
    }

    /// The path of `name` in `PATH`, or `nil`.
    static func executable(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first { access($0, X_OK) == 0 }
    }

    /// Runs `executable` with `arguments`; returns its exit status and its stdout and stderr.
    private static func run(_ executable: String, _ arguments: [String]) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}

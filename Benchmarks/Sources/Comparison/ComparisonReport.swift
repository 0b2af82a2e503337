import Foundation

/// What a reader needs to know about the machine a comparison ran on.
public struct MachineFacts: Codable, Sendable, Equatable {
    /// The CPU model from /proc/cpuinfo ("unknown" when it cannot be read).
    public var cpuModel: String
    /// Processors the process may use.
    public var cores: Int
    /// The kernel release (`uname -r`).
    public var kernel: String
    /// Physical memory in GB (10^9 bytes).
    public var memoryGB: Double
    /// The 1, 5 and 15 minute load averages before the first measurement.
    public var loadAverageAtStart: String
    /// The same after the last measurement.
    public var loadAverageAtEnd: String
    /// File system type and device of the directory the stores were written in.
    public var workFileSystem: String
    /// File system type and device of the results directory.
    public var resultsFileSystem: String

    /// Creates the facts from explicit values.
    public init(
        cpuModel: String, cores: Int, kernel: String, memoryGB: Double, loadAverageAtStart: String,
        loadAverageAtEnd: String, workFileSystem: String, resultsFileSystem: String
    ) {
        self.cpuModel = cpuModel
        self.cores = cores
        self.kernel = kernel
        self.memoryGB = memoryGB
        self.loadAverageAtStart = loadAverageAtStart
        self.loadAverageAtEnd = loadAverageAtEnd
        self.workFileSystem = workFileSystem
        self.resultsFileSystem = resultsFileSystem
    }

    /// The facts of this machine now; `loadAverageAtEnd` is left equal to the start value
    /// (update it with ``currentLoadAverage()`` when the run ends).
    public static func current(workDirectory: String, resultsDirectory: String) -> MachineFacts {
        let load = currentLoadAverage()
        return MachineFacts(
            cpuModel: cpuModelName(), cores: ProcessInfo.processInfo.activeProcessorCount, kernel: kernelRelease(),
            memoryGB: Double(ProcessInfo.processInfo.physicalMemory) / 1e9, loadAverageAtStart: load,
            loadAverageAtEnd: load, workFileSystem: fileSystem(of: workDirectory),
            resultsFileSystem: fileSystem(of: resultsDirectory))
    }

    /// The 1, 5 and 15 minute load averages from /proc/loadavg, or "unknown".
    public static func currentLoadAverage() -> String {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return "unknown" }
        return text.split(separator: " ").prefix(3).joined(separator: " ")
    }

    /// Lines for a text report.
    public var lines: [String] {
        [
            "CPU: \(cpuModel), \(cores) core\(cores == 1 ? "" : "s"); memory \(String(format: "%.1f", memoryGB)) GB; "
                + "kernel \(kernel)",
            "file systems: stores in \(workFileSystem); results in \(resultsFileSystem)",
            "load average: \(loadAverageAtStart) at start, \(loadAverageAtEnd) at end "
                + "(above \(cores) means other work competed for the CPU)",
        ]
    }

    private static func cpuModelName() -> String {
        guard let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8) else { return "unknown" }
        for line in text.split(separator: "\n") where line.hasPrefix("model name") {
            if let colon = line.firstIndex(of: ":") {
                return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return "unknown"
    }

    private static func kernelRelease() -> String {
        let text = try? String(contentsOfFile: "/proc/sys/kernel/osrelease", encoding: .utf8)
        return text?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "unknown"
    }

    /// "ext4 on /dev/vda (mounted at /)" for the mount that holds `path` (the longest mount
    /// point that is a prefix of its resolved path), from /proc/mounts.
    public static func fileSystem(of path: String) -> String {
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        guard let mounts = try? String(contentsOfFile: "/proc/mounts", encoding: .utf8) else { return "unknown" }
        var best: (point: String, type: String, device: String)? = nil
        for line in mounts.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 3 else { continue }
            // /proc/mounts escapes spaces as \040.
            let point = String(fields[1]).replacingOccurrences(of: "\\040", with: " ")
            let inside = point == "/" || resolved == point || resolved.hasPrefix(point + "/")
            if inside && point.count >= (best?.point.count ?? -1) {
                best = (point, String(fields[2]), String(fields[0]))
            }
        }
        guard let best else { return "unknown" }
        return "\(best.type) on \(best.device) (mounted at \(best.point))"
    }
}

/// Everything one `compare` run produced: what `compare-<timestamp>.json` holds.
public struct ComparisonReport: Codable, Sendable {
    /// When the run started, ISO 8601 in UTC.
    public var startedAt: String
    /// Wall seconds of the whole run.
    public var seconds: Double
    /// The command-line arguments (without the program name).
    public var arguments: [String]
    /// The machine.
    public var machine: MachineFacts
    /// Notes that apply to a whole level (how each system was configured), by level.
    public var levelNotes: [String: [String]]
    /// Wall seconds each level took, by level.
    public var levelSeconds: [String: Double]
    /// Every measurement.
    public var rows: [ComparisonRow]
    /// Levels that failed, with their errors (their rows are missing).
    public var failures: [String]

    /// Creates a report.
    public init(
        startedAt: String, seconds: Double, arguments: [String], machine: MachineFacts,
        levelNotes: [String: [String]], levelSeconds: [String: Double], rows: [ComparisonRow], failures: [String] = []
    ) {
        self.startedAt = startedAt
        self.seconds = seconds
        self.arguments = arguments
        self.machine = machine
        self.levelNotes = levelNotes
        self.levelSeconds = levelSeconds
        self.rows = rows
        self.failures = failures
    }

    /// The report as pretty-printed JSON with sorted keys.
    public func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }

    /// The levels present in `rows`, in the order they first appear.
    public var levels: [String] { ComparisonTable.levels(of: rows) }
}

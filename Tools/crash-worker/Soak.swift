import Foundation
import StrataChildProcess
import Strata

/// When a cycle kills its worker.
enum KillPoint: Equatable, CustomStringConvertible {
    /// After the worker says `opening` (plus the jitter): during the open and its recovery, or later.
    case opening
    /// After `ready` (plus the jitter): in the first save or later.
    case ready
    /// After the n-th `ack` line (plus the jitter): in save n + 1 or later.
    case acknowledgements(Int)

    /// A seeded choice: 10 % opening, 15 % ready, otherwise 1…`maxAcks` acknowledgements.
    static func random(using random: inout SplitMix64, maxAcks: Int) -> KillPoint {
        switch random.next() % 20 {
        case 0, 1: .opening
        case 2, 3, 4: .ready
        default: .acknowledgements(Int.random(in: 1...max(1, maxAcks), using: &random))
        }
    }

    /// For example "after 3 acks".
    var description: String {
        switch self {
        case .opening: "while opening"
        case .ready: "after ready"
        case .acknowledgements(let n): "after \(n) acks"
        }
    }
}

/// `soak`: kill-and-verify cycles on one store, each verified in this process; stops at the
/// first violation (exit status 1), leaving the store for inspection.
func runSoak(_ arguments: Arguments) throws -> Int32 {
    let cycles: Int = try arguments.integer("cycles", default: 5_000)
    let seed: UInt64 = try arguments.integer("seed", default: 1)
    let maxAcks: Int = try arguments.integer("max-acks", default: 20)
    let maxJitterMicroseconds: UInt64 = try arguments.integer("max-jitter-us", default: 8_000)
    let durability = arguments.options["durability"] ?? "full"
    let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
    let directory = arguments.directory
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let stderrPath = FileManager.default.temporaryDirectory
        .appendingPathComponent("strata-crash-soak-\(getpid()).stderr").path
    defer { try? FileManager.default.removeItem(atPath: stderrPath) }
    var random = SplitMix64(seed: seed)
    let start = ContinuousClock.now
    // A store left by an earlier soak continues from its counter.
    var highest = try verifyStore(at: directory, acknowledged: nil, readOnly: false).highestSave
    emit("soak: \(cycles) cycles on \(directory.path), seed \(seed), durability \(durability), starting at save \(highest)")
    for cycle in 1...max(1, cycles) {
        let point = KillPoint.random(using: &random, maxAcks: maxAcks)
        let jitter = Duration.microseconds(Int64(random.next() % (maxJitterMicroseconds + 1)))
        // Read-only once a save is stored: before that the store may not exist yet.
        let readOnly = random.next() % 3 == 0 && highest > 0
        let failure: String?
        do {
            let floor = try crashCycle(
                executable: executable, directory: directory, seed: random.next(), killPoint: point,
                jitter: jitter, durability: durability, resumeAt: highest, stderrPath: stderrPath)
            let summary = try verifyStore(at: directory, acknowledged: floor, readOnly: readOnly)
            failure = summary.violations.isEmpty ? nil : summary.violations.joined(separator: "\n  ")
            highest = summary.highestSave
        } catch {
            failure = "\(error)"
        }
        if let failure {
            emit("soak: cycle \(cycle) (kill \(point) + \(jitter), verify\(readOnly ? " read-only" : "")) FAILED:\n  \(failure)")
            emit("soak: the store is left at \(directory.path)")
            return 1
        }
        if cycle % 100 == 0 {
            emit("soak: \(cycle) cycles, save \(highest), \(elapsed(since: start))")
        }
    }
    emit("soak ok: \(cycles) cycles, \(highest) saves, \(elapsed(since: start))")
    return 0
}

/// One cycle: starts `run`, kills it `jitter` after `killPoint`, and
/// returns the highest save it acknowledged (`resumeAt` if none). Checks the worker resumed
/// at `resumeAt`.
func crashCycle(
    executable: String, directory: URL, seed: UInt64, killPoint: KillPoint, jitter: Duration, durability: String,
    resumeAt: Int64, stderrPath: String
) throws -> Int64 {
    let timeout = Duration.seconds(60)
    let worker = try ChildProcess(
        executable: executable, arguments: ["run", directory.path, "--seed", String(seed), "--durability", durability],
        standardErrorPath: stderrPath)
    var lines: [String] = []
    func unexpectedEnd() -> CrashWorkerError {
        let exit = worker.waitForExit()
        let stderr = (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? ""
        return CrashWorkerError("worker ended by itself (\(exit)) after \(lines); stderr: \(stderr)")
    }
    let wanted: Int = switch killPoint {
    case .opening: 1
    case .ready: 2
    case .acknowledgements(let n): 2 + n
    }
    while lines.count < wanted {
        guard let line = try worker.readLine(timeout: timeout) else { throw unexpectedEnd() }
        lines.append(line)
    }
    // A seeded delay (collecting lines meanwhile) spreads the kill over the next save.
    lines += try worker.readLines(for: jitter)
    worker.killNow()
    guard worker.waitForExit() == .signaled(SIGKILL) else { throw unexpectedEnd() }
    // Acknowledgements already in the pipe count: the worker made them before it died.
    lines += try worker.readRemainingLines(timeout: timeout)
    guard lines.first == "opening" else { throw CrashWorkerError("worker printed \(lines) before opening") }
    var highest = resumeAt
    for line in lines.dropFirst() {
        let words = line.split(separator: " ")
        guard words.count == 2, let value = Int64(words[1]) else { throw CrashWorkerError("worker printed \(line)") }
        switch words[0] {
        case "ready" where value == resumeAt: break
        case "ready": throw CrashWorkerError("worker resumed after save \(value), but the store was verified at save \(resumeAt)")
        case "ack" where value == highest + 1: highest = value
        default: throw CrashWorkerError("unexpected line \(line) after save \(highest)")
        }
    }
    return highest
}

/// Seconds since `start`, for example "12.3 s".
func elapsed(since start: ContinuousClock.Instant) -> String {
    let (seconds, attoseconds) = start.duration(to: .now).components
    return String(format: "%.1f s", Double(seconds) + Double(attoseconds) / 1e18)
}

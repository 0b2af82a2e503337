import Logging
import ArgumentParser
import Foundation
import Strata
import StrataSync

/// Options every subcommand shares.
struct OutputOptions: ParsableArguments {
    @Flag(help: "Print machine-readable JSON instead of text.")
    var json = false

    @Flag(help: "Print no progress and no informational lines, only the result (and errors).")
    var quiet = false

    @Flag(help: "Show the engine's log on standard error: opening and recovery, repairs, flushes, compactions, failures.")
    var verbose = false

    /// The engine's logger for `--verbose` (standard error, from `info` up); `nil` otherwise.
    var logger: Logger? {
        guard verbose else { return nil }
        var logger = Logger(label: "strata", factory: { StreamLogHandler.standardError(label: $0) })
        logger.logLevel = .info
        return logger
    }
}

/// Where the tool writes: results to standard output, progress and errors to standard error.
enum Output {
    /// Prints a line of results.
    static func line(_ text: String = "") { print(text) }

    /// Writes to standard error.
    static func error(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }

    /// Encodes `value` as pretty JSON (sorted keys) on standard output.
    static func json<T: Encodable>(_ value: T) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(value)
        FileHandle.standardOutput.write(data)
        FileHandle.standardOutput.write(Data("\n".utf8))
    }

    /// One JSON object on one line (for JSON lines output).
    static func jsonLine<T: Encodable>(_ value: T) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// `bytes` in human units (KiB, MiB, GiB) with the exact count for small values.
    static func bytes(_ bytes: UInt64) -> String { StoreInspector.bytes(bytes) }
}

/// Progress on standard error, for work that lasts over a second: a redrawn line on a
/// terminal, otherwise a line per phase and per 10 % of it; nothing with `--quiet`. Each line
/// names the phase, and a phase whose size is known shows its share done and the time left.
/// A phase that reports no share (opening a store, flushing its log) is announced once it has
/// lasted a second. `STRATA_PROGRESS_AFTER` (seconds) changes the one-second threshold.
///
/// Thread-safe: reports may come from a timer queue; the state is protected by `state`'s lock.
final class Progress: Sendable {
    /// What has been drawn so far; protected by its `Locked`.
    private struct State {
        var phase = ""
        var phaseStart = ContinuousClock.now
        /// The last tenth of the phase printed (non-terminal), -1 before the first.
        var lastTenth = -1
        /// Whether the phase has been shown at all.
        var announced = false
        /// Whether a terminal line is drawn (and must be cleared).
        var drawn = false
        var finished = false
    }

    private let title: String
    private let enabled: Bool
    private let isTerminal = isatty(STDERR_FILENO) == 1
    private let state = Locked(State())
    private let start = ContinuousClock.now
    /// How long work runs before progress shows.
    private let threshold: Duration
    /// Announces phases that report no share; set once in `init`, cancelled by `finish()`
    /// (Dispatch sources are thread-safe; the reference itself never changes).
    nonisolated(unsafe) private let timer: (any DispatchSourceTimer)?

    init(_ title: String, quiet: Bool) {
        self.title = title
        self.enabled = !quiet
        let seconds = ProcessInfo.processInfo.environment["STRATA_PROGRESS_AFTER"].flatMap(Double.init) ?? 1
        threshold = .milliseconds(Int64(max(0, seconds) * 1000))
        guard !quiet else {
            timer = nil
            return
        }
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "strata.progress"))
        self.timer = timer
        timer.schedule(deadline: .now() + .milliseconds(100), repeating: .milliseconds(250))
        timer.setEventHandler { [weak self] in self?.tick() }
        timer.resume()
    }

    /// Starts a phase: `name` says what is being done ("checking objects"). A phase already
    /// current goes on.
    func begin(_ name: String) {
        guard enabled else { return }
        state.withLock { state in
            guard state.phase != name else { return }
            state.phase = name
            state.phaseStart = .now
            state.lastTenth = -1
            state.announced = false
        }
        tick()
    }

    /// Reports `done` of `total` units of the current phase; `detail` names what is being
    /// worked on.
    func update(_ done: UInt64, of total: UInt64, detail: String = "") {
        guard enabled, total > 0, ContinuousClock.now - start >= threshold else { return }
        let fraction = min(1, Double(done) / Double(total))
        state.withLock { state in
            guard !state.finished else { return }
            let label = state.phase.isEmpty ? title : "\(title): \(state.phase)"
            let elapsed = ContinuousClock.now - state.phaseStart
            let left = Self.timeLeft(elapsed: elapsed, fraction: fraction)
            if isTerminal {
                let width = 30
                let filled = Int(fraction * Double(width))
                let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
                let tail = detail.count > 40 ? "…" + detail.suffix(39) : detail
                let eta = left.map { ", \($0) left" } ?? ""
                FileHandle.standardError.write(Data("\r\(label) [\(bar)] \(Int(fraction * 100))%\(eta) \(tail)\u{1B}[K".utf8))
                state.drawn = true
                state.lastTenth = max(state.lastTenth, 0)  // a bar is drawn: the timer leaves it
            } else {
                let tenth = Int(fraction * 10)
                guard tenth > state.lastTenth else { return }
                state.lastTenth = tenth
                Output.error("\(label) \(tenth * 10)%" + (left.map { " (about \($0) left)" } ?? ""))
            }
            state.announced = true
        }
    }

    /// The time left at `fraction` done after `elapsed`, in words; `nil` before 5 %.
    static func timeLeft(elapsed: Duration, fraction: Double) -> String? {
        guard fraction >= 0.05, fraction < 1 else { return nil }
        let seconds = (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18) * (1 - fraction) / fraction
        return seconds < 60 ? "\(max(1, Int(seconds.rounded()))) s" : "\(Int((seconds / 60).rounded())) min"
    }

    /// Shows a phase that has reported no share once the work has lasted over the threshold.
    private func tick() {
        state.withLock { state in
            guard !state.finished, !state.phase.isEmpty, ContinuousClock.now - start >= threshold else { return }
            let elapsed = ContinuousClock.now - state.phaseStart
            if isTerminal {
                guard state.lastTenth < 0 else { return }  // a bar is drawn for this phase
                FileHandle.standardError.write(Data("\r\(title): \(state.phase)… \(elapsed.components.seconds) s\u{1B}[K".utf8))
                state.drawn = true
            } else if !state.announced {
                Output.error("\(title): \(state.phase)…")
                state.lastTenth = max(state.lastTenth, 0)  // the announcement stands for 0 %
            }
            state.announced = true
        }
    }

    /// Ends the progress: no more lines, and a terminal's line is cleared.
    func finish() {
        timer?.cancel()
        state.withLock { state in
            state.finished = true
            if state.drawn { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
            state.drawn = false
        }
    }
}

/// An error explained to an operator (exit status 2): what happened, where, and what to do.
struct Explanation: Encodable {
    /// The error's kind: a store error's or object-graph error's code, or `usage`.
    var code: String
    /// What happened, as one sentence starting with `strata:`.
    var message: String
    /// The file it happened in, when one is known.
    var file: String?
    /// The byte offset in ``file``, when one is known.
    var offset: UInt64?
    /// What to do about it, when the tool knows.
    var remedy: String?

    /// The text the tool prints on standard error: the message, then the remedy indented.
    var text: String { remedy.map { message + "\n  " + $0 } ?? message }
}

/// A command's `--json` document: the result's own fields with a top-level `verdict` beside
/// them, so that a script reads the outcome without knowing each command's fields.
struct WithVerdict<Result: Encodable>: Encodable {
    /// The outcome in one word (each command's help lists its verdicts).
    var verdict: String
    var result: Result

    private enum Key: String, CodingKey { case verdict }

    func encode(to encoder: any Encoder) throws {
        try result.encode(to: encoder)
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(verdict, forKey: .verdict)
    }
}

/// `--json`'s output when a command fails before it has a result: the verdict `error` and the
/// error, on standard output (the text goes to standard error as well).
struct JSONFailure: Encodable {
    var verdict = "error"
    var error: Explanation
}

/// Explains an error to an operator: what happened, where, and what to do (exit status 2;
/// ``Explanation/text`` is what the tool prints).
func explanation(of error: any Error, path: String) -> Explanation {
    if var error = error as? StoreError {
        while error.message.hasSuffix(".") { error.message.removeLast() }
        func explained(_ message: String, _ remedy: String? = nil) -> Explanation {
            Explanation(code: error.code.name, message: message, file: error.path, offset: error.offset, remedy: remedy)
        }
        switch error.code {
        case .notFound where error.message.hasPrefix("no record"):
            return explained("strata: \(path): \(error.message).")
        case .notAStore:
            // The headline says it is not a store: the reason need not say it again.
            let reason = error.message.components(separatedBy: "; ").filter { !$0.contains("not a Strata store") }.joined(separator: "; ")
            return explained(
                "strata: \(path) is not a Strata store" + (reason.isEmpty ? "." : ": \(reason)."),
                "Check the path: a store is a directory holding MANIFEST, LOCK and its numbered .wal and .seg files.")
        case .notFound:
            return explained("strata: \(path): \(error.message).", "Check the path; `strata demo <dir>` creates a store to try the tool on.")
        case .unsupportedVersion:
            return explained(
                "strata: \(path) was written by a newer version of Strata: \(error.message).",
                "Use the strata tool of the version that wrote it (or newer); this one leaves it untouched.")
        case .locked:
            return explained(
                "strata: \(path) is open in another process (it holds the store's LOCK).",
                "Close the application using it (or wait for it to finish), then run the command again; the tool never reads or changes a store another process has open.")
        case .io where error.errno == EACCES || error.errno == EPERM:
            return explained(
                "strata: permission denied on \(error.path ?? path): \(error.message).",
                "Run the tool as the user that owns the store, or fix the permissions (the tool needs to read every file and, for fsck --repair and compact, write the directory).")
        case .io where error.errno == EROFS:
            return explained(
                "strata: \(error.path ?? path) is on a read-only file system: \(error.message).",
                "inspect, dump, stats and fsck without --repair work on read-only stores; copy the store elsewhere to repair or compact it.")
        case .corruption:
            return explained(
                "strata: \(path) is damaged: \(error).",
                "Run `strata fsck \(path)` to see every problem, then `strata fsck --repair \(path)` to salvage it.")
        default:
            return explained("strata: \(path): \(error)")
        }
    }
    if let error = error as? ObjectGraphError {
        return Explanation(code: error.code.rawValue, message: "strata: \(path): \(error.message)")
    }
    return Explanation(code: "error", message: "strata: \(path): \(error)")
}

/// Parses a key given as hex (`0x…` or bare hex digits) or, failing that, as UTF-8 text.
func parseKey(_ text: String) -> [UInt8] {
    let digits = text.hasPrefix("0x") ? String(text.dropFirst(2)) : text
    if !digits.isEmpty, digits.count % 2 == 0, digits.allSatisfy(\.isHexDigit) {
        var bytes: [UInt8] = []
        var index = digits.startIndex
        while index < digits.endIndex {
            let next = digits.index(index, offsetBy: 2)
            guard let byte = UInt8(digits[index..<next], radix: 16) else { return Array(text.utf8) }
            bytes.append(byte)
            index = next
        }
        return bytes
    }
    return Array(text.utf8)
}

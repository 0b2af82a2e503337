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
    static func bytes(_ bytes: UInt64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes), unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(bytes) B" : String(format: "%.1f %@", value, units[unit])
    }
}

/// Progress on standard error: a redrawn bar on a terminal, a line per 10 % otherwise,
/// nothing with `--quiet`. Thread-safe: reports may come from a timer queue.
final class Progress: Sendable {
    /// What has been drawn so far; protected by its `Locked`.
    private struct State {
        var lastTenth = -1
        var drawn = false
    }

    private let title: String
    private let enabled: Bool
    private let isTerminal = isatty(STDERR_FILENO) == 1
    private let state = Locked(State())
    /// Work that ends within a second shows no progress at all.
    private let start = ContinuousClock.now

    init(_ title: String, quiet: Bool) {
        self.title = title
        self.enabled = !quiet
    }

    /// Reports `done` of `total` units; `detail` names what is being worked on.
    func update(_ done: UInt64, of total: UInt64, detail: String = "") {
        guard enabled, total > 0, ContinuousClock.now - start > .seconds(1) else { return }
        let fraction = min(1, Double(done) / Double(total))
        state.withLock { state in
            if isTerminal {
                let width = 30
                let filled = Int(fraction * Double(width))
                let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
                let tail = detail.count > 40 ? "…" + detail.suffix(39) : detail
                FileHandle.standardError.write(Data("\r\(title) [\(bar)] \(Int(fraction * 100))% \(tail)\u{1B}[K".utf8))
                state.drawn = true
            } else {
                let tenth = Int(fraction * 10)
                guard tenth > state.lastTenth else { return }
                state.lastTenth = tenth
                Output.error("\(title): \(tenth * 10)%")
            }
        }
    }

    /// Ends the bar's line.
    func finish() {
        state.withLock { state in
            if state.drawn { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
            state.drawn = false
        }
    }
}

/// Explains an error to an operator: what happened and what to do. Used for exit status 2.
func explain(_ error: any Error, path: String) -> String {
    if var error = error as? StoreError {
        while error.message.hasSuffix(".") { error.message.removeLast() }
        switch error.code {
        case .notFound where error.message.hasPrefix("no record"):
            return "strata: \(path): \(error.message)."
        case .notAStore:
            return "strata: \(path) is not a Strata store: \(error.message).\n  Check the path: a store is a directory holding MANIFEST, LOCK and its numbered .wal and .seg files."
        case .notFound:
            return "strata: \(path): \(error.message).\n  Check the path; `strata demo <dir>` creates a store to try the tool on."
        case .unsupportedVersion:
            return "strata: \(path) was written by a newer version of Strata: \(error.message).\n  Use the strata tool of the version that wrote it (or newer); this one leaves it untouched."
        case .locked:
            return "strata: \(path) is open in another process (it holds the store's LOCK).\n  Close the application using it (or wait for it to finish), then run the command again; the tool never reads or changes a store another process has open."
        case .io where error.errno == EACCES || error.errno == EPERM:
            return "strata: permission denied on \(error.path ?? path): \(error.message).\n  Run the tool as the user that owns the store, or fix the permissions (the tool needs to read every file and, for fsck --repair and compact, write the directory)."
        case .io where error.errno == EROFS:
            return "strata: \(error.path ?? path) is on a read-only file system: \(error.message).\n  inspect, dump, stats and fsck without --repair work on read-only stores; copy the store elsewhere to repair or compact it."
        case .corruption:
            return "strata: \(path) is damaged: \(error).\n  Run `strata fsck \(path)` to see every problem, then `strata fsck --repair \(path)` to salvage it."
        default:
            return "strata: \(path): \(error)"
        }
    }
    if let error = error as? ObjectGraphError {
        return "strata: \(path): \(error.message)"
    }
    return "strata: \(path): \(error)"
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

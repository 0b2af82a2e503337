import Foundation
import Strata

// strata-crash-worker: the process the crash tests kill. See README.md.

let usage = """
    usage: strata-crash-worker run DIR [--seed S] [--saves N] [--durability full|normal|none] [--store strata|binary]
           strata-crash-worker verify DIR [--acknowledged K] [--read-only] [--store strata|binary]
           strata-crash-worker soak DIR [--cycles N] [--seed S] [--max-acks M] [--max-jitter-us U]
                                    [--durability full|normal|none]
    """

/// Parsed command line: a mode, a store directory and `--name value` options.
struct Arguments {
    /// `run`, `verify` or `soak`.
    var mode: String
    /// The store directory.
    var directory: URL
    /// Options by name without the dashes; flags map to "".
    var options: [String: String] = [:]

    init(_ arguments: [String]) throws {
        var positional: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--read-only" {
                options["read-only"] = ""
            } else if argument.hasPrefix("--") {
                guard index + 1 < arguments.count else { throw CrashWorkerError("\(argument) needs a value\n\(usage)") }
                options[String(argument.dropFirst(2))] = arguments[index + 1]
                index += 1
            } else {
                positional.append(argument)
            }
            index += 1
        }
        guard positional.count == 2 else { throw CrashWorkerError(usage) }
        mode = positional[0]
        directory = URL(fileURLWithPath: positional[1])
    }

    /// The integer option `name`, or `defaultValue`.
    func integer<T: FixedWidthInteger>(_ name: String, default defaultValue: T) throws -> T {
        guard let text = options[name] else { return defaultValue }
        let parsed = text.hasPrefix("0x") ? T(text.dropFirst(2), radix: 16) : T(text)
        guard let value = parsed else { throw CrashWorkerError("--\(name) must be an integer, not \(text)") }
        return value
    }
}

/// Writes `line` and a newline to standard output at once (unbuffered: the parent reads it
/// while this process keeps going, and a kill must not lose an acknowledgement already made).
func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// `run`: saves 1, 2, 3, … after the stored counter, printing `ack k` after each save returns
/// (durability `--durability`, default full).
func runWorker(_ arguments: Arguments) throws {
    let seed: UInt64 = try arguments.integer("seed", default: 0)
    let saves: Int64 = try arguments.integer("saves", default: .max)
    emit("opening")
    let coordinator = try CrashModel.openStore(
        at: arguments.directory, durability: arguments.options["durability"] ?? "full", kind: arguments.options["store"] ?? "strata")
    var k = try CrashModel.counterValue(in: ManagedObjectContext(persistentStoreCoordinator: coordinator))
    emit("ready \(k)")
    var done: Int64 = 0
    let parent = getppid()
    while done < saves {
        // Orphaned (the test or soak that started it died): stop instead of saving forever.
        guard getppid() == parent else { throw CrashWorkerError("the parent process \(parent) is gone") }
        k += 1
        try CrashModel.performSave(k, seed: seed, coordinator: coordinator)
        emit("ack \(k)")
        done += 1
    }
    try CrashModel.close(coordinator)
}

/// Opens the store, summarises it and checks the invariant (the store is closed again before
/// returning).
func verifyStore(at directory: URL, acknowledged: Int64?, readOnly: Bool, kind: String = "strata") throws -> CrashSummary {
    let coordinator = try CrashModel.openStore(at: directory, readOnly: readOnly, kind: kind)
    var summary = try CrashModel.summary(of: coordinator)
    summary.violations = CrashInvariant.violations(of: summary, acknowledged: acknowledged)
    try CrashModel.close(coordinator)
    return summary
}

/// `verify`: prints the summary as one JSON line; exit status 1 if the invariant is violated.
func runVerify(_ arguments: Arguments) throws -> Int32 {
    let acknowledged: Int64? = arguments.options["acknowledged"] == nil ? nil : try arguments.integer("acknowledged", default: 0)
    let summary = try verifyStore(
        at: arguments.directory, acknowledged: acknowledged, readOnly: arguments.options["read-only"] != nil,
        kind: arguments.options["store"] ?? "strata")
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    emit(String(decoding: try encoder.encode(summary), as: UTF8.self))
    return summary.violations.isEmpty ? 0 : 1
}

let exitCode: Int32
do {
    let arguments = try Arguments(Array(CommandLine.arguments.dropFirst()))
    switch arguments.mode {
    case "run":
        try runWorker(arguments)
        exitCode = 0
    case "verify":
        exitCode = try runVerify(arguments)
    case "soak":
        exitCode = try runSoak(arguments)
    default:
        throw CrashWorkerError(usage)
    }
} catch {
    FileHandle.standardError.write(Data("strata-crash-worker: \(error)\n".utf8))
    exitCode = 3
}
exit(exitCode)

import ArgumentParser
import Foundation
import Strata

/// `strata`: check, compact, inspect and demonstrate Strata stores.
struct StrataCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "strata",
        abstract: "Check, compact, inspect and demonstrate Strata stores.",
        subcommands: [Demo.self])
}

/// `strata demo [dir]`.
struct Demo: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a small store, reopen it and read it back.",
        discussion: "Example: strata demo /tmp/my-demo-store")

    @Argument(help: "Store directory (default: a new temporary directory, removed afterwards).")
    var directory: String?

    @Option(help: "How many keys to write.")
    var keys: Int = 10_000

    func run() throws {
        let temporary = directory == nil
        let path = directory ?? FileManager.default.temporaryDirectory
            .appendingPathComponent("strata-demo-\(UUID().uuidString)").path
        defer { if temporary { try? FileManager.default.removeItem(atPath: path) } }
        print("strata demo: store at \(path)")
        let report = try EngineDemo.run(in: path, keys: keys)
        for line in report.lines { print("  " + line) }
        if !report.verified { throw ExitCode(1) }
    }
}

StrataCommand.main()

import ArgumentParser
import Foundation
import Strata
import StrataDemo

/// `strata demo [dir]`.
struct Demo: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Build a small library of authors, books and shelves in a store, reopen it, query it, check it.",
        discussion: """
            Saves an object graph in a StrataStore, reopens it from disk, runs fetches (an \
            indexed predicate with sorting, an unindexed scan, a count, a grouped aggregate), \
            faults objects in, runs fsck, and prints how long each step took. Every answer is \
            checked against what was written; the exit status is 1 if one is wrong.

            Examples:
              strata demo                      in a temporary directory, removed afterwards
              strata demo /tmp/library         keep the store to try fsck, inspect and dump on
            """)

    @Argument(help: "Store directory to create (default: a new temporary directory, removed afterwards).")
    var directory: String?

    @Option(help: "Authors to create (each with --books-per-author books).")
    var authors: Int = 500

    @Option(help: "Books per author.")
    var booksPerAuthor: Int = 8

    @OptionGroup var output: OutputOptions

    /// `--json`'s output: the verdict, what each step did and how long it took.
    struct JSONReport: Encodable {
        /// `"verified"` when every answer matched and fsck found the store clean, else `"failed"`.
        var verdict: String
        var store: String
        /// Whether the store was removed afterwards (no directory was given).
        var temporary: Bool
        var steps: [ObjectGraphDemo.Report.Step]
        /// The text report's lines (each step with its answers).
        var lines: [String]
        var failures: [String]
    }

    func validate() throws {
        guard authors >= 2, authors <= 1_000_000 else { throw ValidationError("--authors must be between 2 and 1000000") }
        guard booksPerAuthor >= 1, booksPerAuthor <= 1000 else { throw ValidationError("--books-per-author must be between 1 and 1000") }
    }

    func run() throws {
        let temporary = directory == nil
        let path = directory ?? FileManager.default.temporaryDirectory
            .appendingPathComponent("strata-demo-\(UUID().uuidString)").path
        if !temporary, FileManager.default.fileExists(atPath: path + "/MANIFEST") {
            throw ToolFailure(message: "strata: \(path) already holds a store; the demo needs a new or empty directory.")
        }
        defer { if temporary { try? FileManager.default.removeItem(atPath: path) } }
        if !output.json && !output.quiet { print("strata demo: a library in a StrataStore at \(path)") }
        let progress = Progress("demo", quiet: output.quiet || output.json)
        let report = try explained(path: path) {
            try ObjectGraphDemo.run(in: path, authors: authors, booksPerAuthor: booksPerAuthor) { progress.begin($0) }
        }
        progress.finish()
        if output.json {
            try Output.json(JSONReport(
                verdict: report.verified ? "verified" : "failed", store: path, temporary: temporary,
                steps: report.steps, lines: report.lines, failures: report.failures))
        } else {
            if !output.quiet { for line in report.lines { print("  " + line) } }
            if report.verified {
                print("strata demo: every answer matched what was written; fsck found the store clean.")
                if !temporary && !output.quiet { print("Try: strata inspect \(path) ; strata dump \(path) | head ; strata fsck \(path)") }
            } else {
                print("strata demo: \(report.failures.count) checks FAILED")
                for failure in report.failures { print("  " + failure) }
            }
        }
        if !report.verified { throw ExitCode(1) }
    }
}

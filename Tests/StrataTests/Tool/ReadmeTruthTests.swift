import Foundation
import Testing

/// The README stays true: every file it names exists, and every `strata` command it shows
/// runs as shown (on a store of its own, its paths and pipes aside) and succeeds.
@Suite struct ReadmeTruthTests {
    /// The repository's root: this file is `Tests/StrataTests/Tool/ReadmeTruthTests.swift`.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func readme() throws -> String {
        try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
    }

    /// Files named by a link (`](path)`) or in code voice as a path of the repository.
    @Test func everyFileTheReadmeNamesExists() throws {
        let text = try Self.readme()
        var named = Set<String>()
        for match in text.matches(of: /\]\(([^)#\s]+)\)/) {
            let target = String(match.1)
            if target.contains("://") { continue }
            named.insert(target)
        }
        let roots = ["Sources/", "Tests/", "Tools/", "Benchmarks/", ".ci/"]
        for match in text.matches(of: /`([A-Za-z0-9_.\/-]+)`/) {
            let token = String(match.1)
            if roots.contains(where: token.hasPrefix) || ["SPEC.md", "README.md", "Package.swift"].contains(token) {
                named.insert(token.hasSuffix("/") ? String(token.dropLast()) : token)
            }
        }
        #expect(named.count >= 5, "the README names files: \(named.sorted())")
        let missing = named.filter { !FileManager.default.fileExists(atPath: Self.root.appendingPathComponent($0).path) }
        #expect(missing.isEmpty, "the README names files that do not exist: \(missing.sorted())")
    }

    static let subcommands: Set = ["fsck", "compact", "inspect", "dump", "stats", "migrate", "demo"]

    /// The commands: `$ strata …` and `swift run strata …` lines of its examples and
    /// `strata …` in code voice. Placeholders (`<…>`) and commands that need a damaged store
    /// are left out; the demo runs first and makes the store the others use.
    @Test func everyStrataCommandTheReadmeShowsRuns() throws {
        let text = try Self.readme()
        var commands: [String] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            var command = line.trimmingCharacters(in: .whitespaces)
            for prefix in ["$ swift run strata ", "swift run strata ", "$ strata "] where command.hasPrefix(prefix) {
                command = "strata " + command.dropFirst(prefix.count)
            }
            guard command.hasPrefix("strata ") else { continue }
            commands.append(command)
        }
        for match in text.matches(of: /`(strata [^`]+)`/) { commands.append(String(match.1)) }

        let scratch = try ToolScratch()
        let store = scratch.path + "/library"
        var runs: [[String]] = []
        for command in commands {
            // The part before a comment, a pipe or a parenthesised aside.
            var words: [String] = []
            for word in command.split(whereSeparator: \.isWhitespace).dropFirst().map(String.init) {
                if word == "#" || word == "|" || word.hasPrefix("(") { break }
                words.append(word)
            }
            // A command, not a line of output (`strata demo: …`), and no placeholder.
            guard let subcommand = words.first, Self.subcommands.contains(subcommand), !words.contains(where: { $0.contains("<") })
            else { continue }
            // A mention of a command without its store (`strata dump --json` in prose) is not an
            // example to run.
            if subcommand != "demo" && !words.contains(where: { $0.hasPrefix("/") }) { continue }
            if subcommand == "demo" && words.count == 1 { words.append(store) }
            words = words.map { ["/tmp/library", "/var/lib/app/store", "/var/lib/myapp/store"].contains($0) ? store : $0 }
            // `fsck --repair` is shown on a damaged store; on this clean one it only checks.
            if !runs.contains(words) { runs.append(words) }
        }
        let demos = runs.filter { $0.first == "demo" }
        #expect(!demos.isEmpty && runs.count >= 6, "the README shows the tool's commands: \(runs)")
        // The demo that makes the store first (once: a second demo refuses an existing store).
        let demo = try scratch.run(["demo", "--authors", "20", store])
        #expect(demo.status == 0, "\(demo)")
        for arguments in runs where arguments.first != "demo" {
            let run = try scratch.run(arguments)
            #expect(run.status == 0, "as the README shows it: strata \(arguments.joined(separator: " "))\n\(run)")
        }
    }
}

import ArgumentParser
import Foundation
import Strata

/// `strata`: check, repair, compact, inspect and demonstrate Strata stores.
struct StrataCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "strata",
        abstract: "Check, repair, compact and look inside Strata stores.",
        discussion: """
            A store is a directory (MANIFEST, LOCK, numbered .wal and .seg files), or, for \
            fsck, inspect, dump and stats, a binary store file (BinaryStore). No command \
            touches a store another process has open for writing: compact and fsck --repair take \
            the store's lock; fsck (without --repair), inspect, dump and stats share it, or read \
            without it on a read-only file system or directory, and create no file.

            Exit status: 0 success (fsck: clean); 1 fsck found problems (with --repair: found \
            and repaired); 3 fsck --repair could not repair everything; 2 usage, I/O or \
            open errors (not a store, newer format, locked, permission).

            Examples:
              strata demo                        build, query and check a sample store
              strata fsck /var/lib/app/store     check every checksum, row and index
              strata fsck --repair /var/lib/app/store
              strata compact /var/lib/app/store
              strata inspect /var/lib/app/store --object x-coredata://<uuid>/Book/p12
              strata dump --json /var/lib/app/store | head
              strata stats /var/lib/app/store
              strata migrate /var/lib/app/store --to v2.json   migrate offline to another model
              strata replicate /var/lib/app/store s3://backups/app   continuous backup to S3
              strata restore s3://backups/app /tmp/app --at 1234      the store as of a point
              strata --version                   the release and the on-disk formats
            """,
        version: StrataBuild.description,
        subcommands: [Fsck.self, Compact.self, Inspect.self, Dump.self, Stats.self, Migrate.self, Replicate.self, RestoreCommand.self, Demo.self])
}

// A custom entry point: ArgumentParser exits 64 on usage errors; the tool promises 2.
do {
    var command = try StrataCommand.parseAsRoot()
    try command.run()
} catch let exit as ExitCode {
    Foundation.exit(exit.rawValue)
} catch let failure as ToolFailure {
    Output.error(failure.explanation.text)
    // With --json the failure is a JSON document too, so that a script reads one format.
    if CommandLine.arguments.dropFirst().contains("--json") { try? Output.json(JSONFailure(error: failure.explanation)) }
    Foundation.exit(2)
} catch {
    let code = StrataCommand.exitCode(for: error)
    if code == .success {
        print(StrataCommand.fullMessage(for: error))
        Foundation.exit(0)
    }
    Output.error(StrataCommand.fullMessage(for: error))
    Foundation.exit(2)
}

/// A failure already explained to the operator (exit status 2).
struct ToolFailure: Error {
    var explanation: Explanation

    init(_ explanation: Explanation) { self.explanation = explanation }

    /// A failure of the command's use (its arguments or the directory given), told in `message`.
    init(message: String) { explanation = Explanation(code: "usage", message: message) }
}

/// Runs `body`, turning store errors into an explained ``ToolFailure``.
func explained<T>(path: String, _ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as ExitCode {
        throw error
    } catch {
        throw ToolFailure(explanation(of: error, path: path))
    }
}

import ArgumentParser
import Foundation
import Strata

/// `strata fsck <store>`.
struct Fsck: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a store: every checksum, the manifest, the index and, for a StrataStore, every row, relationship and index.",
        discussion: """
            Files: every WAL record's and segment block's checksum, the manifest against the \
            files present, each segment's footer and block table against its blocks, and the \
            index that opening would build against a full scan of every entry. Objects (a \
            StrataStore): every row decodes under the stored model, every relationship \
            destination exists and its inverse points back, every secondary index holds exactly \
            the rows' entries, and the metadata's row counts and next reference match the rows.

            Without --repair, fsck creates and changes no file: it shares the store's lock with \
            other readers (or reads without it on a read-only file system), so it works on \
            read-only stores.

            A WAL cut or damaged after its commits were acknowledged is not a torn tail: the \
            store's SYNC file records up to which transaction every commit was synced, and \
            fsck reports the acknowledged transactions that are gone as an error, by sequence \
            numbers (opening the store refuses it too, changing nothing).

            --repair salvages: it takes the store's lock (never touching a store open \
            elsewhere), copies every file to <store>.fsck-backup-<time> (unless --no-backup), \
            truncates torn tails, drops damaged WAL records and unreadable blocks, accepts the \
            loss of acknowledged transactions (keeping the WAL as found in NNNNNNNN.wal.damaged), rebuilds the \
            manifest, deletes rows that do not decode, removes dangling and one-sided \
            relationship links, rebuilds index entries and metadata counts, checks again, and \
            lists everything it dropped. It never discards what checks out: a segment whose \
            header, footer or block table is damaged keeps every block whose own checksum \
            holds; a missing MANIFEST is rebuilt from the WAL and segment files present; a \
            missing WAL is replaced by a fresh one and the commits it held are reported.

            A StrataStore is recognised by its metadata or model record, or by rows, \
            relationship keys or index entries in its key layout: one that has lost its metadata \
            record is damage (exit 1), named with the rows it holds per entity. --repair rebuilds \
            the metadata record from the rows: row counts, a next reference above every \
            reference any key or row names, and, when the model record survives, the version \
            hashes (with a new store UUID). Without the model record it writes the next \
            reference only and says so: the application's model completes the record at its next \
            read-write open (which first checks every row against the model), and only it can \
            rebuild a lost model record, so --repair then exits 3. What the files' repair lost \
            is listed in acknowledged terms: the commits' sequence numbers, the records, and the \
            rows per hierarchy with their references; bytes whose entries cannot be listed are \
            said to be lost, and when the dropped bytes held no entry (headers, footers, block \
            tables, hints) the repair says nothing acknowledged was lost.

            Exit status: 0 clean; 1 problems found (with --repair: found and repaired, the store \
            now passes; anything acknowledged that was lost makes a run exit 1 or 3, never 0); \
            3 problems remain after --repair; 2 usage or I/O errors.

            Examples:
              strata fsck /var/lib/app/store
              strata fsck --json /var/lib/app/store > report.json
              strata fsck --repair /var/lib/app/store
              strata fsck --repair --backup-dir /backups/store-before-repair /var/lib/app/store
            """)

    @Argument(help: "The store directory, or a binary store file.")
    var store: String

    @Flag(help: "Salvage what can be salvaged (after backing the store up).")
    var repair = false

    @Flag(name: .customLong("no-backup"), help: "With --repair: do not copy the store's files aside first.")
    var noBackup = false

    @Option(name: .customLong("backup-dir"), help: "With --repair: where to copy the files (default: <store>.fsck-backup-<UTC time>).")
    var backupDirectory: String?

    @Option(help: "Print at most this many problems of each level in the text output (JSON lists all).")
    var limit: Int = 50

    @OptionGroup var output: OutputOptions

    func validate() throws {
        if !repair && (noBackup || backupDirectory != nil) { throw ValidationError("--no-backup and --backup-dir only apply with --repair") }
        if noBackup && backupDirectory != nil { throw ValidationError("--no-backup and --backup-dir contradict each other") }
        guard limit >= 0 else { throw ValidationError("--limit must not be negative") }
    }

    func run() throws {
        if BinaryStoreInspector.isBinaryStore(at: store) { return try checkBinaryStore() }
        let progress = Progress("fsck", quiet: output.quiet || output.json)
        var options = FsckOptions()
        options.repair = repair
        options.backup = !noBackup
        options.backupPath = backupDirectory
        options.logger = output.logger
        progress.begin("checking files")
        options.progress = { step in progress.update(step.bytesDone, of: step.bytesTotal, detail: (step.path as NSString).lastPathComponent) }
        options.objectProgress = { done, total in
            progress.begin("checking objects")
            progress.update(UInt64(done), of: UInt64(max(total, 1)))
        }
        let report = try explained(path: store) { try StoreFsck.run(at: store, options: options) }
        progress.finish()
        if output.json {
            try Output.json(WithVerdict(verdict: Self.verdict(of: report), result: report))
        } else {
            printText(report)
        }
        if report.isClean { return }
        if report.repaired && report.after?.isClean != true { throw ExitCode(3) }
        throw ExitCode(1)
    }

    /// `--json`'s verdict: `clean`, `problems` (found, not repaired), `repaired` (found and
    /// repaired) or `unrepaired` (some remain after the repair), as the exit status says.
    static func verdict(of report: FsckReport) -> String {
        if report.isClean { return "clean" }
        if !report.repaired { return "problems" }
        return report.after?.isClean == true ? "repaired" : "unrepaired"
    }

    func printText(_ report: FsckReport) {
        let files = report.files
        let fileErrors = files.problems.filter { $0.severity == "error" }.count
        Output.line("fsck \(report.path)")
        Output.line("  files:   \(files.walRecords) WAL records, \(files.blocks) blocks, \(files.entries) entries, \(files.liveKeys) live keys, \(Output.bytes(files.bytesChecked)) checked: \(fileErrors == 0 ? "ok" : "\(fileErrors) errors")\(files.problems.count > fileErrors ? ", \(files.problems.count - fileErrors) warnings" : "")")
        for problem in files.problems.prefix(limit) { Output.line("    \(problem)") }
        if files.problems.count > limit { Output.line("    … \(files.problems.count - limit) more (--json lists all)") }
        if !files.lostSequences.isEmpty {
            Output.line("  lost acknowledged transactions: sequences \(files.lostSequences.map(\.description).joined(separator: ", "))")
        }
        if let objects = report.objects {
            if objects.isObjectStore {
                Output.line("  objects: \(objects.rows) rows, \(objects.references) references, \(objects.indexEntries) index entries\(objects.retiredKeys > 0 ? ", \(objects.retiredKeys) retired keys awaiting deletion (not checked)" : "")\(objects.hasModel ? "" : " (no stored model: rows decoded, relationships and indexes not checked)"): \(objects.problems.isEmpty ? "ok" : "\(objects.problems.count) errors")")
                for problem in objects.problems.prefix(limit) { Output.line("    \(problem)") }
                if objects.problems.count > limit { Output.line("    … \(objects.problems.count - limit) more (--json lists all)") }
            } else {
                Output.line("  objects: not a StrataStore (an engine store: no metadata or model record, no row, relationship key or index entry in StrataStore's layout): no object checks")
            }
        } else if let reason = report.objectsSkippedReason {
            Output.line("  objects: not checked: \(reason)")
        }
        if report.repaired {
            Output.line("repair:")
            if let backup = report.backupPath { Output.line("  backup of the files before repair: \(backup)") }
            if report.rebuiltManifest { Output.line("  rebuilt the manifest from the files present") }
            if !report.lostSequences.isEmpty {
                Output.line("  accepted the loss of acknowledged transactions \(report.lostSequences.map(\.description).joined(separator: ", "))")
            }
            for copy in report.keptCopies { Output.line("  kept \(copy) (the WAL as found)") }
            for dropped in report.dropped { Output.line("  dropped \(dropped)") }
            if !report.losses.isEmpty {
                Output.line("  lost, in acknowledged writes:")
                for loss in report.losses.prefix(limit) { Output.line("    \(loss)") }
                if report.losses.count > limit { Output.line("    … \(report.losses.count - limit) more (--json lists all)") }
            }
            if report.lostNothing && (!report.dropped.isEmpty || report.rebuiltManifest) {
                Output.line("  nothing acknowledged was lost: the dropped bytes held no entry (what they described was rebuilt from the data that remains)")
            }
            // Object repairs grouped by kind ("added index entry", "removed", …), a few examples each.
            var groups: [(kind: String, changes: [String])] = []
            for change in report.objectRepairs {
                let kind = change.components(separatedBy: " 0x").first.map { $0.components(separatedBy: " x-coredata").first ?? $0 } ?? change
                if let index = groups.firstIndex(where: { $0.kind == kind }) {
                    groups[index].changes.append(change)
                } else {
                    groups.append((kind, [change]))
                }
            }
            let examples = max(1, min(limit, 3))
            for group in groups {
                if group.changes.count == 1 {
                    Output.line("  \(group.changes[0])")
                } else {
                    let title = group.kind == "removed" ? "removed relationship links (dangling or one-sided)" : group.kind
                    Output.line("  \(title): \(group.changes.count), for example:")
                    for change in group.changes.prefix(examples) { Output.line("    \(change)") }
                }
            }
            if report.objectRepairs.count > groups.count { Output.line("  (--json lists every change)") }
            if report.dropped.isEmpty && report.objectRepairs.isEmpty && !report.rebuiltManifest && report.lostSequences.isEmpty {
                Output.line("  nothing dropped (warnings only: torn tails and orphans are cleaned by opening)")
            }
            if let after = report.after {
                Output.line("after repair: \(after.isClean ? "clean" : "\(after.fileProblems.count + after.objectProblems.count) problems remain")")
                for problem in after.fileProblems.prefix(limit) { Output.line("    \(problem)") }
                for problem in after.objectProblems.prefix(limit) { Output.line("    \(problem)") }
            }
        }
        if report.isClean {
            Output.line("clean")
        } else if !report.repaired {
            Output.line("problems found; run `strata fsck --repair \(report.path)` to salvage")
        } else if report.after?.isClean == true {
            Output.line("problems found and repaired")
        } else {
            Output.line("problems found; some remain after repair (see above)")
        }
    }

    /// A binary store file ([BIN-2]): every part checked, objects decoded with the stored
    /// model, counts and inverses compared. Nothing to repair: the file is replaced whole by
    /// each save, so a damaged one is restored from a copy.
    private func checkBinaryStore() throws {
        guard !repair else {
            throw ToolFailure(message: "\(store) is a binary store file: fsck checks it, but there is nothing to repair in place (each save replaces the file whole); restore a copy, or open it to save it anew.")
        }
        let check = BinaryStoreInspector.check(at: store)
        if output.json {
            try Output.json(WithVerdict(verdict: check.isClean ? "clean" : "problems", result: check))
        } else {
            Output.line("binary store \(store): \(check.objects) objects")
            for problem in check.problems.prefix(limit) { Output.line("  error: \(problem)") }
            for note in check.notes.prefix(limit) { Output.line("  note: \(note)") }
            Output.line(check.isClean ? "clean" : "\(check.problems.count) problem\(check.problems.count == 1 ? "" : "s")")
        }
        if !check.isClean { throw ExitCode(1) }
    }
}

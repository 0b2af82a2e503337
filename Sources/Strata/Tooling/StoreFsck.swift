import Logging
import Foundation
import ObjectGraph
import StrataEngine

/// One engine-level problem, as `strata fsck` reports it (`CheckProblem` with the key in hex).
public struct FileProblem: Sendable, Equatable, Codable, CustomStringConvertible {
    /// `error` (damage) or `warning` (a leftover the next open cleans up).
    public var severity: String
    /// The file concerned.
    public var path: String
    /// Where in the file, if known.
    public var offset: UInt64?
    /// The key concerned, in hex, if any.
    public var key: String?
    /// What is wrong.
    public var message: String

    init(_ problem: CheckProblem) {
        severity = problem.severity.rawValue
        path = problem.path
        offset = problem.offset
        key = problem.key.map(hex)
        message = problem.message
    }

    public var description: String {
        var text = "\(severity): \(path)"
        if let offset { text += " at offset \(offset)" }
        if let key { text += " key 0x\(key)" }
        return text + ": " + message
    }
}

/// A range of transaction sequence numbers, first to last inclusive.
public struct SequenceRange: Sendable, Equatable, Codable, CustomStringConvertible {
    /// The first sequence number of the range.
    public var first: UInt64
    /// The last sequence number of the range.
    public var last: UInt64

    init(_ range: ClosedRange<UInt64>) {
        first = range.lowerBound
        last = range.upperBound
    }

    public var description: String { first == last ? "\(first)" : "\(first)…\(last)" }
}

/// What the engine-level check read and found.
public struct FileCheckSummary: Sendable, Equatable, Codable {
    /// WAL records verified.
    public var walRecords = 0
    /// Segment blocks verified.
    public var blocks = 0
    /// Entries decoded.
    public var entries = 0
    /// Keys with a value.
    public var liveKeys = 0
    /// Bytes read and checked.
    public var bytesChecked: UInt64 = 0
    /// Every problem found, in order.
    public var problems: [FileProblem] = []
    /// Acknowledged (synced) transactions the store no longer holds (SPEC.md [DUR-3]); each is
    /// also an error in ``problems``.
    public var lostSequences: [SequenceRange] = []

    init(_ report: CheckReport) {
        walRecords = report.walRecords
        blocks = report.blocks
        entries = report.entries
        liveKeys = report.liveKeys
        bytesChecked = report.bytesChecked
        problems = report.problems.map(FileProblem.init)
        lostSequences = report.lostSequences.map(SequenceRange.init)
    }

    /// Whether no error (warnings allowed) was found.
    public var isClean: Bool { !problems.contains { $0.severity == CheckProblem.Severity.error.rawValue } }
}

/// What `strata fsck` found and, with repair, did.
public struct FsckReport: Sendable, Equatable, Codable {
    /// The store checked.
    public var path: String
    /// The engine-level check (before any repair).
    public var files: FileCheckSummary
    /// The object-level check (before any repair), or nil when the files were too damaged to
    /// open (``objectsSkippedReason`` says why).
    public var objects: ObjectCheckReport?
    /// Why the object-level check did not run, if it did not.
    public var objectsSkippedReason: String?
    /// Whether a repair ran.
    public var repaired = false
    /// Where the files were copied before the repair changed anything, if a backup was made.
    public var backupPath: String?
    /// Byte ranges the engine's repair dropped (damaged WAL records, unreadable blocks).
    public var dropped: [String] = []
    /// Whether the repair rebuilt the manifest from the files present.
    public var rebuiltManifest = false
    /// Acknowledged transactions whose loss the repair accepted ([DUR-4]).
    public var lostSequences: [SequenceRange] = []
    /// Copies the repair kept in the store directory before changing a file (the damaged WAL
    /// as found), as paths.
    public var keptCopies: [String] = []
    /// Object-level repairs (removed links, rebuilt index entries, rewritten metadata).
    public var objectRepairs: [String] = []
    /// What the engine's repair lost, in acknowledged terms (empty when it lost nothing or
    /// when no repair ran).
    public var losses: [FsckLoss] = []
    /// Whether the repair provably lost no acknowledged write: every byte it dropped held no
    /// entry (file headers, a segment's footer, block table or hint blocks, `SYNC`: what they
    /// described was rebuilt from the data that remains), it lost no entry and accepted the
    /// loss of no transaction. `false` when no repair ran.
    public var lostNothing = false
    /// The check after the repair, if one ran.
    public var after: FsckSummary?

    /// Whether the store was clean when checked (before any repair).
    public var isClean: Bool { files.isClean && (objects?.problems.isEmpty ?? (objectsSkippedReason == nil)) }
}

/// One thing a repair lost, in acknowledged terms (SPEC.md [META-4]): the commits (sequence
/// numbers) whose entries were in the dropped bytes, and the StrataStore records, rows and keys
/// among those entries, with what the store reads for them now.
public struct FsckLoss: Sendable, Equatable, Codable, CustomStringConvertible {
    /// `sequences` (one dropped range's commits), `unknown` (dropped bytes that held entries
    /// no one can list: a segment file lost whole, blocks of a segment whose hints are lost, a
    /// WAL lost with nothing around it to say which commits it held), `metadata` (the metadata
    /// record), `model` (the model record), `rows`, `indexEntries`, `relationshipKeys` or
    /// `keys` (any other key).
    public var kind: String
    /// For rows and keys: the hierarchy root whose key space held them.
    public var hierarchy: String?
    /// Entries lost (for `sequences`: entries of the range known by key).
    public var count: Int
    /// The lowest and highest sequence number of the lost entries (for `sequences`, of the range).
    public var firstSequence: UInt64?
    /// See ``firstSequence``.
    public var lastSequence: UInt64?
    /// For rows: the references of the objects.
    public var references: [Int64]?
    /// What the store reads now: `gone` (nothing), `olderVersion` (an older write of the key),
    /// `resurfaced` (a deletion was lost: the key's older value is back), `superseded` (a newer
    /// write survives: nothing acknowledged is lost), `unchanged` (a lost deletion of a key that
    /// has no older value); empty for `sequences`.
    public var outcome: String
    /// The loss in a sentence.
    public var message: String

    public var description: String { message }
}

/// The counts of a check, for the re-check after a repair.
public struct FsckSummary: Sendable, Equatable, Codable {
    /// Engine-level problems (errors and warnings).
    public var fileProblems: [FileProblem]
    /// Object-level problems.
    public var objectProblems: [ObjectProblem]
    /// Whether the store is clean.
    public var isClean: Bool
}

/// What ``StoreFsck/run(at:options:)`` does.
public struct FsckOptions: Sendable {
    /// Salvage what can be salvaged (see ``StoreFsck``). Default false: only check.
    public var repair = false
    /// Copy the store's files aside before repairing. Default true.
    public var backup = true
    /// Where the backup goes; default `<store>.fsck-backup-<UTC time>` beside the store.
    public var backupPath: String?
    /// Called as the engine-level check reads the files.
    public var progress: (@Sendable (CheckProgress) -> Void)?
    /// Called as the object check goes through the rows: rows checked, and rows in all
    /// (every 1,024 rows and at the end).
    public var objectProgress: (@Sendable (_ rowsDone: Int, _ rowsTotal: Int) -> Void)?
    /// The file system (tests inject faults through it).
    public var fileSystem: any FileSystem = PosixFileSystem()
    /// Hears what the engine tells as the check and the repair open the store (recovery, the
    /// repair's decisions); none by default ([EngineOptions.logger]).
    public var logger: Logger?

    /// Options that only check.
    public init() {}
}

/// `strata fsck`: the engine-level check (`StoreChecker`: every checksum, the manifest
/// against the files, hints against blocks, the index against a full scan) and, for a
/// StrataStore, the object-level check (``ObjectChecker``).
///
/// With ``FsckOptions/repair`` it first takes the store's lock (so it never touches a store
/// open in another process), copies every file of the store to a backup directory (unless
/// told not to), opens the engine in repair mode (which truncates torn tails, drops
/// unreadable WAL records and blocks, keeps every block whose checksum holds in a segment whose
/// header, footer or block table is damaged, rebuilds a damaged or missing manifest, starts a
/// fresh WAL for a missing one, and accepts the loss of acknowledged transactions a truncated,
/// damaged or missing WAL no longer holds, keeping a WAL it cuts as found in
/// `NNNNNNNN.wal.damaged`), runs the object-level repair, and checks the store again. The
/// report lists exactly what was dropped and lost, or that nothing acknowledged was.
///
/// For example:
///
/// ```swift
/// let report = try StoreFsck.run(at: "/var/lib/app/store")
/// print(report.isClean ? "clean" : "\(report.files.problems.count) problems")
/// ```
public enum StoreFsck {
    /// Checks (and optionally repairs) the store at `path`.
    ///
    /// - Throws: `StoreError` when `path` is not a store, the store is locked by another
    ///   process, its format is newer than this build, or the files cannot be read; damage is
    ///   reported, not thrown.
    public static func run(at path: String, options: FsckOptions = FsckOptions()) throws -> FsckReport {
        let fileReport = try StoreChecker.check(at: path, fileSystem: options.fileSystem, progress: options.progress)
        var report = FsckReport(path: path, files: FileCheckSummary(fileReport))
        (report.objects, report.objectsSkippedReason) = objectCheck(
            path: path, fileSystem: options.fileSystem, filesClean: fileReport.isClean, progress: options.objectProgress,
            logger: options.logger)
        guard options.repair, !report.isClean else { return report }

        // Repair: lock, back up, salvage, mend objects, check again.
        if options.backup {
            report.backupPath = try backUp(path, to: options.backupPath, fileSystem: options.fileSystem)
        }
        var engineOptions = EngineOptions()
        engineOptions.repair = true
        engineOptions.compaction.automatic = false
        engineOptions.backgroundFlush = false
        engineOptions.fileSystem = options.fileSystem
        if let logger = options.logger { engineOptions.logger = logger }
        let engine = try Engine.open(at: path, options: engineOptions)
        do {
            var lost: [LostEntry] = []
            if let repair = engine.repairReport {
                report.dropped = repair.dropped.map(\.description)
                report.rebuiltManifest = repair.rebuiltManifest
                lost = repair.lost
                report.losses = try losses(repair, in: try engine.snapshot())
                report.lostSequences = repair.lostSequences.map(SequenceRange.init)
                report.keptCopies = repair.keptCopies
                report.lostNothing = repair.lost.isEmpty && repair.lostSequences.isEmpty && !repair.dropped.contains(where: \.heldEntries)
            }
            let objects = try ObjectChecker.check(engine: engine, repair: true, lost: lost, progress: options.objectProgress)
            report.objectRepairs = objects.repairs
            for repair in objects.repairs { engine.logger.warning("object repair", metadata: ["path": "\(path)", "repair": "\(repair)"]) }
            try engine.close()
        } catch {
            try? engine.close()
            throw error
        }
        report.repaired = true
        // A read-write open removes the files the repair stopped naming ([REC-1]).
        var tidy = EngineOptions()
        tidy.compaction.automatic = false
        tidy.backgroundFlush = false
        tidy.fileSystem = options.fileSystem
        if let logger = options.logger { tidy.logger = logger }
        try Engine.open(at: path, options: tidy).close()
        let again = try StoreChecker.check(at: path, fileSystem: options.fileSystem)
        let (objectsAfter, skipped) = objectCheck(path: path, fileSystem: options.fileSystem, filesClean: again.isClean)
        let fileProblems = again.problems.map(FileProblem.init)
        report.after = FsckSummary(
            fileProblems: fileProblems, objectProblems: objectsAfter?.problems ?? [],
            isClean: again.isClean && (objectsAfter?.problems.isEmpty ?? (skipped == nil)))
        return report
    }

    /// [META-4] What `repair` dropped, in acknowledged terms: each dropped range's commits, and
    /// the lost entries grouped by StrataStore record, hierarchy and what `snapshot` (the store
    /// right after the engine's repair) reads for each key now.
    static func losses(_ repair: RepairReport, in snapshot: Snapshot) throws -> [FsckLoss] {
        var losses: [FsckLoss] = []
        for range in repair.dropped where range.heldEntries && range.sequences == nil {
            // What these bytes held is unknown: say so, never stay silent.
            let what = range.length == 0
                ? "lost \(range.path) whole (\(range.reason))"
                : "dropped \(range.length) bytes of \(range.path) at offset \(range.offset) (\(range.reason))"
            losses.append(FsckLoss(
                kind: "unknown", count: 0, outcome: "",
                message: "\(what): the entries they held cannot be listed, and acknowledged writes among them are lost"))
        }
        for range in repair.dropped {
            guard let sequences = range.sequences else { continue }
            let known = repair.lost.filter { $0.path == range.path && sequences.contains($0.sequence) }.count
            let commits = sequences.count == 1
                ? "the commit with sequence number \(sequences.lowerBound)"
                : "the commits with sequence numbers \(sequences.lowerBound)…\(sequences.upperBound)"
            let message = range.path.hasSuffix(".wal")
                ? "dropped \(commits) from \(range.path) at offset \(range.offset) (WAL records: their entries cannot be listed)"
                : "dropped entries of \(commits) from \(range.path) at offset \(range.offset): \(known) known by key, below"
            losses.append(FsckLoss(
                kind: "sequences", count: known, firstSequence: sequences.lowerBound, lastSequence: sequences.upperBound,
                outcome: "", message: message))
        }
        struct Group: Hashable {
            var kind: String
            var hierarchy: String?
            var outcome: String
        }
        var groups: [Group: [LostEntry]] = [:]
        var order: [Group] = []
        for entry in repair.lost {
            let now = snapshot.sequence(of: entry.key)
            let outcome: String
            switch now {
            case nil: outcome = entry.isDelete ? "unchanged" : "gone"
            case let now? where now > entry.sequence: outcome = "superseded"
            default: outcome = entry.isDelete ? "resurfaced" : "olderVersion"
            }
            let kind: String, hierarchy: String?
            if entry.key == KeyLayout.metadataKey {
                (kind, hierarchy) = ("metadata", nil)
            } else if entry.key == KeyLayout.modelKey {
                (kind, hierarchy) = ("model", nil)
            } else if entry.key.first == KeyLayout.rowTag, let row = ObjectChecker.Run.parseRowKey(entry.key) {
                (kind, hierarchy) = ("rows", row.root)
            } else if entry.key.first == RelationshipKeys.tag, let parts = RelationshipKeys.parse(entry.key) {
                (kind, hierarchy) = ("relationshipKeys", parts.root + "." + parts.relationship)
            } else if StoreSurvey.isIndexKey(entry.key), let root = entry.key.dropFirst().split(separator: 0, maxSplits: 1).first {
                (kind, hierarchy) = ("indexEntries", String(decoding: root, as: UTF8.self))
            } else {
                (kind, hierarchy) = ("keys", nil)
            }
            let group = Group(kind: kind, hierarchy: hierarchy, outcome: outcome)
            if groups[group] == nil { order.append(group) }
            groups[group, default: []].append(entry)
        }
        for group in order {
            let entries = groups[group] ?? []
            let sequences = entries.map(\.sequence)
            let first = sequences.min() ?? 0, last = sequences.max() ?? 0
            let written = first == last ? "written at sequence \(first)" : "written at sequences \(first)…\(last)"
            let references = group.kind == "rows" ? entries.compactMap { ObjectChecker.Run.parseRowKey($0.key)?.reference }.sorted() : nil
            let what: String
            switch group.kind {
            case "metadata": what = "the metadata record ([ROW-4]: row counts, next reference, store UUID, version hashes)"
            case "model": what = "the model record ([ROW-5])"
            case "rows": what = "\(entries.count) row\(entries.count == 1 ? "" : "s") in \(group.hierarchy ?? "?")'s key space (\(referenceRanges(references ?? [])))"
            case "relationshipKeys": what = "\(entries.count) relationship key\(entries.count == 1 ? "" : "s") of \(group.hierarchy ?? "?")"
            case "indexEntries": what = "\(entries.count) index entr\(entries.count == 1 ? "y" : "ies") in \(group.hierarchy ?? "?")'s key space"
            default: what = "\(entries.count) other key\(entries.count == 1 ? "" : "s")"
            }
            let verdict: String
            switch group.outcome {
            case "gone": verdict = group.kind == "rows" ? "gone: the objects are lost" : "gone"
            case "olderVersion": verdict = "an older version is read instead: the newest writes are lost"
            case "resurfaced": verdict = "deletions lost: the older values are back"
            case "superseded": verdict = "superseded by newer writes: nothing acknowledged is lost"
            default: verdict = "lost deletions of keys that hold nothing: no effect"
            }
            let deletions = entries.allSatisfy(\.isDelete) ? "deletions of " : (entries.contains(where: \.isDelete) ? "writes and deletions of " : "")
            let verb = group.outcome == "superseded" || group.outcome == "unchanged" ? "dropped" : "lost"
            losses.append(FsckLoss(
                kind: group.kind, hierarchy: group.hierarchy, count: entries.count, firstSequence: first, lastSequence: last,
                references: references, outcome: group.outcome, message: "\(verb) \(deletions)\(what), \(written): \(verdict)"))
        }
        return losses
    }

    /// References as runs: `p1…p12, p40`, at most eight runs.
    static func referenceRanges(_ references: [Int64]) -> String {
        var runs: [(Int64, Int64)] = []
        for reference in references {
            if let last = runs.last, last.1 + 1 == reference {
                runs[runs.count - 1].1 = reference
            } else {
                runs.append((reference, reference))
            }
        }
        let text = runs.prefix(8).map { $0.0 == $0.1 ? "p\($0.0)" : "p\($0.0)…p\($0.1)" }.joined(separator: ", ")
        return runs.count > 8 ? text + ", …" : text
    }

    /// The object-level check on a read-only engine, or why it could not run.
    static func objectCheck(
        path: String, fileSystem: any FileSystem, filesClean: Bool, progress: (@Sendable (Int, Int) -> Void)? = nil,
        logger: Logger? = nil
    ) -> (ObjectCheckReport?, String?) {
        do {
            return (try StoreInspector.withEngine(at: path, fileSystem: fileSystem, logger: logger) {
                try ObjectChecker.check(engine: $0, repair: false, lost: [], progress: progress)
            }, nil)
        } catch {
            let reason = filesClean
                ? "the object check failed: \(error)"
                : "the object check needs the files repaired first (\(error))"
            return (nil, reason)
        }
    }

    /// Copies every file of the store into a new directory while holding the store's lock, and
    /// returns the directory.
    static func backUp(_ path: String, to requested: String?, fileSystem: any FileSystem) throws -> String {
        let lock = try fileSystem.lock(path + "/LOCK")
        defer { lock.unlock() }
        let trimmed = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        let destination = requested ?? trimmed + ".fsck-backup-" + timestamp()
        let manager = FileManager.default
        guard !manager.fileExists(atPath: destination) else {
            throw StoreError(.invalidArgument, "the backup directory already exists; name another with --backup-dir", path: destination)
        }
        do {
            try manager.createDirectory(atPath: destination, withIntermediateDirectories: true)
            for name in try fileSystem.contentsOfDirectory(path) where name != "LOCK" {
                try manager.copyItem(atPath: path + "/" + name, toPath: destination + "/" + name)
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(.io, "could not back up the store before repairing it: \(error.localizedDescription)", path: destination)
        }
        return destination
    }

    /// The current UTC time as `yyyyMMdd-HHmmss`.
    static func timestamp() -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd-HHmmss"
        return formatter.string(from: Date())
    }
}

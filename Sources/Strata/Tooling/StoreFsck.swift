import Foundation
import ObjectGraph
import StrataEngine

/// One engine-level problem, as `strata fsck` reports it (``CheckProblem`` with the key in hex).
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

    init(_ report: CheckReport) {
        walRecords = report.walRecords
        blocks = report.blocks
        entries = report.entries
        liveKeys = report.liveKeys
        bytesChecked = report.bytesChecked
        problems = report.problems.map(FileProblem.init)
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
    /// Object-level repairs (removed links, rebuilt index entries, rewritten metadata).
    public var objectRepairs: [String] = []
    /// The check after the repair, if one ran.
    public var after: FsckSummary?

    /// Whether the store was clean when checked (before any repair).
    public var isClean: Bool { files.isClean && (objects?.problems.isEmpty ?? (objectsSkippedReason == nil)) }
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
    /// The file system (tests inject faults through it).
    public var fileSystem: any FileSystem = PosixFileSystem()

    /// Options that only check.
    public init() {}
}

/// `strata fsck`: the engine-level check (``StoreChecker``: every checksum, the manifest
/// against the files, hints against blocks, the index against a full scan) and, for a
/// StrataStore, the object-level check (``ObjectChecker``).
///
/// With ``FsckOptions/repair`` it first takes the store's lock (so it never touches a store
/// open in another process), copies every file of the store to a backup directory (unless
/// told not to), opens the engine in repair mode (which truncates torn tails, drops
/// unreadable WAL records and blocks, and rebuilds the manifest), runs the object-level
/// repair, and checks the store again. The report lists exactly what was dropped.
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
    /// - Throws: ``StoreError`` when `path` is not a store, the store is locked by another
    ///   process, its format is newer than this build, or the files cannot be read; damage is
    ///   reported, not thrown.
    public static func run(at path: String, options: FsckOptions = FsckOptions()) throws -> FsckReport {
        let fileReport = try StoreChecker.check(at: path, fileSystem: options.fileSystem, progress: options.progress)
        var report = FsckReport(path: path, files: FileCheckSummary(fileReport))
        (report.objects, report.objectsSkippedReason) = objectCheck(path: path, fileSystem: options.fileSystem, filesClean: fileReport.isClean)
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
        let engine = try Engine.open(at: path, options: engineOptions)
        do {
            if let repair = engine.repairReport {
                report.dropped = repair.dropped.map(\.description)
                report.rebuiltManifest = repair.rebuiltManifest
            }
            let objects = try ObjectChecker.check(engine: engine, repair: true)
            report.objectRepairs = objects.repairs
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
        try Engine.open(at: path, options: tidy).close()
        let again = try StoreChecker.check(at: path, fileSystem: options.fileSystem)
        let (objectsAfter, skipped) = objectCheck(path: path, fileSystem: options.fileSystem, filesClean: again.isClean)
        let fileProblems = again.problems.map(FileProblem.init)
        report.after = FsckSummary(
            fileProblems: fileProblems, objectProblems: objectsAfter?.problems ?? [],
            isClean: again.isClean && (objectsAfter?.problems.isEmpty ?? (skipped == nil)))
        return report
    }

    /// The object-level check on a read-only engine, or why it could not run.
    static func objectCheck(path: String, fileSystem: any FileSystem, filesClean: Bool) -> (ObjectCheckReport?, String?) {
        do {
            return (try StoreInspector.withEngine(at: path, fileSystem: fileSystem) { try ObjectChecker.check(engine: $0, repair: false) }, nil)
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

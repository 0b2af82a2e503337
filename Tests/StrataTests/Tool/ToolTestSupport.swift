#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Dispatch
import Foundation
import ObjectGraph
import Strata
import StrataDemo
import StrataDemo
import StrataEngine
import StrataSync
import Testing

// Support for the tests of the `strata` executable (Tools/strata): running it as a process,
// building stores for it to work on, and reading and damaging their files as SPEC.md
// describes them (independently of the engine's own readers).

// MARK: - Running the tool

/// One finished run of `strata`.
struct ToolRun: CustomStringConvertible {
    /// The arguments after the executable.
    var arguments: [String]
    /// The exit status (128 + the signal number if a signal ended it).
    var status: Int32
    /// Everything written to standard output.
    var stdout: String
    /// Everything written to standard error.
    var stderr: String

    var description: String {
        "strata \(arguments.joined(separator: " ")) → exit \(status)\n--- stdout:\n\(stdout.prefix(4000))\n--- stderr:\n\(stderr.prefix(4000))"
    }

    /// Standard output's lines, without the empty line after the last newline.
    var lines: [String] { stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).filter { !$0.isEmpty } }

    /// Standard output decoded as `T` (the tool's `--json` output).
    func json<T: Decodable>(_ type: T.Type) throws -> T {
        do {
            return try JSONDecoder().decode(T.self, from: Data(stdout.utf8))
        } catch {
            throw ToolTestFailure("standard output does not decode as \(T.self): \(error)\n\(self)")
        }
    }
}

/// A failure of the tests' own machinery.
struct ToolTestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

enum StrataTool {
    /// How long one run may take before it is killed (a hang fails the test instead of the suite).
    static let runTimeout: DispatchTimeInterval = .seconds(120)

    /// `strata`, built by this package next to the test bundle (or the path in `STRATA_TOOL`).
    static func executable() throws -> String { try siblingExecutable("strata", override: "STRATA_TOOL") }

    /// Runs `strata arguments` (through `wrapper`, e.g. `setpriv …`, if given) with standard
    /// input from /dev/null and standard output and error captured in files under `scratch`,
    /// and waits for it.
    static func run(_ arguments: [String], scratch: String, wrapper: [String] = [], environment: [String: String] = [:]) throws -> ToolRun {
        let tool = try executable()
        let command = wrapper.isEmpty ? [tool] + arguments : wrapper + [tool] + arguments
        let token = UUID().uuidString
        let outPath = scratch + "/.stdout-" + token, errPath = scratch + "/.stderr-" + token
        defer {
            try? FileManager.default.removeItem(atPath: outPath)
            try? FileManager.default.removeItem(atPath: errPath)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let argv = command.map { strdup($0) } + [nil]
        let envp = ProcessInfo.processInfo.environment.merging(environment) { $1 }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, command[0], &actions, nil, argv, envp)
        guard spawned == 0 else { throw ToolTestFailure("cannot start \(command[0]): posix_spawn error \(spawned)") }

        // A watchdog kills a run that hangs. The child is only reaped after `finished` is set,
        // so the watchdog can never signal a reused pid.
        let finished = Locked(false), child = pid
        DispatchQueue.global().asyncAfter(deadline: .now() + runTimeout) {
            finished.withLock { done in if !done { kill(child, SIGKILL) } }
        }
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR {}
        finished.withLock { $0 = true }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let signal = status & 0x7F
        let exit = signal == 0 ? (status >> 8) & 0xFF : 128 + signal
        let stdout = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
        let stderr = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
        return ToolRun(arguments: arguments, status: exit, stdout: stdout, stderr: stderr)
    }
}

/// A new temporary directory, removed (with everything in it) when this goes away. Tests work
/// in `path + "/store"` and friends, so backups written beside a store are removed too.
final class ToolScratch {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("strata-tool-tests-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Runs `strata arguments`.
    func run(_ arguments: String...) throws -> ToolRun { try StrataTool.run(arguments, scratch: path) }

    /// Runs `strata arguments`.
    func run(_ arguments: [String], wrapper: [String] = [], environment: [String: String] = [:]) throws -> ToolRun {
        try StrataTool.run(arguments, scratch: path, wrapper: wrapper, environment: environment)
    }

    /// The names of the entries of the directory at `path`, sorted.
    func names(in directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
    }
}

// MARK: - The tool's JSON, mirrored (only what the tests read)

/// `strata fsck --json`.
struct FsckJSON: Decodable {
    /// `clean`, `problems`, `repaired` or `unrepaired`, as the exit status says.
    var verdict: String
    struct FileProblem: Decodable {
        var severity: String
        var path: String
        var offset: UInt64?
        var key: String?
        var message: String
    }
    struct Files: Decodable {
        var walRecords: Int
        var blocks: Int
        var entries: Int
        var liveKeys: Int
        var bytesChecked: UInt64
        var problems: [FileProblem]
        var lostSequences: [SequenceRange]
    }
    struct SequenceRange: Decodable, Equatable {
        var first: UInt64
        var last: UInt64
    }
    struct ObjectProblem: Decodable {
        var kind: String
        var key: String?
        var object: String?
        var message: String
    }
    struct Objects: Decodable {
        var isObjectStore: Bool
        var hasModel: Bool
        var rows: Int
        var references: Int
        var indexEntries: Int
        var problems: [ObjectProblem]
        var repairs: [String]
    }
    struct After: Decodable {
        var fileProblems: [FileProblem]
        var objectProblems: [ObjectProblem]
        var isClean: Bool
    }
    var path: String
    var files: Files
    var objects: Objects?
    var objectsSkippedReason: String?
    var repaired: Bool
    var backupPath: String?
    var dropped: [String]
    var rebuiltManifest: Bool
    var lostSequences: [SequenceRange]
    var keptCopies: [String]
    var objectRepairs: [String]
    var after: After?
    struct Loss: Decodable {
        var kind: String
        var hierarchy: String?
        var count: Int
        var firstSequence: UInt64?
        var lastSequence: UInt64?
        var references: [Int64]?
        var outcome: String
        var message: String
    }
    var losses: [Loss]?

    /// Every problem (file and object level), as text, for failure messages and searches.
    var problemTexts: [String] {
        files.problems.map { "\($0.severity) \($0.path) \($0.offset.map(String.init) ?? "-") \($0.key ?? "-") \($0.message)" }
            + (objects?.problems ?? []).map { "\($0.kind) \($0.object ?? "-") \($0.key ?? "-") \($0.message)" }
    }
}

/// `strata compact --json`.
struct CompactJSON: Decodable {
    var bytesBefore: UInt64
    var bytesAfter: UInt64
    var liveBytesBefore: UInt64
    var liveBytesAfter: UInt64
    var segmentsBefore: Int
    var segmentsAfter: Int
    var segmentsRemoved: Int
    var segmentsWritten: Int
    var walsBefore: Int
    var walsAfter: Int
    var keyCount: Int
}

/// `strata inspect --json`.
struct InspectJSON: Decodable {
    struct File: Decodable {
        var kind: String
        var name: String
        var sizeBytes: UInt64
        var liveBytes: UInt64
        var deadBytes: UInt64
        var records: Int
        var entries: Int
        var dataBlocks: Int
    }
    struct Entity: Decodable {
        var name: String
        var superentity: String?
        var rows: Int
        var attributes: [String]
        var relationships: [String]
    }
    var path: String
    var nextFileNumber: UInt32
    var lastSequence: UInt64
    var keyCount: Int
    var files: [File]
    var isObjectStore: Bool
    var storeIdentifier: String?
    var nextReference: Int64?
    var entities: [Entity]
    var rowCounts: [String: Int]
}

/// `strata stats --json`.
struct StatsJSON: Decodable {
    var keyCount: Int
    var diskBytes: UInt64
    var liveBytes: UInt64
    var deadBytes: UInt64
    var spaceAmplification: Double
    var walFiles: Int
    var segmentFiles: Int
    var lastSequence: UInt64
    var rowCounts: [String: Int]
}

/// One record of `strata dump --json` or `strata inspect --key/--object --json`; `fields`
/// holds values of any JSON type, so they are read with JSONSerialization.
struct RecordJSON {
    var key: String
    var kind: String
    var object: String?
    var entity: String?
    var reference: Int64?
    var version: UInt64?
    var fields: [String: Any]?

    init(_ text: String) throws {
        guard let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
            let key = object["key"] as? String, let kind = object["kind"] as? String
        else { throw ToolTestFailure("not a record: \(text)") }
        self.key = key
        self.kind = kind
        self.object = object["object"] as? String
        self.entity = object["entity"] as? String
        self.reference = (object["reference"] as? NSNumber)?.int64Value
        self.version = (object["version"] as? NSNumber)?.uint64Value
        self.fields = object["fields"] as? [String: Any]
    }
}

// MARK: - Stores to work on

/// A StrataStore of the demo's library model (Author 1—* Book *—* Shelf; Author.name,
/// Book.year and Book.genre indexed), built so that its rows lie in two segments and in the
/// WAL:
///
/// - save 1: shelves S0…S2, authors A0…A3 with books B0…B11, then a flush (segment 1);
/// - save 2: authors A4, A5 with books B12…B15, then a flush (segment 2);
/// - save 3: reprice B0 and B13 and put B1 on another shelf;
/// - save 4: author A6 with book B16;
/// - save 5: change A0's year of birth.
///
/// Saves 3…5 are the three records of the only WAL. Every book has an author and two shelves.
struct LibraryStore {
    /// The store directory.
    var path: String
    /// `NSStoreUUID`.
    var storeIdentifier: String
    /// Object URIs by name ("A0", "B3", "S1", …).
    var uris: [String: String]

    static let authors = 7
    static let books = 17
    static let shelves = 3
    static var rows: Int { authors + books + shelves }
    /// Relationship destinations followed by a full check: per book its author and two
    /// shelves, and the inverse of each from the author's and the shelves' rows.
    static var references: Int { books * 6 }
    /// Author.name, Book.year and Book.genre.
    static var indexEntries: Int { authors + books * 2 }
    /// Relationship keys ([REL-1]): per book one Author.books key (one-to-many) and two keys
    /// each way with its shelves (many-to-many).
    static var relationshipKeys: Int { books * 5 }
    /// Rows, index entries, relationship keys, the metadata record and the model record.
    static var keys: Int { rows + indexEntries + relationshipKeys + 2 }
    /// Book B0 after save 3.
    static let bookZero = (title: "Book 0", year: Int16(1900), genre: "fiction", price: 9.5)

    static func bookValues(_ index: Int) -> (title: String, year: Int16, genre: String, price: Double) {
        let genres = ["fiction", "history", "poetry"]
        return ("Book \(index)", Int16(1900 + index), genres[index % genres.count], 10 + Double(index))
    }

    /// Builds the store in `path`.
    static func build(at path: String) throws -> LibraryStore {
        StrataStore.register()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try ObjectGraphDemo.model())
        let persistent = try coordinator.addPersistentStore(
            type: .strata, at: URL(fileURLWithPath: path),
            options: [StrataStore.compactionOption: false, StrataStore.durabilityOption: "none"])
        guard let engine = (persistent as? StrataStore)?.storageEngine else { throw ToolTestFailure("the store has no engine") }
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var objects: [String: ManagedObject] = [:]
        var bookCount = 0

        func author(_ index: Int, books: Int, shelves: [ManagedObject]) throws {
            let author = try context.insertNewObject(forEntityName: "Author")
            try author.setValue(.string("Author \(index)"), forKey: "name")
            try author.setValue(.int16(Int16(1800 + index)), forKey: "born")
            objects["A\(index)"] = author
            for _ in 0..<books {
                let values = bookValues(bookCount)
                let book = try context.insertNewObject(forEntityName: "Book")
                try book.setValue(.string(values.title), forKey: "title")
                try book.setValue(.int16(values.year), forKey: "year")
                try book.setValue(.string(values.genre), forKey: "genre")
                try book.setValue(.double(values.price), forKey: "price")
                try book.setValue(author, forKey: "author")
                try book.setValue([shelves[bookCount % 3], shelves[(bookCount + 1) % 3]], forKey: "shelves")
                objects["B\(bookCount)"] = book
                bookCount += 1
            }
        }

        // Save 1.
        var shelves: [ManagedObject] = []
        for index in 0..<3 {
            let shelf = try context.insertNewObject(forEntityName: "Shelf")
            try shelf.setValue(.string("Shelf \(index)"), forKey: "label")
            objects["S\(index)"] = shelf
            shelves.append(shelf)
        }
        for index in 0..<4 { try author(index, books: 3, shelves: shelves) }
        try context.save()
        try engine.flush()
        // Save 2.
        for index in 4..<6 { try author(index, books: 2, shelves: shelves) }
        try context.save()
        try engine.flush()
        // Save 3: B0 repriced, B13 repriced, B1 moves from S1 to S0 (it stays on two shelves).
        try objects["B0"]!.setValue(.double(bookZero.price), forKey: "price")
        try objects["B13"]!.setValue(.double(99), forKey: "price")
        try objects["B1"]!.setValue([shelves[0], shelves[2]], forKey: "shelves")
        try context.save()
        // Save 4.
        try author(6, books: 1, shelves: shelves)
        try context.save()
        // Save 5.
        try objects["A0"]!.setValue(.int16(1700), forKey: "born")
        try context.save()

        let uris = objects.mapValues { $0.objectID.uriRepresentation().absoluteString }
        let parts = uris["A0", default: ""].split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 5 else { throw ToolTestFailure("unexpected object URI \(uris["A0"] ?? "-")") }
        let identifier = String(parts[2])
        try coordinator.remove(persistent)
        precondition(bookCount == books)
        return LibraryStore(path: path, storeIdentifier: identifier, uris: uris)
    }

    /// The reference in an object URI (`…/p<ref>`).
    static func reference(ofURI uri: String) -> Int64? {
        guard let last = uri.split(separator: "/").last, last.hasPrefix("p") else { return nil }
        return Int64(last.dropFirst())
    }

    /// The row key of `uri`'s object ([KEY-2]): `0x01 root 0x00 ref` (8 bytes, big-endian,
    /// sign bit flipped). The library model has no subentities, so the root is the entity.
    static func rowKey(ofURI uri: String) -> [UInt8]? {
        let parts = uri.split(separator: "/")
        guard parts.count >= 2, let reference = reference(ofURI: uri) else { return nil }
        let entity = String(parts[parts.count - 2])
        return [0x01] + Array(entity.utf8) + [0x00] + OnDisk.referenceBytes(reference)
    }

    /// Opens the store with the engine alone (no ObjectGraph), automatic work off.
    static func openEngine(_ path: String) throws -> Engine {
        var options = EngineOptions()
        options.compaction.automatic = false
        options.backgroundFlush = false
        return try Engine.open(at: path, options: options)
    }
}

// MARK: - The files, as SPEC.md describes them

/// Reads and damages store files byte by byte, following SPEC.md rather than the engine's code.
enum OnDisk {
    static func u32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[at + $1]) << (8 * UInt32($1)) }
    }

    static func u64(_ bytes: [UInt8], _ at: Int) -> UInt64 {
        (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) }
    }

    static func putU32(_ value: UInt32, into bytes: inout [UInt8], at: Int) {
        for i in 0..<4 { bytes[at + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt32(i))) }
    }

    /// [KEY-2] A reference as 8 bytes: big-endian with the sign bit flipped.
    static func referenceBytes(_ reference: Int64) -> [UInt8] {
        let ordered = UInt64(bitPattern: reference) ^ (1 << 63)
        return (0..<8).map { UInt8(truncatingIfNeeded: ordered >> (8 * UInt64(7 - $0))) }
    }

    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }

    static func read(_ path: String) throws -> [UInt8] { [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))) }

    static func write(_ bytes: [UInt8], to path: String) throws { try Data(bytes).write(to: URL(fileURLWithPath: path)) }

    /// Flips the bits of `mask` in the byte at `offset` of the file at `path`.
    static func flip(_ path: String, at offset: Int, mask: UInt8 = 0xFF) throws {
        var bytes = try read(path)
        bytes[offset] ^= mask
        try write(bytes, to: path)
    }

    /// `NNNNNNNN.wal` / `NNNNNNNN.seg` ([DIR-1]).
    static func walName(_ number: UInt32) -> String { String(format: "%08u.wal", number) }
    static func segmentName(_ number: UInt32) -> String { String(format: "%08u.seg", number) }

    /// [MAN-1] The manifest's fields.
    struct Manifest {
        var version: UInt32
        var nextFileNumber: UInt32
        var lastSequence: UInt64
        var wals: [UInt32]
        var segments: [(number: UInt32, size: UInt64)]
    }

    static func manifest(of store: String) throws -> Manifest {
        let bytes = try read(store + "/MANIFEST")
        guard bytes.count >= 20, Array(bytes[0..<8]) == Array("STRATMAN".utf8) else { throw ToolTestFailure("no manifest in \(store)") }
        var position = 16
        func next32() -> UInt32 { defer { position += 4 }; return u32(bytes, position) }
        func next64() -> UInt64 { defer { position += 8 }; return u64(bytes, position) }
        let version = u32(bytes, 8)
        let nextFileNumber = next32(), lastSequence = next64()
        let wals = (0..<next32()).map { _ in next32() }
        let segments = (0..<next32()).map { _ in (number: next32(), size: next64()) }
        return Manifest(version: version, nextFileNumber: nextFileNumber, lastSequence: lastSequence, wals: wals, segments: segments)
    }

    /// [WAL-2] The byte ranges (header and payload) of every whole record of a WAL.
    static func walRecords(_ bytes: [UInt8]) -> [Range<Int>] {
        var records: [Range<Int>] = []
        var position = 32
        while position + 16 <= bytes.count {
            let end = position + 16 + Int(u32(bytes, position + 4))
            guard end <= bytes.count else { break }
            records.append(position..<end)
            position = end
        }
        return records
    }

    /// [SEG-3] [SEG-5] [SEG-6] Where a segment's blocks and footer are.
    struct SegmentLayout {
        var size: Int
        /// Each data block: its offset and stored length (after its 16-byte header).
        var dataBlocks: [(offset: Int, stored: Int)]
        var hintBlocks: [(offset: Int, stored: Int)]
        var tableOffset: Int
        var footer: Int { size - 64 }
    }

    static func segmentLayout(_ bytes: [UInt8]) -> SegmentLayout {
        let footer = bytes.count - 64
        let dataCount = Int(u32(bytes, footer + 16)), hintCount = Int(u32(bytes, footer + 20))
        let table = Int(u64(bytes, footer + 24))
        let rows = (0..<(dataCount + hintCount)).map { row in
            (offset: Int(u64(bytes, table + 16 * row)), stored: Int(u32(bytes, table + 16 * row + 8)))
        }
        return SegmentLayout(
            size: bytes.count, dataBlocks: Array(rows.prefix(dataCount)), hintBlocks: Array(rows.dropFirst(dataCount)),
            tableOffset: table)
    }

    /// Every regular file of a directory with its bytes (LOCK excluded).
    static func files(in directory: String) throws -> [String: Data] {
        var result: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) where name != "LOCK" {
            result[name] = try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name))
        }
        return result
    }
}

/// The text `strata` prints for a byte count (Tools/strata/Output.swift `Output.bytes`): exact
/// below 1 KiB, else one decimal and a binary unit.
func humanBytes(_ bytes: UInt64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"]
    var value = Double(bytes), unit = 0
    while value >= 1024 && unit < units.count - 1 {
        value /= 1024
        unit += 1
    }
    return unit == 0 ? "\(bytes) B" : String(format: "%.1f %@", value, units[unit])
}

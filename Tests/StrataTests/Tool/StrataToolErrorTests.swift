#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Foundation
import Strata
import StrataEngine
import Testing

/// Exit status 2 with an explanation on standard error for everything that is not a usable
/// store, and usage errors; help that shows examples.
@Suite(.timeLimit(.minutes(5))) struct StrataToolErrorTests {
    /// Every command that takes a store, read-only ones and writing ones.
    static let storeCommands: [[String]] = [["fsck"], ["fsck", "--repair"], ["compact"], ["inspect"], ["dump"], ["stats"]]

    /// Runs every command of ``storeCommands`` on `store` and checks each exits 2, prints
    /// nothing on standard output and explains on standard error with `explanation`.
    static func expectEveryCommandRefuses(
        _ store: String, in scratch: ToolScratch, explaining explanation: String, wrapper: [String] = [],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        for command in storeCommands {
            let run = try scratch.run(command + [store], wrapper: wrapper)
            #expect(run.status == 2, "\(run)", sourceLocation: sourceLocation)
            #expect(run.stdout.isEmpty, "\(run)", sourceLocation: sourceLocation)
            #expect(run.stderr.hasPrefix("strata: ") && run.stderr.contains(explanation), "\(run)", sourceLocation: sourceLocation)
        }
    }

    /// The store's directory, the directories beside it included, as names and bytes.
    static func everything(in directory: String) throws -> [String: Data] {
        var result: [String: Data] = [:]
        let manager = FileManager.default
        for name in try manager.subpathsOfDirectory(atPath: directory) where !name.contains(".stdout-") && !name.contains(".stderr-") {
            var isDirectory: ObjCBool = false
            _ = manager.fileExists(atPath: directory + "/" + name, isDirectory: &isDirectory)
            result[name] = isDirectory.boolValue ? Data() : try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name))
        }
        return result
    }

    // [DIR-4] A foreign directory is refused and never written.
    @Test func aDirectoryThatIsNotAStoreIsRefusedAndLeftUntouched() throws {
        let scratch = try ToolScratch()
        let directory = scratch.path + "/photos"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Data((0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7919) }).write(to: URL(fileURLWithPath: directory + "/holiday.jpg"))
        let before = try Self.everything(in: scratch.path)
        try Self.expectEveryCommandRefuses(directory, in: scratch, explaining: "is not a Strata store")
        let listing = (try? scratch.names(in: directory)) ?? []
        #expect(try Self.everything(in: scratch.path) == before, "nothing written in or beside a foreign directory: \(listing)")
    }

    /// A directory with a foreign MANIFEST: the explanation says once that it is not a store,
    /// says why, and with `--json` the same failure is a JSON document on standard output
    /// (verdict `error`, the code, the file and offset, the remedy).
    @Test func aForeignManifestIsExplainedOnceAndAsJSON() throws {
        struct Failure: Decodable {
            struct Detail: Decodable {
                var code: String
                var message: String
                var file: String?
                var offset: UInt64?
                var remedy: String?
            }
            var verdict: String
            var error: Detail
        }
        let scratch = try ToolScratch()
        let directory = scratch.path + "/foreign"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Data("not a manifest at all".utf8).write(to: URL(fileURLWithPath: directory + "/MANIFEST"))
        for command in [["stats"], ["inspect"], ["compact"]] {
            let text = try scratch.run(command + [directory])
            #expect(text.status == 2, "\(text)")
            #expect(text.stderr.components(separatedBy: "not a Strata store").count == 2, "said once: \(text)")
            #expect(text.stderr.contains("MANIFEST does not start with the Strata manifest magic"), "\(text)")

            let json = try scratch.run(command + ["--json", directory])
            #expect(json.status == 2, "\(json)")
            let failure = try json.json(Failure.self)
            #expect(failure.verdict == "error" && failure.error.code == "notAStore", "\(json)")
            #expect(failure.error.file == directory + "/MANIFEST" && failure.error.offset == 0, "\(json)")
            #expect(failure.error.message.hasPrefix("strata: \(directory) is not a Strata store"), "\(json)")
            #expect(failure.error.remedy?.contains("Check the path") == true, "\(json)")
            #expect(json.stderr.contains("is not a Strata store"), "the text too: \(json)")
        }
    }

    @Test func aPathThatDoesNotExistIsRefusedAndNotCreated() throws {
        let scratch = try ToolScratch()
        let missing = scratch.path + "/no-such-store"
        try Self.expectEveryCommandRefuses(missing, in: scratch, explaining: "no-such-store")
        for command in Self.storeCommands {
            let run = try scratch.run(command + [missing])
            #expect(run.stderr.contains("Check the path"), "\(run)")
        }
        #expect(!FileManager.default.fileExists(atPath: missing), "no store was created at a mistyped path")
    }

    // [DIR-5] The tool is another process: the flock this test process holds refuses it.
    @Test func aStoreOpenInAnotherProcessIsRefusedAndLeftUntouched() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        let engine = try LibraryStore.openEngine(library.path)
        defer { try? engine.close() }
        let before = try Self.everything(in: scratch.path)
        try Self.expectEveryCommandRefuses(library.path, in: scratch, explaining: "is open in another process")
        #expect(try Self.everything(in: scratch.path) == before, "no backup, no change")
        try engine.close()
        #expect(try scratch.run("fsck", library.path).status == 0, "the lock was the only obstacle")
    }

    // [MAN-1] [MAN-3] A well-formed manifest of format version 2 (its CRC recomputed, so it is
    // not damage): every command refuses it as newer, exit 2, and changes nothing.
    @Test func aStoreOfANewerFormatVersionIsRefusedAsNewerAndLeftUntouched() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        var manifest = try OnDisk.read(library.path + "/MANIFEST")
        #expect(OnDisk.u32(manifest, 8) == 1)
        OnDisk.putU32(2, into: &manifest, at: 8)
        OnDisk.putU32(CRC32C.checksum(Array(manifest.dropLast(4))), into: &manifest, at: manifest.count - 4)
        try OnDisk.write(manifest, to: library.path + "/MANIFEST")
        let before = try Self.everything(in: scratch.path)
        try Self.expectEveryCommandRefuses(library.path, in: scratch, explaining: "newer version of Strata")
        let listing = (try? scratch.names(in: scratch.path)) ?? []
        #expect(try Self.everything(in: scratch.path) == before, "no backup, no change: \(listing)")
    }

    static let setpriv = "/usr/bin/setpriv"

    // A segment the tool may not read. Root ignores permissions, so as root the tool runs as
    // `nobody` (setpriv) on a store that `nobody` owns; without setpriv, root cannot test this.
    @Test(.enabled(if: getuid() != 0 || FileManager.default.isExecutableFile(atPath: setpriv), "root needs setpriv to run the tool as nobody"))
    func anUnreadableSegmentIsAPermissionErrorNamingTheFile() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        let segment = library.path + "/" + OnDisk.segmentName(try #require(try OnDisk.manifest(of: library.path).segments.first).number)
        var wrapper: [String] = []
        if getuid() == 0 {
            wrapper = [Self.setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
            chmod(scratch.path, 0o755)
            for name in try scratch.names(in: library.path) + [""] {
                #expect(chown(library.path + "/" + name, 65534, 65534) == 0)
            }
            // The tool must be reachable by nobody (a build under a private home is not): if it
            // is not, this machine cannot run the check.
            let probe = try scratch.run(["--help"], wrapper: wrapper)
            guard probe.status == 0 else { return }
        }
        #expect(chmod(segment, 0) == 0)
        try Self.expectEveryCommandRefuses(library.path, in: scratch, explaining: "permission denied", wrapper: wrapper)
        for command in Self.storeCommands {
            let run = try scratch.run(command + [library.path], wrapper: wrapper)
            #expect(run.stderr.contains(segment) || run.stderr.contains((segment as NSString).lastPathComponent), "names the file: \(run)")
        }
        chmod(segment, 0o644)
        #expect(try scratch.run(["fsck", library.path], wrapper: wrapper).status == 0, "the permission was the only obstacle")
    }

    @Test func usageErrorsExitWithStatus2AndSayWhatIsWrong() throws {
        let scratch = try ToolScratch()
        let store = scratch.path + "/store"
        let cases: [(arguments: [String], explanation: String)] = [
            (["fsck", "--frobnicate", store], "--frobnicate"),
            (["frobnicate", store], "frobnicate"),
            (["fsck"], "store"),
            (["fsck", "--no-backup", store], "--repair"),
            (["fsck", "--repair", "--no-backup", "--backup-dir", scratch.path + "/b", store], "contradict"),
            (["fsck", "--limit", "-1", store], "--limit"),
            (["compact", "--full", "--min-dead-ratio", "0.1", store], "--full"),
            (["compact", "--min-dead-ratio", "2", store], "--min-dead-ratio"),
            (["inspect", "--key", "00", "--object", "x-coredata://u/E/p1", store], "--key"),
            (["demo", "--authors", "1", scratch.path + "/demo"], "--authors"),
        ]
        for (arguments, explanation) in cases {
            let run = try scratch.run(arguments)
            #expect(run.status == 2, "\(run)")
            #expect(run.stderr.contains(explanation), "\(run)")
        }
        #expect(try scratch.names(in: scratch.path).isEmpty, "a usage error touches nothing")
    }

    @Test func helpForTheToolAndEverySubcommandShowsExamplesAndExitsZero() throws {
        let scratch = try ToolScratch()
        for arguments in [["--help"], ["fsck", "--help"], ["compact", "--help"], ["inspect", "--help"], ["dump", "--help"], ["stats", "--help"], ["demo", "--help"], ["help", "fsck"]] {
            let run = try scratch.run(arguments)
            #expect(run.status == 0, "\(run)")
            #expect(run.stdout.contains("Example"), "\(run)")
        }
        let top = try scratch.run("--help")
        for subcommand in ["fsck", "compact", "inspect", "dump", "stats", "demo"] {
            #expect(top.stdout.contains(subcommand), "\(subcommand) listed")
        }
        #expect(try scratch.run("fsck", "--help").stdout.contains("Exit status"), "fsck documents its exit statuses")
    }
}

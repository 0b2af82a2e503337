#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Foundation
import Strata
import StrataEngine
import Testing

/// [DIR-5] The read-only commands (fsck without --repair, inspect, dump, stats) work on a store
/// they may not write: they take a shared lock on an existing LOCK, or none, and create nothing.
@Suite(.timeLimit(.minutes(5))) struct StrataToolReadOnlyTests {
    static let setpriv = "/usr/bin/setpriv"

    /// The store's files (LOCK included) with their bytes, and the names in its directory.
    static func image(of directory: String) throws -> [String: Data] {
        var result: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
            result[name] = try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name))
        }
        return result
    }

    // The library functions behind the commands, on a simulated read-only mount: runs always,
    // whoever runs the tests (root ignores file modes, a mount it cannot ignore).
    @Test func theReadOnlyCommandsWorkOnAReadOnlyMountAndChangeNoByte() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        let fs = FaultInjectingFileSystem()
        for (name, bytes) in try Self.image(of: library.path) { fs.setContents([UInt8](bytes), of: "/store/" + name) }
        #expect(fs.contents(of: "/store/LOCK") != nil)
        let before = fs.listFiles(under: "/store").map { ($0, fs.contents(of: $0) ?? []) }
        fs.isReadOnlyMount = true

        var fsckOptions = FsckOptions()
        fsckOptions.fileSystem = fs
        let fsck = try StoreFsck.run(at: "/store", options: fsckOptions)
        #expect(fsck.isClean, "\(fsck.files.problems) \(String(describing: fsck.objects?.problems))")
        #expect(fsck.objects?.rows == LibraryStore.rows)
        let inspect = try StoreInspector.inspect(at: "/store", fileSystem: fs)
        #expect(inspect.keyCount == LibraryStore.keys)
        var dumped = 0
        try StoreInspector.dump(at: "/store", fileSystem: fs) { _ in
            dumped += 1
            return true
        }
        #expect(dumped == LibraryStore.keys)
        let stats = try StoreInspector.stats(at: "/store", fileSystem: fs)
        #expect(stats.keyCount == LibraryStore.keys)

        // Without a LOCK file (a copy of the store without it) they read without a lock.
        fs.isReadOnlyMount = false
        try fs.remove("/store/LOCK")
        fs.isReadOnlyMount = true
        #expect(try StoreFsck.run(at: "/store", options: fsckOptions).isClean)
        #expect(try StoreInspector.stats(at: "/store", fileSystem: fs).keyCount == LibraryStore.keys)
        let after = fs.listFiles(under: "/store").map { ($0, fs.contents(of: $0) ?? []) }
        #expect(after.map(\.0) == before.map(\.0).filter { $0 != "/store/LOCK" }, "no file created")
        #expect(after.elementsEqual(before.filter { $0.0 != "/store/LOCK" }) { $0.0 == $1.0 && $0.1 == $1.1 }, "no byte changed")
    }

    /// As root: whether `setpriv` exists and `nobody` can run the built tool (a build under a
    /// directory `nobody` cannot reach cannot); decides whether the chmod variant runs.
    static let nobodyCanRunTheTool: Bool = {
        guard FileManager.default.isExecutableFile(atPath: setpriv), let scratch = try? ToolScratch() else { return false }
        chmod(scratch.path, 0o755)
        let probe = try? scratch.run(["--help"], wrapper: [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"])
        return probe?.status == 0
    }()

    // The commands as a process, on a store whose directory is 0555 and files 0444. Root ignores
    // file modes, so as root the tool runs as `nobody` (setpriv); a root without setpriv (or whose
    // build `nobody` cannot reach) cannot run this variant, and the test above covers the engine.
    @Test(.enabled(if: getuid() != 0 || nobodyCanRunTheTool, "as root, needs setpriv and a build `nobody` can run, to run the tool as nobody (the simulated mount above runs anyway)"))
    func theReadOnlyCommandsWorkOnAStoreWhoseFilesAndDirectoryAreReadOnly() throws {
        let scratch = try ToolScratch()
        let library = try LibraryStore.build(at: scratch.path + "/store")
        var wrapper: [String] = []
        if getuid() == 0 {
            wrapper = [Self.setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
            chmod(scratch.path, 0o755)
        }
        for name in try scratch.names(in: library.path) { #expect(chmod(library.path + "/" + name, 0o444) == 0) }
        #expect(chmod(library.path, 0o555) == 0)
        defer {
            chmod(library.path, 0o755)
            for name in (try? scratch.names(in: library.path)) ?? [] { chmod(library.path + "/" + name, 0o644) }
        }
        let before = try Self.image(of: library.path)

        let fsck = try scratch.run(["fsck", library.path], wrapper: wrapper)
        #expect(fsck.status == 0 && fsck.lines.last == "clean", "\(fsck)")
        let inspect = try scratch.run(["inspect", "--json", library.path], wrapper: wrapper)
        #expect(inspect.status == 0, "\(inspect)")
        #expect(try inspect.json(InspectJSON.self).keyCount == LibraryStore.keys)
        let dump = try scratch.run(["dump", library.path], wrapper: wrapper)
        #expect(dump.status == 0 && dump.lines.count == LibraryStore.keys, "\(dump)")
        let stats = try scratch.run(["stats", "--json", library.path], wrapper: wrapper)
        #expect(stats.status == 0, "\(stats)")
        #expect(try stats.json(StatsJSON.self).keyCount == LibraryStore.keys)
        // A command that writes is refused, before writing anything.
        let compact = try scratch.run(["compact", library.path], wrapper: wrapper)
        #expect(compact.status == 2 && compact.stderr.contains("permission denied"), "\(compact)")
        #expect(try Self.image(of: library.path) == before, "no file created, changed or removed")
    }
}

import Glibc
import Testing

@testable import StrataEngine

/// The ``StoreError`` `body` throws, or nil when it succeeds. (Closures here throw untyped:
/// Swift 6 does not infer a closure's typed throws from its context.)
/// Creates `path` holding `bytes`, syncing the file if `sync`; returns nothing open.
private func makeFile(
    _ fs: FaultInjectingFileSystem, _ path: String, _ bytes: [UInt8], sync: Bool
) throws(StoreError) {
    let handle = try fs.open(path, mode: .createNew)
    defer { handle.close() }
    try handle.write(bytes, at: 0)
    if sync { try handle.sync() }
}

@Suite struct FaultInjectingFileSystemTests {
    typealias Operation = FaultInjectingFileSystem.Operation

    // MARK: Durability

    @Test func syncedDataInASyncedDirectorySurvivesACrash() throws {
        let fs = FaultInjectingFileSystem()
        try makeFile(fs, "/data", [1, 2, 3], sync: true)
        try fs.syncDirectory("/")
        fs.crash()
        #expect(fs.contents(of: "/data") == [1, 2, 3])
    }

    @Test func unsyncedDataVanishesOnCrash() throws {
        let fs = FaultInjectingFileSystem()
        try makeFile(fs, "/data", [1, 2, 3], sync: true)
        try fs.syncDirectory("/")
        let handle = try fs.open("/data", mode: .readWrite)
        try handle.write([9, 9], at: 3)
        #expect(fs.contents(of: "/data") == [1, 2, 3, 9, 9])
        #expect(fs.durableContents(of: "/data") == [1, 2, 3])
        fs.crash()
        #expect(fs.contents(of: "/data") == [1, 2, 3])
    }

    @Test func syncedFileWhoseEntryWasNeverSyncedIsGoneAfterCrash() throws {
        let fs = FaultInjectingFileSystem()
        try makeFile(fs, "/data", [1, 2, 3], sync: true)
        #expect(fs.durableContents(of: "/data") == nil)
        fs.crash()
        #expect(fs.contents(of: "/data") == nil)
        #expect(try fs.kind(of: "/data") == nil)
    }

    @Test func syncedEntryOfAnUnsyncedFileSurvivesEmpty() throws {
        let fs = FaultInjectingFileSystem()
        try makeFile(fs, "/data", [1, 2, 3], sync: false)
        try fs.syncDirectory("/")
        fs.crash()
        #expect(fs.contents(of: "/data") == [])
    }

    @Test func unsyncedRemovalIsUndoneByCrashAndSyncedRemovalIsNot() throws {
        let fs = FaultInjectingFileSystem()
        try makeFile(fs, "/a", [1], sync: true)
        try makeFile(fs, "/b", [2], sync: true)
        try fs.syncDirectory("/")
        try fs.remove("/a")
        fs.crash()
        #expect(fs.contents(of: "/a") == [1])
        try fs.remove("/a")
        try fs.syncDirectory("/")
        fs.crash()
        #expect(fs.contents(of: "/a") == nil)
        #expect(fs.listFiles(under: "/") == ["/b"])
    }

    @Test func fileInAnUnsyncedNewDirectoryIsGoneAfterCrash() throws {
        let fs = FaultInjectingFileSystem()
        try fs.createDirectory("/dir")
        try makeFile(fs, "/dir/data", [1], sync: true)
        try fs.syncDirectory("/dir")
        fs.crash()  // "/" was never synced, so "/dir" is gone and its file with it.
        #expect(try fs.kind(of: "/dir") == nil)

        try fs.createDirectory("/dir")
        try fs.syncDirectory("/")
        try makeFile(fs, "/dir/data", [1], sync: true)
        fs.crash()  // "/dir" is durable but its entry "data" is not.
        #expect(try fs.kind(of: "/dir") == .directory)
        #expect(try fs.contentsOfDirectory("/dir") == [])
    }

    @Test func renameIsDurableOnlyAfterTheDirectorySync() throws {
        let fs = FaultInjectingFileSystem()
        try makeFile(fs, "/tmp", [7], sync: true)
        try makeFile(fs, "/current", [1], sync: true)
        try fs.syncDirectory("/")
        try fs.rename("/tmp", to: "/current")
        #expect(fs.contents(of: "/current") == [7])
        #expect(fs.durableContents(of: "/current") == [1])
        fs.crash()
        #expect(fs.contents(of: "/current") == [1])
        #expect(fs.contents(of: "/tmp") == [7])

        try fs.rename("/tmp", to: "/current")
        try fs.syncDirectory("/")
        fs.crash()
        #expect(fs.contents(of: "/current") == [7])
        #expect(fs.contents(of: "/tmp") == nil)
    }

    @Test func unlinkedFileStaysUsableThroughAnOpenHandle() throws {
        let fs = FaultInjectingFileSystem()
        try makeFile(fs, "/data", [1, 2], sync: false)
        let handle = try fs.open("/data", mode: .readWrite)
        try fs.remove("/data")
        try handle.write([3], at: 2)
        #expect(try handle.read(upTo: 8, at: 0) == [1, 2, 3])
        #expect(fs.contents(of: "/data") == nil)
    }

    @Test func readsPastEndAreShortAndWritesPastEndZeroFill() throws {
        let fs = FaultInjectingFileSystem()
        let handle = try fs.open("/data", mode: .createNew)
        try handle.write([1, 2], at: 0)
        try handle.write([5], at: 4)
        #expect(try handle.size() == 5)
        #expect(try handle.read(upTo: 10, at: 3) == [0, 5])
        #expect(try handle.read(upTo: 10, at: 50) == [])
        try handle.truncate(to: 1)
        #expect(fs.contents(of: "/data") == [1])
    }

    @Test func creatingRequiresAnExistingParent() throws {
        let fs = FaultInjectingFileSystem()
        #expect(caught { try fs.open("/no/data", mode: .createNew) }?.errno == ENOENT)
        #expect(caught { try fs.createDirectory("/no/sub") }?.errno == ENOENT)
        #expect(caught { try fs.open("/missing", mode: .readOnly) }?.errno == ENOENT)
        #expect(try fs.kind(of: "/") == .directory)
    }

    @Test func createNewFailsOnAnExistingFile() throws {
        let fs = FaultInjectingFileSystem()
        try makeFile(fs, "/data", [], sync: false)
        let error = caught { try fs.open("/data", mode: .createNew) }
        #expect(error?.errno == EEXIST)
        #expect(error?.path == "/data")
    }

    // MARK: Sync points

    @Test func crashBeforeSyncPointSkipsThatSyncAndHalts() throws {
        let fs = FaultInjectingFileSystem()
        let handle = try fs.open("/data", mode: .createNew)
        try handle.write([1], at: 0)
        fs.crash(atSyncPoint: 2, timing: .beforeSync)
        try fs.syncDirectory("/")  // Sync point 1.
        try handle.write([2], at: 1)
        let error = caught { try handle.sync() }  // Sync point 2: not performed.
        #expect(error?.errno == EIO)
        #expect(error?.message.hasPrefix("simulated crash") == true)
        #expect(fs.isHalted)
        #expect(fs.syncPointCount == 2)
        fs.crash()
        #expect(!fs.isHalted)
        #expect(fs.contents(of: "/data") == [])
    }

    @Test func crashAfterSyncPointPerformsThatSyncThenHalts() throws {
        let fs = FaultInjectingFileSystem()
        try fs.syncDirectory("/")
        fs.crash(atSyncPoint: 2, timing: .afterSync)  // Counted from now.
        let handle = try fs.open("/data", mode: .createNew)
        try handle.write([1, 2], at: 0)
        try fs.syncDirectory("/")
        #expect(caught { try handle.sync() }?.message.hasPrefix("simulated crash") == true)
        #expect(fs.isHalted)
        #expect(fs.syncPointCount == 3)
        fs.crash()
        #expect(fs.contents(of: "/data") == [1, 2])
    }

    // MARK: Injected failures

    static let operations: [Operation] = [
        .open, .read, .write, .sync, .syncDirectory, .rename, .remove, .createDirectory, .truncate, .lock,
    ]

    @Test(arguments: operations)
    func failNextFailsOneCallWithoutEffect(op: Operation) throws {
        let fs = FaultInjectingFileSystem()
        try fs.createDirectory("/d")
        fs.setContents([1, 2, 3], of: "/d/f")
        let handle = try fs.open("/d/f", mode: .readWrite)
        try handle.write([4], at: 3)
        try makeFile(fs, "/d/new", [], sync: false)
        let action: () throws -> Void
        switch op {
        case .open: action = { _ = try fs.open("/d/f", mode: .readOnly) }
        case .read: action = { _ = try handle.read(upTo: 8, at: 0) }
        case .write: action = { try handle.write([9], at: 0) }
        case .sync: action = { try handle.sync() }
        case .syncDirectory: action = { try fs.syncDirectory("/d") }
        case .rename: action = { try fs.rename("/d/f", to: "/d/g") }
        case .remove: action = { try fs.remove("/d/f") }
        case .createDirectory: action = { try fs.createDirectory("/d/sub") }
        case .truncate: action = { try handle.truncate(to: 1) }
        case .lock: action = { try fs.lock("/d/f").unlock() }
        }

        fs.failNext(op, errno: EACCES)
        let error = caught(action)
        #expect(error?.code == .io)
        #expect(error?.errno == EACCES)
        #expect(fs.contents(of: "/d/f") == [1, 2, 3, 4])
        #expect(fs.durableContents(of: "/d/f") == [1, 2, 3])
        #expect(fs.durableContents(of: "/d/new") == nil)
        #expect(try fs.kind(of: "/d/g") == nil)
        #expect(try fs.kind(of: "/d/sub") == nil)
        #expect(!fs.isHalted)
        #expect(caught(action) == nil)  // Only the one call failed.
    }

    @Test func failNextHonoursMatchingSkippingAndTimes() throws {
        let fs = FaultInjectingFileSystem()
        let wal = try fs.open("/wal.log", mode: .createNew)
        let table = try fs.open("/table.sst", mode: .createNew)
        fs.failNext(.write, matching: "wal", skipping: 1, errno: EIO, times: 2)
        #expect(caught { try table.write([1], at: 0) } == nil)
        #expect(caught { try wal.write([1], at: 0) } == nil)  // Skipped.
        #expect(caught { try wal.write([2], at: 1) }?.errno == EIO)
        #expect(caught { try wal.write([3], at: 1) }?.errno == EIO)
        #expect(caught { try wal.write([4], at: 1) } == nil)
        #expect(fs.contents(of: "/wal.log") == [1, 4])
        #expect(fs.operationCounts.writes == 5)
    }

    @Test func clearFaultsDropsPendingFaults() throws {
        let fs = FaultInjectingFileSystem()
        fs.failNext(.createDirectory)
        fs.tearNextWrite(keeping: 0)
        fs.crash(atSyncPoint: 1, timing: .beforeSync)
        fs.clearFaults()
        try fs.createDirectory("/d")
        try makeFile(fs, "/d/f", [1], sync: true)
        #expect(!fs.isHalted)
    }

    @Test func tornWriteKeepsExactlyThePrefixAndHalts() throws {
        let fs = FaultInjectingFileSystem()
        let other = try fs.open("/other", mode: .createNew)
        let handle = try fs.open("/wal.log", mode: .createNew)
        try handle.write([1, 2], at: 0)
        fs.tearNextWrite(matching: "wal", keeping: 3)
        try other.write([7, 7, 7, 7, 7], at: 0)  // Does not match.
        let error = caught { try handle.write([10, 11, 12, 13, 14], at: 2) }
        #expect(error?.message.hasPrefix("simulated crash") == true)
        #expect(fs.isHalted)
        #expect(fs.contents(of: "/wal.log") == [1, 2, 10, 11, 12])
        #expect(fs.contents(of: "/other") == [7, 7, 7, 7, 7])
    }

    @Test func spaceLimitFailsWithENOSPCAndWritesNothing() throws {
        let fs = FaultInjectingFileSystem(spaceLimit: 10)
        let a = try fs.open("/a", mode: .createNew)
        try a.write(Array(repeating: 1, count: 6), at: 0)
        let b = try fs.open("/b", mode: .createNew)
        let error = caught { try b.write(Array(repeating: 2, count: 5), at: 0) }
        #expect(error?.code == .io)
        #expect(error?.errno == ENOSPC)
        #expect(fs.contents(of: "/b") == [])
        #expect(caught { try b.truncate(to: 5) }?.errno == ENOSPC)
        #expect(try b.size() == 0)
        try a.write([3, 3], at: 0)  // Overwrites need no space.
        try b.write(Array(repeating: 2, count: 4), at: 0)

        a.close()
        try fs.remove("/a")  // Frees its space.
        try b.write(Array(repeating: 2, count: 6), at: 4)
        fs.spaceLimit = nil
        try b.write(Array(repeating: 2, count: 100), at: 0)
    }

    // MARK: Halting, crashes, handles and locks

    @Test func haltedFileSystemThrowsEverywhere() throws {
        let fs = FaultInjectingFileSystem()
        try makeFile(fs, "/data", [1], sync: false)
        let handle = try fs.open("/data", mode: .readWrite)
        fs.halt()
        #expect(fs.isHalted)
        let errors = [
            caught { try fs.open("/data", mode: .readOnly) },
            caught { try fs.kind(of: "/data") },
            caught { try fs.contentsOfDirectory("/") },
            caught { try fs.createDirectory("/d") },
            caught { try fs.remove("/data") },
            caught { try fs.rename("/data", to: "/x") },
            caught { try fs.syncDirectory("/") },
            caught { try fs.lock("/LOCK") },
            caught { try handle.read(upTo: 1, at: 0) },
            caught { try handle.write([2], at: 0) },
            caught { try handle.size() },
            caught { try handle.truncate(to: 0) },
            caught { try handle.sync() },
        ]
        for error in errors {
            #expect(error?.code == .io)
            #expect(error?.errno == EIO)
            #expect(error?.message.hasPrefix("simulated crash") == true)
        }
        #expect(fs.contents(of: "/data") == [1])  // Helpers bypass halting.
        #expect(fs.syncPointCount == 0)
    }

    @Test func handlesFromBeforeACrashAreInvalid() throws {
        let fs = FaultInjectingFileSystem()
        fs.setContents([1], of: "/data")
        let handle = try fs.open("/data", mode: .readWrite)
        fs.crash()
        let error = caught { try handle.read(upTo: 1, at: 0) }
        #expect(error?.code == .io)
        #expect(error?.message.contains("handle from before the simulated crash") == true)
        #expect(caught { try handle.write([1], at: 0) }?.code == .io)
        let fresh = try fs.open("/data", mode: .readOnly)
        #expect(try fresh.read(upTo: 4, at: 0) == [1])
    }

    @Test func closedHandleThrowsClosed() throws {
        let fs = FaultInjectingFileSystem()
        let handle = try fs.open("/data", mode: .createNew)
        handle.close()
        handle.close()
        #expect(caught { try handle.read(upTo: 1, at: 0) }?.code == .closed)
        #expect(caught { try handle.write([1], at: 0) }?.code == .closed)
        #expect(caught { try handle.sync() }?.code == .closed)
        #expect(caught { try handle.size() }?.code == .closed)
    }

    @Test func readOnlyHandleCannotWrite() throws {
        let fs = FaultInjectingFileSystem()
        fs.setContents([1], of: "/data")
        let handle = try fs.open("/data", mode: .readOnly)
        #expect(caught { try handle.write([2], at: 0) }?.errno == EBADF)
        #expect(fs.contents(of: "/data") == [1])
    }

    @Test func secondLockThrowsLockedUntilUnlockOrCrash() throws {
        let fs = FaultInjectingFileSystem()
        let first = try fs.lock("/LOCK")
        #expect(try fs.kind(of: "/LOCK") == .file(size: 0))
        #expect(caught { try fs.lock("/LOCK") }?.code == .locked)
        #expect(caught { try fs.lock("//LOCK") }?.code == .locked)  // Same file, other spelling.
        first.unlock()
        let second = try fs.lock("/LOCK")
        try fs.syncDirectory("/")
        fs.crash()
        let third = try fs.lock("/LOCK")
        second.unlock()  // Stale: must not release the new holder.
        #expect(caught { try fs.lock("/LOCK") }?.code == .locked)
        third.unlock()
    }

    // [DIR-5] Readers' locks: shared among themselves, exclusive against a writer's lock; they
    // create nothing.
    @Test func sharedLocksCoexistAndExcludeTheExclusiveLockBothWays() throws {
        let fs = FaultInjectingFileSystem()
        #expect(try fs.sharedLock("/LOCK") == nil, "no lock file: no lock")
        #expect(try fs.kind(of: "/LOCK") == nil, "and no file created")
        let writer = try fs.lock("/LOCK")
        #expect(caught { try fs.sharedLock("/LOCK") }?.code == .locked)
        writer.unlock()
        let reader1 = try #require(try fs.sharedLock("/LOCK"))
        let reader2 = try #require(try fs.sharedLock("//LOCK"))
        #expect(caught { try fs.lock("/LOCK") }?.code == .locked)
        reader1.unlock()
        reader1.unlock()  // Harmless, and does not release the other reader.
        #expect(caught { try fs.lock("/LOCK") }?.code == .locked)
        reader2.unlock()
        try fs.lock("/LOCK").unlock()
        fs.failNext(.lock)
        #expect(caught { try fs.sharedLock("/LOCK") }?.errno == EIO)
    }

    // A read-only mount refuses every change with EROFS and changes nothing; reads, listings,
    // shared locks and syncs work, and remounting read-write restores writes.
    @Test func aReadOnlyMountRefusesEveryChangeWithEROFS() throws {
        let fs = FaultInjectingFileSystem()
        fs.setContents([1, 2, 3], of: "/d/f")
        fs.setContents([], of: "/d/LOCK")
        let writable = try fs.open("/d/f", mode: .readWrite)
        fs.isReadOnlyMount = true
        #expect(fs.isReadOnlyMount)
        let refused: [(String, StoreError?)] = [
            ("open readWrite", caught { try fs.open("/d/f", mode: .readWrite) }),
            ("open createNew", caught { try fs.open("/d/g", mode: .createNew) }),
            ("mkdir", caught { try fs.createDirectory("/d/sub") }),
            ("unlink", caught { try fs.remove("/d/f") }),
            ("rename", caught { try fs.rename("/d/f", to: "/d/g") }),
            ("lock", caught { try fs.lock("/d/LOCK") }),
            ("lock of a missing file", caught { try fs.lock("/d/LOCK2") }),
            ("pwrite", caught { try writable.write([9], at: 0) }),
            ("ftruncate", caught { try writable.truncate(to: 0) }),
        ]
        for (what, error) in refused {
            #expect(error?.code == .io && error?.errno == EROFS, "\(what): \(String(describing: error))")
            #expect(error?.message.contains("read-only") == true, "\(what): \(String(describing: error))")
        }
        #expect(fs.listFiles(under: "/") == ["/d/LOCK", "/d/f"])
        #expect(fs.contents(of: "/d/f") == [1, 2, 3])
        let reader = try fs.open("/d/f", mode: .readOnly)
        #expect(try reader.read(exactly: 3, at: 0) == [1, 2, 3])
        try reader.sync()
        try fs.syncDirectory("/d")
        #expect(try fs.contentsOfDirectory("/d").sorted() == ["LOCK", "f"])
        let shared = try #require(try fs.sharedLock("/d/LOCK"))
        shared.unlock()
        fs.crash()
        #expect(fs.isReadOnlyMount, "a crash keeps the mount read-only")
        fs.isReadOnlyMount = false
        let handle = try fs.open("/d/f", mode: .readWrite)
        try handle.write([9], at: 0)
        #expect(fs.contents(of: "/d/f") == [9, 2, 3])
    }

    // MARK: Inspection helpers

    @Test func setContentsIsDurableAndCreatesParents() {
        let fs = FaultInjectingFileSystem()
        fs.setContents([1, 2], of: "/a/b/data")
        fs.crash()
        #expect(fs.contents(of: "/a/b/data") == [1, 2])
        fs.setContents([3], of: "/a/b/data")
        #expect(fs.durableContents(of: "/a/b/data") == [3])
    }

    @Test func flipBitsChangesCurrentAndDurableBytes() {
        let fs = FaultInjectingFileSystem()
        fs.setContents([0x0F, 0x00], of: "/data")
        fs.flipBits(in: "/data", at: 0)
        fs.flipBits(in: "/data", at: 1, mask: 0x01)
        fs.flipBits(in: "/data", at: 9)  // Past the end: ignored.
        #expect(fs.contents(of: "/data") == [0xF0, 0x01])
        fs.crash()
        #expect(fs.contents(of: "/data") == [0xF0, 0x01])
    }

    @Test func truncateFileCutsAndExtendsBothVersions() {
        let fs = FaultInjectingFileSystem()
        fs.setContents([1, 2, 3, 4], of: "/data")
        fs.truncateFile("/data", to: 2)
        #expect(fs.contents(of: "/data") == [1, 2])
        #expect(fs.durableContents(of: "/data") == [1, 2])
        fs.truncateFile("/data", to: 3)
        #expect(fs.durableContents(of: "/data") == [1, 2, 0])
    }

    @Test func listFilesReturnsSortedRegularFilesOfTheCurrentView() throws {
        let fs = FaultInjectingFileSystem()
        fs.setContents([], of: "/store/b")
        fs.setContents([], of: "/store/sub/a")
        try makeFile(fs, "/store/a", [], sync: false)
        fs.setContents([], of: "/elsewhere")
        #expect(fs.listFiles(under: "/store") == ["/store/a", "/store/b", "/store/sub/a"])
        #expect(fs.listFiles(under: "/missing") == [])
    }

    @Test func operationCountsCountReadsWritesAndSyncs() throws {
        let fs = FaultInjectingFileSystem()
        let handle = try fs.open("/data", mode: .createNew)
        try handle.write([1], at: 0)
        _ = try handle.read(upTo: 1, at: 0)
        _ = try handle.read(upTo: 1, at: 0)
        try handle.sync()
        try fs.syncDirectory("/")
        #expect(fs.operationCounts == .init(reads: 2, writes: 1, syncs: 1, directorySyncs: 1))
        #expect(fs.syncPointCount == 2)
    }

    @Test func syncCountCountsSyncsByPathFailedOnesIncluded() throws {
        let fs = FaultInjectingFileSystem()
        try fs.createDirectory("/d")
        let a = try fs.open("/d/a.wal", mode: .createNew)
        let b = try fs.open("/d/b.seg", mode: .createNew)
        try a.sync()
        fs.failNext(.sync, matching: ".wal")
        #expect(caught { try a.sync() }?.errno == EIO)
        try b.sync()
        try fs.syncDirectory("/d")
        #expect(fs.syncCount(matching: ".wal") == 2)
        #expect(fs.syncCount(matching: "b.seg") == 1)
        #expect(fs.syncCount(matching: "/d") == 4)
        #expect(fs.syncCount() == 4)
        #expect(fs.syncCount(matching: "missing") == 0)
    }
}

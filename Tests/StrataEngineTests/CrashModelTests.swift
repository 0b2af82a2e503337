import Glibc
import Testing

@testable import StrataEngine

/// The richer crash model of ``FaultInjectingFileSystem``: what `crash(keeping:)` keeps of
/// unsynced writes and directory changes, crashes armed at any operation, copies, and the
/// faults that fail part-way.
@Suite struct CrashModelTests {
    typealias Policy = FaultInjectingFileSystem.CrashPolicy

    /// A durable empty file `/d/f` in a durable directory `/d`, open for writing.
    static func durableFile() throws -> (FaultInjectingFileSystem, any FileHandle) {
        let fs = FaultInjectingFileSystem()
        try fs.createDirectory("/d")
        try fs.syncDirectory("/")
        let handle = try fs.open("/d/f", mode: .createNew)
        try handle.sync()
        try fs.syncDirectory("/d")
        return (fs, handle)
    }

    /// `/d/f` after three unsynced writes (A at 0, B at 3, C at 6) on synced bytes `[9]`.
    static func threeUnsyncedWrites() throws -> FaultInjectingFileSystem {
        let (fs, handle) = try durableFile()
        try handle.write([9], at: 0)
        try handle.sync()
        try handle.write([1, 1, 1], at: 0)
        try handle.write([2, 2, 2], at: 3)
        try handle.write([3, 3, 3], at: 6)
        return fs
    }

    @Test func crashKeepingNoneIsTodaysCrash() throws {
        let fs = try Self.threeUnsyncedWrites()
        #expect(fs.unsyncedWriteCount(of: "/d/f") == 3)
        fs.crash(keeping: .none)
        #expect(fs.contents(of: "/d/f") == [9])
        #expect(fs.unsyncedWriteCount(of: "/d/f") == 0)
        let plain = try Self.threeUnsyncedWrites()
        plain.crash()
        #expect(plain.contents(of: "/d/f") == [9])
    }

    @Test func crashKeepingAllKeepsEveryWriteAndEveryEntry() throws {
        let fs = try Self.threeUnsyncedWrites()
        let handle = try fs.open("/d/g", mode: .createNew)
        try handle.write([7], at: 0)
        fs.crash(keeping: .all)
        #expect(fs.contents(of: "/d/f") == [1, 1, 1, 2, 2, 2, 3, 3, 3])
        #expect(fs.contents(of: "/d/g") == [7])
    }

    @Test func aPrefixKeepsTheFirstWritesInOrder() throws {
        for (n, expected) in [(0, [9]), (1, [1, 1, 1]), (2, [1, 1, 1, 2, 2, 2]), (5, [1, 1, 1, 2, 2, 2, 3, 3, 3])] as [(Int, [UInt8])] {
            let fs = try Self.threeUnsyncedWrites()
            fs.crash(keeping: .prefix(n))
            #expect(fs.contents(of: "/d/f") == expected, "prefix(\(n))")
        }
    }

    @Test func aTornPrefixKeepsHalfOfTheNextWriteAtTheGranularity() throws {
        let (fs, handle) = try Self.durableFile()
        try handle.write([UInt8](repeating: 1, count: 100), at: 0)
        try handle.write([UInt8](repeating: 2, count: 1000), at: 100)
        let copy = fs.copy()
        // Half of the second write is 500 bytes, up to offset 600; the sector boundary before is 512.
        fs.crash(keeping: .tornPrefix(1, .sector(512)))
        #expect(fs.contents(of: "/d/f") == [UInt8](repeating: 1, count: 100) + [UInt8](repeating: 2, count: 412))
        copy.crash(keeping: .tornPrefix(1, .byte))
        #expect(copy.contents(of: "/d/f") == [UInt8](repeating: 1, count: 100) + [UInt8](repeating: 2, count: 500))
    }

    // A random policy keeps any subset, in any order, the last write possibly torn; the gaps
    // read as zeros; the same seed makes the same choice.
    @Test func randomPoliciesKeepSubsetsReorderedAndTornAndRepeat() throws {
        var outcomes: Set<[UInt8]> = []
        for seed in 0..<200 as Range<UInt64> {
            for tearing in [FaultInjectingFileSystem.TearGranularity.byte, .sector(2)] {
                let fs = try Self.threeUnsyncedWrites()
                let again = fs.copy()
                fs.crash(keeping: .random(seed: seed, tearing: tearing))
                again.crash(keeping: .random(seed: seed, tearing: tearing))
                let bytes = try #require(fs.contents(of: "/d/f"))
                #expect(again.contents(of: "/d/f") == bytes, "seed \(seed) repeats")
                // Every byte is the durable one, a written one, or the zero of a gap.
                let allowed: [Set<UInt8>] = [[9, 1], [0, 1], [0, 1], [0, 2], [0, 2], [0, 2], [0, 3], [0, 3], [0, 3]]
                #expect(bytes.count >= 1 && bytes.count <= 9)
                for (offset, byte) in bytes.enumerated() { #expect(allowed[offset].contains(byte), "seed \(seed): \(bytes)") }
                outcomes.insert(bytes)
            }
        }
        #expect(outcomes.contains([9, 0, 0, 0, 0, 0, 3, 3, 3]), "a later write kept without the earlier ones")
        #expect(outcomes.contains([1, 1, 1, 0, 0, 0, 3, 3, 3]), "a gap in the middle")
        #expect(outcomes.contains { $0.count % 3 != 0 }, "a write torn at a byte")
        #expect(outcomes.count > 10)
    }

    // Truncations are unsynced changes too, and the order decides what they cut.
    @Test func truncationsAreKeptOrDroppedLikeWrites() throws {
        let (fs, handle) = try Self.durableFile()
        try handle.write([1, 2, 3, 4], at: 0)
        try handle.sync()
        try handle.truncate(to: 2)
        try handle.write([5], at: 2)
        #expect(fs.contents(of: "/d/f") == [1, 2, 5])
        let copies = (0..<3).map { _ in fs.copy() }
        fs.crash(keeping: .prefix(1))
        #expect(fs.contents(of: "/d/f") == [1, 2])
        copies[0].crash(keeping: .all)
        #expect(copies[0].contents(of: "/d/f") == [1, 2, 5])
        copies[1].crash(keeping: .none)
        #expect(copies[1].contents(of: "/d/f") == [1, 2, 3, 4])
        var seen: Set<[UInt8]> = []
        for seed in 0..<100 as Range<UInt64> {
            let copy = copies[2].copy()
            copy.crash(keeping: .random(seed: seed, tearing: .sector(512)))
            seen.insert(copy.contents(of: "/d/f") ?? [])
        }
        // Both orders of the two changes, and each alone.
        #expect(seen == [[1, 2, 3, 4], [1, 2], [1, 2, 5, 4], [1, 2, 5]])
    }

    // Directory changes survive as a prefix per directory; a rename is one change.
    @Test func directoryChangesSurviveAsAPrefixPerDirectory() throws {
        let fs = FaultInjectingFileSystem()
        try fs.createDirectory("/d")
        try fs.createDirectory("/e")
        try fs.syncDirectory("/")
        for name in ["a", "b", "c"] {
            let handle = try fs.open("/d/" + name, mode: .createNew)
            try handle.write(Array(name.utf8), at: 0)
            try handle.sync()
        }
        try fs.rename("/d/a", to: "/d/z")
        _ = try fs.open("/e/x", mode: .createNew)
        #expect(fs.unsyncedChangeCount(ofDirectory: "/d") == 4)
        #expect(fs.unsyncedChangeCount(ofDirectory: "/e") == 1)
        let copies = (0..<4).map { _ in fs.copy() }
        fs.crash(keeping: .prefix(2))
        #expect(fs.listFiles(under: "/") == ["/d/a", "/d/b", "/e/x"])
        #expect(fs.contents(of: "/d/b") == Array("b".utf8), "synced data of a kept entry")
        copies[0].crash(keeping: .all)
        #expect(copies[0].listFiles(under: "/") == ["/d/b", "/d/c", "/d/z", "/e/x"])
        #expect(copies[0].contents(of: "/d/z") == Array("a".utf8))
        copies[1].crash(keeping: .none)
        #expect(copies[1].listFiles(under: "/") == [])
        // Never "a" and "z" both, never "z" without "b" and "c".
        var seen: Set<[String]> = []
        for seed in 0..<100 as Range<UInt64> {
            let copy = copies[2].copy()
            copy.crash(keeping: .random(seed: seed))
            seen.insert(copy.listFiles(under: "/d"))
        }
        #expect(seen == [[], ["/d/a"], ["/d/a", "/d/b"], ["/d/a", "/d/b", "/d/c"], ["/d/b", "/d/c", "/d/z"]])
    }

    // A file created and removed before the crash comes back with its creation alone, with the
    // unsynced writes the policy keeps; a kept removal stays removed.
    @Test func aRemovedFileComesBackWhenOnlyItsCreationIsKept() throws {
        let fs = FaultInjectingFileSystem()
        let handle = try fs.open("/tmp", mode: .createNew)
        try handle.write([4, 2], at: 0)
        handle.close()
        try fs.remove("/tmp")
        let copy = fs.copy()
        fs.crash(keeping: .prefix(1))
        #expect(fs.contents(of: "/tmp") == [4, 2])
        copy.crash(keeping: .all)
        #expect(copy.contents(of: "/tmp") == nil)
    }

    @Test func syncsEmptyTheJournal() throws {
        let (fs, handle) = try Self.durableFile()
        try handle.write([1], at: 0)
        _ = try fs.open("/d/g", mode: .createNew)
        try handle.sync()
        try fs.syncDirectory("/d")
        #expect(fs.unsyncedWriteCount(of: "/d/f") == 0)
        #expect(fs.unsyncedChangeCount(ofDirectory: "/d") == 0)
        fs.crash(keeping: .none)
        #expect(fs.listFiles(under: "/") == ["/d/f", "/d/g"])
        #expect(fs.contents(of: "/d/f") == [1])
    }

    // MARK: Operation-level crash points

    @Test func operationsAreCountedAndLoggedButNotReadsOrLookups() throws {
        let fs = FaultInjectingFileSystem()
        let handle = try fs.open("/f", mode: .createNew)
        try handle.write([1], at: 0)
        _ = try handle.read(upTo: 1, at: 0)
        _ = try fs.kind(of: "/f")
        _ = try fs.open("/f", mode: .readWrite)
        try handle.truncate(to: 0)
        try handle.sync()
        try fs.syncDirectory("/")
        try fs.createDirectory("/d")
        try fs.rename("/f", to: "/d/f")
        try fs.remove("/d/f")
        _ = try fs.lock("/LOCK")
        let log = fs.operationLog.map(\.description)
        #expect(log == [
            "open /f", "write /f", "truncate /f", "sync /f", "syncDirectory /", "createDirectory /d", "rename /f",
            "remove /d/f", "lock /LOCK",
        ])
        #expect(fs.operationCount == 9)
    }

    @Test func aCrashBeforeAnOperationSkipsItAndAfterPerformsIt() throws {
        for timing in [FaultInjectingFileSystem.OperationTiming.before, .after] {
            let fs = FaultInjectingFileSystem()
            let handle = try fs.open("/f", mode: .createNew)
            fs.crash(atOperation: 2, timing: timing)  // counted from now: the second write
            try handle.write([1], at: 0)
            let error = caught { try handle.write([2], at: 1) }
            #expect(error?.message.hasPrefix("simulated crash") == true)
            #expect(fs.isHalted)
            #expect(fs.contents(of: "/f") == (timing == .before ? [1] : [1, 2]))
            #expect(caught { try handle.write([3], at: 2) }?.errno == EIO, "halted")
            let none = fs.copy()
            fs.crash(keeping: .all)
            #expect(fs.contents(of: "/f") == (timing == .before ? [1] : [1, 2]), "the unsynced creation kept")
            none.crash(keeping: .none)
            #expect(none.contents(of: "/f") == nil, "the directory was never synced")
        }
    }

    @Test func everyKindOfOperationCanBeACrashPoint() throws {
        // Each step makes exactly one counted operation.
        let steps: [(String, (FaultInjectingFileSystem) throws -> Void)] = [
            ("create", { _ = try $0.open("/f", mode: .createNew) }),
            ("mkdir", { try $0.createDirectory("/d") }),
            ("write", { try $0.open("/f", mode: .readWrite).write([1], at: 0) }),
            ("truncate", { try $0.open("/f", mode: .readWrite).truncate(to: 0) }),
            ("sync", { try $0.open("/f", mode: .readWrite).sync() }),
            ("syncDirectory", { try $0.syncDirectory("/") }),
            ("rename", { try $0.rename("/f", to: "/g") }),
            ("remove", { try $0.remove("/g") }),
        ]
        for (index, (name, _)) in steps.enumerated() {
            for timing in [FaultInjectingFileSystem.OperationTiming.before, .after] {
                let fs = FaultInjectingFileSystem()
                fs.crash(atOperation: index + 1, timing: timing)
                var failedAt: Int?
                for (position, step) in steps.enumerated() {
                    do { try step.1(fs) } catch {
                        failedAt = position
                        break
                    }
                }
                #expect(failedAt == index, "\(name) \(timing)")
                #expect(fs.operationCount == index + 1, "\(name) \(timing)")
            }
        }
    }

    @Test func aCopyIsIndependentAndCanBeCrashedWithEachPolicy() throws {
        let fs = try Self.threeUnsyncedWrites()
        fs.halt()
        let none = fs.copy()
        let all = fs.copy()
        #expect(none.isHalted)
        none.crash(keeping: .none)
        all.crash(keeping: .all)
        #expect(none.contents(of: "/d/f") == [9])
        #expect(all.contents(of: "/d/f") == [1, 1, 1, 2, 2, 2, 3, 3, 3])
        #expect(fs.isHalted, "the original is untouched")
        #expect(fs.unsyncedWriteCount(of: "/d/f") == 3)
    }

    // MARK: Faults that fail part-way

    @Test func aWriteCanFailPartWayAndKeepItsPrefix() throws {
        let fs = FaultInjectingFileSystem()
        let handle = try fs.open("/f", mode: .createNew)
        fs.failNextWrite(matching: "/f", afterWriting: 2, errno: ENOSPC)
        let error = caught { try handle.write([1, 2, 3, 4], at: 0) }
        #expect(error?.errno == ENOSPC)
        #expect(fs.contents(of: "/f") == [1, 2])
        #expect(!fs.isHalted)
        try handle.write([5], at: 2)
        #expect(fs.contents(of: "/f") == [1, 2, 5])
    }

    // Linux marks the pages of a failed fsync clean: a later sync does not write them.
    @Test func aFailedSyncCanLoseTheUnsyncedWritesForGood() throws {
        for loses in [false, true] {
            let (fs, handle) = try Self.durableFile()
            fs.failedSyncLosesWrites = loses
            try handle.write([1, 1], at: 0)
            fs.failNext(.sync)
            #expect(caught { try handle.sync() }?.errno == EIO)
            #expect(fs.contents(of: "/d/f") == [1, 1], "reads still see the writes")
            try handle.write([2], at: 2)
            try handle.sync()
            fs.crash()
            #expect(fs.contents(of: "/d/f") == (loses ? [0, 0, 2] : [1, 1, 2]), "loses: \(loses)")
        }
    }
}

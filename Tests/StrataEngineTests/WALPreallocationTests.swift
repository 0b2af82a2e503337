import Testing
@testable import StrataEngine

/// [WAL-6] Under full durability the active WAL is written with zeros ahead of its records, so
/// that a commit's sync covers blocks the file already holds. The zeros are never data: a clean
/// close and a rollover cut them, an open after a crash cuts them without keeping them, and
/// `fsck` does not report them. (Running out of space for them:
/// EngineCrashTests.runningOutOfSpaceFailsTheCommitWithoutDamage.)
@Suite struct WALPreallocationTests {
    static let walPath = "/store/00000001.wal"

    /// The engine options of these tests: the files as written, zeros `ahead` of the records.
    static func options(_ fs: FaultInjectingFileSystem, ahead: UInt64 = 4096, rollover: UInt64 = 1 << 20) -> EngineOptions {
        var options = testOptions(fs, rollover: rollover)
        options.walPreallocationBytes = ahead
        return options
    }

    /// Where the WAL's last whole record ends.
    static func recordsEnd(_ wal: [UInt8]) -> Int {
        StoreFiles.walRecords(in: wal, from: 0, limit: Int.max).last?.end ?? Format.walHeaderSize
    }

    @Test func commitsOverwriteZerosWrittenAheadOfThem() throws {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: "/store", options: Self.options(fs))
        for index in 0..<20 { try engine.put(testKey(index), Array(repeating: UInt8(index), count: 30)) }
        let wal = try #require(fs.contents(of: Self.walPath))
        let end = Self.recordsEnd(wal)
        #expect(wal.count > end, "zeros follow the records")
        #expect(wal.count - end <= 4096 + 1024)
        #expect(wal[end...].allSatisfy { $0 == 0 })
        // What was synced holds the records and the zeros: a commit's sync changed no size.
        #expect(fs.durableContents(of: Self.walPath) == wal)
        #expect(try contents(of: engine).count == 20)
        try engine.close()
    }

    @Test func aCleanCloseCutsTheZerosAndTheCheckFindsNothing() throws {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: "/store", options: Self.options(fs))
        for index in 0..<5 { try engine.put(testKey(index), [UInt8(index)]) }
        try engine.close()
        let wal = try #require(fs.contents(of: Self.walPath))
        #expect(wal.count == Self.recordsEnd(wal), "the WAL ends at its last record")
        #expect(fs.durableContents(of: Self.walPath) == wal, "and the cut is synced")
        #expect(try StoreChecker.check(at: "/store", fileSystem: fs).problems.isEmpty)
        let reopened = try Engine.open(at: "/store", options: Self.options(fs))
        #expect(try contents(of: reopened).count == 5)
        try reopened.close()
    }

    @Test func aCrashLeavesZerosThatTheCheckIgnoresAndTheNextOpenCutsWithoutKeeping() throws {
        let fs = FaultInjectingFileSystem()
        do {
            let engine = try Engine.open(at: "/store", options: Self.options(fs))
            for index in 0..<7 { try engine.put(testKey(index), Array(repeating: 3, count: 50)) }
        }
        fs.crash()
        let wal = try #require(fs.contents(of: Self.walPath))
        let end = Self.recordsEnd(wal)
        #expect(wal.count > end && wal[end...].allSatisfy { $0 == 0 }, "the zeros survived the crash")
        #expect(try StoreChecker.check(at: "/store", fileSystem: fs).problems.isEmpty, "zeros ahead of the records are no torn tail")
        let reopened = try Engine.open(at: "/store", options: Self.options(fs))
        #expect(try contents(of: reopened).count == 7, "every acknowledged commit is there")
        #expect(fs.contents(of: Self.walPath)?.count == end, "the zeros are cut")
        #expect(!fs.listFiles(under: "/store").contains { $0.contains(".torn-") }, "and not kept")
        // Appends follow the last record again, with zeros ahead of them.
        try reopened.put(testKey(99), [9])
        try reopened.close()
        let again = try Engine.open(at: "/store", options: Self.options(fs))
        #expect(try contents(of: again).count == 8)
        try again.close()
    }

    @Test func aRolledOverWALEndsAtItsLastRecord() throws {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: "/store", options: Self.options(fs, ahead: 1024, rollover: 1 << 20))
        for index in 0..<10 { try engine.put(testKey(index), Array(repeating: 1, count: 40)) }
        #expect(try #require(fs.contents(of: Self.walPath)).count > Self.recordsEnd(try #require(fs.contents(of: Self.walPath))))
        // The flush rolls the WAL over, then fails to write its segment: the WAL stays, no
        // longer the newest, and must end at its last record, durably.
        fs.failNext(.open, matching: ".seg")
        #expect(throws: StoreError.self) { try engine.flush() }
        let wal = try #require(fs.contents(of: Self.walPath))
        #expect(wal.count == Self.recordsEnd(wal), "the rolled-over WAL was cut before the next one began")
        #expect(fs.durableContents(of: Self.walPath) == wal, "and the cut is synced")
        fs.crash()
        let reopened = try Engine.open(at: "/store", options: Self.options(fs))
        #expect(try contents(of: reopened).count == 10)
        try reopened.close()
        #expect(try StoreChecker.check(at: "/store", fileSystem: fs).problems.isEmpty)
    }

    @Test func otherDurabilitiesWriteNoZeros() throws {
        for durability in [Durability.normal, .none] {
            let fs = FaultInjectingFileSystem()
            var options = Self.options(fs)
            options.durability = durability
            let engine = try Engine.open(at: "/store", options: options)
            for index in 0..<5 { try engine.put(testKey(index), [UInt8(index)]) }
            let wal = try #require(fs.contents(of: Self.walPath))
            #expect(wal.count == Self.recordsEnd(wal), "\(durability)")
            try engine.close()
        }
    }
}

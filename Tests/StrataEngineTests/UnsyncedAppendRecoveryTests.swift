import Testing
@testable import StrataEngine

/// [REC-3] Unsynced appends reach the disk in any order. Under `normal` (or `none`) durability
/// several commits are written between syncs, so a crash can keep a later record and lose or
/// tear an earlier one. Found by the crash-point enumerator (CrashEnumerationTests, workload
/// "normal durability": e.g. crash after operation 49, keeping random(seed: 99, byte)): the
/// open failed with `corruption` ("record header checksum mismatch") where the unsynced
/// window begins, although [WAL-4] promises that a crash loses at most that window, never
/// part of a commit, and never the store.
@Suite struct UnsyncedAppendRecoveryTests {
    /// A WAL holding `synced` (header and records through the last sync) followed by the
    /// unsynced records `a`, `b`, `c` as the engine wrote them, and the model states.
    struct Fixture {
        var synced: [UInt8]
        var records: [[UInt8]]
        var walPath = "/store/00000001.wal"
        var manifest: [UInt8]
        /// The content after the last sync: what a crash that keeps nothing unsynced leaves.
        var afterSync: [[UInt8]: [UInt8]]
        var options: EngineOptions

        /// A store whose WAL is `synced` + `tail` (as a crash left it).
        func fileSystem(tail: [UInt8]) -> FaultInjectingFileSystem {
            let fs = FaultInjectingFileSystem()
            fs.setContents(manifest, of: "/store/MANIFEST")
            fs.setContents(synced + tail, of: walPath)
            return fs
        }
    }

    static func fixture() throws -> Fixture {
        let fs = FaultInjectingFileSystem()
        var options = testOptions(fs, rollover: 1 << 20, durability: .normal)
        options.syncInterval = .seconds(3600)  // no background sync: the test decides
        let engine = try Engine.open(at: "/store", options: options)
        try engine.put(testKey(1), Array("one".utf8))
        try engine.put(testKey(2), Array("two".utf8))
        try engine.sync()
        let walPath = "/store/00000001.wal"
        let synced = try #require(fs.contents(of: walPath))
        var records: [[UInt8]] = []
        var end = synced.count
        for (key, value) in [(1, "uno, a longer value so the record spans more bytes"), (3, "three"), (4, "four")] {
            try engine.put(testKey(key), Array(value.utf8))
            let bytes = try #require(fs.contents(of: walPath))
            records.append(Array(bytes[end...]))
            end = bytes.count
        }
        let manifest = try #require(fs.contents(of: "/store/MANIFEST"))
        try? engine.close()
        return Fixture(
            synced: synced, records: records, manifest: manifest,
            afterSync: [testKey(1): Array("one".utf8), testKey(2): Array("two".utf8)], options: options)
    }

    /// Opens, checks the content is `expected`, commits, reopens, and checks the commit follows.
    func expectRecovers(_ fixture: Fixture, tail: [UInt8], to expected: [[UInt8]: [UInt8]], _ what: String) throws {
        let fs = fixture.fileSystem(tail: tail)
        var options = fixture.options
        options.fileSystem = fs
        let engine: Engine
        do {
            engine = try Engine.open(at: "/store", options: options)
        } catch {
            Issue.record("\(what): open failed: \(error)")
            return
        }
        #expect(try contents(of: engine) == expected, "\(what)")
        try engine.put(testKey(9), [9])
        try engine.close()
        let reopened = try Engine.open(at: "/store", options: options)
        var after = expected
        after[testKey(9)] = [9]
        #expect(try contents(of: reopened) == after, "\(what): a commit after recovery")
        try reopened.close()
    }

    @Test func aLaterRecordKeptWithoutAnEarlierOneEndsTheLogAtTheGap() throws {
        let f = try Self.fixture()
        let (a, b, c) = (f.records[0], f.records[1], f.records[2])
        let zeros = { (n: Int) in [UInt8](repeating: 0, count: n) }
        var afterA = f.afterSync
        afterA[testKey(1)] = Array("uno, a longer value so the record spans more bytes".utf8)
        let cases: [(String, [UInt8], [[UInt8]: [UInt8]])] = [
            ("a lost, b and c kept", zeros(a.count) + b + c, f.afterSync),
            ("a lost, c kept", zeros(a.count + b.count) + c, f.afterSync),
            ("a torn inside its payload, b kept", Array(a[0..<30]) + zeros(a.count - 30) + b, f.afterSync),
            ("a torn inside its header, c kept", Array(a[0..<9]) + zeros(a.count - 9 + b.count) + c, f.afterSync),
            ("a lost, b torn at the end", zeros(a.count) + Array(b[0..<20]), f.afterSync),
            ("a lost, b torn, c kept", zeros(a.count) + Array(b[0..<20]) + zeros(b.count - 20) + c, f.afterSync),
            ("a kept, b lost, c kept", a + zeros(b.count) + c, afterA),
            ("a kept, b torn, c torn", a + Array(b[0..<17]) + zeros(b.count - 17) + Array(c[0..<c.count - 1]), afterA),
        ]
        for (what, tail, expected) in cases {
            try expectRecovers(f, tail: tail, to: expected, what)
        }
    }

    // Damage inside a record that was written whole is still corruption ([REC-4]): the gap
    // rule needs zeros where the record's bytes were never written.
    @Test func aBitFlipBeforeLaterRecordsIsStillCorruption() throws {
        let f = try Self.fixture()
        let (a, b, c) = (f.records[0], f.records[1], f.records[2])
        for at in [3, 13, 20, a.count / 2, a.count - 2] {
            var damaged = a
            damaged[at] ^= 0x10
            let fs = f.fileSystem(tail: damaged + b + c)
            var options = f.options
            options.fileSystem = fs
            #expect(caught { try Engine.open(at: "/store", options: options) }?.code == .corruption, "bit flip at \(at)")
        }
        // A whole record of zeros followed by a written one, in an older WAL, is damage too.
        let older = WALReader(path: f.walPath, bytes: f.synced + [UInt8](repeating: 0, count: a.count) + b, isNewest: false, repair: false)
        #expect(throws: StoreError.self) { _ = try older.read { _ in } }
    }
}

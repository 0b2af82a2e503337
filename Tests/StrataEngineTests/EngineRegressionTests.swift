import Testing
@testable import StrataEngine

/// Bugs the fuzzer found (Tools/fuzz/regressions), pinned down as unit tests.
@Suite struct EngineRegressionTests {
    @Test func aCommitAtTheEndOfTheSequenceSpaceFailsInsteadOfTrapping() throws {
        let fs = FaultInjectingFileSystem()
        try Engine.open(at: "/store", options: testOptions(fs)).close()
        var manifest = try #require(try Manifest.load(fileSystem: fs, directory: "/store"))
        manifest.lastSequence = .max
        fs.setContents(manifest.encode(), of: "/store/MANIFEST")
        let engine = try Engine.open(at: "/store", options: testOptions(fs))
        #expect(caught { try engine.put([1], [1]) }?.code == .corruption)
        #expect(try engine.get([1]) == nil)
    }

    // [REC-7] Appends never follow a damaged WAL header, even when the WAL holds no record.
    @Test func repairStartsAFreshWALWhenTheActiveOneIsDamaged() throws {
        let fs = FaultInjectingFileSystem()
        fs.setContents([], of: "/store/00000012.wal")
        var options = testOptions(fs)
        options.repair = true
        let repaired = try Engine.open(at: "/store", options: options)
        try repaired.put([1], [1])
        try repaired.close()
        let reopened = try Engine.open(at: "/store", options: testOptions(fs))
        #expect(try contents(of: reopened) == [[1]: [1]])
    }

    @Test func findingTheZeroTailIsLinearNotQuadratic() throws {
        // 64 KiB of zeros then one byte: repair must try every offset cheaply. In an older WAL
        // the range is dropped as damage; in the newest it is what a crash leaves of unsynced
        // appends (a record never written, then one torn after its first byte, [REC-3]).
        let bytes = WALRecord.fileHeader(fileNumber: 1) + [UInt8](repeating: 0, count: 64 << 10) + [1]
        let older = WALReader(path: "/w", bytes: bytes, isNewest: false, repair: true)
        #expect(older.zeroTailStart == bytes.count)
        let outcome = try older.read { _ in }
        #expect(outcome.dropped.count == 1)
        let newest = try WALReader(path: "/w", bytes: bytes, isNewest: true, repair: true).read { _ in }
        #expect(newest.dropped.isEmpty)
        #expect(newest.tornTail?.offset == UInt64(Format.walHeaderSize))
    }
}

/// A batch built in parts: the appended operations commit in one transaction, after the
/// batch's own, so a later write of a key wins.
@Suite struct WriteBatchAppendTests {
    @Test func appendedOperationsCommitTogetherAfterTheBatchsOwn() throws {
        let engine = try Engine.open(at: "/store", options: testOptions(FaultInjectingFileSystem()))
        try engine.put([9], [9])
        var batch = WriteBatch()
        batch.put([1], [1])
        batch.put([2], [2])
        var more = WriteBatch()
        more.put([2], [20])  // after the batch's own write of [2]: wins
        more.delete([9])
        more.put([3], [3])
        batch.append(contentsOf: more)
        #expect(batch.count == 5)
        let before = try engine.snapshot().sequence
        try engine.commit(batch)
        #expect(try engine.snapshot().sequence == before + 1, "one transaction")
        #expect(try contents(of: engine) == [[1]: [1], [2]: [20], [3]: [3]])
    }
}

import Testing

@testable import StrataEngine

/// [WAL-4] Transactions submitted without waiting commit together, in order; one built on a
/// failed transaction fails with it.
@Suite struct SubmittedCommitTests {
    static let store = "/store"

    func engine(_ fs: FaultInjectingFileSystem) throws -> Engine {
        var options = testOptions(fs, rollover: 1 << 20)
        options.syncInterval = .seconds(3600)
        return try Engine.open(at: Self.store, options: options)
    }

    func batch(_ n: Int, _ value: String) -> WriteBatch {
        var batch = WriteBatch()
        batch.put(testKey(n), Array(value.utf8))
        return batch
    }

    @Test func submittedTransactionsShareOneWriteAndOneSyncInOrder() throws {
        let fs = FaultInjectingFileSystem()
        let engine = try engine(fs)
        let syncs = fs.syncCount(matching: ".wal")
        let first = try engine.submit(batch(1, "a"))
        let second = try engine.submit(batch(1, "b"), after: first)
        let third = try engine.submit(batch(2, "c"), after: second)
        #expect(try engine.get(testKey(1)) == nil, "nothing is visible before a wait commits it")
        let last = try engine.wait(for: third)
        #expect(fs.syncCount(matching: ".wal") == syncs + 1, "one sync for the three")
        #expect(try engine.wait(for: first) == last - 2)
        #expect(try engine.wait(for: second) == last - 1)
        #expect(try engine.get(testKey(1)) == Array("b".utf8), "the later transaction wins")
        #expect(try engine.get(testKey(2)) == Array("c".utf8))
        #expect(try engine.wait(for: third) == last, "waiting again gives the same outcome")
        #expect(try engine.wait(for: engine.submit(WriteBatch())) == last, "an empty batch commits at the snapshot")
    }

    @Test func aTransactionBuiltOnAFailedOneFailsAndWritesNothing() throws {
        let fs = FaultInjectingFileSystem()
        let engine = try engine(fs)
        try engine.put(testKey(0), [0])
        fs.failNext(.write, matching: ".wal")
        let failed = try engine.submit(batch(1, "a"))
        #expect(throws: StoreError.self) { try engine.wait(for: failed) }
        let dependent = try engine.submit(batch(2, "b"), after: failed)
        let independent = try engine.submit(batch(3, "c"))
        let error = try #require(caught { try engine.wait(for: dependent) })
        #expect(error.code == .io)
        #expect(error.message.contains("earlier transaction"))
        #expect(try engine.wait(for: independent) > 0, "the engine was not poisoned: other commits go on")
        #expect(try engine.get(testKey(1)) == nil)
        #expect(try engine.get(testKey(2)) == nil)
        #expect(try engine.get(testKey(3)) == Array("c".utf8))
    }
}

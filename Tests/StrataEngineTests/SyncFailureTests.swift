import Glibc
import Testing
@testable import StrataEngine

/// How a test reopens the store after the engine was poisoned and closed.
enum Reopen: Sendable, CaseIterable, CustomTestStringConvertible {
    /// Power loss: only what was synced survives (``FaultInjectingFileSystem/crash()``).
    case afterCrash
    /// A plain reopen in the same "boot": every file's current bytes are still there.
    case plain

    var testDescription: String { self == .afterCrash ? "after a crash" : "plain reopen" }
}

/// Which sync a test fails, and how many matching calls run normally before it.
struct SyncFault: Sendable, CustomTestStringConvertible {
    var name: String
    var operation: FaultInjectingFileSystem.Operation
    var matching: String
    var skipping = 0

    var testDescription: String { name }

    func arm(_ fs: FaultInjectingFileSystem) {
        fs.failNext(operation, matching: matching, skipping: skipping, errno: EIO)
    }
}

/// [WAL-4] [SYNC-1]…[SYNC-5] [DIR-4]: one test per sync site, each with an injected `EIO`. A failed sync
/// poisons the engine for good: the operation throws, every later commit, flush, compaction and
/// sync is refused with an error naming the failure, `close()` syncs nothing, and a reopen has
/// every acknowledged commit and not the one whose sync failed.
@Suite struct FailedSyncPoisonsTheEngineTests {
    static let store = "/store"
    static let wal1 = "/store/00000001.wal"

    static func options(
        _ fs: FaultInjectingFileSystem, rollover: UInt64 = 1 << 20, durability: Durability = .full
    ) -> EngineOptions {
        var options = testOptions(fs, rollover: rollover, durability: durability)
        // The sync timer never fires during a test: background syncs are driven directly.
        options.syncInterval = .seconds(3600)
        return options
    }

    static func value(_ n: Int) -> [UInt8] { Array("value \(n)".utf8) }

    /// Commits keys `range`, one transaction each, and adds each acknowledged one to `model`.
    static func put(_ range: Range<Int>, into engine: Engine, model: inout [[UInt8]: [UInt8]]) throws {
        for n in range {
            try engine.put(testKey(n), value(n))
            model[testKey(n)] = value(n)
        }
    }

    /// Every write path of a poisoned engine is refused with `readOnly`, naming the sync site.
    static func expectPoisoned(_ engine: Engine, site: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let refusals: [(String, StoreError?)] = [
            ("commit", caught { try engine.put([0xFF], [1]) }),
            ("flush", caught { try engine.flush() }),
            ("compact", caught { try engine.compact(.full) }),
            ("sync", caught { try engine.sync() }),
        ]
        for (operation, error) in refusals {
            #expect(error?.code == .readOnly, "\(operation) after a failed sync", sourceLocation: sourceLocation)
            #expect(error?.message.contains("poisoned") == true, "\(operation): \(String(describing: error))", sourceLocation: sourceLocation)
            #expect(
                error?.message.contains("sync failed during \(site)") == true, "\(operation): \(String(describing: error))",
                sourceLocation: sourceLocation)
            #expect(error?.errno == EIO, sourceLocation: sourceLocation)
        }
    }

    /// Closes a poisoned engine: it throws `readOnly` and makes no sync call at all.
    static func expectCloseSyncsNothing(
        _ engine: Engine, _ fs: FaultInjectingFileSystem, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let before = fs.syncCount()
        let error = caught { try engine.close() }
        #expect(error?.code == .readOnly, "close of a poisoned engine reports it", sourceLocation: sourceLocation)
        #expect(error?.message.contains("poisoned") == true, sourceLocation: sourceLocation)
        #expect(fs.syncCount() == before, "close synced after a failed sync", sourceLocation: sourceLocation)
        #expect(caught { try engine.close() } == nil, "close is idempotent", sourceLocation: sourceLocation)
        #expect(fs.syncCount() == before, sourceLocation: sourceLocation)
    }

    /// Reopens the store as `mode` says; the reopened engine works.
    static func reopen(_ fs: FaultInjectingFileSystem, _ mode: Reopen) throws -> [[UInt8]: [UInt8]] {
        if mode == .afterCrash { fs.crash() }
        let engine = try Engine.open(at: store, options: options(fs))
        defer { try? engine.close() }
        let found = try contents(of: engine)
        try engine.put([0xEE], [1])  // no longer poisoned: a reopen recovers
        return found
    }

    /// The segments `MANIFEST` names now (its current bytes, as a plain reopen reads it).
    static func manifestSegments(_ fs: FaultInjectingFileSystem) throws -> [UInt32] {
        try #require(try Manifest.load(fileSystem: fs, directory: store)).segments.map(\.fileNumber)
    }

    // MARK: WAL append (durability full)

    // The reported bug: close() synced the WAL again after its sync failed, so a commit reported
    // as failed came back (after a crash, and on a plain reopen).
    @Test(arguments: Reopen.allCases)
    func aFailedWALSyncFailsTheCommitAndTheCommitNeverComesBack(reopen mode: Reopen) throws {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: Self.store, options: Self.options(fs))
        var model: [[UInt8]: [UInt8]] = [:]
        try Self.put(0..<3, into: engine, model: &model)
        fs.failNext(.sync, matching: ".wal")
        let walSyncs = fs.syncCount(matching: Self.wal1)
        let error = caught { try engine.put(testKey(99), Self.value(99)) }
        #expect(error?.code == .io)
        #expect(error?.errno == EIO)
        #expect(error?.message.contains("sync failed during a commit's WAL sync") == true)
        #expect(fs.syncCount(matching: Self.wal1) == walSyncs + 1)
        #expect(try engine.get(testKey(99)) == nil, "a failed commit is not visible")
        #expect(try engine.get(testKey(1)) == Self.value(1), "reads keep working")
        Self.expectPoisoned(engine, site: "a commit's WAL sync")
        Self.expectCloseSyncsNothing(engine, fs)
        #expect(fs.syncCount(matching: Self.wal1) == walSyncs + 1, "the failed sync was never retried")
        #expect(try Self.reopen(fs, mode) == model)
    }

    // MARK: Background and explicit syncs (durability normal / none)

    enum WALSyncCaller: String, Sendable, CaseIterable { case backgroundSync, explicitSync }

    @Test(arguments: WALSyncCaller.allCases, Reopen.allCases)
    func aFailedBackgroundOrExplicitWALSyncPoisonsAndIsNeverRetried(caller: WALSyncCaller, reopen mode: Reopen) throws {
        let fs = FaultInjectingFileSystem()
        let durability: Durability = caller == .backgroundSync ? .normal : .none
        let engine = try Engine.open(at: Self.store, options: Self.options(fs, durability: durability))
        var synced: [[UInt8]: [UInt8]] = [:]
        try Self.put(0..<2, into: engine, model: &synced)
        // The timer's work, driven directly (the timer itself waits an hour).
        if caller == .backgroundSync { engine.backgroundSync() } else { try engine.sync() }
        var acknowledged = synced
        try Self.put(2..<4, into: engine, model: &acknowledged)  // acknowledged, not yet synced
        fs.failNext(.sync, matching: ".wal")
        let site: String
        if caller == .backgroundSync {
            engine.backgroundSync()
            site = "the background WAL sync"
        } else {
            let error = caught { try engine.sync() }
            #expect(error?.code == .io)
            #expect(error?.errno == EIO)
            site = "Engine.sync()"
        }
        Self.expectPoisoned(engine, site: site)
        engine.backgroundSync()  // a later tick syncs nothing
        Self.expectCloseSyncsNothing(engine, fs)
        // After a crash only what a successful sync covered is certain ([WAL-4]: `normal` and
        // `none` acknowledge before the sync); the commits whose sync failed are gone, not
        // brought back by a retried sync. A plain reopen finds every acknowledged commit.
        #expect(try Self.reopen(fs, mode) == (mode == .afterCrash ? synced : acknowledged))
    }

    // MARK: Close

    @Test func aFailedSyncInCloseThrowsAndIsNotRetried() throws {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: Self.store, options: Self.options(fs, durability: .none))
        var model: [[UInt8]: [UInt8]] = [:]
        try Self.put(0..<3, into: engine, model: &model)
        fs.failNext(.sync, matching: ".wal")
        let before = fs.syncCount()
        let error = caught { try engine.close() }
        #expect(error?.code == .io)
        #expect(error?.errno == EIO)
        #expect(fs.syncCount() == before + 1)
        #expect(caught { try engine.close() } == nil)
        #expect(fs.syncCount() == before + 1)
        #expect(try Self.reopen(fs, .plain) == model)
    }

    // MARK: Rollover

    /// The full WAL's own sync at rollover (durability none, so it holds unsynced commits).
    @Test func aFailedSyncOfTheFullWALAtRolloverPoisons() throws {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: Self.store, options: Self.options(fs, durability: .none))
        var model: [[UInt8]: [UInt8]] = [:]
        try Self.put(0..<4, into: engine, model: &model)
        fs.failNext(.sync, matching: Self.wal1)
        let walSyncs = fs.syncCount(matching: Self.wal1)
        let error = caught { try engine.flush() }
        #expect(error?.code == .io)
        #expect(error?.message.contains("sync failed during WAL rollover") == true)
        #expect(fs.syncCount(matching: Self.wal1) == walSyncs + 1)
        #expect(fs.syncCount(matching: "00000002.wal") == 0, "no new WAL after the failed sync")
        Self.expectPoisoned(engine, site: "WAL rollover")
        Self.expectCloseSyncsNothing(engine, fs)
        #expect(fs.syncCount(matching: Self.wal1) == walSyncs + 1, "the failed sync was never retried")
        #expect(try Self.reopen(fs, .plain) == model)
    }

    /// Rollover's other syncs: the new WAL, its directory entry, the manifest and its rename.
    static let rolloverFaults = [
        SyncFault(name: "new WAL", operation: .sync, matching: "00000002.wal"),
        SyncFault(name: "new WAL's directory entry", operation: .syncDirectory, matching: store),
        SyncFault(name: "MANIFEST.tmp", operation: .sync, matching: "MANIFEST.tmp"),
        SyncFault(name: "manifest rename", operation: .syncDirectory, matching: store, skipping: 1),
    ]

    @Test(arguments: rolloverFaults, Reopen.allCases)
    func aFailedSyncDuringACommitsRolloverPoisonsButKeepsTheCommit(fault: SyncFault, reopen mode: Reopen) throws {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: Self.store, options: Self.options(fs, rollover: 200))
        var model: [[UInt8]: [UInt8]] = [:]
        try Self.put(0..<2, into: engine, model: &model)
        fault.arm(fs)
        // This commit is synced, then fills the WAL past 200 bytes: the rollover after it fails.
        try engine.put(testKey(7), [UInt8](repeating: 7, count: 200))
        model[testKey(7)] = [UInt8](repeating: 7, count: 200)
        Self.expectPoisoned(engine, site: "WAL rollover")
        Self.expectCloseSyncsNothing(engine, fs)
        #expect(try Self.reopen(fs, mode) == model)
    }

    // MARK: Flush

    /// A flush's syncs: the new segment, MANIFEST.tmp and the rename (after rollover's own).
    static let flushFaults = [
        SyncFault(name: "new segment", operation: .sync, matching: ".seg"),
        SyncFault(name: "MANIFEST.tmp", operation: .sync, matching: "MANIFEST.tmp", skipping: 1),
        SyncFault(name: "manifest rename", operation: .syncDirectory, matching: store, skipping: 2),
    ]

    @Test(arguments: flushFaults, Reopen.allCases)
    func aFailedSyncDuringAFlushInstallsNothingAndLosesNothing(fault: SyncFault, reopen mode: Reopen) throws {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: Self.store, options: Self.options(fs))
        var model: [[UInt8]: [UInt8]] = [:]
        try Self.put(0..<20, into: engine, model: &model)
        fault.arm(fs)
        let error = caught { try engine.flush() }
        #expect(error?.code == .readOnly)
        #expect(error?.message.contains("sync failed during a flush") == true, "\(String(describing: error))")
        #expect(try contents(of: engine) == model, "reads keep working")
        if fault.matching == ".seg" {
            #expect(try Self.manifestSegments(fs).isEmpty, "no manifest names a segment whose sync failed")
        }
        Self.expectPoisoned(engine, site: "a flush")
        Self.expectCloseSyncsNothing(engine, fs)
        #expect(try Self.reopen(fs, mode) == model)
    }

    @Test func aPoisonedEngineRunsNoQueuedFlush() throws {
        let fs = FaultInjectingFileSystem()
        var options = Self.options(fs, rollover: 200)
        options.backgroundFlush = true
        let engine = try Engine.open(at: Self.store, options: options)
        // Hold back the flush queue, deterministically: the flush a rollover queues waits.
        engine.flushQueue.suspend()
        try engine.put(testKey(7), [UInt8](repeating: 7, count: 200))  // rolls over; WAL 1 queued
        #expect(caught { try engine.put([1], [1]) } == nil)
        fs.failNext(.sync, matching: "00000002.wal")
        #expect(caught { try engine.put([2], [2]) }?.code == .io)
        let before = fs.syncCount()
        engine.flushQueue.resume()
        engine.waitForCompaction()
        #expect(fs.syncCount() == before, "a poisoned engine synced a segment or manifest for a queued flush")
        #expect(try Self.manifestSegments(fs).isEmpty)
        Self.expectCloseSyncsNothing(engine, fs)
        #expect(try Self.reopen(fs, .afterCrash) == [testKey(7): [UInt8](repeating: 7, count: 200), [1]: [1]])
    }

    // MARK: Compaction

    /// Two segments, then a full compaction whose output segment or manifest install fails.
    static let compactionFaults = [
        SyncFault(name: "output segment", operation: .sync, matching: ".seg"),
        SyncFault(name: "MANIFEST.tmp", operation: .sync, matching: "MANIFEST.tmp"),
        SyncFault(name: "manifest rename", operation: .syncDirectory, matching: store),
    ]

    @Test(arguments: compactionFaults, Reopen.allCases)
    func aFailedSyncDuringCompactionPoisonsAndLosesNothing(fault: SyncFault, reopen mode: Reopen) throws {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: Self.store, options: Self.options(fs))
        var model: [[UInt8]: [UInt8]] = [:]
        try Self.put(0..<20, into: engine, model: &model)
        try engine.flush()
        try Self.put(10..<30, into: engine, model: &model)
        try engine.delete(testKey(3))
        model[testKey(3)] = nil
        try engine.flush()
        let victims = try engine.stats().segments.map(\.fileNumber)
        #expect(victims.count == 2)
        fault.arm(fs)
        let error = caught { try engine.compact(.full) }
        #expect(error?.code == .io)
        #expect(error?.errno == EIO)
        #expect(error?.message.contains("sync failed during a compaction") == true, "\(String(describing: error))")
        #expect(try contents(of: engine) == model, "reads keep working")
        if fault.matching == ".seg" {
            #expect(try Self.manifestSegments(fs) == victims, "no manifest names an output whose sync failed")
        }
        Self.expectPoisoned(engine, site: "a compaction")
        Self.expectCloseSyncsNothing(engine, fs)
        // A failed manifest rename may or may not have reached the disk: either manifest must
        // find every segment it names (the outputs are not deleted once the install began).
        #expect(try Self.reopen(fs, mode) == model)
    }

    // MARK: Open

    /// Syncs made by open itself: a failure fails the open, and the next open succeeds.
    static let openFaults = [
        SyncFault(name: "parent directory of a new store", operation: .syncDirectory, matching: "/"),
        SyncFault(name: "first WAL of a new store", operation: .sync, matching: ".wal"),
        SyncFault(name: "directory of a new store", operation: .syncDirectory, matching: store),
        SyncFault(name: "first manifest of a new store", operation: .sync, matching: "MANIFEST.tmp"),
    ]

    @Test(arguments: openFaults)
    func aFailedSyncWhileCreatingAStoreFailsTheOpenAndTheNextOpenWorks(fault: SyncFault) throws {
        let fs = FaultInjectingFileSystem()
        fault.arm(fs)
        let error = caught { try Engine.open(at: Self.store, options: Self.options(fs)) }
        #expect(error?.code == .io)
        #expect(error?.errno == EIO)
        let engine = try Engine.open(at: Self.store, options: Self.options(fs))
        try engine.put([1], [1])
        try engine.close()
        #expect(try Self.reopen(fs, .afterCrash) == [[1]: [1]])
    }

    @Test func aFailedSyncOfATornTailCutFailsTheOpenAndTheNextOpenWorks() throws {
        let fs = FaultInjectingFileSystem()
        var model: [[UInt8]: [UInt8]] = [:]
        do {
            let engine = try Engine.open(at: Self.store, options: Self.options(fs))
            try Self.put(0..<3, into: engine, model: &model)
            try engine.close()
        }
        let wal = try #require(fs.contents(of: Self.wal1))
        fs.setContents(wal + [1, 2, 3], of: Self.wal1)  // a torn tail: fewer than 16 bytes
        fs.failNext(.sync, matching: Self.wal1)
        let error = caught { try Engine.open(at: Self.store, options: Self.options(fs)) }
        #expect(error?.code == .io)
        #expect(error?.errno == EIO)
        #expect(try Self.reopen(fs, .plain) == model)
    }
}

/// [SYNC-6] An injected read error (`EIO` on `pread`) is a typed ``StoreError``, never a crash, and
/// poisons nothing: a read changes no file, so the same read can simply be tried again.
@Suite struct ReadErrorsAreTypedErrorsTests {
    static let store = "/store"

    /// A store with two segments and records in its WAL; returns what it holds.
    static func makeStore(_ fs: FaultInjectingFileSystem) throws -> [[UInt8]: [UInt8]] {
        let engine = try Engine.open(at: store, options: testOptions(fs, rollover: 1 << 20))
        defer { try? engine.close() }
        var model: [[UInt8]: [UInt8]] = [:]
        for n in 0..<30 {
            if n == 10 || n == 20 { try engine.flush() }
            try engine.put(testKey(n), Array("value \(n)".utf8))
            model[testKey(n)] = Array("value \(n)".utf8)
        }
        #expect(try engine.stats().segments.count == 2)
        return model
    }

    @Test(arguments: ["MANIFEST", ".wal", ".seg"])
    func aReadErrorDuringOpenFailsTheOpenWithATypedError(file: String) throws {
        let fs = FaultInjectingFileSystem()
        let model = try Self.makeStore(fs)
        fs.failNext(.read, matching: file)
        let error = caught { try Engine.open(at: Self.store, options: testOptions(fs, rollover: 1 << 20)) }
        #expect(error?.code == .io)
        #expect(error?.errno == EIO)
        #expect(error?.path?.contains(file) == true, "\(String(describing: error))")
        // The failed open released the lock and changed nothing.
        let engine = try Engine.open(at: Self.store, options: testOptions(fs, rollover: 1 << 20))
        #expect(try contents(of: engine) == model)
    }

    @Test func aReadErrorOnASegmentFailsThatReadOnly() throws {
        let fs = FaultInjectingFileSystem()
        let model = try Self.makeStore(fs)
        let engine = try Engine.open(at: Self.store, options: testOptions(fs, rollover: 1 << 20))
        fs.failNext(.read, matching: ".seg")
        let error = caught { try engine.get(testKey(1)) }  // in the first segment, not cached yet
        #expect(error?.code == .io)
        #expect(error?.errno == EIO)
        #expect(error?.path?.hasSuffix(".seg") == true)
        #expect(try engine.get(testKey(1)) == model[testKey(1)], "the same read succeeds once the device does")
        try engine.put([1], [1])  // not poisoned
        try engine.close()
    }

    @Test func aReadErrorDuringCompactionFailsTheRunAndChangesNothing() throws {
        let fs = FaultInjectingFileSystem()
        var model = try Self.makeStore(fs)
        let engine = try Engine.open(at: Self.store, options: testOptions(fs, rollover: 1 << 20))
        let segments = try engine.stats().segments.map(\.fileNumber)
        fs.failNext(.read, matching: ".seg")
        let error = caught { try engine.compact(.full) }
        #expect(error?.code == .io)
        #expect(error?.errno == EIO)
        #expect(try engine.stats().segments.map(\.fileNumber) == segments)
        try engine.put([1], [1])  // not poisoned
        model[[1]] = [1]
        try engine.compact(.full)
        #expect(try engine.stats().segments.count == 1)
        try engine.close()
        let reopened = try Engine.open(at: Self.store, options: testOptions(fs, rollover: 1 << 20))
        #expect(try contents(of: reopened) == model)
    }
}

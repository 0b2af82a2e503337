import Glibc
import Testing

@testable import StrataEngine

/// [MAN-6] A clean close writes a large log out as a segment (after syncing it), so the next
/// open replays nothing; a small log, a setting of 0, a read-only engine and a poisoned one are
/// left alone; a write-out that fails loses nothing and is reported.
@Suite struct CloseWriteOutTests {
    /// Options with the write-out at `threshold` bytes of records and a WAL that never rolls over.
    static func options(_ fs: FaultInjectingFileSystem, threshold: UInt64, durability: Durability = .full) -> EngineOptions {
        var options = testOptions(fs, rollover: 1 << 30, durability: durability)
        options.flushAtCloseBytes = threshold
        return options
    }

    /// Commits `count` keys (about 40 bytes of record each) and returns what the store holds.
    static func fill(_ engine: Engine, count: Int, seed: UInt64) throws -> [[UInt8]: [UInt8]] {
        var rng = SeededRandom(seed: seed)
        var model: [[UInt8]: [UInt8]] = [:]
        for _ in stride(from: 0, to: count, by: 50) {
            let batch = ModelBatch.random(keys: count, maxOperations: 50, maxValue: 20, using: &rng)
            try engine.commit(batch.writeBatch)
            batch.apply(to: &model)
        }
        return model
    }

    /// The store's WAL and segment files (names) and the bytes of records its WALs hold.
    static func files(_ fs: FaultInjectingFileSystem) -> (segments: Int, walRecordBytes: Int) {
        let names = fs.listFiles(under: "/store")
        let segments = names.filter { $0.hasSuffix(".seg") }.count
        let wal = names.filter { $0.hasSuffix(".wal") }.reduce(0) { $0 + max(0, (fs.contents(of: $1)?.count ?? 0) - Format.walHeaderSize) }
        return (segments, wal)
    }

    @Test func aLogAtTheThresholdIsWrittenOutAndTheStoreReopensWithTheSameContents() throws {
        for durability in [Durability.full, .normal, .none] {
            let fs = FaultInjectingFileSystem()
            let engine = try Engine.open(at: "/store", options: Self.options(fs, threshold: 2_000, durability: durability))
            let model = try Self.fill(engine, count: 400, seed: 3)
            #expect(Self.files(fs).walRecordBytes >= 2_000)
            try engine.close()
            let after = Self.files(fs)
            #expect(after.segments == 1 && after.walRecordBytes == 0, "\(durability): \(after)")
            let reopened = try Engine.open(at: "/store", options: Self.options(fs, threshold: 2_000))
            #expect(try contents(of: reopened) == model, "\(durability)")
            try reopened.close()
        }
    }

    @Test func aSmallLogAZeroThresholdAndAReadOnlyEngineLeaveTheLog() throws {
        for threshold in [UInt64(1 << 30), 0] {
            let fs = FaultInjectingFileSystem()
            let engine = try Engine.open(at: "/store", options: Self.options(fs, threshold: threshold))
            let model = try Self.fill(engine, count: 400, seed: 4)
            let before = Self.files(fs)
            try engine.close()
            #expect(Self.files(fs) == before && before.segments == 0, "threshold \(threshold)")
            var readOnly = Self.options(fs, threshold: 1)
            readOnly.readOnly = true
            let reader = try Engine.open(at: "/store", options: readOnly)
            #expect(try contents(of: reader) == model)
            try reader.close()
            #expect(Self.files(fs) == before, "a read-only close wrote")
        }
    }

    @Test func aFailedWriteOutLosesNothingAndCloseSaysWhatHappened() throws {
        for failing in [FaultInjectingFileSystem.Operation.write, .sync, .rename] {
            let fs = FaultInjectingFileSystem()
            let engine = try Engine.open(at: "/store", options: Self.options(fs, threshold: 2_000, durability: .none))
            let model = try Self.fill(engine, count: 400, seed: 5)
            // The close's own WAL sync goes through; the segment or the manifest that would
            // name it fails.
            fs.failNext(failing, matching: failing == .rename ? "MANIFEST" : ".seg")
            do throws(StoreError) {
                try engine.close()
                Issue.record("close did not report the failed write-out (\(failing))")
            } catch {
                #expect(error.message.contains("close synced every commit"), "\(failing): \(error)")
            }
            fs.clearFaults()
            let reopened = try Engine.open(at: "/store", options: Self.options(fs, threshold: 0))
            #expect(try contents(of: reopened) == model, "\(failing)")
            try reopened.close()
        }
    }

    @Test(arguments: [FaultInjectingFileSystem.CrashTiming.beforeSync, .afterSync])
    func aCrashAtEverySyncPointOfTheWriteOutLosesNothing(timing: FaultInjectingFileSystem.CrashTiming) throws {
        func store() throws -> (FaultInjectingFileSystem, Engine, [[UInt8]: [UInt8]]) {
            let fs = FaultInjectingFileSystem()
            let engine = try Engine.open(at: "/store", options: Self.options(fs, threshold: 2_000, durability: .none))
            let model = try Self.fill(engine, count: 400, seed: 6)
            try engine.sync()
            return (fs, engine, model)
        }
        let (clean, engine, _) = try store()
        let before = clean.syncPointCount
        try engine.close()
        let points = clean.syncPointCount - before
        #expect(points >= 3, "the write-out syncs its segment and a manifest or two")
        for point in 1...points {
            let (fs, engine, model) = try store()
            fs.crash(atSyncPoint: point, timing: timing)
            try? engine.close()
            fs.crash()
            let reopened = try Engine.open(at: "/store", options: Self.options(fs, threshold: 0))
            #expect(try contents(of: reopened) == model, "sync point \(point) \(timing)")
            try reopened.close()
        }
    }
}

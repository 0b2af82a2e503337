import Testing
@testable import StrataEngine

/// Crash the engine at every sync point of a workload and check recovery (DESIGN invariants 1, 2).
@Suite struct EngineCrashTests {
    static let batches: [ModelBatch] = {
        var rng = SeededRandom(seed: 42)
        return (0..<40).map { _ in ModelBatch.random(keys: 30, maxOperations: 4, maxValue: 60, using: &rng) }
    }()

    /// The model after each prefix of the workload: `states[k]` is the state after `k` commits.
    static let states: [[[UInt8]: [UInt8]]] = {
        var model: [[UInt8]: [UInt8]] = [:]
        var states = [model]
        for batch in batches {
            batch.apply(to: &model)
            states.append(model)
        }
        return states
    }()

    static let rollover: UInt64 = 700

    /// Opens a store and commits the workload until something fails; returns how many commits
    /// were acknowledged. The engine is released before returning, so nothing it owns touches
    /// the file system after the simulated crash.
    static func runWorkload(on fs: FaultInjectingFileSystem) -> Int {
        var acknowledged = 0
        do {
            let engine = try Engine.open(at: "/store", options: testOptions(fs, rollover: rollover))
            for batch in batches {
                try engine.commit(batch.writeBatch)
                acknowledged += 1
            }
            try engine.close()
        } catch {}
        return acknowledged
    }

    @Test func theWorkloadHasManySyncPointsIncludingRolloversAndFlushes() throws {
        let fs = FaultInjectingFileSystem()
        #expect(Self.runWorkload(on: fs) == Self.batches.count)
        #expect(fs.syncPointCount > Self.batches.count + 20, "rollovers and flushes add sync points")
        let engine = try Engine.open(at: "/store", options: testOptions(fs, rollover: Self.rollover))
        #expect(try contents(of: engine) == Self.states.last)
        #expect(try engine.stats().segments.count >= 2)
    }

    // [WAL-4] [REC-1] [REC-3] [MAN-4] [SEG-7]: every acknowledged commit survives, nothing partial appears.
    @Test(arguments: [FaultInjectingFileSystem.CrashTiming.beforeSync, .afterSync])
    func aCrashAtEverySyncPointKeepsAcknowledgedCommitsAndNoPartialOnes(timing: FaultInjectingFileSystem.CrashTiming) throws {
        let clean = FaultInjectingFileSystem()
        _ = Self.runWorkload(on: clean)
        let syncPoints = clean.syncPointCount
        for point in 1...syncPoints {
            let fs = FaultInjectingFileSystem()
            fs.crash(atSyncPoint: point, timing: timing)
            let acknowledged = Self.runWorkload(on: fs)
            fs.crash()
            let engine = try Engine.open(at: "/store", options: testOptions(fs, rollover: Self.rollover))
            let state = try contents(of: engine)
            // The recovered state is the state after some k commits, acknowledged ≤ k ≤ attempted.
            let attempted = min(acknowledged + 1, Self.batches.count)
            let matches = (acknowledged...attempted).contains { Self.states[$0] == state }
            #expect(matches, "sync point \(point) \(timing): \(acknowledged) acknowledged, state matches no allowed prefix")
            // The recovered store keeps working and stays consistent across another reopen.
            try engine.put(Array("after".utf8), Array("crash".utf8))
            try engine.flush()
            try engine.close()
            let again = try Engine.open(at: "/store", options: testOptions(fs, rollover: Self.rollover))
            var expected = state
            expected[Array("after".utf8)] = Array("crash".utf8)
            #expect(try contents(of: again) == expected, "sync point \(point) \(timing): second reopen")
            // [REC-1] No orphans: the directory holds exactly what the manifest names.
            let stats = try again.stats()
            let named = Set((stats.wals + stats.segments).map { "/store/" + Format.walOrSegmentName($0.fileNumber, stats) })
            let present = Set(fs.listFiles(under: "/store").filter { $0.hasSuffix(".wal") || $0.hasSuffix(".seg") })
            #expect(present == named, "sync point \(point) \(timing): orphan files left")
        }
    }

    // [REC-3] [REC-4]: a torn last record, cut at every byte offset, is dropped and the rest kept.
    @Test func aTornLastRecordIsDroppedAtEveryByteOffset() throws {
        let fs = FaultInjectingFileSystem()
        let options = testOptions(fs, rollover: 1 << 20)
        var model: [[UInt8]: [UInt8]] = [:]
        do {
            let engine = try Engine.open(at: "/store", options: options)
            for i in 0..<5 {
                try engine.put(testKey(i), Array("value \(i)".utf8))
                model[testKey(i)] = Array("value \(i)".utf8)
            }
            try engine.close()
        }
        let walPath = "/store/00000001.wal"
        let before = try #require(fs.contents(of: walPath))
        // [DUR-3] What SYNC held before the next commit: a crash before that commit's sync left it so.
        let boundBefore = try #require(fs.contents(of: "/store/SYNC"))
        var last = model
        do {
            let engine = try Engine.open(at: "/store", options: options)
            var batch = WriteBatch()
            batch.put(testKey(1), Array("overwritten".utf8))
            batch.delete(testKey(2))
            batch.put(testKey(9), Array("new".utf8))
            try engine.commit(batch)
            try engine.close()
        }
        last[testKey(1)] = Array("overwritten".utf8)
        last[testKey(2)] = nil
        last[testKey(9)] = Array("new".utf8)
        let full = try #require(fs.contents(of: walPath))
        #expect(full.count > before.count)
        for cut in before.count..<full.count {
            fs.setContents(Array(full[0..<cut]), of: walPath)
            fs.setContents(boundBefore, of: "/store/SYNC")
            let engine = try Engine.open(at: "/store", options: options)
            #expect(try contents(of: engine) == model, "cut at \(cut)")
            // The tail was truncated, so a new commit follows valid records and survives reopen.
            try engine.put(testKey(7), [7])
            try engine.close()
            let reopened = try Engine.open(at: "/store", options: options)
            var expected = model
            expected[testKey(7)] = [7]
            #expect(try contents(of: reopened) == expected, "cut at \(cut), after a new commit")
            try reopened.close()
        }
        // A zero-filled tail (space allocated, data never written) is a torn tail too.
        fs.setContents(full + [UInt8](repeating: 0, count: 100), of: walPath)
        let engine = try Engine.open(at: "/store", options: options)
        #expect(try contents(of: engine) == last)
    }

    // [WAL-4] A failed sync turns the engine read-only; it never retries and pretends.
    @Test func aFailedSyncTurnsTheEngineReadOnlyAndReadsKeepWorking() throws {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: "/store", options: testOptions(fs, rollover: 1 << 20))
        try engine.put([1], [1])
        fs.failNext(.sync, matching: ".wal")
        #expect(throws: StoreError.self) { try engine.put([2], [2]) }
        do {
            try engine.put([3], [3])
            Issue.record("commit after a failed sync succeeded")
        } catch {
            #expect(error.code == .readOnly)
        }
        #expect(try engine.get([1]) == [1])
        try? engine.close()
        let reopened = try Engine.open(at: "/store", options: testOptions(fs))
        #expect(try reopened.get([1]) == [1])
        #expect(try reopened.get([3]) == nil)
        try reopened.put([4], [4])
        #expect(try reopened.get([4]) == [4])
    }

    @Test func aFailedWriteFailsOnlyThatCommit() throws {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: "/store", options: testOptions(fs, rollover: 1 << 20))
        try engine.put([1], [1])
        fs.failNext(.write, matching: ".wal")
        do {
            try engine.put([2], [2])
            Issue.record("commit with a failed write succeeded")
        } catch {
            #expect(error.code == .io)
        }
        try engine.put([3], [3])
        #expect(try engine.get([2]) == nil)
        try engine.close()
        let reopened = try Engine.open(at: "/store", options: testOptions(fs))
        #expect(try contents(of: reopened) == [[1]: [1], [3]: [3]])
    }

    // With zeros written ahead of the records ([WAL-6]), the space runs out as the zeros are
    // written: the commit fails the same way.
    @Test(arguments: [UInt64(0), 64 << 10])
    func runningOutOfSpaceFailsTheCommitWithoutDamage(writtenAhead: UInt64) throws {
        let fs = FaultInjectingFileSystem()
        var options = testOptions(fs, rollover: 1 << 20)
        options.walPreallocationBytes = writtenAhead
        let engine = try Engine.open(at: "/store", options: options)
        try engine.put([1], [1])
        fs.spaceLimit = writtenAhead == 0 ? 200 : 1  // with zeros ahead: no file may grow
        do {
            try engine.put([2], [UInt8](repeating: 9, count: 500 + Int(writtenAhead)))
            Issue.record("commit beyond the space limit succeeded")
        } catch {
            #expect(error.code == .io)
            #expect(error.errno == 28)  // ENOSPC
        }
        fs.spaceLimit = nil
        try engine.put([3], [3])
        try engine.close()
        let reopened = try Engine.open(at: "/store", options: options)
        #expect(try contents(of: reopened) == [[1]: [1], [3]: [3]])
    }

    @Test func aWriteTornByACrashLosesOnlyThatUnacknowledgedCommit() throws {
        let fs = FaultInjectingFileSystem()
        do {
            let engine = try Engine.open(at: "/store", options: testOptions(fs, rollover: 1 << 20))
            try engine.put([1], [1])
            fs.tearNextWrite(matching: ".wal", keeping: 20)
            #expect(throws: StoreError.self) { try engine.put([2], [UInt8](repeating: 2, count: 100)) }
        }
        fs.crash()
        let engine = try Engine.open(at: "/store", options: testOptions(fs))
        #expect(try contents(of: engine) == [[1]: [1]])
    }
}

extension Format {
    /// The file name of a live file in `stats` (test helper).
    static func walOrSegmentName(_ number: UInt32, _ stats: EngineStats) -> String {
        stats.wals.contains { $0.fileNumber == number } ? walFileName(number) : segmentFileName(number)
    }
}

import Dispatch
import Testing
@testable import StrataEngine
import StrataSync

/// The compactor: space comes back, content never changes, crashes at any step are safe.
@Suite struct EngineCompactionTests {
    /// The size of the live data alone, compressed: a fresh store holding just `model`, flushed.
    static func liveCompressedSize(_ model: [[UInt8]: [UInt8]]) throws -> UInt64 {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: "/fresh", options: testOptions(fs, rollover: 1 << 30))
        var batch = WriteBatch()
        for (key, value) in model { batch.put(key, value) }
        try engine.commit(batch)
        try engine.flush()
        return try engine.stats().segments.reduce(0) { $0 + $1.sizeBytes }
    }

    // [CMP-1] [CMP-2] DESIGN target: space after compaction ≤ 1.3 × the live data's compressed size.
    @Test func overwritesAreReclaimedToWithinTheSpaceTargetWithContentUnchanged() throws {
        let fs = FaultInjectingFileSystem()
        var options = testOptions(fs, rollover: 16 << 10)
        options.blockSize = 4096
        options.checkInvariants = false
        let engine = try Engine.open(at: "/store", options: options)
        var rng = SeededRandom(seed: 7)
        var model: [[UInt8]: [UInt8]] = [:]
        for round in 0..<20 {
            var batch = WriteBatch()
            for i in 0..<200 {
                let value = Array("round \(round) key \(i) ".utf8) + rng.bytes(40)
                batch.put(testKey(i), value)
                model[testKey(i)] = value
            }
            try engine.commit(batch)
        }
        try engine.flush()
        let before = try engine.stats()
        #expect(before.segments.count > 5)
        let live = try Self.liveCompressedSize(model)
        #expect(Double(before.diskBytes) > 3 * Double(live), "the workload wrote mostly dead data")

        try engine.compact()
        let after = try engine.stats()
        #expect(try contents(of: engine) == model)
        #expect(Double(after.diskBytes) <= 1.3 * Double(live), "disk \(after.diskBytes) vs live \(live)")
        let totals = engine.compactionStats()
        #expect(totals.runs >= 1 && totals.segmentsRemoved > 0 && totals.bytesReclaimed > 0)
        // Nothing but live files remains on disk once no snapshot holds the victims.
        let onDisk = fs.listFiles(under: "/store").filter { $0.hasSuffix(".seg") }.count
        #expect(onDisk == after.segments.count)
        try engine.close()
        let reopened = try Engine.open(at: "/store", options: options)
        #expect(try contents(of: reopened) == model)
    }

    // [CMP-4] Tombstones go once no older segment can hold their key, and stay until then.
    @Test func tombstonesAreDroppedOnlyWhenNoOlderSegmentCanHoldTheKey() throws {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: "/store", options: testOptions(fs, rollover: 1 << 20))
        for i in 0..<20 { try engine.put(testKey(i), [UInt8(i)]) }
        try engine.flush()  // segment A: the puts
        for i in 0..<10 { try engine.delete(testKey(i)) }
        try engine.flush()  // segment B: ten tombstones
        let segments = try engine.stats().segments
        #expect(segments.count == 2)
        // Compacting B alone must keep its tombstones: A still holds the keys.
        var onlyTombstones = CompactionOptions()
        onlyTombstones.minDeadRatio = 2  // nothing qualifies by ratio…
        onlyTombstones.maxDeadBytes = .max
        onlyTombstones.smallSegmentBytes = 0
        try engine.compact(onlyTombstones)
        #expect(engine.compactionStats().tombstonesDropped == 0)
        try engine.compact(.full)
        #expect(engine.compactionStats().tombstonesDropped == 10)
        #expect(try engine.stats().segments.allSatisfy { $0.tombstoneBytes == 0 })
        try engine.close()
        let reopened = try Engine.open(at: "/store", options: testOptions(fs))
        #expect(try reopened.snapshot().count == 10)
        #expect(try reopened.get(testKey(3)) == nil)
        #expect(try reopened.get(testKey(13)) == [13])
    }

    // [DIR-3] [READ-2] A snapshot keeps compacted-away files readable until it is released.
    @Test func aSnapshotKeepsVictimFilesAliveUntilReleased() throws {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: "/store", options: testOptions(fs, rollover: 1 << 20))
        for round in 0..<3 {
            for i in 0..<30 { try engine.put(testKey(i), Array("r\(round)-\(i)".utf8)) }
            try engine.flush()
        }
        var snapshot: Snapshot? = try engine.snapshot()
        let victims = try engine.stats().segments.map(\.path)
        try engine.compact(.full)
        for path in victims { #expect(fs.contents(of: path) != nil, "\(path) deleted under a snapshot") }
        #expect(try snapshot?.scan().count == 30)
        #expect(try snapshot?.get(testKey(5)) == Array("r2-5".utf8))
        snapshot = nil
        for path in victims { #expect(fs.contents(of: path) == nil, "\(path) outlived its last reader") }
    }

    // [CMP-5] Crash at every sync point of a compaction: content identical, no orphans after open.
    @Test(arguments: [FaultInjectingFileSystem.CrashTiming.beforeSync, .afterSync])
    func aCrashAtEverySyncPointOfACompactionLeavesContentIdentical(timing: FaultInjectingFileSystem.CrashTiming) throws {
        func build(_ fs: FaultInjectingFileSystem) throws -> [[UInt8]: [UInt8]] {
            var model: [[UInt8]: [UInt8]] = [:]
            let engine = try Engine.open(at: "/store", options: testOptions(fs, rollover: 1 << 20))
            for round in 0..<4 {
                for i in 0..<40 where (i + round) % 3 != 0 {
                    try engine.put(testKey(i), Array("r\(round)".utf8))
                    model[testKey(i)] = Array("r\(round)".utf8)
                }
                try engine.delete(testKey(round))
                model[testKey(round)] = nil
                try engine.flush()
            }
            try engine.close()
            return model
        }
        let probe = FaultInjectingFileSystem()
        let model = try build(probe)
        let base = probe.syncPointCount
        do {
            let engine = try Engine.open(at: "/store", options: testOptions(probe))
            try engine.compact(.full)
            try engine.close()
        }
        let points = probe.syncPointCount - base
        #expect(points == 3, "output segment, manifest, directory")
        for point in 1...points {
            let fs = FaultInjectingFileSystem()
            _ = try build(fs)
            do {
                let engine = try Engine.open(at: "/store", options: testOptions(fs))
                fs.crash(atSyncPoint: point, timing: timing)
                try? engine.compact(.full)
            }
            fs.crash()
            let engine = try Engine.open(at: "/store", options: testOptions(fs))
            #expect(try contents(of: engine) == model, "sync point \(point) \(timing)")
            let stats = try engine.stats()
            let live = Set(stats.segments.map(\.path) + stats.wals.map(\.path))
            let present = Set(fs.listFiles(under: "/store").filter { $0.hasSuffix(".seg") || $0.hasSuffix(".wal") })
            #expect(present == live, "sync point \(point) \(timing): orphans after open")
        }
    }

    // [CMP-6] Readers and writers keep going while the compactor swaps segments.
    @Test func readersSeeWholeTransactionsWhileTheCompactorSwapsSegments() throws {
        let fs = FaultInjectingFileSystem()
        var options = testOptions(fs, rollover: 2048)
        options.checkInvariants = false
        options.backgroundFlush = true
        options.compaction.automatic = true
        options.compaction.minDeadRatio = 0.2
        options.compaction.smallSegmentBytes = 4096
        let engine = try Engine.open(at: "/store", options: options)
        let problems = Locked<[String]>([])
        let done = Locked(false)
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) {
            for commit in 0..<300 {
                var batch = WriteBatch()
                for key in 0..<6 { batch.put(testKey(key), Array("c\(commit)".utf8)) }
                do { try engine.commit(batch) } catch { problems.withLock { $0.append("commit: \(error)") } }
            }
            done.withLock { $0 = true }
        }
        // A third thread forces swaps while the writer and the reader run: each round adds a
        // segment and makes the previous one dead, so every compact() has a victim. (Background
        // flushes alone may drop every dead entry before it reaches a segment.)
        DispatchQueue.global().async(group: group) {
            for round in 0..<15 {
                do {
                    try engine.put(Array("z-driver".utf8), [UInt8(round)])
                    try engine.flush()
                    try engine.compact()
                } catch {
                    problems.withLock { $0.append("driver: \(error)") }
                }
            }
        }
        DispatchQueue.global().async(group: group) {
            while !done.withLock({ $0 }) {
                do {
                    let values = try engine.snapshot().scan(prefix: Array("key-".utf8)).map(\.value)
                    if !values.isEmpty && (values.count != 6 || Set(values).count != 1) {
                        problems.withLock { $0.append("torn snapshot: \(Set(values).count) values") }
                    }
                } catch {
                    problems.withLock { $0.append("read: \(error)") }
                }
            }
        }
        group.wait()
        engine.waitForCompaction()
        #expect(problems.withLock { $0 } == [])
        #expect(engine.compactionStats().runs > 0, "the compactor swapped segments during the run")
        #expect(engine.compactionStats().lastError == nil)
        try engine.close()
        let reopened = try Engine.open(at: "/store", options: testOptions(fs))
        #expect(try reopened.snapshot().scan(prefix: Array("key-".utf8)).map(\.value) == Array(repeating: Array("c299".utf8), count: 6))
        #expect(try reopened.get(Array("z-driver".utf8)) == [14])
    }

    @Test func pauseStopsBackgroundRunsAndResumeRestartsThem() throws {
        let fs = FaultInjectingFileSystem()
        var options = testOptions(fs, rollover: 1 << 20)
        options.compaction.automatic = true
        options.compaction.smallSegmentBytes = 1 << 20
        let engine = try Engine.open(at: "/store", options: options)
        engine.pauseCompaction()
        for round in 0..<3 {
            for i in 0..<10 { try engine.put(testKey(i), [UInt8(round)]) }
            try engine.flush()
        }
        engine.waitForCompaction()
        #expect(engine.compactionStats().runs == 0)
        #expect(engine.compactionStats().isPaused)
        #expect(try engine.stats().segments.count == 3)
        engine.resumeCompaction()
        engine.waitForCompaction()
        #expect(engine.compactionStats().runs >= 1)
        #expect(try engine.stats().segments.count == 1)
        #expect(try engine.get(testKey(4)) == [2])
    }

    @Test func aThrottledCompactionStillCompletes() throws {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: "/store", options: testOptions(fs, rollover: 1 << 20))
        for round in 0..<2 {
            for i in 0..<10 { try engine.put(testKey(i), [UInt8(round)]) }
            try engine.flush()
        }
        var policy = CompactionOptions.full
        policy.bytesPerSecond = 1 << 30
        try engine.compact(policy)
        #expect(try engine.stats().segments.count == 1)
        #expect(engine.compactionStats().bytesRead > 0)
    }
}

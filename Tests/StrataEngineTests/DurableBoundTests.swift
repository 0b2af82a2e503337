import Glibc
import Testing
@testable import StrataEngine

// [DUR-1]…[DUR-4] The durable bound: after every WAL sync the engine records in SYNC up to
// which sequence every transaction is on stable storage, so a WAL cut or damaged after its
// commits were acknowledged is told apart from a torn tail that never was. A normal open
// refuses the loss, naming the WAL, the offset and the lost sequences, and writes nothing;
// repair keeps the WAL as found and accepts the loss; the checker reports it as an error.

@Suite struct DurableBoundTests {
    static let walPath = "/store/00000001.wal"
    static let syncPath = "/store/SYNC"
    static let commits = 8

    /// A store with `commits` acknowledged commits under `full` durability, one WAL record each,
    /// all in WAL 1, and the model after each prefix of them. `closed`: the engine was closed;
    /// otherwise the files are as a process that died after the last commit left them (the
    /// kernel kept what it was given).
    static func store(closed: Bool) throws -> (fs: FaultInjectingFileSystem, prefixes: [[[UInt8]: [UInt8]]]) {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: "/store", options: testOptions(fs, rollover: 1 << 20))
        var model: [[UInt8]: [UInt8]] = [:]
        var prefixes = [model]
        var rng = SeededRandom(seed: 0xD0AB1E)
        for _ in 0..<commits {
            let batch = ModelBatch.random(keys: 5, maxOperations: 3, maxValue: 10, using: &rng)
            try engine.commit(batch.writeBatch)
            batch.apply(to: &model)
            prefixes.append(model)
        }
        if closed {
            try engine.close()
            return (fs, prefixes)
        }
        let copy = FaultInjectingFileSystem()
        for (path, bytes) in fileImage(fs) { copy.setContents(bytes, of: path) }
        return (copy, prefixes)
    }

    /// The byte ranges of the WAL's records.
    static func records(_ fs: FaultInjectingFileSystem) throws -> [Range<Int>] {
        let records = Damage.walRecords(try #require(fs.contents(of: walPath)))
        try #require(records.count == commits)
        return records
    }

    static func open(_ fs: FaultInjectingFileSystem, repair: Bool = false, readOnly: Bool = false) -> Result<Engine, StoreError> {
        var options = testOptions(fs, rollover: 1 << 20)
        options.repair = repair
        options.readOnly = readOnly
        do throws(StoreError) {
            return .success(try Engine.open(at: "/store", options: options))
        } catch {
            return .failure(error)
        }
    }

    /// Expects every kind of open (read-write, read-only) to refuse `fs` for the loss of
    /// `lost` at `offset` of the WAL, changing no byte and creating no file; and the checker
    /// to report the same loss as an error.
    static func expectRefused(
        _ fs: FaultInjectingFileSystem, lost: ClosedRange<UInt64>, offset: Int, _ what: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let before = fileImage(fs)
        for readOnly in [false, true] {
            switch open(fs, readOnly: readOnly) {
            case .success(let engine):
                Issue.record("\(what): open (readOnly \(readOnly)) succeeded despite lost acknowledged data", sourceLocation: sourceLocation)
                try? engine.close()
            case .failure(let error):
                #expect(error.code == .corruption, "\(what): \(error)", sourceLocation: sourceLocation)
                #expect(error.path == walPath && error.offset == UInt64(offset), "\(what): \(error)", sourceLocation: sourceLocation)
                #expect(error.lostSequences == lost, "\(what): \(error)", sourceLocation: sourceLocation)
                #expect(error.message.contains("\(lost.lowerBound)…\(lost.upperBound)"), "\(what): \(error)", sourceLocation: sourceLocation)
            }
            #expect(fileImage(fs) == before, "\(what): the refused open changed the files", sourceLocation: sourceLocation)
        }
        do throws(StoreError) {
            let report = try StoreChecker.check(at: "/store", fileSystem: fs)
            #expect(!report.isClean && report.lostSequences == [lost], "\(what): \(report.problems)", sourceLocation: sourceLocation)
            #expect(
                report.problems.contains { $0.severity == .error && $0.path == walPath && $0.offset == UInt64(offset) },
                "\(what): \(report.problems)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("\(what): check failed: \(error)", sourceLocation: sourceLocation)
        }
        #expect(fileImage(fs) == before, "\(what): the check changed the files", sourceLocation: sourceLocation)
    }

    // [DUR-3] The WAL cut at every offset from its header's end to its end, closed or not: the
    // open refuses exactly when a record of an acknowledged commit is gone, naming the WAL, where
    // its valid records end and the lost sequences, and changes nothing; a WAL with every record
    // opens.
    @Test(arguments: [true, false])
    func aWALCutAnywhereIsRefusedExactlyWhenAcknowledgedCommitsAreLost(closed: Bool) throws {
        let (pristine, prefixes) = try Self.store(closed: closed)
        let records = try Self.records(pristine)
        let wal = try #require(pristine.contents(of: Self.walPath))
        for cut in Format.walHeaderSize...wal.count {
            let fs = FaultInjectingFileSystem()
            for (path, bytes) in fileImage(pristine) { fs.setContents(bytes, of: path) }
            fs.setContents(Array(wal[0..<cut]), of: Self.walPath)
            let kept = records.filter { $0.upperBound <= cut }.count
            if kept == Self.commits {
                let engine = try Self.open(fs).get()
                #expect(try contents(of: engine) == prefixes[Self.commits], "cut at \(cut)")
                try engine.close()
            } else {
                Self.expectRefused(
                    fs, lost: UInt64(kept + 1)...UInt64(Self.commits), offset: kept == 0 ? Format.walHeaderSize : records[kept - 1].upperBound,
                    "cut at \(cut) (closed \(closed))")
            }
        }
    }

    // [DUR-3] [REC-4] Every byte of the last record of an acknowledged commit damaged: a damaged
    // payload (which [REC-4] alone took for a torn tail) is the loss of that commit; a damaged
    // header is corruption at the record, as before.
    @Test func damageToTheLastAcknowledgedRecordIsRefusedAsLoss() throws {
        let (pristine, _) = try Self.store(closed: true)
        let last = try #require(try Self.records(pristine).last)
        for at in last {
            let fs = FaultInjectingFileSystem()
            for (path, bytes) in fileImage(pristine) { fs.setContents(bytes, of: path) }
            fs.flipBits(in: Self.walPath, at: at, mask: 0x20)
            if at >= last.lowerBound + Format.walRecordHeaderSize {
                Self.expectRefused(fs, lost: UInt64(Self.commits)...UInt64(Self.commits), offset: last.lowerBound, "flip at \(at)")
            } else {
                let error = caught { try Self.open(fs).get() }
                #expect(error?.code == .corruption && error?.offset == UInt64(last.lowerBound), "flip at \(at): \(String(describing: error))")
                #expect(error?.lostSequences == nil, "flip at \(at): \(String(describing: error))")
            }
        }
    }

    // [DUR-3] A tail that was never acknowledged still opens: a commit whose write a crash tore
    // (the process died; the kernel kept the bytes written) is cut, and its bytes are kept
    // beside the WAL; every acknowledged commit is there.
    @Test func aCommitTornBeforeItsSyncIsATornTailThatOpensAndKeepsTheCutBytes() throws {
        for keeping in [1, 8, 15, 16, 17, 30] {
            let (fs, prefixes) = try Self.store(closed: false)
            let wal = try #require(fs.contents(of: Self.walPath))
            let engine = try Self.open(fs).get()
            fs.tearNextWrite(matching: ".wal", keeping: keeping)
            #expect(caught { try engine.put(testKey(42), Array(repeating: 7, count: 20)) } != nil, "the torn commit fails")
            let torn = try #require(fs.contents(of: Self.walPath))
            #expect(torn.count == wal.count + keeping)
            // The process died with the file system halted; the kernel kept its page cache.
            let after = FaultInjectingFileSystem()
            for (path, bytes) in fileImage(fs) { after.setContents(bytes, of: path) }

            #expect(try StoreChecker.check(at: "/store", fileSystem: after).isClean, "a torn tail is a warning")
            let reopened = try Self.open(after).get()
            #expect(try contents(of: reopened) == prefixes[Self.commits], "kept \(keeping)")
            #expect(after.contents(of: Self.walPath) == wal, "the torn tail is cut")
            let keptCopy = "/store/00000001.wal.torn-\(wal.count)"
            if torn[wal.count...].contains(where: { $0 != 0 }) {
                #expect(after.contents(of: keptCopy) == Array(torn[wal.count...]), "the cut bytes are kept beside the WAL")
            }
            try reopened.put(testKey(43), [1])
            try reopened.close()
            let again = try Self.open(after).get()
            var expected = prefixes[Self.commits]
            expected[testKey(43)] = [1]
            #expect(try contents(of: again) == expected)
            try again.close()
        }
    }

    // [DUR-3] [SYNC-2] A commit whose sync fails, or which a power loss stops before its sync,
    // was never acknowledged: the store reopens with every acknowledged commit.
    @Test func aCommitWhoseSyncFailsOrNeverHappensLosesNothingAcknowledged() throws {
        for power in [false, true] {
            let (fs, prefixes) = try Self.store(closed: true)
            let engine = try Self.open(fs).get()
            if power {
                fs.crash(atSyncPoint: 1, timing: .beforeSync)
            } else {
                fs.failNext(.sync, matching: ".wal")
            }
            #expect(caught { try engine.put(testKey(42), [42]) } != nil)
            fs.crash()
            // The bound survived the crash and names the acknowledged commits only.
            let bound = try SyncRecord.decode(fs.contents(of: Self.syncPath) ?? [], path: Self.syncPath)
            #expect(bound?.sequence == UInt64(Self.commits), "power loss: \(power)")
            #expect(try StoreChecker.check(at: "/store", fileSystem: fs).lostSequences.isEmpty)
            let reopened = try Self.open(fs).get()
            #expect(try contents(of: reopened) == prefixes[Self.commits], "power loss: \(power)")
            try reopened.close()
        }
    }

    // [DUR-4] Repair accepts the loss: it keeps the WAL as it found it, reports the lost range,
    // cuts the tail and lowers the bound, so a normal open works again and new commits follow.
    @Test func repairKeepsTheWALAsFoundReportsTheLostRangeAndTheStoreReopens() throws {
        let (fs, prefixes) = try Self.store(closed: true)
        let records = try Self.records(fs)
        let wal = try #require(fs.contents(of: Self.walPath))
        let cut = records[2].upperBound + 5  // three commits whole, five bytes of the fourth
        let damaged = Array(wal[0..<cut])
        fs.setContents(damaged, of: Self.walPath)

        let engine = try Self.open(fs, repair: true).get()
        let report = try #require(engine.repairReport)
        #expect(report.lostSequences == [4...8])
        #expect(report.keptCopies == ["/store/00000001.wal.damaged"])
        #expect(fs.contents(of: "/store/00000001.wal.damaged") == damaged, "the WAL as found")
        #expect(report.dropped.contains { $0.path == Self.walPath && $0.offset == UInt64(records[2].upperBound) && $0.length == 5 })
        #expect(!report.isClean)
        #expect(try contents(of: engine) == prefixes[3])
        try engine.put(testKey(77), [77])
        try engine.close()

        var expected = prefixes[3]
        expected[testKey(77)] = [77]
        let reopened = try Self.open(fs).get()
        #expect(try contents(of: reopened) == expected)
        try reopened.close()
        let check = try StoreChecker.check(at: "/store", fileSystem: fs)
        #expect(check.isClean && check.lostSequences.isEmpty, "\(check.problems)")
        #expect(check.problems.contains { $0.severity == .warning && $0.path == "/store/00000001.wal.damaged" }, "the kept copy is named")
        let again = try Self.open(fs, repair: true).get()
        #expect(again.repairReport?.isClean == true, "\(String(describing: again.repairReport))")
        try again.close()
    }

    // [DUR-3] A read-only repair reports the loss and writes nothing.
    @Test func aReadOnlyRepairReportsTheLossAndWritesNothing() throws {
        let (fs, prefixes) = try Self.store(closed: true)
        let records = try Self.records(fs)
        let wal = try #require(fs.contents(of: Self.walPath))
        fs.setContents(Array(wal[0..<records[5].upperBound]), of: Self.walPath)
        let before = fileImage(fs)
        let engine = try Self.open(fs, repair: true, readOnly: true).get()
        #expect(engine.repairReport?.lostSequences == [7...8])
        #expect(try contents(of: engine) == prefixes[6])
        try engine.close()
        #expect(fileImage(fs) == before)
    }

    // [DUR-2] Where the bound is written: after each commit's sync under `full`, after
    // Engine.sync() and the background sync under `normal`, at rollover and close under `none`;
    // close makes it durable. The commit path costs one 32-byte write and no sync more.
    @Test func theBoundFollowsEverySyncAndCostsACommitOneSmallWriteAndNoSync() throws {
        func bound(_ fs: FaultInjectingFileSystem, durable: Bool = false) throws -> UInt64? {
            let bytes = durable ? fs.durableContents(of: Self.syncPath) : fs.contents(of: Self.syncPath)
            return try SyncRecord.decode(bytes ?? [], path: Self.syncPath)?.sequence
        }
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: "/store", options: testOptions(fs, rollover: 1 << 20))
        #expect(try bound(fs) == 0 && bound(fs, durable: true) == 0, "created with the store, durable")
        let counts = fs.operationCounts
        try engine.put([1], [1])
        let after = fs.operationCounts
        #expect(after.writes == counts.writes + 2, "the record and the bound")
        #expect(after.syncs == counts.syncs + 1 && after.directorySyncs == counts.directorySyncs, "no sync more")
        #expect(try bound(fs) == 1)
        #expect(try bound(fs, durable: true) == 0, "not synced by the commit")
        try engine.put([2], [2])
        #expect(try bound(fs) == 2)
        try engine.close()
        #expect(try bound(fs, durable: true) == 2, "close syncs it")

        for durability in [Durability.normal, .none] {
            let fs = FaultInjectingFileSystem()
            var options = testOptions(fs, rollover: 1 << 20, durability: durability)
            options.syncInterval = .seconds(3600)
            let engine = try Engine.open(at: "/store", options: options)
            try engine.put([1], [1])
            #expect(try bound(fs) == 0, "\(durability): not synced, not recorded")
            if durability == .normal {
                engine.backgroundSync()
                #expect(try bound(fs) == 1, "the background sync records it")
                try engine.put([2], [2])
                try engine.sync()
                #expect(try bound(fs) == 2, "Engine.sync() records it")
            } else {
                try engine.flush()  // rollover syncs the WAL
                #expect(try bound(fs) == 1, "rollover records it")
                try engine.put([2], [2])
            }
            try engine.close()
            #expect(try bound(fs, durable: true) == 2, "\(durability): close records it, durably")
        }
    }

    // [DUR-1] [DUR-2] A store without SYNC (written before it existed, or whose creation a
    // crash cut short: an empty file) has no bound: its tail is judged as before, and a
    // read-write open writes the bound.
    @Test func aStoreWithoutABoundIsReadAsBeforeAndGetsOne() throws {
        for empty in [false, true] {
            let (fs, prefixes) = try Self.store(closed: true)
            if empty { fs.setContents([], of: Self.syncPath) } else { try fs.remove(Self.syncPath) }
            let records = try Self.records(fs)
            let wal = try #require(fs.contents(of: Self.walPath))
            fs.setContents(Array(wal[0..<(records[7].lowerBound + 3)]), of: Self.walPath)
            #expect(try StoreChecker.check(at: "/store", fileSystem: fs).isClean)
            let engine = try Self.open(fs).get()
            #expect(try contents(of: engine) == prefixes[7], "a torn tail, as before the bound existed")
            try engine.close()
            let written = try SyncRecord.decode(fs.durableContents(of: Self.syncPath) ?? [], path: Self.syncPath)
            #expect(written?.sequence == 7, "empty: \(empty)")
        }
    }

    // [REC-7] [DUR-1] A record zeroed in the middle of the newest WAL, synced records after it:
    // not space a crash left unwritten (the bound names the records after it as synced), so
    // repair drops only that record and keeps every later one; a normal open refuses.
    @Test func repairKeepsSyncedRecordsAfterAZeroedOne() throws {
        var rng = SeededRandom(seed: 0xD0AB1E)
        let batches = (0..<Self.commits).map { _ in ModelBatch.random(keys: 5, maxOperations: 3, maxValue: 10, using: &rng) }
        for zeroed in [2, 4] {
            for wholeRecord in [true, false] {
                let (fs, prefixes) = try Self.store(closed: true)
                #expect(prefixes.last == Damage.model(batches), "the batches are the store's")
                let records = try Self.records(fs)
                var wal = try #require(fs.contents(of: Self.walPath))
                let record = records[zeroed - 1]
                let from = wholeRecord ? record.lowerBound : record.upperBound - 3
                for offset in from..<record.upperBound { wal[offset] = 0 }
                fs.setContents(wal, of: Self.walPath)
                let what = "record \(zeroed) zeroed \(wholeRecord ? "whole" : "at its end")"
                if case .success(let engine) = Self.open(fs) {
                    Issue.record("\(what): a normal open accepted synced records behind damage")
                    try engine.close()
                }
                let engine = try Self.open(fs, repair: true).get()
                let report = try #require(engine.repairReport)
                #expect(try contents(of: engine) == Damage.model(batches.enumerated().filter { $0.offset != zeroed - 1 }.map(\.element)), "\(what)")
                #expect(report.dropped.contains { $0.path == Self.walPath && $0.offset == UInt64(record.lowerBound) && $0.sequences == UInt64(zeroed)...UInt64(zeroed) }, "\(what): \(report)")
                #expect(report.lostSequences.isEmpty, "\(what): every later commit is kept: \(report)")
                try engine.close()
            }
        }
    }

    // [DUR-1] Damage to one slot of SYNC costs nothing: the other slot's record is a bound
    // too (the one a crash that tore a slot's write leaves).
    @Test func aDamagedSlotLeavesTheOtherSlotsBound() throws {
        for slot in 0..<2 {
            for (at, mask) in [(0, UInt8(0x01)), (16, 0x80), (28, 0x01), (31, 0xFF)] {
                let (fs, prefixes) = try Self.store(closed: true)
                let bytes = fs.contents(of: Self.syncPath) ?? []
                let other = 1 - slot
                let otherRecord = try #require(
                    try SyncRecord.decode(
                        Array(repeating: 0, count: slot * Format.syncRecordSize) + Array(bytes[(other * 32)..<(other * 32 + 32)])
                            + Array(repeating: 0, count: other * Format.syncRecordSize),
                        path: Self.syncPath))
                fs.flipBits(in: Self.syncPath, at: slot * Format.syncRecordSize + at, mask: mask)
                #expect(try SyncRecord.decode(fs.contents(of: Self.syncPath) ?? [], path: Self.syncPath) == otherRecord)
                #expect(try StoreChecker.check(at: "/store", fileSystem: fs).isClean)
                let engine = try Self.open(fs).get()
                #expect(try contents(of: engine) == prefixes[Self.commits])
                try engine.close()
            }
        }
    }

    // [DUR-1] Damage to both slots of SYNC is corruption (open changes nothing); repair
    // rewrites it.
    @Test func aDamagedBoundIsCorruptionAndRepairRewritesIt() throws {
        for (at, mask) in [(0, UInt8(0x01)), (16, 0x80), (28, 0x01), (31, 0xFF)] {
            let (fs, prefixes) = try Self.store(closed: true)
            fs.flipBits(in: Self.syncPath, at: at, mask: mask)
            fs.flipBits(in: Self.syncPath, at: Format.syncRecordSize + at, mask: mask)
            let before = fileImage(fs)
            let error = caught { try Self.open(fs).get() }
            #expect(error?.code == .corruption && error?.path == Self.syncPath && error?.offset == 0, "byte \(at): \(String(describing: error))")
            #expect(fileImage(fs) == before)
            #expect(try !StoreChecker.check(at: "/store", fileSystem: fs).isClean)
            let repaired = try Self.open(fs, repair: true).get()
            #expect(repaired.repairReport?.dropped.contains { $0.path == Self.syncPath } == true)
            #expect(try contents(of: repaired) == prefixes[Self.commits])
            try repaired.close()
            let reopened = try Self.open(fs).get()
            try reopened.close()
        }
        // A SYNC of another size is damage too.
        let (fs, _) = try Self.store(closed: true)
        fs.setContents((fs.contents(of: Self.syncPath) ?? []) + [0], of: Self.syncPath)
        #expect(caught { try Self.open(fs).get() }?.code == .corruption)
    }
}

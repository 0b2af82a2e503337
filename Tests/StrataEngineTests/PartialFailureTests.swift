import Glibc
import Testing
@testable import StrataEngine

/// The engine under the faults the crash model added: a WAL write that fails part-way (a
/// short write, then `EIO` or `ENOSPC`) and a failed sync that loses the unsynced writes for
/// good (Linux's behaviour, "fsyncgate"), each followed by a crash that keeps any part of
/// what was not synced ([WAL-4], [SYNC-1], [SYNC-2]).
@Suite struct PartialFailureTests {
    static let policies: [FaultInjectingFileSystem.CrashPolicy] =
        [.none, .all, .prefix(1), .tornPrefix(0, .byte)] + (0..<16).map { .random(seed: $0, tearing: $0 % 2 == 0 ? .byte : .sector(512)) }

    // [WAL-4] A write that fails after storing part of the record fails that commit only: the
    // part is cut back, the next commit follows valid records, and no crash brings it back.
    @Test(arguments: [EIO, ENOSPC])
    func aWALWriteThatFailsPartWayFailsOnlyItsCommit(errno: Int32) throws {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: "/store", options: testOptions(fs, rollover: 1 << 20))
        try engine.put([1], [1])
        fs.failNextWrite(matching: ".wal", afterWriting: 20, errno: errno)
        #expect(caught { try engine.put([2], [UInt8](repeating: 2, count: 100)) }?.errno == errno)
        // A crash now: the part written and its cut-back are both unsynced, in either order.
        let afterFailure = fs.copy()
        try engine.put([3], [3])
        #expect(try contents(of: engine) == [[1]: [1], [3]: [3]])
        for (crashedAt, expected) in [(afterFailure, [[1]: [1]]), (fs.copy(), [[1]: [1], [3]: [3]])] as [(FaultInjectingFileSystem, [[UInt8]: [UInt8]])] {
            for policy in Self.policies {
                let crashed = crashedAt.copy()
                crashed.crash(keeping: policy)
                let reopened = try Engine.open(at: "/store", options: testOptions(crashed))
                #expect(try contents(of: reopened) == expected, "\(policy)")
            }
        }
    }

    // [SYNC-1] [SYNC-2] A commit whose sync fails is reported failed and cut back; when the
    // failed sync lost the write, a later crash cannot bring that commit back either, and
    // every commit acknowledged before survives whatever the crash keeps.
    @Test func aFailedSyncThatLosesTheWriteLosesOnlyTheFailedCommit() throws {
        let fs = FaultInjectingFileSystem()
        fs.failedSyncLosesWrites = true
        let engine = try Engine.open(at: "/store", options: testOptions(fs, rollover: 1 << 20))
        try engine.put([1], [1])
        fs.failNext(.sync, matching: ".wal")
        #expect(caught { try engine.put([2], [2]) }?.errno == EIO)
        #expect(caught { try engine.put([3], [3]) }?.code == .readOnly)
        #expect(try engine.get([1]) == [1])
        fs.halt()
        for policy in Self.policies {
            let crashed = fs.copy()
            crashed.crash(keeping: policy)
            let reopened = try Engine.open(at: "/store", options: testOptions(crashed))
            #expect(try contents(of: reopened) == [[1]: [1]], "\(policy)")
        }
    }
}

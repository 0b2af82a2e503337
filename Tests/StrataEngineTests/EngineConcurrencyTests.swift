import Dispatch
import Synchronization
import Testing
@testable import StrataEngine
import StrataSync

/// Readers see whole transactions only; concurrent committers all get distinct sequences
/// (DESIGN invariant 7). Run under `swift test --sanitize=thread` too.
@Suite struct EngineConcurrencyTests {
    static let keysPerTransaction = 8

    @Test(arguments: [false, true])
    func readersSeeWholeTransactionsWhileWritersCommitAndFlush(backgroundFlush: Bool) throws {
        let fs = FaultInjectingFileSystem()
        var options = testOptions(fs, rollover: 4096)
        options.backgroundFlush = backgroundFlush
        options.checkInvariants = false
        let engine = try Engine.open(at: "/store", options: options)
        let writers = 3, commitsPerWriter = 150
        let sequences = Locked<[UInt64]>([])
        let torn = Locked<[String]>([])
        let writersDone = Atomic<Int>(0)
        let group = DispatchGroup()
        for writer in 0..<writers {
            DispatchQueue.global().async(group: group) {
                for commit in 0..<commitsPerWriter {
                    var batch = WriteBatch()
                    let value = Array("w\(writer)-c\(commit)".utf8)
                    for key in 0..<Self.keysPerTransaction { batch.put(testKey(key), value) }
                    do {
                        let sequence = try engine.commit(batch)
                        sequences.withLock { $0.append(sequence) }
                    } catch {
                        torn.withLock { $0.append("commit failed: \(error)") }
                    }
                }
                writersDone.add(1, ordering: .releasing)
            }
        }
        for _ in 0..<2 {
            DispatchQueue.global().async(group: group) {
                var checks = 0
                while writersDone.load(ordering: .acquiring) < writers || checks < 10 {
                    checks += 1
                    do {
                        let snapshot = try engine.snapshot()
                        let values = try snapshot.scan().map(\.value)
                        if values.count != 0 && (values.count != Self.keysPerTransaction || Set(values).count != 1) {
                            torn.withLock { $0.append("snapshot \(snapshot.sequence) saw \(Set(values).count) values") }
                        }
                    } catch {
                        torn.withLock { $0.append("read failed: \(error)") }
                    }
                }
            }
        }
        group.wait()
        #expect(torn.withLock { $0 } == [])
        let all = sequences.withLock { $0 }.sorted()
        #expect(all == Array(1...UInt64(writers * commitsPerWriter)))
        try engine.close()
        let reopened = try Engine.open(at: "/store", options: options)
        let values = try reopened.snapshot().scan().map(\.value)
        #expect(values.count == Self.keysPerTransaction && Set(values).count == 1)
        #expect(try reopened.snapshot().sequence == UInt64(writers * commitsPerWriter))
    }

    @Test func concurrentCommittersUnderFullDurabilityAllSurviveACrash() throws {
        let fs = FaultInjectingFileSystem()
        let options = testOptions(fs, rollover: 1 << 20)
        do {
            let engine = try Engine.open(at: "/store", options: options)
            let group = DispatchGroup()
            for thread in 0..<8 {
                DispatchQueue.global().async(group: group) {
                    for i in 0..<25 { _ = try? engine.put(testKey(thread * 100 + i), [UInt8(thread)]) }
                }
            }
            group.wait()
            fs.halt()  // the process dies: nothing more reaches the disk
        }
        fs.crash()
        let engine = try Engine.open(at: "/store", options: options)
        #expect(try engine.snapshot().count == 200)
        // Group commit: fewer WAL syncs than commits is possible but not guaranteed, so only
        // correctness is asserted here; the benchmark measures the grouping.
    }
}

#if canImport(Glibc)
    import Glibc
#endif
import Foundation
import StrataChildProcess
import Testing

/// Issue 20: backup while a writer commits, crash-worker style. `strata-crash-worker run`
/// saves in a loop (full durability) and `strata replicate` backs its store up to radosgw; each
/// cycle kills the writer, the replicator or both with SIGKILL at a seeded moment and starts
/// them again. Then the store restored at the newest point holds every acknowledged save, and
/// restored at earlier points it holds whole saves only (the worker's own check of a store:
/// exactly the teams of the last five saves, each with its members, one counter).
@Suite(.enabled(if: ProcessInfo.processInfo.environment["STRATA_S3_ENDPOINT"] != nil, "no S3 server: run Scripts/s3-server start and export what it prints"))
struct ReplicationCrashTests {
    static let lineTimeout = Duration.seconds(60)

    /// `strata-crash-worker verify DIR [--acknowledged K]`: its exit status and output.
    static func verify(_ worker: String, _ directory: String, acknowledged: Int64?) throws -> (ChildExit, [String]) {
        let process = try ChildProcess(
            executable: worker, arguments: ["verify", directory] + (acknowledged.map { ["--acknowledged", String($0)] } ?? []),
            standardErrorPath: directory + ".verify-stderr")
        let output = try process.readRemainingLines(timeout: lineTimeout)
        return (process.waitForExit(), output)
    }

    @Test(.timeLimit(.minutes(4)))
    func killedWritersAndReplicatorsLoseNothingTheReplicaKept() throws {
        let worker = try StrataStoreCrashTests.workerExecutable()
        let tool = try StrataTool.executable()
        let scratch = try StrataStoreCrashTests.temporaryDirectory().path
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let store = scratch + "/store"
        let location = "s3://strata-crash-\(UUID().uuidString.lowercased().prefix(12))/primary"
        var random = StrataStoreCrashTests.Random(seed: 20)
        // The highest save a worker acknowledged, and the counter the next worker resumes from
        // (one more when the save in flight at a kill was recovered, unacknowledged).
        var acknowledged: Int64 = 0, resumeAt: Int64 = 0
        var replicator: ChildProcess?
        func startReplicator() throws -> ChildProcess {
            try ChildProcess(
                executable: tool, arguments: ["replicate", "--quiet", "--lag", "0.02", store, location],
                standardErrorPath: scratch + "/replicate-stderr-\(UUID().uuidString)")
        }
        for cycle in 0..<8 {
            let run = try ChildProcess(executable: worker, arguments: ["run", store, "--seed", String(cycle)], standardErrorPath: scratch + "/run-stderr")
            var lines: [String] = []
            while !(lines.last?.hasPrefix("ready") ?? false) {
                guard let line = try run.readLine(timeout: Self.lineTimeout) else { break }
                lines.append(line)
            }
            if replicator == nil { replicator = try startReplicator() }
            let acks = 3 + Int.random(in: 0..<25, using: &random)
            while lines.filter({ $0.hasPrefix("ack") }).count < acks {
                guard let line = try run.readLine(timeout: Self.lineTimeout) else { break }
                lines.append(line)
            }
            lines += try run.readLines(for: .microseconds(Int.random(in: 0..<8000, using: &random)))
            // The writer dies every cycle (it saves forever); the replicator in about half,
            // at the same moment, while it may be uploading.
            if Int.random(in: 0..<2, using: &random) == 0, let running = replicator {
                running.killNow()
                _ = running.waitForExit()
                replicator = nil
            }
            run.killNow()
            #expect(run.waitForExit() == .signaled(SIGKILL))
            lines += try run.readRemainingLines(timeout: Self.lineTimeout)
            switch StrataStoreCrashTests.acknowledgedSave(in: lines, resumingAt: resumeAt) {
            case .success(let save): acknowledged = max(acknowledged, save)
            case .failure(let problem): Issue.record("cycle \(cycle): \(problem)")
            }
            // The next worker resumes from what its recovery finds: at least what was acknowledged.
            let (exit, _) = try Self.verify(worker, store, acknowledged: acknowledged)
            #expect(exit == .exited(0), "cycle \(cycle)")
            if let running = replicator, cycle % 3 == 2 {
                // A replicator killed while the writer is down, too.
                running.killNow()
                _ = running.waitForExit()
                replicator = nil
            }
            resumeAt = try #require(try Self.verifiedCounter(worker, store))
        }
        if let running = replicator {
            running.killNow()
            _ = running.waitForExit()
        }
        // A last pass catches up with everything the writer left (up to the durable bound: a
        // save recovered after its kill but never acknowledged may stay behind it).
        let final = try StrataTool.run(["replicate", "--once", store, location], scratch: scratch)
        #expect(final.status == 0, "\(final)")

        let newest = scratch + "/restored-newest"
        let restore = try StrataTool.run(["restore", location, newest], scratch: scratch)
        #expect(restore.status == 0, "\(restore)")
        let (exit, output) = try Self.verify(worker, newest, acknowledged: acknowledged)
        #expect(exit == .exited(0), "the newest point lost an acknowledged save: \(output)")

        // Earlier points, at random: a save is one transaction (besides the few an open writes).
        var restored = 0
        for attempt in 0..<5 {
            let point = 1 + Int.random(in: 0..<Int(resumeAt) + 10, using: &random)
            let directory = scratch + "/restored-\(attempt)"
            let run = try StrataTool.run(["restore", location, directory, "--at", String(point)], scratch: scratch)
            if run.status != 0 {
                // A point beyond the newest, or one whose WAL was flushed unreplicated, is
                // refused with the reason; none other.
                #expect(run.stderr.contains("reaches sequence") || run.stderr.contains("is not a point it kept"), "\(run)")
                continue
            }
            let (exit, output) = try Self.verify(worker, directory, acknowledged: nil)
            #expect(exit == .exited(0), "restored at \(point): \(output)")
            restored += 1
        }
        #expect(restored >= 1, "no earlier point restored")
    }

    /// The counter the store at `directory` holds now (its recovery run by `verify`).
    static func verifiedCounter(_ worker: String, _ directory: String) throws -> Int64? {
        let (_, output) = try verify(worker, directory, acknowledged: nil)
        guard let line = output.first, let summary = try? JSONDecoder().decode(StrataStoreCrashTests.Summary.self, from: Data(line.utf8)) else {
            return nil
        }
        return summary.counter
    }
}

import Glibc
import Testing
@testable import StrataEngine

/// Crash-point enumeration (reliability issue 13): every I/O operation of scripted engine
/// workloads is a crash point, crashed with several policies of what survives of the unsynced
/// writes and directory changes (FaultInjectingFileSystem+CrashModel.swift), and recovery is
/// checked against a model of what was acknowledged: the open succeeds, every acknowledged
/// commit is there with its exact values, no commit is partly applied, nothing never written
/// appears.
///
/// The CI tests below take a seeded sample (every k-th operation, two policies). The long
/// target, every operation with both timings and twelve policies (≥ 10,000 crash points),
/// runs only with `STRATA_LONG_CRASH=1`; Tools/crash-enumeration.md records its figures.
@Suite struct CrashEnumerationTests {
    typealias Enumerator = CrashPointEnumerator<CrashWorkloads.Progress>

    /// Whether the long target runs (`STRATA_LONG_CRASH=1`).
    static var long: Bool { getenv("STRATA_LONG_CRASH").map { String(cString: $0) == "1" } ?? false }

    /// `STRATA_CRASH_SEED` (a number) moves the CI sample's offsets and random policies; the
    /// default keeps CI repeatable.
    static var seed: UInt64 { getenv("STRATA_CRASH_SEED").flatMap { UInt64(String(cString: $0)) } ?? 0 }

    /// The CI sample's two policies: nothing unsynced kept, and a seeded random subset.
    static func ciPolicies(_ operation: Int, _ timing: FaultInjectingFileSystem.OperationTiming) -> [FaultInjectingFileSystem.CrashPolicy] {
        [.none, .random(seed: seed ^ (UInt64(operation) << 1 | (timing == .after ? 1 : 0)), tearing: operation % 2 == 0 ? .sector(512) : .byte)]
    }

    /// Runs the CI sample (every `ciStride`-th operation from a seeded offset, both timings,
    /// two policies) or, with `STRATA_LONG_CRASH=1`, every operation with both timings and
    /// twelve policies (none, all, prefix, torn prefix, eight random), and records violations.
    static func enumerate(_ enumerator: Enumerator, ciStride: Int, seed workloadSeed: UInt64) -> Enumerator.Report {
        let count = enumerator.cleanRun().operations.count
        let report: Enumerator.Report
        if long {
            report = enumerator.enumerate(
                operations: Array(1...count), policies: Enumerator.standardPolicies(random: 8, seed: workloadSeed))
        } else {
            report = enumerator.enumerate(
                operations: Enumerator.sample(count, every: ciStride, seed: workloadSeed ^ seed), policies: ciPolicies)
        }
        print("crash enumeration \(long ? "long" : "CI"): \(report)")
        for violation in report.violations { Issue.record("\(enumerator.name): \(violation)") }
        return report
    }

    @Test func commitsWithRolloversAndFlushes() {
        let report = Self.enumerate(CrashWorkloads.commits(), ciStride: 4, seed: 1)
        #expect(report.points > 0)
    }

    // [WAL-6] The same commits with zeros written ahead of the records: every write of zeros,
    // its cut at a rollover and its sync are crash points too.
    @Test func commitsWithTheWALWrittenAhead() {
        let report = Self.enumerate(CrashWorkloads.commits(preparingAhead: 256), ciStride: 4, seed: 7)
        #expect(report.points > 0)
    }

    @Test func compaction() {
        let report = Self.enumerate(CrashWorkloads.compaction(), ciStride: 4, seed: 2)
        #expect(report.points > 0)
    }

    @Test(arguments: CrashWorkloads.RepairDamage.allCases)
    func repair(_ damage: CrashWorkloads.RepairDamage) throws {
        let report = Self.enumerate(try CrashWorkloads.repair(damage), ciStride: 3, seed: 3)
        #expect(report.points > 0)
    }

    @Test func normalDurabilityWithExplicitSyncs() {
        let report = Self.enumerate(CrashWorkloads.normalDurability(), ciStride: 4, seed: 4)
        #expect(report.points > 0)
    }

    // The workloads reach what they are meant to: rollovers, flushes, compactions, a repair.
    @Test func theWorkloadsMakeTheOperationsTheyAreMeantTo() throws {
        let commits = CrashWorkloads.commits().cleanRun()
        #expect(commits.progress.acknowledged == CrashWorkloads.commitBatches.count)
        #expect(commits.operations.filter { $0.operation == .rename }.count >= 10, "rollovers and flushes install manifests")
        #expect(commits.operations.contains { $0.operation == .open && $0.path.hasSuffix(".seg") }, "flushes write segments")
        let compaction = CrashWorkloads.compaction().cleanRun()
        #expect(compaction.progress.acknowledged == CrashWorkloads.compactionBatches.count)
        #expect(compaction.progress.compactions > 0)
        for damage in CrashWorkloads.RepairDamage.allCases {
            let repair = try CrashWorkloads.repair(damage).cleanRun()
            #expect(repair.progress.opened, "\(damage)")
            #expect(repair.progress.acknowledged == CrashWorkloads.repairBatches.count, "\(damage)")
        }
    }
}

/// The scripted engine workloads of ``CrashEnumerationTests`` and their checks.
enum CrashWorkloads {
    /// What a workload run acknowledged before it stopped.
    struct Progress {
        /// Commits acknowledged (commit returned).
        var acknowledged = 0
        /// Whether a commit was started and not acknowledged (it may or may not survive).
        var inFlight = false
        /// Commits made durable by an acknowledged `Engine.sync()` (normal durability).
        var synced = 0
        /// Whether the (repair) open returned.
        var opened = false
        /// Compaction runs completed.
        var compactions = 0
    }

    static let directory = "/store"

    /// The model after each prefix of `batches`: `states[k]` is the state after `k` commits.
    static func states(_ batches: [ModelBatch], from start: [[UInt8]: [UInt8]] = [:]) -> [[[UInt8]: [UInt8]]] {
        var model = start
        var states = [model]
        for batch in batches {
            batch.apply(to: &model)
            states.append(model)
        }
        return states
    }

    /// The engine's content, or the error that stopped reading it.
    static func open(_ fs: FaultInjectingFileSystem, _ options: EngineOptions) -> Result<[[UInt8]: [UInt8]], StoreError> {
        do throws(StoreError) {
            let engine = try Engine.open(at: directory, options: options)
            defer { try? engine.close() }
            var result: [[UInt8]: [UInt8]] = [:]
            for (key, value) in try engine.snapshot().scan() { result[key] = value }
            return .success(result)
        } catch {
            return .failure(error)
        }
    }

    /// The problems of a recovered state that must be `states[k]` for some `k` in `allowed`.
    static func problems(
        _ outcome: Result<[[UInt8]: [UInt8]], StoreError>, states: [[[UInt8]: [UInt8]]], allowed: ClosedRange<Int>
    ) -> [String] {
        switch outcome {
        case .failure(let error):
            return ["the open after the crash failed: \(error)"]
        case .success(let state):
            if allowed.contains(where: { states[$0] == state }) { return [] }
            let lost = states[allowed.lowerBound].filter { state[$0.key] != $0.value }.count
            let closest = states.indices.filter { states[$0] == state }
            return [
                "the recovered state matches no commit prefix in \(allowed) (prefixes it does match: \(closest)); \(lost) keys differ from the last acknowledged state"
            ]
        }
    }

    /// The commits allowed after a crash: every acknowledged one, and the one in flight.
    static func allowed(_ progress: Progress, count: Int) -> ClosedRange<Int> {
        progress.acknowledged...min(progress.acknowledged + (progress.inFlight ? 1 : 0), count)
    }

    // MARK: (a) Commits with rollovers and flushes

    static let commitBatches: [ModelBatch] = {
        var random = SeededRandom(seed: 0xC0_4417)
        return (0..<48).map { _ in ModelBatch.random(keys: 30, maxOperations: 4, maxValue: 60, using: &random) }
    }()

    /// 48 commits with a 700-byte WAL rollover (rollovers and inline flushes every few
    /// commits) and an explicit flush every 12 commits.
    static func commits(preparingAhead ahead: UInt64 = 0) -> CrashPointEnumerator<Progress> {
        let states = states(commitBatches)
        let options = { (fs: FaultInjectingFileSystem) in
            var options = testOptions(fs, rollover: 700)
            options.walPreallocationBytes = ahead
            return options
        }
        return CrashPointEnumerator(
            name: "commits, rollovers and flushes",
            makeFileSystem: { FaultInjectingFileSystem() },
            run: { fs in
                var progress = Progress()
                do throws(StoreError) {
                    let engine = try Engine.open(at: directory, options: options(fs))
                    for (index, batch) in commitBatches.enumerated() {
                        progress.inFlight = true
                        try engine.commit(batch.writeBatch)
                        progress.acknowledged += 1
                        progress.inFlight = false
                        if (index + 1) % 12 == 0 { try engine.flush() }
                    }
                    try engine.close()
                } catch {}
                return progress
            },
            check: { fs, progress in
                problems(open(fs, options(fs)), states: states, allowed: allowed(progress, count: commitBatches.count))
            })
    }

    // MARK: (b) Compaction

    static let compactionBatches: [ModelBatch] = {
        var random = SeededRandom(seed: 0xC0_3AC7)
        return (0..<36).map { _ in ModelBatch.random(keys: 12, maxOperations: 5, maxValue: 40, using: &random) }
    }()

    /// 36 commits over 12 keys (many overwrites and deletes), a flush every 4 commits and a
    /// compaction every 8 (a full one and the default policy in turn).
    static func compaction() -> CrashPointEnumerator<Progress> {
        let states = states(compactionBatches)
        let options = { (fs: FaultInjectingFileSystem) in testOptions(fs, rollover: 1 << 20) }
        return CrashPointEnumerator(
            name: "compaction",
            makeFileSystem: { FaultInjectingFileSystem() },
            run: { fs in
                var progress = Progress()
                do throws(StoreError) {
                    let engine = try Engine.open(at: directory, options: options(fs))
                    for (index, batch) in compactionBatches.enumerated() {
                        progress.inFlight = true
                        try engine.commit(batch.writeBatch)
                        progress.acknowledged += 1
                        progress.inFlight = false
                        if (index + 1) % 4 == 0 { try engine.flush() }
                        if (index + 1) % 8 == 0 {
                            try engine.compact((index + 1) % 16 == 0 ? CompactionOptions() : .full)
                            progress.compactions += 1
                        }
                    }
                    try engine.close()
                } catch {}
                return progress
            },
            check: { fs, progress in
                problems(open(fs, options(fs)), states: states, allowed: allowed(progress, count: compactionBatches.count))
            })
    }

    // MARK: (c) Repair

    /// The damage the repair workload starts from.
    enum RepairDamage: String, CaseIterable, CustomTestStringConvertible, Sendable {
        /// A WAL record in the middle of the newest WAL fails its payload CRC: repair drops it.
        case walRecord
        /// The manifest fails its CRC: repair rebuilds it from the files present.
        case manifest
        /// A hint block of the segment fails its CRC: repair rebuilds the hints from the data.
        case segmentHints

        var testDescription: String { rawValue }
    }

    static let repairBatches: [ModelBatch] = {
        var random = SeededRandom(seed: 0xC0_4E9A)
        return (0..<6).map { _ in ModelBatch.random(keys: 40, maxOperations: 3, maxValue: 30, using: &random) }
    }()

    /// Opens a damaged store with repair (which rewrites it: a fresh WAL, a flush, a full
    /// compaction, a fresh manifest), then commits 6 batches. After a crash, a normal open
    /// must give the salvaged content plus the acknowledged commits; before the repair open
    /// returned it may instead fail with `corruption` (the damage is still there), and then a
    /// repair open must give the salvaged content.
    static func repair(_ damage: RepairDamage) throws -> CrashPointEnumerator<Progress> {
        let fixture = try DamageFixture.standard()
        let salvaged: [[UInt8]: [UInt8]]
        let damaged: FaultInjectingFileSystem = fixture.makeFileSystem()
        switch damage {
        case .walRecord:
            let record = fixture.walRecords[1]
            damaged.flipBits(in: fixture.walPath, at: record.upperBound - 2, mask: 0x01)
            salvaged = fixture.model(droppingWALRecord: 1)
        case .manifest:
            damaged.flipBits(in: Damage.manifestPath, at: 20, mask: 0x01)
            salvaged = fixture.model
        case .segmentHints:
            let block = try #require(fixture.segmentLayout.hintBlocks.first)
            damaged.flipBits(in: fixture.segmentPath, at: block.lowerBound + Format.blockHeaderSize + 1)
            salvaged = fixture.model
        }
        let files = fixture.files.keys.map { path in (path, damaged.contents(of: path) ?? []) }
        let states = states(repairBatches, from: salvaged)
        return CrashPointEnumerator(
            name: "repair of a damaged \(damage.rawValue)",
            makeFileSystem: {
                let fs = FaultInjectingFileSystem()
                for (path, bytes) in files { fs.setContents(bytes, of: path) }
                return fs
            },
            run: { fs in
                var progress = Progress()
                do throws(StoreError) {
                    let engine = try Engine.open(at: directory, options: Damage.options(fs, repair: true))
                    progress.opened = true
                    for batch in repairBatches {
                        progress.inFlight = true
                        try engine.commit(batch.writeBatch)
                        progress.acknowledged += 1
                        progress.inFlight = false
                    }
                    try engine.close()
                } catch {}
                return progress
            },
            check: { fs, progress in
                let outcome = open(fs, Damage.options(fs))
                if case .failure(let error) = outcome, !progress.opened {
                    guard error.code == .corruption else {
                        return ["before the repair finished, a normal open failed with \(error.code), not corruption: \(error)"]
                    }
                    // [REC-7] The damage is still there: repair again.
                    return problems(open(fs, Damage.options(fs, repair: true)), states: states, allowed: 0...0)
                        .map { "repair after the crash: \($0)" }
                }
                return problems(outcome, states: states, allowed: allowed(progress, count: repairBatches.count))
            })
    }

    // MARK: Normal durability

    /// 40 commits under `normal` durability (the timer never fires: a one-hour interval) with
    /// `Engine.sync()` after every 3rd; rollovers every few commits. After a crash the store
    /// must hold a whole prefix of the commits, at least those the last acknowledged sync
    /// covered ([WAL-4]: a crash may lose the unsynced window, never part of a commit).
    static func normalDurability() -> CrashPointEnumerator<Progress> {
        let batches = Array(commitBatches.prefix(40))
        let states = states(batches)
        let options = { (fs: FaultInjectingFileSystem) in
            var options = testOptions(fs, rollover: 900, durability: .normal)
            options.syncInterval = .seconds(3600)
            return options
        }
        return CrashPointEnumerator(
            name: "normal durability",
            makeFileSystem: { FaultInjectingFileSystem() },
            run: { fs in
                var progress = Progress()
                do throws(StoreError) {
                    let engine = try Engine.open(at: directory, options: options(fs))
                    for (index, batch) in batches.enumerated() {
                        progress.inFlight = true
                        try engine.commit(batch.writeBatch)
                        progress.acknowledged += 1
                        progress.inFlight = false
                        if (index + 1) % 3 == 0 {
                            try engine.sync()
                            progress.synced = progress.acknowledged
                        }
                    }
                    try engine.close()
                    progress.synced = progress.acknowledged
                } catch {}
                return progress
            },
            check: { fs, progress in
                let attempted = min(progress.acknowledged + (progress.inFlight ? 1 : 0), batches.count)
                return problems(open(fs, options(fs)), states: states, allowed: progress.synced...attempted)
            })
    }
}

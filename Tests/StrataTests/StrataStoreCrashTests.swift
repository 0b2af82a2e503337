#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Foundation
import StrataChildProcess
import Testing

/// Process-crash tests: `strata-crash-worker run` saves in a loop on a StrataStore with full
/// durability, printing `ack k` after save k returns; this test kills it with SIGKILL at a
/// seeded moment (0–8 ms after it prints `opening`, `ready` or its 1st…3rd ack), then
/// reopens the store through `strata-crash-worker verify` (one JSON line describing the
/// store) and checks that every acknowledged save is there, at most the one in flight beyond
/// it, and no save is half applied. The next cycle continues on the same store.
/// Tools/crash-worker/README.md describes the worker, its model and the long-running `soak`
/// mode.
///
/// The worker binary is a product of this package, built next to the test bundle.
@Suite struct StrataStoreCrashTests {
    /// Cycles in ``everyAcknowledgedSaveSurvivesASigkillAndNoSaveIsHalfApplied()``.
    static let cycles = 200
    /// The most acknowledgements a cycle waits for before the kill.
    static let maxAcks = 3
    /// How long one line from a worker may take before the test gives up on it.
    static let lineTimeout = Duration.seconds(60)

    // Save k inserts team t<k> with members t<k>-m0…m2, sets the counter to k and deletes the
    // team of save k-5 with its members (cascade). The kill moment depends on timing; what is
    // checked holds whatever the moment.
    @Test(.timeLimit(.minutes(4)))
    func everyAcknowledgedSaveSurvivesASigkillAndNoSaveIsHalfApplied() throws {
        let worker = try Self.workerExecutable()
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = directory.appendingPathComponent("store").path

        var random = Random(seed: 0x5EED_C4A5_0001)
        var highest: Int64 = 0  // the highest save the store holds, as last verified
        var acknowledgedTotal: Int64 = 0
        for cycle in 1...Self.cycles {
            let point = KillPoint.random(using: &random, maxAcks: Self.maxAcks)
            let jitter = Duration.microseconds(Int64(random.next() % 8_001))
            // Read-only once a save is stored: before that the store may not exist yet.
            let readOnly = random.next() % 3 == 0 && highest > 0
            let outcome = try Self.crashAndVerify(
                worker: worker, store: store, seed: random.next(), killPoint: point, jitter: jitter,
                readOnly: readOnly, resumingAt: highest)
            switch outcome {
            case .success(let (acknowledged, stored)):
                acknowledgedTotal += acknowledged - highest
                highest = stored
            case .failure(let failure):
                let verify = readOnly ? "verify read-only" : "verify"
                Issue.record("cycle \(cycle) (kill \(point) + \(jitter), \(verify), store at save \(highest)): \(failure)")
                return
            }
        }
        #expect(
            acknowledgedTotal >= Int64(Self.cycles / 2),
            "too few saves acknowledged to test much: \(acknowledgedTotal) in \(Self.cycles) cycles")
    }

    // Issue 16: the same on a binary store, whose save writes a new file and renames it over
    // the old one: after a SIGKILL at any moment the file is a whole graph, every
    // acknowledged save is in it, at most the one in flight beyond, and no save is half there.
    @Test(.timeLimit(.minutes(4)))
    func everyAcknowledgedSaveOfABinaryStoreSurvivesASigkill() throws {
        let worker = try Self.workerExecutable()
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = directory.appendingPathComponent("binary").path
        var random = Random(seed: 0x5EED_B1A5_0016)
        var highest: Int64 = 0
        var acknowledgedTotal: Int64 = 0
        for cycle in 1...Self.cycles {
            let point = KillPoint.random(using: &random, maxAcks: Self.maxAcks)
            let jitter = Duration.microseconds(Int64(random.next() % 8_001))
            let readOnly = random.next() % 3 == 0 && highest > 0
            switch try Self.crashAndVerify(
                worker: worker, store: store, seed: random.next(), killPoint: point, jitter: jitter,
                readOnly: readOnly, resumingAt: highest, kind: "binary")
            {
            case .success(let (acknowledged, stored)):
                acknowledgedTotal += acknowledged - highest
                highest = stored
            case .failure(let failure):
                Issue.record("cycle \(cycle) (kill \(point) + \(jitter), store at save \(highest)): \(failure)")
                return
            }
        }
        #expect(acknowledgedTotal >= Int64(Self.cycles / 2), "too few saves acknowledged: \(acknowledgedTotal) in \(Self.cycles) cycles")
        let entries = try FileManager.default.contentsOfDirectory(atPath: store)
        #expect(entries.contains("store.strata-binary"))
        #expect(entries.allSatisfy { $0 == "store.strata-binary" || $0.hasPrefix("store.strata-binary.saving-") }, "only the store and temporary files of killed saves: \(entries)")
    }

    // A kill while the first open creates the store (or during its first saves) leaves a
    // directory that opens as a store holding whole acknowledged saves only ([DIR-4]).
    @Test(.timeLimit(.minutes(1)))
    func aStoreKilledWhileBeingCreatedOpensWithWholeSavesOnly() throws {
        let worker = try Self.workerExecutable()
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var random = Random(seed: 0x5EED_C4A5_0002)
        for attempt in 1...20 {
            let jitter = Duration.microseconds(Int64(random.next() % 25_001))
            let store = directory.appendingPathComponent("store-\(attempt)").path
            let outcome = try Self.crashAndVerify(
                worker: worker, store: store, seed: random.next(), killPoint: .opening, jitter: jitter,
                readOnly: false, resumingAt: 0)
            if case .failure(let failure) = outcome {
                Issue.record("attempt \(attempt) (kill \(jitter) after opening a new store): \(failure)")
                return
            }
        }
    }

    // The check the crash test relies on must catch what a half-applied or lost save looks
    // like; this feeds it doctored summaries of a store at save 7.
    @Test func theCheckRejectsLostExtraAndHalfAppliedSaves() {
        let good = Self.summary(atSave: 7)
        #expect(Self.problems(in: good, acknowledged: 7) == [])
        #expect(Self.problems(in: good, acknowledged: 6) == [], "save 7 was in flight")
        #expect(Self.problems(in: good, acknowledged: 8) != [], "acknowledged save 8 is lost")
        #expect(Self.problems(in: good, acknowledged: 5) != [], "save 7 was not even started")
        #expect(Self.problems(in: Self.summary(atSave: 0), acknowledged: 0) == [])

        var missingMember = good
        missingMember.members.removeLast()
        missingMember.countedMembers -= 1
        var oneSidedMember = good
        oneSidedMember.teams[4].members.removeLast()
        var orphan = good
        orphan.members[0].team = nil
        var undeleted = Self.summary(atSave: 7)
        undeleted.teams.insert(Summary.Team(name: "t2", save: 2, payloadBytes: 0, payloadIntact: true, members: ["t2-m0", "t2-m1", "t2-m2"]), at: 0)
        undeleted.countedTeams += 1
        var staleCounter = Self.summary(atSave: 7)
        staleCounter.counter = 6
        var staleRowCount = good
        staleRowCount.countedTeams -= 1
        var tornPayload = good
        tornPayload.teams[0].payloadIntact = false
        for doctored in [missingMember, oneSidedMember, orphan, undeleted, staleCounter, staleRowCount, tornPayload] {
            #expect(Self.problems(in: doctored, acknowledged: 7) != [])
        }
    }

    // MARK: The check

    /// What `strata-crash-worker verify` prints (Tools/crash-worker/CrashModel.swift,
    /// `CrashSummary`).
    struct Summary: Decodable {
        struct Team: Decodable {
            var name: String
            var save: Int64
            var payloadBytes: Int
            var payloadIntact: Bool
            var members: [String]
        }
        struct Member: Decodable, Equatable {
            var name: String
            var team: String?
        }
        var counter: Int64?
        var counterObjects: Int
        var teams: [Team]
        var members: [Member]
        var countedCounters: Int
        var countedTeams: Int
        var countedMembers: Int
        var violations: [String]
    }

    /// What is wrong with a store summarised by `summary` after save `acknowledged` was the
    /// last acknowledged one (independent of the worker's own check).
    static func problems(in summary: Summary, acknowledged: Int64) -> [String] {
        var problems: [String] = []
        let counter = summary.counter ?? 0
        if counter != acknowledged && counter != acknowledged + 1 {
            problems.append("the counter is \(counter); expected \(acknowledged), or \(acknowledged + 1) for the save in flight")
        }
        if summary.counterObjects != (counter > 0 ? 1 : 0) {
            problems.append("\(summary.counterObjects) counter objects")
        }
        // The teams of saves counter-4 … counter, each with exactly its three members, both
        // ends of every relationship agreeing.
        let saves = counter >= 1 ? Array(max(1, counter - 4)...counter) : []
        if summary.teams.map(\.save) != saves {
            problems.append("teams of saves \(summary.teams.map(\.save)); expected \(saves)")
        }
        var expectedMembers: [Summary.Member] = []
        for team in summary.teams {
            let names = (0..<3).map { "t\(team.save)-m\($0)" }
            if team.name != "t\(team.save)" || team.members != names || !team.payloadIntact {
                problems.append("team \(team.name) of save \(team.save): members \(team.members), payload intact \(team.payloadIntact)")
            }
            expectedMembers += names.map { Summary.Member(name: $0, team: "t\(team.save)") }
        }
        if summary.members != expectedMembers.sorted(by: { $0.name < $1.name }) {
            problems.append("members \(summary.members.map { "\($0.name)→\($0.team ?? "nil")" })")
        }
        // The stored per-entity row counts are part of the same transaction.
        if summary.countedCounters != summary.counterObjects || summary.countedTeams != summary.teams.count
            || summary.countedMembers != summary.members.count {
            problems.append("row counts \(summary.countedCounters)/\(summary.countedTeams)/\(summary.countedMembers) differ from the rows fetched")
        }
        return problems
    }

    /// A correct summary of a store at save `k`.
    static func summary(atSave k: Int64) -> Summary {
        let saves = k >= 1 ? Array(max(1, k - 4)...k) : []
        let teams = saves.map { save in
            Summary.Team(name: "t\(save)", save: save, payloadBytes: 1, payloadIntact: true, members: (0..<3).map { "t\(save)-m\($0)" })
        }
        let members = teams.flatMap { team in team.members.map { Summary.Member(name: $0, team: team.name) } }
            .sorted { $0.name < $1.name }
        return Summary(
            counter: k > 0 ? k : nil, counterObjects: k > 0 ? 1 : 0, teams: teams, members: members,
            countedCounters: k > 0 ? 1 : 0, countedTeams: teams.count, countedMembers: members.count, violations: [])
    }

    /// One cycle: starts `strata-crash-worker run` on `store`, kills it `jitter` after
    /// `killPoint`, reopens the store with `verify` and checks it. Returns the highest save
    /// acknowledged and the highest stored, or what went wrong.
    static func crashAndVerify(
        worker: String, store: String, seed: UInt64, killPoint: KillPoint, jitter: Duration, readOnly: Bool,
        resumingAt highest: Int64, kind: String = "strata"
    ) throws -> Result<(acknowledged: Int64, stored: Int64), CrashTestFailure> {
        let stderrPath = store + ".stderr"
        defer { try? FileManager.default.removeItem(atPath: stderrPath) }
        let run = try ChildProcess(
            executable: worker, arguments: ["run", store, "--seed", String(seed), "--store", kind], standardErrorPath: stderrPath)
        var lines: [String] = []
        while lines.count < killPoint.linesBeforeKill {
            guard let line = try run.readLine(timeout: lineTimeout) else { break }
            lines.append(line)
        }
        // A line arrives just after a save returns; the seeded jitter (about one save here,
        // collecting any lines meanwhile) spreads the kill over the next save, commit
        // included. It only chooses the moment: nothing waits on it.
        lines += try run.readLines(for: jitter)
        run.killNow()
        let exit = run.waitForExit()
        // Acknowledgements still in the pipe count: the worker made them before it died.
        lines += try run.readRemainingLines(timeout: lineTimeout)
        guard exit == .signaled(SIGKILL) else {
            return .failure(CrashTestFailure("the worker ended by itself (\(exit)) after \(lines); stderr: \(contents(of: stderrPath))"))
        }
        let acknowledged: Int64
        switch acknowledgedSave(in: lines, resumingAt: highest) {
        case .success(let save): acknowledged = save
        case .failure(let problem):
            return .failure(CrashTestFailure("\(problem.description); stderr: \(contents(of: stderrPath))"))
        }

        let verify = try ChildProcess(
            executable: worker,
            arguments: ["verify", store, "--acknowledged", String(acknowledged), "--store", kind] + (readOnly ? ["--read-only"] : []),
            standardErrorPath: stderrPath)
        let output = try verify.readRemainingLines(timeout: lineTimeout)
        let verifyExit = verify.waitForExit()
        guard let json = output.first, let summary = try? JSONDecoder().decode(Summary.self, from: Data(json.utf8)) else {
            return .failure(CrashTestFailure("verify (\(verifyExit)) printed \(output); stderr: \(contents(of: stderrPath))"))
        }
        let problems = Self.problems(in: summary, acknowledged: acknowledged)
        guard problems.isEmpty, summary.violations.isEmpty, verifyExit == .exited(0) else {
            return .failure(CrashTestFailure("""
                after acknowledgement of save \(acknowledged) the store is wrong:
                  \((problems + summary.violations.map { "worker's check: \($0)" }).joined(separator: "\n  "))
                  verify: \(verifyExit); \(json)
                """))
        }
        return .success((acknowledged, summary.counter ?? 0))
    }

    /// The highest save the worker's `lines` acknowledge (`resumingAt` if none), after checking
    /// they are `opening`, `ready <resumingAt>`, then `ack` for each following save in order.
    static func acknowledgedSave(in lines: [String], resumingAt: Int64) -> Result<Int64, CrashTestFailure> {
        guard lines.first == "opening" else {
            return lines.isEmpty ? .success(resumingAt) : .failure(CrashTestFailure("the worker printed \(lines)"))
        }
        var highest = resumingAt
        for line in lines.dropFirst() {
            let words = line.split(separator: " ")
            guard words.count == 2, let value = Int64(words[1]) else { return .failure(CrashTestFailure("the worker printed \(line)")) }
            switch words[0] {
            case "ready" where value == resumingAt: continue
            case "ready": return .failure(CrashTestFailure("the worker resumed after save \(value), but the store was verified at save \(resumingAt)"))
            case "ack" where value == highest + 1: highest = value
            default: return .failure(CrashTestFailure("the worker printed \(line) after save \(highest)"))
            }
        }
        return .success(highest)
    }

    // MARK: Helpers

    /// `strata-crash-worker`, built by this package next to the test bundle (or the path in
    /// `STRATA_CRASH_WORKER`).
    static func workerExecutable() throws -> String {
        try siblingExecutable("strata-crash-worker", override: "STRATA_CRASH_WORKER")
    }

    /// A new, empty temporary directory.
    static func temporaryDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("strata-crash-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    /// The text of the file at `path`, or a note that it is unreadable.
    static func contents(of path: String) -> String {
        (try? String(contentsOfFile: path, encoding: .utf8)) ?? "(unreadable)"
    }

    /// A failure of the crash test's machinery.
    struct CrashTestFailure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// When a cycle kills its worker.
    enum KillPoint: Equatable, CustomStringConvertible {
        /// After `opening` (plus the jitter): during the open and its crash recovery, or later.
        case opening
        /// After `ready <k>` (plus the jitter): in the first save or later.
        case ready
        /// After the n-th `ack` (plus the jitter): in save n + 1 or later.
        case acknowledgements(Int)

        /// A seeded choice: 10 % opening, 15 % ready, otherwise 1…`maxAcks` acknowledgements.
        static func random(using random: inout Random, maxAcks: Int) -> KillPoint {
            switch random.next() % 20 {
            case 0, 1: .opening
            case 2, 3, 4: .ready
            default: .acknowledgements(Int.random(in: 1...maxAcks, using: &random))
            }
        }

        /// How many lines the worker prints before the kill.
        var linesBeforeKill: Int {
            switch self {
            case .opening: 1
            case .ready: 2
            case .acknowledgements(let n): 2 + n
            }
        }

        var description: String {
            switch self {
            case .opening: "while opening"
            case .ready: "after ready"
            case .acknowledgements(let n): "after \(n) acks"
            }
        }
    }

    /// SplitMix64: a seeded, deterministic generator.
    struct Random: RandomNumberGenerator {
        private var state: UInt64
        init(seed: UInt64) { state = seed }
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

}

import Foundation
import Glibc
import ObjectGraph
@testable import Strata
import StrataEngine
import StrataSync
import Testing

/// A StrataStore on a ``FaultInjectingFileSystem``, with inline flushes, no background
/// compaction and a small WAL, so every run of a workload makes the same I/O operations.
final class FaultStrataStore: StrataStore, @unchecked Sendable {
    static let type = PersistentStore.StoreType("FaultStrata")
    /// The file system of each store path, set by the test before it adds the store.
    /// Protected by its lock; read by `engineOptions` when a store loads.
    static let fileSystems = Locked<[String: FaultInjectingFileSystem]>([:])

    override func engineOptions(_ options: EngineOptions) -> EngineOptions {
        var options = options
        guard let path = url?.path, let fs = Self.fileSystems.withLock({ $0[path] }) else { return options }
        options.fileSystem = fs
        options.backgroundFlush = false
        options.compaction.automatic = false
        options.walRolloverBytes = 3000
        options.blockSize = 512
        options.checkInvariants = true
        return options
    }

    /// Adds the store at `path` on `fs` with `model` and `options` to a new coordinator, runs
    /// `body`, removes the store.
    static func withStore<R>(
        _ fs: FaultInjectingFileSystem, path: String, model: ManagedObjectModel, options: [String: AttributeValue] = [:],
        _ body: (PersistentStoreCoordinator) throws -> R
    ) throws -> R {
        fileSystems.withLock { $0[path] = fs }
        defer { fileSystems.withLock { $0[path] = nil } }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        defer { for store in coordinator.persistentStores { try? coordinator.remove(store) } }
        try coordinator.addPersistentStore(type: type, at: URL(fileURLWithPath: path), options: options)
        return try body(coordinator)
    }
}

/// What a run of a migration crash test ([MIG-4], [MIG-5]) acknowledged before it stopped:
/// the first saves, the migration, a save after it, and the background build; and whether a
/// save or the migration was in flight.
struct MigrationCrashProgress {
    var populated = false
    var saved = false
    var migrated = false
    var changed = false
    var built = false
    var inFlight = false
    var staleEngine = false
}

extension MigrationCrashProgress {
    /// Reads a crashed store at `path`: `open` opens it (running its body on the coordinator
    /// and removing it after), `observe` reads it, and fsck must find nothing wrong.
    ///
    /// - Throws: when the store removed before still holds its engine, when fsck finds a
    ///   problem, or what opening or reading throws.
    static func readChecked(
        path: String, open: ((PersistentStoreCoordinator) throws -> [String]) throws -> [String],
        observe: @escaping (PersistentStoreCoordinator) throws -> [String]
    ) throws -> [String] {
        guard !SharedEngine.isOpen(path: path) else {
            throw ObjectGraphError(.invalidArgument, "a removed store still holds its engine at \(path)")
        }
        return try open { coordinator in
            let observed = try observe(coordinator)
            let report = try ObjectChecker.check(engine: try LightweightMigrationTests.engine(coordinator), repair: false)
            guard report.problems.isEmpty else { throw ObjectGraphError(.storeCorrupted, "fsck: \(report.problems.prefix(4))") }
            return observed
        }
    }

    /// What each migration crash test checks: the clean run gets to the end, a run on a file
    /// system of its own leaves a store that reads `final`, and a crash at each of the run's
    /// I/O operations leaves one that `enumerator`'s check accepts.
    static func expectEveryCrashRecovers(
        _ enumerator: CrashPointEnumerator<Self>, run: (FaultInjectingFileSystem) -> Self,
        read: (FaultInjectingFileSystem) throws -> [String], final: [String], sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let clean = enumerator.cleanRun()
        #expect(clean.progress.built, "the clean run gets to the end", sourceLocation: sourceLocation)
        let finished = FaultInjectingFileSystem()
        #expect(run(finished).built, sourceLocation: sourceLocation)
        #expect(try read(finished) == final, "the clean run's store", sourceLocation: sourceLocation)
        #expect(enumerator.crashAtEveryOperation(clean.operations.count).points > 0, sourceLocation: sourceLocation)
    }

    /// The enumerator of a migration crash test named `name`: `run` on a new fault-injecting
    /// file system; after each crash, `read` of the store must give one of what `allowed` says
    /// the run's progress permits.
    static func enumerator(
        _ name: String, run: @escaping (FaultInjectingFileSystem) -> Self, read: @escaping (FaultInjectingFileSystem) throws -> [String],
        allowed: @escaping (Self) -> [[String]]
    ) -> CrashPointEnumerator<Self> {
        StrataStore.register()
        PersistentStoreCoordinator.registerStoreClass(FaultStrataStore.self, type: FaultStrataStore.type)
        return CrashPointEnumerator(
            name: name, makeFileSystem: { FaultInjectingFileSystem() }, run: run,
            check: { fs, progress in
                if progress.staleEngine { return ["a removed store still held its engine when the run began"] }
                let observed: [String]
                do {
                    observed = try read(fs)
                } catch {
                    return ["the store does not open or read after the crash: \(error)"]
                }
                let expected = allowed(progress)
                return expected.contains(observed) ? [] : ["observed \(observed), expected one of \(expected)"]
            })
    }
}

extension CrashPointEnumerator {
    /// Crashes a run at each of its `count` I/O operations, before and after, with no damage
    /// and with a random crash tearing writes (sectors or bytes by turns); records every
    /// violation as an issue and returns the report.
    @discardableResult
    func crashAtEveryOperation(_ count: Int) -> Report {
        let report = enumerate(operations: Array(1...count)) { operation, timing in
            [.none, .random(seed: UInt64(operation) << 1 | (timing == .after ? 1 : 0), tearing: operation % 2 == 0 ? .sector(512) : .byte)]
        }
        print("\(name) crash enumeration: \(report)")
        for violation in report.violations { Issue.record("\(violation)") }
        return report
    }
}

/// Crash-point enumeration of StrataStore saves (reliability issue 13): a scripted series of
/// saves through ObjectGraph contexts (inserts of teams with members and captains, score
/// updates, members moved between teams, deletes of members and of teams with their members
/// by cascade), crashed at every I/O operation with several crash policies. After each crash
/// a new coordinator opens the store and a fetch of every object must match the model after
/// the acknowledged saves (or the one in flight): attributes, both ends of every relationship
/// and the stored row counts ([SAVE-1]: a save is all or nothing).
///
/// CI runs a seeded sample (every 5th operation, two policies); `STRATA_LONG_CRASH=1` runs
/// every operation with twelve policies (Tools/crash-enumeration.md).
@Suite struct StrataStoreCrashEnumerationTests {
    typealias Enumerator = CrashPointEnumerator<Progress>

    static var long: Bool { getenv("STRATA_LONG_CRASH").map { String(cString: $0) == "1" } ?? false }
    /// `STRATA_CRASH_SEED` moves the CI sample; the default keeps CI repeatable.
    static var seed: UInt64 { getenv("STRATA_CRASH_SEED").flatMap { UInt64(String(cString: $0)) } ?? 0 }

    @Test func everyOperationOfASeriesOfSaves() throws {
        let enumerator = try Self.enumerator()
        let clean = enumerator.cleanRun()
        #expect(clean.progress.acknowledged == Self.script.count, "the clean run saves everything")
        #expect(clean.operations.contains { $0.path.hasSuffix(".seg") }, "rollovers flush segments")
        // The check reads back what a finished run saved (and the script ends with objects left).
        let finished = FaultInjectingFileSystem()
        let progress = Self.run(on: finished, model: try StoreTestModel.make())
        finished.crash()
        #expect(try Self.read(finished, model: try StoreTestModel.make()) == Self.states[progress.acknowledged])
        #expect(Self.states.last.map { !$0.members.isEmpty && $0.teams.count > 2 } == true)
        let count = clean.operations.count
        let report: Enumerator.Report
        if Self.long {
            report = enumerator.enumerate(operations: Array(1...count), policies: Enumerator.standardPolicies(random: 8, seed: 5))
        } else {
            let seed = Self.seed
            report = enumerator.enumerate(operations: Enumerator.sample(count, every: 5, seed: 5 ^ seed)) { operation, timing in
                [.none, .random(seed: seed ^ (UInt64(operation) << 1 | (timing == .after ? 1 : 0)), tearing: operation % 2 == 0 ? .sector(512) : .byte)]
            }
        }
        print("crash enumeration \(Self.long ? "long" : "CI"): \(report)")
        for violation in report.violations { Issue.record("\(violation)") }
        #expect(report.points > 0)
    }

    // The check must see what a lost or half-applied save looks like.
    @Test func theCheckRejectsALostSaveAndAHalfAppliedOne() {
        let states = Self.states
        let k = 10
        #expect(Self.problems(observed: states[k], progress: Progress(acknowledged: k)).isEmpty)
        #expect(Self.problems(observed: states[k], progress: Progress(acknowledged: k - 1, inFlight: true)).isEmpty)
        #expect(!Self.problems(observed: states[k - 1], progress: Progress(acknowledged: k)).isEmpty, "a lost save")
        var half = states[k]
        if let (name, member) = states[k + 1].members.first(where: { states[k].members[$0.key] != $0.value }) {
            half.members[name] = member
        } else {
            half.teams["phantom"] = []
        }
        #expect(!Self.problems(observed: half, progress: Progress(acknowledged: k, inFlight: true)).isEmpty, "half a save")
    }

    // MARK: The script and its model

    /// What a run acknowledged before it stopped.
    struct Progress {
        var acknowledged = 0
        var inFlight = false
        /// Set when a store removed earlier still held its engine (the run would not use `fs`).
        var staleEngine = false
    }

    /// The store as the model says it should be: teams by name with their members' names,
    /// and members by name.
    struct State: Equatable {
        struct Member: Equatable {
            var score: Int64
            var team: String?
            var captain: Bool
        }
        var teams: [String: Set<String>] = [:]
        var members: [String: Member] = [:]
    }

    /// One change of a save.
    enum Step {
        case insertTeam(String, members: [(name: String, captain: Bool, score: Int64)])
        case addMember(String, team: String, score: Int64)
        case updateScore(String, Int64)
        case move(String, to: String)
        case deleteMember(String)
        case deleteTeam(String)

        func apply(to state: inout State) {
            switch self {
            case .insertTeam(let team, let members):
                state.teams[team] = Set(members.map(\.name))
                for member in members { state.members[member.name] = .init(score: member.score, team: team, captain: member.captain) }
            case .addMember(let name, let team, let score):
                state.teams[team, default: []].insert(name)
                state.members[name] = .init(score: score, team: team, captain: false)
            case .updateScore(let name, let score):
                state.members[name]?.score = score
            case .move(let name, let team):
                if let old = state.members[name]?.team { state.teams[old]?.remove(name) }
                state.teams[team, default: []].insert(name)
                state.members[name]?.team = team
            case .deleteMember(let name):
                if let old = state.members[name]?.team { state.teams[old]?.remove(name) }
                state.members[name] = nil
            case .deleteTeam(let team):
                for name in state.teams[team] ?? [] { state.members[name] = nil }  // cascade
                state.teams[team] = nil
            }
        }
    }

    /// 36 saves of 1–3 steps each, generated against the model so every step is valid.
    static let script: [[Step]] = {
        var random = SplitMix(seed: 0x5A7E_C4A5)
        var state = State()
        var saves: [[Step]] = []
        var serial = 0
        func next() -> Int {
            serial += 1
            return serial
        }
        for _ in 0..<36 {
            var steps: [Step] = []
            for _ in 0...random.below(3) {
                let teams = state.teams.keys.sorted()
                let members = state.members.keys.sorted()
                let step: Step
                switch (random.below(10), teams.isEmpty, members.isEmpty) {
                case (_, true, _), (0...2, _, _):
                    let team = "t\(next())"
                    let members = (0..<(1 + random.below(3))).map { index in
                        (name: "\(team)-m\(next())", captain: index == 0 && random.below(2) == 0, score: Int64(random.below(100)))
                    }
                    step = .insertTeam(team, members: members)
                case (3, false, _):
                    step = .addMember("m\(next())", team: teams[random.below(teams.count)], score: Int64(random.below(100)))
                case (4...5, _, false):
                    step = .updateScore(members[random.below(members.count)], Int64(random.below(1000)))
                case (6, _, false):
                    step = .move(members[random.below(members.count)], to: teams[random.below(teams.count)])
                case (7, _, false):
                    step = .deleteMember(members[random.below(members.count)])
                case (8...9, false, _) where teams.count > 2:
                    step = .deleteTeam(teams[random.below(teams.count)])
                default:
                    guard let first = members.first else { continue }
                    step = .updateScore(first, 1)
                }
                step.apply(to: &state)
                steps.append(step)
            }
            if !steps.isEmpty { saves.append(steps) }
        }
        return saves
    }()

    /// `states[k]`: the model after `k` saves.
    static let states: [State] = {
        var state = State()
        var states = [state]
        for save in script {
            for step in save { step.apply(to: &state) }
            states.append(state)
        }
        return states
    }()

    /// A small deterministic generator (SplitMix64).
    struct SplitMix {
        var state: UInt64
        init(seed: UInt64) { state = seed }
        mutating func below(_ bound: Int) -> Int {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int((z ^ (z >> 31)) % UInt64(max(bound, 1)))
        }
    }

    // MARK: The workload and the check

    /// The store's path on every file system. Engines are shared per process and per path,
    /// so each run and each check removes its store (and so closes the engine) before the
    /// next one opens; they check that none is left open.
    static let path = "/strata-crash-store"

    static func enumerator() throws -> Enumerator {
        StrataStore.register()
        PersistentStoreCoordinator.registerStoreClass(FaultStrataStore.self, type: FaultStrataStore.type)
        let model = try StoreTestModel.make()
        return CrashPointEnumerator(
            name: "StrataStore saves",
            makeFileSystem: { FaultInjectingFileSystem() },
            run: { fs in run(on: fs, model: model) },
            check: { fs, progress in
                if progress.staleEngine { return ["a removed store still held its engine when the run began"] }
                let observed: State
                do {
                    observed = try read(fs, model: model)
                } catch {
                    return ["the store does not open or read after the crash: \(error)"]
                }
                return problems(observed: observed, progress: progress)
            })
    }

    /// Saves the script on a new store until a save fails; everything is released on return.
    static func run(on fs: FaultInjectingFileSystem, model: ManagedObjectModel) -> Progress {
        var progress = Progress()
        guard !SharedEngine.isOpen(path: path) else {
            progress.staleEngine = true
            return progress
        }
        FaultStrataStore.fileSystems.withLock { $0[path] = fs }
        defer { FaultStrataStore.fileSystems.withLock { $0[path] = nil } }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        defer { for store in coordinator.persistentStores { try? coordinator.remove(store) } }
        do {
            try coordinator.addPersistentStore(type: FaultStrataStore.type, at: URL(fileURLWithPath: path))
            var context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            var objects: [String: ManagedObject] = [:]
            for (index, save) in script.enumerated() {
                if index % 6 == 0 {
                    // A fresh context now and then: its objects come from fetches (faults).
                    context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
                    objects = [:]
                    for entity in ["Team", "Member"] {
                        for object in try context.fetch(FetchRequest(entityName: entity)) {
                            objects[try object.value(forKey: "name").stringValue ?? ""] = object
                        }
                    }
                }
                progress.inFlight = true
                for step in save { try perform(step, in: context, objects: &objects) }
                try context.save()
                progress.acknowledged += 1
                progress.inFlight = false
            }
        } catch {}
        return progress
    }

    static func perform(_ step: Step, in context: ManagedObjectContext, objects: inout [String: ManagedObject]) throws {
        func object(_ name: String) throws -> ManagedObject {
            guard let object = objects[name] else { throw ObjectGraphError(.invalidArgument, "no object \(name) in the script's context") }
            return object
        }
        switch step {
        case .insertTeam(let name, let members):
            let team = try context.insertNewObject(forEntityName: "Team")
            try team.setValue(.string(name), forKey: "name")
            objects[name] = team
            for member in members {
                let object = try context.insertNewObject(forEntityName: member.captain ? "Captain" : "Member")
                try object.setValue(.string(member.name), forKey: "name")
                try object.setValue(.int64(member.score), forKey: "score")
                try object.setValue(team, forKey: "team")
                objects[member.name] = object
            }
        case .addMember(let name, let team, let score):
            let member = try context.insertNewObject(forEntityName: "Member")
            try member.setValue(.string(name), forKey: "name")
            try member.setValue(.int64(score), forKey: "score")
            try object(team).addObject(member, toRelationship: "members")
            objects[name] = member
        case .updateScore(let name, let score):
            try object(name).setValue(.int64(score), forKey: "score")
        case .move(let name, let team):
            try object(name).setValue(try object(team), forKey: "team")
        case .deleteMember(let name):
            context.delete(try object(name))
            objects[name] = nil
        case .deleteTeam(let name):
            let team = try object(name)
            for member in try team.objects(forKey: "members") {
                objects[try member.value(forKey: "name").stringValue ?? ""] = nil
            }
            context.delete(team)
            objects[name] = nil
        }
    }

    /// Opens the crashed store with a new coordinator and reads every object back.
    static func read(_ fs: FaultInjectingFileSystem, model: ManagedObjectModel) throws -> State {
        guard !SharedEngine.isOpen(path: path) else {
            throw ObjectGraphError(.invalidArgument, "a removed store still holds its engine at \(path)")
        }
        FaultStrataStore.fileSystems.withLock { $0[path] = fs }
        defer { FaultStrataStore.fileSystems.withLock { $0[path] = nil } }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        defer { for store in coordinator.persistentStores { try? coordinator.remove(store) } }
        try coordinator.addPersistentStore(type: FaultStrataStore.type, at: URL(fileURLWithPath: path))
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var state = State()
        let teams = try context.fetch(FetchRequest(entityName: "Team"))
        for team in teams {
            let name = try team.value(forKey: "name").stringValue ?? "?"
            state.teams[name] = Set(try team.objects(forKey: "members").map { try $0.value(forKey: "name").stringValue ?? "?" })
        }
        let members = try context.fetch(FetchRequest(entityName: "Member"))
        for member in members {
            let name = try member.value(forKey: "name").stringValue ?? "?"
            guard case .int64(let score) = try member.value(forKey: "score") else {
                throw ObjectGraphError(.invalidArgument, "member \(name) has no integer score")
            }
            let team = try member.object(forKey: "team").map { try $0.value(forKey: "name").stringValue ?? "?" }
            state.members[name] = .init(score: score, team: team, captain: member.entity.name == "Captain")
        }
        // [SAVE-1] The stored row counts belong to the same transactions as the rows.
        let counted = (
            try context.count(for: FetchRequest(entityName: "Team")), try context.count(for: FetchRequest(entityName: "Member"))
        )
        if counted != (teams.count, members.count) {
            state.teams["row counts \(counted) differ from the rows fetched (\(teams.count), \(members.count))"] = []
        }
        return state
    }

    /// The differences between `observed` and the states `progress` allows.
    static func problems(observed: State, progress: Progress) -> [String] {
        let allowed = progress.acknowledged...min(progress.acknowledged + (progress.inFlight ? 1 : 0), script.count)
        if allowed.contains(where: { states[$0] == observed }) { return [] }
        let expected = states[progress.acknowledged]
        var problems = ["the store matches no state after \(allowed) saves (matches saves \(states.indices.filter { states[$0] == observed }))"]
        for name in Set(expected.teams.keys).union(observed.teams.keys).sorted() where expected.teams[name] != observed.teams[name] {
            problems.append("team \(name): \(observed.teams[name].map { "\($0.sorted())" } ?? "missing"), expected \(expected.teams[name].map { "\($0.sorted())" } ?? "none")")
        }
        for name in Set(expected.members.keys).union(observed.members.keys).sorted() where expected.members[name] != observed.members[name] {
            problems.append("member \(name): \(observed.members[name].map { "\($0)" } ?? "missing"), expected \(expected.members[name].map { "\($0)" } ?? "none")")
        }
        return Array(problems.prefix(8))
    }
}

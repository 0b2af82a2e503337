import Foundation
import Strata

/// The model the crash worker saves, and what one save does.
///
/// Save `k` is one transaction whose every effect can be checked after a crash:
///
/// - it inserts a `Team` named `t<k>` (attribute `save` = k, a `payload` of bytes all equal to
///   `k & 0xFF`, its length derived from the worker's seed and k) with exactly three `Member`s
///   named `t<k>-m0`, `t<k>-m1`, `t<k>-m2`;
/// - it sets the single `Counter` object's `value` to k (save 1 inserts the counter);
/// - for k > ``retainedTeams``, it deletes the team of save k − ``retainedTeams`` and, by the
///   cascade rule, its members.
///
/// So a store whose counter is c holds exactly the teams of saves max(1, c − 4) … c, each with
/// its three members, and nothing else: any half-applied save breaks one of these facts.
enum CrashModel {
    /// How many of the latest saves' teams stay in the store.
    static let retainedTeams: Int64 = 5
    /// Members per team.
    static let membersPerTeam = 3
    /// Largest payload a team carries, in bytes.
    static let maxPayloadBytes: UInt64 = 6_000

    /// Counter (value), Team (name, save, payload, members ↔ cascade), Member (name, team).
    static func make() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Counter", properties: [
                .attribute("value", .integer64, defaultValue: 0),
            ]),
            EntityDescription(name: "Team", properties: [
                .attribute("name", .string, optional: false),
                .attribute("save", .integer64, defaultValue: 0),
                .attribute("payload", .binaryData),
                .toMany("members", "Member", inverse: "team", deleteRule: .cascade),
            ]),
            EntityDescription(name: "Member", properties: [
                .attribute("name", .string, optional: false),
                .toOne("team", "Team", inverse: "members"),
            ]),
        ])
    }

    /// The name of the team save `k` inserts.
    static func teamName(_ k: Int64) -> String { "t\(k)" }

    /// The names of the members save `k` inserts, in order.
    static func memberNames(_ k: Int64) -> [String] { (0..<membersPerTeam).map { "t\(k)-m\($0)" } }

    /// The payload of the team of save `k` under `seed`: every byte is `k & 0xFF`.
    static func payload(save k: Int64, seed: UInt64) -> Data {
        var mixer = SplitMix64(seed: seed ^ UInt64(bitPattern: k) &* 0x9E37_79B9_7F4A_7C15)
        let length = Int(mixer.next() % (maxPayloadBytes + 1))
        return Data(repeating: UInt8(truncatingIfNeeded: k), count: length)
    }

    /// Opens the store at `directory` with `durability` (``StrataStore/durabilityOption``).
    /// `kind` `binary`: a binary store, the file `store.strata-binary` in `directory` (made if
    /// missing); otherwise a StrataStore at `directory`.
    static func openStore(
        at directory: URL, durability: String = "full", readOnly: Bool = false, kind: String = "strata"
    ) throws -> PersistentStoreCoordinator {
        if kind == "binary" {
            BinaryStore.register()
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let coordinator = PersistentStoreCoordinator(managedObjectModel: try make())
            let options: [String: AttributeValue] = readOnly ? [PersistentStore.readOnlyOption: true] : [:]
            try coordinator.addPersistentStore(type: .binary, at: directory.appendingPathComponent("store.strata-binary"), options: options)
            return coordinator
        }
        StrataStore.register()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try make())
        var options: [String: AttributeValue] = [StrataStore.durabilityOption: .string(durability)]
        if readOnly { options[PersistentStore.readOnlyOption] = true }
        try coordinator.addPersistentStore(type: .strata, at: directory, options: options)
        return coordinator
    }

    /// Closes every store of `coordinator`, releasing the engine and its lock.
    static func close(_ coordinator: PersistentStoreCoordinator) throws {
        for store in coordinator.persistentStores { try coordinator.remove(store) }
    }

    /// The counter's value: the highest save in the store (0 for a new store).
    static func counterValue(in context: ManagedObjectContext) throws -> Int64 {
        guard let counter = try context.fetch(FetchRequest(entityName: "Counter")).first else { return 0 }
        return try counter.value(forKey: "value").integerValue ?? 0
    }

    /// Performs save `k` (see the type's description) in a fresh context.
    ///
    /// - Throws: ``CrashWorkerError`` if the team save k − 5 inserted is missing (the store
    ///   lost an acknowledged save), or whatever the save throws.
    static func performSave(_ k: Int64, seed: UInt64, coordinator: PersistentStoreCoordinator) throws {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let counter = try context.fetch(FetchRequest(entityName: "Counter")).first
            ?? context.insertNewObject(forEntityName: "Counter")
        try counter.setValue(.int64(k), forKey: "value")
        let team = try context.insertNewObject(forEntityName: "Team")
        try team.setValue(.string(teamName(k)), forKey: "name")
        try team.setValue(.int64(k), forKey: "save")
        try team.setValue(.data(payload(save: k, seed: seed)), forKey: "payload")
        for name in memberNames(k) {
            let member = try context.insertNewObject(forEntityName: "Member")
            try member.setValue(.string(name), forKey: "name")
            try member.setValue(team, forKey: "team")
        }
        let expired = k - retainedTeams
        if expired >= 1 {
            var request = FetchRequest(entityName: "Team")
            request.predicate = .equal("name", .string(teamName(expired)))
            let old = try context.fetch(request)
            guard old.count == 1 else {
                throw CrashWorkerError("save \(k): expected one team \(teamName(expired)) to delete, found \(old.count)")
            }
            context.delete(old[0])
        }
        try context.save()
    }

    /// Reads everything the invariant talks about from the store of `coordinator`.
    static func summary(of coordinator: PersistentStoreCoordinator) throws -> CrashSummary {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let counters = try context.fetch(FetchRequest(entityName: "Counter"))
        var summary = CrashSummary()
        summary.counterObjects = counters.count
        summary.counter = try counters.first.map { try $0.value(forKey: "value").integerValue ?? -1 }
        for team in try context.fetch(FetchRequest(entityName: "Team")) {
            let payload = try team.value(forKey: "payload").dataValue ?? Data()
            let save = try team.value(forKey: "save").integerValue ?? -1
            summary.teams.append(CrashSummary.Team(
                name: try team.value(forKey: "name").stringValue ?? "?",
                save: save,
                payloadBytes: payload.count,
                payloadIntact: payload.allSatisfy { $0 == UInt8(truncatingIfNeeded: save) },
                members: try team.objects(forKey: "members").map { try $0.value(forKey: "name").stringValue ?? "?" }.sorted()))
        }
        summary.teams.sort { $0.save < $1.save }
        for member in try context.fetch(FetchRequest(entityName: "Member")) {
            summary.members.append(CrashSummary.Member(
                name: try member.value(forKey: "name").stringValue ?? "?",
                team: try member.object(forKey: "team")?.value(forKey: "name").stringValue))
        }
        summary.members.sort { $0.name < $1.name }
        summary.countedCounters = try context.count(for: FetchRequest(entityName: "Counter"))
        summary.countedTeams = try context.count(for: FetchRequest(entityName: "Team"))
        summary.countedMembers = try context.count(for: FetchRequest(entityName: "Member"))
        return summary
    }
}

/// What `verify` prints (one JSON line): the store's contents as far as the crash invariant
/// is concerned, and the invariant's violations.
struct CrashSummary: Codable, Equatable {
    /// A stored team.
    struct Team: Codable, Equatable {
        /// Its `name`.
        var name: String
        /// Its `save` attribute: the save that inserted it.
        var save: Int64
        /// Length of its payload.
        var payloadBytes: Int
        /// Whether every payload byte is `save & 0xFF`.
        var payloadIntact: Bool
        /// The names of the members its to-many relationship lists, sorted.
        var members: [String]
    }
    /// A stored member.
    struct Member: Codable, Equatable {
        /// Its `name`.
        var name: String
        /// The name of the team its to-one relationship points at, if any.
        var team: String?
    }

    /// The counter's value, or nil if there is no counter.
    var counter: Int64?
    /// How many Counter objects a fetch returns.
    var counterObjects = 0
    /// Every team, by save.
    var teams: [Team] = []
    /// Every member, by name.
    var members: [Member] = []
    /// `count(for:)` of Counter (answered from the stored row counters).
    var countedCounters = 0
    /// `count(for:)` of Team.
    var countedTeams = 0
    /// `count(for:)` of Member.
    var countedMembers = 0
    /// The invariant's violations (filled in by ``CrashInvariant``).
    var violations: [String] = []

    /// The highest save in the store: the counter's value, 0 without a counter.
    var highestSave: Int64 { counter ?? 0 }
}

/// The crash invariant: a store holds whole saves only, and at least every acknowledged one.
enum CrashInvariant {
    /// The violations of `summary`. With `acknowledged`, the highest save the store must hold
    /// (the highest `ack` ever printed), the counter must be that save or the one after it
    /// (the save in flight at the kill).
    static func violations(of summary: CrashSummary, acknowledged: Int64?) -> [String] {
        var problems: [String] = []
        let c = summary.highestSave
        if let acknowledged, !(acknowledged...(acknowledged + 1)).contains(c) {
            problems.append("counter is \(c) but save \(acknowledged) was the last acknowledged (expected \(acknowledged) or \(acknowledged + 1))")
        }
        if c < 0 { problems.append("counter is negative: \(c)") }
        let expectedCounters = c > 0 ? 1 : 0
        if summary.counterObjects != expectedCounters || (c == 0 && summary.counter != nil) {
            problems.append("\(summary.counterObjects) counter objects with value \(summary.counter.map(String.init) ?? "none")")
        }
        let first = max(1, c - CrashModel.retainedTeams + 1)
        let expectedSaves = c >= 1 ? Array(first...c) : []
        let saves = summary.teams.map(\.save)
        if saves != expectedSaves {
            problems.append("teams of saves \(saves), expected \(expectedSaves)")
        }
        for team in summary.teams {
            if team.name != CrashModel.teamName(team.save) { problems.append("team \(team.name) has save \(team.save)") }
            if team.members != CrashModel.memberNames(team.save) {
                problems.append("team \(team.name) lists members \(team.members)")
            }
            if !team.payloadIntact { problems.append("team \(team.name) has a damaged payload of \(team.payloadBytes) bytes") }
        }
        let expectedMembers = summary.teams.flatMap { team in
            CrashModel.memberNames(team.save).map { CrashSummary.Member(name: $0, team: team.name) }
        }.sorted { $0.name < $1.name }
        if summary.members != expectedMembers {
            let extra = summary.members.filter { !expectedMembers.contains($0) }
            let missing = expectedMembers.filter { !summary.members.contains($0) }
            let unexpected = extra.map { "\($0.name)→\($0.team ?? "nil")" }
            problems.append("members differ: unexpected \(unexpected), missing \(missing.map(\.name))")
        }
        if summary.countedCounters != summary.counterObjects || summary.countedTeams != summary.teams.count
            || summary.countedMembers != summary.members.count {
            let counted = [summary.countedCounters, summary.countedTeams, summary.countedMembers]
            let fetched = [summary.counterObjects, summary.teams.count, summary.members.count]
            problems.append("stored row counts \(counted) of Counter, Team, Member differ from the rows fetched, \(fetched)")
        }
        return problems
    }
}

/// An error the worker reports on standard error before exiting.
struct CrashWorkerError: Error, CustomStringConvertible {
    /// What went wrong.
    var description: String
    init(_ description: String) { self.description = description }
}

/// SplitMix64: a small, seedable, deterministic generator.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    /// A generator whose sequence is fixed by `seed`.
    init(seed: UInt64) { state = seed }
    /// The next 64 random bits.
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

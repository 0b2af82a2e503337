import Foundation
import ObjectGraph
import Strata
import Testing

// Support for DifferentialTests: the model, the operations, the generator and the runner
// that applies one operation sequence to an InMemoryStore stack and a StrataStore stack.

/// SplitMix64: a small, seeded, deterministic generator.
struct DiffRandom: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self) }
    mutating func chance(_ percent: Int) -> Bool { int(0...99) < percent }
    mutating func pick<T>(_ items: [T]) -> T { items[int(0...(items.count - 1))] }
}

/// The model both stores use.
///
/// - Department 1—* Person (`employees`, cascade; `department`, nullify)
/// - Department 1—* Project (`projects`, deny; `department`, nullify)
/// - Person 1—1 Badge (`badge`, cascade; `owner`, nullify)
/// - Person 1—* Note (`notes`, noAction; `author`, nullify)
/// - Person *—* Tag (`tags` / `people`, nullify both ways)
/// - Manager is a Person; Project.members is ordered and has no inverse.
/// Every entity has a unique, indexed integer `uid`; Person.name is an indexed string.
enum DiffModel {
    static func make() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Department", properties: [
                .attribute("uid", .integer64, optional: false, indexed: true),
                .attribute("name", .string, optional: false),
                .attribute("budget", .double, indexed: true),
                .toMany("employees", "Person", inverse: "department", deleteRule: .cascade),
                .toMany("projects", "Project", inverse: "department", deleteRule: .deny),
            ]),
            EntityDescription(name: "Person", properties: [
                .attribute("uid", .integer64, optional: false, indexed: true),
                .attribute("name", .string, indexed: true),
                .attribute("age", .integer64, defaultValue: 0, indexed: true, rules: [.minimum(0), .maximum(150)]),
                .attribute("email", .string),
                .toOne("department", "Department", inverse: "employees"),
                .toOne("badge", "Badge", inverse: "owner", deleteRule: .cascade),
                .toMany("notes", "Note", inverse: "author", deleteRule: .noAction),
                .toMany("tags", "Tag", inverse: "people"),
            ]),
            EntityDescription(name: "Manager", superentity: "Person", properties: [
                .attribute("level", .integer16, defaultValue: 1, indexed: true)
            ]),
            EntityDescription(name: "Project", properties: [
                .attribute("uid", .integer64, optional: false, indexed: true),
                .attribute("title", .string),
                .attribute("active", .boolean, indexed: true),
                .toOne("department", "Department", inverse: "projects"),
                .toMany("members", "Person", ordered: true),
            ]),
            EntityDescription(name: "Badge", properties: [
                .attribute("uid", .integer64, optional: false, indexed: true),
                .attribute("code", .string),
                .toOne("owner", "Person", inverse: "badge"),
            ]),
            EntityDescription(name: "Note", properties: [
                .attribute("uid", .integer64, optional: false, indexed: true),
                .attribute("text", .string),
                .toOne("author", "Person", inverse: "notes"),
            ]),
            EntityDescription(name: "Tag", properties: [
                .attribute("uid", .integer64, optional: false, indexed: true),
                .attribute("name", .string),
                .toMany("people", "Person", inverse: "tags"),
            ]),
        ])
    }

    enum Kind { case string, integer, double, bool }

    /// The schema the generator works from: attributes (besides uid) and relationships.
    struct Entity {
        let name: String
        let attributes: [(String, Kind)]
        let toOne: [(String, String)]
        let toMany: [(String, String)]
        var root: String { name == "Manager" ? "Person" : name }
    }

    static let person = Entity(
        name: "Person", attributes: [("name", .string), ("age", .integer), ("email", .string)],
        toOne: [("department", "Department"), ("badge", "Badge")],
        toMany: [("notes", "Note"), ("tags", "Tag")])
    static let entities: [Entity] = [
        Entity(name: "Department", attributes: [("name", .string), ("budget", .double)], toOne: [],
               toMany: [("employees", "Person"), ("projects", "Project")]),
        person,
        Entity(name: "Manager", attributes: person.attributes + [("level", .integer)], toOne: person.toOne, toMany: person.toMany),
        Entity(name: "Project", attributes: [("title", .string), ("active", .bool)], toOne: [("department", "Department")],
               toMany: [("members", "Person")]),
        Entity(name: "Badge", attributes: [("code", .string)], toOne: [("owner", "Person")], toMany: []),
        Entity(name: "Note", attributes: [("text", .string)], toOne: [("author", "Person")], toMany: []),
        Entity(name: "Tag", attributes: [("name", .string)], toOne: [], toMany: [("people", "Person")]),
    ]
    static func entity(_ name: String) -> Entity { entities.first { $0.name == name }! }
    /// Entities whose instances are of kind `name` (the entity and its subentities).
    static func kinds(of name: String) -> [String] { name == "Person" ? ["Person", "Manager"] : [name] }
}

/// One step of a differential run. The description is Swift source for the same value,
/// so a minimised sequence can be pasted into a test.
enum DiffOp: CustomStringConvertible, Sendable {
    case insert(String, uid: Int64, [DiffValue])
    case update(String, uid: Int64, String, DiffValue.Value)
    case setToOne(String, uid: Int64, String, to: String?, Int64?)
    case add(String, uid: Int64, String, String, Int64)
    case remove(String, uid: Int64, String, String, Int64)
    case delete(String, uid: Int64)
    case save, rollback, reset, reopen, compareAll
    case fetch(DiffFetch)

    var description: String {
        switch self {
        case .insert(let e, let uid, let values): return ".insert(\"\(e)\", uid: \(uid), [\(values.map(\.description).joined(separator: ", "))])"
        case .update(let e, let uid, let key, let value): return ".update(\"\(e)\", uid: \(uid), \"\(key)\", \(value))"
        case .setToOne(let e, let uid, let key, let te, let target):
            return ".setToOne(\"\(e)\", uid: \(uid), \"\(key)\", to: \(te.map { "\"\($0)\"" } ?? "nil"), \(target.map(String.init) ?? "nil"))"
        case .add(let e, let uid, let key, let te, let t): return ".add(\"\(e)\", uid: \(uid), \"\(key)\", \"\(te)\", \(t))"
        case .remove(let e, let uid, let key, let te, let t): return ".remove(\"\(e)\", uid: \(uid), \"\(key)\", \"\(te)\", \(t))"
        case .delete(let e, let uid): return ".delete(\"\(e)\", uid: \(uid))"
        case .save: return ".save"
        case .rollback: return ".rollback"
        case .reset: return ".reset"
        case .reopen: return ".reopen"
        case .compareAll: return ".compareAll"
        case .fetch(let f): return ".fetch(\(f))"
        }
    }
}

/// An attribute value for an operation.
struct DiffValue: CustomStringConvertible, Sendable {
    enum Value: CustomStringConvertible, Sendable {
        case null, string(String), integer(Int64), double(Double), bool(Bool)
        var attributeValue: AttributeValue {
            switch self {
            case .null: return .null
            case .string(let s): return .string(s)
            case .integer(let i): return .int64(i)
            case .double(let d): return .double(d)
            case .bool(let b): return .bool(b)
            }
        }
        var description: String {
            switch self {
            case .null: return ".null"
            case .string(let s): return ".string(\(diffSwiftLiteral(s)))"
            case .integer(let i): return ".integer(\(i))"
            case .double(let d): return ".double(\(d))"
            case .bool(let b): return ".bool(\(b))"
            }
        }
    }
    let key: String
    let value: Value
    init(_ key: String, _ value: Value) { self.key = key; self.value = value }
    var description: String { "DiffValue(\"\(key)\", \(value))" }
}

/// A fetch request, in a form that prints as Swift source.
struct DiffFetch: CustomStringConvertible, Sendable {
    enum Result: String, Sendable { case objects, ids, count }
    var entity: String
    var format: String?
    var sorts: [(String, Bool)]
    var limit = 0
    var offset = 0
    var pending = true
    var result: Result = .objects
    var subentities = true

    var description: String {
        let sortText = sorts.map { "(\"\($0.0)\", \($0.1))" }.joined(separator: ", ")
        return "DiffFetch(entity: \"\(entity)\", format: \(format.map(diffSwiftLiteral) ?? "nil"), sorts: [\(sortText)], limit: \(limit), offset: \(offset), pending: \(pending), result: .\(result.rawValue), subentities: \(subentities))"
    }

    func request() throws -> FetchRequest {
        var request = FetchRequest(entityName: entity)
        if let format { request.predicate = try FetchPredicate(format: format) }
        request.sortDescriptors = sorts.map { FetchSortDescriptor(keyPath: $0.0, ascending: $0.1) }
            + [FetchSortDescriptor(keyPath: "uid", ascending: true)]
        request.fetchLimit = limit
        request.fetchOffset = offset
        request.includesPendingChanges = pending
        request.includesSubentities = subentities
        return request
    }
}

func diffSwiftLiteral(_ s: String) -> String {
    var out = "\""
    for scalar in s.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case _ where scalar.value < 0x20 || scalar.value > 0x7E: out += "\\u{\(String(scalar.value, radix: 16))}"
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "\""
}

/// Builds a random operation sequence. It tracks only which uids were ever inserted (and of
/// which entity), never store state, so any subsequence is still a valid sequence.
struct DiffGenerator {
    var random: DiffRandom
    var nextUID: Int64 = 1
    var uids: [String: [Int64]] = [:]

    init(seed: UInt64) { random = DiffRandom(seed: seed) }

    static let strings = ["Ada", "ada", "ADA", "Alan", "Émile", "e\u{301}mile", "Zoë", "zoe", "日本語", "日本", "straße", "STRASSE",
                          "", " ", "O'Brien", "quo\"te", "back\\slash", "Ωmega", "ωmega", "🙂 smile", "b", "a", "Grace", "grace hopper",
                          "e", "é", "E", "émile", "a\u{0}b", "\u{0}"]

    mutating func stringValue() -> String { random.pick(Self.strings) }

    mutating func value(_ kind: DiffModel.Kind, key: String) -> DiffValue.Value {
        // Mandatory Department.name is sometimes left nil so that saves fail.
        let nullChance = key == "name" ? 8 : 20
        if random.chance(nullChance) { return .null }
        switch kind {
        case .string: return .string(stringValue())
        case .integer:
            // Person.age is validated to 0...150: an occasional 151 or -1 makes the save fail.
            if key == "age" { return .integer(random.chance(3) ? random.pick([-1, 151]) : Int64(random.int(0...90))) }
            // Manager.level is an Integer 16: 40000 does not fit and must be refused by both.
            if key == "level", random.chance(5) { return .integer(40000) }
            return .integer(Int64(random.int(-5...20)))
        case .double: return .double(random.pick([-1.5, 0, 0.25, 1, 2.5, 100, 1e6, -0.0]))
        case .bool: return .bool(random.chance(50))
        }
    }

    mutating func existing(_ root: String) -> (String, Int64)? {
        let candidates = DiffModel.kinds(of: root).flatMap { kind in (uids[kind] ?? []).map { (kind, $0) } }
        guard !candidates.isEmpty else { return nil }
        // Mostly recent objects, which are more likely still to exist.
        return random.chance(60) ? random.pick(Array(candidates.suffix(12))) : random.pick(candidates)
    }

    mutating func anyExisting() -> (String, Int64)? {
        existing(random.pick(["Department", "Person", "Project", "Badge", "Note", "Tag"]))
    }

    mutating func next() -> DiffOp {
        let roll = random.int(0...99)
        switch roll {
        case 0..<22:
            let entity = random.pick(DiffModel.entities)
            let uid = nextUID
            nextUID += 1
            uids[entity.name, default: []].append(uid)
            var values: [DiffValue] = []
            for (key, kind) in entity.attributes where random.chance(80) { values.append(DiffValue(key, value(kind, key: key))) }
            if entity.name == "Department", !values.contains(where: { $0.key == "name" }) { values.append(DiffValue("name", .string(stringValue()))) }
            return .insert(entity.name, uid: uid, values)
        case 22..<34:
            guard let (e, uid) = diffPair(anyExisting()) else { return .fetch(fetch()) }
            let (key, kind) = random.pick(DiffModel.entity(e).attributes)
            return .update(e, uid: uid, key, value(kind, key: key))
        case 34..<44:
            guard let (e, uid) = diffPair(anyExisting()), let (key, dest) = diffPair(DiffModel.entity(e).toOne.randomElement(using: &random)) else { return .fetch(fetch()) }
            if random.chance(20) { return .setToOne(e, uid: uid, key, to: nil, nil) }
            guard let (te, target) = diffPair(existing(dest)) else { return .fetch(fetch()) }
            return .setToOne(e, uid: uid, key, to: te, target)
        case 44..<56:
            guard let (e, uid) = diffPair(anyExisting()), let (key, dest) = diffPair(DiffModel.entity(e).toMany.randomElement(using: &random)),
                  let (te, target) = diffPair(existing(dest)) else { return .fetch(fetch()) }
            return random.chance(70) ? .add(e, uid: uid, key, te, target) : .remove(e, uid: uid, key, te, target)
        case 56..<62:
            guard let (e, uid) = diffPair(anyExisting()) else { return .fetch(fetch()) }
            return .delete(e, uid: uid)
        case 62..<71: return .save
        case 71..<73: return .rollback
        case 73..<74: return .reset
        default: return .fetch(fetch())
        }
    }

    // MARK: Predicates

    mutating func literal(_ kind: DiffModel.Kind) -> String {
        switch kind {
        case .string: return stringLiteral()
        case .integer:
            if random.chance(5) { return random.pick(["-9223372036854775808", "9223372036854775807", "2.5", "-0.5", "0x10"]) }
            return String(random.int(-2...95))
        case .double: return random.pick(["0", "1", "2.5", "-1.5", "100", "0.25", "-0.0", "0.0", "1e6", "-1"])
        case .bool: return random.pick(["YES", "NO", "TRUE", "FALSE", "1", "0"])
        }
    }

    /// A predicate string literal: the parser's escapes, not Swift's.
    mutating func stringLiteral() -> String {
        let s = stringValue()
        var out = "\""
        for ch in s.unicodeScalars {
            switch ch {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\u{0}": out += "\\0"
            default: out.unicodeScalars.append(ch)
            }
        }
        return out + "\""
    }

    mutating func valueLiteral(_ kind: DiffModel.Kind) -> String {
        kind == .string ? stringLiteral() : literal(kind)
    }

    mutating func comparison(_ entity: DiffModel.Entity) -> String {
        let choice = random.int(0...99)
        if choice < 12, let (key, dest) = entity.toMany.randomElement(using: &random) {
            let target = DiffModel.entity(dest)
            if random.chance(50) {
                return "\(key).@count \(random.pick(["==", ">", "<", "!="])) \(random.int(0...3))"
            }
            let (attr, kind) = random.pick(target.attributes + [("uid", .integer)])
            let op = kind == .string ? random.pick(["==", "BEGINSWITH", "CONTAINS[c]", "==[c]"]) : random.pick(["==", "<", ">"])
            return "\(random.pick(["ANY", "ANY", "NONE"])) \(key).\(attr) \(op) \(valueLiteral(kind))"
        }
        if choice < 22, let (key, dest) = entity.toOne.randomElement(using: &random) {
            if random.chance(40) { return "\(key) \(random.pick(["==", "!="])) nil" }
            let target = DiffModel.entity(dest)
            let (attr, kind) = random.pick(target.attributes + [("uid", .integer)])
            return "\(key).\(attr) \(kind == .string ? random.pick(["==", "BEGINSWITH", "<"]) : random.pick(["==", ">", "<="])) \(valueLiteral(kind))"
        }
        let (key, kind) = random.pick(entity.attributes + [("uid", .integer)])
        if random.chance(10) { return "\(key) \(random.pick(["==", "!="])) nil" }
        if kind != .string, random.chance(8) {
            // The constant on the left: `5 < uid` is `uid > 5`.
            return "\(literal(kind)) \(random.pick(["==", "!=", "<", ">", "<=", ">="])) \(key)"
        }
        if random.chance(3) { return "\(key) IN {}" }
        switch kind {
        case .string:
            if random.chance(8) { return "\(stringLiteral()) \(random.pick(["==", "<", ">=", "IN"])) \(key)" }
            switch random.int(0...7) {
            case 0: return "\(key) IN {\(stringLiteral()), \(stringLiteral()), \(stringLiteral())}"
            case 1: return "\(key) BETWEEN {\(stringLiteral()), \(stringLiteral())}"
            case 2: return "\(key) BEGINSWITH\(random.pick(["", "[c]", "[cd]"])) \(stringLiteral())"
            case 3: return "\(key) CONTAINS\(random.pick(["", "[c]", "[d]"])) \(stringLiteral())"
            case 4: return "\(key) ENDSWITH \(stringLiteral())"
            default: return "\(key) \(random.pick(["==", "!=", "<", ">", "<=", ">=", "==[c]", "==[cd]"])) \(stringLiteral())"
            }
        case .integer, .double:
            switch random.int(0...5) {
            case 0:
                let first = literal(kind)
                return "\(key) IN {\(first), \(literal(kind)), \(first)}"
            case 1:
                let a = literal(kind), b = literal(kind)
                return "\(key) BETWEEN {\(a), \(b)}"
            default: return "\(key) \(random.pick(["==", "!=", "<", ">", "<=", ">="])) \(literal(kind))"
            }
        case .bool:
            return "\(key) \(random.pick(["==", "!="])) \(literal(kind))"
        }
    }

    mutating func predicate(_ entity: DiffModel.Entity, depth: Int = 0) -> String {
        let roll = random.int(0...99)
        if depth < 2, roll < 15 { return "\(predicate(entity, depth: depth + 1)) AND \(predicate(entity, depth: depth + 1))" }
        if depth < 2, roll < 27 { return "(\(predicate(entity, depth: depth + 1)) OR \(predicate(entity, depth: depth + 1)))" }
        if depth < 2, roll < 33 { return "NOT (\(predicate(entity, depth: depth + 1)))" }
        return comparison(entity)
    }

    mutating func fetch() -> DiffFetch {
        let entity = random.pick(DiffModel.entities)
        var sorts: [(String, Bool)] = []
        for _ in 0..<random.int(0...2) {
            if random.chance(15), let (key, dest) = entity.toOne.randomElement(using: &random) {
                let (attr, _) = random.pick(DiffModel.entity(dest).attributes)
                sorts.append(("\(key).\(attr)", random.chance(50)))
            } else {
                sorts.append((random.pick(entity.attributes).0, random.chance(50)))
            }
        }
        return DiffFetch(
            entity: entity.name,
            format: random.chance(85) ? predicate(entity) : nil,
            sorts: sorts,
            limit: random.chance(25) ? random.int(1...5) : 0,
            offset: random.chance(15) ? random.int(1...4) : 0,
            pending: random.chance(70),
            result: random.pick([.objects, .objects, .ids, .count]),
            subentities: entity.name != "Person" || random.chance(75))
    }

    mutating func operations(_ count: Int, reopenEvery: Int, compareEvery: Int) -> [DiffOp] {
        var ops: [DiffOp] = []
        for step in 1...count {
            ops.append(next())
            if step % compareEvery == 0 { ops.append(.compareAll) }
            if step % reopenEvery == 0 { ops.append(.reopen) }
        }
        ops.append(.save)
        ops.append(.compareAll)
        ops.append(.reopen)
        return ops
    }
}

/// A store directory that is removed when the run ends.
final class DiffDirectory {
    let url: URL
    init() {
        StrataStore.register()
        BinaryStore.register()
        url = FileManager.default.temporaryDirectory.appendingPathComponent("strata-differential-\(UUID().uuidString)")
    }
    deinit {
        try? FileManager.default.removeItem(at: url)
        try? FileManager.default.removeItem(at: url.appendingPathExtension("strata-binary"))
    }
}

/// One stack: a coordinator with one store, and one context.
final class DiffStack {
    let model: ManagedObjectModel
    let url: URL?
    var coordinator: PersistentStoreCoordinator
    var context: ManagedObjectContext
    var cache: [Int64: ManagedObject] = [:]

    /// The type of the store at `url` (none without one: an InMemoryStore).
    let type: PersistentStore.StoreType

    init(model: ManagedObjectModel, url: URL?, type: PersistentStore.StoreType = .strata) throws {
        self.model = model
        self.url = url
        self.type = url == nil ? .inMemory : type
        coordinator = try Self.open(model: model, url: url, type: self.type)
        context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
    }

    static func open(model: ManagedObjectModel, url: URL?, type: PersistentStore.StoreType) throws -> PersistentStoreCoordinator {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: type, at: url)
        return coordinator
    }

    /// Drops the context (and, for the Strata stack, the coordinator and store) and starts again.
    func reopen() throws {
        cache = [:]
        if url != nil {
            for store in coordinator.persistentStores { try coordinator.remove(store) }
            coordinator = try Self.open(model: model, url: url, type: type)
            context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        } else {
            context.reset()
        }
    }

    /// The object with `uid`, as this context sees it (pending changes included).
    func object(_ entity: String, _ uid: Int64) throws -> ManagedObject? {
        if let object = cache[uid], !object.isDeleted, object.managedObjectContext === context { return object }
        var request = FetchRequest(entityName: entity == "Manager" ? "Person" : entity)
        request.predicate = .equal("uid", .int64(uid))
        let found = try context.fetch(request)
        cache[uid] = found.first
        return found.first
    }
}

/// The outcome of an operation on one stack, compared between the two.
enum DiffOutcome: Equatable, CustomStringConvertible {
    case done
    case skipped
    case failed(String)
    case uids([Int64])
    case count(Int)
    case content([String])

    var description: String {
        switch self {
        case .done: return "done"
        case .skipped: return "skipped (object not found)"
        case .failed(let code): return "failed(\(code))"
        case .uids(let u): return "uids\(u)"
        case .count(let c): return "count(\(c))"
        case .content(let lines): return "content:\n  " + lines.joined(separator: "\n  ")
        }
    }
}

func diffCode(_ error: any Error) -> String {
    if let error = error as? ObjectGraphError { return error.code.rawValue }
    return String(describing: type(of: error))
}

func diffUID(of object: ManagedObject) throws -> Int64 {
    try object.value(forKey: "uid").integerValue ?? -1
}

/// Exact text of an attribute value; strings by scalars so normalisation changes show.
func diffExactText(_ value: AttributeValue) -> String {
    if case .string(let s) = value { return diffSwiftLiteral(s) }
    if let i = value.integerValue { return "int(\(i))" }
    return value.description
}

extension DiffStack {
    func apply(_ op: DiffOp) throws -> DiffOutcome {
        do {
            switch op {
            case .insert(let entity, let uid, let values):
                let object = try context.insertNewObject(forEntityName: entity)
                try object.setValue(.int64(uid), forKey: "uid")
                for value in values { try object.setValue(value.value.attributeValue, forKey: value.key) }
                cache[uid] = object
                return .done
            case .update(let entity, let uid, let key, let value):
                guard let object = try object(entity, uid) else { return .skipped }
                try object.setValue(value.attributeValue, forKey: key)
                return .done
            case .setToOne(let entity, let uid, let key, let targetEntity, let target):
                guard let object = try object(entity, uid) else { return .skipped }
                if let targetEntity, let target {
                    guard let destination = try self.object(targetEntity, target) else { return .skipped }
                    try object.setValue(destination, forKey: key)
                } else {
                    try object.setValue(nil as ManagedObject?, forKey: key)
                }
                return .done
            case .add(let entity, let uid, let key, let targetEntity, let target):
                guard let object = try object(entity, uid), let destination = try self.object(targetEntity, target) else { return .skipped }
                try object.addObject(destination, toRelationship: key)
                return .done
            case .remove(let entity, let uid, let key, let targetEntity, let target):
                guard let object = try object(entity, uid), let destination = try self.object(targetEntity, target) else { return .skipped }
                try object.removeObject(destination, fromRelationship: key)
                return .done
            case .delete(let entity, let uid):
                guard let object = try object(entity, uid) else { return .skipped }
                context.delete(object)
                cache[uid] = nil
                return .done
            case .save:
                cache = [:]
                do {
                    try context.save()
                    return .done
                } catch {
                    context.rollback()
                    return .failed(diffCode(error))
                }
            case .rollback:
                cache = [:]
                context.rollback()
                return .done
            case .reset:
                cache = [:]
                context.reset()
                return .done
            case .reopen:
                try reopen()
                return try content()
            case .compareAll:
                return try content()
            case .fetch(let spec):
                let request = try spec.request()
                switch spec.result {
                case .count: return .count(try context.count(for: request))
                case .ids: return .uids(try context.fetchObjectIDs(request).map { try DiffModelUID.of($0, in: context) })
                case .objects: return .uids(try context.fetch(request).map(diffUID(of:)))
                }
            }
        } catch {
            cache = [:]
            return .failed(diffCode(error))
        }
    }

    /// Every object of every entity, with all attributes and relationship uids, read through a fresh context.
    func content() throws -> DiffOutcome {
        let fresh = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var lines: [String] = []
        for entity in DiffModel.entities {
            var request = FetchRequest(entityName: entity.name)
            request.includesSubentities = false
            request.sortDescriptors = [FetchSortDescriptor(keyPath: "uid")]
            for object in try fresh.fetch(request) {
                var line = "\(entity.name) \(try diffUID(of: object)):"
                for (key, _) in entity.attributes { line += " \(key)=\(diffExactText(try object.value(forKey: key)))" }
                for (key, _) in entity.toOne + entity.toMany {
                    var targets = try object.objectIDs(forRelationshipNamed: key).map { try DiffModelUID.of($0, in: fresh) }
                    if key != "members" { targets.sort() }
                    line += " \(key)=\(targets)"
                }
                lines.append(line)
            }
        }
        return .content(lines)
    }
}

enum DiffModelUID {
    /// The uid of the object with `id`, or -1 when the object no longer exists (a dangling reference).
    static func of(_ id: ManagedObjectID, in context: ManagedObjectContext) throws -> Int64 {
        guard let object = try? context.existingObject(with: id) else { return -1 }
        return (try? diffUID(of: object)) ?? -1
    }
}

/// A difference between the two stores.
struct DiffMismatch: CustomStringConvertible {
    let step: Int
    let op: DiffOp
    let inMemory: DiffOutcome
    let strata: DiffOutcome
    var description: String {
        "step \(step): \(op)\n  InMemoryStore: \(inMemory)\n  StrataStore:   \(strata)"
    }
}

/// What a run did, to check that it exercised something.
struct DiffStatistics {
    var outcomes: [String: Int] = [:]
    var nonEmptyFetches = 0
    var objectsCompared = 0
    var failedFetches: [String] = []
    mutating func record(_ op: DiffOp, _ outcome: DiffOutcome) {
        let kind = String(op.description.prefix { $0 != "(" && $0 != "\"" }.dropFirst())
        switch outcome {
        case .failed(let code):
            outcomes["\(kind) failed \(code)", default: 0] += 1
            if case .fetch = op { failedFetches.append("\(op) -> \(code)") }
        case .skipped: outcomes["\(kind) skipped", default: 0] += 1
        case .uids(let uids):
            outcomes[kind, default: 0] += 1
            if !uids.isEmpty { nonEmptyFetches += 1 }
        case .count(let count):
            outcomes[kind, default: 0] += 1
            if count > 0 { nonEmptyFetches += 1 }
        case .content(let lines):
            outcomes[kind, default: 0] += 1
            objectsCompared += lines.count
        case .done: outcomes[kind, default: 0] += 1
        }
    }
    func count(_ key: String) -> Int { outcomes[key] ?? 0 }
    func failures(_ kind: String) -> Int { outcomes.filter { $0.key.hasPrefix("\(kind) failed") }.values.reduce(0, +) }
}

/// Applies `ops` to both stacks; returns the first mismatch, or nil.
func runDifferential(_ ops: [DiffOp]) throws -> DiffMismatch? {
    var statistics = DiffStatistics()
    return try runDifferential(ops, statistics: &statistics)
}

/// `type`: the store compared with the reference, StrataStore or the binary atomic store.
func runDifferential(_ ops: [DiffOp], statistics: inout DiffStatistics, type: PersistentStore.StoreType = .strata) throws -> DiffMismatch? {
    let model = try DiffModel.make()
    let directory = DiffDirectory()
    let reference = try DiffStack(model: model, url: nil)
    let strata = try DiffStack(model: model, url: type == .binary ? directory.url.appendingPathExtension("strata-binary") : directory.url, type: type)
    for (step, op) in ops.enumerated() {
        let expected = try reference.apply(op)
        let actual = try strata.apply(op)
        statistics.record(op, expected)
        if expected != actual { return DiffMismatch(step: step, op: op, inMemory: expected, strata: actual) }
    }
    return nil
}

/// Shrinks `ops` to a shorter sequence that still mismatches (greedy chunk removal).
func minimiseDifferential(_ ops: [DiffOp]) throws -> [DiffOp] {
    guard let first = try runDifferential(ops) else { return ops }
    var current = Array(ops.prefix(first.step + 1))
    var chunk = max(1, current.count / 2)
    while chunk >= 1 {
        var index = 0
        var removedAny = false
        while index < current.count - 1 {
            var candidate = current
            candidate.removeSubrange(index..<min(index + chunk, current.count - 1))
            if let mismatch = try runDifferential(candidate) {
                current = Array(candidate.prefix(mismatch.step + 1))
                removedAny = true
            } else {
                index += chunk
            }
        }
        if !removedAny { chunk /= 2 }
    }
    return current
}

/// An optional pair, unchanged (reads better in `guard let (a, b) = diffPair(…)`).
func diffPair<A, B>(_ value: (A, B)?) -> (A, B)? { value }

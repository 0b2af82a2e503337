import Foundation
import ObjectGraph
import Testing

@testable import Strata

/// [FETCH-S18] A fetch whose predicate compares only the entity's own attributes reuses the
/// compiled predicate and index plans of an earlier fetch of the same shape. Reusing them must
/// never change an answer: an InMemoryStore holding the same objects is the oracle while rows
/// are inserted, changed and deleted between fetches of repeated shapes.
@Suite struct FetchPlanCacheTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Owner", properties: [
                .attribute("name", .string, indexed: true),
                .toMany("items", "Item", inverse: "owner"),
            ]),
            EntityDescription(name: "Item", properties: [
                .attribute("name", .string, indexed: true),
                .attribute("tag", .string),
                .attribute("n", .integer64, indexed: true),
                .attribute("x", .double),
                .attribute("flag", .boolean),
                .attribute("scratch", .string, transient: true),
                .toOne("owner", "Owner", inverse: "items"),
            ]),
            EntityDescription(name: "Special", superentity: "Item", properties: [.attribute("level", .integer32)]),
        ])
    }

    static let names = ["alpha", "beta", "Beta", "gamma", "delta", "épée", "", "alphabet"]
    static let tags = ["red", "green", "blue", "RED"]

    /// A predicate from a small pool of shapes and constants, so shapes repeat.
    static func predicate(_ random: inout DiffRandom) -> String {
        let name = random.pick(names), tag = random.pick(tags), n = random.int(0...20), m = random.int(0...20)
        return random.pick([
            "name == '\(name)'", "name != '\(name)'", "name BEGINSWITH '\(name.prefix(2))'", "name == nil",
            "name IN {'\(name)', 'gamma'}", "n == \(n)", "n < \(n)", "n >= \(n) AND n <= \(m)", "n BETWEEN {\(min(n, m)), \(max(n, m))}",
            "tag ==[c] '\(tag)'", "tag LIKE '*\(tag.suffix(2))'", "tag CONTAINS[cd] 'E'", "x > \(Double(n) / 4)",
            "flag == YES", "NOT (flag == YES) OR n > \(n)", "name == '\(name)' AND tag == '\(tag)'", "TRUEPREDICATE",
            "x == nil", "tag != nil AND (n < \(n) OR name ENDSWITH 'a')",
        ])
    }

    /// One random object's values on both stores.
    static func fill(_ objects: [ManagedObject], _ random: inout DiffRandom) throws {
        let name: AttributeValue = random.chance(10) ? .null : .string(random.pick(names))
        let tag: AttributeValue = random.chance(10) ? .null : .string(random.pick(tags))
        let n = AttributeValue.int64(Int64(random.int(0...20)))
        let x: AttributeValue = random.chance(15) ? .null : .double(Double(random.int(0...40)) / 8)
        let flag = AttributeValue.bool(random.chance(50))
        for object in objects {
            try object.setValue(name, forKey: "name")
            try object.setValue(tag, forKey: "tag")
            try object.setValue(n, forKey: "n")
            try object.setValue(x, forKey: "x")
            try object.setValue(flag, forKey: "flag")
        }
    }

    @Test func repeatedShapesAnswerAsTheReferenceWhileRowsChange() throws {
        let store = TemporaryStore()
        let (reference, strata) = try store.referenceAndStrata(model: try Self.model()) { _ in }
        let contexts = [reference, strata].map { ManagedObjectContext(persistentStoreCoordinator: $0) }
        var random = DiffRandom(seed: 0x5EED_F00D)
        var keys: [Int64] = []  // each live object's `key`, in both stores under the same position
        var objects: [[ManagedObject]] = [[], []]
        func values(_ context: ManagedObjectContext, _ format: String, entity: String, limit: Int) throws -> [String] {
            var request = FetchRequest(entityName: entity)
            request.predicate = try FetchPredicate(format: format)
            request.sortDescriptors = [FetchSortDescriptor(keyPath: "n"), FetchSortDescriptor(keyPath: "x")]
            request.fetchLimit = limit
            let found = try context.fetch(request)
            let count = try context.count(for: request)
            return ["count \(count)"] + found.map { object in
                let n = (try? object.value(forKey: "n"))?.integerValue ?? -1
                return "\(object.entity.name) \(n) \(String(describing: try? object.value(forKey: "x")))"
            }
        }
        var fetches = 0
        for step in 0..<400 {
            switch random.int(0...9) {
            case 0...2:
                let entity = random.chance(30) ? "Special" : "Item"
                let made = try contexts.map { try $0.insertNewObject(forEntityName: entity) }
                try Self.fill(made, &random)
                for side in 0..<2 { objects[side].append(made[side]) }
                keys.append(Int64(step))
            case 3 where !keys.isEmpty:
                let index = random.int(0...(keys.count - 1))
                try Self.fill([objects[0][index], objects[1][index]], &random)
            case 4 where !keys.isEmpty:
                let index = random.int(0...(keys.count - 1))
                for side in 0..<2 { contexts[side].delete(objects[side].remove(at: index)) }
                keys.remove(at: index)
            case 5:
                for context in contexts { try context.save() }
            default:
                // Saved rows only: the store answers; the context adds its unsaved changes.
                let format = Self.predicate(&random)
                let entity = random.chance(25) ? "Special" : "Item"
                // Sorted by `n` then `x` with ties left to the store: compare as sets of lines.
                let limit = random.chance(30) ? 0 : 500  // more than the objects: no tie is cut
                let answers = try contexts.map { try values($0, format, entity: entity, limit: limit).sorted() }
                #expect(answers[0] == answers[1], "step \(step): \(entity) \(format)")
                fetches += 1
            }
        }
        #expect(fetches > 150)
        // Shapes repeated: the cache holds far fewer plans than there were fetches.
        let strataStore = try #require(strata.persistentStores.first as? StrataStore)
        let planned = strataStore.fetchPlans.withLock { $0.count }
        #expect(planned > 10 && planned < fetches, "\(planned) plans for \(fetches) fetches")
    }

    @Test func onlyPredicatesOfTheEntitysOwnAttributesArePlanned() throws {
        let model = try Self.model()
        let item = try model.entity(named: "Item")
        func cacheable(_ format: String, _ arguments: [any FetchArgument] = []) throws -> Bool {
            StrataStore.isPlanCacheable(try FetchPredicate(format: format, argumentArray: arguments), entity: item)
        }
        #expect(try cacheable("name == 'a'"))
        #expect(try cacheable("n > 3 AND (tag LIKE 'x*' OR NOT flag == NO)"))
        #expect(try cacheable("name IN {'a', 'b'}"))
        #expect(try cacheable("TRUEPREDICATE"))
        #expect(try !cacheable("name MATCHES 'a.*'"), "MATCHES looks its expression up lazily")
        #expect(try !cacheable("owner.name == 'a'"), "a semi-join's sets come from a snapshot")
        #expect(try !cacheable("owner == nil"))
        #expect(try !cacheable("scratch == 'a'"), "a transient attribute")
        #expect(try !cacheable("level == 3"), "a subentity's attribute")
        #expect(try !cacheable("SELF == %@", [ManagedObjectID.temporary(for: item)]))
        #expect(try !cacheable("n == 3 AND owner.name == 'a'"))
        #expect(try !cacheable("name == $who"), "a variable")
    }

    @Test func relationshipPredicatesHaveNoPlanAndStillAnswer() throws {
        let store = TemporaryStore()
        let coordinator = try store.coordinator(model: try Self.model())
        let setup = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let owner = try setup.insertNewObject(forEntityName: "Owner")
        try owner.setValue(.string("o"), forKey: "name")
        for n in 0..<5 {
            let item = try setup.insertNewObject(forEntityName: "Item")
            try item.setValue(.int64(Int64(n)), forKey: "n")
            if n % 2 == 0 { try item.setValue(owner, forKey: "owner") }
        }
        try setup.save()
        let strataStore = try #require(coordinator.persistentStores.first as? StrataStore)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var request = FetchRequest(entityName: "Item")
        request.predicate = try FetchPredicate(format: "owner.name == 'o'")
        for _ in 0..<3 { #expect(try context.count(for: request) == 3) }
        let item = try coordinator.managedObjectModel.entity(named: "Item")
        let layout = try strataStore.storeLayout()
        // One plan: the semi-join's inner fetch of owners named "o"; the fetch's own has none.
        #expect(try strataStore.fetchPlan(for: try #require(request.predicate), entity: item, layout: layout) == nil)
        let owners = try coordinator.managedObjectModel.entity(named: "Owner")
        #expect(try strataStore.fetchPlan(for: try FetchPredicate(format: "name == 'o'"), entity: owners, layout: layout) != nil)
        #expect(strataStore.fetchPlans.withLock { $0.count } == 1)
        request.predicate = try FetchPredicate(format: "n >= 2")
        for _ in 0..<3 { #expect(try context.count(for: request) == 3) }
        #expect(try strataStore.fetchPlan(for: try #require(request.predicate), entity: item, layout: layout) != nil)
        #expect(strataStore.fetchPlans.withLock { $0.count } == 2)
    }

    @Test func theCacheStartsOverWhenFullAndKeepsAnswering() throws {
        let store = TemporaryStore()
        let coordinator = try store.coordinator(model: try Self.model())
        let setup = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for n in 0..<40 {
            let item = try setup.insertNewObject(forEntityName: "Item")
            try item.setValue(.int64(Int64(n)), forKey: "n")
        }
        try setup.save()
        let strataStore = try #require(coordinator.persistentStores.first as? StrataStore)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for bound in 0..<(StrataStore.fetchPlanCapacity + 50) {
            var request = FetchRequest(entityName: "Item")
            request.predicate = try FetchPredicate(format: "n < %@", argumentArray: [bound])
            #expect(try context.count(for: request) == min(bound, 40))
            #expect(strataStore.fetchPlans.withLock { $0.count } <= StrataStore.fetchPlanCapacity)
        }
        #expect(strataStore.fetchPlans.withLock { $0.count } == 50, "started over at the 257th shape")
    }

    @Test func contextsOnManyThreadsShareOnePlan() throws {
        let store = TemporaryStore()
        let coordinator = try store.coordinator(model: try Self.model())
        let setup = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for n in 0..<200 {
            let item = try setup.insertNewObject(forEntityName: "Item")
            try item.setValue(.int64(Int64(n % 20)), forKey: "n")
            try item.setValue(.string(Self.tags[n % Self.tags.count]), forKey: "tag")
        }
        try setup.save()
        let formats = ["tag ==[c] 'red' AND n < 10", "tag LIKE 'g*'", "n BETWEEN {3, 5}"]
        let expected = [50, 50, 30]
        let failures = LockedCounter()
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            for round in 0..<30 {
                let index = (worker + round) % formats.count
                var request = FetchRequest(entityName: "Item")
                request.predicate = try? FetchPredicate(format: formats[index])
                if (try? context.fetch(request).count) != expected[index] { failures.add() }
            }
        }
        #expect(failures.value == 0)
        let strataStore = try #require(coordinator.persistentStores.first as? StrataStore)
        #expect(strataStore.fetchPlans.withLock { $0.count } == formats.count)
    }
}

/// A counter threads add to.
final class LockedCounter: @unchecked Sendable {
    // @unchecked: `count` is only touched under `lock`.
    private let lock = NSLock()
    private var count = 0
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}

import Foundation
import ObjectGraph
import Testing

/// The stores that take several queue contexts at once.
let concurrentStoreFixtures: [any StoreFixture] = [InMemoryFixture(), StrataFixture()]

/// Many queue contexts on one coordinator at once: saves, fetches and merges interleave,
/// and every context ends up seeing what the store holds.
@Suite("Queue contexts under stress")
struct ContextStressTests {
    /// One worker's objects, by name, with the ages it gave them.
    private struct Ledger: Sendable {
        var ages: [String: Int16] = [:]
    }

    /// Each worker inserts, updates and deletes its own people (in its own department) in many
    /// small saves, while a main-queue context that merges automatically fetches and reads,
    /// and half the workers merge the others' saves as they go. At the end every context's
    /// objects have the store's values, and the view context holds exactly the store's people.
    @Test(arguments: concurrentStoreFixtures)
    func manyBackgroundContextsSaveWhileAMainContextMerges(fixture: any StoreFixture) async throws {
        Violations.record()
        let stack = try fixture.makeStack(model: try TestModel.make())
        let view = queueContext(stack.coordinator, .mainQueue)
        view.automaticallyMergesChangesFromParent = true
        view.retainsRegisteredObjects = true
        let workerCount = 4
        let rounds = 30
        let workers = (0..<workerCount).map { index -> ManagedObjectContext in
            let worker = queueContext(stack.coordinator)
            worker.automaticallyMergesChangesFromParent = index.isMultiple(of: 2)
            return worker
        }
        // The view holds every person from the start, so merges have objects to refresh.
        try await view.perform { _ = try view.fetch(.make("Person")) }
        let done = Shared(false)
        let ledgers = try await withThrowingTaskGroup(of: Ledger.self) { group in
            for (index, worker) in workers.enumerated() {
                group.addTask {
                    try await Self.work(worker, index: index, rounds: rounds)
                }
            }
            // The view reads while the workers write.
            group.addTask {
                var reads = 0
                while !done.current || reads == 0 {
                    try await view.perform {
                        // A person deleted after the fetch returned it cannot be read any more
                        // (its fault throws objectNotFound, as Core Data's does): skipped.
                        for person in try view.fetch(.make("Person", sortedBy: ["name"])) {
                            do {
                                _ = try person.value(forKey: "age")
                            } catch let error as ObjectGraphError where error.code == .objectNotFound {}
                        }
                    }
                    reads += 1
                    await Task.yield()
                }
                return Ledger()
            }
            var ledgers: [Ledger] = []
            for _ in 0..<workerCount {
                guard let ledger = try await group.next() else { break }
                ledgers.append(ledger)
                if ledgers.count == workerCount { done { $0 = true } }
            }
            _ = try await group.next()
            return ledgers
        }
        // What every worker believes it saved is what the store holds.
        var expected: [String: Int16] = [:]
        for ledger in ledgers { expected.merge(ledger.ages) { first, _ in first } }
        let stored = try stack.read { context in
            Dictionary(uniqueKeysWithValues: try context.fetch(.make("Person")).map {
                (try $0.value(forKey: "name").stringValue ?? "", try $0.value(forKey: "age", as: Int16.self))
            })
        }
        #expect(stored == expected)

        // The merges already enqueued on the view's queue run before this block.
        let viewState = try await view.perform(schedule: .enqueued) { () throws -> [String: Int16] in
            var state: [String: Int16] = [:]
            for object in view.registeredObjects where object.entity.name == "Person" {
                state[try object.value(forKey: "name").stringValue ?? ""] = try object.value(forKey: "age", as: Int16.self)
            }
            return state
        }
        #expect(viewState == stored, "the view context merged every insert, update and delete")
        for worker in workers {
            let workerState = try await worker.perform(schedule: .enqueued) { () throws -> [String: Int16] in
                if !worker.automaticallyMergesChangesFromParent { worker.refreshAllObjects() }
                var state: [String: Int16] = [:]
                for person in try worker.fetch(.make("Person")) {
                    state[try person.value(forKey: "name").stringValue ?? ""] = try person.value(forKey: "age", as: Int16.self)
                }
                return state
            }
            #expect(workerState == stored)
        }
        for context in workers + [view] {
            #expect(Violations.of(context.name ?? "").isEmpty, "no use outside the context's queue")
        }
    }

    /// One worker's rounds: three inserts, an update and, every third round, a delete, saved.
    private static func work(_ worker: ManagedObjectContext, index: Int, rounds: Int) async throws -> Ledger {
        let seed = UInt64(index + 1)
        return try await worker.perform {
            var random = RandomizedConformance.SeededGenerator(state: seed)
            var ledger = Ledger()
            var mine: [ManagedObject] = []
            let department = try worker.makeDepartment("D\(index)")
            for round in 0..<rounds {
                for item in 0..<3 {
                    let name = "w\(index)-\(round)-\(item)"
                    let age = Int16.random(in: 0...120, using: &random)
                    let person = try worker.makePerson(name, age: age)
                    try person.setValue(department, forKey: "department")
                    mine.append(person)
                    ledger.ages[name] = age
                }
                if let person = mine.randomElement(using: &random) {
                    let age = Int16.random(in: 0...120, using: &random)
                    try person.setValue(.int16(age), forKey: "age")
                    ledger.ages[try person.value(forKey: "name").stringValue ?? ""] = age
                }
                if round % 3 == 2, let victim = mine.indices.randomElement(using: &random) {
                    ledger.ages[try mine[victim].value(forKey: "name").stringValue ?? ""] = nil
                    worker.delete(mine.remove(at: victim))
                }
                try worker.save()
                if round % 5 == 0 { _ = try worker.count(for: .make("Person")) }
            }
            return ledger
        }
    }

    /// A writer saves people in groups of five and deletes whole groups while readers fetch:
    /// every fetch and count sees whole groups (a fetch sees a save wholly or not at all).
    @Test(arguments: concurrentStoreFixtures)
    func aFetchSeesASaveWhollyOrNotAtAll(fixture: any StoreFixture) async throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let writer = queueContext(stack.coordinator)
        let readers = (0..<2).map { _ in queueContext(stack.coordinator) }
        let done = Shared(false)
        let torn = Shared<[String]>([])
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await writer.perform {
                    var groups: [[ManagedObject]] = []
                    for round in 0..<60 {
                        groups.append(try (0..<5).map { try writer.makePerson("g\(round)-\($0)", age: Int16(round % 100)) })
                        if round % 4 == 3 {
                            for person in groups.removeFirst() { writer.delete(person) }
                        }
                        try writer.save()
                    }
                }
                done { $0 = true }
            }
            for reader in readers {
                group.addTask {
                    while !done.current {
                        try await reader.perform {
                            let count = try reader.count(for: .make("Person"))
                            if count % 5 != 0 { torn { $0.append("count \(count)") } }
                            var sizes: [Substring: Int] = [:]
                            for name in try reader.fetchDictionaries(Self.names()).compactMap({ $0["name"]?.attributeValue?.stringValue }) {
                                sizes[name.split(separator: "-")[0], default: 0] += 1
                            }
                            for (name, size) in sizes where size != 5 { torn { $0.append("group \(name) has \(size)") } }
                            reader.reset()
                        }
                        await Task.yield()
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(torn.current.isEmpty)
        #expect(try stack.read { try $0.count(for: .make("Person")) } == 5 * (60 - 15))
    }

    private static func names() -> FetchRequest {
        var request = FetchRequest.make("Person")
        request.resultType = .dictionary
        request.propertiesToFetch = ["name"]
        return request
    }
}

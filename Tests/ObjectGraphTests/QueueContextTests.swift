import Dispatch
import Foundation
import ObjectGraph
import StrataSync
import Testing

/// Every concurrency violation reported while the tests run, by context name: tests name
/// their contexts uniquely and look only at their own. (`Locked`, not `Mutex`: under
/// ThreadSanitizer a contended `Mutex` is reported as a race; see StrataSync.)
enum Violations {
    private static let recorded = Locked<[ConcurrencyViolation]>([])
    private static let installed: Bool = {
        ManagedObjectContext.concurrencyViolationHandler = { violation in recorded.withLock { $0.append(violation) } }
        return true
    }()

    /// Starts recording (once per process).
    static func record() { _ = installed }

    /// The violations of the context named `name`.
    static func of(_ name: String) -> [ConcurrencyViolation] {
        recorded.withLock { $0.filter { $0.contextName == name } }
    }
}

/// A private-queue context on `coordinator`, uniquely named.
func queueContext(_ coordinator: PersistentStoreCoordinator, _ type: ManagedObjectContext.ConcurrencyType = .privateQueue) -> ManagedObjectContext {
    let context = ManagedObjectContext(concurrencyType: type)
    context.name = "\(type)-\(UUID().uuidString)"
    context.persistentStoreCoordinator = coordinator
    return context
}

private struct Refused: Error, Equatable {}

/// A value shared by the test and the blocks it hands to contexts.
final class Shared<Value: Sendable>: Sendable {
    private let value: Locked<Value>
    init(_ value: Value) { self.value = Locked(value) }
    func callAsFunction<R>(_ body: (inout Value) -> R) -> R { value.withLock { body(&$0) } }
    var current: Value { value.withLock { $0 } }
}

@Suite("Queue contexts: perform, performAndWait, confinement checks")
struct QueueContextTests {
    @Test func performAndWaitReturnsTheValueAndRethrows() throws {
        let stack = try InMemoryFixture().makeStack(model: try TestModel.make())
        let context = queueContext(stack.coordinator)
        let count = try context.performAndWait {
            try context.makePerson("Ada")
            try context.save()
            return try context.count(for: .make("Person"))
        }
        #expect(count == 1)
        #expect(throws: Refused.self) { try context.performAndWait { () throws(Refused) -> Int in throw Refused() } }
        let plain: Int = context.performAndWait { 7 }
        #expect(plain == 7, "a closure that cannot throw needs no try")
    }

    @Test func performAndWaitIsReentrantAndRunsOnTheQueue() throws {
        let stack = try InMemoryFixture().makeStack(model: try TestModel.make())
        let context = queueContext(stack.coordinator)
        let depth = context.performAndWait {
            context.performAndWait { context.performAndWait { 3 } }
        }
        #expect(depth == 3)
    }

    @Test func blocksRunOneAtATimeInTheOrderGiven() throws {
        let stack = try InMemoryFixture().makeStack(model: try TestModel.make())
        let context = queueContext(stack.coordinator)
        let order = Shared<[Int]>([])
        let running = Shared(0)
        let overlaps = Shared(0)
        for index in 0..<200 {
            context.perform {
                if running({ $0 += 1; return $0 }) > 1 { overlaps { $0 += 1 } }
                order { $0.append(index) }
                running { $0 -= 1 }
            }
        }
        context.performAndWait {}
        #expect(order.current == Array(0..<200))
        #expect(overlaps.current == 0)
    }

    /// A confinement context makes its queue when a block is first performed: blocks handed
    /// over from many threads at once still share one queue, so they run one at a time.
    @Test func aConfinementContextRunsBlocksFromManyThreadsOneAtATime() throws {
        let stack = try InMemoryFixture().makeStack(model: try TestModel.make())
        let context = queueContext(stack.coordinator, .confinement)
        let running = Shared(0)
        let overlaps = Shared(0)
        let ran = Shared(0)
        let done = DispatchGroup()
        DispatchQueue.concurrentPerform(iterations: 64) { _ in
            done.enter()
            context.perform {
                if running({ $0 += 1; return $0 }) > 1 { overlaps { $0 += 1 } }
                ran { $0 += 1 }
                running { $0 -= 1 }
                done.leave()
            }
        }
        done.wait()
        #expect(ran.current == 64)
        #expect(overlaps.current == 0)
    }

    @Test func awaitingPerformReturnsTheValueAndRethrows() async throws {
        let stack = try InMemoryFixture().makeStack(model: try TestModel.make())
        let context = queueContext(stack.coordinator)
        let id = try await context.perform {
            let ada = try context.makePerson("Ada")
            try context.save()
            return ada.objectID
        }
        #expect(!id.isTemporaryID)
        await #expect(throws: Refused.self) { try await context.perform { () throws(Refused) -> Void in throw Refused() } }
        // A detached task uses the context through perform, with no @unchecked in sight.
        let count = try await Task.detached { try await context.perform { try context.count(for: .make("Person")) } }.value
        #expect(count == 1)
        let enqueued = Shared<[String]>([])
        // In async code `perform` without `await` is the asynchronous overload (as in Core Data):
        // reach the fire-and-forget one from a synchronous closure.
        let enqueue = { context.perform { enqueued { $0.append("first") } } }
        enqueue()
        await context.perform(schedule: .enqueued) { enqueued { $0.append("second") } }
        #expect(enqueued.current == ["first", "second"])
    }

    @Test func aMainQueueContextRunsItsBlocksOnTheMainQueue() async throws {
        let stack = try InMemoryFixture().makeStack(model: try TestModel.make())
        let view = queueContext(stack.coordinator, .mainQueue)
        let key = DispatchSpecificKey<String>()
        DispatchQueue.main.setSpecific(key: key, value: "main")
        #expect(await view.perform { DispatchQueue.getSpecific(key: key) } == "main")
        let onMain = await Task.detached { view.performAndWait { DispatchQueue.getSpecific(key: key) } }.value
        #expect(onMain == "main")
        // Main-actor code (the main queue) uses the context directly.
        Violations.record()
        let count = try await MainActor.run { try view.count(for: .make("Person")) }
        #expect(count == 0)
        #expect(Violations.of(view.name ?? "").isEmpty)
    }

    @Test func useOutsideTheQueueIsReportedAndUseInsideIsNot() throws {
        Violations.record()
        let stack = try InMemoryFixture().makeStack(model: try TestModel.make())
        let context = queueContext(stack.coordinator)
        let name = try #require(context.name)
        let ada = try context.performAndWait {
            let ada = try context.makePerson("Ada")
            try context.save()
            _ = try ada.value(forKey: "name")
            return ada
        }
        #expect(Violations.of(name).isEmpty)
        _ = try context.count(for: .make("Person"))
        #expect(Violations.of(name).map(\.operation) == ["fetch"])
        _ = try? ada.value(forKey: "age")
        #expect(Violations.of(name).count == 2, "a value read outside the queue is reported in debug builds")
        #expect(Violations.of(name).last?.description.contains("outside perform/performAndWait") == true)
        // A confinement context is never checked.
        let confined = stack.context()
        confined.name = "confined-\(UUID().uuidString)"
        _ = try confined.count(for: .make("Person"))
        #expect(Violations.of(confined.name ?? "").isEmpty)
    }

    @Test func nestedPerformAndWaitBetweenAChildAndItsParentDoesNotDeadlock() throws {
        Violations.record()
        let stack = try InMemoryFixture().makeStack(model: try TestModel.make())
        let parent = queueContext(stack.coordinator)
        let child = ManagedObjectContext(concurrencyType: .privateQueue)
        child.name = "child-\(UUID().uuidString)"
        child.parent = parent
        let names = try child.performAndWait {
            try child.makePerson("Ada")
            // The child's block waits for the parent's, which uses the child again.
            return try parent.performAndWait {
                try child.performAndWait {
                    try child.save()
                    return try parent.performAndWait { try parent.names(.make("Person")) }
                }
            }
        }
        #expect(names == ["Ada"])
        try parent.performAndWait { try parent.save() }
        #expect(try stack.read { try $0.count(for: .make("Person")) } == 1)
        #expect(Violations.of(child.name ?? "").isEmpty)
        #expect(Violations.of(parent.name ?? "").isEmpty)
    }

    @Test func aChildOfAMainQueueContextSavesIntoItFromAnotherThread() async throws {
        let stack = try InMemoryFixture().makeStack(model: try TestModel.make())
        let view = queueContext(stack.coordinator, .mainQueue)
        let sheet = ManagedObjectContext(concurrencyType: .privateQueue)
        sheet.parent = view
        try await sheet.perform {
            try sheet.makePerson("Ada")
            try sheet.save()
        }
        let count = try await view.perform {
            try view.save()
            return try view.count(for: .make("Person"))
        }
        #expect(count == 1)
    }
}

@Suite("Queue contexts: saves during merges")
struct SaveDuringMergeTests {
    /// A context saves from inside its own objects-did-change notification, which a merge
    /// posts, while the other context keeps saving: both finish, and both end with the store's
    /// values.
    @Test(arguments: concurrentStoreFixtures)
    func aSaveInsideAMergesNotificationDoesNotDeadlock(fixture: any StoreFixture) async throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let first = queueContext(stack.coordinator)
        let second = queueContext(stack.coordinator)
        first.automaticallyMergesChangesFromParent = true
        second.automaticallyMergesChangesFromParent = true
        let reactions = Shared(0)
        // On each merge into `first`, it records the merge as a new person and saves it,
        // while a merge may be arriving from `second`'s next save.
        let observer = NotificationCenter.default.addObserver(
            forName: ManagedObjectContext.objectsDidChangeNotification, object: first, queue: nil
        ) { note in
            guard let change = ObjectChangeNotification(note), !change.inserted.isEmpty || !change.refreshed.isEmpty,
                reactions.current < 20
            else { return }
            reactions { $0 += 1 }
            do {
                try first.makePerson("reaction-\(reactions.current)")
                try first.save()
            } catch {
                Issue.record("the save inside the notification failed: \(error)")
            }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        try await second.perform {
            for index in 0..<20 {
                try second.makePerson("second-\(index)")
                try second.save()
            }
        }
        // Every merge `second` made enqueued a block on `first` before its save returned.
        let seen = try await first.perform(schedule: .enqueued) { try first.count(for: .make("Person")) }
        let stored = try stack.read { try $0.count(for: .make("Person")) }
        #expect(reactions.current > 0)
        #expect(seen == stored)
        #expect(stored == 20 + reactions.current)
        let secondSees = try await second.perform(schedule: .enqueued) { try second.count(for: .make("Person")) }
        #expect(secondSees == stored)
    }
}

import Foundation
import ObjectGraph

/// A way to make a coordinator with one store of some type, so one conformance suite
/// runs against every store (the in-memory reference now, StrataStore later).
protocol StoreFixture: Sendable, CustomStringConvertible {
    /// Creates a coordinator with one new, empty store for `model`.
    func makeStack(model: ManagedObjectModel) throws -> TestStack
    /// Whether ``reopen(_:)`` is supported.
    var supportsReopen: Bool { get }
    /// A new coordinator on the same store (same URL), as after a process restart.
    func reopen(_ stack: TestStack) throws -> TestStack
}

/// A coordinator, its store and the store's location.
struct TestStack {
    let coordinator: PersistentStoreCoordinator
    let store: PersistentStore
    let url: URL?

    func context() -> ManagedObjectContext { ManagedObjectContext(persistentStoreCoordinator: coordinator) }

    /// Runs `body` with a fresh context that stays alive until `body` returns (objects
    /// need their context to load values).
    func read<T>(_ body: (ManagedObjectContext) throws -> T) rethrows -> T {
        let context = context()
        return try withExtendedLifetime(context) { try body(context) }
    }
}

/// The in-memory reference store, at a fresh URL so it can be reopened.
struct InMemoryFixture: StoreFixture {
    var description: String { "InMemoryStore" }
    var supportsReopen: Bool { true }

    func makeStack(model: ManagedObjectModel) throws -> TestStack {
        let url = URL(string: "memory://tests/\(UUID().uuidString)")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let store = try coordinator.addPersistentStore(type: .inMemory, configuration: nil, at: url, options: [:])
        return TestStack(coordinator: coordinator, store: store, url: url)
    }

    func reopen(_ stack: TestStack) throws -> TestStack {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: stack.coordinator.managedObjectModel)
        let store = try coordinator.addPersistentStore(type: .inMemory, configuration: nil, at: stack.url, options: [:])
        return TestStack(coordinator: coordinator, store: store, url: stack.url)
    }
}

/// Every store the conformance suite runs against.
let allStoreFixtures: [any StoreFixture] = [InMemoryFixture(), DictionaryStoreFixture(), StrataFixture(), ReopeningStrataFixture(), JSONFileFixture(), BinaryStoreFixture()]

/// Observes one notification name from one context until released.
///
/// `@unchecked Sendable`: contexts post synchronously on the test's own thread, so
/// `received` is only ever touched there.
final class NotificationRecorder: @unchecked Sendable {
    private(set) var received: [Notification] = []
    private var token: (any NSObjectProtocol)?

    init(_ name: Notification.Name, from context: ManagedObjectContext) {
        token = NotificationCenter.default.addObserver(forName: name, object: context, queue: nil) { [unowned self] note in
            self.received.append(note)
        }
    }

    deinit {
        if let token { NotificationCenter.default.removeObserver(token) }
    }

    var last: ObjectChangeNotification? { received.last.flatMap(ObjectChangeNotification.init) }
}

import Foundation
import ObjectGraph
import Strata

/// StrataStore in a fresh temporary directory, so the whole conformance suite runs against
/// the engine-backed store as well as the in-memory reference.
struct StrataFixture: StoreFixture {
    var description: String { "StrataStore" }
    var supportsReopen: Bool { true }

    static let root: URL = {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("strata-conformance-\(getpid())")
        try? FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        StrataStore.register()
        return root
    }()

    func makeStack(model: ManagedObjectModel) throws -> TestStack {
        let url = Self.root.appendingPathComponent(UUID().uuidString)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let store = try coordinator.addPersistentStore(type: .strata, configuration: nil, at: url, options: [:])
        return TestStack(coordinator: coordinator, store: store, url: url)
    }

    /// A second coordinator on the same store; in one process both share the store's engine.
    func reopen(_ stack: TestStack) throws -> TestStack {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: stack.coordinator.managedObjectModel)
        let store = try coordinator.addPersistentStore(type: .strata, configuration: nil, at: stack.url, options: [:])
        return TestStack(coordinator: coordinator, store: store, url: stack.url)
    }
}

/// The binary atomic store in a fresh file, so the conformance suite runs against Strata's
/// atomic store too.
struct BinaryStoreFixture: StoreFixture {
    var description: String { "BinaryStore (atomic)" }
    var supportsReopen: Bool { true }

    static let registered: Bool = {
        BinaryStore.register()
        return true
    }()

    func makeStack(model: ManagedObjectModel) throws -> TestStack {
        _ = Self.registered
        let url = StrataFixture.root.appendingPathComponent(UUID().uuidString + ".strata-binary")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let store = try coordinator.addPersistentStore(type: .binary, configuration: nil, at: url, options: [:])
        return TestStack(coordinator: coordinator, store: store, url: url)
    }

    /// A second coordinator on the same file: it loads what was saved.
    func reopen(_ stack: TestStack) throws -> TestStack {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: stack.coordinator.managedObjectModel)
        let store = try coordinator.addPersistentStore(type: .binary, configuration: nil, at: stack.url, options: [:])
        return TestStack(coordinator: coordinator, store: store, url: stack.url)
    }
}

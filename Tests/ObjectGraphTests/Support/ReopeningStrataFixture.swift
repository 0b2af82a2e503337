import Foundation
import ObjectGraph
import Strata
import StrataEngine

/// A StrataStore that closes and reopens its engine after every save, so everything the
/// conformance suite reads after a save comes back from the files on disk (issue 6: "reopen
/// between every step"). Pins live in the engine's memory, so this store counts registrations
/// itself and pins them again in the reopened engine.
final class ReopeningStrataStore: StrataStore, @unchecked Sendable {
    // @unchecked: as StrataStore; `registered` is a Mutex.
    private let registered = Locked<[ManagedObjectID: Int]>([:])

    override var type: StoreType { .reopeningStrata }

    override func execute(_ request: any PersistentStoreRequest, with context: ManagedObjectContext?) throws -> PersistentStoreResult {
        let result = try super.execute(request, with: context)
        if request is SaveChangesRequest {
            try reopenStorage()
            let counts = registered.withLock { $0 }
            for (id, count) in counts {
                super.managedObjectContextDidRegisterObjects(with: Array(repeating: id, count: count))
            }
        }
        return result
    }

    override func managedObjectContextDidRegisterObjects(with objectIDs: [ManagedObjectID]) {
        registered.withLock { for id in objectIDs { $0[id, default: 0] += 1 } }
        super.managedObjectContextDidRegisterObjects(with: objectIDs)
    }

    override func managedObjectContextDidUnregisterObjects(with objectIDs: [ManagedObjectID]) {
        registered.withLock { counts in
            for id in objectIDs {
                if let count = counts[id] { counts[id] = count > 1 ? count - 1 : nil }
            }
        }
        super.managedObjectContextDidUnregisterObjects(with: objectIDs)
    }
}

extension PersistentStore.StoreType {
    static let reopeningStrata = PersistentStore.StoreType("StrataReopeningAfterEverySave")
}

/// StrataStore reopened from disk after every save.
struct ReopeningStrataFixture: StoreFixture {
    var description: String { "StrataStore (reopened after every save)" }
    var supportsReopen: Bool { true }

    static let registered: Bool = {
        PersistentStoreCoordinator.registerStoreClass(ReopeningStrataStore.self, type: .reopeningStrata)
        return true
    }()

    func makeStack(model: ManagedObjectModel) throws -> TestStack {
        _ = Self.registered
        let url = StrataFixture.root.appendingPathComponent(UUID().uuidString)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let store = try coordinator.addPersistentStore(type: .reopeningStrata, configuration: nil, at: url, options: [:])
        return TestStack(coordinator: coordinator, store: store, url: url)
    }

    func reopen(_ stack: TestStack) throws -> TestStack {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: stack.coordinator.managedObjectModel)
        let store = try coordinator.addPersistentStore(type: .reopeningStrata, configuration: nil, at: stack.url, options: [:])
        return TestStack(coordinator: coordinator, store: store, url: stack.url)
    }
}

import Testing
import StrataSync

@Suite struct ReopeningStrataFixtureTests {
    @Test func everySaveReallyReopensTheEngineAndKeepsRegisteredRowsPinned() throws {
        let stack = try ReopeningStrataFixture().makeStack(model: try TestModel.make())
        let store = try #require(stack.store as? StrataStore)
        let context = stack.context()
        let ada = try context.makePerson("Ada")
        let before = try #require(store.storageEngine)
        try context.save()
        let after = try #require(store.storageEngine)
        #expect(before !== after, "the save closed the engine and opened the store again")
        #expect(store.rowCacheStats()?.pinnedKeys == 1, "the registered object is pinned in the new engine")
        #expect(try ada.value(forKey: "name") == "Ada")
    }
}

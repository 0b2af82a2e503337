import Dispatch
import Foundation
import ObjectGraph
import Testing

@Suite("Sharing a coordinator across threads")
struct ConcurrencyTests {
    @Test func contextsOnSeveralThreadsShareOneCoordinator() throws {
        let stack = try InMemoryFixture().makeStack(model: try TestModel.make())
        let coordinator = stack.coordinator
        let failures = ErrorCollector()
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            do {
                let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
                for index in 0..<25 {
                    try context.makePerson("p\(worker)-\(index)", age: Int16(index))
                    if index.isMultiple(of: 5) { try context.save() }
                    _ = try context.count(for: FetchRequest(entityName: "Person"))
                }
                try context.save()
            } catch {
                failures.append(error)
            }
        }
        #expect(failures.errors.isEmpty)
        let reader = stack.context()
        #expect(try reader.count(for: FetchRequest(entityName: "Person")) == 200)
        let ids = try reader.fetchObjectIDs(FetchRequest(entityName: "Person"))
        #expect(Set(ids).count == 200, "every insert got its own permanent ID")
        #expect((stack.store as? InMemoryStore)?.bookkeepingErrors.isEmpty == true)
    }
}

/// Collects errors from several threads.
final class ErrorCollector: @unchecked Sendable {
    // @unchecked: `storage` is only touched under `lock`.
    private let lock = NSLock()
    private var storage: [any Error] = []
    func append(_ error: any Error) { lock.withLock { storage.append(error) } }
    var errors: [any Error] { lock.withLock { storage } }
}

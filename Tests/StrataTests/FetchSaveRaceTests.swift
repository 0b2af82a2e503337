import Foundation
import ObjectGraph
@testable import Strata
import Testing

/// A StrataStore whose fetches read their rows, then run `between` (a save elsewhere, in the
/// test), then hand the rows over: the order a fetch racing a save on another thread can see.
final class RacingStrataStore: StrataStore, @unchecked Sendable {
    static let type = PersistentStore.StoreType("RacingStrata")
    /// Runs once, between a fetch's read and its hand-over. Set and used by one test on one
    /// thread (it captures that thread's contexts and objects), hence unchecked.
    nonisolated(unsafe) var between: (() throws -> Void)?

    override func execute(_ request: any PersistentStoreRequest, with context: ManagedObjectContext?) throws -> PersistentStoreResult {
        guard var fetch = request as? FetchRequest, fetch.resultType == .managedObject, let context,
            let hook = between
        else { return try super.execute(request, with: context) }
        between = nil
        fetch.resultType = .managedObjectID
        guard case .objectIDs(let ids) = try super.execute(fetch, with: nil) else { return .objects([]) }
        let nodes = try ids.map { try newValuesForObject(with: $0, with: context) }
        try hook()
        return .objects(objects(for: nodes, in: context, returnsObjectsAsFaults: true))
    }
}

@Suite struct FetchSaveRaceTests {
    // A save that lands after a fetch read its rows but before it returned them: the faults
    // must not keep the rows read before the save (they read the saved ones when they fire).
    @Test func aSaveDuringAFetchIsSeenWhenItsFaultsFire() throws {
        PersistentStoreCoordinator.registerStoreClass(RacingStrataStore.self, type: RacingStrataStore.type)
        let directory = TemporaryStore()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try StoreTestModel.make())
        let store = try #require(try coordinator.addPersistentStore(type: RacingStrataStore.type, at: directory.url) as? RacingStrataStore)
        try StrataStoreTests.populate(coordinator)
        let writer = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let ada = try #require(try writer.fetch(FetchRequest(entityName: "Captain")).first)
        store.between = {
            try ada.setValue(.string("Ada L."), forKey: "name")
            try writer.save()
        }
        let reader = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let found = try reader.fetch(FetchRequest(entityName: "Captain"))
        #expect(store.between == nil, "the save ran inside the fetch")
        #expect(found.count == 1 && found[0].isFault)
        #expect(try found[0].value(forKey: "name") == "Ada L.")
    }
}

import Foundation
import ObjectGraph
@testable import Strata
import StrataEngine
import Testing

/// Issue 17, SPEC.md [IDX-S9]: index entries a model adds are built in the background; the
/// store is usable meanwhile (fetches scan), saves keep the entries right, and a build cut
/// short is finished by the next load.
@Suite struct BackgroundIndexBuildTests {
    static func model(indexed: Bool, constrained: Bool = false, rankIndexed: Bool = false) throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Item", properties: [
                .attribute("code", .string, indexed: indexed),
                .attribute("rank", .integer64, indexed: rankIndexed),
            ], uniquenessConstraints: constrained ? [["code"]] : []),
        ])
    }

    /// A store of `count` items (`code` "c<i>", `rank` i % 7), saved without the index.
    static func store(count: Int) throws -> TemporaryStore {
        let store = TemporaryStore()
        let coordinator = try store.coordinator(model: model(indexed: false))
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for index in 0..<count {
            let item = try context.insertNewObject(forEntityName: "Item")
            try item.setValue(.string("c\(index)"), forKey: "code")
            try item.setValue(.int64(Int64(index % 7)), forKey: "rank")
        }
        try context.save()
        try LightweightMigrationTests.close(coordinator)
        return store
    }

    static func entries(_ store: StrataStore) throws -> Int {
        let prefix = IndexKey.prefix(root: "Item", attribute: "code")
        return try #require(store.storageEngine).snapshot().countKeys(from: prefix, to: StrataStore.prefixEnd(prefix))
    }

    static func options(batch: Int) -> [String: AttributeValue] { [StrataStore.indexBuildBatchOption: .int64(Int64(batch))] }

    // The store answers at once; the entries are complete once the build says so, and the
    // model record then names them.
    @Test func aStoreIsUsableWhileItsNewIndexIsBuilt() throws {
        let temporary = try Self.store(count: 500)
        let coordinator = try temporary.coordinator(model: Self.model(indexed: true), options: Self.options(batch: 50))
        let store = try #require(coordinator.persistentStores.first as? StrataStore)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try context.count(for: LightweightMigrationTests.request("Item", "code == 'c250'")) == 1)
        #expect(try context.count(for: LightweightMigrationTests.request("Item", "code BEGINSWITH 'c49'")) == 11)
        try store.waitForIndexBuild()
        #expect(store.indexBuildProgress == nil)
        #expect(try Self.entries(store) == 500)
        #expect(try context.count(for: LightweightMigrationTests.request("Item", "code == 'c250'")) == 1)
        let record = try ModelRecord.decode(try #require(try store.storageEngine?.get(KeyLayout.modelKey)))
        #expect(try record.entity(named: "Item").attributesByName["code"]?.isIndexed == true)
        try LightweightMigrationTests.expectClean(coordinator)
        try LightweightMigrationTests.close(coordinator)
    }

    // Saves that change, insert and delete indexed values while the build runs leave exactly
    // one right entry per row, whatever the interleaving.
    @Test func savesDuringTheBuildKeepTheEntriesRight() throws {
        let temporary = try Self.store(count: 3_000)
        let coordinator = try temporary.coordinator(model: Self.model(indexed: true), options: Self.options(batch: 100))
        let store = try #require(coordinator.persistentStores.first as? StrataStore)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var request = FetchRequest(entityName: "Item")
        request.predicate = try FetchPredicate(format: "rank == 3")
        for round in 0..<5 {
            let items = try context.fetch(request)
            for item in items.prefix(40) { try item.setValue(.string("r\(round)-\(try item.value(forKey: "code").stringValue ?? "")"), forKey: "code") }
            if let doomed = items.last { context.delete(doomed) }
            let added = try context.insertNewObject(forEntityName: "Item")
            try added.setValue(.string("new\(round)"), forKey: "code")
            try context.save()
        }
        try store.waitForIndexBuild()
        try LightweightMigrationTests.expectClean(coordinator)
        let all = try context.count(for: FetchRequest(entityName: "Item"))
        #expect(try Self.entries(store) == all)
        #expect(try context.count(for: LightweightMigrationTests.request("Item", "code == 'new4'")) == 1)
        try LightweightMigrationTests.close(coordinator)
    }

    // A build cut short (the store closed mid-build, as a crash would leave it: some entries,
    // the record still without the index) is finished by the next load.
    @Test func aBuildCutShortIsFinishedByTheNextLoad() throws {
        let temporary = try Self.store(count: 2_000)
        let first = try temporary.coordinator(model: Self.model(indexed: true), options: Self.options(batch: 10))
        try LightweightMigrationTests.close(first)
        let second = try temporary.coordinator(model: Self.model(indexed: true))
        let store = try #require(second.persistentStores.first as? StrataStore)
        try store.waitForIndexBuild()
        #expect(try Self.entries(store) == 2_000)
        try LightweightMigrationTests.expectClean(second)
        try LightweightMigrationTests.close(second)
    }

    // An index dropped by the model is deleted in the background too.
    @Test func aDroppedIndexIsDeleted() throws {
        let temporary = try Self.store(count: 300)
        let indexed = try temporary.coordinator(model: Self.model(indexed: true))
        try #require(indexed.persistentStores.first as? StrataStore).waitForIndexBuild()
        try LightweightMigrationTests.close(indexed)
        let plain = try temporary.coordinator(model: Self.model(indexed: false), options: Self.options(batch: 25))
        let store = try #require(plain.persistentStores.first as? StrataStore)
        try store.waitForIndexBuild()
        #expect(try Self.entries(store) == 0)
        try LightweightMigrationTests.expectClean(plain)
        try LightweightMigrationTests.close(plain)
    }

    // A drop cut short, then a model that indexes the attribute again: the record never
    // claimed a half-deleted index, so the entries are built again, whole.
    @Test func aDropCutShortIsNotTrustedByAModelThatIndexesAgain() throws {
        let temporary = try Self.store(count: 2_000)
        let indexed = try temporary.coordinator(model: Self.model(indexed: true))
        try #require(indexed.persistentStores.first as? StrataStore).waitForIndexBuild()
        try LightweightMigrationTests.close(indexed)
        let plain = try temporary.coordinator(model: Self.model(indexed: false), options: Self.options(batch: 10))
        try LightweightMigrationTests.close(plain)
        let again = try temporary.coordinator(model: Self.model(indexed: true))
        let store = try #require(again.persistentStores.first as? StrataStore)
        try store.waitForIndexBuild()
        #expect(try Self.entries(store) == 2_000)
        let context = ManagedObjectContext(persistentStoreCoordinator: again)
        #expect(try context.count(for: LightweightMigrationTests.request("Item", "code == 'c1999'")) == 1)
        try LightweightMigrationTests.expectClean(again)
        try LightweightMigrationTests.close(again)
    }

    // A uniqueness constraint is checked through its entries ([SAVE-4]): the migration that
    // adds it builds them in the background, and a save that checks the constraint waits for
    // the build, so it sees every row (here the duplicate is among the last rows built).
    @Test func aSaveCheckingANewConstraintWaitsForItsEntries() throws {
        let temporary = try Self.store(count: 3_000)
        var options = LightweightMigrationTests.migrating
        options[StrataStore.indexBuildBatchOption] = .int64(10)
        let coordinator = try temporary.coordinator(model: Self.model(indexed: false, constrained: true), options: options)
        let store = try #require(coordinator.persistentStores.first as? StrataStore)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let duplicate = try context.insertNewObject(forEntityName: "Item")
        try duplicate.setValue("c2999", forKey: "code")
        let error = try #require(throws: ObjectGraphError.self) { try context.save() }
        #expect(error.code == .constraintConflict)
        #expect(store.indexBuildProgress == nil, "the save waited for the build")
        #expect(try Self.entries(store) == 3_000)
        context.rollback()
        // A save that checks nothing is not held up, and a fresh value goes through.
        let fresh = try context.insertNewObject(forEntityName: "Item")
        try fresh.setValue("new", forKey: "code")
        try context.save()
        try LightweightMigrationTests.expectClean(coordinator)
        try LightweightMigrationTests.close(coordinator)
    }

    // With the build deferred, only the constrained attribute's entries are built by the load
    // (saves check the constraint through them), and only its hierarchy's rows read: an index
    // added with it is left to a later load; the record claims what exists at each step.
    @Test func aDeferredBuildStillBuildsAConstraintsEntriesBeforeTheLoadReturns() throws {
        let temporary = try Self.store(count: 300)
        var options = LightweightMigrationTests.migrating
        options[StrataStore.indexBuildOption] = .string("deferred")
        let coordinator = try temporary.coordinator(
            model: Self.model(indexed: false, constrained: true, rankIndexed: true), options: options)
        let store = try #require(coordinator.persistentStores.first as? StrataStore)
        #expect(try Self.entries(store) == 300)
        let rank = IndexKey.prefix(root: "Item", attribute: "rank")
        let engine = try #require(store.storageEngine)
        #expect(try engine.snapshot().countKeys(from: rank, to: StrataStore.prefixEnd(rank)) == 0, "left to the build")
        #expect(store.indexBuildProgress == 0)
        let claimed = try ModelRecord.decode(try #require(try engine.get(KeyLayout.modelKey))).entity(named: "Item")
        #expect(claimed.attributesByName["code"]?.hasIndexEntries == true)
        #expect(claimed.attributesByName["rank"]?.hasIndexEntries == false, "the record claims only the entries that exist")
        // The constraint holds at once; fetches on rank scan meanwhile.
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let duplicate = try context.insertNewObject(forEntityName: "Item")
        try duplicate.setValue("c7", forKey: "code")
        #expect(throws: ObjectGraphError.self) { try context.save() }
        context.rollback()
        #expect(try context.count(for: LightweightMigrationTests.request("Item", "rank == 3")) == 43)
        try LightweightMigrationTests.expectClean(coordinator)
        try LightweightMigrationTests.close(coordinator)
        // The next load builds rank's entries in the background, and the record then names both.
        let again = try temporary.coordinator(model: Self.model(indexed: false, constrained: true, rankIndexed: true))
        let built = try #require(again.persistentStores.first as? StrataStore)
        try built.waitForIndexBuild()
        let after = try #require(built.storageEngine)
        #expect(try after.snapshot().countKeys(from: rank, to: StrataStore.prefixEnd(rank)) == 300)
        #expect(try ModelRecord.decode(try #require(try after.get(KeyLayout.modelKey))).entity(named: "Item").attributesByName["rank"]?.hasIndexEntries == true)
        try LightweightMigrationTests.expectClean(again)
        try LightweightMigrationTests.close(again)
    }

    // With the option, the load builds the entries itself, as before.
    @Test func theSynchronousOptionBuildsBeforeTheLoadReturns() throws {
        let temporary = try Self.store(count: 100)
        let coordinator = try temporary.coordinator(
            model: Self.model(indexed: true), options: [StrataStore.indexBuildOption: .string("synchronous")])
        let store = try #require(coordinator.persistentStores.first as? StrataStore)
        #expect(try Self.entries(store) == 100)
        try LightweightMigrationTests.close(coordinator)
    }
}

import Foundation
import ObjectGraph
@testable import Strata
import StrataEngine
import Testing

/// Issue 17, SPEC.md [MIG-5]: a to-one made a many-to-many (or an ordered to-many made
/// unordered, keyed by its owners) costs its migration no row read: the keys are pending, every
/// reader adds the members an owner's row of an older layout holds, saves and compaction keep
/// them, and a background build writes them, resumable.
@Suite struct PendingRelationshipKeyTests {
    /// Customer 1—* Purchase (v1), or *—* (v2: `Purchase.customer` made to-many); v3 adds an
    /// attribute to v2.
    static func model(version: Int) throws -> ManagedObjectModel {
        var purchase: [PropertyDescription] = [
            .attribute("total", .integer64),
            version >= 2 ? .toMany("customer", "Customer", inverse: "orders") : .toOne("customer", "Customer", inverse: "orders"),
        ]
        if version >= 3 { purchase.append(.attribute("note", .string)) }
        return try ManagedObjectModel(entities: [
            EntityDescription(name: "Customer", properties: [
                .attribute("name", .string, indexed: true),
                .toMany("orders", "Purchase", inverse: "customer"),
            ]),
            EntityDescription(name: "Purchase", properties: purchase),
        ])
    }

    static let purchases = 12

    /// A v1 store: customers C0…C3; purchase i has total i and customer C(i % 4), except the
    /// last, which has none.
    static func savedStore() throws -> TemporaryStore {
        let store = TemporaryStore()
        let coordinator = try store.coordinator(model: model(version: 1))
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let customers = try (0..<4).map { index in
            let customer = try context.insertNewObject(forEntityName: "Customer")
            try customer.setValue(.string("C\(index)"), forKey: "name")
            return customer
        }
        for index in 0..<purchases {
            let purchase = try context.insertNewObject(forEntityName: "Purchase")
            try purchase.setValue(.int64(Int64(index)), forKey: "total")
            if index < purchases - 1 { try purchase.setValue(customers[index % 4], forKey: "customer") }
        }
        try context.save()
        try LightweightMigrationTests.close(coordinator)
        return store
    }

    static func open(_ store: TemporaryStore, version: Int, build: String = "background", readOnly: Bool = false) throws -> PersistentStoreCoordinator {
        var options = LightweightMigrationTests.migrating
        options[StrataStore.indexBuildOption] = .string(build)
        if readOnly { options[PersistentStore.readOnlyOption] = .bool(true) }
        return try store.coordinator(model: model(version: version), options: options)
    }

    /// Every purchase as `total=customers` (names sorted), by total.
    static func purchaseCustomers(_ coordinator: PersistentStoreCoordinator) throws -> [String] {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var request = FetchRequest(entityName: "Purchase")
        request.sortDescriptors = [FetchSortDescriptor(keyPath: "total", ascending: true)]
        return try context.fetch(request).map { purchase in
            let names = try purchase.objects(forKey: "customer").map { try $0.value(forKey: "name").stringValue ?? "?" }.sorted()
            return "\(try purchase.value(forKey: "total").integer ?? -1)=\(names.joined(separator: ","))"
        }
    }

    /// What v1 held: purchase i with C(i % 4), the last with none.
    static let version1 = (0..<purchases).map { $0 == purchases - 1 ? "\($0)=" : "\($0)=C\($0 % 4)" }

    /// The keys ([REL-1]) of `Purchase.customer` in the store.
    static func customerKeys(_ coordinator: PersistentStoreCoordinator) throws -> Int {
        let prefix = RelationshipKeys.relationshipPrefix(root: "Purchase", relationship: "customer")
        return try LightweightMigrationTests.engine(coordinator).snapshot().countKeys(from: prefix, to: RelationshipKeys.end(of: prefix))
    }

    static func storedRecord(_ coordinator: PersistentStoreCoordinator) throws -> ModelRecord {
        try ModelRecord.decodeRecord(try #require(try LightweightMigrationTests.engine(coordinator).get(KeyLayout.modelKey)))
    }

    static func count(_ coordinator: PersistentStoreCoordinator, _ entity: String, _ format: String) throws -> Int {
        try ManagedObjectContext(persistentStoreCoordinator: coordinator).count(for: LightweightMigrationTests.request(entity, format))
    }

    // The migration writes no key; every reader of the relationship sees the old rows'
    // members: faults, predicates through it (ANY, @count, SUBQUERY), the other side's
    // predicates whose candidates would come from its keys, and fsck.
    @Test func pendingMembersAreReadFromRowsOfTheOlderLayout() throws {
        let store = try Self.savedStore()
        let coordinator = try Self.open(store, version: 2, build: "deferred")
        #expect(try Self.customerKeys(coordinator) == 0, "the migration wrote no key")
        #expect(try Self.storedRecord(coordinator).hasPendingKeys)
        #expect(try Self.purchaseCustomers(coordinator) == Self.version1)
        #expect(try Self.count(coordinator, "Purchase", "customer.@count == 1") == Self.purchases - 1)
        #expect(try Self.count(coordinator, "Purchase", "customer.@count == 0") == 1)
        #expect(try Self.count(coordinator, "Purchase", "ANY customer.name == 'C1'") == 3)
        #expect(try Self.count(coordinator, "Purchase", "SUBQUERY(customer, $c, $c.name BEGINSWITH 'C').@count == 1") == Self.purchases - 1)
        // Customers through their orders: candidates would come from Purchase.customer's keys.
        #expect(try Self.count(coordinator, "Customer", "ANY orders.total == 5") == 1)
        #expect(try Self.count(coordinator, "Customer", "ANY orders.total IN {1, 2}") == 2)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let c2 = try #require(try context.fetch(LightweightMigrationTests.request("Customer", "name == 'C2'")).first)
        #expect(try c2.objects(forKey: "orders").map { try $0.value(forKey: "total").integer ?? -1 }.sorted() == [2, 6, 10])
        try LightweightMigrationTests.expectClean(coordinator)
        let strata = try #require(coordinator.persistentStores.first as? StrataStore)
        #expect(strata.indexBuildProgress == 0)
        #expect(throws: ObjectGraphError.self) { try strata.waitForIndexBuild() }
        try LightweightMigrationTests.close(coordinator)
    }

    // Saves of rows in the older layout (an attribute changed, a member added, one removed,
    // the purchase deleted) put their pending keys: after the saves every member is right,
    // with or without the build, and the build then writes the rest.
    @Test func savesOfOlderRowsKeepTheirPendingMembers() throws {
        let store = try Self.savedStore()
        var expected = Self.version1
        do {
            let coordinator = try Self.open(store, version: 2, build: "deferred")
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            var request = FetchRequest(entityName: "Purchase")
            request.sortDescriptors = [FetchSortDescriptor(keyPath: "total", ascending: true)]
            let purchases = try context.fetch(request)
            let c3 = try #require(try context.fetch(LightweightMigrationTests.request("Customer", "name == 'C3'")).first)
            // 0: an attribute only (its row is rewritten in the new layout).
            try purchases[0].setValue(.int64(100), forKey: "total")
            // 1: a member added; 2: its member removed; 5: one replaced.
            try purchases[1].addObject(c3, toRelationship: "customer")
            try purchases[2].removeObject(try #require(try purchases[2].objects(forKey: "customer").first), fromRelationship: "customer")
            try purchases[5].removeObject(try #require(try purchases[5].objects(forKey: "customer").first), fromRelationship: "customer")
            try purchases[5].addObject(c3, toRelationship: "customer")
            // 4: deleted.
            context.delete(purchases[4])
            try context.save()
            expected[0] = "100=C0"
            expected[1] = "1=C1,C3"
            expected[2] = "2="
            expected[5] = "5=C3"
            expected.remove(at: 4)
            expected.sort { Int($0.split(separator: "=")[0]) ?? 0 < Int($1.split(separator: "=")[0]) ?? 0 }
            #expect(try Self.purchaseCustomers(coordinator) == expected)
            #expect(try Self.count(coordinator, "Customer", "ANY orders.total == 100") == 1)
            try LightweightMigrationTests.expectClean(coordinator)
            try LightweightMigrationTests.close(coordinator)
        }
        // Reopened, still deferred: the saved rows' keys are there, the rest still pending.
        let again = try Self.open(store, version: 2, build: "deferred")
        #expect(try Self.purchaseCustomers(again) == expected)
        #expect(try Self.customerKeys(again) == 4, "100=C0, 1=C1 and C3, 5=C3")
        try LightweightMigrationTests.close(again)
        // Built: every member a key, the record lists nothing pending.
        let built = try Self.open(store, version: 2)
        try #require(built.persistentStores.first as? StrataStore).waitForIndexBuild()
        #expect(try Self.customerKeys(built) == expected.map { $0.split(separator: "=").count == 2 ? $0.split(separator: "=")[1].split(separator: ",").count : 0 }.reduce(0, +))
        #expect(try !Self.storedRecord(built).hasPendingKeys)
        #expect(try Self.purchaseCustomers(built) == expected)
        try LightweightMigrationTests.expectClean(built)
        try LightweightMigrationTests.close(built)
    }

    // The background build writes the keys in batches (resumed from the start after a close
    // that cut it short: puts are idempotent) and ends with the record listing none; readers
    // then read keys alone.
    @Test func theBackgroundBuildWritesEveryPendingKey() throws {
        let store = try Self.savedStore()
        try LightweightMigrationTests.close(try Self.open(store, version: 2, build: "deferred"))
        var options = LightweightMigrationTests.migrating
        options[StrataStore.indexBuildBatchOption] = .int64(3)
        let coordinator = try store.coordinator(model: Self.model(version: 2), options: options)
        let strata = try #require(coordinator.persistentStores.first as? StrataStore)
        #expect(try Self.purchaseCustomers(coordinator) == Self.version1, "while the build runs")
        try strata.waitForIndexBuild()
        #expect(try Self.customerKeys(coordinator) == Self.purchases - 1)
        #expect(try !Self.storedRecord(coordinator).hasPendingKeys)
        #expect(try !strata.storeLayout().hasPendingKeys)
        #expect(try Self.purchaseCustomers(coordinator) == Self.version1)
        #expect(try Self.count(coordinator, "Customer", "ANY orders.total == 5") == 1)
        try LightweightMigrationTests.expectClean(coordinator)
        try LightweightMigrationTests.close(coordinator)
    }

    // The synchronous option writes the keys before the load returns.
    @Test func aSynchronousLoadWritesThePendingKeys() throws {
        let store = try Self.savedStore()
        let coordinator = try Self.open(store, version: 2, build: "synchronous")
        #expect(try Self.customerKeys(coordinator) == Self.purchases - 1)
        #expect(try !Self.storedRecord(coordinator).hasPendingKeys)
        #expect(try Self.purchaseCustomers(coordinator) == Self.version1)
        try LightweightMigrationTests.expectClean(coordinator)
        try LightweightMigrationTests.close(coordinator)
    }

    // Compaction does not rewrite a row that holds pending members in the new layout (which
    // has no field for them): after a full compaction they are still read, and built.
    @Test func compactionKeepsRowsThatHoldPendingMembers() throws {
        let store = try Self.savedStore()
        let coordinator = try Self.open(store, version: 2, build: "deferred")
        let engine = try LightweightMigrationTests.engine(coordinator)
        try engine.flush()
        try engine.compact(.full)
        #expect(try Self.purchaseCustomers(coordinator) == Self.version1)
        try LightweightMigrationTests.expectClean(coordinator)
        try LightweightMigrationTests.close(coordinator)
        let built = try Self.open(store, version: 2)
        try #require(built.persistentStores.first as? StrataStore).waitForIndexBuild()
        #expect(try Self.customerKeys(built) == Self.purchases - 1)
        // Once built, compaction rewrites the rows in the new layout.
        let builtEngine = try LightweightMigrationTests.engine(built)
        try builtEngine.flush()
        try builtEngine.compact(.full)
        let layout = try StoreLayout(record: try Self.storedRecord(built))
        for kind in try StoreSurvey.survey(try builtEngine.snapshot()).rows.keys {
            #expect(layout.layoutsByNumber[Int(kind.number)]?.layoutID == kind.layoutID, "\(kind) is in the newest layout")
        }
        #expect(try Self.purchaseCustomers(built) == Self.version1)
        try LightweightMigrationTests.expectClean(built)
        try LightweightMigrationTests.close(built)
    }

    // A read-only load migrates in memory (the change writes nothing but the two records)
    // and reads the members from the rows; nothing is written.
    @Test func aReadOnlyLoadReadsPendingMembersAndWritesNothing() throws {
        let store = try Self.savedStore()
        let before = try SharedEngine.acquire(path: store.url.path, options: EngineOptions()) { _ in 1 }
        let recordBefore = try before.engine.get(KeyLayout.modelKey)
        before.release()
        let coordinator = try Self.open(store, version: 2, readOnly: true)
        #expect(try Self.purchaseCustomers(coordinator) == Self.version1)
        #expect(try Self.count(coordinator, "Customer", "ANY orders.total == 5") == 1)
        #expect(try LightweightMigrationTests.engine(coordinator).get(KeyLayout.modelKey) == recordBefore)
        try LightweightMigrationTests.close(coordinator)
    }

    // Another migration while keys are pending writes them first (their own transaction),
    // then migrates from the record without them.
    @Test func aLaterMigrationWritesPendingKeysFirst() throws {
        let store = try Self.savedStore()
        try LightweightMigrationTests.close(try Self.open(store, version: 2, build: "deferred"))
        let coordinator = try Self.open(store, version: 3, build: "deferred")
        #expect(try Self.customerKeys(coordinator) == Self.purchases - 1)
        #expect(try !Self.storedRecord(coordinator).hasPendingKeys)
        #expect(try Self.purchaseCustomers(coordinator) == Self.version1)
        try LightweightMigrationTests.expectClean(coordinator)
        try LightweightMigrationTests.close(coordinator)
    }

    // An ordered to-many made unordered, its inverse a to-many: the owners' lists are the
    // pending members.
    @Test func anOrderedToManyMadeUnorderedReadsItsListsUntilBuilt() throws {
        let v1 = LibraryModel(tagsOrdered: true)
        let store = try LightweightMigrationTests.savedStore(v1)
        let v2 = LibraryModel()
        do {
            var options = LightweightMigrationTests.migrating
            options[StrataStore.indexBuildOption] = .string("deferred")
            let coordinator = try store.coordinator(model: v2.make(), options: options)
            #expect(try LightweightMigrationTests.books(coordinator, v2) == LightweightMigrationTests.version1Books)
            #expect(try Self.count(coordinator, "Book", "ANY tags.label == 'odd'") == 2)
            #expect(try Self.count(coordinator, "Book", "tags.@count == 1") == 4)
            try LightweightMigrationTests.expectClean(coordinator)
            try LightweightMigrationTests.close(coordinator)
        }
        let built = try LightweightMigrationTests.open(store, v2)
        try #require(built.persistentStores.first as? StrataStore).waitForIndexBuild()
        #expect(try !Self.storedRecord(built).hasPendingKeys)
        #expect(try LightweightMigrationTests.books(built, v2) == LightweightMigrationTests.version1Books)
        try LightweightMigrationTests.expectClean(built)
        try LightweightMigrationTests.close(built)
    }

    /// Person 1—1 Address (v1), or 1—* (v2: `Person.address` made to-many, its keys an index
    /// of the addresses' to-one, [REL-2]).
    static func peopleModel(toMany: Bool) throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Person", properties: [
                .attribute("name", .string),
                toMany ? .toMany("address", "Address", inverse: "person") : .toOne("address", "Address", inverse: "person"),
            ]),
            // No action: deleting an address leaves its person's row as it is.
            EntityDescription(name: "Address", properties: [
                .attribute("city", .string), .toOne("person", "Person", inverse: "address", deleteRule: .noAction),
            ]),
        ])
    }

    /// Every person as `name=cities` (sorted), by name.
    static func people(_ coordinator: PersistentStoreCoordinator) throws -> [String] {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var request = FetchRequest(entityName: "Person")
        request.sortDescriptors = [FetchSortDescriptor(keyPath: "name", ascending: true)]
        return try context.fetch(request).map { person in
            let cities = try person.objects(forKey: "address").map { try $0.value(forKey: "city").stringValue ?? "?" }.sorted()
            return "\(try person.value(forKey: "name").stringValue ?? "")=\(cities.joined(separator: ","))"
        }
    }

    // A one-to-one made one-to-many: an owner's old row names its member, which counts while
    // the member's row names the owner in its to-one (the truth of a one-to-many): a member
    // deleted since (its owner's row left as it was) is not the owner's; the build indexes
    // the members' to-one.
    @Test func aOneToOneMadeOneToManyChecksItsPendingMembersToOne() throws {
        let store = TemporaryStore()
        do {
            let coordinator = try store.coordinator(model: Self.peopleModel(toMany: false))
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            for (name, city) in [("Ada", "London"), ("Grace", "Arlington"), ("Linus", nil), ("Mary", "Kent"), ("Zoe", "Paris")] {
                let person = try context.insertNewObject(forEntityName: "Person")
                try person.setValue(.string(name), forKey: "name")
                if let city {
                    let address = try context.insertNewObject(forEntityName: "Address")
                    try address.setValue(.string(city), forKey: "city")
                    try person.setValue(address, forKey: "address")
                }
            }
            try context.save()
            try LightweightMigrationTests.close(coordinator)
        }
        var options = LightweightMigrationTests.migrating
        options[StrataStore.indexBuildOption] = .string("deferred")
        let expected = ["Ada=London", "Grace=Arlington", "Linus=", "Mary=Kent", "Zoe=Paris"]
        do {
            let coordinator = try store.coordinator(model: Self.peopleModel(toMany: true), options: options)
            let prefix = RelationshipKeys.relationshipPrefix(root: "Person", relationship: "address")
            #expect(try LightweightMigrationTests.engine(coordinator).snapshot().countKeys(from: prefix, to: RelationshipKeys.end(of: prefix)) == 0)
            #expect(try Self.people(coordinator) == expected)
            #expect(try Self.count(coordinator, "Person", "address.@count == 1") == 4)
            #expect(try Self.count(coordinator, "Person", "ANY address.city == 'Kent'") == 1)
            // The to-one side's null count, which the keys would answer when complete.
            #expect(try Self.count(coordinator, "Address", "person == nil") == 0)
            #expect(try Self.count(coordinator, "Address", "person != nil") == 4)
            #expect(try Self.count(coordinator, "Address", "person.name == 'Grace'") == 1)
            try LightweightMigrationTests.expectClean(coordinator)
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            func person(_ name: String) throws -> ManagedObject {
                try #require(try context.fetch(LightweightMigrationTests.request("Person", "name == '\(name)'")).first)
            }
            // Grace's address moves to Linus; Mary's address is deleted (no action: her row
            // still names it); Ada is renamed (her row rewritten in the new layout, which has no
            // field for the address).
            let moved = try #require(try person("Grace").objects(forKey: "address").first)
            try moved.setValue(try person("Linus"), forKey: "person")
            context.delete(try #require(try person("Mary").objects(forKey: "address").first))
            try person("Ada").setValue(.string("Ada L."), forKey: "name")
            try context.save()
            let after = ["Ada L.=London", "Grace=", "Linus=Arlington", "Mary=", "Zoe=Paris"]
            #expect(try Self.people(coordinator) == after)
            #expect(try Self.count(coordinator, "Person", "address.@count == 1") == 3)
            try LightweightMigrationTests.expectClean(coordinator)
            try LightweightMigrationTests.close(coordinator)
            let built = try store.coordinator(model: Self.peopleModel(toMany: true), options: LightweightMigrationTests.migrating)
            try #require(built.persistentStores.first as? StrataStore).waitForIndexBuild()
            #expect(try LightweightMigrationTests.engine(built).snapshot().countKeys(from: prefix, to: RelationshipKeys.end(of: prefix)) == 3)
            #expect(try !Self.storedRecord(built).hasPendingKeys)
            #expect(try Self.people(built) == after)
            #expect(try Self.count(built, "Address", "person == nil") == 0)
            try LightweightMigrationTests.expectClean(built)
            try LightweightMigrationTests.close(built)
        }
    }

    /// The books' row layouts in the store: how many rows each layout holds.
    static func bookLayouts(_ coordinator: PersistentStoreCoordinator) throws -> [UInt32: Int] {
        var layouts: [UInt32: Int] = [:]
        for (kind, rows) in try StoreSurvey.survey(try LightweightMigrationTests.engine(coordinator).snapshot()).rows where kind.root == "Book" {
            layouts[kind.layoutID, default: 0] += rows
        }
        return layouts
    }

    // An unordered to-many made ordered: a row of the older layout has its keys as its list
    // (faults, predicates, fsck) until the build writes the list into the row; a save of such
    // a row keeps the list, or writes the one the object changed; compaction keeps the rows.
    @Test func anUnorderedToManyMadeOrderedReadsItsKeysAsListsUntilBuilt() throws {
        let store = try LightweightMigrationTests.savedStore()
        let v2 = LibraryModel(tagsOrdered: true)
        var options = LightweightMigrationTests.migrating
        options[StrataStore.indexBuildOption] = .string("deferred")
        let oldLayout = RowLayout.layoutID(of: try LibraryModel().make().entitiesByName["Book"].unwrap())
        do {
            let coordinator = try store.coordinator(model: v2.make(), options: options)
            #expect(try Self.bookLayouts(coordinator)[oldLayout] == 2, "no row rewritten (Book 0, Book 1; the novels are another entity)")
            #expect(try Self.storedRecord(coordinator).hasPendingKeys)
            #expect(try LightweightMigrationTests.books(coordinator, v2) == LightweightMigrationTests.version1Books)
            #expect(try Self.count(coordinator, "Book", "tags.@count == 1") == 4)
            #expect(try Self.count(coordinator, "Book", "ANY tags.label == 'odd'") == 2)
            #expect(try Self.count(coordinator, "Book", "tags.label CONTAINS 'even'") == 2)
            try LightweightMigrationTests.expectClean(coordinator)
            // Book 0 renamed (its list not loaded: kept from the keys); Book 1 gets a second
            // tag after its first (the list loaded, then written).
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            let book0 = try #require(try context.fetch(LightweightMigrationTests.request("Book", "title == 'Book 0'")).first)
            try book0.setValue(.string("Book 0b"), forKey: "title")
            let book1 = try #require(try context.fetch(LightweightMigrationTests.request("Book", "title == 'Book 1'")).first)
            let even = try #require(try context.fetch(LightweightMigrationTests.request("Tag", "label == 'even'")).first)
            try book1.addObject(even, toRelationship: "tags")
            try context.save()
            let engine = try LightweightMigrationTests.engine(coordinator)
            try engine.flush()
            try engine.compact(.full)
            let after = ["Book 0b|nil|Le Guin|even|Book", "Book 1|100|Lem|even,odd|Book"] + LightweightMigrationTests.version1Books.dropFirst(2)
            #expect(try LightweightMigrationTests.books(coordinator, v2) == after)
            let again = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            let reread = try #require(try again.fetch(LightweightMigrationTests.request("Book", "title == 'Book 1'")).first)
            #expect(try reread.objects(forKey: "tags").map { try $0.value(forKey: "label").stringValue ?? "" } == ["odd", "even"], "in the order saved")
            try LightweightMigrationTests.expectClean(coordinator)
            try LightweightMigrationTests.close(coordinator)
        }
        let built = try LightweightMigrationTests.open(store, v2)
        try #require(built.persistentStores.first as? StrataStore).waitForIndexBuild()
        #expect(try !Self.storedRecord(built).hasPendingKeys)
        #expect(try Self.storedRecord(built).retired.isEmpty)
        let prefix = RelationshipKeys.relationshipPrefix(root: "Book", relationship: "tags")
        #expect(try LightweightMigrationTests.engine(built).snapshot().countKeys(from: prefix, to: RelationshipKeys.end(of: prefix)) == 0, "the old keys deleted")
        #expect(try LightweightMigrationTests.books(built, v2) == ["Book 0b|nil|Le Guin|even|Book", "Book 1|100|Lem|even,odd|Book"] + LightweightMigrationTests.version1Books.dropFirst(2))
        try LightweightMigrationTests.expectClean(built)
        try LightweightMigrationTests.close(built)
    }

    // A reader whose snapshot is older than the transaction that wrote the last pending key
    // (a fetch that began before the build ended) still reads the rows' old fields; a newer
    // one reads the keys alone.
    @Test func aSnapshotFromBeforeTheKeysWereWrittenStillReadsTheOldFields() throws {
        let store = try Self.savedStore()
        let coordinator = try Self.open(store, version: 2, build: "deferred")
        let strata = try #require(coordinator.persistentStores.first as? StrataStore)
        let layout = try strata.storeLayout()
        let engine = try LightweightMigrationTests.engine(coordinator)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let purchase = try #require(try context.fetch(LightweightMigrationTests.request("Purchase", "total == 1")).first)
        let reference = try strata.integerReference(purchase.objectID)
        let relationship = try #require(purchase.entity.relationshipsByName["customer"])
        let before = StrataStore.RowSource(snapshot: try engine.snapshot(), store: strata, layout: layout)
        #expect(try before.members(relationship, of: purchase.entity, reference: reference).count == 1)
        _ = try StrataStore.reconcile(in: try strata.sharedEngine(), model: Self.model(version: 2), layout: layout)
        #expect(!layout.hasPendingKeys)
        #expect(try Self.customerKeys(coordinator) == Self.purchases - 1)
        #expect(try before.members(relationship, of: purchase.entity, reference: reference).count == 1, "the old snapshot has no key")
        let after = StrataStore.RowSource(snapshot: try engine.snapshot(), store: strata, layout: layout)
        #expect(try after.members(relationship, of: purchase.entity, reference: reference).count == 1)
        #expect(!layout.keysPending(relationship, in: try engine.snapshot()))
        #expect(layout.keysPending(relationship, in: before.snapshot))
        try LightweightMigrationTests.close(coordinator)
    }

    // `strata inspect` names what a migration left pending, until a build writes it.
    @Test func inspectNamesThePendingKeysAndLists() throws {
        let store = try Self.savedStore()
        try LightweightMigrationTests.close(try Self.open(store, version: 2, build: "deferred"))
        #expect(try StoreInspector.inspect(at: store.url.path).pending == ["Purchase.customer (keys)"])
        let built = try Self.open(store, version: 2)
        try #require(built.persistentStores.first as? StrataStore).waitForIndexBuild()
        try LightweightMigrationTests.close(built)
        #expect(try StoreInspector.inspect(at: store.url.path).pending == [])

        let library = try LightweightMigrationTests.savedStore()
        var options = LightweightMigrationTests.migrating
        options[StrataStore.indexBuildOption] = .string("deferred")
        try LightweightMigrationTests.close(try library.coordinator(model: LibraryModel(tagsOrdered: true).make(), options: options))
        #expect(try StoreInspector.inspect(at: library.url.path).pending == ["Book.tags (list)"])
    }
}

private extension Optional {
    func unwrap() throws -> Wrapped {
        guard let self else { throw ObjectGraphError(.invalidArgument, "nil") }
        return self
    }
}

import Foundation
import ObjectGraph
import Strata
import StrataSync
import Testing

/// A StrataStore that records the relationships it is asked to load.
final class RelationshipCountingStrataStore: StrataStore, @unchecked Sendable {
    // @unchecked: as StrataStore; `loads` is locked.
    static let type = PersistentStore.StoreType("StrataCountingRelationshipLoads")
    static let registered: Bool = {
        PersistentStoreCoordinator.registerStoreClass(RelationshipCountingStrataStore.self, type: type)
        return true
    }()
    /// The names of the relationships loaded, in order.
    let loads = Locked<[String]>([])

    override var type: StoreType { Self.type }

    override func newValue(
        forRelationship relationship: RelationshipDescription, forObjectWith objectID: ManagedObjectID, with context: ManagedObjectContext?
    ) throws -> RelationshipValue {
        loads.withLock { $0.append(relationship.name) }
        return try super.newValue(forRelationship: relationship, forObjectWith: objectID, with: context)
    }
}

/// Inverse maintenance records a change to a to-many relationship whose members are not
/// loaded without loading them (an order deleted leaves each of its products without it; an
/// order given a product joins the product's orders). These check that what the context and
/// the stores see is what loading the members first gave: the relationship's value, the
/// object's state, undo, rollback, refresh, merges and the saved rows.
@Suite("Conformance: member changes of unloaded relationships")
struct UnloadedMembersConformance {
    /// Customer 1—* Order (cascade; nullify), Order *—* Product (nullify both ways).
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Customer", properties: [
                .attribute("name", .string),
                .toMany("orders", "Order", inverse: "customer", deleteRule: .cascade),
            ]),
            EntityDescription(name: "Order", properties: [
                .attribute("number", .integer64),
                .toOne("customer", "Customer", inverse: "orders"),
                .toMany("products", "Product", inverse: "orders"),
            ]),
            EntityDescription(name: "Product", properties: [
                .attribute("sku", .string),
                .toMany("orders", "Order", inverse: "products"),
            ]),
        ])
    }

    /// A customer with `orders` orders, each of every product of `products`; saved.
    static func seed(_ context: ManagedObjectContext, orders: Int, products: Int) throws -> (customer: ManagedObjectID, orders: [ManagedObjectID], products: [ManagedObjectID]) {
        let customer = try context.insertNewObject(forEntityName: "Customer")
        try customer.setValue(.string("Ada"), forKey: "name")
        var productObjects: [ManagedObject] = []
        for index in 0..<products {
            let product = try context.insertNewObject(forEntityName: "Product")
            try product.setValue(.string("P\(index)"), forKey: "sku")
            productObjects.append(product)
        }
        var orderObjects: [ManagedObject] = []
        for index in 0..<orders {
            let order = try context.insertNewObject(forEntityName: "Order")
            try order.setValue(.int64(Int64(index)), forKey: "number")
            try order.setValue(customer, forKey: "customer")
            try order.setValue(productObjects, forKey: "products")
            orderObjects.append(order)
        }
        try context.save()
        return (customer.objectID, orderObjects.map(\.objectID), productObjects.map(\.objectID))
    }

    /// The IDs of an object's members, as a set.
    static func members(_ object: ManagedObject, _ key: String) throws -> Set<ManagedObjectID> {
        Set(try object.objects(forKey: key).map(\.objectID))
    }

    @Test(arguments: allStoreFixtures)
    func deletingAnOrderTakesItOutOfUnloadedProductsBeforeAndAfterTheSave(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try Self.model())
        let seeded = try Self.seed(stack.context(), orders: 5, products: 3)
        let context = stack.context()
        let products = seeded.products.map { context.object(with: $0) }
        let gone = try context.existingObject(with: seeded.orders[2])
        context.delete(gone)
        context.processPendingChanges()
        for product in products {
            #expect(product.isUpdated, "a product whose orders lost one is updated")
            #expect(context.updatedObjects.contains(product))
            #expect(product.changedValues().keys.contains("orders"))
            #expect(product.hasChanges)
        }
        // Read before the save: the members without the deleted order.
        #expect(try Self.members(products[0], "orders") == Set(seeded.orders).subtracting([seeded.orders[2]]))
        try context.save()
        for product in products {
            #expect(!product.hasChanges)
            #expect(try Self.members(product, "orders") == Set(seeded.orders).subtracting([seeded.orders[2]]), "after the save")
        }
        try stack.read { (reader: ManagedObjectContext) throws in
            for id in seeded.products {
                #expect(try Self.members(try reader.existingObject(with: id), "orders") == Set(seeded.orders).subtracting([seeded.orders[2]]))
            }
            #expect(try Self.members(try reader.existingObject(with: seeded.customer), "orders") == Set(seeded.orders).subtracting([seeded.orders[2]]))
        }
    }

    @Test(arguments: allStoreFixtures)
    func cascadeThroughACustomerLeavesProductsWithTheOtherCustomersOrders(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try Self.model())
        let first = try Self.seed(stack.context(), orders: 3, products: 2)
        // A second customer's orders of the same products.
        let setup = stack.context()
        let other = try setup.insertNewObject(forEntityName: "Customer")
        for index in 0..<2 {
            let order = try setup.insertNewObject(forEntityName: "Order")
            try order.setValue(.int64(Int64(100 + index)), forKey: "number")
            try order.setValue(other, forKey: "customer")
            try order.setValue(first.products.map { setup.object(with: $0) }, forKey: "products")
        }
        try setup.save()
        let keptIDs = Set(try setup.fetch(FetchRequest.make("Order", try FetchPredicate(format: "number >= 100"))).map(\.objectID))

        let context = stack.context()
        context.delete(try context.existingObject(with: first.customer))
        try context.save()
        try stack.read { (reader: ManagedObjectContext) throws in
            #expect(try reader.count(for: FetchRequest(entityName: "Order")) == 2)
            for id in first.products {
                #expect(try Self.members(try reader.existingObject(with: id), "orders") == keptIDs)
            }
        }
    }

    @Test(arguments: allStoreFixtures)
    func aNewOrderJoinsUnloadedProductsUnderItsPermanentID(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try Self.model())
        let seeded = try Self.seed(stack.context(), orders: 3, products: 2)
        let context = stack.context()
        let product = context.object(with: seeded.products[1])
        let order = try context.insertNewObject(forEntityName: "Order")
        try order.setValue(.int64(7), forKey: "number")
        try order.setValue([product], forKey: "products")
        #expect(product.isUpdated)
        try context.save()
        #expect(!order.objectID.isTemporaryID)
        #expect(try Self.members(product, "orders") == Set(seeded.orders + [order.objectID]))
        try stack.read { (reader: ManagedObjectContext) throws in
            #expect(try Self.members(try reader.existingObject(with: seeded.products[1]), "orders") == Set(seeded.orders + [order.objectID]))
            #expect(try Self.members(try reader.existingObject(with: seeded.products[0]), "orders") == Set(seeded.orders))
            #expect(try Self.members(try reader.existingObject(with: order.objectID), "products") == [seeded.products[1]])
        }
    }

    @Test(arguments: allStoreFixtures)
    func removingAndAddingBackTheSameOrderLeavesTheProductAsItWas(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try Self.model())
        let seeded = try Self.seed(stack.context(), orders: 3, products: 1)
        let context = stack.context()
        let order = try context.existingObject(with: seeded.orders[0])
        try order.setValue([ManagedObject](), forKey: "products")
        try order.setValue([context.object(with: seeded.products[0])], forKey: "products")
        try context.save()
        try stack.read { (reader: ManagedObjectContext) throws in
            #expect(try Self.members(try reader.existingObject(with: seeded.products[0]), "orders") == Set(seeded.orders))
        }
    }

    @Test(arguments: allStoreFixtures)
    func undoBringsTheDeletedOrderBackIntoUnloadedProducts(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try Self.model())
        let seeded = try Self.seed(stack.context(), orders: 4, products: 2)
        let context = stack.context()
        context.undoManager = ManagedUndoManager()
        let products = seeded.products.map { context.object(with: $0) }
        context.delete(try context.existingObject(with: seeded.orders[1]))
        context.processPendingChanges()
        try context.undo()
        for product in products {
            #expect(try Self.members(product, "orders") == Set(seeded.orders))
        }
        try context.save()
        try stack.read { (reader: ManagedObjectContext) throws in
            #expect(try reader.count(for: FetchRequest(entityName: "Order")) == 4)
            #expect(try Self.members(try reader.existingObject(with: seeded.products[0]), "orders") == Set(seeded.orders))
        }
    }

    @Test(arguments: allStoreFixtures)
    func rollbackAndRefreshDropOrKeepTheUnloadedChanges(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try Self.model())
        let seeded = try Self.seed(stack.context(), orders: 3, products: 2)
        let context = stack.context()
        let products = seeded.products.map { context.object(with: $0) }

        context.delete(try context.existingObject(with: seeded.orders[0]))
        context.processPendingChanges()
        context.rollback()
        #expect(!context.hasChanges)
        #expect(try Self.members(products[0], "orders") == Set(seeded.orders))

        context.delete(try context.existingObject(with: seeded.orders[0]))
        context.processPendingChanges()
        // Merging keeps the pending change over the reloaded members.
        context.refresh(products[0], mergeChanges: true)
        #expect(products[0].isUpdated)
        #expect(try Self.members(products[0], "orders") == Set(seeded.orders).subtracting([seeded.orders[0]]))
        // Not merging drops it (the product alone: the order stays deleted).
        context.refresh(products[1], mergeChanges: false)
        #expect(!products[1].isUpdated)
        #expect(try Self.members(products[1], "orders") == Set(seeded.orders))
    }

    @Test(arguments: allStoreFixtures)
    func anotherContextsSaveOfTheSameProductMergesWithTheUnloadedChange(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try Self.model())
        let seeded = try Self.seed(stack.context(), orders: 3, products: 1)
        let context = stack.context()
        context.mergePolicy = .mergeByPropertyObjectTrump
        let product = context.object(with: seeded.products[0])
        context.delete(try context.existingObject(with: seeded.orders[0]))
        context.processPendingChanges()
        #expect(product.isUpdated)

        // Meanwhile another context adds an order to the product.
        let other = stack.context()
        let added = try other.insertNewObject(forEntityName: "Order")
        try added.setValue([try other.existingObject(with: seeded.products[0])], forKey: "products")
        try other.save()

        try context.save()
        let expected = Set(seeded.orders).subtracting([seeded.orders[0]]).union([added.objectID])
        #expect(try Self.members(product, "orders") == expected)
        try stack.read { (reader: ManagedObjectContext) throws in
            #expect(try Self.members(try reader.existingObject(with: seeded.products[0]), "orders") == expected)
        }
    }

    @Test
    func deletingAnOrderLoadsNeitherItsProductsOrdersNorItsCustomers() throws {
        // A recording in-memory store: nothing loads before the save (its save writes whole
        // values, so it loads them then).
        PersistentStoreCoordinator.registerStoreClass(RecordingStore.self, type: RecordingStore.type)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.model())
        let store = try #require(try coordinator.addPersistentStore(type: RecordingStore.type) as? RecordingStore)
        let seeded = try Self.seed(ManagedObjectContext(persistentStoreCoordinator: coordinator), orders: 4, products: 3)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        store.clear()
        context.delete(try context.existingObject(with: seeded.orders[0]))
        try context.save()
        let beforeSave = store.calls.prefix { if case .save = $0 { return false } else { return true } }
        #expect(!beforeSave.contains(.newRelationship("orders")), "\(store.calls)")
        #expect(store.calls.contains(.save(inserted: [], updated: 4, deleted: 1)), "\(store.calls)")
        let reader = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try Self.members(try reader.existingObject(with: seeded.products[2]), "orders") == Set(seeded.orders.dropFirst()))

        // StrataStore writes the changes as keys: nothing loads, the save included.
        _ = RelationshipCountingStrataStore.registered
        let strata = PersistentStoreCoordinator(managedObjectModel: try Self.model())
        let counting = try #require(try strata.addPersistentStore(
            type: RelationshipCountingStrataStore.type, configuration: nil,
            at: StrataFixture.root.appendingPathComponent(UUID().uuidString), options: [:]) as? RelationshipCountingStrataStore)
        let stored = try Self.seed(ManagedObjectContext(persistentStoreCoordinator: strata), orders: 4, products: 3)
        let deleting = ManagedObjectContext(persistentStoreCoordinator: strata)
        counting.loads.withLock { $0 = [] }
        deleting.delete(try deleting.existingObject(with: stored.orders[0]))
        try deleting.save()
        #expect(!counting.loads.withLock { $0 }.contains("orders"), "\(counting.loads.withLock { $0 })")
        let strataReader = ManagedObjectContext(persistentStoreCoordinator: strata)
        #expect(try Self.members(try strataReader.existingObject(with: stored.products[2]), "orders") == Set(stored.orders.dropFirst()))
        withExtendedLifetime((context, deleting)) {}
    }

    /// Random membership changes through inverse maintenance (orders given products, orders
    /// and products deleted, members read now and then, saves, resets) against a model of
    /// the pairs; after each save a fresh context reads every relationship from the store.
    @Test(arguments: allStoreFixtures, [UInt64(11), 12])
    func randomMembershipChangesMatchASimpleModel(fixture: any StoreFixture, seed: UInt64) throws {
        let stack = try fixture.makeStack(model: try Self.model())
        var random = RandomizedConformance.SeededGenerator(state: seed)
        let seeded = try Self.seed(stack.context(), orders: 6, products: 4)
        var orders = Set(seeded.orders), products = Set(seeded.products)
        // Sets in a fixed order, for a run that depends on the seed alone.
        func sorted(_ ids: Set<ManagedObjectID>) -> [ManagedObjectID] { ids.sorted { $0.description < $1.description } }
        func any(_ ids: Set<ManagedObjectID>) -> ManagedObjectID? {
            ids.isEmpty ? nil : sorted(ids)[random.below(ids.count)]
        }
        func some(_ ids: Set<ManagedObjectID>) -> [ManagedObjectID] { sorted(ids).filter { _ in random.below(2) == 0 } }
        var pairs = Set(seeded.orders.flatMap { order in seeded.products.map { [order, $0] } })
        var context = stack.context()
        func check(_ reader: ManagedObjectContext, _ step: Int) throws {
            for product in products {
                let expected = Set(pairs.filter { $0[1] == product }.map { $0[0] })
                #expect(try Self.members(try reader.existingObject(with: product), "orders") == expected, "step \(step)")
            }
            for order in orders {
                let expected = Set(pairs.filter { $0[0] == order }.map { $0[1] })
                #expect(try Self.members(try reader.existingObject(with: order), "products") == expected, "step \(step)")
            }
        }
        for step in 0..<60 {
            switch random.below(8) {
            case 0, 1:
                // An order's products replaced (adds and removes on unloaded products).
                guard let order = any(orders) else { continue }
                let chosen = some(products)
                try context.existingObject(with: order).setValue(chosen.map { context.object(with: $0) }, forKey: "products")
                pairs = pairs.filter { $0[0] != order }.union(chosen.map { [order, $0] })
            case 2:
                guard let order = any(orders) else { continue }
                context.delete(try context.existingObject(with: order))
                context.processPendingChanges()
                orders.remove(order)
                pairs = pairs.filter { $0[0] != order }
            case 3:
                guard products.count > 1, let product = any(products) else { continue }
                context.delete(try context.existingObject(with: product))
                context.processPendingChanges()
                products.remove(product)
                pairs = pairs.filter { $0[1] != product }
            case 4:
                // A new order of some products.
                let order = try context.insertNewObject(forEntityName: "Order")
                let chosen = some(products)
                try order.setValue(chosen.map { context.object(with: $0) }, forKey: "products")
                try context.obtainPermanentIDs(for: [order])
                orders.insert(order.objectID)
                pairs.formUnion(chosen.map { [order.objectID, $0] })
            case 5:
                // Read in the context (loads whatever was recorded without loading).
                try check(context, step)
            case 6:
                try context.save()
                try stack.read { try check($0, step) }
            default:
                try context.save()
                context = stack.context()
            }
        }
        try context.save()
        try stack.read { try check($0, 60) }
    }
}

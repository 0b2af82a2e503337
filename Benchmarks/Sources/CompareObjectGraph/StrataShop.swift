import BenchmarkSupport
import Foundation
import Strata

/// The shop in a StrataStore, driven the way an app drives Core Data: a coordinator with one
/// store, one context, managed objects, faults, fetch requests and saves.
///
/// Not `Sendable`: like its context, it stays on the thread that made it.
final class StrataShop {
    /// Where the store lives.
    let url: URL
    /// The model (shared by every coordinator the shop opens).
    let model: ManagedObjectModel
    /// StrataStore's durability option: `"full"`, `"normal"` or `"none"`.
    let durability: String
    /// The store's type: StrataStore, or the binary atomic store (which has no durability
    /// option: each save syncs its new file and the directory).
    let type: PersistentStore.StoreType
    private let customerEntity: EntityDescription
    private let orderEntity: EntityDescription
    private let productEntity: EntityDescription
    private var coordinator: PersistentStoreCoordinator
    private var store: IncrementalStore
    /// The context every operation uses.
    private(set) var context: ManagedObjectContext
    /// The coordinator the store is on, for more contexts on the same store (it changes with
    /// ``reopen()``).
    var persistentStoreCoordinator: PersistentStoreCoordinator { coordinator }

    /// The store's keys of the customers, orders and products of ``ShopData`` by index
    /// (filled by ``insert(_:)`` and ``insertInSaves(_:perSave:)``).
    private(set) var customerRefs: [ReferenceObject] = []
    private(set) var orderRefs: [ReferenceObject] = []
    private(set) var productRefs: [ReferenceObject] = []

    /// Opens (or creates) the store at `path` with `durability`; `customerRefs` are the keys
    /// of customers saved earlier, for ``customerName(_:)`` after a reopen.
    init(
        path: String, model: ManagedObjectModel, durability: String, customerRefs: [ReferenceObject] = [],
        type: PersistentStore.StoreType = .strata, options: [String: AttributeValue] = [:]
    ) throws {
        self.customerRefs = customerRefs
        url = URL(fileURLWithPath: path)
        self.model = model
        self.durability = durability
        self.type = type
        customerEntity = try model.entity(named: "Customer")
        orderEntity = try model.entity(named: "Order")
        productEntity = try model.entity(named: "Product")
        (coordinator, store) = try Self.open(url, model: model, durability: durability, type: type, options: options)
        context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
    }

    /// The store, for a StrataStore's own calls (``StrataStore/waitForIndexBuild()``).
    var strataStore: StrataStore? { store as? StrataStore }

    private static func open(
        _ url: URL, model: ManagedObjectModel, durability: String, type: PersistentStore.StoreType, options: [String: AttributeValue] = [:]
    ) throws -> (PersistentStoreCoordinator, IncrementalStore) {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        var all = options
        if type == .strata { all[StrataStore.durabilityOption] = .string(durability) }
        let added = try coordinator.addPersistentStore(type: type, at: url, options: all)
        guard let store = added as? IncrementalStore else {
            throw ObjectGraphComparisonError("open StrataStore", "\(url.path) did not open as an incremental store")
        }
        return (coordinator, store)
    }

    /// Forgets every object and removes the store (StrataStore closes its engine).
    func close() throws {
        context.reset()
        try coordinator.remove(store)
    }

    /// Closes the store, then opens it again with a new coordinator and a new context.
    func reopen() throws {
        try close()
        (coordinator, store) = try Self.open(url, model: model, durability: durability, type: type)
        context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
    }

    /// Opens the store again after ``close()`` (a new coordinator and context) and counts the
    /// orders: what an application's launch does first.
    func openAgainAndCount() throws -> Int {
        (coordinator, store) = try Self.open(url, model: model, durability: durability, type: type)
        context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        return try countOrders()
    }

    /// Forgets every object of the context (the next reads fault from the store).
    func resetContext() { context.reset() }

    // MARK: Inserts

    /// Inserts every product, customer and order of `data` into the context with their
    /// relationships, then saves once. Returns the seconds of the save alone.
    @discardableResult
    func insert(_ data: ShopData) throws -> Double {
        var products: [ManagedObject] = []
        products.reserveCapacity(data.products.count)
        for values in data.products {
            let product = try context.insertNewObject(forEntityName: "Product")
            try product.setValue(.string(values.sku), forKey: "sku")
            try product.setValue(.double(values.price), forKey: "price")
            products.append(product)
        }
        let (customers, orders) = try insertCustomers(data, 0..<data.customers.count, products: products)
        let start = ContinuousClock.now
        try context.save()
        let save = seconds(ContinuousClock.now - start)
        customerRefs = try customers.map { try store.referenceObject(for: $0.objectID) }
        orderRefs = try orders.map { try store.referenceObject(for: $0.objectID) }
        productRefs = try products.map { try store.referenceObject(for: $0.objectID) }
        return save
    }

    /// Saves `data`'s customers (and their orders), `perSave` customers a save; with
    /// `resetting`, forgets the context's objects after each save (a bulk load).
    func insertInSaves(_ data: ShopData, perSave: Int, resetting: Bool = false) throws {
        var first = 0
        while first < data.customers.count {
            let range = first..<min(data.customers.count, first + perSave)
            let (customers, _) = try insertCustomers(data, range, products: [])
            try context.save()
            customerRefs += try customers.map { try store.referenceObject(for: $0.objectID) }
            if resetting { context.reset() }
            first = range.upperBound
        }
    }

    /// Inserts customers `range` of `data` and their orders, linking orders to `products`.
    private func insertCustomers(_ data: ShopData, _ range: Range<Int>, products: [ManagedObject]) throws
        -> (customers: [ManagedObject], orders: [ManagedObject])
    {
        try Self.insertCustomers(data, range, products: products, into: context)
    }

    /// Inserts customers `range` of `data` and their orders into `context`, linking orders to
    /// `products`; call it where `context` may be used (a queue context: in one of its blocks).
    static func insertCustomers(
        _ data: ShopData, _ range: Range<Int>, products: [ManagedObject], into context: ManagedObjectContext
    ) throws -> (customers: [ManagedObject], orders: [ManagedObject]) {
        var customers: [ManagedObject] = []
        var orders: [ManagedObject] = []
        customers.reserveCapacity(range.count)
        orders.reserveCapacity(range.count * Shop.ordersPerCustomer)
        for index in range {
            let values = data.customers[index]
            let customer = try context.insertNewObject(forEntityName: "Customer")
            try customer.setValue(.string(values.name), forKey: "name")
            try customer.setValue(.string(values.name), forKey: "label")
            try customer.setValue(.string(values.city), forKey: "city")
            try customer.setValue(.int64(values.tier), forKey: "tier")
            try customer.setValue(.int64(values.tier), forKey: "level")
            customers.append(customer)
            for orderIndex in index * Shop.ordersPerCustomer..<(index + 1) * Shop.ordersPerCustomer {
                let values = data.orders[orderIndex]
                let order = try context.insertNewObject(forEntityName: "Order")
                try order.setValue(.double(values.total), forKey: "total")
                try order.setValue(.date(Date(timeIntervalSince1970: values.placed)), forKey: "placed")
                try order.setValue(.string(values.status), forKey: "status")
                try order.setValue(customer, forKey: "customer")
                if !values.products.isEmpty {
                    try order.setValue(values.products.map { products[$0] }, forKey: "products")
                }
                orders.append(order)
            }
        }
        return (customers, orders)
    }

    // MARK: Reads

    /// The context's object for `ref` (registered, possibly a fault).
    private func object(_ ref: ObjectRef) throws -> ManagedObject {
        switch ref {
        case .customer(let index): return try context.existingObject(with: customerID(index))
        case .order(let index): return try context.existingObject(with: store.newObjectID(for: orderEntity, referenceObject: orderRefs[index]))
        }
    }

    /// The ID of customer `index` (of ``customerRefs``).
    func customerID(_ index: Int) -> ManagedObjectID {
        store.newObjectID(for: customerEntity, referenceObject: customerRefs[index])
    }

    /// Faults in each object of `refs` by ID and reads its name (customer) or status (order).
    /// Returns the objects (keep them to find them registered in a warm pass) and the strings.
    func fault(_ refs: [ObjectRef]) throws -> (objects: [ManagedObject], values: [String]) {
        var objects: [ManagedObject] = []
        var values: [String] = []
        objects.reserveCapacity(refs.count)
        values.reserveCapacity(refs.count)
        for ref in refs {
            let object = try object(ref)
            let key: String
            if case .customer = ref { key = "name" } else { key = "status" }
            guard case .string(let value) = try object.value(forKey: key) else {
                throw ObjectGraphComparisonError("fault in by ID (Strata)", "\(object.objectID) has no \(key)")
            }
            objects.append(object)
            values.append(value)
        }
        return (objects, values)
    }

    /// The names of the customers `query` matches, in its order.
    func fetch(_ query: CustomerQuery) throws -> [String] {
        var request = FetchRequest(entityName: "Customer")
        request.predicate =
            .equal(query.indexed ? "tier" : "level", .int64(query.tier))
            && .beginsWith(query.indexed ? "name" : "label", query.prefix)
        request.sortDescriptors = [FetchSortDescriptor(keyPath: query.indexed ? "name" : "label")]
        request.fetchLimit = query.limit
        return try context.fetch(request).map { customer in
            guard case .string(let name) = try customer.value(forKey: "name") else {
                throw ObjectGraphComparisonError("fetch (Strata)", "\(customer.objectID) has no name")
            }
            return name
        }
    }

    /// Every customer, as objects (faults until read).
    func fetchAllCustomers() throws -> [ManagedObject] {
        try context.fetch(FetchRequest(entityName: "Customer"))
    }

    /// The number of orders.
    func countOrders() throws -> Int {
        try context.count(for: FetchRequest(entityName: "Order"))
    }

    /// The number of customers.
    func countCustomers() throws -> Int {
        try context.count(for: FetchRequest(entityName: "Customer"))
    }

    /// The number of customers of `tier` (an indexed attribute).
    func countCustomers(tier: Int64) throws -> Int {
        var request = FetchRequest(entityName: "Customer")
        request.predicate = .equal("tier", .int64(tier))
        return try context.count(for: request)
    }

    /// The number of orders with `status` (an indexed attribute).
    func countOrders(status: String) throws -> Int {
        var request = FetchRequest(entityName: "Order")
        request.predicate = .equal("status", .string(status))
        return try context.count(for: request)
    }

    /// The number of customers in `city` (not indexed).
    func countCustomers(city: String) throws -> Int {
        var request = FetchRequest(entityName: "Customer")
        request.predicate = .equal("city", .string(city))
        return try context.count(for: request)
    }

    /// For each customer of `indices`: faults it in, follows `orders` and reads each order's
    /// total. Returns the orders visited and the sum of their totals in cents.
    func traverse(_ indices: [Int]) throws -> (children: Int, cents: Int64) {
        var children = 0
        var sum: Int64 = 0
        for index in indices {
            let customer = try context.existingObject(with: customerID(index))
            for order in try customer.objects(forKey: "orders") {
                guard case .double(let total) = try order.value(forKey: "total") else {
                    throw ObjectGraphComparisonError("traverse (Strata)", "\(order.objectID) has no total")
                }
                children += 1
                sum += cents(total)
            }
        }
        return (children, sum)
    }

    /// The number of orders product `index` is in.
    func ordersOfProduct(_ index: Int) throws -> Int {
        let product = try context.existingObject(with: store.newObjectID(for: productEntity, referenceObject: productRefs[index]))
        return try product.objects(forKey: "orders").count
    }

    // MARK: Writes

    /// Moves each customer of `customers` to the next city and each order of `orders` to the
    /// next status (reading the current value first), then saves once.
    func update(customers: [Int], orders: [Int]) throws {
        for index in customers {
            let customer = try object(.customer(index))
            guard case .string(let city) = try customer.value(forKey: "city") else {
                throw ObjectGraphComparisonError("update (Strata)", "customer \(index) has no city")
            }
            try customer.setValue(.string(nextCity(after: city)), forKey: "city")
        }
        for index in orders {
            let order = try object(.order(index))
            guard case .string(let status) = try order.value(forKey: "status") else {
                throw ObjectGraphComparisonError("update (Strata)", "order \(index) has no status")
            }
            try order.setValue(.string(nextStatus(after: status)), forKey: "status")
        }
        try context.save()
    }

    /// Deletes the customers of `indices` (the model cascades to their orders) and saves once.
    func delete(customers indices: [Int]) throws {
        for index in indices {
            context.delete(try object(.customer(index)))
        }
        try context.save()
    }

    /// Faults in customer `index` and returns its name (after a reopen: the first read).
    func customerName(_ index: Int) throws -> String {
        guard case .string(let name) = try context.existingObject(with: customerID(index)).value(forKey: "name") else {
            throw ObjectGraphComparisonError("read a customer (Strata)", "customer \(index) has no name")
        }
        return name
    }
}

/// The city after `city` in ``Shop/cities``, round.
func nextCity(after city: String) -> String {
    Shop.cities[((Shop.cities.firstIndex(of: city) ?? -1) + 1) % Shop.cities.count]
}

/// The status after `status` in ``Shop/statuses``, round.
func nextStatus(after status: String) -> String {
    Shop.statuses[((Shop.statuses.firstIndex(of: status) ?? -1) + 1) % Shop.statuses.count]
}

/// A fetch of customers: `tier == t AND name BEGINSWITH p`, sorted by name, limited; on the
/// indexed attributes (`tier`, `name`) or on their unindexed copies (`level`, `label`).
struct CustomerQuery {
    /// Whether the predicate and the sort use the indexed attributes.
    var indexed: Bool
    var tier: Int64
    var prefix: String
    var limit: Int

    /// The predicate as Core Data's format string.
    var format: String {
        indexed
            ? "tier == \(tier) AND name BEGINSWITH '\(prefix)' (sorted by name, limit \(limit))"
            : "level == \(tier) AND label BEGINSWITH '\(prefix)' (sorted by label, limit \(limit))"
    }
}

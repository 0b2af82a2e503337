import BenchmarkSupport
import CompareObjectGraph
import Foundation
import Strata

/// The benchmark's model and data: customers with orders, orders with products.
///
/// `Customer` (name and tier indexed; `label` and `level` hold the same values unindexed, for
/// the comparison fetch) 1—* `Order` (status indexed) *—* `Product` (sku indexed).
enum Shop {
    /// Orders per customer everywhere in the report.
    static let ordersPerCustomer = 4
    /// Products per order in the big insert.
    static let productsPerOrder = 2
    /// Objects one customer brings with its orders.
    static let objectsPerCustomer = 1 + ordersPerCustomer

    /// The model.
    static func model() throws -> ManagedObjectModel { try ShopModel.make() }

    /// First letters of customer names: "C" starts one name in 18.
    private static let initials = Array("ABCDEFGHJKLMNPRSTW")
    private static let syllables = ["ra", "lo", "mi", "ne", "ta", "vi", "so", "ka"]
    private static let cities = [
        "Lyon", "Porto", "Ghent", "Turku", "Split", "Graz", "Cork", "Brno", "Pécs", "Bergen",
    ]
    private static let statuses = ["new", "paid", "shipped", "delivered", "returned"]

    /// Customer `index`'s name: a seeded made-up first name and the index, so names are unique.
    static func customerName(_ index: Int, _ random: inout SplitMix64) -> String {
        let initial = initials[Int(random.next() % UInt64(initials.count))]
        let first = syllables[Int(random.next() % UInt64(syllables.count))]
        let second = syllables[Int(random.next() % UInt64(syllables.count))]
        return "\(initial)\(first)\(second) \(index)"
    }

    /// Inserts `count` products (`SKU-<index>`).
    static func insertProducts(_ count: Int, into context: ManagedObjectContext, _ random: inout SplitMix64) throws
        -> [ManagedObject]
    {
        try (0..<count).map { index in
            let product = try context.insertNewObject(forEntityName: "Product")
            try product.setValue(.string("SKU-\(index)"), forKey: "sku")
            try product.setValue(.double(Double(random.next() % 10_000) / 100), forKey: "price")
            return product
        }
    }

    /// Inserts customers `first..<first + count`, each with ``ordersPerCustomer`` orders; each
    /// order gets ``productsPerOrder`` random products of `products` (none if it is empty).
    ///
    /// - Returns: The customers and the orders, in insertion order.
    static func insertCustomers(
        _ range: Range<Int>, products: [ManagedObject], into context: ManagedObjectContext,
        _ random: inout SplitMix64
    ) throws -> [ManagedObject] {
        var inserted: [ManagedObject] = []
        inserted.reserveCapacity(range.count * objectsPerCustomer)
        for index in range {
            let customer = try context.insertNewObject(forEntityName: "Customer")
            let name = customerName(index, &random)
            let tier = Int64(random.next() % 5)
            try customer.setValue(.string(name), forKey: "name")
            try customer.setValue(.string(name), forKey: "label")
            try customer.setValue(.string(cities[Int(random.next() % UInt64(cities.count))]), forKey: "city")
            try customer.setValue(.int64(tier), forKey: "tier")
            try customer.setValue(.int64(tier), forKey: "level")
            inserted.append(customer)
            for number in 0..<ordersPerCustomer {
                let order = try context.insertNewObject(forEntityName: "Order")
                try order.setValue(.double(Double(random.next() % 100_000) / 100), forKey: "total")
                let minutes = Double(index * ordersPerCustomer + number)
                try order.setValue(.date(Date(timeIntervalSince1970: 1_700_000_000 + 60 * minutes)), forKey: "placed")
                try order.setValue(.string(statuses[Int(random.next() % UInt64(statuses.count))]), forKey: "status")
                try order.setValue(customer, forKey: "customer")
                if !products.isEmpty {
                    let chosen = (0..<productsPerOrder).map { _ in products[Int(random.next() % UInt64(products.count))] }
                    try order.setValue(chosen, forKey: "products")
                }
                inserted.append(order)
            }
        }
        return inserted
    }
}

/// The two stores the report compares.
enum StoreKind: CaseIterable {
    case strata, inMemory

    /// The store's class name.
    var name: String { self == .strata ? "StrataStore" : "InMemoryStore" }

    /// Where a store called `name` lives: a directory in `directory` for StrataStore, a
    /// `memory://` URL (rows shared by every store added at it in this process) for
    /// InMemoryStore.
    func url(_ name: String, in directory: TemporaryDirectory) throws -> URL {
        switch self {
        case .strata:
            return URL(fileURLWithPath: directory.appending(name))
        case .inMemory:
            guard let url = URL(string: "memory://bench-\(name)") else { throw BenchmarkError("no URL for \(name)") }
            return url
        }
    }
}

/// A coordinator with one store added at a URL, and a context on it.
///
/// Not `Sendable`: like its context, it stays on the thread that made it.
final class Session {
    /// The coordinator.
    let coordinator: PersistentStoreCoordinator
    /// The one store.
    let store: IncrementalStore
    /// A context on the coordinator.
    let context: ManagedObjectContext

    /// Adds a store of `kind` at `url` to a new coordinator; `durability` is StrataStore's
    /// ``StrataStore/durabilityOption`` (InMemoryStore has none).
    init(_ kind: StoreKind, at url: URL, model: ManagedObjectModel, durability: String = "full") throws {
        coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let added: PersistentStore
        switch kind {
        case .strata:
            added = try coordinator.addPersistentStore(
                type: .strata, at: url, options: [StrataStore.durabilityOption: .string(durability)])
        case .inMemory:
            added = try coordinator.addPersistentStore(type: .inMemory, at: url)
        }
        guard let store = added as? IncrementalStore else { throw BenchmarkError("\(kind.name) is not an incremental store") }
        self.store = store
        context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
    }

    /// The ID in this session's store of an object saved earlier (through any coordinator).
    func objectID(_ saved: SavedObject) -> ManagedObjectID {
        store.newObjectID(for: saved.entity, referenceObject: saved.reference)
    }

    /// The store's engine statistics (StrataStore only).
    func engineStats() -> EngineStats? { try? (store as? StrataStore)?.storageEngine?.stats() }

    /// Forgets every object and removes the store (StrataStore closes its engine).
    func close() throws {
        context.reset()
        try coordinator.remove(store)
    }
}

/// A saved object, independent of the coordinator that saved it.
struct SavedObject {
    /// The object's entity.
    let entity: EntityDescription
    /// The store's key for the object.
    let reference: ReferenceObject

    /// The saved object `object` (whose ID must be permanent) of `store`.
    init(_ object: ManagedObject, in store: IncrementalStore) throws {
        entity = object.entity
        reference = try store.referenceObject(for: object.objectID)
    }
}

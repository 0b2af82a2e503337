import BenchmarkSupport
import Foundation
import Strata

/// The shop model both object-graph benchmarks use (`compare` and `objectgraph-report`).
public enum ShopModel {
    /// `Customer` (name and tier indexed; `label` and `level` unindexed copies) 1—* `Order`
    /// (status indexed) *—* `Product` (sku indexed).
    ///
    /// The migration rows (issue 17) open a store of this model with two later versions:
    /// `loyalty` adds an optional string attribute to `Customer`, `cityIndexed` indexes its
    /// `city`, `orderName` renames `Order` (its renaming identifier says so), `party` puts
    /// an abstract `Party` above `Customer`, `customersToMany` makes an order's `customer`
    /// a to-many (customers and orders then many-to-many), `refunds` adds a subentity
    /// `Refund` of the order entity (with a `reason`), `refundsApart` makes `Refund` a root of
    /// its own instead (its order attributes its own, without relationships), `ordersOrdered`
    /// makes a customer's `orders` ordered and `labelUnique` gives `Customer` a uniqueness
    /// constraint on `label`.
    public static func make(
        loyalty: Bool = false, cityIndexed: Bool = false, orderName: String = "Order", party: Bool = false,
        customersToMany: Bool = false, refunds: Bool = false, refundsApart: Bool = false, ordersOrdered: Bool = false,
        labelUnique: Bool = false
    ) throws -> ManagedObjectModel {
        let refund = refundsApart
            ? [EntityDescription(name: "Refund", properties: [
                .attribute("total", .double), .attribute("placed", .date), .attribute("status", .string, indexed: true),
                .attribute("reason", .string),
            ])]
            : refunds ? [EntityDescription(name: "Refund", superentity: orderName, properties: [.attribute("reason", .string)])] : []
        return try ManagedObjectModel(entities: (party ? [EntityDescription(name: "Party", isAbstract: true)] : []) + refund + [
            EntityDescription(
                name: "Customer", superentity: party ? "Party" : nil,
                properties: [
                    .attribute("name", .string, indexed: true),
                    .attribute("label", .string),
                    .attribute("city", .string, indexed: cityIndexed),
                    .attribute("tier", .integer64, indexed: true),
                    .attribute("level", .integer64),
                    .toMany("orders", orderName, inverse: "customer", ordered: ordersOrdered, deleteRule: .cascade),
                ] + (loyalty ? [.attribute("loyalty", .string)] : []),
                uniquenessConstraints: labelUnique ? [["label"]] : []),
            EntityDescription(
                name: orderName,
                properties: [
                    .attribute("total", .double),
                    .attribute("placed", .date),
                    .attribute("status", .string, indexed: true),
                    customersToMany ? .toMany("customer", "Customer", inverse: "orders") : .toOne("customer", "Customer", inverse: "orders"),
                    .toMany("products", "Product", inverse: "orders"),
                ], renamingIdentifier: orderName == "Order" ? nil : "Order"),
            EntityDescription(
                name: "Product",
                properties: [
                    .attribute("sku", .string, indexed: true),
                    .attribute("price", .double),
                    .toMany("orders", orderName, inverse: "products"),
                ]),
        ])
    }
}

/// The comparison's model and data: customers with orders, orders with products
/// (``ShopModel``). Both systems store exactly these values: the data is generated once as
/// plain Swift values from one seed, then inserted into each.
enum Shop {
    /// Orders per customer.
    static let ordersPerCustomer = 4
    /// Products per order (distinct) when the data has products.
    static let productsPerOrder = 2
    /// Objects one customer brings with its orders.
    static let objectsPerCustomer = 1 + ordersPerCustomer

    /// The Core Data model StrataStore holds.
    static func model() throws -> ManagedObjectModel { try ShopModel.make() }

    /// First letters of customer names: "C" starts one name in 18.
    static let initials = Array("ABCDEFGHJKLMNPRSTW")
    static let syllables = ["ra", "lo", "mi", "ne", "ta", "vi", "so", "ka"]
    static let cities = ["Lyon", "Porto", "Ghent", "Turku", "Split", "Graz", "Cork", "Brno", "Pécs", "Bergen"]
    static let statuses = ["new", "paid", "shipped", "delivered", "returned"]
    /// Seconds since 1970 of the first order.
    static let firstPlaced = 1_700_000_000.0
}

/// One customer's values (`label` and `level` repeat `name` and `tier`).
struct CustomerValues: Equatable {
    var name: String
    var city: String
    var tier: Int64
}

/// One order's values; `customer` and `products` are indices into ``ShopData``'s arrays.
struct OrderValues: Equatable {
    var total: Double
    /// Seconds since 1970.
    var placed: Double
    var status: String
    var customer: Int
    var products: [Int]
}

/// One product's values.
struct ProductValues: Equatable {
    var sku: String
    var price: Double
}

/// A data set both systems insert: products, then customers each followed by their
/// ``Shop/ordersPerCustomer`` orders (order `i` belongs to customer `i / 4`).
struct ShopData {
    var products: [ProductValues] = []
    var customers: [CustomerValues] = []
    var orders: [OrderValues] = []

    /// Every object.
    var objectCount: Int { products.count + customers.count + orders.count }

    /// About `objects` objects: one product in 100 and customers with their orders for the
    /// rest; each order gets ``Shop/productsPerOrder`` distinct random products.
    static func graph(objects: Int, seed: UInt64) -> ShopData {
        let productCount = max(Shop.productsPerOrder, objects / 100)
        let customerCount = max(1, (objects - productCount) / Shop.objectsPerCustomer)
        var random = SplitMix64(seed: seed)
        var data = ShopData()
        data.products = (0..<productCount).map { index in
            ProductValues(sku: "SKU-\(index)", price: Double(random.next() % 10_000) / 100)
        }
        data.appendCustomers(0..<customerCount, productCount: productCount, &random)
        return data
    }

    /// Customers `range` with their orders and no products (the saves and the reopen store).
    static func customers(_ range: Range<Int>, seed: UInt64) -> ShopData {
        var random = SplitMix64(seed: seed)
        var data = ShopData()
        data.appendCustomers(range, productCount: 0, &random)
        return data
    }

    /// Appends customers `range` (numbered in their names) and their orders; orders pick
    /// products among the first `productCount`.
    mutating func appendCustomers(_ range: Range<Int>, productCount: Int, _ random: inout SplitMix64) {
        customers.reserveCapacity(customers.count + range.count)
        orders.reserveCapacity(orders.count + range.count * Shop.ordersPerCustomer)
        for index in range {
            let initial = Shop.initials[Int(random.next() % UInt64(Shop.initials.count))]
            let first = Shop.syllables[Int(random.next() % UInt64(Shop.syllables.count))]
            let second = Shop.syllables[Int(random.next() % UInt64(Shop.syllables.count))]
            let city = Shop.cities[Int(random.next() % UInt64(Shop.cities.count))]
            let tier = Int64(random.next() % 5)
            let customer = customers.count
            customers.append(CustomerValues(name: "\(initial)\(first)\(second) \(index)", city: city, tier: tier))
            for number in 0..<Shop.ordersPerCustomer {
                let total = Double(random.next() % 100_000) / 100
                let status = Shop.statuses[Int(random.next() % UInt64(Shop.statuses.count))]
                var chosen: [Int] = []
                while chosen.count < min(Shop.productsPerOrder, productCount) {
                    let product = Int(random.next() % UInt64(productCount))
                    if !chosen.contains(product) { chosen.append(product) }
                }
                let minutes = Double(index * Shop.ordersPerCustomer + number)
                orders.append(
                    OrderValues(
                        total: total, placed: Shop.firstPlaced + 60 * minutes, status: status, customer: customer,
                        products: chosen))
            }
        }
    }
}

/// Which row of which entity: an index into ``ShopData``'s arrays, the same object in both
/// systems.
enum ObjectRef: Hashable {
    case customer(Int)
    case order(Int)
}

/// An order total in whole cents, so sums compare exactly across systems.
func cents(_ total: Double) -> Int64 { Int64((total * 100).rounded()) }

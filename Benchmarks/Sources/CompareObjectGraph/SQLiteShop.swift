import Foundation
import GRDB

/// A customer row as an app would read it.
struct CustomerRow: FetchableRecord {
    var id: Int64
    var name: String
    var label: String
    var city: String
    var tier: Int64
    var level: Int64

    /// The columns ``init(row:)`` reads, in order.
    static let columns = "id, name, label, city, tier, level"

    init(row: Row) {
        id = row[0]
        name = row[1]
        label = row[2]
        city = row[3]
        tier = row[4]
        level = row[5]
    }
}

/// An order row as an app would read it (with its customer's ID, the to-one).
struct OrderRow: FetchableRecord {
    var id: Int64
    var total: Double
    var placed: Date
    var status: String
    var customerID: Int64

    /// The columns ``init(row:)`` reads, in order.
    static let columns = "id, total, placed, status, customerId"

    init(row: Row) {
        id = row[0]
        total = row[1]
        placed = Date(timeIntervalSince1970: row[2])
        status = row[3]
        customerID = row[4]
    }
}

/// The shop in SQLite through GRDB, set up as a careful SQLite user would: WAL, one table per
/// entity with `INTEGER PRIMARY KEY` ids, a `WITHOUT ROWID` join table for orders and products
/// with a composite primary key and an index on its second column, an index on every foreign
/// key and on the attributes StrataStore indexes (name, tier, status, sku), foreign keys
/// enforced with `ON DELETE CASCADE`, cached prepared statements, a 64 MiB page cache (the
/// engine's row cache budget), and `ANALYZE` after the bulk load.
final class SQLiteShop {
    /// The database file.
    let path: String
    /// `"FULL"` or `"NORMAL"`: PRAGMA synchronous.
    let synchronous: String
    private var queue: DatabaseQueue

    /// The IDs of the customers, orders and products of ``ShopData`` by index.
    private(set) var customerIDs: [Int64] = []
    private(set) var orderIDs: [Int64] = []
    private(set) var productIDs: [Int64] = []

    /// The schema.
    static let schema = """
        CREATE TABLE IF NOT EXISTS customers (
            id INTEGER PRIMARY KEY, name TEXT NOT NULL, label TEXT NOT NULL, city TEXT NOT NULL,
            tier INTEGER NOT NULL, level INTEGER NOT NULL);
        CREATE INDEX IF NOT EXISTS customers_name ON customers(name);
        CREATE INDEX IF NOT EXISTS customers_tier ON customers(tier);
        CREATE TABLE IF NOT EXISTS products (id INTEGER PRIMARY KEY, sku TEXT NOT NULL, price REAL NOT NULL);
        CREATE INDEX IF NOT EXISTS products_sku ON products(sku);
        CREATE TABLE IF NOT EXISTS orders (
            id INTEGER PRIMARY KEY, total REAL NOT NULL, placed REAL NOT NULL, status TEXT NOT NULL,
            customerId INTEGER REFERENCES customers(id) ON DELETE CASCADE);
        CREATE INDEX IF NOT EXISTS orders_status ON orders(status);
        CREATE INDEX IF NOT EXISTS orders_customerId ON orders(customerId);
        CREATE TABLE IF NOT EXISTS order_products (
            orderId INTEGER NOT NULL REFERENCES orders(id) ON DELETE CASCADE,
            productId INTEGER NOT NULL REFERENCES products(id) ON DELETE CASCADE,
            PRIMARY KEY (orderId, productId)) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS order_products_productId ON order_products(productId);
        """

    /// Creates the database at `path` with the schema; `synchronous` is `"FULL"` or `"NORMAL"`.
    init(path: String, synchronous: String) throws {
        self.path = path
        self.synchronous = synchronous
        queue = try Self.open(path, synchronous: synchronous)
        try queue.inDatabase { db in try db.execute(sql: Self.schema) }
    }

    /// Opens the existing database at `path` (no schema statements); `existingCustomerIDs`
    /// are the IDs of the customers saved earlier, for ``customerName(_:)``.
    init(path: String, synchronous: String, existingCustomerIDs: [Int64]) throws {
        self.path = path
        self.synchronous = synchronous
        customerIDs = existingCustomerIDs
        queue = try Self.open(path, synchronous: synchronous)
    }

    /// The connection settings of every shop database: foreign keys on, a 64 MB page cache.
    static func configuration() -> Configuration {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA cache_size = -65536")
        }
        return configuration
    }

    /// Checks that `db` is in WAL mode (`set`: puts it there first) and sets `synchronous`
    /// (`"FULL"` or `"NORMAL"`), checking that it took.
    static func useWAL(_ db: Database, path: String, synchronous: String, set: Bool) throws {
        let mode = try String.fetchOne(db, sql: set ? "PRAGMA journal_mode = WAL" : "PRAGMA journal_mode")
        guard mode == "wal" else {
            throw ObjectGraphComparisonError("open SQLite", "\(path): journal_mode is \(mode ?? "nil"), not wal")
        }
        try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
        let level = try Int.fetchOne(db, sql: "PRAGMA synchronous")
        let expected = synchronous == "FULL" ? 2 : 1
        guard level == expected else {
            throw ObjectGraphComparisonError("open SQLite", "\(path): synchronous is \(level ?? -1), not \(synchronous)")
        }
    }

    private static func open(_ path: String, synchronous: String) throws -> DatabaseQueue {
        let queue = try DatabaseQueue(path: path, configuration: configuration())
        // After opening: GRDB's own `.wal` journal mode would set synchronous to NORMAL.
        try queue.inDatabase { db in try useWAL(db, path: path, synchronous: synchronous, set: true) }
        return queue
    }

    /// Closes the connection.
    func close() throws { try queue.close() }

    /// Runs `sql` (a schema change of the migration rows).
    func execute(_ sql: String) throws {
        try queue.inDatabase { db in try db.execute(sql: sql) }
    }

    /// Closes the connection and opens a new one (an empty page cache, no cached statements).
    func reopen() throws {
        try queue.close()
        queue = try Self.open(path, synchronous: synchronous)
    }

    /// Gathers statistics for the query planner, as a careful user does after a bulk load.
    func analyze() throws {
        try queue.inDatabase { db in try db.execute(sql: "ANALYZE") }
    }

    // MARK: Inserts

    /// Inserts every product, customer and order of `data` and the order–product links, in one
    /// transaction.
    func insert(_ data: ShopData) throws {
        try queue.inDatabase { db in
            try db.inTransaction {
                let product = try db.cachedStatement(sql: "INSERT INTO products (sku, price) VALUES (?, ?)")
                var productIDs: [Int64] = []
                productIDs.reserveCapacity(data.products.count)
                for values in data.products {
                    try product.execute(arguments: [values.sku, values.price])
                    productIDs.append(db.lastInsertedRowID)
                }
                self.productIDs = productIDs
                try insertCustomers(db, data, 0..<data.customers.count)
                return .commit
            }
        }
    }

    /// Saves `data`'s customers (and their orders), `perSave` customers a transaction.
    func insertInSaves(_ data: ShopData, perSave: Int) throws {
        try queue.inDatabase { db in
            var first = 0
            while first < data.customers.count {
                let range = first..<min(data.customers.count, first + perSave)
                try db.inTransaction {
                    try insertCustomers(db, data, range)
                    return .commit
                }
                first = range.upperBound
            }
        }
    }

    /// Inserts customers `range` of `data`, their orders, and the orders' product links.
    private func insertCustomers(_ db: Database, _ data: ShopData, _ range: Range<Int>) throws {
        try Self.insertCustomers(
            db, data, range, productIDs: productIDs, customerIDs: &customerIDs, orderIDs: &orderIDs)
    }

    /// Inserts customers `range` of `data`, their orders, and the orders' links to
    /// `productIDs` (``ShopData``'s products by index) on `db`, appending the new rows' IDs to
    /// `customerIDs` and `orderIDs`.
    static func insertCustomers(
        _ db: Database, _ data: ShopData, _ range: Range<Int>, productIDs: [Int64], customerIDs: inout [Int64],
        orderIDs: inout [Int64]
    ) throws {
        let customer = try db.cachedStatement(
            sql: "INSERT INTO customers (name, label, city, tier, level) VALUES (?, ?, ?, ?, ?)")
        let order = try db.cachedStatement(
            sql: "INSERT INTO orders (total, placed, status, customerId) VALUES (?, ?, ?, ?)")
        let link = try db.cachedStatement(sql: "INSERT INTO order_products (orderId, productId) VALUES (?, ?)")
        customerIDs.reserveCapacity(customerIDs.count + range.count)
        orderIDs.reserveCapacity(orderIDs.count + range.count * Shop.ordersPerCustomer)
        for index in range {
            let values = data.customers[index]
            try customer.execute(arguments: [values.name, values.name, values.city, values.tier, values.tier])
            let customerID = db.lastInsertedRowID
            customerIDs.append(customerID)
            for orderIndex in index * Shop.ordersPerCustomer..<(index + 1) * Shop.ordersPerCustomer {
                let values = data.orders[orderIndex]
                try order.execute(arguments: [values.total, values.placed, values.status, customerID])
                let orderID = db.lastInsertedRowID
                orderIDs.append(orderID)
                for product in values.products {
                    try link.execute(arguments: [orderID, productIDs[product]])
                }
            }
        }
    }

    // MARK: Reads

    /// Loads each object of `refs` by primary key into a row value and reads its name
    /// (customer) or status (order).
    func fault(_ refs: [ObjectRef]) throws -> [String] {
        try queue.inDatabase { db in
            let customer = try db.cachedStatement(sql: "SELECT \(CustomerRow.columns) FROM customers WHERE id = ?")
            let order = try db.cachedStatement(sql: "SELECT \(OrderRow.columns) FROM orders WHERE id = ?")
            var values: [String] = []
            values.reserveCapacity(refs.count)
            for ref in refs {
                switch ref {
                case .customer(let index):
                    guard let row = try CustomerRow.fetchOne(customer, arguments: [customerIDs[index]]) else {
                        throw ObjectGraphComparisonError("fault in by ID (SQLite)", "no customer \(customerIDs[index])")
                    }
                    values.append(row.name)
                case .order(let index):
                    guard let row = try OrderRow.fetchOne(order, arguments: [orderIDs[index]]) else {
                        throw ObjectGraphComparisonError("fault in by ID (SQLite)", "no order \(orderIDs[index])")
                    }
                    values.append(row.status)
                }
            }
            return values
        }
    }

    /// Runs `query` `times` times (or until `deadline`, at least once) and returns how many
    /// times it ran and the names of the first run.
    ///
    /// `BEGINSWITH p` is `column >= p AND column < p'` where `p'` is `p` with its last
    /// character incremented: the range form SQLite's planner serves from an index.
    func fetch(_ query: CustomerQuery, times: Int, until deadline: ContinuousClock.Instant) throws -> (runs: Int, names: [String]) {
        let (filter, sort) = query.indexed ? ("tier", "name") : ("level", "label")
        let sql = """
            SELECT \(CustomerRow.columns) FROM customers
            WHERE \(filter) = ? AND \(sort) >= ? AND \(sort) < ? ORDER BY \(sort) LIMIT ?
            """
        let upper = try prefixUpperBound(query.prefix)
        return try queue.inDatabase { db in
            let statement = try db.cachedStatement(sql: sql)
            let arguments: StatementArguments = [query.tier, query.prefix, upper, query.limit]
            var first: [String]?
            var runs = 0
            repeat {
                let names = try CustomerRow.fetchAll(statement, arguments: arguments).map(\.name)
                if first == nil { first = names } else if names.count != first?.count {
                    throw ObjectGraphComparisonError("fetch (SQLite)", "returned \(first?.count ?? 0), then \(names.count) rows")
                }
                runs += 1
            } while runs < times && ContinuousClock.now < deadline
            return (runs, first ?? [])
        }
    }

    /// Runs `sql` (a count with `arguments`) `times` times or until `deadline` (at least
    /// once); returns the runs and the count.
    func count(_ sql: String, arguments: StatementArguments = [], times: Int, until deadline: ContinuousClock.Instant)
        throws -> (runs: Int, count: Int)
    {
        try queue.inDatabase { db in
            let statement = try db.cachedStatement(sql: sql)
            var runs = 0
            var result = 0
            repeat {
                guard let counted = try Int.fetchOne(statement, arguments: arguments) else {
                    throw ObjectGraphComparisonError("count (SQLite)", "\(sql) returned no row")
                }
                if runs > 0 && counted != result {
                    throw ObjectGraphComparisonError("count (SQLite)", "\(sql) returned \(result), then \(counted)")
                }
                result = counted
                runs += 1
            } while runs < times && ContinuousClock.now < deadline
            return (runs, result)
        }
    }

    /// One count.
    func count(_ sql: String, arguments: StatementArguments = []) throws -> Int {
        try count(sql, arguments: arguments, times: 1, until: .now).count
    }

    /// For each customer of `indices`: loads it by primary key, then its orders by foreign
    /// key, reading each order's total. Returns the orders visited and the sum in cents.
    func traverse(_ indices: [Int]) throws -> (children: Int, cents: Int64) {
        try queue.inDatabase { db in
            let customer = try db.cachedStatement(sql: "SELECT \(CustomerRow.columns) FROM customers WHERE id = ?")
            let orders = try db.cachedStatement(sql: "SELECT \(OrderRow.columns) FROM orders WHERE customerId = ?")
            var children = 0
            var sum: Int64 = 0
            for index in indices {
                guard let parent = try CustomerRow.fetchOne(customer, arguments: [customerIDs[index]]) else {
                    throw ObjectGraphComparisonError("traverse (SQLite)", "no customer \(customerIDs[index])")
                }
                for order in try OrderRow.fetchAll(orders, arguments: [parent.id]) {
                    children += 1
                    sum += cents(order.total)
                }
            }
            return (children, sum)
        }
    }

    /// The number of orders product `index` is in.
    func ordersOfProduct(_ index: Int) throws -> Int {
        try count("SELECT COUNT(*) FROM order_products WHERE productId = ?", arguments: [productIDs[index]])
    }

    // MARK: Writes

    /// In one transaction: loads each customer of `customers` by primary key and moves it to the
    /// next city, and each order of `orders` to the next status (what fault, change and save
    /// do in the object graph).
    func update(customers: [Int], orders: [Int]) throws {
        try queue.inDatabase { db in
            try db.inTransaction {
                let selectCustomer = try db.cachedStatement(sql: "SELECT \(CustomerRow.columns) FROM customers WHERE id = ?")
                let updateCustomer = try db.cachedStatement(sql: "UPDATE customers SET city = ? WHERE id = ?")
                let selectOrder = try db.cachedStatement(sql: "SELECT \(OrderRow.columns) FROM orders WHERE id = ?")
                let updateOrder = try db.cachedStatement(sql: "UPDATE orders SET status = ? WHERE id = ?")
                for index in customers {
                    guard let row = try CustomerRow.fetchOne(selectCustomer, arguments: [customerIDs[index]]) else {
                        throw ObjectGraphComparisonError("update (SQLite)", "no customer \(customerIDs[index])")
                    }
                    try updateCustomer.execute(arguments: [nextCity(after: row.city), row.id])
                }
                for index in orders {
                    guard let row = try OrderRow.fetchOne(selectOrder, arguments: [orderIDs[index]]) else {
                        throw ObjectGraphComparisonError("update (SQLite)", "no order \(orderIDs[index])")
                    }
                    try updateOrder.execute(arguments: [nextStatus(after: row.status), row.id])
                }
                return .commit
            }
        }
    }

    /// Deletes the customers of `indices` in one transaction; `ON DELETE CASCADE` removes their
    /// orders and those orders' product links.
    func delete(customers indices: [Int]) throws {
        try queue.inDatabase { db in
            try db.inTransaction {
                let delete = try db.cachedStatement(sql: "DELETE FROM customers WHERE id = ?")
                for index in indices {
                    try delete.execute(arguments: [customerIDs[index]])
                    guard db.changesCount == 1 else {
                        throw ObjectGraphComparisonError("delete (SQLite)", "customer \(customerIDs[index]) was not there")
                    }
                }
                return .commit
            }
        }
    }

    /// Loads customer `index` by primary key and returns its name.
    func customerName(_ index: Int) throws -> String {
        try queue.inDatabase { db in
            let statement = try db.cachedStatement(sql: "SELECT \(CustomerRow.columns) FROM customers WHERE id = ?")
            guard let row = try CustomerRow.fetchOne(statement, arguments: [customerIDs[index]]) else {
                throw ObjectGraphComparisonError("read a customer (SQLite)", "no customer \(customerIDs[index])")
            }
            return row.name
        }
    }
}

/// The smallest string greater than every string that begins with `prefix`: `prefix` with its
/// last Unicode scalar incremented.
func prefixUpperBound(_ prefix: String) throws -> String {
    var scalars = Array(prefix.unicodeScalars)
    guard let last = scalars.popLast(), let next = Unicode.Scalar(last.value + 1) else {
        throw ObjectGraphComparisonError("fetch (SQLite)", "no upper bound for the prefix \"\(prefix)\"")
    }
    scalars.append(next)
    var result = ""
    result.unicodeScalars.append(contentsOf: scalars)
    return result
}

import BenchmarkSupport
import Foundation
import GRDB
import ObjectGraph
import Strata

// MARK: Model versions (issue 17)

extension ShopModel {
    /// Opens the StrataStore at `url` under `model` (one with a Refund subentity of the
    /// order entity) and saves `count` refunds into it (status "refunded"), then closes it.
    static func insertRefunds(_ count: Int, model: ManagedObjectModel, at url: URL) throws {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let store = try coordinator.addPersistentStore(type: .strata, at: url, options: [StrataStore.durabilityOption: .string("normal")])
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for index in 0..<count {
            let refund = try context.insertNewObject(forEntityName: "Refund")
            try refund.setValue(.double(Double(index)), forKey: "total")
            try refund.setValue(.string("refunded"), forKey: "status")
            try refund.setValue(.string("damaged"), forKey: "reason")
        }
        try context.save()
        try coordinator.remove(store)
    }
}

extension ObjectGraphRun {
    /// Opening a store of ``ObjectGraphComparisonSettings/reopenRows`` rows after two model
    /// changes, beside the same change in SQLite: an attribute added (StrataStore migrates in
    /// place, writing two records; SQLite `ALTER TABLE ADD COLUMN`), then an index added
    /// (StrataStore builds it in the background; SQLite `CREATE INDEX`). Each row times the
    /// open to the first answers an application needs (a count and one customer by ID), and
    /// the index row also the time until the index is complete. Then two changes of a
    /// hierarchy's root: an entity renamed (SQLite `ALTER TABLE RENAME`) and a new abstract
    /// superentity (SQLite: the entity column its table gains).
    mutating func migration() throws {
        let built = try buildStores("migration", seed: 0x3160)
        let customers = built.customers, rowCount = built.rowCount, probe = customers / 2
        let strataPath = built.strataPath, sqlitePath = built.sqlitePath, refs = built.strataRefs, ids = built.sqliteIDs
        let migrate: [String: AttributeValue] = [
            PersistentStore.migratePersistentStoresAutomaticallyOption: .bool(true),
            PersistentStore.inferMappingModelAutomaticallyOption: .bool(true),
        ]

        // The same store opened unchanged, for the note: the migration should cost about this.
        var clock = StepClock()
        let unchanged = try StrataShop(path: strataPath, model: model, durability: "normal", customerRefs: refs)
        _ = try unchanged.countCustomers()
        _ = try unchanged.customerName(probe)
        clock.step()
        try unchanged.close()
        let unchangedOpen = clock.steps[0]

        // 1. An optional attribute added.
        let v2 = try ShopModel.make(loyalty: true)
        clock = StepClock()
        let strata = try StrataShop(path: strataPath, model: v2, durability: "normal", customerRefs: refs, options: migrate)
        clock.step()
        let strataCount = try strata.countCustomers()
        let strataName = try strata.customerName(probe)
        clock.step()
        try strata.close()
        var sqliteClock = StepClock()
        let sqlite = try SQLiteShop(path: sqlitePath, synchronous: "NORMAL", existingCustomerIDs: ids)
        try sqlite.execute("ALTER TABLE customers ADD COLUMN loyalty TEXT")
        sqliteClock.step()
        let sqliteCount = try sqlite.count("SELECT COUNT(*) FROM customers")
        let sqliteName = try sqlite.customerName(probe)
        sqliteClock.step()
        try sqlite.close()
        try check("migration: customers counted", strata: strataCount, sqlite: sqliteCount)
        try check("migration: customer \(probe)'s name", strata: strataName, sqlite: sqliteName)
        add(
            "open a store of \(thousands(rowCount)) rows after adding an attribute, to the first count and fetch", unit: "s",
            higherIsBetter: false, strata: clock.steps.reduce(0, +), sqlite: sqliteClock.steps.reduce(0, +),
            note: "Customer gains an optional string attribute. Strata: a new coordinator adds the store with the migrate and infer options and migrates it in place (two records written, no row; [MIG-1]): open \(fixed(clock.steps[0] * 1000, 1)) ms, then a count and one customer faulted in by ID \(fixed(clock.steps[1] * 1000, 1)) ms; the same open of the unchanged store took \(fixed(unchangedOpen * 1000, 1)) ms with its count and fetch. SQLite: a new connection and ALTER TABLE customers ADD COLUMN loyalty TEXT (\(fixed(sqliteClock.steps[0] * 1000, 1)) ms), then the same count and fetch. \(Self.normal).")

        // 2. An index added on Customer.city: the store answers at once, the index is built
        // behind it.
        let v3 = try ShopModel.make(loyalty: true, cityIndexed: true)
        clock = StepClock()
        let indexed = try StrataShop(path: strataPath, model: v3, durability: "normal", customerRefs: refs, options: migrate)
        _ = try indexed.countCustomers()
        let firstName = try indexed.customerName(probe)
        clock.step()
        try indexed.strataStore?.waitForIndexBuild()
        clock.step()
        let strataCity = try indexed.countCustomers(city: Shop.cities[3])
        try indexed.close()
        sqliteClock = StepClock()
        let sqliteIndexed = try SQLiteShop(path: sqlitePath, synchronous: "NORMAL", existingCustomerIDs: ids)
        try sqliteIndexed.execute("CREATE INDEX customers_city ON customers(city)")
        sqliteClock.step()
        _ = try sqliteIndexed.count("SELECT COUNT(*) FROM customers")
        let sqliteFirstName = try sqliteIndexed.customerName(probe)
        sqliteClock.step()
        let sqliteCity = try sqliteIndexed.count("SELECT COUNT(*) FROM customers WHERE city = ?", arguments: [Shop.cities[3]])
        try sqliteIndexed.close()
        try check("migration: customer \(probe)'s name after the index", strata: firstName, sqlite: sqliteFirstName)
        try check("migration: customers of \(Shop.cities[3])", strata: strataCity, sqlite: sqliteCity)
        let strataFirst = clock.steps[0], strataComplete = clock.steps[0] + clock.steps[1]
        let sqliteFirst = sqliteClock.steps.reduce(0, +), sqliteComplete = sqliteClock.steps[0]
        add(
            "open a store of \(thousands(rowCount)) rows after adding an index, to the first count and fetch", unit: "s",
            higherIsBetter: false, strata: strataFirst, sqlite: sqliteFirst,
            note: "Customer.city becomes indexed. Strata: the store is added, counted and one customer fetched while the index is built in the background ([IDX-S9]). SQLite: a new connection runs CREATE INDEX customers_city ON customers(city), which the count and fetch wait for. \(Self.normal).")
        add(
            "open a store of \(thousands(rowCount)) rows after adding an index, until the index is complete", unit: "s",
            higherIsBetter: false, strata: strataComplete, sqlite: sqliteComplete,
            note: "From the open until StrataStore.waitForIndexBuild() returns (\(customers) customers read in batches of 2,000, each batch a transaction), against SQLite's open and CREATE INDEX. Both then count the customers of \(Shop.cities[3]) through the index (\(strataCity)). \(Self.normal).")

        // 3. A hierarchy root renamed: Order becomes Purchase (its renaming identifier says so).
        // 4. A new root level: an abstract Party above Customer. Each is timed from the open to
        // the first answers, counts through an index of the changed hierarchy.
        let v4 = try ShopModel.make(loyalty: true, cityIndexed: true, orderName: "Purchase")
        let v5 = try ShopModel.make(loyalty: true, cityIndexed: true, orderName: "Purchase", party: true)
        let status = Shop.statuses[1]
        func openAndCount(
            _ model: ManagedObjectModel, entity: String, _ predicate: FetchPredicate
        ) throws -> (open: Double, answer: Double, count: Int, complete: Double) {
            var clock = StepClock()
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            var options = migrate
            options[StrataStore.durabilityOption] = .string("normal")
            let store = try coordinator.addPersistentStore(type: .strata, at: URL(fileURLWithPath: strataPath), options: options)
            clock.step()
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            var request = FetchRequest(entityName: entity)
            request.predicate = predicate
            let count = try context.count(for: request)
            clock.step()
            try (store as? StrataStore)?.waitForIndexBuild()
            clock.step()
            try coordinator.remove(store)
            return (clock.steps[0], clock.steps[1], count, clock.steps.reduce(0, +))
        }
        /// SQLite's side of a change: a new connection runs `change`, then the count `query`
        /// (with `arguments`), the two timed together.
        func sqliteChange(_ change: String, then query: String, _ arguments: StatementArguments) throws -> (seconds: Double, count: Int) {
            let sqlite = try SQLiteShop(path: sqlitePath, synchronous: "NORMAL", existingCustomerIDs: ids)
            var clock = StepClock()
            try sqlite.execute(change)
            let count = try sqlite.count(query, arguments: arguments)
            clock.step()
            try sqlite.close()
            return (clock.steps[0], count)
        }
        // The same store opened unchanged just before each change: what opening costs here
        // (the index build above left its batches in the log, which an open replays).
        let beforeRename = try openAndCount(v3, entity: "Order", .equal("status", .string(status)))
        let renamed = try openAndCount(v4, entity: "Purchase", .equal("status", .string(status)))
        let sqliteRename = try sqliteChange("ALTER TABLE orders RENAME TO purchases", then: "SELECT COUNT(*) FROM purchases WHERE status = ?", [status])
        try check("migration: purchases \(status)", strata: renamed.count, sqlite: sqliteRename.count)
        add(
            "open a store of \(thousands(rowCount)) rows after renaming an entity, to the first count", unit: "s",
            higherIsBetter: false, strata: renamed.open + renamed.answer, sqlite: sqliteRename.seconds,
            note: "Order (\(customers * Shop.ordersPerCustomer) rows, the root of its hierarchy) becomes Purchase through its renaming identifier; then the purchases whose status is \(status) are counted through the status index. Strata: open \(fixed(renamed.open * 1000, 1)) ms (the hierarchy keeps its key space, so two records are written and no key moves, [MIG-1]), count \(fixed(renamed.answer * 1000, 1)) ms; the same open and count of the unchanged store just before took \(fixed((beforeRename.open + beforeRename.answer) * 1000, 1)) ms. SQLite: ALTER TABLE orders RENAME TO purchases, then the same count. \(Self.normal).")

        let beforeLevel = try openAndCount(v4, entity: "Customer", .equal("tier", .int64(3)))
        let levelled = try openAndCount(v5, entity: "Customer", .equal("tier", .int64(3)))
        let sqliteLevel = try sqliteChange("ALTER TABLE customers ADD COLUMN kind INTEGER NOT NULL DEFAULT 1", then: "SELECT COUNT(*) FROM customers WHERE tier = ?", [3])
        try check("migration: customers of tier 3 under Party", strata: levelled.count, sqlite: sqliteLevel.count)
        add(
            "open a store of \(thousands(rowCount)) rows after adding a superentity, to the first count", unit: "s",
            higherIsBetter: false, strata: levelled.open + levelled.answer, sqlite: sqliteLevel.seconds,
            note: "Customer (\(customers) rows) gets an abstract superentity Party, the new root of its hierarchy; then the customers of tier 3 are counted through the tier index. Strata: open \(fixed(levelled.open * 1000, 1)) ms (no key moves), count \(fixed(levelled.answer * 1000, 1)) ms; unchanged just before, \(fixed((beforeLevel.open + beforeLevel.answer) * 1000, 1)) ms. SQLite, which keeps a hierarchy in one table: the entity column that table gains (ALTER TABLE customers ADD COLUMN kind INTEGER NOT NULL DEFAULT 1), then the same count. \(Self.normal).")

        // 6. A to-one made to-many: an order's customer becomes a to-many, so customers and
        // orders are many-to-many and the orders' side gets its keys ([REL-1]), pending until
        // the background build writes them from the rows ([MIG-5]).
        let v6 = try ShopModel.make(loyalty: true, cityIndexed: true, orderName: "Purchase", party: true, customersToMany: true)
        let beforeToMany = try openAndCount(v5, entity: "Customer", .equal("tier", .int64(3)))
        let toMany = try openAndCount(v6, entity: "Customer", .equal("tier", .int64(3)))
        let sqliteToMany = try sqliteChange("""
            CREATE TABLE purchase_customers(purchase INTEGER NOT NULL, customer INTEGER NOT NULL, PRIMARY KEY (purchase, customer)) WITHOUT ROWID;
            INSERT INTO purchase_customers SELECT id, customerId FROM purchases;
            CREATE INDEX purchase_customers_customer ON purchase_customers(customer)
            """, then: "SELECT COUNT(*) FROM customers WHERE tier = ?", [3])
        try check("migration: customers of tier 3 after the to-many", strata: toMany.count, sqlite: sqliteToMany.count)
        add(
            "open a store of \(thousands(rowCount)) rows after making a to-one to-many, to the first count", unit: "s",
            higherIsBetter: false, strata: toMany.open + toMany.answer, sqlite: sqliteToMany.seconds,
            note: "Purchase.customer (a to-one, the inverse of Customer.orders) becomes a to-many: customers and purchases are then many-to-many; the \(customers * Shop.ordersPerCustomer) purchases' keys ([REL-1]) are pending ([MIG-5]: the migration writes the two records, readers take a purchase's customer from its old row until the background build has written the keys); Customer.orders keeps its keys. Strata: open \(fixed(toMany.open * 1000, 1)) ms, count \(fixed(toMany.answer * 1000, 1)) ms; unchanged just before, \(fixed((beforeToMany.open + beforeToMany.answer) * 1000, 1)) ms. SQLite, where a many-to-many is a join table: the table created and filled from the purchases' customer column, with an index for the other direction, then the same count. \(Self.normal).")
        add(
            "open a store of \(thousands(rowCount)) rows after making a to-one to-many, until the keys are complete", unit: "s",
            higherIsBetter: false, strata: toMany.complete, sqlite: sqliteToMany.seconds,
            note: "From the open until StrataStore.waitForIndexBuild() returns: the purchases' rows read in batches of 2,000 (each a transaction) and a key put for each one's customer, then the record written without the pending keys. SQLite: the same join table and count as above (its keys are complete when the count runs). \(Self.normal).")

        // 7. A subentity removed: Refund (a subentity of Purchase, added just before and given
        // a row per ten purchases) goes again; its rows are retired ([MIG-4]): readers skip
        // them, and the background build deletes them with every key naming them.
        let v7 = try ShopModel.make(loyalty: true, cityIndexed: true, orderName: "Purchase", party: true, customersToMany: true, refunds: true)
        let refunds = max(1, rowCount / 10)
        /// Refund added to the store (the migration to `v7`), then given `refunds` rows; as
        /// many refund rows in SQLite's purchases (untimed).
        func addRefunds() throws {
            _ = try openAndCount(v7, entity: "Purchase", .equal("status", .string(status)))
            try ShopModel.insertRefunds(refunds, model: v7, at: URL(fileURLWithPath: strataPath))
            _ = try sqliteChange("""
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(refunds))
                INSERT INTO purchases (total, placed, status) SELECT -i, 0, 'refunded' FROM n
                """, then: "SELECT COUNT(*) FROM purchases", [])
        }
        try addRefunds()
        let beforeRemoval = try openAndCount(v7, entity: "Purchase", .equal("status", .string(status)))
        let removed = try openAndCount(v6, entity: "Purchase", .equal("status", .string(status)))
        let sqliteRemoval = try sqliteChange("DELETE FROM purchases WHERE total < 0", then: "SELECT COUNT(*) FROM purchases WHERE status = ?", [status])
        try check("migration: purchases \(status) after removing Refund", strata: removed.count, sqlite: sqliteRemoval.count)
        add(
            "open a store of \(thousands(rowCount)) rows after removing a subentity, to the first count", unit: "s",
            higherIsBetter: false, strata: removed.open + removed.answer, sqlite: sqliteRemoval.seconds,
            note: "Refund, a subentity of Purchase (added by the migration just before, then given \(refunds) rows), is removed: its rows are retired ([MIG-4]: the migration writes the two records; readers skip the rows by their headers, and counts that indexes would answer alone read rows until the background build has deleted them with their index entries); then the purchases whose status is \(status) are counted. Strata: open \(fixed(removed.open * 1000, 1)) ms, count \(fixed(removed.answer * 1000, 1)) ms; unchanged just before, \(fixed((beforeRemoval.open + beforeRemoval.answer) * 1000, 1)) ms. SQLite, which keeps a hierarchy in one table (given as many refund rows): the delete of a kind's rows (DELETE FROM purchases WHERE total < 0, through a scan of the table), then the same count. \(Self.normal).")
        add(
            "open a store of \(thousands(rowCount)) rows after removing a subentity, until its rows are deleted", unit: "s",
            higherIsBetter: false, strata: removed.complete, sqlite: sqliteRemoval.seconds,
            note: "From the open until StrataStore.waitForIndexBuild() returns: the Purchase hierarchy's row headers read for the \(refunds) Refund rows, then their index entries, every relationship key owned by one or naming one, and the rows deleted in batches of 2,000 keys read (each a transaction). SQLite: the same delete and count as above. \(Self.normal).")

        // 7b. An entity moved out of its hierarchy: Refund, given its rows again, becomes a root
        // of its own ([MIG-1]): its rows and index entries move to a key space of their own.
        try addRefunds()
        let v7apart = try ShopModel.make(loyalty: true, cityIndexed: true, orderName: "Purchase", party: true, customersToMany: true, refundsApart: true)
        let beforeSplit = try openAndCount(v7, entity: "Purchase", .equal("status", .string(status)))
        let split = try openAndCount(v7apart, entity: "Purchase", .equal("status", .string(status)))
        let sqliteSplit = try sqliteChange("""
            CREATE TABLE refunds AS SELECT id, total, placed, status FROM purchases WHERE total < 0;
            CREATE INDEX refunds_status ON refunds(status);
            DELETE FROM purchases WHERE total < 0
            """, then: "SELECT COUNT(*) FROM purchases WHERE status = ?", [status])
        try check("migration: purchases \(status) after moving Refund out", strata: split.count, sqlite: sqliteSplit.count)
        add(
            "open a store of \(thousands(rowCount)) rows after moving an entity out of its hierarchy, to the first count", unit: "s",
            higherIsBetter: false, strata: split.open + split.answer, sqlite: sqliteSplit.seconds,
            note: "Refund, a subentity of Purchase given \(refunds) rows, becomes a root entity of its own (its order attributes its own): the migration scans the Purchase hierarchy's row headers and moves the Refund rows with their status index entries to a key space of their own, in its transaction ([MIG-1]); then the purchases whose status is \(status) are counted. Strata: open \(fixed(split.open * 1000, 1)) ms, count \(fixed(split.answer * 1000, 1)) ms; unchanged just before, \(fixed((beforeSplit.open + beforeSplit.answer) * 1000, 1)) ms. SQLite, which keeps a hierarchy in one table: the refunds copied into a table of their own (CREATE TABLE refunds AS SELECT …, its status index) and deleted from purchases, then the same count. \(Self.normal).")
        // (Refund goes again before the next change.)
        _ = try openAndCount(v6, entity: "Purchase", .equal("status", .string(status)))

        // 8. An unordered to-many made ordered: each customer's orders, keys until now, are its
        // list until the background build writes them into its row ([MIG-5]).
        let v8 = try ShopModel.make(loyalty: true, cityIndexed: true, orderName: "Purchase", party: true, customersToMany: true, ordersOrdered: true)
        let beforeOrdering = try openAndCount(v6, entity: "Customer", .equal("tier", .int64(3)))
        let ordered = try openAndCount(v8, entity: "Customer", .equal("tier", .int64(3)))
        let sqliteOrdering = try sqliteChange(
            "ALTER TABLE purchase_customers ADD COLUMN position INTEGER NOT NULL DEFAULT 0", then: "SELECT COUNT(*) FROM customers WHERE tier = ?", [3])
        try check("migration: customers of tier 3 after ordering", strata: ordered.count, sqlite: sqliteOrdering.count)
        add(
            "open a store of \(thousands(rowCount)) rows after making a to-many ordered, to the first count", unit: "s",
            higherIsBetter: false, strata: ordered.open + ordered.answer, sqlite: sqliteOrdering.seconds,
            note: "Customer.orders (unordered: keys, [REL-1]) becomes ordered: the migration writes the two records; a customer's list is its keys until the background build has rewritten the \(customers) customers' rows with their \(Shop.ordersPerCustomer) orders as a list ([MIG-5]); then the customers of tier 3 are counted. Strata: open \(fixed(ordered.open * 1000, 1)) ms, count \(fixed(ordered.answer * 1000, 1)) ms; unchanged just before, \(fixed((beforeOrdering.open + beforeOrdering.answer) * 1000, 1)) ms; until the lists are written \(fixed(ordered.complete * 1000, 1)) ms. SQLite: the join table gains a position column (ALTER TABLE purchase_customers ADD COLUMN position), then the same count. \(Self.normal).")

        // 9. A uniqueness constraint added on Customer.label (unindexed, unique values): the
        // migration checks it over the rows ([MIG-1]); its index entries, through which saves
        // check it ([SAVE-4]), are built in the background.
        let v9 = try ShopModel.make(
            loyalty: true, cityIndexed: true, orderName: "Purchase", party: true, customersToMany: true, ordersOrdered: true, labelUnique: true)
        let beforeConstraint = try openAndCount(v8, entity: "Customer", .equal("tier", .int64(3)))
        let constrained = try openAndCount(v9, entity: "Customer", .equal("tier", .int64(3)))
        let sqliteConstraint = try sqliteChange(
            "CREATE UNIQUE INDEX customers_label ON customers(label)", then: "SELECT COUNT(*) FROM customers WHERE tier = ?", [3])
        try check("migration: customers of tier 3 after the constraint", strata: constrained.count, sqlite: sqliteConstraint.count)
        add(
            "open a store of \(thousands(rowCount)) rows after adding a uniqueness constraint, to the first count", unit: "s",
            higherIsBetter: false, strata: constrained.open + constrained.answer, sqlite: sqliteConstraint.seconds,
            note: "Customer.label (unindexed) gets a uniqueness constraint, part of Customer's version hash: the migration reads the \(customers) customers' labels to check that no two are equal ([MIG-1]: a duplicate fails it, as in Core Data), writes the two records, and the load returns; the index entries ([IDX-S1]) through which saves check the constraint ([SAVE-4]: a save with values to check waits for them) are built in the background; then the customers of tier 3 are counted. Strata: open \(fixed(constrained.open * 1000, 1)) ms, count \(fixed(constrained.answer * 1000, 1)) ms; unchanged just before, \(fixed((beforeConstraint.open + beforeConstraint.answer) * 1000, 1)) ms. SQLite: CREATE UNIQUE INDEX customers_label ON customers(label), which checks and indexes at once, then the same count. \(Self.normal).")
        add(
            "open a store of \(thousands(rowCount)) rows after adding a uniqueness constraint, until its entries are complete", unit: "s",
            higherIsBetter: false, strata: constrained.complete, sqlite: sqliteConstraint.seconds,
            note: "From the open until StrataStore.waitForIndexBuild() returns: the check above, then the \(customers) customers' rows read in batches of 2,000 (each a transaction) and an index entry put for each label. SQLite: the same unique index and count as above. \(Self.normal).")
    }
}

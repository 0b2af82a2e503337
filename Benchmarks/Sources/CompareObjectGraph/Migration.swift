import BenchmarkSupport
import Foundation
import ObjectGraph
import Strata

// MARK: Model versions (issue 17)

extension ObjectGraphRun {
    /// Opening a store of ``ObjectGraphComparisonSettings/reopenRows`` rows after two model
    /// changes, beside the same change in SQLite: an attribute added (StrataStore migrates in
    /// place, writing two records; SQLite `ALTER TABLE ADD COLUMN`), then an index added
    /// (StrataStore builds it in the background; SQLite `CREATE INDEX`). Each row times the
    /// open to the first answers an application needs (a count and one customer by ID), and
    /// the index row also the time until the index is complete.
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
    }
}

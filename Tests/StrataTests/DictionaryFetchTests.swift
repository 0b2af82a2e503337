import Foundation
import ObjectGraph
import Strata
import Testing

/// Dictionary fetches that a StrataStore answers its own way: distinct values of an indexed
/// attribute read from the index ([IDX-S8]), and grouping and aggregates computed on columns
/// of values (`FetchRequest.dictionaries(fromColumns:)`). An InMemoryStore holding the same
/// objects is the oracle: for every attribute type an index encodes exactly and one it does
/// not, nulls, repeated and canonically equivalent strings, subentities, sorts, limits, and
/// functions of key paths through to-ones.
@Suite struct DictionaryFetchTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Region", properties: [
                .attribute("name", .string, indexed: true),
                .toMany("shops", "Shop", inverse: "region"),
            ]),
            EntityDescription(name: "Shop", properties: [
                .attribute("city", .string, indexed: true),
                .attribute("rank", .integer32, indexed: true),
                .attribute("open", .boolean, indexed: true),
                .attribute("since", .date, indexed: true),
                .attribute("code", .uuid, indexed: true),
                .attribute("rating", .double, indexed: true),
                .attribute("revenue", .double),
                .toOne("region", "Region", inverse: "shops"),
            ]),
            EntityDescription(name: "Kiosk", superentity: "Shop", properties: [
                .attribute("stand", .string, indexed: true),
            ]),
        ])
    }

    /// The same objects in each store, inserted in the same order.
    static func populate(_ coordinator: PersistentStoreCoordinator) throws {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var regions: [ManagedObject] = []
        for name in ["North", "South", "south", nil] as [String?] {
            let region = try context.insertNewObject(forEntityName: "Region")
            if let name { try region.setValue(.string(name), forKey: "name") }
            regions.append(region)
        }
        // Precomposed and decomposed "é": equal strings, one NFC index key.
        let cities: [String?] = ["Oslo", "Caf\u{E9}", "Cafe\u{301}", "Bergen", nil, "oslo", "Oslo", "Zürich"]
        let codes = (0..<5).map { UUID(uuid: (UInt8($0), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)) }
        for index in 0..<48 {
            let shop = try context.insertNewObject(forEntityName: index % 6 == 0 ? "Kiosk" : "Shop")
            if let city = cities[index % cities.count] { try shop.setValue(.string(city), forKey: "city") }
            if index % 7 != 3 { try shop.setValue(.int32(Int32(index % 9 - 4)), forKey: "rank") }
            if index % 5 != 1 { try shop.setValue(.bool(index % 3 == 0), forKey: "open") }
            if index % 4 != 2 { try shop.setValue(.date(Date(timeIntervalSinceReferenceDate: Double(index % 6) * 86_400)), forKey: "since") }
            if index % 8 != 5 { try shop.setValue(.uuid(codes[index % codes.count]), forKey: "code") }
            try shop.setValue(.double([0.5, -0.0, 0.0, 2.25, 0.5][index % 5]), forKey: "rating")
            try shop.setValue(.double(Double(index) * 10.5), forKey: "revenue")
            if index % 10 != 9 { try shop.setValue(regions[index % regions.count], forKey: "region") }
            if index % 6 == 0, index % 12 != 6 { try shop.setValue(.string(["A", "B", "A"][index % 3]), forKey: "stand") }
        }
        try context.save()
    }

    /// Both coordinators, populated.
    static func stores() throws -> (reference: PersistentStoreCoordinator, strata: PersistentStoreCoordinator, keep: TemporaryStore) {
        try pairedStores(model: model(), populate: populate)
    }

    /// An InMemoryStore's coordinator and a StrataStore's for `model`, each populated by
    /// `populate` (the same objects in the same order).
    static func pairedStores(
        model: ManagedObjectModel, populate: (PersistentStoreCoordinator) throws -> Void
    ) throws -> (reference: PersistentStoreCoordinator, strata: PersistentStoreCoordinator, keep: TemporaryStore) {
        let reference = PersistentStoreCoordinator(managedObjectModel: model)
        try reference.addPersistentStore(type: .inMemory, configuration: nil, at: nil, options: [:])
        let store = TemporaryStore()
        let strata = try store.coordinator(model: model)
        try populate(reference)
        try populate(strata)
        return (reference, strata, store)
    }

    /// The results of `request` as text, one line per dictionary with its keys in order
    /// (values keep their exact form: "Café" precomposed and decomposed differ here).
    static func lines(_ request: FetchRequest, _ coordinator: PersistentStoreCoordinator) throws -> [String] {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        return try context.fetchDictionaries(request).map { row in
            row.keys.sorted().map { key in
                let value = row[key].map { value -> String in
                    if case .attribute(.string(let text)) = value { return "string(\(Array(text.unicodeScalars.map(\.value))))" }
                    return "\(value)"
                }
                return "\(key)=\(value ?? "-")"
            }.joined(separator: " ")
        }
    }

    static let distinctCases: [(entity: String, key: String, subentities: Bool)] = [
        ("Shop", "city", true), ("Shop", "rank", true), ("Shop", "open", true), ("Shop", "since", true),
        ("Shop", "code", true), ("Shop", "rating", true), ("Shop", "city", false), ("Kiosk", "city", true),
        ("Kiosk", "stand", true), ("Region", "name", true), ("Shop", "revenue", true),
    ]

    @Test(arguments: 0..<11)
    func distinctValuesOfOneAttributeAreTheScansValues(case index: Int) throws {
        let (reference, strata, keep) = try Self.stores()
        let (entity, key, subentities) = Self.distinctCases[index]
        var request = FetchRequest(entityName: entity)
        request.resultType = .dictionary
        request.propertiesToFetch = [.keyPath(key)]
        request.returnsDistinctResults = true
        request.includesSubentities = subentities
        let expected = try Self.lines(request, reference)
        #expect(expected.count >= 2)
        // No sort: the order is the store's; the values are not.
        #expect(try Self.lines(request, strata).sorted() == expected.sorted(), "\(entity).\(key)")
        for ascending in [true, false] {
            for (limit, offset) in [(0, 0), (2, 1)] {
                request.sortDescriptors = [FetchSortDescriptor(keyPath: key, ascending: ascending)]
                request.fetchLimit = limit
                request.fetchOffset = offset
                let sorted = try Self.lines(request, reference)
                #expect(try Self.lines(request, strata) == sorted, "\(entity).\(key) ascending \(ascending) limit \(limit) offset \(offset)")
            }
        }
        withExtendedLifetime(keep) {}
    }

    @Test func distinctCanonicallyEquivalentStringsKeepTheFirstRowsForm() throws {
        let (reference, strata, keep) = try Self.stores()
        var request = FetchRequest(entityName: "Shop")
        request.resultType = .dictionary
        request.propertiesToFetch = ["city"]
        request.returnsDistinctResults = true
        request.sortDescriptors = [FetchSortDescriptor(keyPath: "city")]
        let cities = try Self.lines(request, strata)
        #expect(cities == (try Self.lines(request, reference)))
        // "Café" appears once, in the precomposed form its first row has.
        let cafe = cities.filter { $0.contains("\(0x43), \(0x61), \(0x66)") }
        #expect(cafe == ["city=string([67, 97, 102, 233])"])
        withExtendedLifetime(keep) {}
    }

    static let groupCases: [(groupBy: [FetchProperty], fetch: [FetchProperty], distinct: Bool)] = [
        (["region.name"], ["region.name", .aggregate(.sum, of: "revenue", as: "total", type: .double)], false),
        (["city"], ["city", .aggregate(.count, of: "revenue", as: "n", type: .integer64), .aggregate(.max, of: "rank", as: "top")], false),
        (["open", "region.name"], ["open", "region.name", .aggregate(.average, of: "revenue", as: "mean")], false),
        ([], [.aggregate(.sum, of: "rank", as: "ranks", type: .integer64), .aggregate(.min, of: "since", as: "first")], false),
        (["rank"], ["rank", .aggregate(.sum, of: "rating", as: "ratings")], true),
        (["region.name"], ["region.name"], true),
    ]

    @Test(arguments: 0..<6)
    func groupedAggregatesOnColumnsAreTheEmulations(case index: Int) throws {
        let (reference, strata, keep) = try Self.stores()
        let shape = Self.groupCases[index]
        for entity in ["Shop", "Kiosk"] {
            var request = FetchRequest(entityName: entity)
            request.resultType = .dictionary
            request.propertiesToGroupBy = shape.groupBy.isEmpty ? nil : shape.groupBy
            request.propertiesToFetch = shape.fetch
            request.returnsDistinctResults = shape.distinct
            let expected = try Self.lines(request, reference)
            #expect(!expected.isEmpty)
            #expect(try Self.lines(request, strata).sorted() == expected.sorted(), "\(entity) case \(index)")
            // With a predicate the rows are scanned first; the columns are the same.
            request.predicate = try FetchPredicate(format: "rank >= %@", 0)
            #expect(try Self.lines(request, strata).sorted() == (try Self.lines(request, reference)).sorted(), "\(entity) case \(index) with a predicate")
        }
        withExtendedLifetime(keep) {}
    }

    @Test func plainDictionaryRowsAndConstantsComeThroughTheColumns() throws {
        let (reference, strata, keep) = try Self.stores()
        var request = FetchRequest(entityName: "Shop")
        request.resultType = .dictionary
        request.propertiesToFetch = [
            "city", "region.name",
            .expression(FetchExpressionDescription(name: "fixed", expression: .constant(.attribute(.int64(7))))),
        ]
        #expect(try Self.lines(request, strata).sorted() == (try Self.lines(request, reference)).sorted())
        request.returnsDistinctResults = true
        #expect(try Self.lines(request, strata).sorted() == (try Self.lines(request, reference)).sorted())
        withExtendedLifetime(keep) {}
    }

    /// A to-one relationship as a column (read from the row, the destination's row not
    /// read): its destination's ID, or null for none, plain, distinct and as a group key;
    /// each ID named by its region's name, since IDs differ between stores.
    @Test func toOneColumnsAreTheirDestinationsIDs() throws {
        let (reference, strata, keep) = try Self.stores()
        func named(_ request: FetchRequest, _ coordinator: PersistentStoreCoordinator) throws -> [String] {
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            return try context.fetchDictionaries(request).map { row in
                row.keys.sorted().map { key -> String in
                    guard case .object(let id)? = row[key] else { return "\(key)=\(row[key].map { "\($0)" } ?? "-")" }
                    guard case .string(let name)? = try? context.existingObject(with: id).value(forKey: "name") else { return "\(key)=region without a name" }
                    return "\(key)=region \(name)"
                }.joined(separator: " ")
            }.sorted()
        }
        var request = FetchRequest(entityName: "Shop")
        request.resultType = .dictionary
        request.propertiesToFetch = ["region", "city"]
        let plain = try named(request, reference)
        #expect(plain.count == 48 && plain.contains { $0.hasSuffix("region=null") } && plain.contains { $0.hasSuffix("region=region North") })
        #expect(try named(request, strata) == plain)
        request.returnsDistinctResults = true
        #expect(try named(request, strata) == (try named(request, reference)))
        request.returnsDistinctResults = false
        request.propertiesToFetch = ["region", .aggregate(.count, of: "city", as: "shops", type: .integer64)]
        request.propertiesToGroupBy = ["region"]
        let grouped = try named(request, reference)
        #expect(grouped.count == 5)
        #expect(try named(request, strata) == grouped)
        withExtendedLifetime(keep) {}
    }

    @Test func badDictionaryShapesFailTheSameWayInEveryStore() throws {
        let (reference, strata, keep) = try Self.stores()
        var request = FetchRequest(entityName: "Shop")
        request.resultType = .dictionary
        request.propertiesToFetch = ["city", .aggregate(.sum, of: "revenue", as: "total")]
        request.propertiesToGroupBy = ["region.name"]
        for coordinator in [reference, strata] {
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            #expect(throws: ObjectGraphError.self) { try context.fetchDictionaries(request) }
        }
        request.propertiesToFetch = ["city", "city"]
        request.propertiesToGroupBy = nil
        request.returnsDistinctResults = true
        for coordinator in [reference, strata] {
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            #expect(throws: ObjectGraphError.self) { try context.fetchDictionaries(request) }
        }
        withExtendedLifetime(keep) {}
    }
}

import Foundation
import ObjectGraph
import Strata
import Testing

/// [FETCH-S4] A StrataStore sorts rows by keys read by ordinal, each to-one destination's
/// value once per fetch. The order must be the one the fetch language gives through key
/// paths: the same request against an InMemoryStore with the same objects is the oracle, for
/// chains of to-ones with missing destinations, subentities, descending keys, ties, limits
/// and offsets, and a key path the compiled readers leave to the general path.
@Suite struct SortKeyTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Country", properties: [
                .attribute("name", .string),
                .toMany("labels", "Label", inverse: "country"),
            ]),
            EntityDescription(name: "Label", properties: [
                .attribute("name", .string),
                .toOne("country", "Country", inverse: "labels"),
                .toMany("records", "Record", inverse: "label"),
            ]),
            EntityDescription(name: "Record", properties: [
                .attribute("title", .string),
                .attribute("year", .integer32),
                .toOne("label", "Label", inverse: "records"),
            ]),
            EntityDescription(name: "Single", superentity: "Record", properties: [
                .attribute("side", .string),
            ]),
        ])
    }

    /// The same objects in both stores; returns the titles of `request`'s results.
    static func populate(_ coordinator: PersistentStoreCoordinator) throws {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var countries: [ManagedObject] = []
        for name in ["Norway", "chile", "Chile", nil] as [String?] {
            let country = try context.insertNewObject(forEntityName: "Country")
            if let name { try country.setValue(.string(name), forKey: "name") }
            countries.append(country)
        }
        var labels: [ManagedObject] = []
        for index in 0..<7 {
            let label = try context.insertNewObject(forEntityName: "Label")
            if index != 3 { try label.setValue(.string(["Blue", "apex", "Zed", "", "Mono", "blue", "Apex"][index]), forKey: "name") }
            if index % 4 != 2 { try label.setValue(countries[index % countries.count], forKey: "country") }
            labels.append(label)
        }
        for index in 0..<60 {
            let record = try context.insertNewObject(forEntityName: index % 5 == 0 ? "Single" : "Record")
            try record.setValue(.string("r\(index % 13)-\(index)"), forKey: "title")
            try record.setValue(.int32(Int32(1990 + index % 9)), forKey: "year")
            if index % 11 != 0 { try record.setValue(labels[index % labels.count], forKey: "label") }
            if index % 5 == 0 { try record.setValue(.string(index % 2 == 0 ? "A" : "B"), forKey: "side") }
        }
        try context.save()
    }

    static let sorts: [[(String, Bool)]] = [
        [("label.name", true), ("title", true)],
        [("label.country.name", false), ("year", true), ("title", false)],
        [("label.country.name", true), ("label.name", false), ("title", true)],
        [("year", false), ("label.name", true), ("title", true)],
        [("label.records.@count", false), ("title", true)],
        [("label.country.labels.@count", true), ("label.name", true), ("title", false)],
        // Keys with many ties: the page keeps the earlier rows of each tie ([FETCH-S9]).
        [("year", true)],
        [("label.name", false), ("label.country.name", true)],
    ]

    /// [FETCH-S9] A sorted page whose first key is a string attribute orders ASCII strings by
    /// their bytes: the same page as the fetch language's order, with ties (broken by the next
    /// key, then by the earlier row), nulls, empty strings, prefixes, case, and non-ASCII
    /// strings (canonically equal ones included) that leave the decision to `String`.
    @Test(arguments: [
        [("title", true)], [("title", false)], [("title", true), ("year", false)], [("title", false), ("year", true)],
    ] as [[(String, Bool)]])
    func pagesSortedByAStringAttributeGiveTheOrderOfStrings(sort: [(String, Bool)]) throws {
        try Self.checkPages(sort: sort, titles: ["b", "a", "", nil, "ab", "A", "é", "e\u{301}", "a", "Zed", "zed", "b", "e", "f", "ä", "a b", "B"])
    }

    /// A whole sort (and pages) whose first key is a string attribute that is ASCII in every
    /// row orders the rows by the bytes stored in them, decoding no `String` for that key:
    /// the same order as the fetch language's, with ties broken by the next key, then by the
    /// earlier row.
    @Test(arguments: [
        [("title", true)], [("title", false)], [("title", true), ("year", false)], [("title", false), ("year", true)],
    ] as [[(String, Bool)]])
    func sortsByAnASCIIStringAttributeGiveTheOrderOfStrings(sort: [(String, Bool)]) throws {
        try Self.checkPages(sort: sort, titles: ["b", "a", "", "ab", "A", "a", "Zed", "zed", "b", "e", "f", "a b", "B", "~", "0"])
    }

    /// Ninety records with `titles` in turn (`nil`: no title), in an InMemoryStore and a
    /// StrataStore; pages of several limits and offsets by `sort` must agree.
    static func checkPages(sort: [(String, Bool)], titles: [String?]) throws {
        let model = try Self.model()
        let reference = PersistentStoreCoordinator(managedObjectModel: model)
        try reference.addPersistentStore(type: .inMemory, configuration: nil, at: nil, options: [:])
        let store = TemporaryStore()
        let strata = try store.coordinator(model: model)
        for coordinator in [reference, strata] {
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            for index in 0..<90 {
                let record = try context.insertNewObject(forEntityName: index % 7 == 0 ? "Single" : "Record")
                if let title = titles[(index * 5) % titles.count] { try record.setValue(.string(title), forKey: "title") }
                try record.setValue(.int32(Int32(index % 4)), forKey: "year")
            }
            try context.save()
        }
        for (limit, offset) in [(0, 0), (1, 0), (5, 0), (7, 3), (30, 10)] {
            var request = FetchRequest(entityName: "Record")
            request.sortDescriptors = sort.map { FetchSortDescriptor(keyPath: $0.0, ascending: $0.1) }
            request.fetchLimit = limit
            request.fetchOffset = offset
            func page(_ coordinator: PersistentStoreCoordinator) throws -> [String] {
                let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
                return try context.fetch(request).map { object in
                    let title = try object.value(forKey: "title"), year = try object.value(forKey: "year")
                    return "\(title)/\(year)/\(object.entity.name)"
                }
            }
            let expected = try page(reference)
            #expect(expected.count == (limit == 0 ? 90 : limit))
            #expect(try page(strata) == expected, "by \(sort) limit \(limit) offset \(offset)")
        }
    }

    @Test(arguments: 0..<8)
    func sortsThroughToOnesGiveTheOrderOfKeyPaths(case index: Int) throws {
        let store = TemporaryStore()
        let (reference, strata) = try store.referenceAndStrata(model: try Self.model(), populate: Self.populate)
        for (limit, offset) in [(0, 0), (5, 0), (7, 3)] {
            for entity in ["Record", "Single"] {
                var request = FetchRequest(entityName: entity)
                request.sortDescriptors = Self.sorts[index].map { FetchSortDescriptor(keyPath: $0.0, ascending: $0.1) }
                request.fetchLimit = limit
                request.fetchOffset = offset
                func titles(_ coordinator: PersistentStoreCoordinator) throws -> [String] {
                    let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
                    return try context.fetch(request).map {
                        guard case .string(let title) = try $0.value(forKey: "title") else { return "?" }
                        return title
                    }
                }
                let expected = try titles(reference)
                #expect(expected.count == (limit == 0 ? (entity == "Record" ? 60 : 12) : limit))
                #expect(try titles(strata) == expected, "\(entity) by \(Self.sorts[index]) limit \(limit) offset \(offset)")
            }
        }
    }
}

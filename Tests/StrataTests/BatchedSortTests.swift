import Foundation
import ObjectGraph
import Strata
import Testing

/// A sorted fetch of objects with a batch size, which a StrataStore's scan answers from its
/// rows' sort keys alone, reading the first batch's rows after the sort ([FETCH-S8]). An
/// InMemoryStore's fetch without a batch size is the oracle for the order: first keys that
/// are ASCII throughout, or turn null or non-ASCII part way through the scan, ties broken by a
/// second key or by reading order, descending sorts, offsets, subentities and predicates.
@Suite struct BatchedSortTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Song", properties: [
                .attribute("title", .string),
                .attribute("rank", .integer32),
            ]),
            EntityDescription(name: "Live", superentity: "Song", properties: [
                .attribute("venue", .string),
            ]),
        ])
    }

    /// Titles in insertion order: ASCII first (repeats among them, one past 15 bytes), then a
    /// null and non-ASCII text; those last rows rank 1,000 and above.
    static let titles: [String?] = [
        "Paranoid", "Iron Man", "War Pigs", "Paranoid", "Planet Caravan", "Electric Funeral, live at the BBC",
        "iron man", "Hand of Doom", "War Pigs", nil, "\u{C9}clair", "Zo\u{EB}", "Eclair", "Cafe\u{301}", "Caf\u{E9}",
    ]

    static func populate(_ coordinator: PersistentStoreCoordinator) throws {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for index in 0..<45 {
            let song = try context.insertNewObject(forEntityName: index % 4 == 1 ? "Live" : "Song")
            let title = titles[index % titles.count]
            if let title { try song.setValue(.string(title), forKey: "title") }
            let ascii = title.map { $0.utf8.allSatisfy { $0 < 0x80 } } ?? false
            try song.setValue(.int32(Int32(ascii ? index % 7 : 1_000 + index)), forKey: "rank")
        }
        try context.save()
    }

    /// Each result as its title and rank, in result order.
    static func results(_ request: FetchRequest, _ coordinator: PersistentStoreCoordinator) throws -> [String] {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        return try context.fetch(request).map { song in
            let title: String
            if case .string(let text) = try song.value(forKey: "title") { title = "\(text.unicodeScalars.map(\.value))" } else { title = "null" }
            return "\(title) \(try song.value(forKey: "rank"))"
        }
    }

    @Test func batchedSortedResultsAreTheUnbatchedOrder() throws {
        let (reference, strata, keep) = try DictionaryFetchTests.pairedStores(model: Self.model(), populate: Self.populate)
        let sorts: [[FetchSortDescriptor]] = [
            [FetchSortDescriptor(keyPath: "title"), FetchSortDescriptor(keyPath: "rank", ascending: false)],
            [FetchSortDescriptor(keyPath: "title", ascending: false)],
            [FetchSortDescriptor(keyPath: "rank"), FetchSortDescriptor(keyPath: "title")],
            [FetchSortDescriptor(keyPath: "title")],
        ]
        for entity in ["Song", "Live"] {
            for predicate in [nil, "rank < 1000", "rank >= 3"] as [String?] {
                for (index, sort) in sorts.enumerated() {
                    for offset in [0, 2] {
                        var request = FetchRequest(entityName: entity)
                        request.predicate = try predicate.map { try FetchPredicate(format: $0) }
                        request.sortDescriptors = sort
                        request.fetchOffset = offset
                        let expected = try Self.results(request, reference)
                        #expect(expected.count >= 4, "\(entity) \(predicate ?? "all")")
                        request.fetchBatchSize = 3
                        #expect(
                            try Self.results(request, strata) == expected,
                            "\(entity) \(predicate ?? "all") sort \(index) offset \(offset)")
                    }
                }
            }
        }
        withExtendedLifetime(keep) {}
    }

    @Test func theFirstBatchArrivesLoadedAndTheRestAsFaults() throws {
        let (_, strata, keep) = try DictionaryFetchTests.pairedStores(model: Self.model(), populate: Self.populate)
        let context = ManagedObjectContext(persistentStoreCoordinator: strata)
        var request = FetchRequest(entityName: "Song")
        request.sortDescriptors = [FetchSortDescriptor(keyPath: "title")]
        request.fetchBatchSize = 4
        request.returnsObjectsAsFaults = false
        let songs = try context.fetch(request)
        #expect(songs.count == 45)
        #expect(songs.prefix(4).allSatisfy { !$0.isFault })
        #expect(songs.dropFirst(4).allSatisfy { $0.isFault })
        // Registered once each: asking the context again gives the same objects.
        #expect(songs.allSatisfy { context.object(with: $0.objectID) === $0 })
        withExtendedLifetime(keep) {}
    }
}

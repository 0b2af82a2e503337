import Foundation
import ObjectGraph
import Strata
import Testing

/// `distinct` dictionary fetches of a string attribute that no index holds, answered by a
/// scan that drops repeated ASCII values on their bytes ([FETCH-S19]). An InMemoryStore holding
/// the same objects is the oracle: repeated ASCII, nulls, canonically equivalent non-ASCII
/// strings (one of them equal to an ASCII string), subentities, predicates, sorts and pages.
@Suite struct DistinctScanTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Track", properties: [
                .attribute("composer", .string),
                .attribute("length", .integer32),
            ]),
            EntityDescription(name: "Bonus", superentity: "Track", properties: [
                .attribute("note", .string),
            ]),
        ])
    }

    /// Composers in insertion order: ASCII repeats (short and past 15 bytes), nulls, "Café"
    /// precomposed and decomposed, and the Kelvin sign, canonically equal to "K", both before
    /// and after the "K" rows.
    static let composers: [String?] = [
        "Kelvin\u{212A}", "Bach", nil, "Caf\u{E9}", "Johann Sebastian Bach, arranged", "Bach", "K", "\u{212A}",
        "Cafe\u{301}", "Johann Sebastian Bach, arranged", nil, "KelvinK", "bach", "Bach", "K", "Zo\u{EB}",
    ]

    static func populate(_ coordinator: PersistentStoreCoordinator) throws {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for index in 0..<64 {
            let track = try context.insertNewObject(forEntityName: index % 5 == 0 ? "Bonus" : "Track")
            if let composer = composers[index % composers.count] { try track.setValue(.string(composer), forKey: "composer") }
            try track.setValue(.int32(Int32(index % 7)), forKey: "length")
        }
        try context.save()
    }

    /// Both coordinators, populated alike.
    static func stores() throws -> (reference: PersistentStoreCoordinator, strata: PersistentStoreCoordinator, keep: TemporaryStore) {
        try DictionaryFetchTests.pairedStores(model: model(), populate: populate)
    }

    /// The results of `request` as text, each string by its scalars (so the form kept shows).
    static func lines(_ request: FetchRequest, _ coordinator: PersistentStoreCoordinator) throws -> [String] {
        try DictionaryFetchTests.lines(request, coordinator)
    }

    @Test func distinctStringsOfAScanAreTheFullPasssValues() throws {
        let (reference, strata, store) = try Self.stores()
        for entity in ["Track", "Bonus"] {
            for predicate in [nil, "composer != nil", "length >= 3"] as [String?] {
                var request = FetchRequest(entityName: entity)
                request.resultType = .dictionary
                request.propertiesToFetch = ["composer"]
                request.returnsDistinctResults = true
                request.predicate = try predicate.map { try FetchPredicate(format: $0) }
                let expected = try Self.lines(request, reference)
                #expect(expected.count >= 6, "\(entity) \(predicate ?? "all")")
                // Reading order is insertion order in both stores: the first row's form of
                // each value is kept ("K" before the Kelvin sign, "Café" precomposed).
                #expect(try Self.lines(request, strata) == expected, "\(entity) \(predicate ?? "all")")
                for ascending in [true, false] {
                    for (limit, offset) in [(0, 0), (3, 1)] {
                        request.sortDescriptors = [FetchSortDescriptor(keyPath: "composer", ascending: ascending)]
                        request.fetchLimit = limit
                        request.fetchOffset = offset
                        #expect(
                            try Self.lines(request, strata) == (try Self.lines(request, reference)),
                            "\(entity) \(predicate ?? "all") ascending \(ascending) limit \(limit) offset \(offset)")
                    }
                }
            }
        }
        // The forms kept, spelled out for the plain fetch of every track.
        var request = FetchRequest(entityName: "Track")
        request.resultType = .dictionary
        request.propertiesToFetch = ["composer"]
        request.returnsDistinctResults = true
        let kept = try Self.lines(request, strata)
        #expect(kept.filter { $0 == "composer=string([75])" || $0 == "composer=string([8490])" } == ["composer=string([75])"])
        #expect(kept.filter { $0.hasPrefix("composer=string([67, 97, 102") } == ["composer=string([67, 97, 102, 233])"])
        #expect(kept.filter { $0 == "composer=string([66, 97, 99, 104])" }.count == 1)
        #expect(kept.contains { !$0.contains("string(") })
        withExtendedLifetime(store) {}
    }

    @Test func aDistinctColumnBesideAnotherIsNotDeduplicatedByItsBytesAlone() throws {
        let (reference, strata, store) = try Self.stores()
        var request = FetchRequest(entityName: "Track")
        request.resultType = .dictionary
        request.propertiesToFetch = ["composer", "length"]
        request.returnsDistinctResults = true
        let expected = try Self.lines(request, reference)
        #expect(try Self.lines(request, strata) == expected)
        // More pairs than composers: rows with one composer and several lengths all stay.
        #expect(expected.count > Set(Self.composers.map { $0 ?? "" }).count)
        // A count of a string column is not a distinct column: every row counts.
        request.propertiesToFetch = [.aggregate(.count, of: "composer", as: "n", type: .integer64)]
        #expect(try Self.lines(request, strata) == (try Self.lines(request, reference)))
        withExtendedLifetime(store) {}
    }
}

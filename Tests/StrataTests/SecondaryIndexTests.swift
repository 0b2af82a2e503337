import Foundation
import ObjectGraph
import Testing
@testable import Strata
@testable import StrataEngine

@Suite struct SecondaryIndexTests {
    // [IDX-S2] The encoding sorts as the values do.
    @Test func theIndexEncodingPreservesTheOrderOfValues() {
        let integers: [Int64] = [.min, -70_000, -1, 0, 1, 2, 255, 256, 70_000, .max]
        #expect(integers.map { IndexKey.encode(.int64($0)) } == integers.map { IndexKey.encode(.int64($0)) }.sorted { $0.lexicographicallyPrecedes($1) })
        let doubles: [Double] = [-.infinity, -1e300, -2.5, -1, -0.5, 0, 1e-300, 0.5, 1, 2.5, 1e300, .infinity]
        #expect(doubles.map { IndexKey.encode(.double($0)) } == doubles.map { IndexKey.encode(.double($0)) }.sorted { $0.lexicographicallyPrecedes($1) })
        #expect(IndexKey.encode(.double(-0.0)) == IndexKey.encode(.double(0.0)))
        let strings = ["", "\u{0}", "\u{0}a", "a", "a\u{0}", "ab", "b", "é", "日本"]
        let sorted = strings.sorted()
        #expect(sorted.map { IndexKey.encode(.string($0)) } == sorted.map { IndexKey.encode(.string($0)) }.sorted { $0.lexicographicallyPrecedes($1) })
        // Canonically equal strings share a key.
        #expect(IndexKey.encode(.string("e\u{301}")) == IndexKey.encode(.string("é")))
        // A prefix bound covers exactly the strings that begin with it.
        let prefix = IndexKey.stringPrefix("ab")
        for text in ["ab", "abc", "ab\u{0}"] { #expect(IndexKey.encode(.string(text)).starts(with: prefix)) }
        for text in ["a", "b", "ac"] { #expect(!IndexKey.encode(.string(text)).starts(with: prefix)) }
    }

    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Item", properties: [
                .attribute("name", .string, optional: false, indexed: true),
                .attribute("rank", .integer64, defaultValue: 0, indexed: true),
                .attribute("note", .string),
            ]),
            EntityDescription(name: "Special", superentity: "Item", properties: []),
        ])
    }

    /// The index entries the engine holds for `attribute`, as (encoded value, reference).
    static func entries(_ coordinator: PersistentStoreCoordinator, _ attribute: String) throws -> [[UInt8]] {
        let engine = try #require((coordinator.persistentStores.first as? StrataStore)?.storageEngine)
        return try engine.snapshot().keys(prefix: IndexKey.prefix(root: "Item", attribute: attribute))
    }

    // [IDX-S3] Index entries follow inserts, updates and deletes in the same transaction.
    @Test func indexEntriesFollowInsertsUpdatesAndDeletes() throws {
        let store = TemporaryStore()
        let coordinator = try store.coordinator(model: try Self.model())
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var items: [ManagedObject] = []
        for (i, entity) in ["Item", "Special", "Item"].enumerated() {
            let item = try context.insertNewObject(forEntityName: entity)
            try item.setValue(.string("n\(i)"), forKey: "name")
            try item.setValue(.int64(Int64(10 * i)), forKey: "rank")
            items.append(item)
        }
        try context.save()
        func expected(_ pairs: [(AttributeValue, ManagedObject)], _ attribute: String) throws -> [[UInt8]] {
            try pairs.map { value, object in
                guard case .int64(let reference)? = object.objectID.referenceObject else { throw ObjectGraphError(.invalidArgument, "no ref") }
                return IndexKey.key(root: "Item", attribute: attribute, value: value, reference: reference)
            }.sorted { $0.lexicographicallyPrecedes($1) }
        }
        #expect(try Self.entries(coordinator, "name") == expected([(.string("n0"), items[0]), (.string("n1"), items[1]), (.string("n2"), items[2])], "name"))
        try items[1].setValue("renamed", forKey: "name")
        try items[2].setValue("only the note", forKey: "note")
        context.delete(items[0])
        try context.save()
        #expect(try Self.entries(coordinator, "name") == expected([(.string("renamed"), items[1]), (.string("n2"), items[2])], "name"))
        #expect(try Self.entries(coordinator, "rank") == expected([(.int64(10), items[1]), (.int64(20), items[2])], "rank"))
        #expect(try Self.entries(coordinator, "note").isEmpty, "unindexed attributes have no entries")
    }
}

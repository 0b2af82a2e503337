import Foundation
import ObjectGraph
import Strata
import Testing

/// `== nil` and `!= nil` read a row's null bitmap instead of its values: for every attribute
/// type, with nulls and values (empty strings and zeros included, which are not null), the
/// answers match the values saved, in fetches, counts and a conjunction.
@Suite struct NullTestTests {
    static let types: [(String, AttributeType, AttributeValue)] = [
        ("s", .string, .string("")), ("i16", .integer16, .int16(0)), ("i32", .integer32, .int32(0)),
        ("i64", .integer64, .int64(0)), ("d", .double, .double(0)), ("f", .float, .float(0)),
        ("dec", .decimal, .decimal(0)), ("b", .boolean, .bool(false)), ("t", .date, .date(Date(timeIntervalSinceReferenceDate: 0))),
        ("bin", .binaryData, .data(Data())),
    ]

    @Test func nullTestsMatchTheSavedValuesForEveryType() throws {
        let model = try ManagedObjectModel(entities: [
            EntityDescription(name: "Thing", properties: [.attribute("n", .integer64)] + Self.types.map { .attribute($0.0, $0.1) })
        ])
        let store = TemporaryStore()
        let coordinator = try store.coordinator(model: model)
        let setup = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var nulls: [String: Set<Int64>] = [:]
        for n in Int64(0)..<60 {
            let thing = try setup.insertNewObject(forEntityName: "Thing")
            try thing.setValue(.int64(n), forKey: "n")
            for (position, (name, _, value)) in Self.types.enumerated() {
                // A fixed pattern of nulls that differs per attribute.
                if (n * 7 + Int64(position) * 3) % 5 >= 2 {
                    try thing.setValue(value, forKey: name)
                } else {
                    nulls[name, default: []].insert(n)
                }
            }
        }
        try setup.save()
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        func numbers(_ format: String) throws -> Set<Int64> {
            var request = FetchRequest(entityName: "Thing")
            request.predicate = try FetchPredicate(format: format)
            let found = Set(try context.fetch(request).map { try $0.value(forKey: "n").integerValue ?? -1 })
            #expect(try context.count(for: request) == found.count, "\(format)")
            return found
        }
        let all = Set(Int64(0)..<60)
        for (name, _, _) in Self.types {
            let expected = nulls[name, default: []]
            #expect(try numbers("\(name) == nil") == expected, "\(name) == nil")
            #expect(try numbers("\(name) != nil") == all.subtracting(expected), "\(name) != nil")
            #expect(try numbers("\(name) == nil AND n < 30") == expected.filter { $0 < 30 }, "\(name) == nil AND n < 30")
        }
    }
}

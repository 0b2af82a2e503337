import Foundation
import Testing

@testable import ObjectGraph

/// Dictionary results from rows a store read as values (`dictionaries(fromValues:)`, one
/// buffer of rows laid end to end, and `dictionaries(fromColumns:)`) against the same rows
/// given by name (`dictionaries(fromValueRows:)`, the general path): plain key paths, sums,
/// counts and maxima, with and without grouping, distinct results, null values; and rows
/// that do not fit the request's key paths, which throw.
@Suite struct ColumnDictionaryTests {
    static let entity: EntityDescription = {
        do {
            let model = try ManagedObjectModel(entities: [
                EntityDescription(name: "Sale", properties: [
                    .attribute("country", .string), .attribute("total", .double), .attribute("units", .integer64),
                ])
            ])
            return try model.entity(named: "Sale")
        } catch {
            preconditionFailure("model: \(error)")
        }
    }()

    static func request(_ properties: [FetchProperty], groupBy: [FetchProperty]?, distinct: Bool = false) -> FetchRequest {
        var request = FetchRequest(entityName: "Sale")
        request.entity = entity
        request.resultType = .dictionary
        request.propertiesToFetch = properties
        request.propertiesToGroupBy = groupBy
        request.returnsDistinctResults = distinct
        return request
    }

    static let shapes: [FetchRequest] = [
        request(["country"], groupBy: nil),
        request(["country"], groupBy: nil, distinct: true),
        request(["country", "units"], groupBy: nil),
        request([.aggregate(.sum, of: "total", as: "sum", type: .double)], groupBy: nil),
        request(["country", .aggregate(.sum, of: "units", as: "units", type: .integer64)], groupBy: ["country"]),
        request(
            ["country", .aggregate(.max, of: "total", as: "top", type: .double), .aggregate(.count, of: "units", as: "n", type: .integer64)],
            groupBy: ["country"]),
    ]

    @Test(arguments: 0..<6)
    func valuesGiveTheResultsOfRowsByName(shape: Int) throws {
        var state: UInt64 = 0x5EED &+ UInt64(shape)
        func next() -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(state >> 33)
        }
        let request = Self.shapes[shape]
        let paths = try #require(request.dictionaryRowKeyPaths)
        for rowCount in [0, 1, 7, 200] {
            var values: [FetchValue] = []
            var rows: [[FetchValue]] = []
            var named: [FetchValueRow] = []
            for _ in 0..<rowCount {
                var row: [FetchValue] = []
                for path in paths {
                    let value: FetchValue
                    switch path {
                    case "country": value = next() % 6 == 0 ? .null : .attribute(.string(["FR", "BR", "US"][next() % 3]))
                    case "total": value = next() % 9 == 0 ? .null : .attribute(.double(Double(next() % 10_000) / 100))
                    default: value = .attribute(.int64(Int64(next() % 50)))
                    }
                    row.append(value)
                }
                values += row
                rows.append(row)
                named.append(FetchValueRow(Dictionary(uniqueKeysWithValues: zip(paths, row))))
            }
            let expected = try request.dictionaries(fromValueRows: named)
            #expect(try request.dictionaries(fromValues: values) == expected, "\(rowCount) rows")
            #expect(try request.dictionaries(fromColumns: rows) == expected, "\(rowCount) rows")
        }
    }

    @Test func rowsThatDoNotFitTheKeyPathsThrow() throws {
        let request = Self.request(["country", "units"], groupBy: nil)
        #expect(throws: ObjectGraphError.self) { try request.dictionaries(fromValues: [.null, .null, .null]) }
        #expect(throws: ObjectGraphError.self) { try request.dictionaries(fromColumns: [[.null, .null], [.null]]) }
        #expect(try request.dictionaries(fromValues: [.null, .attribute(.int64(1))]).count == 1)
    }
}

import Foundation
import ObjectGraph
import Testing

@Suite("Sort descriptors")
struct SortDescriptorTests {
    private func sorted(_ values: [AttributeValue], _ descriptor: FetchSortDescriptor) throws -> [AttributeValue] {
        let rows = values.enumerated().map { ["v": $0.element, "i": .int64(Int64($0.offset))] as [String: AttributeValue] }
        return try FetchSortDescriptor.sort(rows, by: [descriptor]).map { $0["v"] ?? .null }
    }

    // Oracle: a page selected with `keeping` is the prefix of the full stable sort, ties,
    // nulls, both directions and every page size included.
    @Test func keepingAPageSelectsThePrefixOfTheFullSort() throws {
        var random = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let count = Int.random(in: 0...60, using: &random)
            let rows = (0..<count).map { index -> [String: AttributeValue] in
                let a: AttributeValue = Int.random(in: 0..<6, using: &random) == 0 ? .null : .int64(Int64.random(in: 0...5, using: &random))
                let b: AttributeValue = .string(["x", "y", "z", "Y"].randomElement(using: &random) ?? "x")
                return ["a": a, "b": b, "i": .int64(Int64(index))]
            }
            let descriptors = [
                FetchSortDescriptor(keyPath: "a", ascending: Bool.random(using: &random)),
                FetchSortDescriptor(keyPath: "b", ascending: Bool.random(using: &random), options: Bool.random(using: &random) ? .caseInsensitive : []),
            ]
            let full = try FetchSortDescriptor.sort(rows, by: descriptors).map { $0["i"] ?? .null }
            for keeping in [0, 1, 2, 5, count / 4, count / 2, count, count + 3] {
                let page = try FetchSortDescriptor.sort(rows, by: descriptors, keeping: keeping).map { $0["i"] ?? .null }
                #expect(page == Array(full.prefix(keeping)), "keeping \(keeping) of \(count)")
            }
        }
    }

    // Oracle: ASCII string keys (sorted on their bytes, first by their leading eight) order as
    // Swift's `String` order does, with prefixes, case, empty strings, NUL bytes, keys that
    // agree on eight bytes or more, ties broken by the next descriptor and then by position,
    // in both directions, whole and as a page; one non-ASCII key among them takes the general
    // path.
    @Test func asciiStringKeysOrderAsStringsDo() throws {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        let words = [
            "", "a", "ab", "abc", "B", "b", "Ba", "z", "Z", "a b", "a-b", "~", "0", "09", "9",
            "a\u{0}", "a\u{0}\u{0}", "abcdefg", "abcdefgh", "abcdefgh\u{0}", "abcdefghi", "abcdefgha", "abcdefg\u{0}x",
            "abcdefghijklmnop", "abcdefghijklmnoq", "abcdefgh ",
        ]
        for round in 0..<60 {
            let count = next(40) + 2
            var rows = (0..<count).map { index -> [String: AttributeValue] in
                ["s": .string(words[next(words.count)]), "n": .int64(Int64(next(3))), "i": .int64(Int64(index))]
            }
            if round % 10 == 9 { rows[next(count)]["s"] = .string("é") }
            for ascending in [true, false] {
                let descriptors = [FetchSortDescriptor(keyPath: "s", ascending: ascending), FetchSortDescriptor(keyPath: "n")]
                let got = try FetchSortDescriptor.sort(rows, by: descriptors).compactMap { $0["i"]?.doubleValue.map(Int.init) }
                let expected = rows.indices.sorted { a, b in
                    let (x, y) = (rows[a]["s"]?.stringValue ?? "", rows[b]["s"]?.stringValue ?? "")
                    if x != y { return ascending ? x < y : x > y }
                    let (m, n) = (rows[a]["n"]?.doubleValue ?? 0, rows[b]["n"]?.doubleValue ?? 0)
                    return m != n ? m < n : a < b
                }
                #expect(got == expected, "round \(round), ascending \(ascending)")
                let page = try FetchSortDescriptor.sort(rows, by: descriptors, keeping: 3).compactMap { $0["i"]?.doubleValue.map(Int.init) }
                #expect(page == Array(expected.prefix(3)), "round \(round), ascending \(ascending), a page of 3")
            }
        }
    }

    @Test func defaultStringOrderIsByUnicodeScalars() throws {
        #expect(try sorted(["b", "A", "a", "B"], FetchSortDescriptor(keyPath: "v")) == ["A", "B", "a", "b"])
        #expect(try sorted(["é", "f", "e"], FetchSortDescriptor(keyPath: "v")) == ["e", "f", "é"])
    }

    @Test func caseInsensitiveKeepsTiesInOriginalOrder() throws {
        #expect(try sorted(["b", "A", "a", "B"], FetchSortDescriptor(keyPath: "v", options: .caseInsensitive)) == ["A", "a", "b", "B"])
    }

    @Test func diacriticInsensitiveFoldsAccents() throws {
        #expect(try sorted(["é", "f", "e"], FetchSortDescriptor(keyPath: "v", options: .diacriticInsensitive)) == ["é", "e", "f"])
    }

    @Test func numericOrdersDigitRunsByValue() throws {
        #expect(try sorted(["file10", "file9", "file1"], FetchSortDescriptor(keyPath: "v")) == ["file1", "file10", "file9"])
        #expect(try sorted(["file10", "file9", "file1", "file009"], FetchSortDescriptor(keyPath: "v", options: .numeric)) == ["file1", "file9", "file009", "file10"])
    }

    @Test func localizedStandardCombinesAllThree() throws {
        #expect(try sorted(["File10", "file9", "Élan", "alpha"], .localizedStandard("v")) == ["alpha", "Élan", "file9", "File10"])
        #expect(try sorted(["File10", "file9", "Élan", "alpha"], .localizedStandard("v", ascending: false)) == ["File10", "file9", "Élan", "alpha"])
    }

    @Test func nullsComeFirstAscendingAndLastDescending() throws {
        #expect(try sorted([3, nil, 1, nil], FetchSortDescriptor(keyPath: "v")) == [nil, nil, 1, 3])
        #expect(try sorted([3, nil, 1, nil], FetchSortDescriptor(keyPath: "v", ascending: false)) == [3, 1, nil, nil])
    }

    @Test func numbersCompareAcrossWidths() throws {
        #expect(try sorted([.int16(5), .double(2.5), .int64(-1), .decimal(3), .float(4.5)], FetchSortDescriptor(keyPath: "v"))
            == [.int64(-1), .double(2.5), .decimal(3), .float(4.5), .int16(5)])
    }

    @Test func notANumberSortsAfterEveryNumber() throws {
        #expect(try sorted([.double(.nan), 2, .double(1.5), nil], FetchSortDescriptor(keyPath: "v")).map(\.description) == ["null", "1.5", "2", "nan"])
    }

    @Test func descriptorsChainAndStayStable() throws {
        let rows: [[String: AttributeValue]] = [
            ["a": 1, "b": "x", "k": 0], ["a": 2, "b": "y", "k": 1], ["a": 1, "b": "y", "k": 2],
            ["a": 2, "b": "x", "k": 3], ["a": 1, "b": "x", "k": 4],
        ]
        let result = try FetchSortDescriptor.sort(rows, by: [FetchSortDescriptor(keyPath: "b", ascending: false), FetchSortDescriptor(keyPath: "a")])
        #expect(result.map { $0["k"] } == [2, 1, 0, 4, 3])
    }

    @Test func descriptionShowsDirectionAndOptions() {
        #expect(FetchSortDescriptor.localizedStandard("name").description == "name ASC [c d numeric]")
        #expect(FetchSortDescriptor(keyPath: "age", ascending: false).description == "age DESC")
        #expect(FetchSortDescriptor(keyPath: "age").reversed.ascending == false)
    }

    @Test func storeAndOverlaySortThroughToOneRelationships() throws {
        let (stack, _) = try FetchGraph.make()
        var request = FetchRequest(entityName: "Person")
        request.sortDescriptors = [FetchSortDescriptor(keyPath: "department.name"), FetchSortDescriptor(keyPath: "name")]
        let expected = ["José", "Σωκράτης", "Ada", "Zoë", "Bob", "Ådne"]
        let reader = stack.context()
        #expect(try reader.names(request) == expected, "sorted by the store")
        // A pending change makes the context sort in memory, on objects.
        let people = try reader.fetch(FetchRequest(entityName: "Person"))
        try people.first { try $0.value(forKey: "name") == "Bob" }?.setValue(26, forKey: "age")
        #expect(try reader.names(request) == expected, "sorted by the context's overlay")
        request.sortDescriptors = [FetchSortDescriptor(keyPath: "manager.age", ascending: false), .localizedStandard("name")]
        #expect(try reader.names(request) == ["José", "Bob", "Zoë", "Ådne", "Ada", "Σωκράτης"])
    }

    @Test func aggregateKeyPathsSortAndToManyKeyPathsThrow() throws {
        let (stack, _) = try FetchGraph.make()
        var request = FetchRequest(entityName: "Person")
        request.sortDescriptors = [FetchSortDescriptor(keyPath: "projects.@count", ascending: false), FetchSortDescriptor(keyPath: "name")]
        #expect(try stack.context().names(request) == ["Ada", "Ådne", "Bob", "José", "Σωκράτης", "Zoë"])
        request.sortDescriptors = [FetchSortDescriptor(keyPath: "projects.title")]
        #expect(throws: ObjectGraphError.self) { _ = try stack.context().fetch(request) }
    }
}

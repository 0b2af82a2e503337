import Foundation
import ObjectGraph

/// The predicate format parser (the fetch language of the DocC article "Fetch Language") on
/// any text: parsing may only return a predicate or throw ``ObjectGraphError``; what parses
/// must print as a format that parses back to the same predicate, pass or refuse the depth
/// and model checks a fetch runs with an ``ObjectGraphError``, and evaluate against a row
/// without trapping (hostile nesting, huge numbers, bad escapes and patterns included).
enum FuzzPredicates {
    /// The entity the model checks and the evaluation read: a field of most kinds, a to-one
    /// and a to-many.
    static let entity: EntityDescription? = {
        let model = try? ManagedObjectModel(entities: [
            EntityDescription(name: "Item", properties: [
                .attribute("name", .string), .attribute("age", .integer32), .attribute("score", .double),
                .attribute("price", .decimal), .attribute("active", .boolean), .attribute("born", .date),
                .attribute("id", .uuid), .attribute("blob", .binaryData),
                .toOne("owner", "Item", inverse: "items"), .toMany("items", "Item", inverse: "owner"),
            ])
        ])
        return try? model?.entity(named: "Item")
    }()

    /// The row the parsed predicates are evaluated against.
    static let row = FetchValueRow([
        "name": .attribute("Ada"), "age": .attribute(.int32(36)), "score": .attribute(.double(1.5)),
        "price": .attribute(.decimal(12)), "active": .attribute(.bool(true)), "born": .attribute(.date(Date(timeIntervalSinceReferenceDate: 0))),
        "id": .attribute(.null), "blob": .attribute(.data(Data([1, 2]))), "owner": .attribute(.null),
        "items": .collection([.attribute("a"), .attribute("b")]),
    ])

    /// The arguments every format is given: one of each common kind, so `%@`, `%d`, `%f`,
    /// `%K` and `%s` can all find one (a count mismatch is an error like any other).
    static let arguments: [FetchValue] = [.attribute("name"), .attribute(.int64(1)), .attribute(.double(2.5)), .attribute("x")]

    static func predicate(_ bytes: [UInt8], withArguments: Bool) {
        guard let entity else { fatalError("StrataFuzz: the predicate model does not build") }
        let format = String(decoding: bytes, as: UTF8.self)
        let parsed: FetchPredicate
        do {
            parsed = !withArguments
                ? try FetchPredicate(format: format)
                : try FetchPredicate(format: format, argumentArray: arguments.map { $0 as any FetchArgument }, substitutionVariables: ["v": .attribute(.int64(3))])
        } catch {
            fuzzCheck(error is ObjectGraphError, "predicate parse threw \(type(of: error)), not ObjectGraphError")
            return
        }
        // What parses is within the depth bound, prints, and parses back to itself.
        do {
            try parsed.checkDepth()
        } catch {
            fuzzCheck(false, "a parsed predicate fails the depth check: \(error)")
        }
        let printed = parsed.canonicalFormat
        do {
            let again = try FetchPredicate(format: printed)
            fuzzCheck(again == parsed, "the canonical format \(printed) parses to another predicate")
        } catch {
            fuzzCheck(false, "the canonical format \(printed) of a parsed predicate does not parse: \(error)")
        }
        // The checks a fetch runs, and an evaluation, may refuse it only with the module's error.
        for body in [
            { try parsed.checkComparisons(against: entity) },
            { _ = try parsed.evaluate(with: row, variables: ["v": .attribute(.int64(3))]) },
        ] as [() throws -> Void] {
            do { try body() } catch { fuzzCheck(error is ObjectGraphError, "threw \(type(of: error)), not ObjectGraphError") }
        }
    }

    /// Seeds: the everyday and the awkward corners of the grammar.
    static func seeds() -> [[UInt8]] {
        [
            "name == 'Ada'", "age > 30 AND (score < 2.5 OR NOT active == YES)", "name BEGINSWITH[cd] 'a'",
            "name LIKE '*d?'", "name MATCHES '[A-Z].*'", "age BETWEEN {18, 65}", "age IN {1, 2, 3}",
            "ANY items.name == 'a'", "items.@count > 1", "SUBQUERY(items, $i, $i.age > 3).@count > 0",
            "%K == %@", "age == %d AND score < %f", "age < $v", "born > CAST(0, \"NSDate\")",
            "owner == nil", "name IN 'Ada Lovelace'", "max:(items.age) > 3", "items[FIRST] == 'a'",
            "TRUEPREDICATE", "NOT (NOT (age == 1))", "#name == \"\\u00e9\"", "age == 0x1F",
        ].map { Array($0.utf8) }
    }
}

import Foundation
import ObjectGraph
import Testing

/// Parses a format string, failing the test on error.
func parse(_ format: String, _ arguments: any FetchArgument...) throws -> FetchPredicate {
    try FetchPredicate(format: format, argumentArray: arguments)
}

private func key(_ path: String) -> FetchExpression { .keyPath(path) }
private func int(_ value: Int64) -> FetchExpression { .constant(.attribute(.int64(value))) }
private func str(_ value: String) -> FetchExpression { .constant(.attribute(.string(value))) }

@Suite("Predicate format parser")
struct PredicateParserTests {
    @Test(arguments: [
        ("a = 1", FetchComparisonOperator.equal), ("a == 1", .equal), ("a != 1", .notEqual), ("a <> 1", .notEqual),
        ("a < 1", .lessThan), ("a <= 1", .lessThanOrEqual), ("a =< 1", .lessThanOrEqual), ("a > 1", .greaterThan),
        ("a >= 1", .greaterThanOrEqual), ("a => 1", .greaterThanOrEqual),
    ])
    func everySymbolicOperatorParses(format: String, op: FetchComparisonOperator) throws {
        #expect(try parse(format) == .comparison(key("a"), op, int(1)))
    }

    @Test(arguments: [
        ("a IN {1, 2}", FetchComparisonOperator.in), ("a BEGINSWITH 'x'", .beginsWith), ("a ENDSWITH 'x'", .endsWith),
        ("a CONTAINS 'x'", .contains), ("a LIKE 'x*'", .like), ("a MATCHES 'x.*'", .matches), ("a BETWEEN {1, 2}", .between),
        ("a in {1, 2}", .in), ("a beginswith 'x'", .beginsWith), ("a Like 'x*'", .like),
    ])
    func everyWordOperatorParsesInAnyCase(format: String, op: FetchComparisonOperator) throws {
        guard case .comparison(let lhs, let parsed, _, .direct, []) = try parse(format) else {
            Issue.record("not a plain comparison: \(format)")
            return
        }
        #expect(lhs == key("a"))
        #expect(parsed == op)
    }

    @Test func optionsModifiersParse() throws {
        #expect(try parse("name ==[c] 'x'") == .comparison(key("name"), .equal, str("x"), options: .caseInsensitive))
        #expect(try parse("name BEGINSWITH[d] 'x'") == .comparison(key("name"), .beginsWith, str("x"), options: .diacriticInsensitive))
        #expect(try parse("name LIKE[cd] 'x'") == .comparison(key("name"), .like, str("x"), options: [.caseInsensitive, .diacriticInsensitive]))
        #expect(try parse("name CONTAINS[DC] 'x'") == .comparison(key("name"), .contains, str("x"), options: [.caseInsensitive, .diacriticInsensitive]))
    }

    @Test func andBindsTighterThanOr() throws {
        let (a, b, c) = (FetchPredicate.comparison(key("a"), .equal, int(1)), FetchPredicate.comparison(key("b"), .equal, int(2)), FetchPredicate.comparison(key("c"), .equal, int(3)))
        #expect(try parse("a == 1 OR b == 2 AND c == 3") == .or([a, .and([b, c])]))
        #expect(try parse("a == 1 AND b == 2 OR c == 3") == .or([.and([a, b]), c]))
        #expect(try parse("(a == 1 OR b == 2) AND c == 3") == .and([.or([a, b]), c]))
        #expect(try parse("a == 1 || b == 2 && c == 3") == .or([a, .and([b, c])]))
    }

    @Test func chainsAreLeftAssociativeAndFlat() throws {
        let (a, b, c) = (FetchPredicate.comparison(key("a"), .equal, int(1)), FetchPredicate.comparison(key("b"), .equal, int(2)), FetchPredicate.comparison(key("c"), .equal, int(3)))
        #expect(try parse("a == 1 AND b == 2 AND c == 3") == .and([a, b, c]))
        #expect(try parse("a == 1 OR b == 2 OR c == 3") == .or([a, b, c]))
        #expect(try parse("(a == 1 AND b == 2) AND c == 3") == .and([.and([a, b]), c]))
    }

    @Test func notBindsTighterThanAnd() throws {
        let (a, b) = (FetchPredicate.comparison(key("a"), .equal, int(1)), FetchPredicate.comparison(key("b"), .equal, int(2)))
        #expect(try parse("NOT a == 1 AND b == 2") == .and([.not(a), b]))
        #expect(try parse("!a == 1 OR b == 2") == .or([.not(a), b]))
        #expect(try parse("NOT (a == 1 AND b == 2)") == .not(.and([a, b])))
        #expect(try parse("NOT NOT a == 1") == .not(.not(a)))
    }

    @Test func quantifiersParse() throws {
        #expect(try parse("ANY tags.name == 'x'") == .comparison(key("tags.name"), .equal, str("x"), modifier: .any))
        #expect(try parse("SOME tags.name == 'x'") == .comparison(key("tags.name"), .equal, str("x"), modifier: .any))
        #expect(try parse("ALL tags.name == 'x'") == .comparison(key("tags.name"), .equal, str("x"), modifier: .all))
        #expect(try parse("NONE tags.name == 'x'") == .not(.comparison(key("tags.name"), .equal, str("x"), modifier: .any)))
    }

    @Test func literalsParse() throws {
        func rhs(_ format: String) throws -> FetchExpression? {
            if case .comparison(_, _, let rhs, _, _) = try parse(format) { return rhs }
            return nil
        }
        #expect(try rhs("a == nil") == .constant(.null))
        #expect(try rhs("a == NULL") == .constant(.null))
        #expect(try rhs("a == TRUE") == .constant(.attribute(.bool(true))))
        #expect(try rhs("a == YES") == .constant(.attribute(.bool(true))))
        #expect(try rhs("a == FALSE") == .constant(.attribute(.bool(false))))
        #expect(try rhs("a == no") == .constant(.attribute(.bool(false))))
        #expect(try rhs("a == -42") == int(-42))
        #expect(try rhs("a == 0x1F") == int(31))
        #expect(try rhs("a == 2.5") == .constant(.attribute(.double(2.5))))
        #expect(try rhs("a == 1e3") == .constant(.attribute(.double(1000))))
        #expect(try rhs("a == -0.5") == .constant(.attribute(.double(-0.5))))
        #expect(try rhs(#"a == "q\"uote\\ \n\t\u00E9""#) == str("q\"uote\\ \n\té"))
        #expect(try rhs("a == 'it\\'s'") == str("it's"))
        #expect(try rhs("a == CAST(0, \"NSDate\")") == .constant(.attribute(.date(Date(timeIntervalSinceReferenceDate: 0)))))
        #expect(try parse("TRUEPREDICATE") == .value(true))
        #expect(try parse("falsepredicate") == .value(false))
    }

    @Test func expressionsParse() throws {
        #expect(try parse("employees.@count > 2") == .comparison(key("employees.@count"), .greaterThan, int(2)))
        #expect(try parse("employees.@avg.age >= 30") == .comparison(key("employees.@avg.age"), .greaterThanOrEqual, int(30)))
        #expect(try parse("SELF == %@", "x") == .comparison(.evaluatedObject, .equal, str("x")))
        #expect(try parse("tags[FIRST].name == 'a'") == .comparison(.member(.index(key("tags"), .first), "name"), .equal, str("a")))
        #expect(try parse("tags[SIZE] == 2") == .comparison(.index(key("tags"), .size), .equal, int(2)))
        #expect(try parse("tags[LAST] == nil") == .comparison(.index(key("tags"), .last), .equal, .constant(.null)))
        #expect(try parse("tags[1] == nil") == .comparison(.index(key("tags"), .position(1)), .equal, .constant(.null)))
        #expect(try parse("#in == 1") == .comparison(key("in"), .equal, int(1)))
        #expect(try parse("SELF.manager.name == 'x'") == .comparison(key("manager.name"), .equal, str("x")))
        #expect(try parse("sum:(employees.age) > 10") == .comparison(.function(.sum, [key("employees.age")]), .greaterThan, int(10)))
        let subquery = try parse("SUBQUERY(employees, $e, $e.age > 30 AND name BEGINSWITH 'A').@count > 0")
        #expect(subquery == .comparison(
            .member(.subquery(key("employees"), variable: "e", .and([
                .comparison(.member(.variable("e"), "age"), .greaterThan, int(30)),
                .comparison(key("name"), .beginsWith, str("A")),
            ])), "@count"),
            .greaterThan, int(0)))
    }

    @Test func typedFormatArgumentsFillSpecifiers() throws {
        let date = Date(timeIntervalSince1970: 1_000)
        let id = UUID()
        let predicate = try parse("%K == %@ AND age > %d AND score < %f AND code == %s AND born > %@ AND id == %@ AND n == %i AND x IN %@",
                                  "name", "Ada", 30, 2.5, "Z", date, id, Int16(4), [1, 2, 3])
        #expect(predicate == .and([
            .comparison(key("name"), .equal, str("Ada")),
            .comparison(key("age"), .greaterThan, int(30)),
            .comparison(key("score"), .lessThan, .constant(.attribute(.double(2.5)))),
            .comparison(key("code"), .equal, str("Z")),
            .comparison(key("born"), .greaterThan, .constant(.attribute(.date(date)))),
            .comparison(key("id"), .equal, .constant(.attribute(.uuid(id)))),
            .comparison(key("n"), .equal, .constant(.attribute(.int16(4)))),
            .comparison(key("x"), .in, .constant(.collection([.attribute(.int64(1)), .attribute(.int64(2)), .attribute(.int64(3))]))),
        ]))
        let optional: String? = nil
        #expect(try parse("a == %@", optional) == .comparison(key("a"), .equal, .constant(.null)))
    }

    @Test func variablesStayOrAreSubstituted() throws {
        let template = try parse("age > $MIN AND name == $NAME")
        #expect(template.freeVariables == ["MIN", "NAME"])
        let filled = template.substituting(["MIN": .attribute(.int64(3)), "NAME": .attribute(.string("x"))])
        #expect(filled == (try parse("age > 3 AND name == 'x'")))
        #expect(throws: ObjectGraphError.self) { try template.substitutingAll(["MIN": .attribute(.int64(3))]) }
        let direct = try FetchPredicate(format: "age > $MIN", argumentArray: [], substitutionVariables: ["MIN": .attribute(.int64(3))])
        #expect(direct == (try parse("age > 3")))
        #expect(try parse("SUBQUERY(tags, $t, $t.name == $N).@count > 0").freeVariables == ["N"])
    }

    @Test(arguments: [
        ("a == 1", "a == 1"),
        ("a = 1 and b <> 'x'", #"(a == 1 AND b != "x")"#),
        ("a =< 1 || b => 2 && !c < 3", "(a <= 1 OR (b >= 2 AND NOT c < 3))"),
        ("NONE tags.name like[cd] 'x?'", #"NOT ANY tags.name LIKE[cd] "x?""#),
        ("some a between {1, 2}", "ANY a BETWEEN {1, 2}"),
        ("all a in {'x', \"y\"}", #"ALL a IN {"x", "y"}"#),
        ("employees.@avg.age > 2.5", "employees.@avg.age > 2.5"),
        ("SUBQUERY(e, $x, $x.a == nil)[SIZE] == 0", "SUBQUERY(e, $x, $x.a == nil)[SIZE] == 0"),
        ("self == yes", "SELF == TRUE"),
        ("#like MATCHES '^[a-z]+$'", #"#like MATCHES "^[a-z]+$""#),
        ("max:(a.b) >= -3", "max:(a.b) >= -3"),
        ("a == 'tab\\there'", #"a == "tab\there""#),
        ("TRUEPREDICATE AND FALSEPREDICATE", "(TRUEPREDICATE AND FALSEPREDICATE)"),
        ("a[FIRST].b == $v", "a[FIRST].b == $v"),
        ("d > CAST(100.5, 'NSDate')", "d > CAST(100.5, \"NSDate\")"),
        ("u == CAST('6BA7B810-9DAD-11D1-80B4-00C04FD430C8', 'NSUUID')", "u == CAST(\"6BA7B810-9DAD-11D1-80B4-00C04FD430C8\", \"NSUUID\")"),
    ])
    func roundTripsThroughCanonicalFormat(format: String, canonical: String) throws {
        let parsed = try parse(format)
        #expect(parsed.canonicalFormat == canonical)
        #expect(try parse(canonical) == parsed, "the canonical form parses back to the same tree")
    }

    @Test func builderAndParserAgree() throws {
        #expect(try parse("age >= 18 AND name BEGINSWITH[c] 'A'") == (FetchPredicate.greaterThanOrEqual("age", 18) && .beginsWith("name", "A", options: .caseInsensitive)))
        #expect(try parse("age BETWEEN {1, 5}") == .between("age", 1, 5))
        #expect(try parse("NONE tags.name == 'x'") == .none("tags.name", .equal, "x"))
    }

    @Test func expressionBuilderMatchesTheParser() throws {
        typealias E = FetchExpression
        #expect(try parse("SUBQUERY(projects, $p, $p.budget > 300)[SIZE] > 0")
            == (E.key("projects").subquery("p", where: .variable("p", "budget") > .value(300)).count > .value(0)))
        #expect(try parse("name MATCHES[c] '[a-z]+' AND age BETWEEN {1, 5} AND salary <= age")
            == (E.key("name").matches(.value("[a-z]+"), options: .caseInsensitive) && E.key("age").between(.value(1), and: .value(5)) && E.key("salary") <= .key("age")))
        #expect(try parse("ANY tags.name ==[cd] 'x'") == E.key("tags.name").compare(.equal, .value("x"), modifier: .any, options: [.caseInsensitive, .diacriticInsensitive]))
        #expect(try parse("%@ IN tags", "x") == E.value("x").isIn(.key("tags")))
    }

    @Test func conjunctiveConstraintsListIndexableComparisons() throws {
        let predicate = try parse("age >= 18 AND 'A' == name AND (x == 1 OR y == 2) AND 5 < score AND ANY tags.name == 'q' AND id IN {1, 2}")
        #expect(predicate.conjunctiveConstraints.map(\.description) == ["age >= 18", #"name == "A""#, "score > 5", "id IN {1, 2}"])
        #expect(try parse("a == 1 OR b == 2").conjunctiveConstraints.isEmpty)
    }

    /// Malformed inputs and the offset of the character the error points at.
    @Test(arguments: [
        ("(a == 1", 7),                     // unbalanced: never closed
        ("a == 1)", 6),                     // unbalanced: stray ")"
        ("((a == 1) AND b == 2", 20),
        ("a === 1", 4),                     // "==" then "=" where an expression is expected
        ("a ~= 1", 2),                      // unknown character
        ("a FOO 1", 2),                     // unknown operator
        ("a == 'abc", 5),                   // unterminated string
        (#"a == "x\qy""#, 7),               // bad escape
        (#"a == "\u12""#, 6),               // short unicode escape
        ("a == %@", 5),                     // missing argument
        ("a == %x", 5),                     // unknown specifier
        ("a == 1 AND", 10),                 // nothing after AND
        ("a ==", 4),                        // nothing after operator
        ("a", 1),                           // no operator
        ("AND a == 1", 0),                  // starts with a keyword
        ("a BETWEEN {1, 2, 3}", 10),        // wrong bound count
        ("a IN {1, 2", 10),                 // unbalanced braces
        ("a ==[x] 1", 5),                   // unknown option
        ("SUBQUERY(tags, t, t == 1).@count > 0", 15), // subquery without a variable
        ("SUBQUERY(tags, $t, $t == 1", 26), // unclosed subquery
        ("a.@foo == 1", 2),                 // unknown collection operator
        ("a[FIRS] == 1", 2),                // bad index
        ("frobnicate:(a) == 1", 0),         // unknown function
        ("a == 12abc", 7),                  // bad number
        ("a.in == 1", 2),                   // reserved word as key
        ("a == $X", 5),                     // unknown variable (substitution given below)
        ("a == 1 b == 2", 7),               // missing connective
        ("sum:(a, b) == 1", 0),             // wrong argument count for a function
        ("SUBQUERY(tags, $t) == 1", 17),    // wrong argument count for SUBQUERY
        ("a == CAST(1, 'NSThing')", 13),    // unknown CAST type
        ("a == {1, 2", 10),                 // unbalanced braces inside a comparison
    ])
    func malformedInputsReportTheirPosition(format: String, offset: Int) {
        do {
            let predicate = try FetchPredicate(format: format, argumentArray: [], substitutionVariables: ["Y": .null])
            Issue.record("parsed \(format) as \(predicate)")
        } catch let error as ObjectGraphError {
            #expect(error.code == .malformedPredicate)
            #expect(error.offset == offset, "\(format): \(error.message)")
            #expect(error.message.contains("\n  " + String(repeating: " ", count: offset) + "^"), "caret under the offending character")
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    @Test func argumentCountAndTypeMistakesAreReported() {
        func offset(_ format: String, _ arguments: [any FetchArgument]) -> Int? {
            do { _ = try FetchPredicate(format: format, argumentArray: arguments); return nil } catch let error as ObjectGraphError {
                return error.code == .malformedPredicate ? error.offset : nil
            } catch { return nil }
        }
        #expect(offset("a == %@", [1, 2]) == 7, "too many arguments: points at the end")
        #expect(offset("a == %d", ["x"]) == 5, "%d needs an integer")
        #expect(offset("a == %f", ["s"]) == 5, "%f needs a number")
        #expect(offset("%K == 1", [3]) == 0, "%K needs a string")
        #expect(offset("a == %s", [4]) == 5, "%s needs a string")
        #expect(offset("a == %@ AND b == %@", ["x"]) == 17, "the second %@ has no argument")
    }

    /// A format parsed again is substituted into its parsed template: every format and
    /// argument list answers as a full parse does (the full parse is forced by passing
    /// substitution variables), the same tree or the same error, whatever came before.
    @Test func aFormatParsedAgainAnswersAsAFullParse() {
        let formats = [
            "name == %@", "a > %d AND b < %f OR c == %s", "x IN %@", "n BETWEEN {%d, %i}", "ANY tags.name ==[cd] %@",
            "SUBQUERY(items, $i, $i.price > %@).@count > %d", "%K == %@", "a == %@ AND b == %@", "name == 'fixed'",
            "{%@, 2} CONTAINS a", "CAST(%@, 'NSDate') > d", "a == $v", "a ==",
        ]
        let argumentLists: [[any FetchArgument]] = [
            ["Ada"], [1, 2.5, "s"], [[1, 2, 3]], [3, 9], [2, 5], ["x", "y"], ["x"], [], [4], ["s"], [1.5, 2], [Date(timeIntervalSince1970: 9), 1],
        ]
        func outcome(_ format: String, _ arguments: [any FetchArgument], full: Bool) -> String {
            do {
                let predicate = full
                    ? try FetchPredicate(format: format, argumentArray: arguments, substitutionVariables: [:])
                    : try FetchPredicate(format: format, argumentArray: arguments)
                return "\(predicate)"
            } catch let error as ObjectGraphError {
                // A full parse with variables also rejects `$v`; compare only formats without one.
                return "error \(error.code) at \(error.offset.map(String.init) ?? "-"): \(error.message)"
            } catch {
                return "error \(error)"
            }
        }
        for format in formats where !format.contains("$v") {
            for arguments in argumentLists + argumentLists.reversed() {
                #expect(outcome(format, arguments, full: false) == outcome(format, arguments, full: true), "\(format) with \(arguments)")
            }
        }
        // A variable stays a variable through the template, and is substituted later.
        #expect(throws: Never.self) { _ = try FetchPredicate(format: "a == $v AND b == %@", argumentArray: [1]).substitutingAll(["v": .attribute(.int64(2))]) }
    }

    @Test func unicodeKeysParseAndOffsetsCountCharacters() throws {
        #expect(try parse("prénom == 'Zoë'") == .comparison(key("prénom"), .equal, str("Zoë")))
        do {
            _ = try parse("nom == 'e\u{301}te\u{301}' ~")  // two decomposed é: 2 characters, 4 scalars
            Issue.record("parsed")
        } catch let error as ObjectGraphError {
            #expect(error.offset == 13, "offsets count characters, not scalars (15) or bytes")
        }
    }

    @Test func errorMessageShowsCaret() {
        do {
            _ = try parse("age > AND x")
            Issue.record("parsed")
        } catch let error as ObjectGraphError {
            #expect(error.offset == 6)
            #expect(error.message.hasSuffix("\n  age > AND x\n        ^"))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }
}

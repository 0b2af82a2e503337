import Foundation
import ObjectGraph
import Testing

/// `LIKE` against an oracle: every pattern of a small alphabet, turned into an anchored
/// regular expression, on every text of a small alphabet, ASCII (matched byte by byte) and
/// not (matched by characters, so `?` is one grapheme).
@Suite struct LikePatternTests {
    /// The regular expression of a pattern, matched on NFC text (Swift compares characters up
    /// to canonical equivalence; the expression compares code points).
    static func oracle(_ text: String, _ pattern: String) -> Bool {
        let text = text.precomposedStringWithCanonicalMapping
        let pattern = pattern.precomposedStringWithCanonicalMapping
        var regex = "^"
        var escaped = false
        for c in pattern {
            if escaped {
                regex += NSRegularExpression.escapedPattern(for: String(c))
                escaped = false
            } else if c == "\\" {
                escaped = true
            } else if c == "*" {
                regex += "(?:.|\\n)*"
            } else if c == "?" {
                regex += "\\X"
            } else {
                regex += NSRegularExpression.escapedPattern(for: String(c))
            }
        }
        if escaped { regex += "\\\\" }
        regex += "$"
        guard let expression = try? NSRegularExpression(pattern: regex) else { return false }
        return expression.firstMatch(in: text, range: NSRange(text.startIndex..<text.endIndex, in: text)) != nil
    }

    static func strings(_ alphabet: [String], upTo length: Int) -> [String] {
        var result = [""]
        var level = [""]
        for _ in 0..<length {
            level = level.flatMap { prefix in alphabet.map { prefix + $0 } }
            result += level
        }
        return result
    }

    @Test(arguments: [["a", "b"], ["a", "é", "e\u{301}"]])
    func likeMatchesAsItsRegularExpressionDoes(alphabet: [String]) throws {
        let texts = Self.strings(alphabet, upTo: 4)
        let patterns = Self.strings(alphabet + ["*", "?", "\\"], upTo: 3)
        for pattern in patterns {
            let predicate = FetchPredicate.comparison(.keyPath("x"), .like, .constant(.attribute(.string(pattern))))
            for text in texts {
                let subject: [String: AttributeValue] = ["x": .string(text)]
                #expect(try predicate.evaluate(with: subject) == Self.oracle(text, pattern), "\"\(text)\" LIKE \"\(pattern)\"")
            }
        }
    }
}

/// A one-attribute subject read by ordinal, as a store's row view is.
private struct OneString: OrdinalFetchEvaluable {
    let text: String
    func attributeValue(atOrdinal ordinal: Int) throws -> AttributeValue? { ordinal == 0 ? .string(text) : nil }
    func fetchValue(forKeyPath keyPath: String) throws -> FetchValue { .attribute(keyPath == "x" ? .string(text) : .null) }
}

/// A subject whose one string attribute is null.
private struct NullString: OrdinalFetchEvaluable {
    func attributeValue(atOrdinal ordinal: Int) throws -> AttributeValue? { ordinal == 0 ? .null : nil }
    func fetchValue(forKeyPath keyPath: String) throws -> FetchValue { .attribute(.null) }
}

/// The same subject, offering its text's UTF-8 bytes to string tests (as a store's row does).
private struct OneStringBytes: OrdinalFetchEvaluable {
    let text: String
    func attributeValue(atOrdinal ordinal: Int) throws -> AttributeValue? { ordinal == 0 ? .string(text) : nil }
    func fetchValue(forKeyPath keyPath: String) throws -> FetchValue { .attribute(keyPath == "x" ? .string(text) : .null) }
    func testStringBytes(atOrdinal ordinal: Int, _ test: (UnsafeBufferPointer<UInt8>) -> Bool?) throws -> Bool? {
        guard ordinal == 0 else { return nil }
        return Array(text.utf8).withUnsafeBufferPointer(test)
    }
}

/// The compiled string tests (the constant folded once, ASCII texts matched in place) against
/// the interpreted evaluation, which folds both sides per subject: every operator and option
/// (the string operators, equality and order) on texts and constants mixing case, accents,
/// decomposed accents, a CR LF and a Kelvin sign, texts read as
/// `String`s and as UTF-8 bytes.
@Suite struct CompiledStringTestTests {
    @Test func compiledStringTestsAnswerAsTheInterpreterDoes() throws {
        let entity = EntityDescription(name: "T", properties: [.attribute("x", .string)])
        _ = try ManagedObjectModel(entities: [entity])
        let alphabet = ["a", "B", "é", "E\u{301}", "\r\n", "\n"]
        // A Kelvin sign is canonically equivalent to "K": an ASCII text is not compared with a
        // constant that is not ASCII by its bytes.
        let texts = LikePatternTests.strings(alphabet, upTo: 3) + ["K", "k", "aK", "\u{212A}"]
        let constants = LikePatternTests.strings(alphabet + ["*", "?"], upTo: 2) + ["K", "\u{212A}", "a\u{212A}"]
        let allOptions: [ComparisonOptions] = [[], .caseInsensitive, .diacriticInsensitive, [.caseInsensitive, .diacriticInsensitive]]
        var checked = 0, held = 0
        let operators: [FetchComparisonOperator] = [
            .like, .contains, .beginsWith, .endsWith, .equal, .notEqual, .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual,
        ]
        for op in operators {
            for options in allOptions {
                for constant in constants {
                    let predicate = FetchPredicate.comparison(.keyPath("x"), op, .constant(.attribute(.string(constant))), options: options)
                    let compiled = try predicate.compiled(for: entity, as: OneString.self)
                    let onBytes = try predicate.compiled(for: entity, as: OneStringBytes.self)
                    for text in texts {
                        let expected = try predicate.evaluate(with: ["x": AttributeValue.string(text)])
                        try #require(compiled.evaluate(OneString(text: text)) == expected, "\"\(text)\" \(op.rawValue)[\(options.rawValue)] \"\(constant)\"")
                        try #require(onBytes.evaluate(OneStringBytes(text: text)) == expected, "on bytes: \"\(text)\" \(op.rawValue)[\(options.rawValue)] \"\(constant)\"")
                        checked += 1
                        if expected { held += 1 }
                    }
                }
            }
        }
        #expect(held > 1_000 && checked - held > 1_000, "both answers are common (\(held) of \(checked))")
        // A Kelvin sign is canonically equivalent to "K".
        let kelvin = try FetchPredicate.equal("x", "K").compiled(for: entity, as: OneStringBytes.self)
        #expect(try kelvin.evaluate(OneStringBytes(text: "\u{212A}")))
        #expect(try !kelvin.evaluate(OneStringBytes(text: "k")))
        // A null is unequal to every string, and neither before nor after one.
        for (op, expected) in [(FetchComparisonOperator.notEqual, true), (.equal, false), (.lessThan, false), (.greaterThanOrEqual, false)] {
            let predicate = FetchPredicate.comparison(.keyPath("x"), op, .constant(.attribute(.string("a"))))
            #expect(try predicate.compiled(for: entity, as: NullString.self).evaluate(NullString()) == expected, "nil \(op.rawValue) \"a\"")
            #expect(try predicate.evaluate(with: ["x": AttributeValue.null]) == expected, "interpreted: nil \(op.rawValue) \"a\"")
        }
    }
}

/// `MATCHES` compiled once (literal patterns with `.*` on either side tested on UTF-8 bytes,
/// a text's or a stored row's, the others through one compiled expression) against the
/// interpreted evaluation, which
/// runs the regular expression per subject: patterns of literals, escaped and unescaped
/// metacharacters and wildcards, on texts with accents, decomposed accents and every kind of
/// line terminator, with every option.
@Suite struct CompiledMatchesTests {
    @Test func compiledMatchesAnswersAsTheRegularExpressionDoes() throws {
        let entity = EntityDescription(name: "T", properties: [.attribute("x", .string)])
        _ = try ManagedObjectModel(entities: [entity])
        let texts = LikePatternTests.strings(["a", ".", "é", "e\u{301}", "\n", "\r", "\u{2028}"], upTo: 3)
        // Literal shapes (`.*a`, `a\..*`, `.*a.*`) and others (`a.a`, `\d.*`, `é.*`).
        let patterns = LikePatternTests.strings(["a", ".*", "\\.", ".", "é", "\\d"], upTo: 3)
        let allOptions: [ComparisonOptions] = [[], .caseInsensitive, .diacriticInsensitive]
        var checked = 0, held = 0
        for pattern in patterns {
            if (try? NSRegularExpression(pattern: pattern)) == nil { continue }
            for options in allOptions {
                let predicate = FetchPredicate.comparison(.keyPath("x"), .matches, .constant(.attribute(.string(pattern))), options: options)
                let compiled = try predicate.compiled(for: entity, as: OneString.self)
                // A subject that holds its text as bytes (a stored row): literal patterns test them.
                let onBytes = try predicate.compiled(for: entity, as: OneStringBytes.self)
                for text in texts {
                    let expected = try predicate.evaluate(with: ["x": AttributeValue.string(text)])
                    try #require(compiled.evaluate(OneString(text: text)) == expected, "\"\(text)\" MATCHES[\(options.rawValue)] \"\(pattern)\"")
                    try #require(onBytes.evaluate(OneStringBytes(text: text)) == expected, "on bytes: \"\(text)\" MATCHES[\(options.rawValue)] \"\(pattern)\"")
                    checked += 1
                    if expected { held += 1 }
                }
            }
        }
        #expect(held > 1_000 && checked - held > 1_000, "both answers are common (\(held) of \(checked))")
    }
}

/// A subject whose key `boom` throws: shows which parts of a compound predicate run.
private struct Exploding: OrdinalFetchEvaluable {
    struct Boom: Error {}
    func attributeValue(atOrdinal ordinal: Int) throws -> AttributeValue? { nil }
    func fetchValue(forKeyPath keyPath: String) throws -> FetchValue {
        if keyPath == "boom" { throw Boom() }
        return .attribute(.null)
    }
}

/// Compiled `AND` and `OR` (chained closures) against the interpreter: every combination of
/// up to three constant parts, nested one level, and the interpreter's short-circuit order
/// (a part after the deciding one is not evaluated, so its error does not surface).
@Suite struct CompiledCompoundTests {
    @Test func compiledAndAndOrAnswerAndShortCircuitAsTheInterpreterDoes() throws {
        let entity = EntityDescription(name: "T", properties: [.attribute("x", .string)])
        _ = try ManagedObjectModel(entities: [entity])
        var leaves: [[FetchPredicate]] = [[]]
        for _ in 0..<3 { leaves += leaves.filter { $0.count == leaves.map(\.count).max() }.flatMap { parts in [parts + [.value(true)], parts + [.value(false)]] } }
        let flat = leaves.flatMap { [FetchPredicate.and($0), .or($0)] }
        let nested = flat.flatMap { inner in [FetchPredicate.and([inner, .value(true)]), .or([.value(false), inner]), .and([.value(true), inner, .value(true)])] }
        for predicate in flat + nested {
            let compiled = try predicate.compiled(for: entity, as: OneString.self)
            try #require(try compiled.evaluate(OneString(text: "")) == predicate.evaluate(with: ["x": AttributeValue.string("")]), "\(predicate)")
        }
        #expect(leaves.count == 15)
        let boom = FetchPredicate.equal("boom", "x")
        for (predicate, throwsError) in [
            (FetchPredicate.and([.value(false), boom]), false), (.or([.value(true), boom]), false),
            (.and([.value(true), boom]), true), (.or([.value(false), boom]), true), (.and([boom]), true),
        ] {
            let compiled = try predicate.compiled(for: entity, as: Exploding.self)
            var threw = false
            do { _ = try compiled.evaluate(Exploding()) } catch { threw = true }
            #expect(threw == throwsError, "\(predicate)")
        }
    }
}

import ObjectGraph
import Testing

/// The lexer's cache of format strings: a repeated format parses to the same predicate with
/// each call's own arguments, and a bad format fails every time.
@Suite struct TokenCacheTests {
    @Test func aRepeatedFormatTakesEachCallsArguments() throws {
        let first = try FetchPredicate(format: "name == %@ AND age > %d", "Ada", 30)
        let second = try FetchPredicate(format: "name == %@ AND age > %d", "Grace", 40)
        #expect(first != second)
        #expect(try FetchPredicate(format: "name == %@ AND age > %d", "Ada", 30) == first)
        #expect(first.description.contains("Ada") && second.description.contains("Grace"))
    }

    @Test func aBadFormatFailsEveryTime() {
        for _ in 0..<3 {
            #expect(throws: ObjectGraphError.self) { _ = try FetchPredicate(format: "name == 'unterminated") }
        }
    }
}

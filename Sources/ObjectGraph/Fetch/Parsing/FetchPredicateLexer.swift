import Foundation
import StrataSync

/// One token of a predicate format string, with the character offset where it starts.
struct FetchPredicateToken: Equatable, Sendable {
    enum Kind: Equatable, Sendable {
        /// A name or keyword; `escaped` when written with a leading `#` (never a keyword).
        case identifier(String, escaped: Bool)
        /// A collection operator such as `@count`.
        case collectionOperator(String)
        case string(String)
        case integer(Int64)
        case float(Double)
        case variable(String)
        /// A format specifier: `@`, `K`, `d`, `i`, `f` or `s` (after any `l` length modifiers).
        case format(Character)
        case symbol(String)
        case end
    }

    let kind: Kind
    let offset: Int
    /// The keyword this token spells (uppercased), if it is an unescaped identifier.
    let keyword: String?

    init(kind: Kind, offset: Int) {
        self.kind = kind
        self.offset = offset
        if case .identifier(let name, false) = kind { keyword = name.uppercased() } else { keyword = nil }
    }

    func isSymbol(_ text: String) -> Bool { kind == .symbol(text) }
}

/// Splits a predicate format string into tokens; errors carry the offset of the
/// offending character.
struct FetchPredicateLexer {
    /// Words that are keywords in any case and must be escaped with `#` to be key paths.
    static let reservedWords: Set<String> = [
        "AND", "OR", "NOT", "ANY", "SOME", "ALL", "NONE", "IN", "LIKE", "MATCHES", "BEGINSWITH", "ENDSWITH",
        "CONTAINS", "BETWEEN", "NULL", "NIL", "TRUE", "FALSE", "YES", "NO", "SELF", "TRUEPREDICATE",
        "FALSEPREDICATE", "SUBQUERY", "FIRST", "LAST", "SIZE", "CAST",
    ]

    private let characters: [Character]
    private var position = 0
    let source: String

    init(_ source: String) {
        self.source = source
        self.characters = Array(source)
    }

    /// The tokens of recently lexed format strings: an app builds the same few predicates
    /// again and again (arguments are substituted by the parser, not the lexer). Bounded:
    /// emptied when it reaches ``tokenCacheLimit`` entries. Protected by its own lock.
    private static let tokenCache = Locked<[String: [FetchPredicateToken]]>([:])
    /// The most format strings ``tokenCache`` holds.
    static let tokenCacheLimit = 512
    /// Longer format strings are not cached (a generated predicate is rarely repeated).
    static let cachedSourceLimit = 1_024

    /// All tokens, ending with ``FetchPredicateToken/Kind/end``; a format string lexed
    /// recently is looked up, not lexed again.
    static func tokenize(_ source: String) throws -> [FetchPredicateToken] {
        guard source.utf8.count <= cachedSourceLimit else { return try lex(source) }
        if let tokens = tokenCache.withLock({ $0[source] }) { return tokens }
        let tokens = try lex(source)
        tokenCache.withLock { cache in
            if cache.count >= tokenCacheLimit { cache.removeAll(keepingCapacity: true) }
            cache[source] = tokens
        }
        return tokens
    }

    /// Lexes `source` whole.
    static func lex(_ source: String) throws -> [FetchPredicateToken] {
        var lexer = FetchPredicateLexer(source)
        var tokens: [FetchPredicateToken] = []
        while true {
            let token = try lexer.next()
            tokens.append(token)
            if token.kind == .end { return tokens }
        }
    }

    private func peek(_ ahead: Int = 0) -> Character? {
        position + ahead < characters.count ? characters[position + ahead] : nil
    }

    private func error(_ message: String, at offset: Int) -> ObjectGraphError {
        FetchPredicateParser.syntaxError(message, at: offset, in: source)
    }

    // ASCII is decided by byte: Unicode property lookups dominate lexing otherwise.
    private static func isIdentifierStart(_ c: Character) -> Bool {
        if let a = c.asciiValue { return (a >= 0x41 && a <= 0x5A) || (a >= 0x61 && a <= 0x7A) || a == 0x5F }
        return c.isLetter
    }
    private static func isIdentifierPart(_ c: Character) -> Bool {
        if let a = c.asciiValue { return (a >= 0x41 && a <= 0x5A) || (a >= 0x61 && a <= 0x7A) || (a >= 0x30 && a <= 0x39) || a == 0x5F }
        return c.isLetter || c.isNumber
    }
    private static func isDigit(_ c: Character?) -> Bool {
        guard let a = c?.asciiValue else { return false }
        return a >= 0x30 && a <= 0x39
    }
    private static func isSpace(_ c: Character) -> Bool {
        if let a = c.asciiValue { return a == 0x20 || (a >= 0x09 && a <= 0x0D) }
        return c.isWhitespace
    }

    private mutating func next() throws -> FetchPredicateToken {
        while let c = peek(), Self.isSpace(c) { position += 1 }
        let start = position
        guard let c = peek() else { return FetchPredicateToken(kind: .end, offset: start) }
        if Self.isIdentifierStart(c) || c == "#" {
            let escaped = c == "#"
            if escaped { position += 1 }
            guard let first = peek(), Self.isIdentifierStart(first) else {
                throw error("Expected a name after \"#\".", at: position)
            }
            return FetchPredicateToken(kind: .identifier(readName(), escaped: escaped), offset: start)
        }
        if c == "@" {
            position += 1
            guard let first = peek(), Self.isIdentifierStart(first) else {
                throw error("Expected a collection operator name after \"@\" (such as @count).", at: start)
            }
            return FetchPredicateToken(kind: .collectionOperator("@" + readName()), offset: start)
        }
        if c == "$" {
            position += 1
            guard let first = peek(), Self.isIdentifierStart(first) else {
                throw error("Expected a variable name after \"$\".", at: start)
            }
            return FetchPredicateToken(kind: .variable(readName()), offset: start)
        }
        if c == "%" { return try readFormat(start) }
        if c == "\"" || c == "'" { return try readString(start, quote: c) }
        if Self.isDigit(c) { return try readNumber(start) }
        if c == "." && Self.isDigit(peek(1)) { return try readNumber(start) }
        for symbol in ["==", "!=", "<>", "<=", "=<", ">=", "=>", "&&", "||"] where matches(symbol) {
            position += symbol.count
            return FetchPredicateToken(kind: .symbol(symbol), offset: start)
        }
        if "()[]{},.=<>!:-".contains(c) {
            position += 1
            return FetchPredicateToken(kind: .symbol(String(c)), offset: start)
        }
        throw error("Unexpected character \"\(c)\".", at: start)
    }

    private func matches(_ symbol: String) -> Bool {
        for (index, expected) in symbol.enumerated() where peek(index) != expected { return false }
        return true
    }

    private mutating func readName() -> String {
        var name = ""
        while let c = peek(), Self.isIdentifierPart(c) { name.append(c); position += 1 }
        return name
    }

    private mutating func readFormat(_ start: Int) throws -> FetchPredicateToken {
        position += 1
        while peek() == "l" || peek() == "q" { position += 1 }
        guard let specifier = peek(), "@KdifsuD".contains(specifier) else {
            throw error("Unknown format specifier \"%\(peek().map(String.init) ?? "")\"; use %@, %K, %d, %i, %f or %s.", at: start)
        }
        position += 1
        let normalized: Character = specifier == "u" || specifier == "D" ? "d" : specifier
        return FetchPredicateToken(kind: .format(normalized), offset: start)
    }

    private mutating func readString(_ start: Int, quote: Character) throws -> FetchPredicateToken {
        position += 1
        var text = ""
        while true {
            guard let c = peek() else { throw error("Unterminated string literal.", at: start) }
            position += 1
            if c == quote { return FetchPredicateToken(kind: .string(text), offset: start) }
            guard c == "\\" else { text.append(c); continue }
            let escapeOffset = position - 1
            guard let character = peek() else { throw error("Unterminated string literal.", at: start) }
            position += 1
            // The escape is the character's first scalar; marks joined to it (an accent
            // right after `\n`) are text that follows the escape.
            let scalars = character.unicodeScalars
            let e = Character(scalars[scalars.startIndex])
            defer { text.unicodeScalars.append(contentsOf: scalars.dropFirst()) }
            switch e {
            case "\\", "\"", "'": text.append(e)
            case "n": text.append("\n")
            case "t": text.append("\t")
            case "r": text.append("\r")
            case "0": text.append("\0")
            case "u":
                guard scalars.count == 1 else {
                    throw error("Bad escape \"\\\(character)\": expected four hexadecimal digits of a Unicode scalar.", at: escapeOffset)
                }
                var value = try readHexEscape(at: escapeOffset)
                if (0xD800...0xDBFF).contains(value) {
                    // A surrogate pair, as JSON writes a scalar beyond U+FFFF.
                    guard peek() == "\\", peek(1) == "u" else {
                        throw error("Bad escape: the high surrogate \\u\(String(value, radix: 16, uppercase: true)) needs a low one after it.", at: escapeOffset)
                    }
                    position += 2
                    let low = try readHexEscape(at: escapeOffset)
                    guard (0xDC00...0xDFFF).contains(low) else {
                        throw error("Bad escape: a high surrogate followed by \\u\(String(low, radix: 16, uppercase: true)), not a low one.", at: escapeOffset)
                    }
                    value = 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let scalar = Unicode.Scalar(value) else {
                    throw error("Bad escape: \\u\(String(value, radix: 16, uppercase: true)) is not a Unicode scalar (a lone surrogate).", at: escapeOffset)
                }
                text.unicodeScalars.append(scalar)
            default:
                throw error("Bad escape \"\\\(e)\" in string; use \\\\, \\\", \\', \\n, \\t, \\r, \\0 or \\uXXXX.", at: escapeOffset)
            }
        }
    }

    /// The four hexadecimal digits of a `\\u` escape, as a number.
    private mutating func readHexEscape(at escapeOffset: Int) throws -> UInt32 {
        var hex = ""
        while hex.count < 4, let h = peek(), h.isHexDigit, h.isASCII { hex.append(h); position += 1 }
        guard hex.count == 4, let value = UInt32(hex, radix: 16) else {
            throw error("Bad escape \"\\u\(hex)\": expected four hexadecimal digits.", at: escapeOffset)
        }
        return value
    }

    private mutating func readNumber(_ start: Int) throws -> FetchPredicateToken {
        var text = ""
        var isFloat = false
        if peek() == "0", let x = peek(1), x == "x" || x == "X" {
            position += 2
            var hex = ""
            while let h = peek(), h.isHexDigit { hex.append(h); position += 1 }
            guard let value = Int64(hex, radix: 16) else { throw error("Bad hexadecimal number.", at: start) }
            return FetchPredicateToken(kind: .integer(value), offset: start)
        }
        while let c = peek(), Self.isDigit(c) { text.append(c); position += 1 }
        if peek() == ".", Self.isDigit(peek(1)) {
            isFloat = true
            text.append("."); position += 1
            while let c = peek(), Self.isDigit(c) { text.append(c); position += 1 }
        }
        if let e = peek(), e == "e" || e == "E" {
            var ahead = 1
            if let sign = peek(1), sign == "+" || sign == "-" { ahead = 2 }
            if Self.isDigit(peek(ahead)) {
                isFloat = true
                for _ in 0..<ahead { text.append(characters[position]); position += 1 }
                while let c = peek(), Self.isDigit(c) { text.append(c); position += 1 }
            }
        }
        if let c = peek(), Self.isIdentifierStart(c) {
            throw error("Bad number: \"\(text)\" is followed by \"\(c)\".", at: position)
        }
        if !isFloat, let value = Int64(text) { return FetchPredicateToken(kind: .integer(value), offset: start) }
        guard let value = Double(text) else { throw error("Bad number \"\(text.prefix(40))\".", at: start) }
        guard value.isFinite else {
            throw error("The number \"\(text.prefix(40))\" is out of range: it is larger than any double.", at: start)
        }
        return FetchPredicateToken(kind: .float(value), offset: start)
    }
}

import Foundation
import Synchronization
import StrataSync

/// The string algorithms of the fetch language: `LIKE` wildcards, `MATCHES` regular
/// expressions (compiled once and cached) and numeric ordering of digit runs.
enum StringMatching {
    /// Whether `text` matches a `LIKE` pattern: `*` matches any run of characters
    /// (including none), `?` exactly one, `\*` and `\?` themselves.
    static func like(_ text: String, _ pattern: String) -> Bool {
        LikePattern(pattern).matches(text)
    }

    /// Folds an ASCII upper-case letter to lower case; any other byte is itself.
    @inline(__always)
    static func foldASCII(_ byte: UInt8) -> UInt8 { byte &- 0x41 < 26 ? byte | 0x20 : byte }

    /// Calls `body` with the UTF-8 bytes of `text`, in place when the string is contiguous
    /// (native strings are), else from a copy.
    @inline(__always)
    static func withUTF8<R>(_ text: String, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        if let result = text.utf8.withContiguousStorageIfAvailable(body) { return result }
        return Array(text.utf8).withUnsafeBufferPointer(body)
    }

    /// Whether every byte of UTF-8 `bytes` is a character of its own: ASCII without a
    /// carriage return (which joins a following line feed into one character).
    @inline(__always)
    static func isOneByteCharacters(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        for byte in bytes where byte >= 0x80 || byte == 0x0D { return false }
        return true
    }

    /// A `LIKE` pattern parsed once, to match many texts (a compiled predicate keeps one), with
    /// the comparison's case and diacritic options applied to the pattern once and to each
    /// text as it is matched (ASCII text is folded byte by byte, never copied).
    struct LikePattern: Sendable {
        /// One element of a pattern.
        enum Token<C: Equatable & Sendable>: Sendable {
            case literal(C)
            /// `?`: exactly one character.
            case one
            /// `*`: any run of characters.
            case star
        }

        private let tokens: [Token<Character>]
        /// The same as bytes, when the pattern is ASCII.
        private let asciiTokens: [Token<UInt8>]?
        /// The pattern as a substring test, when it is one: a literal (no `?`) with stars at
        /// one or both ends only (`*love*`, `The*`, `*ing`), the common shapes, tested without
        /// the backtracking matcher.
        private let fixed: FixedPattern?
        /// The case and diacritic folding of the comparison.
        private let options: ComparisonOptions

        init(_ pattern: String, options: ComparisonOptions = []) {
            self.options = options.intersection([.caseInsensitive, .diacriticInsensitive])
            var tokens: [Token<Character>] = []
            var escaped = false
            for c in self.options.normalize(pattern) {
                if escaped {
                    tokens.append(.literal(c))
                    escaped = false
                } else if c == "\\" {
                    escaped = true
                } else {
                    tokens.append(c == "*" ? .star : c == "?" ? .one : .literal(c))
                }
            }
            if escaped { tokens.append(.literal("\\")) }
            self.tokens = tokens
            asciiTokens = tokens.allSatisfy({ token in
                if case .literal(let c) = token { return c.utf8.count == 1 }
                return true
            })
                ? tokens.map { token -> Token<UInt8> in
                    switch token {
                    case .literal(let c): return .literal(c.asciiValue ?? 0)
                    case .one: return .one
                    case .star: return .star
                    }
                } : nil
            fixed = Self.fixedPattern(tokens, options: self.options)
        }

        /// The substring test equal to `tokens`, if they are stars, one literal run, stars.
        private static func fixedPattern(_ tokens: [Token<Character>], options: ComparisonOptions) -> FixedPattern? {
            func isStar(_ token: Token<Character>) -> Bool { if case .star = token { return true } else { return false } }
            let leading = tokens.prefix(while: isStar).count
            let rest = tokens.dropFirst(leading)
            let trailing = rest.reversed().prefix(while: isStar).count
            guard leading + trailing > 0 else { return nil }
            var literal = ""
            for token in rest.dropLast(trailing) {
                guard case .literal(let c) = token else { return nil }
                literal.append(c)
            }
            let kind: FixedPattern.Kind = leading > 0 && trailing > 0 ? .contains : leading > 0 ? .endsWith : .beginsWith
            return FixedPattern(kind, literal, options: options)
        }

        /// Whether the whole of `text` matches. ASCII text against an ASCII pattern is matched
        /// byte by byte (every ASCII character is one grapheme); anything else by characters,
        /// after folding.
        func matches(_ text: String) -> Bool {
            if let fixed { return fixed.matches(text) }
            if asciiTokens != nil, let result = StringMatching.withUTF8(text, matchesASCII) {
                return result
            }
            return Self.match(Array(options.normalize(text)), tokens, { $0 })
        }

        /// Whether the whole of the UTF-8 `text` matches, decided on its bytes when the
        /// pattern and the text are ASCII (each byte a character); `nil` otherwise.
        func matchesASCII(_ text: UnsafeBufferPointer<UInt8>) -> Bool? {
            if let fixed { return fixed.matchesASCII(text) }
            guard let asciiTokens, StringMatching.isOneByteCharacters(text) else { return nil }
            return options.contains(.caseInsensitive)
                ? Self.match(text, asciiTokens, StringMatching.foldASCII) : Self.match(text, asciiTokens, { $0 })
        }

        // Greedy matching with one backtrack point for the last star: linear in practice.
        @inline(__always)
        private static func match<T: RandomAccessCollection, C>(_ t: T, _ p: [Token<C>], _ fold: (C) -> C) -> Bool
        where T.Element == C, T.Index == Int {
            var ti = t.startIndex, pi = 0
            var star: Int? = nil, mark = ti
            while ti < t.endIndex {
                if pi < p.count, case .star = p[pi] {
                    star = pi; mark = ti; pi += 1
                    continue
                }
                if pi < p.count {
                    switch p[pi] {
                    case .one:
                        ti += 1; pi += 1
                        continue
                    case .literal(let c) where c == fold(t[ti]):
                        ti += 1; pi += 1
                        continue
                    default:
                        break
                    }
                }
                guard let s = star else { return false }
                pi = s + 1; mark += 1; ti = mark
            }
            while pi < p.count, case .star = p[pi] { pi += 1 }
            return pi == p.count
        }
    }

    /// A string's order against one constant string under the comparison's case and
    /// diacritic options (what `==`, `!=`, `<`, `<=`, `>` and `>=` test), as
    /// `AttributeValue.compare` gives it, with an ASCII text ordered against an ASCII
    /// constant by its bytes: ASCII strings compare as their bytes do, and under
    /// case-insensitivity as their lowercased bytes do. Other texts, and any text against a
    /// constant that is not ASCII (a Kelvin sign equals "K"), take the general comparison.
    struct OrderPattern: Sendable {
        private let constant: String
        /// The constant's bytes, lowercased under case-insensitivity, when it is ASCII.
        private let asciiConstant: [UInt8]?
        private let options: ComparisonOptions

        init(_ constant: String, options: ComparisonOptions) {
            self.constant = constant
            self.options = options.intersection([.caseInsensitive, .diacriticInsensitive])
            let folding = self.options.contains(.caseInsensitive)
            asciiConstant = constant.utf8.allSatisfy { $0 < 0x80 } ? constant.utf8.map { folding ? StringMatching.foldASCII($0) : $0 } : nil
        }

        /// The text's order against the constant; `nil` where `AttributeValue.compare` has none.
        func order(_ text: String) -> ComparisonResult? {
            if asciiConstant != nil, let result = StringMatching.withUTF8(text, orderASCII) { return result }
            return AttributeValue.compare(.string(text), .string(constant), options: options)
        }

        /// The order of the UTF-8 `text` against the constant when both are ASCII; `nil` otherwise.
        func orderASCII(_ text: UnsafeBufferPointer<UInt8>) -> ComparisonResult? {
            guard let asciiConstant else { return nil }
            for byte in text where byte >= 0x80 { return nil }
            let folding = options.contains(.caseInsensitive)
            return asciiConstant.withUnsafeBufferPointer { c -> ComparisonResult in
                let count = min(text.count, c.count)
                var i = 0
                while i < count {
                    let t = folding ? StringMatching.foldASCII(text[i]) : text[i]
                    if t != c[i] { return t < c[i] ? .orderedAscending : .orderedDescending }
                    i += 1
                }
                return text.count == c.count ? .orderedSame : (text.count < c.count ? .orderedAscending : .orderedDescending)
            }
        }
    }

    /// `CONTAINS`, `BEGINSWITH` or `ENDSWITH` against one constant string, with the
    /// comparison's case and diacritic options applied to the constant once and to each text
    /// as it is tested (ASCII text against an ASCII constant byte by byte, never copied).
    struct FixedPattern: Sendable {
        /// Which test.
        enum Kind: Sendable { case contains, beginsWith, endsWith }

        let kind: Kind
        private let needle: String
        private let asciiNeedle: [UInt8]?
        private let options: ComparisonOptions

        init(_ kind: Kind, _ constant: String, options: ComparisonOptions) {
            self.kind = kind
            self.options = options.intersection([.caseInsensitive, .diacriticInsensitive])
            needle = self.options.normalize(constant)
            asciiNeedle = needle.utf8.allSatisfy { $0 < 0x80 && $0 != 0x0D } ? Array(needle.utf8) : nil
        }

        func matches(_ text: String) -> Bool {
            if needle.isEmpty, kind == .contains { return true }
            if asciiNeedle != nil, let result = StringMatching.withUTF8(text, matchesASCII) {
                return result
            }
            let subject = options.normalize(text)
            switch kind {
            case .contains: return subject.contains(needle)
            case .beginsWith: return subject.hasPrefix(needle)
            case .endsWith: return subject.hasSuffix(needle)
            }
        }

        /// The test on the UTF-8 `text`'s bytes when the constant and the text are ASCII (each
        /// byte a character); `nil` otherwise.
        func matchesASCII(_ text: UnsafeBufferPointer<UInt8>) -> Bool? {
            guard let asciiNeedle, StringMatching.isOneByteCharacters(text) else { return nil }
            return asciiNeedle.withUnsafeBufferPointer { needle in
                options.contains(.caseInsensitive) ? test(text, needle, folding: true) : test(text, needle, folding: false)
            }
        }

        /// The test on bytes, the text's folded when `folding` (the needle is folded already):
        /// a candidate start is one whose first byte is the needle's.
        @inline(__always)
        private func test(_ t: UnsafeBufferPointer<UInt8>, _ n: UnsafeBufferPointer<UInt8>, folding: Bool) -> Bool {
            let count = n.count
            guard count <= t.count else { return false }
            guard count > 0 else { return true }
            @inline(__always) func fold(_ byte: UInt8) -> UInt8 { folding ? StringMatching.foldASCII(byte) : byte }
            @inline(__always) func at(_ start: Int) -> Bool {
                var i = 1
                while i < count {
                    if fold(t[start + i]) != n[i] { return false }
                    i += 1
                }
                return fold(t[start]) == n[0]
            }
            switch kind {
            case .beginsWith: return at(0)
            case .endsWith: return at(t.count - count)
            case .contains:
                let first = n[0], last = t.count - count
                var start = 0
                while start <= last {
                    if fold(t[start]) == first, at(start) { return true }
                    start += 1
                }
                return false
            }
        }
    }

    /// Whether the whole of `text` matches the regular expression.
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidFetchRequest`` for a pattern that does not compile.
    static func matches(_ text: String, _ pattern: String, caseInsensitive: Bool) throws -> Bool {
        matches(text, try compiled(pattern, caseInsensitive: caseInsensitive))
    }

    /// Whether `regex` (compiled by ``regex(_:caseInsensitive:)``) matches `text`.
    static func matches(_ text: String, _ regex: NSRegularExpression) -> Bool {
        let range = NSRange(text.startIndex..<text.endIndex, in: text)
        return regex.firstMatch(in: text, options: [], range: range) != nil
    }

    /// A `MATCHES` pattern compiled once, for a predicate compiled once.
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidFetchRequest`` for a pattern that does not compile.
    static func regex(_ pattern: String, caseInsensitive: Bool) throws -> NSRegularExpression {
        try compiled(pattern, caseInsensitive: caseInsensitive)
    }

    /// A `MATCHES` pattern that is a literal, optionally preceded and or followed by `.*`
    /// (`.*@gmail\.com`, `Re.*`, `.*love.*`), tested on UTF-8 bytes without the regular
    /// expression engine. The literal holds plain characters and backslash-escaped
    /// punctuation only; any other pattern is not one (`init` returns `nil`).
    ///
    /// It answers as the regular expression does (`.` matching anything but a line
    /// terminator) for ASCII text without line terminators and an ASCII pattern; for other
    /// text ``matches(_:)`` returns `nil` and the regular expression decides (Foundation's
    /// expressions compare some non-ASCII text up to canonical equivalence).
    struct LiteralPattern: Sendable {
        let leadingWildcard: Bool
        let trailingWildcard: Bool
        let literal: [UInt8]

        init?(_ pattern: String) {
            let bytes = Array(pattern.utf8)
            var tokens: [UInt8?] = []  // nil: `.*`
            var i = 0
            while i < bytes.count {
                let byte = bytes[i]
                if byte == UInt8(ascii: "."), i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "*") {
                    tokens.append(nil)
                    i += 2
                } else if byte == UInt8(ascii: "\\") {
                    guard i + 1 < bytes.count else { return nil }
                    let escaped = bytes[i + 1]
                    // `\.` and other escaped punctuation are literal; `\d`, `\Q`, `\u…` are not.
                    guard escaped < 0x80, escaped > 0x20, !(escaped >= 0x30 && escaped <= 0x39),
                        !((escaped | 0x20) >= 0x61 && (escaped | 0x20) <= 0x7A)
                    else { return nil }
                    tokens.append(escaped)
                    i += 2
                } else if Self.isMetacharacter(byte) || byte < 0x20 || byte >= 0x80 {
                    return nil
                } else {
                    tokens.append(byte)
                    i += 1
                }
            }
            leadingWildcard = tokens.first.map { $0 == nil } ?? false
            if leadingWildcard { tokens.removeFirst() }
            trailingWildcard = tokens.last.map { $0 == nil } ?? false
            if trailingWildcard { tokens.removeLast() }
            guard tokens.allSatisfy({ $0 != nil }) else { return nil }
            literal = tokens.compactMap { $0 }
        }

        /// Whether `byte` is one of `^$.|?*+()[]{}#` (a switch: a set's hashing cost ~200
        /// instructions a byte).
        private static func isMetacharacter(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "^"), UInt8(ascii: "$"), UInt8(ascii: "."), UInt8(ascii: "|"), UInt8(ascii: "?"), UInt8(ascii: "*"),
                UInt8(ascii: "+"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: "{"),
                UInt8(ascii: "}"), UInt8(ascii: "#"):
                return true
            default:
                return false
            }
        }

        /// Whether the whole of `text` matches; `nil` when `text` holds a line terminator
        /// (U+000A to U+000D; the others are not ASCII) or a character that is not ASCII.
        func matches(_ text: String) -> Bool? {
            var text = text
            return text.withUTF8 { matches(utf8: $0) }
        }

        /// ``matches(_:)`` on a text's UTF-8 bytes, read where they are (a stored row's):
        /// `nil` for the same texts.
        func matches(utf8 t: UnsafeBufferPointer<UInt8>) -> Bool? {
            for byte in t where byte >= 0x80 || (byte >= 0x0A && byte <= 0x0D) { return nil }
            let n = literal.count
            guard n <= t.count else { return false }
            func at(_ start: Int) -> Bool {
                for i in 0..<n where t[start + i] != literal[i] { return false }
                return true
            }
            switch (leadingWildcard, trailingWildcard) {
            case (false, false): return n == t.count && at(0)
            case (false, true): return at(0)
            case (true, false): return at(t.count - n)
            case (true, true):
                for start in 0...(t.count - n) where at(start) { return true }
                return false
            }
        }
    }

    /// Orders two strings comparing runs of ASCII digits by value (`a9 < a10`), other
    /// characters as Swift orders them.
    static func numericOrder(_ a: String, _ b: String) -> ComparisonResult {
        var i = a.unicodeScalars.makeIterator(), j = b.unicodeScalars.makeIterator()
        var x = i.next(), y = j.next()
        func isDigit(_ s: Unicode.Scalar?) -> Bool { s.map { $0.value >= 48 && $0.value <= 57 } ?? false }
        while let cx = x, let cy = y {
            if isDigit(cx) && isDigit(cy) {
                var dx = "", dy = ""
                while let s = x, isDigit(s) { dx.unicodeScalars.append(s); x = i.next() }
                while let s = y, isDigit(s) { dy.unicodeScalars.append(s); y = j.next() }
                let tx = dx.drop { $0 == "0" }, ty = dy.drop { $0 == "0" }
                if tx.count != ty.count { return tx.count < ty.count ? .orderedAscending : .orderedDescending }
                if tx != ty { return tx < ty ? .orderedAscending : .orderedDescending }
                continue
            }
            if cx != cy { return String(cx) < String(cy) ? .orderedAscending : .orderedDescending }
            x = i.next(); y = j.next()
        }
        if x == nil && y == nil { return .orderedSame }
        return x == nil ? .orderedAscending : .orderedDescending
    }

    /// A compiled expression, safe to share: `NSRegularExpression` is immutable once made.
    private final class Compiled: @unchecked Sendable {
        let regex: NSRegularExpression
        init(_ regex: NSRegularExpression) { self.regex = regex }
    }

    /// Compiled expressions by pattern and case option; cleared when it grows past 256.
    private static let cache = Locked<[String: Compiled]>([:])

    private static func compiled(_ pattern: String, caseInsensitive: Bool) throws -> NSRegularExpression {
        let key = (caseInsensitive ? "i:" : "s:") + pattern
        if let hit = cache.withLock({ $0[key] }) { return hit.regex }
        let regex: NSRegularExpression
        do {
            regex = try NSRegularExpression(pattern: "^(?:" + pattern + ")$", options: caseInsensitive ? [.caseInsensitive] : [])
        } catch {
            throw ObjectGraphError(.invalidFetchRequest, "MATCHES pattern /\(pattern)/ is not a valid regular expression: \(error).")
        }
        cache.withLock { cache in
            if cache.count >= 256 { cache.removeAll() }
            cache[key] = Compiled(regex)
        }
        return regex
    }
}

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

    /// A `LIKE` pattern parsed once, to match many texts (a compiled predicate keeps one).
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

        init(_ pattern: String) {
            var tokens: [Token<Character>] = []
            var escaped = false
            for c in pattern {
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
            asciiTokens = pattern.utf8.allSatisfy({ $0 < 0x80 })
                ? tokens.map { token -> Token<UInt8> in
                    switch token {
                    case .literal(let c): return .literal(c.asciiValue ?? 0)
                    case .one: return .one
                    case .star: return .star
                    }
                } : nil
        }

        /// Whether the whole of `text` matches. ASCII text against an ASCII pattern is matched
        /// byte by byte (every ASCII character is one grapheme); anything else by characters.
        func matches(_ text: String) -> Bool {
            if let asciiTokens, text.utf8.allSatisfy({ $0 < 0x80 }) {
                return Self.match(Array(text.utf8), asciiTokens)
            }
            return Self.match(Array(text), tokens)
        }

        // Greedy matching with one backtrack point for the last star: linear in practice.
        private static func match<C>(_ t: [C], _ p: [Token<C>]) -> Bool {
            var ti = 0, pi = 0
            var star: Int? = nil, mark = 0
            while ti < t.count {
                if pi < p.count, case .star = p[pi] {
                    star = pi; mark = ti; pi += 1
                    continue
                }
                if pi < p.count {
                    switch p[pi] {
                    case .one:
                        ti += 1; pi += 1
                        continue
                    case .literal(let c) where c == t[ti]:
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

    /// Whether the whole of `text` matches the regular expression.
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidFetchRequest`` for a pattern that does not compile.
    static func matches(_ text: String, _ pattern: String, caseInsensitive: Bool) throws -> Bool {
        let regex = try compiled(pattern, caseInsensitive: caseInsensitive)
        let range = NSRange(text.startIndex..<text.endIndex, in: text)
        return regex.firstMatch(in: text, options: [], range: range) != nil
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

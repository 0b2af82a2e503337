import Foundation

extension FetchPredicate: CustomStringConvertible {
    /// The predicate in canonical format syntax: `FetchPredicate(format: p.description)`
    /// parses back to an equal predicate whenever every constant has a literal form
    /// (strings, numbers, Booleans, null, dates, UUIDs, decimals and data; object IDs
    /// have none, pass them as arguments).
    ///
    /// Compound predicates are always parenthesised, operators are written in their
    /// main spelling (`==`, `!=`, `<=`, `>=`), keywords in capitals, strings in double
    /// quotes, and `NONE` as `NOT ANY`.
    public var description: String { canonicalFormat }

    /// The canonical format string; see ``description``. A predicate nested deeper than
    /// ``maximumDepth`` (built in code) prints `…` for what lies deeper.
    public var canonicalFormat: String { format(depth: 1) }

    /// ``canonicalFormat`` at nesting `depth`, which bounds the recursion.
    func format(depth: Int) -> String {
        guard depth <= Self.maximumDepth else { return "…" }
        switch self {
        case .value(let constant):
            return constant ? "TRUEPREDICATE" : "FALSEPREDICATE"
        case .comparison(let lhs, let op, let rhs, let modifier, let options):
            let prefix = modifier == .direct ? "" : modifier.rawValue + " "
            return "\(prefix)\(lhs.format(depth: depth + 1)) \(op.rawValue)\(options.formatFlags) \(rhs.format(depth: depth + 1))"
        case .and(let parts):
            return parts.isEmpty ? "TRUEPREDICATE" : "(" + parts.map { $0.format(depth: depth + 1) }.joined(separator: " AND ") + ")"
        case .or(let parts):
            return parts.isEmpty ? "FALSEPREDICATE" : "(" + parts.map { $0.format(depth: depth + 1) }.joined(separator: " OR ") + ")"
        case .not(let inner):
            return "NOT " + inner.format(depth: depth + 1)
        }
    }
}

extension FetchExpression: CustomStringConvertible {
    /// The expression in canonical format syntax.
    public var description: String { canonicalFormat }

    /// The expression in canonical format syntax; see ``FetchPredicate/canonicalFormat``.
    public var canonicalFormat: String { format(depth: 1) }

    /// ``canonicalFormat`` at nesting `depth`, which bounds the recursion.
    func format(depth: Int) -> String {
        guard depth <= FetchPredicate.maximumDepth else { return "…" }
        let next = depth + 1
        switch self {
        case .constant(let value): return Self.literal(value)
        case .evaluatedObject: return "SELF"
        case .keyPath(let path): return Self.formatKeyPath(path)
        case .variable(let name): return "$" + name
        case .member(let base, let path): return base.format(depth: next) + "." + Self.formatKeyPath(path)
        case .index(let base, let index):
            switch index {
            case .first: return base.format(depth: next) + "[FIRST]"
            case .last: return base.format(depth: next) + "[LAST]"
            case .size: return base.format(depth: next) + "[SIZE]"
            case .position(let n): return base.format(depth: next) + "[\(n)]"
            }
        case .aggregate(let parts): return "{" + parts.map { $0.format(depth: next) }.joined(separator: ", ") + "}"
        case .function(let function, let arguments):
            return function.rawValue + "(" + arguments.map { $0.format(depth: next) }.joined(separator: ", ") + ")"
        case .subquery(let collection, let variable, let predicate):
            return "SUBQUERY(\(collection.format(depth: next)), $\(variable), \(predicate.format(depth: next)))"
        }
    }

    /// A key path with reserved words escaped by `#`.
    static func formatKeyPath(_ path: String) -> String {
        path.split(separator: ".", omittingEmptySubsequences: false).map { part in
            FetchPredicateLexer.reservedWords.contains(part.uppercased()) ? "#" + part : String(part)
        }.joined(separator: ".")
    }

    /// A constant as a format-syntax literal.
    static func literal(_ value: FetchValue) -> String {
        switch value {
        case .collection(let members): return "{" + members.map(literal).joined(separator: ", ") + "}"
        case .object(let id): return "CAST(\(quoted(id.description)), \"NSManagedObjectID\")"
        case .attribute(let attribute):
            switch attribute {
            case .null: return "nil"
            case .bool(let v): return v ? "TRUE" : "FALSE"
            case .int16(let v): return String(v)
            case .int32(let v): return String(v)
            case .int64(let v): return String(v)
            case .double(let v): return formatDouble(v)
            case .float(let v): return formatDouble(Double(v))
            case .decimal(let v): return "CAST(\(quoted(v.description)), \"NSDecimalNumber\")"
            case .string(let v): return quoted(v)
            case .date(let v): return "CAST(\(formatDouble(v.timeIntervalSinceReferenceDate)), \"NSDate\")"
            case .uuid(let v): return "CAST(\(quoted(v.uuidString)), \"NSUUID\")"
            case .data(let v): return "CAST(\(quoted(v.base64EncodedString())), \"NSData\")"
            case .uri(let v): return "CAST(\(quoted(v.absoluteString)), \"NSURL\")"
            case .transformable(let v): return "CAST(\(quoted(v.base64EncodedString())), \"NSData\")"
            }
        }
    }

    private static func formatDouble(_ value: Double) -> String {
        if value.isNaN || value.isInfinite { return value.isNaN ? "CAST(\"nan\", \"NSNumber\")" : (value > 0 ? "CAST(\"inf\", \"NSNumber\")" : "CAST(\"-inf\", \"NSNumber\")") }
        let text = "\(value)"
        return text.utf8.contains(UInt8(ascii: ".")) || text.utf8.contains(UInt8(ascii: "e")) ? text : text + ".0"
    }

    /// A string in double quotes with `\`, `"` and control characters escaped.
    ///
    /// A scalar that would join the character before it into one grapheme (a combining
    /// mark) is escaped too when that character belongs to the syntax, the opening quote or
    /// the end of an escape: the lexer reads characters, and would otherwise read a quote
    /// or an escape letter with an accent.
    static func quoted(_ text: String) -> String {
        var result = "\""
        // Whether the last character written is syntax (the quote or an escape's end).
        var afterSyntax = true
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\t": result += "\\t"
            case "\r": result += "\\r"
            default:
                if scalar.value < 0x20 || (afterSyntax && joinsPrevious(scalar)) || joinsNext(scalar) {
                    appendEscape(scalar, to: &result)
                } else {
                    result.unicodeScalars.append(scalar)
                    afterSyntax = false
                    continue
                }
            }
            afterSyntax = true
        }
        return result + "\""
    }

    /// Whether `scalar` after an ASCII letter makes one grapheme with it.
    private static func joinsPrevious(_ scalar: Unicode.Scalar) -> Bool {
        guard scalar.value >= 0x300 else { return false }
        var probe = "x"
        probe.unicodeScalars.append(scalar)
        return probe.count == 1
    }

    /// Whether `scalar` before an ASCII letter makes one grapheme with it (a prepended
    /// mark): it could join the closing quote or an escape's backslash, so it is always
    /// escaped.
    private static func joinsNext(_ scalar: Unicode.Scalar) -> Bool {
        guard scalar.value >= 0x600 else { return false }
        var probe = String(Character(scalar))
        probe += "x"
        return probe.count == 1
    }

    /// `\uXXXX`, or a surrogate pair of them for a scalar beyond the Basic Multilingual
    /// Plane (the escapes read four digits).
    private static func appendEscape(_ scalar: Unicode.Scalar, to result: inout String) {
        if scalar.value > 0xFFFF {
            let value = scalar.value - 0x10000
            result += String(format: "\\u%04X\\u%04X", 0xD800 + (value >> 10), 0xDC00 + (value & 0x3FF))
        } else {
            result += String(format: "\\u%04X", scalar.value)
        }
    }
}

import Foundation

/// The comparison a ``FetchPredicate/comparison(_:_:_:modifier:options:)`` performs
/// (Core Data's `NSPredicate.Operator`); the raw value is the canonical format spelling.
public enum FetchComparisonOperator: String, Sendable, Hashable, CaseIterable {
    /// `==` (also `=`).
    case equal = "=="
    /// `!=` (also `<>`).
    case notEqual = "!="
    /// `<`
    case lessThan = "<"
    /// `<=` (also `=<`).
    case lessThanOrEqual = "<="
    /// `>`
    case greaterThan = ">"
    /// `>=` (also `=>`).
    case greaterThanOrEqual = ">="
    /// `IN`: the left value is a member of the right collection, or a substring of the right string.
    case `in` = "IN"
    /// `BEGINSWITH`: the left string starts with the right one.
    case beginsWith = "BEGINSWITH"
    /// `ENDSWITH`: the left string ends with the right one.
    case endsWith = "ENDSWITH"
    /// `CONTAINS`: the left string contains the right one, or the left collection contains the right value.
    case contains = "CONTAINS"
    /// `LIKE`: the left string matches the right pattern, where `*` matches any run of
    /// characters and `?` exactly one.
    case like = "LIKE"
    /// `MATCHES`: the whole left string matches the right regular expression (ICU syntax,
    /// through `NSRegularExpression`).
    case matches = "MATCHES"
    /// `BETWEEN`: the left value lies within the right two-element aggregate, bounds included.
    case between = "BETWEEN"
}

/// How a comparison treats a collection on its left (`ANY`, `ALL`, `NONE` in the format syntax).
public enum FetchComparisonModifier: String, Sendable, Hashable, CaseIterable {
    /// No keyword. A collection on the left matches when any element does (implicit `ANY`),
    /// except that `!=` then means that no element is equal, `CONTAINS` tests membership
    /// and `@count`-style values are compared as they are.
    case direct = ""
    /// `ANY` (also `SOME`): some element of the left collection satisfies the comparison.
    case any = "ANY"
    /// `ALL`: every element satisfies it (true for an empty collection).
    case all = "ALL"
}

/// Options for string comparisons in predicates and sort descriptors (`[c]`, `[d]` in the
/// format syntax; ``numeric`` for sorting).
public struct ComparisonOptions: OptionSet, Sendable, Hashable {
    /// The options' bits.
    public let rawValue: Int
    /// Creates options from bits.
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// Ignore case (`[c]`): Unicode case folding, not just ASCII.
    public static let caseInsensitive = ComparisonOptions(rawValue: 1)
    /// Ignore diacritics (`[d]`): `é` matches `e`, `Å` matches `A`.
    public static let diacriticInsensitive = ComparisonOptions(rawValue: 2)
    /// Compare runs of digits by their numeric value (`"file9" < "file10"`).
    public static let numeric = ComparisonOptions(rawValue: 4)
    /// Case- and diacritic-insensitive with numeric digit runs: like Foundation's
    /// `localizedStandardCompare`, without locale-specific collation.
    public static let localizedStandard: ComparisonOptions = [.caseInsensitive, .diacriticInsensitive, .numeric]

    /// The format-syntax flags, such as `[cd]`, or the empty string.
    var formatFlags: String {
        let letters = (contains(.caseInsensitive) ? "c" : "") + (contains(.diacriticInsensitive) ? "d" : "")
        return letters.isEmpty ? "" : "[\(letters)]"
    }

    /// The text with case and diacritics folded as the options ask.
    func normalize(_ text: String) -> String {
        var folding: String.CompareOptions = []
        if contains(.caseInsensitive) { folding.insert(.caseInsensitive) }
        if contains(.diacriticInsensitive) { folding.insert(.diacriticInsensitive) }
        if folding.isEmpty { return text }
        // ASCII text has no diacritics and folds case by byte: skip Foundation's folding.
        if text.utf8.allSatisfy({ $0 < 0x80 }) {
            guard contains(.caseInsensitive), text.utf8.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) else { return text }
            return String(decoding: text.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 }, as: UTF8.self)
        }
        // Folding does not map every case pair (for example final sigma); lowercasing after it does.
        let folded = text.folding(options: folding, locale: nil)
        return contains(.caseInsensitive) ? folded.lowercased() : folded
    }
}

import Foundation

/// The key a store uses for one of its rows (Core Data's `referenceObject`, typed).
///
/// In an object URI the reference is written after `p`: an integer as its decimal
/// digits (`p42`), a UUID as `pu` and its uppercase text, a string as `ps` and its
/// percent-escaped text. The three forms never overlap, so a URI names exactly one
/// reference.
public enum ReferenceObject: Sendable, Hashable, CustomStringConvertible {
    /// An integer key, the usual choice.
    case int64(Int64)
    /// A string key.
    case string(String)
    /// A UUID key.
    case uuid(UUID)

    /// The reference as written in an object URI, after the `p`.
    public var uriComponent: String {
        switch self {
        case .int64(let value): return String(value)
        case .uuid(let value): return "u" + value.uuidString
        case .string(let value):
            return "s" + (value.addingPercentEncoding(withAllowedCharacters: Self.unescaped) ?? value)
        }
    }

    /// Parses the text after the `p` of an object URI.
    public init?(uriComponent text: String) {
        if let value = Int64(text) {
            self = .int64(value)
        } else if text.hasPrefix("u"), let value = UUID(uuidString: String(text.dropFirst())) {
            self = .uuid(value)
        } else if text.hasPrefix("s"), let value = String(text.dropFirst()).removingPercentEncoding {
            self = .string(value)
        } else {
            return nil
        }
    }

    /// The reference as written in an object URI.
    public var description: String { uriComponent }

    /// RFC 3986's unreserved characters, ASCII only: everything else (non-ASCII letters
    /// too, which `CharacterSet.alphanumerics` would keep and `URL` would then escape a
    /// second time) is percent-escaped as UTF-8.
    private static let unescaped = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
}

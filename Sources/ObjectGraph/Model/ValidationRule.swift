import Foundation

/// A rule an attribute's value must satisfy when its object is saved.
///
/// Rules apply to non-null values; whether `null` is allowed is the attribute's
/// ``PropertyDescription/isOptional``.
public enum ValidationRule: Sendable, Hashable {
    /// The value must not be less than this one (numbers and dates).
    case minimum(AttributeValue)
    /// The value must not be greater than this one (numbers and dates).
    case maximum(AttributeValue)
    /// A string must have at least this many characters.
    case minimumLength(Int)
    /// A string must have at most this many characters.
    case maximumLength(Int)
    /// A string must match this regular expression as a whole.
    case pattern(String)
}

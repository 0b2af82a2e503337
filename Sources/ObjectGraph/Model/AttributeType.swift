import Foundation

/// The storage type of an attribute, Core Data's `NSAttributeType` without the prefix.
public enum AttributeType: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// A 16-bit signed integer.
    case integer16
    /// A 32-bit signed integer.
    case integer32
    /// A 64-bit signed integer.
    case integer64
    /// A double-precision floating-point number.
    case double
    /// A single-precision floating-point number.
    case float
    /// A base-10 decimal number.
    case decimal
    /// A Boolean.
    case boolean
    /// A string.
    case string
    /// A point in time.
    case date
    /// Raw bytes.
    case binaryData
    /// A UUID.
    case uuid
    /// A URL.
    case uri
    /// A `Codable` value stored as encoded bytes.
    case transformable

    /// The type's name, as used in error messages.
    public var description: String { rawValue }

    /// Whether values of this type are numbers that compare and validate as numbers.
    public var isNumeric: Bool {
        switch self {
        case .integer16, .integer32, .integer64, .double, .float, .decimal: return true
        default: return false
        }
    }
}

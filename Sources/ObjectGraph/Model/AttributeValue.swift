import Foundation

/// A typed attribute value: what Core Data stores as `Any` in an attribute.
///
/// For example:
///
/// ```swift
/// try person.setValue(.string("Ada"), forKey: "name")
/// try person.setValue(36, forKey: "age")          // integer literal
/// let name = try person.value(forKey: "name").stringValue
/// ```
///
/// Integer values convert between the three integer attribute types when they fit;
/// every other mismatch is a ``ObjectGraphError/Code/wrongValueType`` error.
public enum AttributeValue: Sendable, Hashable, CustomStringConvertible {
    /// No value.
    case null
    /// A 16-bit integer.
    case int16(Int16)
    /// A 32-bit integer.
    case int32(Int32)
    /// A 64-bit integer.
    case int64(Int64)
    /// A double.
    case double(Double)
    /// A float.
    case float(Float)
    /// A decimal.
    case decimal(Decimal)
    /// A Boolean.
    case bool(Bool)
    /// A string.
    case string(String)
    /// A date.
    case date(Date)
    /// Bytes.
    case data(Data)
    /// A UUID.
    case uuid(UUID)
    /// A URL.
    case uri(URL)
    /// A `Codable` value, already encoded; see ``transformable(encoding:)``.
    case transformable(Data)

    /// The attribute type this value belongs to, or `nil` for ``null``.
    public var type: AttributeType? {
        switch self {
        case .null: return nil
        case .int16: return .integer16
        case .int32: return .integer32
        case .int64: return .integer64
        case .double: return .double
        case .float: return .float
        case .decimal: return .decimal
        case .bool: return .boolean
        case .string: return .string
        case .date: return .date
        case .data: return .binaryData
        case .uuid: return .uuid
        case .uri: return .uri
        case .transformable: return .transformable
        }
    }

    /// Whether this is ``null``.
    public var isNull: Bool { if case .null = self { return true } else { return false } }

    /// The string, if this is a string.
    public var stringValue: String? { if case .string(let v) = self { return v } else { return nil } }
    /// The Boolean, if this is a Boolean.
    public var boolValue: Bool? { if case .bool(let v) = self { return v } else { return nil } }
    /// The date, if this is a date.
    public var dateValue: Date? { if case .date(let v) = self { return v } else { return nil } }
    /// The bytes, if this is binary data or a transformable value.
    public var dataValue: Data? {
        switch self {
        case .data(let v), .transformable(let v): return v
        default: return nil
        }
    }
    /// The UUID, if this is a UUID.
    public var uuidValue: UUID? { if case .uuid(let v) = self { return v } else { return nil } }
    /// The URL, if this is a URL.
    public var urlValue: URL? { if case .uri(let v) = self { return v } else { return nil } }

    /// The value as a 64-bit integer, if it is an integer of any width.
    public var integerValue: Int64? {
        switch self {
        case .int16(let v): return Int64(v)
        case .int32(let v): return Int64(v)
        case .int64(let v): return v
        default: return nil
        }
    }

    /// The value as a double, if it is any number.
    public var doubleValue: Double? {
        switch self {
        case .int16(let v): return Double(v)
        case .int32(let v): return Double(v)
        case .int64(let v): return Double(v)
        case .double(let v): return v
        case .float(let v): return Double(v)
        case .decimal(let v): return NSDecimalNumber(decimal: v).doubleValue
        default: return nil
        }
    }

    /// Encodes a `Codable` value as a ``transformable(_:)`` value (JSON, sorted keys).
    public static func transformable<T: Encodable>(encoding value: T) throws -> AttributeValue {
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            return .transformable(try encoder.encode(value))
        } catch {
            throw ObjectGraphError(.transformFailed, "Could not encode \(T.self): \(error).")
        }
    }

    /// Decodes a ``transformable(_:)`` value; `nil` for ``null``.
    public func decoded<T: Decodable>(as type: T.Type) throws -> T? {
        switch self {
        case .null: return nil
        case .transformable(let data):
            do { return try JSONDecoder().decode(T.self, from: data) } catch {
                throw ObjectGraphError(.transformFailed, "Could not decode \(T.self): \(error).")
            }
        default:
            throw ObjectGraphError(.wrongValueType, "Expected a transformable value, found \(typeName).")
        }
    }

    /// The name of the value's type, for messages.
    public var typeName: String { type?.description ?? "null" }

    /// A short rendering of the value.
    public var description: String {
        switch self {
        case .null: return "null"
        case .int16(let v): return "\(v)"
        case .int32(let v): return "\(v)"
        case .int64(let v): return "\(v)"
        case .double(let v): return "\(v)"
        case .float(let v): return "\(v)"
        case .decimal(let v): return "\(v)"
        case .bool(let v): return "\(v)"
        case .string(let v): return "\"\(v)\""
        case .date(let v): return "\(v)"
        case .data(let v): return "<\(v.count) bytes>"
        case .uuid(let v): return v.uuidString
        case .uri(let v): return v.absoluteString
        case .transformable(let v): return "<transformable \(v.count) bytes>"
        }
    }

    /// Converts the value to an attribute's declared type, or returns `nil` when it
    /// cannot be represented (a different kind, or an integer out of range).
    ///
    /// Integers convert between widths when they fit; a double converts to a float and a
    /// float to a double; `null` converts to every type.
    public func converted(to target: AttributeType) -> AttributeValue? {
        if isNull || type == target { return self }
        switch target {
        case .integer16:
            if let v = integerValue, let narrowed = Int16(exactly: v) { return .int16(narrowed) }
        case .integer32:
            if let v = integerValue, let narrowed = Int32(exactly: v) { return .int32(narrowed) }
        case .integer64:
            if let v = integerValue { return .int64(v) }
        case .double:
            if case .float(let v) = self { return .double(Double(v)) }
        case .float:
            if case .double(let v) = self { return .float(Float(v)) }
        case .decimal:
            if let v = integerValue { return .decimal(Decimal(v)) }
        default:
            break
        }
        return nil
    }
}

extension AttributeValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral, ExpressibleByNilLiteral
{
    /// A string literal is a ``string(_:)``.
    public init(stringLiteral value: String) { self = .string(value) }
    /// An integer literal is an ``int64(_:)``, converted to the attribute's width on set.
    public init(integerLiteral value: Int64) { self = .int64(value) }
    /// A float literal is a ``double(_:)``.
    public init(floatLiteral value: Double) { self = .double(value) }
    /// A Boolean literal is a ``bool(_:)``.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// `nil` is ``null``.
    public init(nilLiteral: ()) { self = .null }
}

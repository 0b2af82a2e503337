import Foundation

/// A Swift type that converts to and from an ``AttributeValue``.
///
/// Used by typed accessors such as ``ManagedObject/value(forKey:as:)`` and the
/// ``Managed`` property wrapper. Optionals of conforming types conform too, with
/// `nil` mapping to ``AttributeValue/null``.
public protocol AttributeValueConvertible {
    /// The value as an attribute value.
    var attributeValue: AttributeValue { get }
    /// Reads the value from an attribute value, or returns `nil` if it has another type.
    init?(attributeValue: AttributeValue)
}

extension Int16: AttributeValueConvertible {
    /// The value as ``AttributeValue/int16(_:)``.
    public var attributeValue: AttributeValue { .int16(self) }
    /// Reads any integer that fits.
    public init?(attributeValue: AttributeValue) {
        guard let v = attributeValue.integerValue, let x = Int16(exactly: v) else { return nil }
        self = x
    }
}

extension Int32: AttributeValueConvertible {
    /// The value as ``AttributeValue/int32(_:)``.
    public var attributeValue: AttributeValue { .int32(self) }
    /// Reads any integer that fits.
    public init?(attributeValue: AttributeValue) {
        guard let v = attributeValue.integerValue, let x = Int32(exactly: v) else { return nil }
        self = x
    }
}

extension Int64: AttributeValueConvertible {
    /// The value as ``AttributeValue/int64(_:)``.
    public var attributeValue: AttributeValue { .int64(self) }
    /// Reads any integer.
    public init?(attributeValue: AttributeValue) {
        guard let v = attributeValue.integerValue else { return nil }
        self = v
    }
}

extension Int: AttributeValueConvertible {
    /// The value as ``AttributeValue/int64(_:)``.
    public var attributeValue: AttributeValue { .int64(Int64(self)) }
    /// Reads any integer that fits.
    public init?(attributeValue: AttributeValue) {
        guard let v = attributeValue.integerValue, let x = Int(exactly: v) else { return nil }
        self = x
    }
}

extension Double: AttributeValueConvertible {
    /// The value as ``AttributeValue/double(_:)``.
    public var attributeValue: AttributeValue { .double(self) }
    /// Reads a double or a float.
    public init?(attributeValue: AttributeValue) {
        switch attributeValue {
        case .double(let v): self = v
        case .float(let v): self = Double(v)
        default: return nil
        }
    }
}

extension Float: AttributeValueConvertible {
    /// The value as ``AttributeValue/float(_:)``.
    public var attributeValue: AttributeValue { .float(self) }
    /// Reads a float or a double.
    public init?(attributeValue: AttributeValue) {
        switch attributeValue {
        case .float(let v): self = v
        case .double(let v): self = Float(v)
        default: return nil
        }
    }
}

extension Decimal: AttributeValueConvertible {
    /// The value as ``AttributeValue/decimal(_:)``.
    public var attributeValue: AttributeValue { .decimal(self) }
    /// Reads a decimal.
    public init?(attributeValue: AttributeValue) {
        guard case .decimal(let v) = attributeValue else { return nil }
        self = v
    }
}

extension Bool: AttributeValueConvertible {
    /// The value as ``AttributeValue/bool(_:)``.
    public var attributeValue: AttributeValue { .bool(self) }
    /// Reads a Boolean.
    public init?(attributeValue: AttributeValue) {
        guard let v = attributeValue.boolValue else { return nil }
        self = v
    }
}

extension String: AttributeValueConvertible {
    /// The value as ``AttributeValue/string(_:)``.
    public var attributeValue: AttributeValue { .string(self) }
    /// Reads a string.
    public init?(attributeValue: AttributeValue) {
        guard let v = attributeValue.stringValue else { return nil }
        self = v
    }
}

extension Date: AttributeValueConvertible {
    /// The value as ``AttributeValue/date(_:)``.
    public var attributeValue: AttributeValue { .date(self) }
    /// Reads a date.
    public init?(attributeValue: AttributeValue) {
        guard let v = attributeValue.dateValue else { return nil }
        self = v
    }
}

extension Data: AttributeValueConvertible {
    /// The value as ``AttributeValue/data(_:)``.
    public var attributeValue: AttributeValue { .data(self) }
    /// Reads binary data.
    public init?(attributeValue: AttributeValue) {
        guard case .data(let v) = attributeValue else { return nil }
        self = v
    }
}

extension UUID: AttributeValueConvertible {
    /// The value as ``AttributeValue/uuid(_:)``.
    public var attributeValue: AttributeValue { .uuid(self) }
    /// Reads a UUID.
    public init?(attributeValue: AttributeValue) {
        guard let v = attributeValue.uuidValue else { return nil }
        self = v
    }
}

extension URL: AttributeValueConvertible {
    /// The value as ``AttributeValue/uri(_:)``.
    public var attributeValue: AttributeValue { .uri(self) }
    /// Reads a URL.
    public init?(attributeValue: AttributeValue) {
        guard let v = attributeValue.urlValue else { return nil }
        self = v
    }
}

extension Optional: AttributeValueConvertible where Wrapped: AttributeValueConvertible {
    /// `nil` is ``AttributeValue/null``.
    public var attributeValue: AttributeValue { self?.attributeValue ?? .null }
    /// ``AttributeValue/null`` is `nil`; any other value must convert to `Wrapped`.
    public init?(attributeValue: AttributeValue) {
        if attributeValue.isNull { self = .none; return }
        guard let v = Wrapped(attributeValue: attributeValue) else { return nil }
        self = .some(v)
    }
}

import Foundation

/// A Swift value that can fill a format specifier (`%@`, `%K`, `%d`, `%i`, `%f`, `%s`) of
/// ``FetchPredicate/init(format:_:)``.
///
/// Numbers, strings, Booleans, dates, data, UUIDs, URLs, decimals, attribute and fetch
/// values, object IDs, managed objects (compared by ID), optionals (nil is null) and
/// arrays of any of these (for `IN` and `BETWEEN`) adopt it.
public protocol FetchArgument {
    /// The value the argument stands for in the predicate.
    var fetchArgumentValue: FetchValue { get }
}

extension FetchValue: FetchArgument {
    /// The value itself.
    public var fetchArgumentValue: FetchValue { self }
}

extension AttributeValue: FetchArgument {
    /// The attribute value.
    public var fetchArgumentValue: FetchValue { .attribute(self) }
}

extension ManagedObjectID: FetchArgument {
    /// The object, by ID.
    public var fetchArgumentValue: FetchValue { .object(self) }
}

extension ManagedObject: FetchArgument {
    /// The object, by ID (a managed object compares by identity of its ID).
    public var fetchArgumentValue: FetchValue { .object(objectID) }
}

extension Int: FetchArgument {
    /// The integer as an int64 value.
    public var fetchArgumentValue: FetchValue { .attribute(attributeValue) }
}
extension Int16: FetchArgument {
    /// The integer.
    public var fetchArgumentValue: FetchValue { .attribute(attributeValue) }
}
extension Int32: FetchArgument {
    /// The integer.
    public var fetchArgumentValue: FetchValue { .attribute(attributeValue) }
}
extension Int64: FetchArgument {
    /// The integer.
    public var fetchArgumentValue: FetchValue { .attribute(attributeValue) }
}
extension Double: FetchArgument {
    /// The double.
    public var fetchArgumentValue: FetchValue { .attribute(attributeValue) }
}
extension Float: FetchArgument {
    /// The float.
    public var fetchArgumentValue: FetchValue { .attribute(attributeValue) }
}
extension Decimal: FetchArgument {
    /// The decimal.
    public var fetchArgumentValue: FetchValue { .attribute(attributeValue) }
}
extension Bool: FetchArgument {
    /// The Boolean.
    public var fetchArgumentValue: FetchValue { .attribute(attributeValue) }
}
extension String: FetchArgument {
    /// The string (or, for `%K`, the key path it spells).
    public var fetchArgumentValue: FetchValue { .attribute(attributeValue) }
}
extension Date: FetchArgument {
    /// The date.
    public var fetchArgumentValue: FetchValue { .attribute(attributeValue) }
}
extension Data: FetchArgument {
    /// The bytes.
    public var fetchArgumentValue: FetchValue { .attribute(attributeValue) }
}
extension UUID: FetchArgument {
    /// The UUID.
    public var fetchArgumentValue: FetchValue { .attribute(attributeValue) }
}
extension URL: FetchArgument {
    /// The URL.
    public var fetchArgumentValue: FetchValue { .attribute(attributeValue) }
}

extension Optional: FetchArgument where Wrapped: FetchArgument {
    /// The wrapped value, or null.
    public var fetchArgumentValue: FetchValue { self?.fetchArgumentValue ?? .null }
}

extension Array: FetchArgument where Element: FetchArgument {
    /// A collection of the elements' values. (A closure, not a key path: this runs generic,
    /// where a key path is projected through the runtime at ~800 instructions an element.)
    public var fetchArgumentValue: FetchValue { .collection(map { $0.fetchArgumentValue }) }
}

extension Set: FetchArgument where Element: FetchArgument {
    /// A collection of the elements' values (in the set's iteration order; a closure, as for
    /// arrays).
    public var fetchArgumentValue: FetchValue { .collection(map { $0.fetchArgumentValue }) }
}

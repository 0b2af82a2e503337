import Foundation
import ObjectGraph

/// Keys of StrataStore's secondary indexes (SPEC.md [IDX-S1]…[IDX-S3]).
///
/// ```
/// 0x02 root 0x00 attribute 0x00 orderedValue ref(8, as in [KEY-2])  → empty value
/// ```
///
/// `orderedValue` sorts in the order the fetch language compares values, so equality, ranges,
/// `IN` and `BEGINSWITH` become key ranges. The encoding may map distinct values to one key
/// (a decimal rounded to a double): an index only narrows candidates, and every candidate row
/// is evaluated against the whole predicate again.
enum IndexKey {
    static let tag: UInt8 = 0x02

    /// The prefix of every entry of one attribute's index.
    static func prefix(root: String, attribute: String) -> [UInt8] {
        var prefix: [UInt8] = []
        appendPrefix(root: root, attribute: attribute, to: &prefix)
        return prefix
    }

    /// Appends the prefix of one attribute's index to `key`.
    static func appendPrefix(root: String, attribute: String, to key: inout [UInt8]) {
        key.reserveCapacity(key.count + root.utf8.count + attribute.utf8.count + 3)
        key.append(tag)
        key.append(contentsOf: root.utf8)
        key.append(0x00)
        key.append(contentsOf: attribute.utf8)
        key.append(0x00)
    }

    /// The key of one row's entry.
    static func key(root: String, attribute: String, value: AttributeValue, reference: Int64) -> [UInt8] {
        var key: [UInt8] = []
        key.reserveCapacity(root.utf8.count + attribute.utf8.count + 40)
        appendPrefix(root: root, attribute: attribute, to: &key)
        encode(value, into: &key)
        KeyLayout.appendReference(reference, to: &key)
        return key
    }

    /// The reference at the end of an index key.
    static func reference(fromIndexKey key: [UInt8]) -> Int64? { KeyLayout.reference(fromRowKey: key) }

    /// [IDX-S2] The order-preserving encoding of one value: a type byte, then bytes whose
    /// unsigned order is the values' order. Variable-length encodings are escaped (0x00 → 0x00
    /// 0xFF) and end with 0x00 0x01, so a shorter value sorts before its extensions.
    static func encode(_ value: AttributeValue) -> [UInt8] {
        var bytes: [UInt8] = []
        encode(value, into: &bytes)
        return bytes
    }

    /// Appends the encoding of `value` ([IDX-S2]) to `key`, with no intermediate array.
    static func encode(_ value: AttributeValue, into key: inout [UInt8]) {
        switch value {
        case .null: key.append(0x00)
        case .int16(let v): appendInteger(Int64(v), to: &key)
        case .int32(let v): appendInteger(Int64(v), to: &key)
        case .int64(let v): appendInteger(v, to: &key)
        case .bool(let v): appendInteger(v ? 1 : 0, to: &key)
        case .double(let v): appendDouble(0x21, v, to: &key)
        case .float(let v): appendDouble(0x21, Double(v), to: &key)
        case .decimal(let v): appendDouble(0x21, NSDecimalNumber(decimal: v).doubleValue, to: &key)
        case .string(let v):
            key.append(0x30)
            if !appendASCII(v, to: &key) {
                appendEscaped(v.precomposedStringWithCanonicalMapping.utf8, to: &key)
            }
        case .uri(let v):
            key.append(0x30)
            appendEscaped(v.absoluteString.utf8, to: &key)
        case .date(let v): appendDouble(0x40, v.timeIntervalSinceReferenceDate, to: &key)
        case .uuid(let v):
            key.append(0x50)
            withUnsafeBytes(of: v.uuid) { key.append(contentsOf: $0) }
        case .data(let v), .transformable(let v):
            key.append(0x60)
            appendEscaped(v, to: &key)
        }
    }

    private static func appendInteger(_ value: Int64, to key: inout [UInt8]) {
        key.append(0x20)
        withUnsafeBytes(of: orderedBits(value).bigEndian) { key.append(contentsOf: $0) }
    }

    private static func appendDouble(_ type: UInt8, _ value: Double, to key: inout [UInt8]) {
        key.append(type)
        withUnsafeBytes(of: orderedBits(value).bigEndian) { key.append(contentsOf: $0) }
    }

    /// `bytes` escaped and terminated as [IDX-S2] says, appended to `key`.
    /// Appends the escaped encoding of `text` when it is ASCII (already in normalisation form
    /// C), in one pass over its bytes and one bulk copy when no byte needs escaping; returns
    /// `false`, appending nothing, for any other text.
    private static func appendASCII(_ text: String, to key: inout [UInt8]) -> Bool {
        let utf8 = text.utf8
        let done: Bool? = utf8.withContiguousStorageIfAvailable { bytes in
            var zeros = 0
            for byte in bytes {
                if byte >= 0x80 { return false }
                if byte == 0x00 { zeros += 1 }
            }
            key.reserveCapacity(key.count + bytes.count + zeros + 2)
            if zeros == 0 {
                key.append(contentsOf: bytes)
                key.append(0x00)
                key.append(0x01)
            } else {
                appendEscaped(bytes, to: &key)
            }
            return true
        }
        if let done { return done }
        guard isASCII(text) else { return false }
        appendEscaped(utf8, to: &key)
        return true
    }

    private static func appendEscaped<Bytes: Sequence<UInt8>>(_ bytes: Bytes, to key: inout [UInt8]) {
        key.reserveCapacity(key.count + bytes.underestimatedCount + 2)
        for byte in bytes {
            key.append(byte)
            if byte == 0x00 { key.append(0xFF) }
        }
        key.append(0x00)
        key.append(0x01)
    }

    /// Whether `text` is ASCII (already in normalisation form C).
    private static func isASCII(_ text: String) -> Bool {
        !text.utf8.contains { $0 >= 0x80 }
    }

    /// For `BEGINSWITH`: the encoding of a string without its terminator, so every string with
    /// that prefix sorts at or after it and before ``prefixEnd(_:)``.
    static func stringPrefix(_ text: String) -> [UInt8] {
        let bytes = escaped(normalizedUTF8(text))
        return [0x30] + bytes.dropLast(2)
    }

    /// A string's bytes in Unicode normalisation form C, as [IDX-S2] orders them. ASCII text is
    /// already in that form, so it skips the normaliser.
    static func normalizedUTF8(_ text: String) -> [UInt8] {
        isASCII(text) ? Array(text.utf8) : Array(text.precomposedStringWithCanonicalMapping.utf8)
    }

    static func orderedInteger(_ value: Int64) -> [UInt8] {
        withUnsafeBytes(of: orderedBits(value).bigEndian) { Array($0) }
    }

    static func orderedDouble(_ value: Double) -> [UInt8] {
        withUnsafeBytes(of: orderedBits(value).bigEndian) { Array($0) }
    }

    /// An integer's bits made unsigned-order-preserving: the sign bit flipped.
    private static func orderedBits(_ value: Int64) -> UInt64 {
        UInt64(bitPattern: value) ^ (1 << 63)
    }

    /// IEEE-754 bits made unsigned-order-preserving: negative numbers flip every bit, others
    /// the sign bit. (-0.0 and 0.0 are made equal first; NaN sorts after +∞.)
    private static func orderedBits(_ value: Double) -> UInt64 {
        let bits = (value == 0 ? 0.0 : value).bitPattern
        return bits & (1 << 63) != 0 ? ~bits : bits | (1 << 63)
    }

    static func escaped(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + 2)
        appendEscaped(bytes, to: &out)
        return out
    }

    /// Every index key of a row: one per stored attribute of its entity that is indexed or
    /// uniqueness-constrained ([IDX-S1]).
    static func keys(of row: StoredRow, reference: Int64, entity: EntityDescription, root: String) -> [[UInt8]] {
        keys(reference: reference, entity: entity, root: root) { row.attributes[$0.name] ?? .null }
    }

    /// Every index key of a row whose indexed attributes `value` gives.
    static func keys(
        reference: Int64, entity: EntityDescription, root: String, value: (AttributeDescription) throws -> AttributeValue
    ) rethrows -> [[UInt8]] {
        var keys: [[UInt8]] = []
        for attribute in entity.attributesWithIndexEntries {
            keys.append(key(root: root, attribute: attribute.name, value: try value(attribute), reference: reference))
        }
        return keys
    }
}

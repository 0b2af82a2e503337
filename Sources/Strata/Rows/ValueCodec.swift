import Foundation
import ObjectGraph

/// Appends and reads the tagged values of StrataStore's metadata and model records (SPEC.md
/// [ROW-2], [ROW-4], [ROW-5]); rows have their own codec (`RowEncoder`, `RowBytes`).
struct RowWriter {
    var bytes: [UInt8] = []

    mutating func u8(_ value: UInt8) { bytes.append(value) }

    mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    /// Signed integers are zigzag-encoded varints.
    mutating func signed(_ value: Int64) { varint(UInt64(bitPattern: (value << 1) ^ (value >> 63))) }

    mutating func fixed64(_ value: UInt64) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }

    mutating func blob(_ data: some Collection<UInt8>) {
        varint(UInt64(data.count))
        bytes.append(contentsOf: data)
    }

    mutating func string(_ text: String) { blob(Array(text.utf8)) }

    /// [ROW-2] One attribute value: a tag byte and its payload.
    mutating func value(_ value: AttributeValue) {
        switch value {
        case .null: u8(0)
        case .int16(let v): u8(1); signed(Int64(v))
        case .int32(let v): u8(2); signed(Int64(v))
        case .int64(let v): u8(3); signed(v)
        case .double(let v): u8(4); fixed64(v.bitPattern)
        case .float(let v): u8(5); fixed64(UInt64(v.bitPattern))
        case .decimal(let v): u8(6); string(v.description)
        case .bool(let v): u8(7); u8(v ? 1 : 0)
        case .string(let v): u8(8); string(v)
        case .date(let v): u8(9); fixed64(v.timeIntervalSinceReferenceDate.bitPattern)
        case .data(let v): u8(10); blob(v)
        case .uuid(let v): u8(11); withUnsafeBytes(of: v.uuid) { bytes.append(contentsOf: $0) }
        case .uri(let v): u8(12); string(v.absoluteString)
        case .transformable(let v): u8(13); blob(v)
        }
    }
}

/// Reads what ``RowWriter`` wrote; every read is bounds-checked and malformed input throws a
/// corruption error naming the key it was read from.
struct RowReader {
    let bytes: [UInt8]
    var position = 0
    let context: String

    init(_ bytes: [UInt8], context: String) {
        self.bytes = bytes
        self.context = context
    }

    var isAtEnd: Bool { position >= bytes.count }

    func fail(_ what: String) -> ObjectGraphError {
        ObjectGraphError(.storeCorrupted, "\(context): \(what) at byte \(position)")
    }

    mutating func u8() throws -> UInt8 {
        guard position < bytes.count else { throw fail("unexpected end") }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func varint() throws -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while shift < 64 {
            let byte = try u8()
            if shift == 63 && byte > 1 { throw fail("overlong varint") }
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return result }
            shift += 7
        }
        throw fail("overlong varint")
    }

    mutating func signed() throws -> Int64 {
        let raw = try varint()
        return Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
    }

    mutating func fixed64() throws -> UInt64 {
        guard bytes.count - position >= 8 else { throw fail("unexpected end") }
        var value: UInt64 = 0
        for i in (0..<8).reversed() { value = value << 8 | UInt64(bytes[position + i]) }
        position += 8
        return value
    }

    mutating func blob() throws -> ArraySlice<UInt8> {
        let count = try varint()
        guard count <= UInt64(bytes.count - position) else { throw fail("length \(count) past the end") }
        defer { position += Int(count) }
        return bytes[position..<position + Int(count)]
    }

    mutating func string() throws -> String {
        let slice = try blob()
        // ASCII (property and entity names, most values) needs no validation.
        let text = slice.withUnsafeBytes { Text.decode($0) }
        guard let text else { throw fail("invalid UTF-8") }
        return text
    }

    mutating func value() throws -> AttributeValue {
        let tag = try u8()
        switch tag {
        case 0: return .null
        case 1:
            guard let v = Int16(exactly: try signed()) else { throw fail("int16 out of range") }
            return .int16(v)
        case 2:
            guard let v = Int32(exactly: try signed()) else { throw fail("int32 out of range") }
            return .int32(v)
        case 3: return .int64(try signed())
        case 4: return .double(Double(bitPattern: try fixed64()))
        case 5:
            guard let bits = UInt32(exactly: try fixed64()) else { throw fail("float out of range") }
            return .float(Float(bitPattern: bits))
        case 6:
            guard let v = Decimal(string: try string(), locale: Locale(identifier: "en_US_POSIX")) else { throw fail("bad decimal") }
            return .decimal(v)
        case 7: return .bool(try u8() != 0)
        case 8: return .string(try string())
        case 9: return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: try fixed64())))
        case 10: return .data(Data(try blob()))
        case 11:
            guard bytes.count - position >= 16 else { throw fail("short UUID") }
            let b = Array(bytes[position..<position + 16])
            position += 16
            return .uuid(UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])))
        case 12:
            guard let url = URL(string: try string()) else { throw fail("bad URI") }
            return .uri(url)
        case 13: return .transformable(Data(try blob()))
        default: throw fail("unknown value tag \(tag)")
        }
    }
}

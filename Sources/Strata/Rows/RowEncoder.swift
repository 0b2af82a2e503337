import Foundation
import ObjectGraph
import StrataEngine
import StrataSync

/// One field's value as a row holds it.
enum FieldValue: Equatable, Sendable {
    case null
    case attribute(AttributeValue)
    /// A destination: entity number and reference.
    case object(StoredObject)
    /// Destinations, in stored order.
    case objects([StoredObject])
}

/// An object reference inside a row ([ROW-3]): entity number and reference.
struct StoredObject: Hashable, Sendable {
    var entity: UInt16
    var reference: Int64

    /// Reference and entity mixed with the table's seed (``seededHash(_:seed:)``; a fetch
    /// keys its destination caches by these).
    func _rawHashValue(seed: Int) -> Int {
        seededHash(Int(truncatingIfNeeded: reference ^ (Int64(entity) << 48)), seed: seed)
    }
}

/// Writes rows in format 3 ([ROW-1]).
///
/// ```
/// row := header | nulls | fixed | ends | variable | crc32c u32
/// ```
enum RowEncoder {
    /// The row format this build writes.
    static let format: UInt8 = 3

    /// The bytes of a row of `layout` at `version`; `value(i)` is field `i`'s value.
    ///
    /// - Throws: ``ObjectGraphError/Code/wrongValueType`` naming the field when a value does
    ///   not fit its field's kind (nothing is written).
    static func encode(
        layout: RowLayout, version: UInt64, entityName: String, value: (Int) throws -> FieldValue
    ) throws -> [UInt8] {
        let prefix = layout.variableStart
        var bytes = [UInt8](filling: 0, count: prefix, capacity: prefix + 64)
        bytes[0] = format
        bytes[1] = 0
        store(UInt16(layout.number), at: 2, in: &bytes)
        store(layout.layoutID, at: 4, in: &bytes)
        store(version, at: 8, in: &bytes)
        for (index, field) in layout.fields.enumerated() {
            let fieldValue = try value(index)
            if fieldValue == .null || fieldValue == .attribute(.null) {
                bytes[RowLayout.headerSize + index / 8] |= 1 << UInt8(index % 8)
                if field.kind.width == 0 {
                    store(UInt32(bytes.count - prefix), at: layout.endsStart + 4 * field.position, in: &bytes)
                }
                continue
            }
            let at = layout.fixedStart + field.position
            switch (field.kind, fieldValue) {
            case (.int16, .attribute(let v)):
                guard let n = v.integer, let x = Int16(exactly: n) else { throw mismatch(field, v, entityName) }
                store(UInt16(bitPattern: x), at: at, in: &bytes)
            case (.int32, .attribute(let v)):
                guard let n = v.integer, let x = Int32(exactly: n) else { throw mismatch(field, v, entityName) }
                store(UInt32(bitPattern: x), at: at, in: &bytes)
            case (.int64, .attribute(let v)):
                guard let n = v.integer else { throw mismatch(field, v, entityName) }
                store(UInt64(bitPattern: n), at: at, in: &bytes)
            case (.bool, .attribute(.bool(let x))):
                bytes[at] = x ? 1 : 0
            case (.double, .attribute(.double(let x))):
                store(x.bitPattern, at: at, in: &bytes)
            case (.float, .attribute(.float(let x))):
                store(x.bitPattern, at: at, in: &bytes)
            case (.date, .attribute(.date(let x))):
                store(x.timeIntervalSinceReferenceDate.bitPattern, at: at, in: &bytes)
            case (.uuid, .attribute(.uuid(let x))):
                withUnsafeBytes(of: x.uuid) { raw in for i in 0..<16 { bytes[at + i] = raw[i] } }
            case (.toOne, .object(let object)):
                store(object.entity, at: at, in: &bytes)
                store(UInt64(bitPattern: object.reference), at: at + 2, in: &bytes)
            case (.string, .attribute(.string(let x))):
                bytes.append(contentsOf: x.utf8)
            case (.decimal, .attribute(.decimal(let x))):
                bytes.append(contentsOf: x.description.utf8)
            case (.uri, .attribute(.uri(let x))):
                bytes.append(contentsOf: x.absoluteString.utf8)
            case (.data, .attribute(.data(let x))), (.transformable, .attribute(.transformable(let x))):
                bytes.append(contentsOf: x)
            case (.toMany, .objects(let objects)):
                for object in objects {
                    withUnsafeBytes(of: object.entity.littleEndian) { bytes.append(contentsOf: $0) }
                    withUnsafeBytes(of: UInt64(bitPattern: object.reference).littleEndian) { bytes.append(contentsOf: $0) }
                }
            case (_, .attribute(let v)):
                throw mismatch(field, v, entityName)
            default:
                throw ObjectGraphError(
                    .wrongValueType, "\(entityName).\(field.name) cannot hold \(fieldValue).", entityName: entityName, key: field.name)
            }
            if field.kind.width == 0 {
                let end = bytes.count - prefix
                guard end <= Int(UInt32.max) else {
                    throw ObjectGraphError(.invalidArgument, "A row of \(entityName) is larger than 4 GiB.", entityName: entityName, key: field.name)
                }
                store(UInt32(end), at: layout.endsStart + 4 * field.position, in: &bytes)
            }
        }
        let crc = bytes.withUnsafeBytes { CRC32C.checksum($0) }
        withUnsafeBytes(of: crc.littleEndian) { bytes.append(contentsOf: $0) }
        return bytes
    }

    private static func mismatch(_ field: RowLayout.Field, _ value: AttributeValue, _ entityName: String) -> ObjectGraphError {
        ObjectGraphError(
            .wrongValueType, "\(entityName).\(field.name) is stored as \(field.kind), got \(value.typeName) (\(value)).",
            entityName: entityName, key: field.name)
    }

    @inline(__always)
    static func store<T: FixedWidthInteger>(_ value: T, at offset: Int, in bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { raw in
            for i in 0..<MemoryLayout<T>.size { bytes[offset + i] = raw[i] }
        }
    }
}

extension AttributeValue {
    /// The value as an integer, for the integer field kinds.
    var integer: Int64? {
        switch self {
        case .int16(let v): return Int64(v)
        case .int32(let v): return Int64(v)
        case .int64(let v): return v
        default: return nil
        }
    }
}

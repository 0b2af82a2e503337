import ObjectGraph

/// One object as StrataStore stores it (SPEC.md [ROW-1]).
///
/// ```
/// row := formatVersion u8 (1) | version varint | entity string | count varint | property × count
/// property := name string | kind u8 | payload
///   kind 0: attribute  → value ([ROW-2])
///   kind 1: to-one     → present u8 | (object [ROW-3] if present)
///   kind 2: to-many    → count varint | object × count        (in order)
/// ```
struct StoredRow: Equatable {
    /// The concrete entity.
    var entity: String
    /// 1 for a new row, one more per saved change.
    var version: UInt64
    /// Stored attribute values and relationship destinations, by property name.
    var attributes: [String: AttributeValue]
    var toOne: [String: (entity: String, reference: Int64)?]
    var toMany: [String: [(entity: String, reference: Int64)]]

    static func == (a: StoredRow, b: StoredRow) -> Bool {
        a.entity == b.entity && a.version == b.version && a.attributes == b.attributes
            && a.toOne.mapValues { $0.map { "\($0.entity)#\($0.reference)" } } == b.toOne.mapValues { $0.map { "\($0.entity)#\($0.reference)" } }
            && a.toMany.mapValues { $0.map { "\($0.entity)#\($0.reference)" } } == b.toMany.mapValues { $0.map { "\($0.entity)#\($0.reference)" } }
    }

    static let formatVersion: UInt8 = 1

    /// This row with `loaded`'s entity and every property `loaded` holds put over its own.
    func overlaid(with loaded: StoredRow) -> StoredRow {
        var row = self
        row.entity = loaded.entity
        row.attributes.merge(loaded.attributes) { $1 }
        row.toOne.merge(loaded.toOne) { $1 }
        row.toMany.merge(loaded.toMany) { $1 }
        return row
    }

    func encode() -> [UInt8] {
        var writer = RowWriter()
        writer.u8(Self.formatVersion)
        writer.varint(version)
        writer.string(entity)
        writer.varint(UInt64(attributes.count + toOne.count + toMany.count))
        for name in attributes.keys.sorted() {
            writer.string(name)
            writer.u8(0)
            writer.value(attributes[name] ?? .null)
        }
        for name in toOne.keys.sorted() {
            writer.string(name)
            writer.u8(1)
            if let target = toOne[name] ?? nil {
                writer.u8(1)
                writer.object(entity: target.entity, reference: target.reference)
            } else {
                writer.u8(0)
            }
        }
        for name in toMany.keys.sorted() {
            writer.string(name)
            writer.u8(2)
            let targets = toMany[name] ?? []
            writer.varint(UInt64(targets.count))
            for target in targets { writer.object(entity: target.entity, reference: target.reference) }
        }
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8], context: String) throws -> StoredRow {
        var reader = RowReader(bytes, context: context)
        let format = try reader.u8()
        guard format == formatVersion else { throw reader.fail("row format \(format) is not supported") }
        var row = StoredRow(entity: "", version: try reader.varint(), attributes: [:], toOne: [:], toMany: [:])
        row.entity = try reader.string()
        let count = try reader.varint()
        guard count <= UInt64(bytes.count) else { throw reader.fail("property count \(count)") }
        for _ in 0..<count {
            let name = try reader.string()
            switch try reader.u8() {
            case 0: row.attributes[name] = try reader.value()
            case 1: row.toOne[name] = try reader.u8() == 0 ? .some(nil) : (try reader.string(), try reader.signed())
            case 2:
                let targets = try reader.varint()
                guard targets <= UInt64(bytes.count) else { throw reader.fail("target count \(targets)") }
                var list: [(entity: String, reference: Int64)] = []
                for _ in 0..<targets { list.append((try reader.string(), try reader.signed())) }
                row.toMany[name] = list
            default: throw reader.fail("unknown property kind")
            }
        }
        guard reader.isAtEnd else { throw reader.fail("trailing bytes") }
        return row
    }
}

/// The store-wide record (SPEC.md [ROW-4]): the next reference, per-entity row counts and the
/// coordinator's metadata.
///
/// ```
/// metadata := formatVersion u8 (1) | nextReference varint | count varint | (entity string | rows varint) × count
///             | count varint | (key string | value [ROW-2]) × count
/// ```
struct MetadataRecord: Equatable {
    var nextReference: Int64 = 1
    var rowCounts: [String: Int] = [:]
    var metadata: [String: AttributeValue] = [:]

    func encode() -> [UInt8] {
        var writer = RowWriter()
        writer.u8(StoredRow.formatVersion)
        writer.varint(UInt64(nextReference))
        writer.varint(UInt64(rowCounts.count))
        for name in rowCounts.keys.sorted() {
            writer.string(name)
            writer.varint(UInt64(max(0, rowCounts[name] ?? 0)))
        }
        writer.varint(UInt64(metadata.count))
        for key in metadata.keys.sorted() {
            writer.string(key)
            writer.value(metadata[key] ?? .null)
        }
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8]) throws -> MetadataRecord {
        var reader = RowReader(bytes, context: "metadata record")
        guard try reader.u8() == StoredRow.formatVersion else { throw reader.fail("unsupported metadata format") }
        var record = MetadataRecord()
        let next = try reader.varint()
        guard next <= UInt64(Int64.max) else { throw reader.fail("next reference out of range") }
        record.nextReference = Int64(next)
        let counts = try reader.varint()
        guard counts <= UInt64(bytes.count) else { throw reader.fail("count") }
        for _ in 0..<counts {
            let name = try reader.string()
            let rows = try reader.varint()
            guard rows <= UInt64(Int.max) else { throw reader.fail("row count out of range") }
            record.rowCounts[name] = Int(rows)
        }
        let entries = try reader.varint()
        guard entries <= UInt64(bytes.count) else { throw reader.fail("count") }
        for _ in 0..<entries { record.metadata[try reader.string()] = try reader.value() }
        guard reader.isAtEnd else { throw reader.fail("trailing bytes") }
        return record
    }
}

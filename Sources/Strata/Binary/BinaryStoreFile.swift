import Foundation
import ObjectGraph
import StrataEngine

/// The bytes of a binary store file (SPEC.md [BIN-1], [BIN-2]):
///
/// ```
/// file    := header | section(metadata) | section(model) | section(objects)
/// header  := magic "STRATA-B" | format u16 (1) | flags u16 (0) | generation u64
///            | sections u32 (3) | crc32c u32 of the 24 bytes before           (28 bytes, LE)
/// section := kind u8 (1 metadata, 2 model, 3 objects) | 0 u8 ×3 | stored u64 | raw u64
///            | crc32c u32 of the stored bytes | stored bytes                   (24 + stored)
///            metadata and model: stored = raw, the records of [ROW-4] and [ROW-5];
///            objects: an LZ4 block of raw bytes:
/// objects := count varint | object × count
/// object  := reference fixed64 | row blob ([ROW-1]) | members × (the row layout's keyed
///            relationships, in order); members := count varint | (entity varint | reference
///            signed varint) × count
/// ```
enum BinaryStoreFile {
    static let magic: [UInt8] = Array("STRATA-B".utf8)
    static let format: UInt16 = 1
    static let headerSize = 28
    static let sectionHeaderSize = 24

    /// One object: its reference and its row, keyed to-many relationships included.
    struct Object {
        let reference: Int64
        var row: StoredRow
    }

    /// A file whose every check passed: its generation and its parts (the objects
    /// decompressed).
    struct Decoded {
        let generation: UInt64
        let metadata: [UInt8]
        let model: [UInt8]
        let objects: [UInt8]
    }

    /// The section kinds, in file order.
    enum Kind: UInt8 {
        case metadata = 1, model = 2, objects = 3
    }

    // MARK: Writing

    /// Appends one object ([BIN-1] `object`) straight from its cache node: the row's fields
    /// through the entity's layout, then its keyed relationships' members.
    static func append(_ node: AtomicStoreCacheNode, reference: Int64, layout: StoreLayout, to writer: inout RowWriter) throws {
        let entity = node.objectID.entity
        guard let rowLayout = layout.layout(of: entity) else {
            throw ObjectGraphError(.unknownEntity, "An object of entity \(entity.name), which the store's model does not have.", entityName: entity.name)
        }
        func stored(_ id: ManagedObjectID) throws -> StoredObject {
            guard let number = layout.number(of: id.entity), case .int64(let reference)? = id.referenceObject else {
                throw ObjectGraphError(.invalidArgument, "\(entity.name) refers to \(id), which the binary store cannot write (another model's entity, or not an integer reference).", objectID: id)
            }
            return StoredObject(entity: number, reference: reference)
        }
        let row = try RowEncoder.encode(layout: rowLayout, version: 1, entityName: entity.name) { index in
            let field = rowLayout.fields[index]
            switch try AtomicStore.propertyValue(of: node, for: entity.properties[field.ordinal]) {
            case .attribute(let value): return value.isNull ? .null : .attribute(value)
            case .relationship(.toOne(let id)): return try id.map { .object(try stored($0)) } ?? .null
            case .relationship(.toMany(let ids)): return ids.isEmpty ? .null : .objects(try ids.map(stored))
            }
        }
        writer.fixed64(UInt64(bitPattern: reference))
        writer.blob(row)
        for relationship in rowLayout.keyedRelationships {
            let members = try AtomicStore.propertyValue(of: node, for: relationship).relationshipValue?.objectIDs ?? []
            writer.varint(UInt64(members.count))
            for member in members {
                let target = try stored(member)
                writer.varint(UInt64(target.entity))
                writer.signed(target.reference)
            }
        }
    }

    /// The bytes of a file from its parts, the objects already encoded (not compressed).
    static func assemble(generation: UInt64, metadata: [UInt8], model: [UInt8], objects raw: [UInt8]) throws -> [UInt8] {
        guard raw.count <= LZ4.maxInputSize else {
            throw ObjectGraphError(.invalidArgument, "The object graph takes \(raw.count) bytes; a binary store holds at most \(LZ4.maxInputSize). Use a StrataStore.")
        }
        let compressed = raw.withUnsafeBytes { LZ4.compress($0) }
        var bytes = magic
        bytes.reserveCapacity(headerSize + 3 * sectionHeaderSize + metadata.count + model.count + compressed.count)
        append(format, to: &bytes)
        append(UInt16(0), to: &bytes)
        append(generation, to: &bytes)
        append(UInt32(3), to: &bytes)
        append(CRC32C.checksum(bytes), to: &bytes)
        section(.metadata, stored: metadata, raw: metadata.count, to: &bytes)
        section(.model, stored: model, raw: model.count, to: &bytes)
        section(.objects, stored: compressed, raw: raw.count, to: &bytes)
        return bytes
    }

    private static func section(_ kind: Kind, stored: [UInt8], raw: Int, to bytes: inout [UInt8]) {
        bytes.append(kind.rawValue)
        bytes.append(contentsOf: [0, 0, 0])
        append(UInt64(stored.count), to: &bytes)
        append(UInt64(raw), to: &bytes)
        append(CRC32C.checksum(stored), to: &bytes)
        bytes.append(contentsOf: stored)
    }

    private static func append<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    // MARK: Reading

    /// A little-endian integer at `offset` (the caller checked the bounds).
    static func read<T: FixedWidthInteger>(_ type: T.Type, _ bytes: [UInt8], at offset: Int) -> T {
        var value: T = 0
        for index in (0..<MemoryLayout<T>.size).reversed() { value = value << 8 | T(bytes[offset + index]) }
        return value
    }

    /// The generation of a file, from its checked header.
    static func generation(of bytes: [UInt8], path: String) throws -> UInt64 {
        try header(bytes, path: path)
    }

    /// Checks the header; returns the generation.
    private static func header(_ bytes: [UInt8], path: String) throws -> UInt64 {
        guard bytes.count >= magic.count, Array(bytes[0..<magic.count]) == magic else {
            throw ObjectGraphError(.storeOpenFailed, "\(path) is not a binary store file (it does not start with \"STRATA-B\").")
        }
        guard bytes.count >= headerSize else {
            throw ObjectGraphError(.storeCorrupted, "binary store \(path): the header is cut short at byte \(bytes.count) (it takes \(headerSize))")
        }
        let crc = read(UInt32.self, bytes, at: 24)
        let computed = bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[0..<24])) }
        guard crc == computed else {
            throw ObjectGraphError(.storeCorrupted, "binary store \(path): the header (bytes 0–27) fails its checksum")
        }
        let version = read(UInt16.self, bytes, at: 8)
        guard version == format else {
            throw ObjectGraphError(.storeOpenFailed, "binary store \(path) is of format \(version); this build reads format \(format).")
        }
        guard read(UInt32.self, bytes, at: 20) == 3 else {
            throw ObjectGraphError(.storeCorrupted, "binary store \(path): the header names \(read(UInt32.self, bytes, at: 20)) sections at byte 20; a file has 3")
        }
        return read(UInt64.self, bytes, at: 12)
    }

    /// Checks every part of a file and decompresses its objects.
    ///
    /// - Throws: `ObjectGraphError/Code/storeOpenFailed` for a file of another kind or
    ///   format; `ObjectGraphError/Code/storeCorrupted` naming the offset of the part that
    ///   fails a check (a checksum, a length, a kind, a block that does not decompress).
    static func decode(_ bytes: [UInt8], path: String) throws -> Decoded {
        let generation = try header(bytes, path: path)
        var offset = headerSize
        var parts: [[UInt8]] = []
        for kind in [Kind.metadata, .model, .objects] {
            func corrupt(_ what: String) -> ObjectGraphError {
                ObjectGraphError(.storeCorrupted, "binary store \(path): \(what)")
            }
            guard bytes.count - offset >= sectionHeaderSize else {
                throw corrupt("the file ends at byte \(bytes.count), inside the header of section \(kind.rawValue) (at byte \(offset))")
            }
            guard bytes[offset] == kind.rawValue, bytes[offset + 1] == 0, bytes[offset + 2] == 0, bytes[offset + 3] == 0 else {
                throw corrupt("byte \(offset) should begin section \(kind.rawValue); it holds \(bytes[offset])")
            }
            let stored = read(UInt64.self, bytes, at: offset + 4)
            let raw = read(UInt64.self, bytes, at: offset + 12)
            let crc = read(UInt32.self, bytes, at: offset + 20)
            let start = offset + sectionHeaderSize
            guard stored <= UInt64(bytes.count - start) else {
                throw corrupt("section \(kind.rawValue) at byte \(offset) says it has \(stored) bytes; the file has \(bytes.count - start) after its header")
            }
            let end = start + Int(stored)
            let computed = bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[start..<end])) }
            guard computed == crc else { throw corrupt("section \(kind.rawValue) (bytes \(start)–\(end - 1)) fails its checksum") }
            if kind == .objects {
                guard raw <= UInt64(LZ4.maxInputSize),
                    let decompressed = bytes.withUnsafeBytes({ LZ4.decompress(UnsafeRawBufferPointer(rebasing: $0[start..<end]), rawCount: Int(raw)) })
                else { throw corrupt("the objects (bytes \(start)–\(end - 1)) do not decompress to \(raw) bytes") }
                parts.append(decompressed)
            } else {
                guard raw == stored else { throw corrupt("section \(kind.rawValue) at byte \(offset) has \(stored) bytes stored and \(raw) raw; they must be equal") }
                parts.append(Array(bytes[start..<end]))
            }
            offset = end
        }
        guard offset == bytes.count else {
            throw ObjectGraphError(.storeCorrupted, "binary store \(path): \(bytes.count - offset) bytes follow the last section, at byte \(offset)")
        }
        return Decoded(generation: generation, metadata: parts[0], model: parts[1], objects: parts[2])
    }

    /// One object of a checked file as read in place: its reference, its row (a view on the
    /// decompressed bytes) and its keyed relationships' members, by the layout's order.
    struct ObjectView {
        let reference: Int64
        let row: RowBytes
        let members: [[StoredObject]]
    }

    /// Calls `body` with every object of a checked file, read with `layout`, without decoding
    /// rows into dictionaries (what loading a store does).
    static func forEachObject(_ file: Decoded, layout: StoreLayout, path: String, _ body: (ObjectView) throws -> Void) throws {
        var reader = RowReader(file.objects, context: "binary store \(path), objects (decompressed)")
        let count = try reader.varint()
        guard count <= UInt64(file.objects.count) else { throw reader.fail("a count of \(count) objects") }
        for _ in 0..<count {
            let reference = Int64(bitPattern: try reader.fixed64())
            let row = try RowBytes(Array(try reader.blob()), store: layout, context: .key(root: "binary", reference: reference))
            guard let entity = layout.entity(number: row.entityNumber), let rowLayout = layout.layout(of: entity) else {
                throw reader.fail("an object of entity number \(row.entityNumber), which the model does not have,")
            }
            var members: [[StoredObject]] = []
            members.reserveCapacity(rowLayout.keyedRelationships.count)
            for relationship in rowLayout.keyedRelationships {
                let memberCount = try reader.varint()
                guard memberCount <= UInt64(file.objects.count) else { throw reader.fail("a count of \(memberCount) members") }
                var list: [StoredObject] = []
                list.reserveCapacity(Int(memberCount))
                for _ in 0..<memberCount {
                    let number = try reader.varint()
                    guard number <= UInt64(UInt16.max), layout.entity(number: UInt16(number)) != nil else {
                        throw reader.fail("entity number \(number) of a member of \(entity.name).\(relationship.name)")
                    }
                    list.append(StoredObject(entity: UInt16(number), reference: try reader.signed()))
                }
                members.append(list)
            }
            try body(ObjectView(reference: reference, row: row, members: members))
        }
        guard reader.isAtEnd else { throw reader.fail("bytes after the last object") }
    }

    /// The objects of a checked file, read with `layout`.
    static func objects(_ file: Decoded, layout: StoreLayout, path: String) throws -> [Object] {
        var objects: [Object] = []
        try forEachObject(file, layout: layout, path: path) { view in
            var row = try StoredRow(view.row, store: layout)
            for (relationship, members) in zip(view.row.layout.keyedRelationships, view.members) {
                row.toMany[relationship.name] = try members.map { member in
                    guard let destination = layout.entity(number: member.entity) else {
                        throw ObjectGraphError(.storeCorrupted, "binary store \(path): entity number \(member.entity) of a member of \(row.entity).\(relationship.name)")
                    }
                    return (destination.name, member.reference)
                }
            }
            objects.append(Object(reference: view.reference, row: row))
        }
        return objects
    }
}

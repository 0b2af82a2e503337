import Foundation
import ObjectGraph
@testable import Strata
import StrataEngine

/// [ROW-1] StrataStore's row decoder (`RowBytes`, `StoredRow.decode`) on a model with one
/// field of every kind (an ordered to-many is the list rows still hold). A row may only decode
/// or throw `ObjectGraphError`; what decodes must survive a round trip. The same bytes are
/// read as a relationship key ([REL-1]), which `strata fsck` and `dump` parse from any store:
/// what parses must re-encode to the same bytes.
enum FuzzRows {
    /// The model every row input is read with; entity numbers 0 (`Other`) and 1 (`Thing`).
    static let layout: StoreLayout? = {
        let model = try? ManagedObjectModel(entities: [
            EntityDescription(name: "Thing", properties: [
                .attribute("i16", .integer16), .attribute("i32", .integer32), .attribute("i64", .integer64),
                .attribute("dbl", .double), .attribute("flt", .float), .attribute("dec", .decimal),
                .attribute("flag", .boolean), .attribute("text", .string), .attribute("when", .date),
                .attribute("blob", .binaryData), .attribute("id", .uuid), .attribute("link", .uri),
                .attribute("coded", .transformable),
                .toOne("other", "Other", inverse: "things"), .toMany("peers", "Thing", ordered: true),
            ]),
            EntityDescription(name: "Other", properties: [.toMany("things", "Thing", inverse: "other")]),
        ])
        return model.flatMap { try? StoreLayout(model: $0) }
    }()

    /// Recomputes the trailing checksum, so mutations reach the field decoders.
    static func fixChecksum(_ bytes: [UInt8]) -> [UInt8] {
        guard bytes.count >= RowLayout.trailerSize else { return bytes }
        var fixed = Array(bytes.dropLast(RowLayout.trailerSize))
        let crc = CRC32C.checksum(fixed)
        withUnsafeBytes(of: crc.littleEndian) { fixed.append(contentsOf: $0) }
        return fixed
    }

    static func row(_ bytes: [UInt8]) {
        guard let layout else { fatalError("StrataFuzz: the row model does not build") }
        relationshipKey(bytes)
        let view: RowBytes
        do {
            view = try RowBytes(bytes, store: layout, context: "fuzz row")
        } catch {
            fuzzCheck(error is ObjectGraphError, "row decoder threw \(type(of: error))")
            return
        }
        for index in view.layout.fields.indices {
            do { _ = try view.value(index) } catch { fuzzCheck(error is ObjectGraphError, "field decoder threw \(type(of: error))") }
        }
        guard let decoded = try? StoredRow.decode(bytes, store: layout, context: "fuzz row") else { return }
        // What decodes re-encodes, and the re-encoding decodes to the same row.
        do {
            let again = try decoded.encode(layout)
            let redecoded = try StoredRow.decode(again, store: layout, context: "fuzz row again")
            fuzzCheck(sameRow(redecoded, decoded), "[ROW-1] a decoded row does not survive a round trip")
        } catch {
            fuzzCheck(false, "[ROW-1] a decoded row does not re-encode: \(error)")
        }
    }

    /// [REL-1] A relationship key parses only if it has the key's shape, and then re-encodes
    /// to exactly its bytes.
    static func relationshipKey(_ bytes: [UInt8]) {
        guard let parts = RelationshipKeys.parse(bytes) else { return }
        let again = RelationshipKeys.key(
            ownerPrefix: RelationshipKeys.ownerPrefix(root: parts.root, relationship: parts.relationship, owner: parts.owner),
            member: parts.member)
        fuzzCheck(again == bytes, "[REL-1] a parsed relationship key does not re-encode to its bytes")
    }

    /// Equal rows, NaN payloads compared by bits.
    static func sameRow(_ a: StoredRow, _ b: StoredRow) -> Bool {
        guard a.entity == b.entity, a.version == b.version, a.attributes.keys == b.attributes.keys else { return false }
        for (name, value) in a.attributes {
            switch (value, b.attributes[name]) {
            case (.double(let x), .double(let y)?): if x.bitPattern != y.bitPattern { return false }
            case (.float(let x), .float(let y)?): if x.bitPattern != y.bitPattern { return false }
            default: if value != b.attributes[name] { return false }
            }
        }
        var x = a, y = b
        x.attributes = [:]
        y.attributes = [:]
        return x == y
    }

    /// Seeds: valid rows of Thing and Other.
    static func seeds() -> [[UInt8]] {
        guard let layout else { return [] }
        let rows = [
            StoredRow(
                entity: "Thing", version: 3,
                attributes: [
                    "i16": .int16(-2), "i32": .int32(70_000), "i64": .int64(1 << 40), "dbl": .double(2.5), "flt": .float(-1),
                    "dec": .decimal(Decimal(string: "12.75") ?? 0), "flag": .bool(true), "text": .string("Zoë"),
                    "when": .date(Date(timeIntervalSinceReferenceDate: 1000)), "blob": .data(Data([0, 1, 2])),
                    "id": .uuid(UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16))),
                    "link": .uri(URL(string: "https://example.com/a") ?? URL(fileURLWithPath: "/")), "coded": .transformable(Data([9])),
                ],
                toOne: ["other": (entity: "Other", reference: 7)], toMany: ["peers": [(entity: "Thing", reference: 1), (entity: "Thing", reference: -5)]]),
            StoredRow(entity: "Thing", version: 1, attributes: [:], toOne: [:], toMany: [:]),
            StoredRow(entity: "Other", version: 9, attributes: [:], toOne: [:], toMany: [:]),
        ]
        return rows.compactMap { try? $0.encode(layout) }
    }
}

import Foundation
import ObjectGraph
@testable import Strata
import Testing

/// The decoders `strata fsck`, `inspect` and `dump` run on damaged stores: a row, the metadata
/// record and the model record. Every single-byte change and every truncation of a valid
/// encoding must decode or throw `storeCorrupted`-style errors, never trap.
@Suite struct RowDecoderRobustnessTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Shelf", properties: [
                .attribute("label", .string, optional: false, indexed: true),
                .toMany("books", "Book", inverse: "shelf", ordered: true, maxCount: 5, deleteRule: .cascade),
            ]),
            EntityDescription(name: "Book", properties: [
                .attribute("year", .integer16, indexed: true),
                .attribute("price", .decimal),
                .toOne("shelf", "Shelf", inverse: "books"),
            ]),
            EntityDescription(name: "Atlas", superentity: "Book", properties: [.attribute("scale", .double)]),
        ])
    }

    static let row = StoredRow(
        entity: "Atlas", version: 300,
        attributes: ["year": .int16(1851), "price": .decimal(Decimal(string: "12.5") ?? 0), "scale": .double(0.25)],
        toOne: ["shelf": (entity: "Shelf", reference: 7)],
        toMany: [:])

    static let shelf = StoredRow(
        entity: "Shelf", version: 2, attributes: ["label": .string("Étagère")], toOne: [:],
        toMany: ["books": [(entity: "Book", reference: -3), (entity: "Atlas", reference: 1 << 40)]])

    static let metadata = MetadataRecord(
        nextReference: 1 << 33, rowCounts: ["Book": 130, "Shelf": 2],
        metadata: ["NSStoreUUID": .string("A-B"), "flag": .bool(true), "blob": .data(Data([0, 1, 2]))])

    /// Every variant of `bytes`: each byte XORed with masks that flip the low bit, the high bit
    /// and every bit, and every proper prefix.
    static func variants(of bytes: [UInt8]) -> [[UInt8]] {
        var result: [[UInt8]] = []
        for position in bytes.indices {
            for mask: UInt8 in [0x01, 0x80, 0xFF] {
                var copy = bytes
                copy[position] ^= mask
                result.append(copy)
            }
        }
        for length in 0..<bytes.count { result.append(Array(bytes.prefix(length))) }
        return result
    }

    @Test func validEncodingsRoundTrip() throws {
        let layout = try StoreLayout(model: try Self.model())
        #expect(try StoredRow.decode(Self.row.encode(layout), store: layout, context: "row") == Self.row)
        #expect(try StoredRow.decode(Self.shelf.encode(layout), store: layout, context: "row") == Self.shelf)
        #expect(try MetadataRecord.decode(Self.metadata.encode()) == Self.metadata)
        let model = try Self.model()
        let decoded = try ModelRecord.decode(ModelRecord.encode(model))
        #expect(decoded.entityVersionHashesByName == model.entityVersionHashesByName)
        #expect(ModelRecord.encode(decoded) == ModelRecord.encode(model))
    }

    /// [ROW-1] A row's checksum covers every byte: every single-byte change and every
    /// truncation is an error, never a trap and never a different row.
    @Test func everyDamagedRowIsAnError() throws {
        let layout = try StoreLayout(model: try Self.model())
        for row in [Self.row, Self.shelf] {
            let bytes = try row.encode(layout)
            for damaged in Self.variants(of: bytes) {
                #expect(throws: ObjectGraphError.self) { try StoredRow.decode(damaged, store: layout, context: "row") }
            }
        }
    }

    /// [ROW-1] Read in place (the engine's checksum, not the row's, covers it), a damaged row
    /// throws or decodes without trapping; a variable field whose ends are out of order or past
    /// the variable area throws when it is read, naming where the row came from and the field.
    @Test func rowsReadInPlaceCheckTheEndsOfEachFieldTheyRead() throws {
        let layout = try StoreLayout(model: try Self.model())
        let bytes = try Self.shelf.encode(layout)
        for damaged in Self.variants(of: bytes) {
            guard let row = try? RowBytes(damaged, store: layout, context: "row", readByEngine: true) else { continue }
            for field in row.layout.fields.indices { _ = try? row.value(field) }
        }
        let shelfEntity = try #require(layout.model.entitiesByName["Shelf"])
        let shelf = try #require(layout.layout(of: shelfEntity))
        #expect(shelf.fields.map(\.name) == ["books", "label"])
        // The first field (books) ends one byte past the variable area; the second (label)
        // then starts after it ends. The last end still closes the area.
        var damaged = bytes
        let area = UInt32(bytes.count - RowLayout.trailerSize - shelf.variableStart)
        withUnsafeBytes(of: (area + 1).littleEndian) { damaged.replaceSubrange(shelf.endsStart..<shelf.endsStart + 4, with: $0) }
        let row = try RowBytes(damaged, store: layout, context: .key(root: "Shelf", reference: 9), readByEngine: true)
        for (field, name) in [(0, "books"), (1, "label")] {
            let error = try #require(throws: ObjectGraphError.self) { try row.value(field) }
            #expect(error.code == .storeCorrupted)
            #expect(error.message.hasPrefix("row Shelf #9: field \(name): "))
            #expect(error.key == name)
        }
    }

    @Test func damagedMetadataRecordsThrowOrDecodeWithoutTrapping() {
        var thrown = 0
        for bytes in Self.variants(of: Self.metadata.encode()) {
            do { _ = try MetadataRecord.decode(bytes) } catch { thrown += 1 }
        }
        #expect(thrown > 0)
    }

    // [ROW-5] The record keeps each entity's own uniqueness constraints (they enter the
    // version hash a store is checked against, [OPEN-1]); every damaged variant of such a
    // record throws or decodes, never traps, and an entity flagged as constrained with no
    // constraint listed does not decode.
    @Test func aModelRecordKeepsUniquenessConstraints() throws {
        let model = try ManagedObjectModel(entities: [
            EntityDescription(name: "Shelf", properties: [.attribute("label", .string), .attribute("room", .integer32)], uniquenessConstraints: [["label"], ["room", "label"]]),
            EntityDescription(name: "Corner", superentity: "Shelf", properties: [.attribute("angle", .integer16)], uniquenessConstraints: [["angle"]]),
            EntityDescription(name: "Book", properties: [.attribute("title", .string)]),
        ])
        let bytes = ModelRecord.encode(model)
        let decoded = try ModelRecord.decode(bytes)
        #expect(decoded.entityVersionHashesByName == model.entityVersionHashesByName)
        #expect(decoded.entitiesByName["Shelf"]?.uniquenessConstraints == [["label"], ["room", "label"]])
        #expect(decoded.entitiesByName["Corner"]?.uniquenessConstraints == [["angle"]])
        #expect(decoded.entitiesByName["Book"]?.uniquenessConstraints == [])
        #expect(ModelRecord.encode(decoded) == bytes)
        for variant in Self.variants(of: bytes) { _ = try? ModelRecord.decode(variant) }
        // The entity's flags byte follows its name and two empty strings (superentity, modifier).
        var flagged = ModelRecord.encode(try ManagedObjectModel(entities: [EntityDescription(name: "Book", properties: [.attribute("title", .string)])]))
        let name = try #require(flagged.indices.first { Array(flagged[$0...].prefix(4)) == Array("Book".utf8) })
        let flags = name + 6
        #expect(flagged[flags - 2] == 0 && flagged[flags - 1] == 0 && flagged[flags] == 0)
        flagged[flags] = 2
        #expect(throws: ObjectGraphError.self) { try ModelRecord.decode(flagged) }
        flagged[flags] = 8
        #expect(throws: ObjectGraphError.self, "an unknown flag") { try ModelRecord.decode(flagged) }
    }

    @Test func damagedModelRecordsThrowOrDecodeWithoutTrapping() throws {
        var thrown = 0
        for bytes in Self.variants(of: ModelRecord.encode(try Self.model())) {
            do { _ = try ModelRecord.decode(bytes) } catch { thrown += 1 }
        }
        #expect(thrown > 0)
    }
}

/// The metadata record a store keeps across saves encodes, with the name order and the
/// metadata bytes it keeps, exactly as a record made afresh from the same values: random
/// changes of counts (names added, removed, swapped at the same count), of the next
/// reference and of the metadata, the same value set again, after every change.
@Suite struct MetadataRecordEncodingTests {
    @Test(arguments: [1, 2, 3] as [UInt64])
    func keptRecordEncodesAsAFreshOne(seed: UInt64) throws {
        var state = seed
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        let names = ["Album", "Artist", "Genre", "Track", "Ω", "a", "Z"]
        var kept = MetadataRecord()
        var changes = 0
        for _ in 0..<400 {
            switch next(6) {
            case 0: kept.rowCounts[names[next(names.count)], default: 0] += 1 + next(3)
            case 1: kept.rowCounts[names[next(names.count)]] = nil
            case 2:
                // A name swapped for another at the same count.
                if let first = kept.rowCounts.keys.sorted().first, let other = names.first(where: { kept.rowCounts[$0] == nil }) {
                    var swapped = kept.rowCounts
                    swapped[other] = swapped.removeValue(forKey: first)
                    kept.rowCounts = swapped
                }
            case 3: kept.nextReference = Int64(next(1 << 20))
            case 4: kept.metadata["key\(next(4))"] = .string("v\(next(3))")
            default:
                // The same metadata set again, as every save does.
                let same = kept.metadata
                kept.metadata = same
            }
            changes += 1
            let fresh = MetadataRecord(nextReference: kept.nextReference, rowCounts: kept.rowCounts, metadata: kept.metadata)
            let bytes = kept.encodeKeepingCaches()
            #expect(bytes == fresh.encode(), "after change \(changes)")
            #expect(try MetadataRecord.decode(bytes) == fresh)
        }
    }
}

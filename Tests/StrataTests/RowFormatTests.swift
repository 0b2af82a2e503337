import Foundation
import ObjectGraph
@testable import Strata
import StrataEngine
import Testing

/// Rows of format 3 ([ROW-1]): no names in rows, fields read in place by index, every value
/// type and null, damage always an error, layouts independent of declaration order.
@Suite struct RowFormatTests {
    /// One attribute of every type, a to-one and an ordered to-many (the kind rows hold; an
    /// unordered one is keys, [REL-1]).
    static func model(reversed: Bool = false) throws -> ManagedObjectModel {
        var properties: [PropertyDescription] = [
            .attribute("i16", .integer16), .attribute("i32", .integer32), .attribute("i64", .integer64),
            .attribute("dbl", .double), .attribute("flt", .float), .attribute("dec", .decimal),
            .attribute("flag", .boolean), .attribute("text", .string), .attribute("when", .date),
            .attribute("blob", .binaryData), .attribute("id", .uuid), .attribute("link", .uri),
            .attribute("coded", .transformable), .attribute("scratch", .string, transient: true),
            .toOne("parent", "Thing", inverse: "children"), .toMany("children", "Thing", inverse: "parent", ordered: true),
        ]
        if reversed { properties.reverse() }
        return try ManagedObjectModel(entities: [EntityDescription(name: "Thing", properties: properties)])
    }

    /// A value of `type` drawn from `random`, null about one time in five.
    static func value(_ type: AttributeType, _ random: inout SystemRandomNumberGenerator) -> AttributeValue {
        if Int.random(in: 0..<5, using: &random) == 0 { return .null }
        switch type {
        case .integer16: return .int16(Int16.random(in: .min ... .max, using: &random))
        case .integer32: return .int32(Int32.random(in: .min ... .max, using: &random))
        case .integer64: return .int64(Int64.random(in: .min ... .max, using: &random))
        case .double: return .double([0, -0.5, .infinity, -.greatestFiniteMagnitude, Double.random(in: -1e9...1e9, using: &random)].randomElement(using: &random) ?? 0)
        case .float: return .float(Float.random(in: -1e6...1e6, using: &random))
        case .decimal: return .decimal(Decimal(string: "\(Int.random(in: -99999...99999, using: &random)).\(Int.random(in: 0...999, using: &random))") ?? 0)
        case .boolean: return .bool(Bool.random(using: &random))
        case .string: return .string(["", "a", "Zoë", "日本", String(repeating: "x", count: Int.random(in: 0...300, using: &random))].randomElement(using: &random) ?? "")
        case .date: return .date(Date(timeIntervalSinceReferenceDate: Double(Int.random(in: -1_000_000_000...1_000_000_000, using: &random))))
        case .binaryData: return .data(Data((0..<Int.random(in: 0...40, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }))
        case .uuid: return .uuid(UUID())
        case .uri: return .uri(URL(string: "https://example.com/\(Int.random(in: 0...999, using: &random))") ?? URL(fileURLWithPath: "/"))
        case .transformable: return .transformable(Data([1, 2, 3, UInt8.random(in: 0...255, using: &random)]))
        }
    }

    /// A random row of Thing and the values it must read back.
    static func randomRow(_ model: ManagedObjectModel, _ random: inout SystemRandomNumberGenerator) throws -> StoredRow {
        let entity = try model.entity(named: "Thing")
        var row = StoredRow(entity: "Thing", version: UInt64.random(in: 1...UInt64.max, using: &random), attributes: [:], toOne: [:], toMany: [:])
        for attribute in entity.attributes where !attribute.isTransient {
            let value = value(attribute.attributeType, &random)
            if !value.isNull { row.attributes[attribute.name] = value }
        }
        if Bool.random(using: &random) {
            row.toOne["parent"] = (entity: "Thing", reference: Int64.random(in: .min ... .max, using: &random))
        }
        row.toMany["children"] = (0..<Int.random(in: 0...5, using: &random)).map { _ in
            (entity: "Thing", reference: Int64.random(in: -1000...1000, using: &random))
        }
        return row
    }

    /// The row as decoding gives it back: every stored attribute (null when absent), the
    /// to-one ("no destination" when absent) and the to-many (empty when absent).
    static func normalized(_ row: StoredRow) -> StoredRow {
        var row = row
        if row.toOne["parent"] == nil { row.toOne["parent"] = .some(nil) }
        if row.toMany["children"] == nil { row.toMany["children"] = [] }
        for name in ["i16", "i32", "i64", "dbl", "flt", "dec", "flag", "text", "when", "blob", "id", "link", "coded"] where row.attributes[name] == nil {
            row.attributes[name] = .null
        }
        return row
    }

    // Oracle: random rows of every value type and null, encoded, then every field read in
    // place (and the row read whole) against what was written.
    @Test func everyValueTypeAndNullReadsBackFieldByField() throws {
        let model = try Self.model()
        let layout = try StoreLayout(model: model)
        let rowLayout = try #require(layout.layout(of: try model.entity(named: "Thing")))
        var random = SystemRandomNumberGenerator()
        for _ in 0..<300 {
            let row = try Self.randomRow(model, &random)
            let bytes = try row.encode(layout)
            let view = try RowBytes(bytes, store: layout, context: "test")
            #expect(view.version == row.version)
            for (index, field) in rowLayout.fields.enumerated() {
                switch field.kind {
                case .toOne:
                    let expected = (row.toOne[field.name] ?? nil).map { FieldValue.object(StoredObject(entity: 0, reference: $0.reference)) } ?? .null
                    #expect(try view.value(index) == expected, "field \(field.name)")
                case .toMany:
                    let expected = (row.toMany[field.name] ?? []).map { StoredObject(entity: 0, reference: $0.reference) }
                    #expect(try view.value(index) == .objects(expected), "field \(field.name)")
                default:
                    #expect(try view.attribute(index) == (row.attributes[field.name] ?? .null), "field \(field.name)")
                    #expect(view.isNull(index) == (row.attributes[field.name] == nil))
                }
            }
            #expect(try StoredRow.decode(bytes, store: layout, context: "test") == Self.normalized(row))
        }
    }

    // [ROW-1] Rows carry no names: a row is its header, bitmap, fixed fields, ends table, the
    // variable bytes and the checksum, nothing more.
    @Test func aRowKeyIsTheTagTheRootANulAndTheOrderedReference() {
        // [KEY-1], [KEY-2]: the key written in one allocation is the key built from its parts.
        let roots = ["A", "Customer", "Caf\u{E9}", "\u{1F600}Emoji", String(repeating: "Long", count: 20)]
        let references: [Int64] = [0, 1, -1, 42, .max, .min, 1 << 40]
        for root in roots {
            for reference in references {
                let key = KeyLayout.rowKey(root: root, reference: reference)
                #expect(key == KeyLayout.rowPrefix(root: root) + KeyLayout.referenceBytes(reference))
                #expect(KeyLayout.reference(fromRowKey: key) == reference)
            }
        }
        #expect(KeyLayout.rowKey(root: "T", reference: 1) == [KeyLayout.rowTag, 0x54, 0x00, 0x80, 0, 0, 0, 0, 0, 0, 1])
    }

    @Test func aStoreLayoutKeysARowUnderItsHierarchysRoot() throws {
        let model = try StoreTestModel.make()
        let layout = try StoreLayout(model: model)
        for entity in model.entities {
            for reference: Int64 in [0, 7, -3, .max] {
                #expect(layout.rowKey(of: entity, reference: reference) == KeyLayout.rowKey(root: entity.rootEntityName, reference: reference))
            }
        }
        // A subentity's rows are its root's ([KEY-1]); another model's entity object has none.
        let captain = try #require(model.entitiesByName["Captain"])
        #expect(layout.rowKey(of: captain, reference: 1) == KeyLayout.rowKey(root: "Member", reference: 1))
        let other = try StoreTestModel.make()
        #expect(layout.rowKey(of: try #require(other.entitiesByName["Team"]), reference: 1) == nil)
    }

    @Test func rowsHoldNoPropertyOrEntityNames() throws {
        let model = try Self.model()
        let layout = try StoreLayout(model: model)
        let row = StoredRow(entity: "Thing", version: 1, attributes: ["i64": .int64(7)], toOne: [:], toMany: [:])
        let bytes = try row.encode(layout)
        let rowLayout = try #require(layout.layout(of: try model.entity(named: "Thing")))
        #expect(bytes.count == rowLayout.variableStart + RowLayout.trailerSize)
        for name in ["Thing", "i64", "parent"] {
            #expect(!bytes.windows(ofCount: name.utf8.count).contains { $0.elementsEqual(name.utf8) })
        }
    }

    // [ROW-1] The worked example of SPEC.md, byte for byte.
    @Test func theSpecWorkedExampleIsWhatIsWritten() throws {
        let model = try ManagedObjectModel(entities: [EntityDescription(name: "Item", properties: [
            .attribute("rank", .integer64), .attribute("label", .string), .attribute("count", .integer16),
        ])])
        let layout = try StoreLayout(model: model)
        let bytes = try StoredRow(entity: "Item", version: 3, attributes: ["count": .int16(7), "label": .string("ab")], toOne: [:], toMany: [:])
            .encode(layout)
        #expect(bytes.count == 37)
        #expect(Array(bytes[0..<4]) == [0x03, 0x00, 0x00, 0x00])
        let hash = try model.entity(named: "Item").versionHash
        #expect(Array(bytes[4..<8]) == Array(hash.prefix(4)).reversed())
        #expect(Array(bytes[8..<16]) == [3, 0, 0, 0, 0, 0, 0, 0])
        #expect(bytes[16] == 0x04)
        #expect(Array(bytes[17..<27]) == [7, 0] + [UInt8](repeating: 0, count: 8))
        #expect(Array(bytes[27..<31]) == [2, 0, 0, 0])
        #expect(Array(bytes[31..<33]) == Array("ab".utf8))
        #expect(Array(bytes[33..<37]) == withUnsafeBytes(of: CRC32C.checksum(Array(bytes[0..<33])).littleEndian) { Array($0) })
    }

    // Layouts follow names, not declaration order: a model that declares the same properties
    // in another order has the same version hash and reads the same bytes the same way.
    @Test func theLayoutDoesNotDependOnDeclarationOrder() throws {
        let forward = try Self.model(), backward = try Self.model(reversed: true)
        #expect(forward.entityVersionHashesByName == backward.entityVersionHashesByName)
        var random = SystemRandomNumberGenerator()
        let row = try Self.randomRow(forward, &random)
        let bytes = try row.encode(try StoreLayout(model: forward))
        #expect(try StoredRow.decode(bytes, store: try StoreLayout(model: backward), context: "test") == Self.normalized(row))
    }

    // A row written under another layout of its entity (a changed model) is refused with an
    // error naming the entity and the two layouts, never read as this layout.
    @Test func aRowOfAnotherLayoutIsAnErrorNamingTheEntity() throws {
        let old = try ManagedObjectModel(entities: [EntityDescription(name: "Thing", properties: [.attribute("a", .integer64)])])
        let new = try ManagedObjectModel(entities: [EntityDescription(name: "Thing", properties: [.attribute("a", .integer64), .attribute("b", .string)])])
        let bytes = try StoredRow(entity: "Thing", version: 1, attributes: ["a": .int64(1)], toOne: [:], toMany: [:]).encode(try StoreLayout(model: old))
        do {
            _ = try RowBytes(bytes, store: try StoreLayout(model: new), context: "row")
            Issue.record("a row of another layout was read")
        } catch let error as ObjectGraphError {
            #expect(error.code == .storeCorrupted)
            #expect(error.message.contains("Thing") && error.message.contains("layout"))
        }
    }

    // A value that does not fit its field is refused when the row is written, naming the field.
    @Test func aValueOfTheWrongTypeIsRefusedWhenWritten() throws {
        let layout = try StoreLayout(model: try Self.model())
        let row = StoredRow(entity: "Thing", version: 1, attributes: ["i16": .int64(1 << 40)], toOne: [:], toMany: [:])
        #expect(throws: ObjectGraphError.self) { try row.encode(layout) }
        let text = StoredRow(entity: "Thing", version: 1, attributes: ["flag": .string("yes")], toOne: [:], toMany: [:])
        do {
            _ = try text.encode(layout)
            Issue.record("a string was written into a boolean field")
        } catch let error as ObjectGraphError {
            #expect(error.code == .wrongValueType && error.key == "flag")
        }
    }

    // A store whose metadata record is of format 1 or 2 (written by an earlier build) is
    // refused at open with an error that says what to do, and is left as it was.
    @Test(arguments: [UInt8(1), 2])
    func aStoreOfAnEarlierRowFormatIsRefusedWithAWayOut(format: UInt8) throws {
        let store = TemporaryStore()
        do {
            let engine = try Engine.open(at: store.url.path)
            var batch = WriteBatch()
            batch.put(KeyLayout.metadataKey, [format, 5, 0, 0])
            _ = try engine.commit(batch)
            try engine.close()
        }
        do {
            _ = try store.coordinator()
            Issue.record("a format-\(format) store was opened")
        } catch let error as ObjectGraphError {
            #expect(error.message.contains("format \(format)"), "\(error.message)")
            #expect(error.message.contains("dump"))
        }
        let engine = try Engine.open(at: store.url.path)
        #expect(try engine.get(KeyLayout.metadataKey) == [format, 5, 0, 0])
        try engine.close()
    }

    // A row whose header says format 2 (unordered to-many lists inside) is refused with the
    // way out, never read as format 3.
    @Test func aRowOfFormatTwoIsRefusedWithAWayOut() throws {
        let model = try Self.model()
        let layout = try StoreLayout(model: model)
        var bytes = try StoredRow(entity: "Thing", version: 1, attributes: ["i64": .int64(7)], toOne: [:], toMany: [:]).encode(layout)
        bytes[0] = 2
        let body = bytes.count - 4
        let crc = CRC32C.checksum(Array(bytes[0..<body]))
        withUnsafeBytes(of: crc.littleEndian) { for (index, byte) in $0.enumerated() { bytes[body + index] = byte } }
        #expect {
            _ = try RowBytes(bytes, store: layout, context: "test")
        } throws: { error in
            (error as? ObjectGraphError)?.message.contains("format 2") == true && (error as? ObjectGraphError)?.message.contains("dump") == true
        }
    }
}

extension Array where Element == UInt8 {
    /// Every run of `count` consecutive bytes.
    fileprivate func windows(ofCount count: Int) -> [ArraySlice<UInt8>] {
        guard count > 0, count <= self.count else { return [] }
        return (0...(self.count - count)).map { self[$0..<$0 + count] }
    }
}

import Foundation
import ObjectGraph
@testable import Strata
import StrataEngine

/// [BIN-1]…[BIN-3] The binary store's file decoder: the header and sections
/// (`BinaryStoreFile.decode`), the metadata and model records, and the objects read with the
/// file's own model (or, when its model record does not decode, the row target's). Every step
/// may only succeed or throw `ObjectGraphError`.
enum FuzzBinary {
    /// Rewrites what the layout lets us find so mutations reach the parsers behind the checks:
    /// the objects section's stored bytes are taken as the objects themselves and compressed,
    /// and every checksum is recomputed.
    static func fix(_ bytes: [UInt8]) -> [UInt8] {
        let header = BinaryStoreFile.headerSize, sectionHeader = BinaryStoreFile.sectionHeaderSize
        guard bytes.count >= header else { return bytes }
        var out = Array(bytes[0..<24])
        withUnsafeBytes(of: CRC32C.checksum(out).littleEndian) { out.append(contentsOf: $0) }
        var offset = header
        for section in 0..<3 {
            guard bytes.count - offset >= sectionHeader else {
                out += bytes[offset...]
                return out
            }
            var stored = 0
            for index in (0..<8).reversed() { stored = stored << 8 | Int(bytes[offset + 4 + index]) }
            let start = offset + sectionHeader
            stored = min(max(stored, 0), bytes.count - start)
            var payload = Array(bytes[start..<start + stored])
            let raw = payload.count
            if section == 2 { payload = payload.withUnsafeBytes { LZ4.compress($0) } }
            out += bytes[offset..<offset + 4]
            withUnsafeBytes(of: UInt64(payload.count).littleEndian) { out.append(contentsOf: $0) }
            withUnsafeBytes(of: UInt64(raw).littleEndian) { out.append(contentsOf: $0) }
            withUnsafeBytes(of: CRC32C.checksum(payload).littleEndian) { out.append(contentsOf: $0) }
            out += payload
            offset = start + stored
        }
        out += bytes[offset...]
        return out
    }

    static func binary(_ bytes: [UInt8]) {
        func typed(_ error: any Error, _ step: String) {
            fuzzCheck(error is ObjectGraphError, "binary store \(step) threw \(type(of: error))")
        }
        let file: BinaryStoreFile.Decoded
        do {
            file = try BinaryStoreFile.decode(bytes, path: "fuzz")
        } catch {
            return typed(error, "decode")
        }
        do { _ = try MetadataRecord.decode(file.metadata) } catch { typed(error, "metadata record") }
        var layout = FuzzRows.layout
        do {
            layout = try StoreLayout(model: try ModelRecord.decode(file.model))
        } catch {
            typed(error, "model record")
        }
        guard let layout else { return }
        do { _ = try BinaryStoreFile.objects(file, layout: layout, path: "fuzz") } catch { typed(error, "objects") }
        // The in-place reading a store's load does: every field of every row.
        do {
            try BinaryStoreFile.forEachObject(file, layout: layout, path: "fuzz") { view in
                for index in view.row.layout.fields.indices { _ = try view.row.value(index) }
            }
        } catch {
            typed(error, "objects in place")
        }
    }

    /// A small binary store file of the row target's model: two things, one other, relationships.
    static func seed() -> [UInt8]? {
        BinaryStore.register()
        guard let layout = FuzzRows.layout else { return nil }
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("fuzz-seed-\(UUID().uuidString).strata-binary")
        defer { try? FileManager.default.removeItem(at: url) }
        do {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: layout.model)
            try coordinator.addPersistentStore(type: .binary, at: url)
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            let other = try context.insertNewObject(forEntityName: "Other")
            var things: [ManagedObject] = []
            for index in 0..<2 {
                let thing = try context.insertNewObject(forEntityName: "Thing")
                try thing.setValue(.string("thing \(index)"), forKey: "text")
                try thing.setValue(.int64(Int64(index)), forKey: "i64")
                try thing.setValue(other, forKey: "other")
                things.append(thing)
            }
            try things[0].setValue([things[1]], forKey: "peers")
            try context.save()
            return [UInt8](try Data(contentsOf: url))
        } catch {
            return nil
        }
    }
}

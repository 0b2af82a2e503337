import Foundation
import ObjectGraph
import StrataEngine

/// What `strata fsck`, `inspect`, `dump` and `stats` do with a binary store file
/// (``BinaryStore``, SPEC.md [BIN-1]): read it whole with the model it stores ([ROW-5]), with no
/// application code, and write nothing.
///
/// ```swift
/// if BinaryStoreInspector.isBinaryStore(at: path) {
///     let check = BinaryStoreInspector.check(at: path)
///     print(check.isClean ? "clean" : check.problems.joined(separator: "\n"))
/// }
/// ```
public enum BinaryStoreInspector {
    /// Whether `path` is a file that starts as a binary store does (its magic).
    public static func isBinaryStore(at path: String) -> Bool {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
            let handle = Foundation.FileHandle(forReadingAtPath: path)
        else { return false }
        defer { try? handle.close() }
        let head = (try? handle.read(upToCount: BinaryStoreFile.magic.count)) ?? Data()
        return [UInt8](head) == BinaryStoreFile.magic
    }

    /// One part of the file.
    public struct Section: Sendable, Codable, Equatable {
        /// `metadata`, `model` or `objects`.
        public var kind: String
        /// Where its header starts.
        public var offset: Int
        /// The bytes stored (compressed, for the objects).
        public var storedBytes: Int
        /// The bytes once decompressed.
        public var rawBytes: Int
    }

    /// An entity of the stored model and how many objects of it the file holds.
    public struct EntityRows: Sendable, Codable, Equatable {
        public var name: String
        public var superentity: String?
        public var objects: Int
        /// The entity's properties as `name: type` (attributes) or `name -> Destination`.
        public var properties: [String]
    }

    /// What `inspect` and `stats` show.
    public struct Report: Sendable, Codable, Equatable {
        public var path: String
        public var format: Int
        public var generation: UInt64
        public var fileBytes: Int
        public var sections: [Section]
        public var storeIdentifier: String?
        public var nextReference: Int64
        public var objects: Int
        public var entities: [EntityRows]
        /// The coordinator's metadata, values as text (version hashes in hex).
        public var metadata: [String: String]

        /// Bytes of the objects before compression per byte in the file.
        public var compressionRatio: Double {
            guard let objects = sections.first(where: { $0.kind == "objects" }), objects.storedBytes > 0 else { return 1 }
            return Double(objects.rawBytes) / Double(objects.storedBytes)
        }
    }

    /// What `fsck` finds: problems (damage, counts that disagree) and notes (references to
    /// objects the file does not hold, which a `noAction` delete rule leaves).
    public struct Check: Sendable, Codable, Equatable {
        public var path: String
        public var problems: [String] = []
        public var notes: [String] = []
        public var objects = 0
        /// Whether nothing is wrong.
        public var isClean: Bool { problems.isEmpty }
    }

    /// One object, decoded: what `dump` prints.
    public struct Object: Sendable, Codable, Equatable {
        public var entity: String
        public var reference: Int64
        /// Attribute values as text, by name.
        public var attributes: [String: String]
        /// Destinations as `Entity/p<reference>`, by relationship name.
        public var relationships: [String: [String]]

        /// One line: `Entity/p12 name="Ada" department=[Department/p3]`.
        public var line: String {
            var parts = ["\(entity)/p\(reference)"]
            for (name, value) in attributes.sorted(by: { $0.key < $1.key }) { parts.append("\(name)=\(value)") }
            for (name, targets) in relationships.sorted(by: { $0.key < $1.key }) { parts.append("\(name)=[\(targets.joined(separator: ", "))]") }
            return parts.joined(separator: " ")
        }
    }

    /// The file read with its own model: its parts, the metadata record and the objects.
    private static func read(_ path: String) throws -> (bytes: [UInt8], file: BinaryStoreFile.Decoded, record: MetadataRecord, model: ManagedObjectModel, objects: [BinaryStoreFile.Object]) {
        let bytes = try BinaryStore.readFile(path, fileSystem: PosixFileSystem())
        guard !bytes.isEmpty else {
            throw ObjectGraphError(.storeOpenFailed, "\(path) is empty: a binary store reserved and never saved.")
        }
        let file = try BinaryStoreFile.decode(bytes, path: path)
        let record = try MetadataRecord.decode(file.metadata)
        let model = try ModelRecord.decode(file.model)
        let objects = try BinaryStoreFile.objects(file, layout: try StoreLayout(model: model), path: path)
        return (bytes, file, record, model, objects)
    }

    /// The file's header, sections, stored model, metadata and objects per entity.
    ///
    /// - Throws: `storeOpenFailed` for a file that is not a binary store (or empty),
    ///   `storeCorrupted` naming the offset of damage.
    public static func inspect(at path: String) throws -> Report {
        let (bytes, file, record, model, objects) = try read(path)
        var sections: [Section] = []
        var offset = BinaryStoreFile.headerSize
        for kind in ["metadata", "model", "objects"] {
            let stored = Int(BinaryStoreFile.read(UInt64.self, bytes, at: offset + 4))
            let raw = Int(BinaryStoreFile.read(UInt64.self, bytes, at: offset + 12))
            sections.append(Section(kind: kind, offset: offset, storedBytes: stored, rawBytes: raw))
            offset += BinaryStoreFile.sectionHeaderSize + stored
        }
        var counts: [String: Int] = [:]
        for object in objects { counts[object.row.entity, default: 0] += 1 }
        let entities = model.entities.sorted { $0.name < $1.name }.map { entity in
            EntityRows(
                name: entity.name, superentity: entity.superentityName, objects: counts[entity.name] ?? 0,
                properties: entity.ownProperties.map { property in
                    if let relationship = property as? RelationshipDescription {
                        return "\(property.name) -> \(relationship.isToMany ? "[\(relationship.destinationEntityName)]" : relationship.destinationEntityName)"
                    }
                    return "\(property.name): \((property as? AttributeDescription)?.attributeType.rawValue ?? "?")"
                })
        }
        return Report(
            path: path, format: Int(BinaryStoreFile.format), generation: file.generation, fileBytes: bytes.count, sections: sections,
            storeIdentifier: record.metadata[PersistentStore.storeUUIDKey]?.stringValue, nextReference: record.nextReference,
            objects: objects.count, entities: entities, metadata: record.metadata.mapValues(text))
    }

    /// Checks every part of the file ([BIN-2]), that every object decodes under the stored
    /// model, that references are unique in each hierarchy, that the metadata's counts and
    /// next reference agree with the objects, and that relationships have inverses that point
    /// back; never throws for damage (it is a problem).
    public static func check(at path: String) -> Check {
        var check = Check(path: path)
        let read: (bytes: [UInt8], file: BinaryStoreFile.Decoded, record: MetadataRecord, model: ManagedObjectModel, objects: [BinaryStoreFile.Object])
        do {
            read = try self.read(path)
        } catch let error as ObjectGraphError {
            check.problems.append(error.message)
            return check
        } catch {
            check.problems.append("\(error)")
            return check
        }
        check.objects = read.objects.count
        let model = read.model
        var byKey: [String: BinaryStoreFile.Object] = [:]
        var counts: [String: Int] = [:]
        var largest: Int64 = 0
        func key(_ entity: String, _ reference: Int64) -> String {
            "\(model.entitiesByName[entity]?.rootEntity.name ?? entity)/\(reference)"
        }
        for object in read.objects {
            let objectKey = key(object.row.entity, object.reference)
            if byKey[objectKey] != nil { check.problems.append("two objects of \(objectKey.split(separator: "/")[0])'s hierarchy have reference \(object.reference)") }
            byKey[objectKey] = object
            counts[object.row.entity, default: 0] += 1
            largest = max(largest, object.reference)
        }
        for (entity, count) in counts.sorted(by: { $0.key < $1.key }) where read.record.rowCounts[entity] != count {
            check.problems.append("the metadata counts \(read.record.rowCounts[entity] ?? 0) \(entity) objects; the file holds \(count)")
        }
        for (entity, count) in read.record.rowCounts.sorted(by: { $0.key < $1.key }) where counts[entity] == nil && count != 0 {
            check.problems.append("the metadata counts \(count) \(entity) objects; the file holds none")
        }
        if read.record.nextReference <= largest {
            check.problems.append("the metadata's next reference \(read.record.nextReference) is not above the largest reference \(largest)")
        }
        for object in read.objects {
            guard let entity = model.entitiesByName[object.row.entity] else { continue }
            let owner = "\(object.row.entity)/p\(object.reference)"
            for relationship in entity.relationships where !relationship.isTransient {
                let targets: [(entity: String, reference: Int64)] = relationship.isToMany
                    ? object.row.toMany[relationship.name] ?? []
                    : (object.row.toOne[relationship.name] ?? nil).map { [$0] } ?? []
                for target in targets {
                    guard let destination = byKey[key(target.entity, target.reference)] else {
                        check.notes.append("\(owner).\(relationship.name) names \(target.entity)/p\(target.reference), which the file does not hold (a noAction delete rule leaves such references)")
                        continue
                    }
                    guard let inverse = relationship.inverseName else { continue }
                    let back: [(entity: String, reference: Int64)] = relationship.inverseRelationship?.isToMany == true
                        ? destination.row.toMany[inverse] ?? []
                        : (destination.row.toOne[inverse] ?? nil).map { [$0] } ?? []
                    if !back.contains(where: { key($0.entity, $0.reference) == key(object.row.entity, object.reference) }) {
                        check.problems.append("\(owner).\(relationship.name) names \(target.entity)/p\(target.reference), whose \(inverse) does not name it back")
                    }
                }
            }
        }
        return check
    }

    /// Every object of the file, in file order (by entity, then reference), decoded with the
    /// stored model; `body` returns `false` to stop.
    public static func dump(at path: String, _ body: (Object) throws -> Bool) throws {
        for object in try read(path).objects {
            var attributes: [String: String] = [:]
            for (name, value) in object.row.attributes { attributes[name] = text(value) }
            var relationships: [String: [String]] = [:]
            for (name, target) in object.row.toOne { relationships[name] = target.map { ["\($0.entity)/p\($0.reference)"] } ?? [] }
            for (name, members) in object.row.toMany { relationships[name] = members.map { "\($0.entity)/p\($0.reference)" } }
            guard try body(Object(entity: object.row.entity, reference: object.reference, attributes: attributes, relationships: relationships)) else { return }
        }
    }

    /// A value as text: strings quoted, data in hex.
    private static func text(_ value: AttributeValue) -> String {
        switch value {
        case .data(let data), .transformable(let data): return "0x" + data.map { String(format: "%02x", $0) }.joined()
        default: return "\(value)"
        }
    }
}

import Foundation
import ObjectGraph
import StrataEngine

extension PersistentStore.StoreType {
    /// The binary atomic store (Core Data's `NSBinaryStoreType`): ``BinaryStore``.
    public static let binary = PersistentStore.StoreType("Binary")
}

/// An atomic store that keeps the whole object graph in one file, in Strata's formats
/// (SPEC.md [BIN-1]…[BIN-4]): Core Data's binary store, for data that fits in memory and is
/// written whole (a document, a cache, a settings file).
///
/// The file holds a header with a generation number, the metadata record (with the model's
/// version hashes), the model record, and every object as a row in Strata's row encoding,
/// LZ4-compressed; a CRC-32C covers every part. A save writes a new file, syncs it, renames it
/// over the old one and syncs the directory, so a crash at any point leaves the old file or the
/// new one, whole. A file whose bytes fail a check is refused with an error that names the
/// offset; one saved by another coordinator or process since this one loaded it is not
/// overwritten (`ObjectGraphError/Code/storeLocked`).
///
/// ```swift
/// BinaryStore.register()
/// try coordinator.addPersistentStore(type: .binary, at: URL(filePath: "/path/to/library.strata-binary"))
/// ```
///
/// Thread safety: the file state is protected by `AtomicStore`'s lock (every method below
/// runs under it).
open class BinaryStore: AtomicStore, @unchecked Sendable {
    // @unchecked: the generation below is read and written under AtomicStore's lock only.
    /// The generation of the file as loaded or last saved (0: none yet).
    private var generation: UInt64 = 0

    /// Registers this class for `PersistentStore/StoreType/binary`. Call once at start-up.
    public static func register() {
        PersistentStoreCoordinator.registerStoreClass(BinaryStore.self, type: .binary)
    }

    /// `PersistentStore/StoreType/binary`.
    open override var type: StoreType { .binary }

    /// The file system the store reads and writes through (a seam for fault injection).
    open var fileSystem: any FileSystem { PosixFileSystem() }

    /// The path of the store's file.
    private var path: String {
        get throws {
            guard let url, url.isFileURL else {
                throw ObjectGraphError(.invalidArgument, "A binary store needs a file URL; got \(url?.absoluteString ?? "none").")
            }
            return url.path
        }
    }

    // MARK: Loading

    /// [BIN-3] Reads the file: an empty or missing file is a new store; otherwise the header,
    /// the metadata (its version hashes are checked against the coordinator's model before
    /// any row is read), and the objects, registered as nodes.
    open override func load() throws {
        let path = try self.path
        let bytes = try Self.readFile(path, fileSystem: fileSystem)
        guard !bytes.isEmpty else { return }
        let file = try BinaryStoreFile.decode(bytes, path: path)
        generation = file.generation
        let record = try MetadataRecord.decode(file.metadata)
        metadata = record.metadata
        guard let coordinator = persistentStoreCoordinator else { return }
        let model = coordinator.managedObjectModel
        let differences = model.differences(ofConfiguration: configurationName, fromStoreMetadata: record.metadata)
        if !differences.isEmpty { throw ObjectGraphError.incompatibleModel(differences, storeURL: url) }
        let layout = try StoreLayout(model: model)
        var views: [BinaryStoreFile.ObjectView] = []
        try BinaryStoreFile.forEachObject(file, layout: layout, path: path) { views.append($0) }
        // Every node first (a relationship names another), keyed by hierarchy and reference.
        var nodes: [ObjectKey: AtomicStoreCacheNode] = [:]
        nodes.reserveCapacity(views.count)
        var inFileOrder: [AtomicStoreCacheNode] = []
        inFileOrder.reserveCapacity(views.count)
        for view in views {
            guard let entity = layout.entity(number: view.row.entityNumber) else {
                throw ObjectGraphError(.storeCorrupted, "binary store \(path): an object of entity number \(view.row.entityNumber), which the model does not have")
            }
            let key = ObjectKey(root: entity.rootEntityName, reference: view.reference)
            guard nodes[key] == nil else {
                throw ObjectGraphError(.storeCorrupted, "binary store \(path): two objects of \(entity.rootEntityName)'s hierarchy have reference \(view.reference)")
            }
            let node = AtomicStoreCacheNode(objectID: objectID(for: entity, withReferenceObject: .int64(view.reference)))
            nodes[key] = node
            inFileOrder.append(node)
        }
        // A destination the file does not hold is an object deleted while this one kept
        // pointing at it (a noAction rule): the reference stays, through a node that is not
        // registered, as the other stores keep it.
        var missing: [ObjectKey: AtomicStoreCacheNode] = [:]
        func node(_ target: StoredObject) throws -> AtomicStoreCacheNode {
            guard let entity = layout.entity(number: target.entity) else {
                throw ObjectGraphError(.storeCorrupted, "binary store \(path): a relationship names entity number \(target.entity), which the model does not have")
            }
            let key = ObjectKey(root: entity.rootEntityName, reference: target.reference)
            if let node = nodes[key] ?? missing[key] { return node }
            let node = AtomicStoreCacheNode(objectID: objectID(for: entity, withReferenceObject: .int64(target.reference)))
            missing[key] = node
            return node
        }
        for (view, owner) in zip(views, inFileOrder) {
            let rowLayout = view.row.layout
            var values: [String: AtomicStoreCacheNode.Value] = [:]
            values.reserveCapacity(rowLayout.fields.count + rowLayout.keyedRelationships.count)
            for (index, field) in rowLayout.fields.enumerated() {
                switch try view.row.value(index) {
                case .null: if field.kind == .toOne { values[field.name] = .toOne(nil) }
                case .attribute(let value): values[field.name] = .attribute(value)
                case .object(let target): values[field.name] = .toOne(try node(target))
                case .objects(let targets): values[field.name] = .toMany(try targets.map(node))
                }
            }
            for (relationship, members) in zip(rowLayout.keyedRelationships, view.members) {
                values[relationship.name] = .toMany(try members.map(node))
            }
            owner.propertyCache = values
        }
        // The file is in entity and reference order already ([BIN-4]'s save writes it so).
        addCacheNodes(inOrder: inFileOrder)
    }

    /// The bytes of the file at `path` (at most `limit` of them); empty when there is none.
    static func readFile(_ path: String, fileSystem: any FileSystem, upTo limit: Int = .max) throws -> [UInt8] {
        do {
            guard case .file(let size)? = try fileSystem.kind(of: path), size > 0 else { return [] }
            let handle = try fileSystem.open(path, mode: .readOnly)
            defer { handle.close() }
            var bytes = [UInt8](repeating: 0, count: Int(min(size, UInt64(limit))))
            var read = 0
            while read < bytes.count {
                let count = try bytes.withUnsafeMutableBytes { buffer in
                    try handle.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[read...]), at: UInt64(read))
                }
                if count == 0 { break }
                read += count
            }
            return Array(bytes[..<read])
        } catch let error as StoreError {
            throw ObjectGraphError(error, while: "read the binary store \(path)")
        }
    }

    // MARK: Saving

    /// [BIN-4] Writes every node to a new file and moves it over the old one: the file is
    /// written and synced under a temporary name in the same directory, renamed over the
    /// store's file, and the directory synced. Refuses (`ObjectGraphError/Code/storeLocked`)
    /// when the file on disk is no longer the generation this store loaded or last wrote.
    open override func save() throws {
        let path = try self.path
        guard let model = persistentStoreCoordinator?.managedObjectModel else {
            throw ObjectGraphError(.noPersistentStore, "The binary store \(path) is not part of a coordinator.")
        }
        let fileSystem = self.fileSystem
        let onDisk = try Self.readFile(path, fileSystem: fileSystem, upTo: BinaryStoreFile.headerSize)
        let diskGeneration = onDisk.isEmpty ? 0 : try BinaryStoreFile.generation(of: onDisk, path: path)
        guard diskGeneration == generation else {
            throw ObjectGraphError(
                .storeLocked,
                "The binary store \(path) was saved by another coordinator or process since this one loaded it (generation \(diskGeneration) on disk, \(generation) loaded); nothing was written. Remove the store and add it again to load what is there.")
        }
        let layout = try StoreLayout(model: model)
        // The nodes in file order: entity, then reference.
        let nodes = AtomicStore.inIDOrder(Array(cacheNodes())) { $0.objectID }
        var encoded = RowWriter()
        encoded.bytes.reserveCapacity(nodes.count * 64)
        encoded.varint(UInt64(nodes.count))
        var counts: [String: Int] = [:]
        var largest: Int64 = 0
        for node in nodes {
            guard case .int64(let reference)? = node.objectID.referenceObject else {
                throw ObjectGraphError(.invalidArgument, "The binary store keeps integer references; \(node.objectID) has another kind.", objectID: node.objectID)
            }
            try BinaryStoreFile.append(node, reference: reference, layout: layout, to: &encoded)
            counts[node.objectID.entity.name, default: 0] += 1
            largest = max(largest, reference)
        }
        let record = MetadataRecord(nextReference: largest + 1, rowCounts: counts, metadata: metadata)
        let next = generation + 1
        let bytes = try BinaryStoreFile.assemble(
            generation: next, metadata: record.encode(), model: ModelRecord.encode(model), objects: encoded.bytes)
        try Self.replaceFile(path, with: bytes, fileSystem: fileSystem)
        generation = next
    }

    /// Writes `bytes` to a new file next to `path`, syncs it, renames it over `path` and syncs
    /// the directory. A failure before the rename leaves the old file; the temporary file is
    /// removed.
    static func replaceFile(_ path: String, with bytes: [UInt8], fileSystem: any FileSystem) throws {
        let directory = (path as NSString).deletingLastPathComponent
        let temporary = path + ".saving-" + UUID().uuidString
        do {
            do {
                let handle = try fileSystem.open(temporary, mode: .createNew)
                defer { handle.close() }
                try bytes.withUnsafeBytes { try handle.write($0, at: 0) }
                try handle.sync()
            }
            try fileSystem.rename(temporary, to: path)
        } catch {
            try? fileSystem.remove(temporary)
            if let error = error as? StoreError { throw ObjectGraphError(error, while: "write the binary store \(path)") }
            throw error
        }
        do {
            try fileSystem.syncDirectory(directory.isEmpty ? "." : directory)
        } catch {
            throw ObjectGraphError(error, while: "sync the directory of the binary store \(path)")
        }
    }

    // MARK: Metadata without opening

    /// The metadata of the binary store at `url` (every part of the file checked); empty for
    /// an empty (reservation) file.
    open override class func metadataForPersistentStore(at url: URL) throws -> [String: AttributeValue] {
        let bytes = try readFile(url.path, fileSystem: PosixFileSystem())
        guard !bytes.isEmpty else { return [:] }
        return try MetadataRecord.decode(BinaryStoreFile.decode(bytes, path: url.path).metadata).metadata
    }

    /// The model the binary store at `url` was last saved with: its file's model record
    /// ([BIN-2], [ROW-5]); `nil` for an empty or missing file.
    open override class func storedModel(at url: URL) throws -> ManagedObjectModel? {
        let bytes = try readFile(url.path, fileSystem: PosixFileSystem())
        guard !bytes.isEmpty else { return nil }
        return try ModelRecord.decode(BinaryStoreFile.decode(bytes, path: url.path).model)
    }

    /// Replaces the metadata of the binary store at `url`, as a save does (a new generation,
    /// written whole and moved over the old file).
    ///
    /// - Throws: `ObjectGraphError/Code/invalidArgument` when nothing was saved at `url`.
    open override class func setMetadata(_ metadata: [String: AttributeValue], forPersistentStoreAt url: URL) throws {
        let fileSystem = PosixFileSystem()
        let bytes = try readFile(url.path, fileSystem: fileSystem)
        guard !bytes.isEmpty else {
            throw ObjectGraphError(.invalidArgument, "No binary store has been saved at \(url.path); its metadata is written with its first save.")
        }
        let file = try BinaryStoreFile.decode(bytes, path: url.path)
        var record = try MetadataRecord.decode(file.metadata)
        record.metadata = metadata
        let updated = try BinaryStoreFile.assemble(generation: file.generation + 1, metadata: record.encode(), model: file.model, objects: file.objects)
        try replaceFile(url.path, with: updated, fileSystem: fileSystem)
    }

    /// Removes the binary store file at `url` (and temporary files of interrupted saves);
    /// refuses a file that is not a binary store.
    open override class func destroyPersistentStore(at url: URL) throws {
        guard FileManager.default.fileExists(atPath: url.path) else { return }
        let head = try readFile(url.path, fileSystem: PosixFileSystem(), upTo: BinaryStoreFile.magic.count)
        guard head.isEmpty || head == BinaryStoreFile.magic else {
            throw ObjectGraphError(.invalidArgument, "\(url.path) is not a binary store file; nothing was removed.")
        }
        let directory = url.deletingLastPathComponent()
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [] where name.hasPrefix(url.lastPathComponent + ".saving-") {
            try? FileManager.default.removeItem(at: directory.appendingPathComponent(name))
        }
        do {
            try FileManager.default.removeItem(at: url)
        } catch {
            throw ObjectGraphError(.storeIOFailed, "Could not remove the binary store \(url.path): \(error)")
        }
    }

    /// An object's place: its hierarchy and reference.
    private struct ObjectKey: Hashable {
        let root: String
        let reference: Int64
    }
}

import Foundation
import ObjectGraph
import StrataEngine
import StrataSync
import Testing
@testable import Strata

/// A binary store whose file system is a fault-injecting one, chosen by the file's path.
final class FaultInjectingBinaryStore: BinaryStore, @unchecked Sendable {
    static let type = PersistentStore.StoreType("FaultInjectingBinary")
    static let fileSystems = Locked<[String: FaultInjectingFileSystem]>([:])
    override var type: StoreType { Self.type }
    override var fileSystem: any FileSystem {
        Self.fileSystems.withLock { $0[url?.path ?? ""] } ?? FaultInjectingFileSystem()
    }
}

/// [BIN-1]…[BIN-4] The binary atomic store: what it keeps, its file, damage, a second
/// writer, and crashes at every step of a save.
@Suite struct BinaryStoreTests {
    /// Every attribute type, and relationships of every shape: one-to-many (cascade), an
    /// ordered to-many, many-to-many, a self-referential to-one, and an inheritance tree.
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Thing", properties: [
                .attribute("i16", .integer16), .attribute("i32", .integer32), .attribute("i64", .integer64),
                .attribute("dbl", .double), .attribute("flt", .float), .attribute("dec", .decimal),
                .attribute("flag", .boolean), .attribute("text", .string), .attribute("when", .date),
                .attribute("blob", .binaryData), .attribute("id", .uuid), .attribute("link", .uri),
                .attribute("payload", .transformable), .attribute("scratch", .string, transient: true),
                .toOne("parent", "Thing", inverse: "children"),
                .toMany("children", "Thing", inverse: "parent", deleteRule: .cascade),
                .toMany("steps", "Step", inverse: "owner", ordered: true),
                .toMany("tags", "Tag", inverse: "things"),
            ]),
            EntityDescription(name: "Special", superentity: "Thing", properties: [.attribute("extra", .string)]),
            EntityDescription(name: "Step", properties: [.attribute("n", .integer64), .toOne("owner", "Thing", inverse: "steps")]),
            EntityDescription(name: "Tag", properties: [.attribute("name", .string), .toMany("things", "Thing", inverse: "tags")]),
        ])
    }

    private func url() -> URL {
        BinaryStore.register()
        return FileManager.default.temporaryDirectory.appendingPathComponent("binary-\(UUID().uuidString).strata-binary")
    }

    private func coordinator(_ url: URL, model: ManagedObjectModel? = nil, type: PersistentStore.StoreType = .binary) throws -> PersistentStoreCoordinator {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try model ?? Self.model())
        try coordinator.addPersistentStore(type: type, at: url)
        return coordinator
    }

    /// A small graph of every shape; returns a description of it a reader can compare.
    @discardableResult
    private func populate(_ context: ManagedObjectContext) throws -> ManagedObject {
        let root = try context.insertNewObject(forEntityName: "Thing")
        let values: [String: AttributeValue] = [
            "i16": .int16(-7), "i32": .int32(1 << 20), "i64": .int64(.min), "dbl": .double(-0.5), "flt": .float(3.25),
            "dec": .decimal(Decimal(string: "12.345")!), "flag": .bool(true), "text": "héllo\u{0}wörld",
            "when": .date(Date(timeIntervalSinceReferenceDate: 1_234.5)), "blob": .data(Data([0, 1, 2, 255])),
            "id": .uuid(UUID(uuidString: "12345678-1234-1234-1234-123456789ABC")!), "link": .uri(URL(string: "https://example.com/a?b")!),
            "payload": .transformable(Data("{\"k\":1}".utf8)),
        ]
        for (key, value) in values { try root.setValue(value, forKey: key) }
        let child = try context.insertNewObject(forEntityName: "Special")
        try child.setValue("kid", forKey: "text")
        try child.setValue("more", forKey: "extra")
        try child.setValue(root, forKey: "parent")
        var steps: [ManagedObject] = []
        for n in [3, 1, 2] {
            let step = try context.insertNewObject(forEntityName: "Step")
            try step.setValue(.int64(Int64(n)), forKey: "n")
            steps.append(step)
        }
        try root.setValue(steps, forKey: "steps")
        for name in ["a", "b"] {
            let tag = try context.insertNewObject(forEntityName: "Tag")
            try tag.setValue(.string(name), forKey: "name")
            try tag.addObject(root, toRelationship: "things")
            if name == "b" { try tag.addObject(child, toRelationship: "things") }
        }
        return root
    }

    private func describe(_ coordinator: PersistentStoreCoordinator) throws -> [String] {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var lines: [String] = []
        for entity in ["Thing", "Step", "Tag"] {
            var request = FetchRequest(entityName: entity)
            request.sortDescriptors = [FetchSortDescriptor(keyPath: entity == "Tag" ? "name" : entity == "Step" ? "n" : "text")]
            for object in try context.fetch(request) {
                var parts = [object.entity.name]
                for property in object.entity.properties where !property.isTransient {
                    if let relationship = property as? RelationshipDescription {
                        let ids = try object.objectIDs(forRelationshipNamed: relationship.name)
                        let names = try ids.map { id -> String in
                            let key = id.entity.name == "Tag" ? "name" : id.entity.name == "Step" ? "n" : "text"
                            return "\(try context.existingObject(with: id).value(forKey: key))"
                        }
                        parts.append("\(property.name)=\(relationship.isOrdered ? names : names.sorted())")
                    } else {
                        parts.append("\(property.name)=\(try object.value(forKey: property.name))")
                    }
                }
                lines.append(parts.joined(separator: " "))
            }
        }
        return lines
    }

    @Test func everyValueAndRelationshipShapeSurvivesASaveAndAReload() throws {
        let file = url()
        defer { try? FileManager.default.removeItem(at: file) }
        let first = try coordinator(file)
        let context = ManagedObjectContext(persistentStoreCoordinator: first)
        try populate(context)
        try context.save()
        let written = try describe(first)
        #expect(written.count == 7)
        let reloaded = try coordinator(file)
        #expect(try describe(reloaded) == written)
        let reader = ManagedObjectContext(persistentStoreCoordinator: reloaded)
        let ordered = try reader.fetch(.init(entityName: "Thing")).first { $0.entity.name == "Thing" }
        #expect(try ordered?.objects(forKey: "steps").map { try $0.value(forKey: "n") } == [.int64(3), .int64(1), .int64(2)], "the ordered relationship keeps its order")
    }

    /// [BIN-1] The header: magic, format, a generation counted up by each save; no temporary
    /// file is left behind; the metadata (with the model's hashes) reads without opening.
    @Test func theFileHasItsHeaderAndGenerationAndNothingIsLeftBehind() throws {
        let file = url()
        defer { try? FileManager.default.removeItem(at: file) }
        let coordinator = try coordinator(file)
        #expect(try Data(contentsOf: file).isEmpty, "a reservation file until the first save")
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let root = try populate(context)
        try context.save()
        var bytes = [UInt8](try Data(contentsOf: file))
        #expect(Array(bytes[0..<8]) == Array("STRATA-B".utf8))
        #expect(try BinaryStoreFile.generation(of: bytes, path: file.path) == 1)
        try root.setValue("changed", forKey: "text")
        try context.save()
        bytes = [UInt8](try Data(contentsOf: file))
        #expect(try BinaryStoreFile.generation(of: bytes, path: file.path) == 2)
        let siblings = try FileManager.default.contentsOfDirectory(atPath: file.deletingLastPathComponent().path)
        #expect(!siblings.contains { $0.hasPrefix(file.lastPathComponent + ".saving-") })
        let metadata = try BinaryStore.metadataForPersistentStore(at: file)
        #expect(metadata[PersistentStore.storeTypeKey] == .string("Binary"))
        #expect(metadata[PersistentStore.modelVersionHashKeyPrefix + "Thing"] == .data(try Self.model().entitiesByName["Thing"]!.versionHash))
    }

    /// [BIN-2] Every byte of a file, flipped, and every truncation: an error that says what is
    /// wrong and where (or, for the magic, that the file is not a binary store); never a crash,
    /// never a store that loads with other contents.
    @Test func everyFlippedByteAndEveryTruncationIsAClearError() throws {
        let file = url()
        defer { try? FileManager.default.removeItem(at: file) }
        do {
            let coordinator = try coordinator(file)
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            try populate(context)
            try context.save()
        }
        let good = [UInt8](try Data(contentsOf: file))
        let damaged = file.deletingLastPathComponent().appendingPathComponent("damaged-\(UUID().uuidString).strata-binary")
        defer { try? FileManager.default.removeItem(at: damaged) }
        func expectRefused(_ bytes: [UInt8], _ label: String) throws {
            try Data(bytes).write(to: damaged)
            let coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.model())
            do {
                try coordinator.addPersistentStore(type: .binary, at: damaged)
                Issue.record("\(label): the damaged file loaded")
            } catch let error as ObjectGraphError {
                #expect([.storeCorrupted, .storeOpenFailed].contains(error.code), "\(label): \(error)")
                if error.code == .storeCorrupted { #expect(error.message.contains("byte"), "\(label): the message names a position: \(error.message)") }
            }
        }
        for offset in good.indices {
            var bytes = good
            bytes[offset] ^= 0x41
            try expectRefused(bytes, "byte \(offset) flipped")
        }
        for length in stride(from: 1, to: good.count, by: 1) {
            try expectRefused(Array(good[..<length]), "cut to \(length) bytes")
        }
        try expectRefused(good + [0], "a byte appended")
    }

    /// A store saved by another coordinator since this one loaded it is not overwritten.
    @Test func aSecondWriterIsRefusedAndNothingIsLost() throws {
        let file = url()
        defer { try? FileManager.default.removeItem(at: file) }
        let one = try coordinator(file)
        let seed = ManagedObjectContext(persistentStoreCoordinator: one)
        try populate(seed)
        try seed.save()
        let two = try coordinator(file)
        let first = ManagedObjectContext(persistentStoreCoordinator: one)
        try first.insertNewObject(forEntityName: "Tag").setValue("from one", forKey: "name")
        try first.save()
        let second = ManagedObjectContext(persistentStoreCoordinator: two)
        try second.insertNewObject(forEntityName: "Tag").setValue("from two", forKey: "name")
        let error = #expect(throws: ObjectGraphError.self) { try second.save() }
        #expect(error?.code == .storeLocked)
        let reader = ManagedObjectContext(persistentStoreCoordinator: try coordinator(file))
        let names = try reader.fetch(.init(entityName: "Tag")).map { try $0.value(forKey: "name") }
        #expect(Set(names) == ["a", "b", "from one"], "the first writer's save is there; the second's was refused whole")
    }

    /// A store written with another model is refused before any row is read, naming the
    /// difference, and the file is left as it was.
    @Test func anotherModelIsRefusedWithTheDifference() throws {
        let file = url()
        defer { try? FileManager.default.removeItem(at: file) }
        let context = ManagedObjectContext(persistentStoreCoordinator: try coordinator(file))
        try populate(context)
        try context.save()
        let before = try Data(contentsOf: file)
        let other = try ManagedObjectModel(entities: [EntityDescription(name: "Thing", properties: [.attribute("text", .integer64)])])
        let error = #expect(throws: ObjectGraphError.self) { try coordinator(file, model: other) }
        #expect(error?.code == .incompatibleModel)
        #expect(try Data(contentsOf: file) == before)
    }

    /// `migratePersistentStore(_:to:options:type:)` from a StrataStore to a binary store and
    /// back: the same objects, values, relationships (in order) and metadata keys of one's
    /// own; the coordinator then holds only the new store.
    @Test func migrationMovesTheGraphFromStrataToBinaryAndBack() throws {
        StrataStore.register()
        BinaryStore.register()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("migrate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.model())
        let strata = try coordinator.addPersistentStore(type: .strata, at: directory.appendingPathComponent("first"))
        var metadata = strata.metadata
        metadata["app.version"] = "3"
        coordinator.setMetadata(metadata, for: strata)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        try populate(context)
        try context.save()
        let original = try describe(coordinator)

        let binary = try coordinator.migratePersistentStore(strata, to: directory.appendingPathComponent("graph.strata-binary"), type: .binary)
        #expect(coordinator.persistentStores.count == 1 && coordinator.persistentStores.first === binary)
        #expect(binary.type == .binary && binary.identifier != strata.identifier)
        #expect(binary.metadata["app.version"] == "3")
        #expect(try describe(coordinator) == original)
        #expect(try describe(try self.coordinator(directory.appendingPathComponent("graph.strata-binary"))) == original, "the file holds it")

        let back = try coordinator.migratePersistentStore(binary, to: directory.appendingPathComponent("second"), type: .strata)
        #expect(back.type == .strata && back.metadata["app.version"] == "3")
        #expect(try describe(coordinator) == original)
        let error = #expect(throws: ObjectGraphError.self) {
            try coordinator.migratePersistentStore(back, to: directory.appendingPathComponent("graph.strata-binary"), type: .binary)
        }
        #expect(error?.code == .invalidArgument, "a store that holds objects is not migrated into")
        #expect(coordinator.persistentStores.first === back, "the failed migration left the store in place")
    }

    /// [BIN-4] A crash at every I/O operation of a save (before or after it), with the writes
    /// not synced lost, kept, or kept in part: the file then holds the old graph or the new
    /// one, whole; and the new one whenever the save returned.
    @Test(arguments: [FaultInjectingFileSystem.CrashPolicy.none, .all, .random(seed: 7), .random(seed: 99, tearing: .byte)])
    func aCrashAtAnyStepOfASaveLeavesTheOldFileOrTheNewOne(policy: FaultInjectingFileSystem.CrashPolicy) throws {
        PersistentStoreCoordinator.registerStoreClass(FaultInjectingBinaryStore.self, type: FaultInjectingBinaryStore.type)
        let path = "/db/store-\(UUID().uuidString).strata-binary"
        let file = URL(filePath: path)
        let base = FaultInjectingFileSystem()
        try base.createDirectory("/db")
        try base.syncDirectory("/")
        FaultInjectingBinaryStore.fileSystems.withLock { $0[path] = base }
        defer { FaultInjectingBinaryStore.fileSystems.withLock { $0[path] = nil } }
        do {
            let context = ManagedObjectContext(persistentStoreCoordinator: try coordinator(file, type: FaultInjectingBinaryStore.type))
            try populate(context)
            try context.save()
        }
        let old = try describe(try coordinator(file, type: FaultInjectingBinaryStore.type))
        var sawOld = false, sawNew = false
        for operation in 1...8 {
            for timing in [FaultInjectingFileSystem.OperationTiming.before, .after] {
                let fs = base.copy()
                FaultInjectingBinaryStore.fileSystems.withLock { $0[path] = fs }
                let coordinator = try coordinator(file, type: FaultInjectingBinaryStore.type)
                let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
                let tag = try context.insertNewObject(forEntityName: "Tag")
                try tag.setValue("new", forKey: "name")
                fs.crash(atOperation: operation, timing: timing)
                let saved = (try? context.save()) != nil
                fs.crash(keeping: policy)
                let after = try describe(try self.coordinator(file, type: FaultInjectingBinaryStore.type))
                let isNew = after.count == old.count + 1 && after.contains { $0.hasPrefix("Tag") && $0.contains("name=\"new\"") }
                #expect(after == old || isNew, "operation \(operation) \(timing), \(policy): \(after)")
                if saved { #expect(isNew, "operation \(operation) \(timing), \(policy): the save returned, so its graph is there") }
                sawOld = sawOld || after == old
                sawNew = sawNew || isNew
            }
        }
        #expect(sawOld, "some crash came before the rename")
        #expect(sawNew, "the save completed within the operations tried")
    }
}

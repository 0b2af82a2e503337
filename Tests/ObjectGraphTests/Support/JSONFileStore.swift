import Foundation
import ObjectGraph

/// The example of the DocC article "Writing an atomic store": every object in one JSON file,
/// `{"metadata": {…}, "objects": [{"entity": "Person", "reference": 1, "values": {…}}]}`, with
/// relationships written as the references of their destinations.
final class JSONFileStore: AtomicStore, @unchecked Sendable {
    // @unchecked: no state of its own; AtomicStore's is behind its lock.

    static let storeType = PersistentStore.StoreType("JSONFile")
    override var type: StoreType { Self.storeType }

    /// An object in the file.
    struct Object: Codable {
        var entity: String
        var reference: Int64
        var values: [String: Field]
    }

    /// Where an object is: its entity and reference.
    struct Reference: Codable, Hashable {
        var entity: String
        var reference: Int64
    }

    /// A value in the file: an attribute's, by kind, or a relationship's destinations.
    enum Field: Codable, Equatable {
        case null
        case integer(Int64)
        case double(Double)
        case decimal(String)
        case bool(Bool)
        case string(String)
        case date(Double)
        case data(Data)
        case transformable(Data)
        case uuid(UUID)
        case uri(URL)
        case object(Reference?)
        case objects([Reference])
    }

    /// The whole file.
    struct Contents: Codable {
        var metadata: [String: Field]
        var objects: [Object]
    }

    // MARK: Loading

    /// Reads the file into nodes: first one node per object, then their values (a
    /// relationship names another node). An empty file is a new store.
    override func load() throws {
        guard let url, let contents = try Self.contents(at: url) else { return }
        metadata = contents.metadata.mapValues(\.attributeValue)
        guard let model = persistentStoreCoordinator?.managedObjectModel else { return }
        var nodes: [Reference: AtomicStoreCacheNode] = [:]
        for object in contents.objects {
            let entity = try model.entity(named: object.entity)
            let id = objectID(for: entity, withReferenceObject: .int64(object.reference))
            nodes[Reference(entity: entity.rootEntity.name, reference: object.reference)] = AtomicStoreCacheNode(objectID: id)
        }
        func node(_ reference: Reference?) throws -> AtomicStoreCacheNode? {
            guard let reference else { return nil }
            let root = try model.entity(named: reference.entity).rootEntity.name
            return nodes[Reference(entity: root, reference: reference.reference)]
        }
        for object in contents.objects {
            guard let owner = try node(Reference(entity: object.entity, reference: object.reference)) else { continue }
            for (key, field) in object.values {
                switch field {
                case .object(let destination): owner.setValue(.toOne(try node(destination)), forKey: key)
                case .objects(let members): owner.setValue(.toMany(try members.compactMap(node)), forKey: key)
                default: owner.setValue(.attribute(field.attributeValue), forKey: key)
                }
            }
        }
        addCacheNodes(Set(nodes.values))
    }

    /// The file's contents, or `nil` for an empty (reservation) file.
    static func contents(at url: URL) throws -> Contents? {
        let bytes = try Data(contentsOf: url)
        return bytes.isEmpty ? nil : try JSONDecoder().decode(Contents.self, from: bytes)
    }

    // MARK: Saving

    /// Writes every node and the metadata to a new file, moved over the old one.
    override func save() throws {
        guard let url else { return }
        var objects: [Object] = []
        for node in cacheNodes() {
            var values: [String: Field] = [:]
            for (key, value) in node.propertyCache ?? [:] {
                switch value {
                case .attribute(let attribute): values[key] = Field(attribute)
                case .toOne(let destination): values[key] = .object(try destination.map(reference))
                case .toMany(let members): values[key] = .objects(try members.map(reference))
                }
            }
            objects.append(Object(entity: node.objectID.entity.name, reference: try reference(node).reference, values: values))
        }
        objects.sort { ($0.entity, $0.reference) < ($1.entity, $1.reference) }
        try Self.write(Contents(metadata: metadata.mapValues(Field.init), objects: objects), to: url)
    }

    /// Where a node's object is, from its ID's reference object.
    private func reference(_ node: AtomicStoreCacheNode) throws -> Reference {
        guard case .int64(let reference) = try referenceObject(for: node.objectID) else {
            throw ObjectGraphError(.invalidArgument, "\(node.objectID) has no integer reference.")
        }
        return Reference(entity: node.objectID.entity.name, reference: reference)
    }

    static func write(_ contents: Contents, to url: URL) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        try encoder.encode(contents).write(to: url, options: .atomic)
    }

    // MARK: Metadata without opening

    override class func metadataForPersistentStore(at url: URL) throws -> [String: AttributeValue] {
        try contents(at: url)?.metadata.mapValues(\.attributeValue) ?? [:]
    }

    override class func setMetadata(_ metadata: [String: AttributeValue], forPersistentStoreAt url: URL) throws {
        var contents = try Self.contents(at: url) ?? Contents(metadata: [:], objects: [])
        contents.metadata = metadata.mapValues(Field.init)
        try write(contents, to: url)
    }
}

extension JSONFileStore.Field {
    /// The field of an attribute value.
    init(_ value: AttributeValue) {
        switch value {
        case .null: self = .null
        case .int16(let v): self = .integer(Int64(v))
        case .int32(let v): self = .integer(Int64(v))
        case .int64(let v): self = .integer(v)
        case .double(let v): self = .double(v)
        case .float(let v): self = .double(Double(v))
        case .decimal(let v): self = .decimal("\(v)")
        case .bool(let v): self = .bool(v)
        case .string(let v): self = .string(v)
        case .date(let v): self = .date(v.timeIntervalSinceReferenceDate)
        case .data(let v): self = .data(v)
        case .transformable(let v): self = .transformable(v)
        case .uuid(let v): self = .uuid(v)
        case .uri(let v): self = .uri(v)
        }
    }

    /// The attribute value of a field (the store converts it to the attribute's type).
    var attributeValue: AttributeValue {
        switch self {
        case .null, .object, .objects: return .null
        case .integer(let v): return .int64(v)
        case .double(let v): return .double(v)
        case .decimal(let v): return Decimal(string: v).map(AttributeValue.decimal) ?? .null
        case .bool(let v): return .bool(v)
        case .string(let v): return .string(v)
        case .date(let v): return .date(Date(timeIntervalSinceReferenceDate: v))
        case .data(let v): return .data(v)
        case .transformable(let v): return .transformable(v)
        case .uuid(let v): return .uuid(v)
        case .uri(let v): return .uri(v)
        }
    }
}

/// The JSON atomic store of the documentation's example, in a fresh file: the conformance
/// suite's atomic store.
struct JSONFileFixture: StoreFixture {
    var description: String { "JSONFileStore (atomic)" }
    var supportsReopen: Bool { true }

    static let registered: Bool = {
        PersistentStoreCoordinator.registerStoreClass(JSONFileStore.self, type: JSONFileStore.storeType)
        return true
    }()

    static let root: URL = {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("objectgraph-json-\(ProcessInfo.processInfo.processIdentifier)")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }()

    func makeStack(model: ManagedObjectModel) throws -> TestStack {
        _ = Self.registered
        let url = Self.root.appendingPathComponent(UUID().uuidString + ".json")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let store = try coordinator.addPersistentStore(type: JSONFileStore.storeType, configuration: nil, at: url, options: [:])
        return TestStack(coordinator: coordinator, store: store, url: url)
    }

    func reopen(_ stack: TestStack) throws -> TestStack {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: stack.coordinator.managedObjectModel)
        let store = try coordinator.addPersistentStore(type: JSONFileStore.storeType, configuration: nil, at: stack.url, options: [:])
        return TestStack(coordinator: coordinator, store: store, url: stack.url)
    }
}

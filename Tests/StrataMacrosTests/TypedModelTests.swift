import Foundation
import Strata
import StrataMacros
import Testing

// A library declared once, as typed entities (issue 18).

@Entity(uniqueness: [["name", "born"]]) final class Writer: ManagedObject {
    @Attribute(.indexed) var name: String = ""
    var born: Date?
    @Relationship(inverse: \Novel.writer, deleteRule: .cascade) var novels: Set<Novel>
    /// A plain Swift property: not in the model.
    @Transient var scratch = 0
    /// Computed: not in the model.
    var shout: String { name.uppercased() }
}

@Entity class Novel: ManagedObject {
    @Attribute(.unique) var title: String = ""
    var pages: Int32?
    var rating: Double = 2.5
    @Attribute(originalName: "read") var isRead: Bool = false
    var writer: Writer?
    var shelves: [Shelf]
    @Attribute(.transient) var note: String?
}

/// A subentity of a subentity-less root: its own properties, and Novel's.
@Entity final class Epic: Novel {
    var cantos: Int16 = 12
}

@Entity(originalName: "Case") final class Shelf: ManagedObject {
    var label: String?
    @Relationship(inverse: \Novel.shelves) var novels: Set<Novel>
}

/// A uniqueness constraint naming no attribute: the model refuses it.
@Entity(uniqueness: [["title", "nope"]]) final class Misnamed: ManagedObject {
    var title: String = ""
}

/// Every attribute type, optional and not.
@Entity final class Sample: ManagedObject {
    var i16: Int16 = 1
    var i32: Int32 = 2
    var i64: Int64 = 3
    var int: Int = 4
    var double: Double = 5.5
    var float: Float = 6.5
    var decimal: Decimal = 7
    var bool: Bool = true
    var string: String = "s"
    var date: Date = Date(timeIntervalSince1970: 8)
    var data: Data = Data([9])
    var uuid: UUID = UUID(uuidString: "00000000-0000-0000-0000-00000000000A")!
    var url: URL = URL(string: "https://example.com/b")!
    var i16s: Int16?
    var i32s: Int32?
    var i64s: Int64?
    var ints: Int?
    var doubles: Double?
    var floats: Float?
    var decimals: Decimal?
    var bools: Bool?
    var strings: String?
    var dates: Date?
    var datas: Data?
    var uuids: UUID?
    var urls: URL?
}

@Suite struct TypedModelTests {
    static func typedModel() throws -> ManagedObjectModel {
        try ManagedObjectModel(types: [Writer.self, Novel.self, Epic.self, Shelf.self, Sample.self])
    }

    /// The same model, by name.
    static func namedModel() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Writer", managedObjectClass: Writer.self, properties: [
                .attribute("name", .string, optional: false, defaultValue: "", indexed: true),
                .attribute("born", .date),
                .toMany("novels", "Novel", inverse: "writer", deleteRule: .cascade),
            ], uniquenessConstraints: [["name", "born"]]),
            EntityDescription(name: "Novel", managedObjectClass: Novel.self, properties: [
                .attribute("title", .string, optional: false, defaultValue: ""),
                .attribute("pages", .integer32),
                .attribute("rating", .double, optional: false, defaultValue: 2.5),
                .attribute("isRead", .boolean, optional: false, defaultValue: false, renamingIdentifier: "read"),
                .toOne("writer", "Writer", inverse: "novels"),
                .toMany("shelves", "Shelf", inverse: "novels", ordered: true),
                .attribute("note", .string, transient: true),
            ], uniquenessConstraints: [["title"]]),
            EntityDescription(name: "Epic", superentity: "Novel", managedObjectClass: Epic.self, properties: [
                .attribute("cantos", .integer16, optional: false, defaultValue: 12),
            ]),
            EntityDescription(name: "Shelf", managedObjectClass: Shelf.self, properties: [
                .attribute("label", .string),
                .toMany("novels", "Novel", inverse: "shelves"),
            ], renamingIdentifier: "Case"),
            EntityDescription(name: "Sample", managedObjectClass: Sample.self, properties: [
                .attribute("i16", .integer16, optional: false, defaultValue: 1),
                .attribute("i32", .integer32, optional: false, defaultValue: 2),
                .attribute("i64", .integer64, optional: false, defaultValue: 3),
                .attribute("int", .integer64, optional: false, defaultValue: 4),
                .attribute("double", .double, optional: false, defaultValue: 5.5),
                .attribute("float", .float, optional: false, defaultValue: .float(6.5)),
                .attribute("decimal", .decimal, optional: false, defaultValue: .decimal(7)),
                .attribute("bool", .boolean, optional: false, defaultValue: true),
                .attribute("string", .string, optional: false, defaultValue: "s"),
                .attribute("date", .date, optional: false, defaultValue: .date(Date(timeIntervalSince1970: 8))),
                .attribute("data", .binaryData, optional: false, defaultValue: .data(Data([9]))),
                .attribute("uuid", .uuid, optional: false, defaultValue: .uuid(UUID(uuidString: "00000000-0000-0000-0000-00000000000A")!)),
                .attribute("url", .uri, optional: false, defaultValue: .uri(URL(string: "https://example.com/b")!)),
                .attribute("i16s", .integer16), .attribute("i32s", .integer32), .attribute("i64s", .integer64),
                .attribute("ints", .integer64), .attribute("doubles", .double), .attribute("floats", .float),
                .attribute("decimals", .decimal), .attribute("bools", .boolean), .attribute("strings", .string),
                .attribute("dates", .date), .attribute("datas", .binaryData), .attribute("uuids", .uuid), .attribute("urls", .uri),
            ]),
        ])
    }

    /// What describes a property, for comparing models property by property.
    static func summary(_ model: ManagedObjectModel) -> [String] {
        model.entities.sorted { $0.name < $1.name }.flatMap { entity in
            ["\(entity.name) class=\(entity.managedObjectClass) constraints=\(entity.uniquenessConstraints) renamed=\(entity.renamingIdentifier ?? "-") hash=\(entity.versionHash.map { String($0, radix: 16) }.joined())"]
                + entity.properties.map { property in
                    var line = "\(entity.name).\(property.name) optional=\(property.isOptional) transient=\(property.isTransient) indexed=\(property.isIndexed) renamed=\(property.renamingIdentifier ?? "-")"
                    if let attribute = property as? AttributeDescription {
                        line += " \(attribute.attributeType) default=\(attribute.defaultValue)"
                    } else if let relationship = property as? RelationshipDescription {
                        line += " → \(relationship.destinationEntityName) inverse=\(relationship.inverseName ?? "-") toMany=\(relationship.isToMany) ordered=\(relationship.isOrdered) rule=\(relationship.deleteRule)"
                    }
                    return line
                }
        }
    }

    // Every attribute type, relationship shape and annotation declared with the typed API
    // builds the model the string API builds.
    @Test func theTypedModelIsTheNamedModel() throws {
        let typed = try Self.typedModel(), named = try Self.namedModel()
        #expect(Self.summary(typed) == Self.summary(named))
        #expect(typed.differences(fromStoreModel: named).isEmpty)
    }

    // Keys are the properties' names: reads and writes go to the object's values; defaults
    // come from the declarations; relationships and their inverses hold.
    @Test func typedPropertiesReadAndWriteTheObject() throws {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.typedModel())
        try coordinator.addPersistentStore(type: .inMemory)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let writer = try context.insert(Writer.self)
        let novel = try context.insert(Novel.self)
        #expect(novel.title == "" && novel.rating == 2.5 && novel.isRead == false && novel.pages == nil)
        writer.name = "Lem"
        writer.scratch = 5
        novel.title = "Solaris"
        novel.pages = 204
        novel.writer = writer
        #expect(try novel.value(forKey: "title") == .string("Solaris"))
        #expect(try novel.value(forKey: "pages") == .int32(204))
        #expect(writer.novels == [novel], "the inverse follows")
        let shelf = try context.insert(Shelf.self)
        novel.shelves = [shelf]
        #expect(shelf.novels == [novel])
        try context.save()
        #expect(writer.scratch == 5)
        let sample = try context.insert(Sample.self)
        #expect(sample.i16 == 1 && sample.url == URL(string: "https://example.com/b")! && sample.decimal == 7 && sample.strings == nil)
        sample.strings = "x"
        sample.float = 1.25
        #expect(try sample.value(forKey: "float") == .float(1.25))
        #expect(sample.strings == "x")
    }

    // On a StrataStore: typed objects saved, fetched with #Predicate through the indexes,
    // read back after reopening.
    @Test func typedObjectsRoundTripThroughAStrataStore() throws {
        StrataStore.register()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("strata-typed-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let model = try Self.typedModel()
        do {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            let store = try coordinator.addPersistentStore(type: .strata, at: directory)
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            for (name, titles) in [("Lem", ["Solaris", "Eden"]), ("Le Guin", ["Always Coming Home"])] {
                let writer = try context.insert(Writer.self)
                writer.name = name
                for title in titles {
                    let novel = try context.insert(Novel.self)
                    novel.title = title
                    novel.pages = Int32(title.count * 10)
                    novel.writer = writer
                }
            }
            try context.save()
            try coordinator.remove(store)
        }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .strata, at: directory)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let lem = try context.fetch(Novel.self, where: #Predicate { $0.writer?.name == "Lem" }, sortBy: [SortDescriptor(\.title)])
        #expect(lem.map(\.title) == ["Eden", "Solaris"])
        let long = try context.fetch(Novel.self, where: #Predicate { ($0.pages ?? 0) > 100 })
        #expect(long.map(\.title) == ["Always Coming Home"])
        let writers = try context.fetch(Writer.self, where: #Predicate { $0.novels.count >= 2 })
        #expect(writers.map(\.name) == ["Lem"])
        #expect(try context.count(Writer.self, where: #Predicate { $0.name == "Le Guin" }) == 1)
        // A second novel of one title breaks the declared uniqueness constraint.
        let duplicate = try context.insert(Novel.self)
        duplicate.title = "Eden"
        let error = try #require(throws: ObjectGraphError.self) { try context.save() }
        #expect(error.code == .constraintConflict)
    }

    // A subentity's objects are the superentity's too; typed predicates reach inherited
    // properties.
    @Test func subentitiesInheritTheirSuperentitysProperties() throws {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.typedModel())
        try coordinator.addPersistentStore(type: .inMemory)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let epic = try context.insert(Epic.self)
        epic.title = "Odyssey"
        let novel = try context.insert(Novel.self)
        novel.title = "Eden"
        #expect(epic.cantos == 12)
        try context.save()
        #expect(try context.fetch(Novel.self, sortBy: [SortDescriptor(\.title)]).map(\.title) == ["Eden", "Odyssey"])
        #expect(try context.fetch(Epic.self, where: #Predicate { $0.title == "Odyssey" && $0.cantos > 10 }).count == 1)
        #expect(Epic.fetchKey(for: \Epic.title) == "title" && Epic.fetchKey(for: \Epic.cantos) == "cantos")
        #expect(Novel.fetchKey(for: \Novel.title) == "title" && Epic.entityName == "Epic" && Novel.entityName == "Novel")
    }

    // Constraint names are checked when the model is built.
    @Test func aConstraintOnAMissingAttributeIsRefused() throws {
        let error = try #require(throws: ObjectGraphError.self) { try ManagedObjectModel(types: [Misnamed.self]) }
        #expect(error.code == .invalidModel)
        #expect(error.message.contains("nope"), "\(error.message)")
    }

    // The fetch names are the properties' names: computed and @Transient properties have none.
    @Test func fetchKeysNameStoredPropertiesOnly() {
        #expect(Novel.fetchKey(for: \Novel.title) == "title")
        #expect(Writer.fetchKey(for: \Writer.novels) == "novels")
        #expect(Writer.fetchKey(for: \Writer.scratch) == nil)
        #expect(Writer.fetchKey(for: \Writer.shout) == nil)
        #expect(Writer.entityName == "Writer" && Shelf.entityOriginalName == "Case")
    }
}

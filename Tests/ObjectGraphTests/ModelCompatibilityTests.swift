import Foundation
import ObjectGraph
import Testing

/// Issue 13 at the coordinator: which model differences refuse a store (what version hashes
/// cover), and how the refusal names them.
@Suite struct ModelCompatibilityTests {
    /// Library 1—* Book (ordered), Novel a subentity of Book; each flag changes one thing.
    static func model(
        pagesType: AttributeType = .integer32, titleOptional: Bool = false, titleIndexed: Bool = false,
        subtitle: Bool = false, booksOrdered: Bool = true, deleteRule: DeleteRule = .cascade,
        defaultPages: AttributeValue = .null, transientNote: Bool = false, extraEntity: Bool = false
    ) throws -> ManagedObjectModel {
        var book: [PropertyDescription] = [
            .attribute("title", .string, optional: titleOptional, indexed: titleIndexed),
            .attribute("pages", pagesType, defaultValue: defaultPages),
            .toOne("library", "Library", inverse: "books"),
        ]
        if subtitle { book.append(.attribute("subtitle", .string)) }
        if transientNote { book.append(.attribute("note", .string, transient: true)) }
        var entities = [
            EntityDescription(name: "Library", properties: [
                .attribute("name", .string),
                .toMany("books", "Book", inverse: "library", ordered: booksOrdered, deleteRule: deleteRule),
            ]),
            EntityDescription(name: "Book", properties: book),
            EntityDescription(name: "Novel", superentity: "Book", properties: [.attribute("genre", .string)]),
        ]
        if extraEntity { entities.append(EntityDescription(name: "Shelf")) }
        return try ManagedObjectModel(entities: entities)
    }

    @Test func differencesNameEachChangedPropertyOnceAndHow() throws {
        let stored = try Self.model()
        #expect(try Self.model().differences(fromStoreModel: stored).isEmpty)
        func differences(_ model: ManagedObjectModel) -> [String] { model.differences(fromStoreModel: stored).map(\.description) }
        #expect(try differences(Self.model(pagesType: .integer64)) == [
            "Book.pages: integer32 in the store, integer64 in the model", "entity Novel inherits the changes of Book",
        ])
        #expect(try differences(Self.model(titleOptional: true)) == [
            "Book.title: required in the store, optional in the model", "entity Novel inherits the changes of Book",
        ])
        #expect(try differences(Self.model(subtitle: true)) == [
            "Book.subtitle: attribute (string, optional) is in the model but not in the store", "entity Novel inherits the changes of Book",
        ])
        #expect(try differences(Self.model(booksOrdered: false)) == ["Library.books: ordered in the store, unordered in the model"])
        #expect(try differences(Self.model(extraEntity: true)) == ["entity Shelf is in the model but not in the store"])
        #expect(try Self.model().differences(fromStoreModel: Self.model(extraEntity: true)).map(\.description)
            == ["entity Shelf is in the store but not in the model"])
        let both = try Self.model(pagesType: .string, subtitle: true).differences(fromStoreModel: stored)
        #expect(both.map(\.propertyName) == ["pages", "subtitle", nil])
        #expect(both.map(\.entityName) == ["Book", "Book", "Novel"])
        // Not covered by version hashes: indexing, defaults, delete rules, transient properties.
        for allowed in [
            try Self.model(titleIndexed: true), try Self.model(deleteRule: .nullify), try Self.model(defaultPages: .int32(100)),
            try Self.model(transientNote: true),
        ] {
            #expect(allowed.differences(fromStoreModel: stored).isEmpty)
        }
    }

    @Test func metadataWithAnEntityTheModelLacksOrMissingOneIsIncompatible() throws {
        let model = try Self.model()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let metadata = try coordinator.addPersistentStore(type: .inMemory).metadata
        #expect(model.isConfiguration(nil, compatibleWithStoreMetadata: metadata))
        var extra = metadata
        extra[PersistentStore.modelVersionHashKeyPrefix + "Shelf"] = .data(Data([1]))
        #expect(!model.isConfiguration(nil, compatibleWithStoreMetadata: extra))
        #expect(model.differences(ofConfiguration: nil, fromStoreMetadata: extra).map(\.entityName) == ["Shelf"])
        var missing = metadata
        missing[PersistentStore.modelVersionHashKeyPrefix + "Novel"] = nil
        #expect(model.differences(ofConfiguration: nil, fromStoreMetadata: missing).map(\.description)
            == ["entity Novel is in the model but not in the store"])
    }

    // An unrelated model was adopted by a store whose metadata named other entities; it is
    // refused, naming them, and the store keeps its metadata.
    @Test func anUnrelatedModelIsRefusedNamingEveryEntity() throws {
        let url = try #require(URL(string: "memory://compatibility/\(UUID().uuidString)"))
        let first = PersistentStoreCoordinator(managedObjectModel: try Self.model())
        let original = try first.addPersistentStore(type: .inMemory, at: url).metadata
        let unrelated = try ManagedObjectModel(entities: [EntityDescription(name: "Invoice", properties: [.attribute("number", .integer64)])])
        let second = PersistentStoreCoordinator(managedObjectModel: unrelated)
        do {
            try second.addPersistentStore(type: .inMemory, at: url)
            Issue.record("an unrelated model was adopted")
        } catch let error as ObjectGraphError {
            #expect(error.code == .incompatibleModel)
            #expect(error.detailedErrors.map(\.entityName) == ["Book", "Invoice", "Library", "Novel"])
            #expect(error.message.contains("entity Invoice is in the model but not in the store"), "\(error.message)")
        }
        #expect(second.persistentStores.isEmpty)
        let third = PersistentStoreCoordinator(managedObjectModel: try Self.model())
        #expect(try third.addPersistentStore(type: .inMemory, at: url).metadata == original, "the store still has its own model")
    }

    // A store added with one configuration records every entity's hash, so the same model
    // opens it with another configuration.
    @Test func aStoreOpensWithAnotherConfigurationOfTheSameModel() throws {
        let url = try #require(URL(string: "memory://compatibility/\(UUID().uuidString)"))
        func model() throws -> ManagedObjectModel {
            try ManagedObjectModel(
                entities: [EntityDescription(name: "A"), EntityDescription(name: "B")], configurations: ["Left": ["A"]])
        }
        try PersistentStoreCoordinator(managedObjectModel: model()).addPersistentStore(type: .inMemory, configuration: "Left", at: url)
        try PersistentStoreCoordinator(managedObjectModel: model()).addPersistentStore(type: .inMemory, at: url)
    }

    // Only the configuration's entities are compared: a change to an entity of another
    // configuration does not concern the store (Core Data's isConfiguration(withName:
    // compatibleWithStoreMetadata:)); with every entity (no configuration) it does.
    @Test func aChangeOutsideTheConfigurationDoesNotRefuseTheStore() throws {
        let url = try #require(URL(string: "memory://compatibility/\(UUID().uuidString)"))
        func model(bHasName: Bool) throws -> ManagedObjectModel {
            try ManagedObjectModel(
                entities: [
                    EntityDescription(name: "A", properties: [.attribute("title", .string)]),
                    EntityDescription(name: "B", properties: bHasName ? [.attribute("name", .string)] : []),
                ],
                configurations: ["Left": ["A"], "Right": ["B"]])
        }
        try PersistentStoreCoordinator(managedObjectModel: model(bHasName: false)).addPersistentStore(type: .inMemory, configuration: "Left", at: url)
        try PersistentStoreCoordinator(managedObjectModel: model(bHasName: true)).addPersistentStore(type: .inMemory, configuration: "Left", at: url)
        do {
            try PersistentStoreCoordinator(managedObjectModel: model(bHasName: false)).addPersistentStore(type: .inMemory, at: url)
            Issue.record("B differs from the store's hash once every entity is compared")
        } catch let error as ObjectGraphError {
            #expect(error.code == .incompatibleModel && error.detailedErrors.map(\.entityName) == ["B"], "\(error)")
        }
    }
}

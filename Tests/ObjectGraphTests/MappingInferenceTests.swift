import Foundation
@testable import ObjectGraph
import Testing

/// Issue 17: the mapping Core Data infers for a lightweight migration
/// (`MappingModel.inferred(from:to:)`), change by change, and the error naming every change
/// it cannot infer.
@Suite struct MappingInferenceTests {
    /// Version 1 of a small library model: Author 1—* Book, Novel a subentity of Book.
    static func version1(
        book: [PropertyDescription] = [], author: [PropertyDescription] = [], extra: [EntityDescription] = [],
        bookName: String = "Book", bookIdentifier: String? = nil, novelSuper: String? = "Book"
    ) throws -> ManagedObjectModel {
        let base: [PropertyDescription] = [
            .attribute("title", .string, optional: false),
            .attribute("pages", .integer32),
            .toOne("author", "Author", inverse: "books"),
        ]
        return try ManagedObjectModel(entities: [
            EntityDescription(name: "Author", properties: [
                .attribute("name", .string),
                .toMany("books", bookName, inverse: "author"),
            ] + author),
            EntityDescription(name: bookName, properties: base + book, renamingIdentifier: bookIdentifier),
            EntityDescription(name: "Novel", superentity: novelSuper, properties: [.attribute("genre", .string)]),
        ] + extra)
    }

    /// The entity mappings by destination name (or source name for a removed entity).
    static func mappings(_ mapping: MappingModel) -> [String: EntityMapping] {
        Dictionary(uniqueKeysWithValues: mapping.entityMappings.map { ($0.destinationEntityName ?? $0.sourceEntityName ?? "", $0) })
    }

    @Test func theSameModelInfersACopyOfEveryEntity() throws {
        let mapping = try MappingModel.inferred(from: try Self.version1(), to: try Self.version1())
        #expect(mapping.isIdentity)
        #expect(Set(mapping.entityMappings.map(\.name)) == ["Author", "Book", "Novel"])
        let book = try #require(Self.mappings(mapping)["Book"])
        #expect(book.attributeMappings.map(\.description).sorted() == ["pages <- $source.pages", "title <- $source.title"])
        #expect(book.relationshipMappings.map(\.description) == ["author <- $source.author"])
    }

    @Test func anAddedOptionalAttributeOrOneWithADefaultTakesItsDefault() throws {
        let to = try Self.version1(book: [.attribute("isbn", .string), .attribute("rating", .integer16, optional: false, defaultValue: 3)])
        let mapping = try MappingModel.inferred(from: try Self.version1(), to: to)
        let book = try #require(Self.mappings(mapping)["Book"])
        #expect(book.mappingType == .transform)
        #expect(book.propertyMapping(named: "isbn")?.value == .defaultValue)
        #expect(book.propertyMapping(named: "rating")?.value == .defaultValue)
        #expect(book.propertyMapping(named: "title")?.value == .source("title"))
        // Novel inherits the new attributes: its stored form changed too.
        #expect(Self.mappings(mapping)["Novel"]?.mappingType == .transform)
        #expect(Self.mappings(mapping)["Author"]?.mappingType == .copy)
    }

    @Test func aRemovedAttributeIsNotMappedAndARenamedOneComesFromItsOldName() throws {
        let from = try Self.version1(book: [.attribute("subtitle", .string), .attribute("blurb", .string)])
        let to = try Self.version1(book: [.attribute("summary", .string, renamingIdentifier: "blurb")])
        let book = try #require(Self.mappings(try MappingModel.inferred(from: from, to: to))["Book"])
        #expect(book.propertyMapping(named: "summary")?.value == .source("blurb"))
        #expect(book.propertyMapping(named: "subtitle") == nil)
        #expect(book.attributeMappings.count == 3)
    }

    @Test func aRenamedEntityIsMatchedByItsRenamingIdentifier() throws {
        let from = try Self.version1()
        let to = try Self.version1(bookName: "Volume", bookIdentifier: "Book", novelSuper: "Volume")
        let mappings = Self.mappings(try MappingModel.inferred(from: from, to: to))
        let volume = try #require(mappings["Volume"])
        #expect(volume.sourceEntityName == "Book")
        #expect(volume.mappingType == .transform)
        #expect(volume.name == "BookToVolume")
        #expect(mappings["Book"] == nil, "no entity is removed")
    }

    @Test func addedAndRemovedEntitiesAreAddAndRemoveMappings() throws {
        let from = try Self.version1(extra: [EntityDescription(name: "Shelf", properties: [.attribute("label", .string)])])
        let to = try Self.version1(extra: [EntityDescription(name: "Award", properties: [.attribute("year", .integer16)])])
        let mappings = Self.mappings(try MappingModel.inferred(from: from, to: to))
        #expect(mappings["Award"]?.mappingType == .add)
        #expect(mappings["Award"]?.sourceEntityName == nil)
        #expect(mappings["Shelf"]?.mappingType == .remove)
        #expect(mappings["Shelf"]?.destinationEntityName == nil)
    }

    @Test func optionalToRequiredWithADefaultAndAChangedDefaultAreInferred() throws {
        let from = try Self.version1(book: [.attribute("rating", .integer16)])
        let to = try Self.version1(book: [.attribute("rating", .integer16, optional: false, defaultValue: 1)])
        let book = try #require(Self.mappings(try MappingModel.inferred(from: from, to: to))["Book"])
        #expect(book.propertyMapping(named: "rating")?.value == .source("rating"))
        // A default changes no stored form: the same entity copies.
        let changedDefault = try Self.version1(book: [.attribute("rating", .integer16, defaultValue: 5)])
        #expect(try MappingModel.inferred(from: from, to: changedDefault).isIdentity)
    }

    @Test func toOneToToManyAndOrderingChangesAreInferred() throws {
        let from = try Self.version1(author: [.toOne("favourite", "Book")])
        let to = try Self.version1(author: [.toMany("favourite", "Book", ordered: true)])
        let author = try #require(Self.mappings(try MappingModel.inferred(from: from, to: to))["Author"])
        #expect(author.propertyMapping(named: "favourite")?.value == .source("favourite"))
    }

    @Test func aNewSuperentityLevelIsInferred() throws {
        let from = try Self.version1(novelSuper: "Book")
        let to = try ManagedObjectModel(entities: [
            EntityDescription(name: "Author", properties: [.attribute("name", .string), .toMany("books", "Book", inverse: "author")]),
            EntityDescription(name: "Book", properties: [
                .attribute("title", .string, optional: false), .attribute("pages", .integer32), .toOne("author", "Author", inverse: "books"),
            ]),
            EntityDescription(name: "Fiction", superentity: "Book", properties: [.attribute("era", .string)]),
            EntityDescription(name: "Novel", superentity: "Fiction", properties: [.attribute("genre", .string)]),
        ])
        let mappings = Self.mappings(try MappingModel.inferred(from: from, to: to))
        #expect(mappings["Fiction"]?.mappingType == .add)
        #expect(mappings["Novel"]?.propertyMapping(named: "era")?.value == .defaultValue)
        #expect(mappings["Novel"]?.propertyMapping(named: "genre")?.value == .source("genre"))
    }

    @Test func transientPropertiesAreNotMapped() throws {
        let to = try Self.version1(book: [.attribute("draft", .string, transient: true)])
        let mapping = try MappingModel.inferred(from: try Self.version1(), to: to)
        #expect(Self.mappings(mapping)["Book"]?.propertyMapping(named: "draft") == nil)
        #expect(mapping.isIdentity, "a transient property changes no stored form")
    }

    /// Changes lightweight migration cannot infer, each with the words its error must say.
    static let refusals: [(label: String, from: [PropertyDescription], to: [PropertyDescription], words: [String])] = [
        ("a type change", [.attribute("year", .integer16)], [.attribute("year", .string)], ["Book.year", "integer16", "string"]),
        ("a required attribute without default", [], [.attribute("isbn", .string, optional: false)], ["Book.isbn", "required", "default"]),
        ("required without default", [.attribute("isbn", .string)], [.attribute("isbn", .string, optional: false)], ["Book.isbn", "required"]),
        ("attribute to relationship", [.attribute("editor", .string)], [.toOne("editor", "Author")], ["Book.editor", "attribute", "relationship"]),
        ("a required relationship added", [], [.toOne("editor", "Author", optional: false)], ["Book.editor", "required"]),
        ("to-many to to-one", [.toMany("editors", "Author")], [.toOne("editors", "Author")], ["Book.editors", "to-one"]),
        ("another destination", [.toOne("editor", "Author")], [.toOne("editor", "Novel")], ["Book.editor", "destination", "Author", "Novel"]),
    ]

    @Test(arguments: 0..<7)
    func aChangeLightweightMigrationCannotInferIsAnErrorNamingEntityAndProperty(index: Int) throws {
        let (label, from, to, words) = Self.refusals[index]
        do {
            _ = try MappingModel.inferred(from: try Self.version1(book: from), to: try Self.version1(book: to))
            Issue.record("\(label) was inferred")
        } catch let error as ObjectGraphError {
            #expect(error.code == .inferredMappingFailed)
            #expect(error.code.cocoaErrorCode == 134190)
            for word in words { #expect(error.message.contains(word), "\(label): \(error.message)") }
            // Novel inherits the change, but the error names the declaring entity once.
            #expect(error.detailedErrors.contains { $0.entityName == "Book" && $0.key != nil }, "\(label): \(error.detailedErrors)")
        }
    }

    @Test func everyChangeThatCannotBeInferredIsListed() throws {
        let from = try Self.version1(book: [.attribute("year", .integer16), .attribute("isbn", .string)])
        let to = try Self.version1(book: [.attribute("year", .double), .attribute("isbn", .string, optional: false)])
        let error = try #require(throws: ObjectGraphError.self) { try MappingModel.inferred(from: from, to: to) }
        let named = Set(error.detailedErrors.map { "\($0.entityName ?? "").\($0.key ?? "")" })
        #expect(named.isSuperset(of: ["Book.year", "Book.isbn"]), "\(named)")
    }

    @Test func anEntityMadeAbstractIsRefused() throws {
        let from = try Self.version1()
        let to = try ManagedObjectModel(entities: [
            EntityDescription(name: "Author", properties: [.attribute("name", .string), .toMany("books", "Book", inverse: "author")]),
            EntityDescription(name: "Book", isAbstract: true, properties: [
                .attribute("title", .string, optional: false), .attribute("pages", .integer32), .toOne("author", "Author", inverse: "books"),
            ]),
            EntityDescription(name: "Novel", superentity: "Book", properties: [.attribute("genre", .string)]),
        ])
        let error = try #require(throws: ObjectGraphError.self) { try MappingModel.inferred(from: from, to: to) }
        #expect(error.message.contains("abstract"))
        #expect(error.entityName == "Book")
    }
}

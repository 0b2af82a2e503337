import Foundation
import ObjectGraph
import Testing

/// Version hashes as Core Data means them (NSEntityDescription/NSPropertyDescription
/// `versionHash`, `versionHashModifier`, `renamingIdentifier`; NSManagedObjectModel
/// `versionIdentifiers`): what changes the stored form changes the hash, and nothing else.
@Suite struct VersionHashTests {
    private func model(
        noteModifier: String? = nil, noteRenaming: String? = nil, entityModifier: String? = nil, versions: Set<String> = []
    ) throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Book", properties: [
                .attribute("title", .string),
                .attribute("note", .string, versionHashModifier: noteModifier, renamingIdentifier: noteRenaming),
                .toOne("shelf", "Shelf", inverse: "books"),
            ], versionHashModifier: entityModifier),
            EntityDescription(name: "Shelf", properties: [.toMany("books", "Book", inverse: "shelf")]),
        ], versionIdentifiers: versions)
    }

    @Test func modifiersChangeHashesAndRenamingIdentifiersAndVersionNamesDoNot() throws {
        let base = try model()
        let book = try base.entity(named: "Book")
        let note = try #require(book.attributesByName["note"])
        #expect(note.versionHash.count == 32 && book.versionHash.count == 32)
        #expect(note.versionHash != book.attributesByName["title"]?.versionHash)

        let renamed = try model(noteRenaming: "remark", versions: ["v2"])
        #expect(try renamed.entity(named: "Book").versionHash == book.versionHash, "a renaming identifier is not in the hash")
        #expect(try renamed.entity(named: "Book").attributesByName["note"]?.versionHash == note.versionHash)
        #expect(try renamed.entity(named: "Book").attributesByName["note"]?.renamingIdentifier == "remark")
        #expect(renamed.versionIdentifiers == ["v2"] && renamed.entityVersionHashesByName == base.entityVersionHashesByName)

        let modified = try model(noteModifier: "now in Markdown")
        #expect(try modified.entity(named: "Book").attributesByName["note"]?.versionHash != note.versionHash)
        #expect(try modified.entity(named: "Book").versionHash != book.versionHash, "the entity's hash follows its property's")
        #expect(try modified.entity(named: "Shelf").versionHash == base.entity(named: "Shelf").versionHash)

        let entityModified = try model(entityModifier: "split")
        #expect(try entityModified.entity(named: "Book").versionHash != book.versionHash)
        #expect(try entityModified.entity(named: "Book").versionHashModifier == "split")
        #expect(!entityModified.isConfiguration(withName: nil, compatibleWithStoreMetadata: Self.metadata(of: base)))
        #expect(renamed.isConfiguration(withName: nil, compatibleWithStoreMetadata: Self.metadata(of: base)))
    }

    // Core Data: an entity's uniqueness constraints "form part of the entity's version hash".
    // Its own constraints enter it, names and order as declared; an entity without any keeps
    // the hash it had, and a subentity's hash does not follow its superentity's constraints.
    @Test func uniquenessConstraintsEnterTheVersionHash() throws {
        func hashes(_ constraints: [[String]]) throws -> [String: Data] {
            try ManagedObjectModel(entities: [
                EntityDescription(name: "Item", properties: [.attribute("code", .string), .attribute("shelf", .integer64)], uniquenessConstraints: constraints),
                EntityDescription(name: "Part", superentity: "Item", properties: [.attribute("size", .integer16)]),
                EntityDescription(name: "Bin", properties: [.attribute("label", .string)]),
            ]).entityVersionHashesByName
        }
        let none = try hashes([]), code = try hashes([["code"]]), pair = try hashes([["code", "shelf"]])
        #expect(none["Item"] != code["Item"] && code["Item"] != pair["Item"] && none["Item"] != pair["Item"])
        #expect(try hashes([["shelf", "code"]])["Item"] != pair["Item"], "a constraint's names in their order")
        #expect(try hashes([["code"], ["shelf"]])["Item"] != pair["Item"], "two constraints are not one of two names")
        #expect(try hashes([["code"]]) == code, "the same constraint, the same hash")
        #expect(none["Bin"] == code["Bin"] && none["Part"] == code["Part"])
        let unconstrained = try model()
        let constrained = try ManagedObjectModel(entities: [
            EntityDescription(name: "Book", properties: [
                .attribute("title", .string), .attribute("note", .string), .toOne("shelf", "Shelf", inverse: "books"),
            ], uniquenessConstraints: [["title"]]),
            EntityDescription(name: "Shelf", properties: [.toMany("books", "Book", inverse: "shelf")]),
        ])
        #expect(!constrained.isConfiguration(withName: nil, compatibleWithStoreMetadata: Self.metadata(of: unconstrained)))
        #expect(constrained.differences(fromStoreModel: unconstrained).map(\.description) == [
            "entity Book: uniqueness constraints none in the store, (title) in the model",
        ])
    }

    /// A store saved with one model refuses a model whose modifier marks a property changed.
    @Test(arguments: conflictDetectingStoreFixtures)
    func aStoreRefusesAModelWhoseModifierChanged(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try model())
        let context = stack.context()
        try context.insertNewObject(forEntityName: "Book").setValue("Dune", forKey: "title")
        try context.save()
        guard let url = stack.url else { return }
        for store in stack.coordinator.persistentStores { try stack.coordinator.remove(store) }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try model(noteModifier: "now in Markdown"))
        let error = #expect(throws: ObjectGraphError.self) { try coordinator.addPersistentStore(type: stack.store.type, at: url) }
        #expect(error?.code == .incompatibleModel)
        let same = PersistentStoreCoordinator(managedObjectModel: try model(noteRenaming: "remark"))
        try same.addPersistentStore(type: stack.store.type, at: url)
    }

    private static func metadata(of model: ManagedObjectModel) -> [String: AttributeValue] {
        var metadata: [String: AttributeValue] = [:]
        for (name, hash) in model.entityVersionHashesByName { metadata[PersistentStore.modelVersionHashKeyPrefix + name] = .data(hash) }
        return metadata
    }
}

import Foundation
import ObjectGraph
import Testing

@Suite("Model")
struct ModelTests {
    private func problems(_ build: () throws -> ManagedObjectModel) -> [String] {
        do {
            _ = try build()
            return []
        } catch let error as ObjectGraphError {
            #expect(error.code == .invalidModel)
            return error.detailedErrors.map(\.message)
        } catch {
            Issue.record("unexpected error \(error)")
            return []
        }
    }

    @Test func subentityInheritsSuperentityProperties() throws {
        let model = try TestModel.make()
        let manager = try model.entity(named: "Manager")
        let person = try model.entity(named: "Person")
        #expect(manager.superentity === person)
        #expect(person.subentities.map(\.name) == ["Manager"])
        #expect(manager.propertiesByName["name"] != nil)
        #expect(manager.attributesByName["level"]?.attributeType == .integer32)
        #expect(manager.relationshipsByName["department"]?.destinationEntity?.name == "Department")
        #expect(manager.isKind(of: person) && !person.isKind(of: manager))
    }

    @Test func relationshipsResolveDestinationAndInverse() throws {
        let model = try TestModel.make()
        let employees = try #require(model.entitiesByName["Department"]?.relationshipsByName["employees"])
        #expect(employees.isToMany)
        #expect(employees.destinationEntity?.name == "Person")
        #expect(employees.inverseRelationship?.name == "department")
        #expect(employees.inverseRelationship?.inverseRelationship === employees)
        #expect(employees.deleteRule == .cascade)
    }

    @Test func duplicateEntityNameIsRejected() {
        let found = problems {
            try ManagedObjectModel(entities: [EntityDescription(name: "A"), EntityDescription(name: "A")])
        }
        #expect(found.contains { $0.contains("Duplicate entity name \"A\"") })
    }

    @Test func duplicatePropertyNameIsRejected() {
        let found = problems {
            try ManagedObjectModel(entities: [
                EntityDescription(name: "A", properties: [.attribute("x", .string), .attribute("x", .integer64)])
            ])
        }
        #expect(found.contains { $0.contains("Duplicate property name \"x\"") })
    }

    @Test func propertyRedeclaredInSubentityIsRejected() {
        let found = problems {
            try ManagedObjectModel(entities: [
                EntityDescription(name: "A", properties: [.attribute("x", .string)]),
                EntityDescription(name: "B", superentity: "A", properties: [.attribute("x", .string)]),
            ])
        }
        #expect(found.contains { $0.contains("Duplicate property name \"x\" in entity B") })
    }

    @Test func unknownDestinationIsRejected() {
        let found = problems {
            try ManagedObjectModel(entities: [EntityDescription(name: "A", properties: [.toOne("b", "Nowhere")])])
        }
        #expect(found.contains { $0.contains("unknown destination entity \"Nowhere\"") })
    }

    @Test func missingInverseTargetIsRejected() {
        let found = problems {
            try ManagedObjectModel(entities: [
                EntityDescription(name: "A", properties: [.toOne("b", "B", inverse: "missing")]),
                EntityDescription(name: "B"),
            ])
        }
        #expect(found.contains { $0.contains("inverse \"missing\"") && $0.contains("A.b") })
    }

    @Test func inverseThatPointsElsewhereIsRejected() {
        let found = problems {
            try ManagedObjectModel(entities: [
                EntityDescription(name: "A", properties: [.toOne("b", "B", inverse: "c")]),
                EntityDescription(name: "B", properties: [.toOne("c", "C", inverse: "b")]),
                EntityDescription(name: "C", properties: [.toOne("b", "B", inverse: "c")]),
            ])
        }
        #expect(found.contains { $0.contains("points to C, not A") })
    }

    @Test func unknownSuperentityAndCyclesAreRejected() {
        let unknown = problems {
            try ManagedObjectModel(entities: [EntityDescription(name: "A", superentity: "Ghost")])
        }
        #expect(unknown.contains { $0.contains("unknown superentity \"Ghost\"") })
        let cycle = problems {
            try ManagedObjectModel(entities: [
                EntityDescription(name: "A", superentity: "B"), EntityDescription(name: "B", superentity: "A"),
            ])
        }
        #expect(cycle.contains { $0.contains("inheritance cycle") })
    }

    @Test func wrongDefaultValueTypeAndBadPatternAreRejectedTogether() {
        let found = problems {
            try ManagedObjectModel(entities: [
                EntityDescription(name: "A", properties: [
                    .attribute("n", .integer16, defaultValue: "seven"),
                    .attribute("s", .string, rules: [.pattern("([")]),
                ])
            ])
        }
        #expect(found.count == 2)
        #expect(found.contains { $0.contains("Default value of A.n is string, expected integer16") })
        #expect(found.contains { $0.contains("Pattern /([/ of A.s") })
    }

    @Test func configurationNamingUnknownEntityIsRejected() {
        let found = problems {
            try ManagedObjectModel(entities: [EntityDescription(name: "A")], configurations: ["Main": ["A", "Z"]])
        }
        #expect(found.contains { $0.contains("Configuration \"Main\" names unknown entity \"Z\"") })
    }

    @Test func versionHashIsStableAndTracksStoredShape() throws {
        func model(_ type: AttributeType, transient: Bool = false) throws -> ManagedObjectModel {
            try ManagedObjectModel(entities: [
                EntityDescription(name: "A", properties: [.attribute("x", type), .attribute("t", .string, transient: transient)])
            ])
        }
        let a = try model(.string).entitiesByName["A"]?.versionHash
        let b = try model(.string).entitiesByName["A"]?.versionHash
        let c = try model(.integer64).entitiesByName["A"]?.versionHash
        #expect(a == b)
        #expect(a != c)
        #expect(a?.count == 32)
    }

    @Test func configurationsSelectEntities() throws {
        let model = try ManagedObjectModel(
            entities: [EntityDescription(name: "A"), EntityDescription(name: "B")], configurations: ["Left": ["A"]])
        #expect(model.entities(forConfigurationName: "Left").map(\.name) == ["A"])
        #expect(model.entities(forConfigurationName: nil).map(\.name) == ["A", "B"])
    }

    @Test func storeMetadataCompatibilityFollowsVersionHashes() throws {
        let model = try TestModel.make()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let store = try coordinator.addPersistentStore(type: .inMemory)
        #expect(model.isConfiguration(nil, compatibleWithStoreMetadata: store.metadata))
        var changed = store.metadata
        changed[PersistentStore.modelVersionHashKeyPrefix + "Person"] = .data(Data([1, 2, 3]))
        #expect(!model.isConfiguration(nil, compatibleWithStoreMetadata: changed))
    }

    @Test func coreDataStyleEntityHelpersWork() throws {
        let stack = try InMemoryFixture().makeStack(model: try TestModel.make())
        let context = stack.context()
        #expect(try EntityDescription.entity(forEntityName: "Badge", in: context).name == "Badge")
        let badge = try EntityDescription.insertNewObject(forEntityName: "Badge", into: context)
        #expect(badge.isInserted && badge.entity.name == "Badge")
    }

    @Test func validateValueChecksWithoutSetting() throws {
        let stack = try InMemoryFixture().makeStack(model: try TestModel.make())
        let ada = try stack.context().makePerson("Ada")
        try ada.validateValue(42, forKey: "age")
        #expect(throws: ObjectGraphError.self) { try ada.validateValue(200, forKey: "age") }
        #expect(throws: ObjectGraphError.self) { try ada.validateValue("x", forKey: "age") }
        #expect(try ada.value(forKey: "age") == .int16(30))
    }

    @Test func codableValuesRoundTripThroughTransformableAttributes() throws {
        struct Settings: Codable, Equatable { var theme: String; var size: Int }
        let model = try ManagedObjectModel(entities: [
            EntityDescription(name: "Profile", properties: [AttributeDescription(name: "settings", transformable: Settings.self)])
        ])
        let stack = try InMemoryFixture().makeStack(model: model)
        let context = stack.context()
        let profile = try context.insertNewObject(forEntityName: "Profile")
        try profile.setValue(encoding: Settings(theme: "dark", size: 12), forKey: "settings")
        try context.save()
        let decoded = try stack.read { reader in
            try reader.fetch(FetchRequest(entityName: "Profile")).first?.value(forKey: "settings", decoding: Settings.self)
        }
        #expect(decoded == Settings(theme: "dark", size: 12))
        #expect(model.entitiesByName["Profile"]?.attributesByName["settings"]?.valueTypeName == "Settings")
    }

    @Test func entitiesOfALiveModelCannotJoinAnotherAndTheFirstKeepsItsLinks() throws {
        let model = try TestModel.make()
        let found = problems { try ManagedObjectModel(entities: model.entities) }
        #expect(found.contains { $0.contains("already belongs to another model") })
        let manager = try model.entity(named: "Manager")
        #expect(manager.superentity === (try model.entity(named: "Person")))
        #expect(manager.relationshipsByName["department"]?.destinationEntity === model.entitiesByName["Department"])
        #expect(manager.propertiesByName["name"]?.entity === model.entitiesByName["Person"])
        let department = try #require(model.entitiesByName["Department"])
        #expect(department.properties.allSatisfy { $0.entity === department })
        #expect(department.properties.enumerated().allSatisfy { $0.element.ordinal == $0.offset })
    }

    @Test func descriptionsThatOutliveTheirModelLoseTheirLinksAndCanJoinANewModel() throws {
        // Model links are unretained (no side tables on entities); read through the model,
        // they answer nil once it is gone, never a dangling entity.
        var model: ManagedObjectModel? = try TestModel.make()
        let manager = try #require(model?.entitiesByName["Manager"])
        let department = try #require(manager.relationshipsByName["department"])
        let name = try #require(manager.propertiesByName["name"])
        let person = try #require(model?.entitiesByName["Person"])
        let entities = try #require(model?.entities)
        #expect(department.destinationEntity?.name == "Department" && manager.rootEntity === person)
        weak let watched = model
        model = nil
        #expect(watched == nil)
        // The entities are still held (`entities`), the model is not.
        #expect(manager.managedObjectModel == nil && manager.superentity == nil)
        #expect(department.destinationEntity == nil && department.inverseRelationship == nil && name.entity == nil)
        #expect(manager.rootEntity === manager && !manager.isKind(of: person) && manager.isKind(of: manager))
        let again = try ManagedObjectModel(entities: entities)
        #expect(again.entitiesByName["Manager"]?.superentity === person)
        #expect(department.destinationEntity === again.entitiesByName["Department"])
        #expect(person.subentities.map(\.name) == ["Manager"], "links of the first model are not kept twice")
    }
}

@Suite("Model links under reflection")
struct ModelReflectionTests {
    @Test func reflectingDescriptionsWhoseModelIsGoneReadsNoStaleLink() throws {
        var model: ManagedObjectModel? = try TestModel.make()
        let entities = try #require(model?.entities)
        model = nil
        var text = ""
        dump(entities, to: &text)
        #expect(text.contains("Manager") && text.contains("department"))
    }

    @Test func everyPropertyIsFoundByItsNameAndByACanonicallyEquivalentSpelling() throws {
        let long = ["aPropertyNameLongerThanFifteenBytes", "fifteenBytes123", "sixteenBytes1234", "prefix8_a", "prefix8_b"]
        let names = (0..<40).map { "p\($0)" } + ["caf\u{E9}", "\u{3A3}\u{3C9}", "a", "ab", "zz", "emoji\u{1F600}"] + long
        let model = try ManagedObjectModel(entities: [
            EntityDescription(name: "Wide", properties: names.map { .attribute($0, .string) }),
        ])
        let entity = try model.entity(named: "Wide")
        for name in names {
            #expect(try entity.property(named: name).name == name)
            // A key built at run time (not the model's own string object) is found too.
            #expect(try entity.property(named: String(decoding: Array(name.utf8), as: UTF8.self)).name == name)
        }
        // The decomposed spelling of "café" names the same property, as String equality says.
        #expect(try entity.property(named: "cafe\u{301}").name == "caf\u{E9}")
        for unknown in ["", "p40", "P1", "caf", "cafe", "aPropertyNameLongerThanFifteenByte", "sixteenBytes123", "prefix8_c"] {
            #expect(throws: ObjectGraphError.self) { try entity.property(named: unknown) }
        }
        // Keys in large storage: a short name in a grown buffer, the model's own long name
        // (the same storage) and that name changed after it was copied (its own storage).
        for name in ["p7", "a"] + long {
            var grown = String()
            grown.reserveCapacity(64)
            grown += name
            #expect(try entity.property(named: grown).name == name)
        }
        for property in entity.properties where long.contains(property.name) {
            #expect(try entity.property(named: property.name) === property)
            var changed = property.name
            changed.removeLast()
            changed.append("!")
            #expect(throws: ObjectGraphError.self) { try entity.property(named: changed) }
        }
    }
}

/// A class whose `@Managed` key is misspelled, and a subclass that inherits the mistake.
final class MisspelledNote: ManagedObject {
    @Managed("title") var title: String?
    @Managed("titel") var heading: String?
}

class SpelledNote: ManagedObject {
    @Managed("title") var title: String?
}

final class MisspelledSubnote: SpelledNote {
    @Managed("bodyy") var body: String?
}

@Suite("Model: @Managed keys")
struct ManagedKeyCheckTests {
    // A key the entity does not have is an error when the model is built (issue 18): it
    // would otherwise read nil and drop every write.
    @Test func aMisspelledManagedKeyIsRefusedWhenTheModelIsBuilt() throws {
        let error = try #require(throws: ObjectGraphError.self) {
            try ManagedObjectModel(entities: [
                EntityDescription(name: "Note", managedObjectClass: MisspelledNote.self, properties: [.attribute("title", .string)])
            ])
        }
        #expect(error.code == .invalidModel)
        #expect(error.message.contains("@Managed(\"titel\") var heading") && error.message.contains("Note has no property titel"), "\(error.message)")
        #expect(!error.message.contains("\"title\""), "the key it has is not named")
    }

    // Keys are checked through the class's superclasses too, against the entity's own and
    // inherited properties.
    @Test func inheritedManagedKeysAreCheckedAgainstInheritedProperties() throws {
        let good = try ManagedObjectModel(entities: [
            EntityDescription(name: "Note", managedObjectClass: SpelledNote.self, properties: [.attribute("title", .string)]),
            EntityDescription(name: "Memo", superentity: "Note", properties: [.attribute("body", .string)]),
        ])
        #expect(good.entitiesByName["Memo"] != nil)
        let error = try #require(throws: ObjectGraphError.self) {
            try ManagedObjectModel(entities: [
                EntityDescription(name: "Note", managedObjectClass: SpelledNote.self, properties: [.attribute("title", .string)]),
                EntityDescription(name: "Memo", superentity: "Note", managedObjectClass: MisspelledSubnote.self, properties: [
                    .attribute("body", .string)
                ]),
            ])
        }
        #expect(error.message.contains("bodyy") && !error.message.contains("@Managed(\"title\")"), "\(error.message)")
    }
}

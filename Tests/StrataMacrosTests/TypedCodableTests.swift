import Foundation
import Strata
import StrataMacros
import Testing

// Properties of any other Codable type are transformable attributes (issue 18).

struct Nutrition: Codable, Hashable {
    var calories: Int
    var allergens: [String]
}

enum Difficulty: String, Codable, Comparable {
    case easy, hard
    static func < (a: Difficulty, b: Difficulty) -> Bool { a.rawValue < b.rawValue }
}

@Entity final class Recipe: ManagedObject {
    @Attribute(.indexed) var name: String = ""
    var tags: [String] = []
    var nutrition: Nutrition?
    var difficulty: Difficulty = .easy
    var ratios: [String: Double] = [:]
}

/// A required Codable property with no initial value: nothing to read before it is set.
@Entity final class Untagged: ManagedObject {
    var tags: [String]
}

@Suite struct TypedCodableTests {
    static func json(_ text: String) -> AttributeValue { .transformable(Data(text.utf8)) }

    static func container(_ type: PersistentStore.StoreType, at directory: URL) throws -> (PersistentStoreCoordinator, ManagedObjectContext) {
        StrataStore.register()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try ManagedObjectModel(types: [Recipe.self]))
        if type == .inMemory { try coordinator.addPersistentStore(type: .inMemory) } else {
            try coordinator.addPersistentStore(type: type, at: directory)
        }
        return (coordinator, ManagedObjectContext(persistentStoreCoordinator: coordinator))
    }

    // The typed declaration builds the transformable attributes the string API declares:
    // optional as the Swift type says, the initial value encoded as the default, the Codable
    // type's name kept.
    @Test func codablePropertiesAreTransformableAttributes() throws {
        let typed = try ManagedObjectModel(types: [Recipe.self])
        let named = try ManagedObjectModel(entities: [
            EntityDescription(name: "Recipe", managedObjectClass: Recipe.self, properties: [
                .attribute("name", .string, optional: false, defaultValue: "", indexed: true),
                .attribute("tags", .transformable, optional: false, defaultValue: Self.json("[]")),
                .attribute("nutrition", .transformable),
                .attribute("difficulty", .transformable, optional: false, defaultValue: Self.json("\"easy\"")),
                .attribute("ratios", .transformable, optional: false, defaultValue: Self.json("{}")),
            ]),
        ])
        #expect(TypedModelTests.summary(typed) == TypedModelTests.summary(named))
        let entity = try typed.entity(named: "Recipe")
        #expect(entity.attributesByName["tags"]?.valueTypeName == "Array<String>")
        #expect(entity.attributesByName["nutrition"]?.valueTypeName == "Nutrition")
        #expect(entity.attributesByName["nutrition"]?.isOptional == true)
        #expect(entity.attributesByName["difficulty"]?.isOptional == false)
    }

    // Values of each shape (array, optional struct, enum, dictionary) are written, saved,
    // and read back after reopening, on the in-memory store and on a StrataStore; nil clears
    // an optional one to null.
    @Test(arguments: [PersistentStore.StoreType.inMemory, .strata])
    func codableValuesRoundTrip(type: PersistentStore.StoreType) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("strata-codable-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let meal = Nutrition(calories: 640, allergens: ["gluten", "egg"])
        var (coordinator, context) = try Self.container(type, at: directory)
        let recipe = try context.insert(Recipe.self)
        #expect(recipe.tags == [] && recipe.nutrition == nil && recipe.difficulty == .easy && recipe.ratios == [:])
        recipe.name = "Pasta"
        recipe.tags = ["dinner", "quick"]
        recipe.nutrition = meal
        recipe.difficulty = .hard
        recipe.ratios = ["flour": 1, "egg": 0.5]
        let plain = try context.insert(Recipe.self)
        plain.name = "Toast"
        plain.nutrition = meal
        plain.nutrition = nil
        #expect(try plain.value(forKey: "nutrition") == .null)
        try context.save()
        #expect(recipe.lastAccessError == nil && plain.lastAccessError == nil)
        if type != .inMemory {
            try coordinator.remove(try #require(coordinator.persistentStores.first))
            (coordinator, context) = try Self.container(type, at: directory)
        }
        let read = try context.fetch(Recipe.self, where: #Predicate { $0.name == "Pasta" })
        let pasta = try #require(read.first)
        #expect(pasta.tags == ["dinner", "quick"])
        #expect(pasta.nutrition == meal)
        #expect(pasta.difficulty == .hard)
        #expect(pasta.ratios == ["flour": 1, "egg": 0.5])
        let toast = try #require(try context.fetch(Recipe.self, where: #Predicate { $0.name == "Toast" }).first)
        #expect(toast.nutrition == nil && toast.tags == [] && toast.difficulty == .easy)
        // Changing one element is a change of the whole value, saved as such.
        pasta.tags.append("vegetarian")
        #expect(pasta.isUpdated)
        try context.save()
        #expect(pasta.tags == ["dinner", "quick", "vegetarian"])
    }

    // A required Codable property needs a default: the model says which, built from the
    // types or by name with the class.
    @Test func aRequiredCodablePropertyWithoutADefaultIsRefused() throws {
        let typed = try #require(throws: ObjectGraphError.self) { try ManagedObjectModel(types: [Untagged.self]) }
        #expect(typed.code == .invalidModel)
        #expect(typed.message.contains("Untagged.tags") && typed.message.contains("initial value"), "\(typed.message)")
        let named = try #require(throws: ObjectGraphError.self) {
            try ManagedObjectModel(entities: [
                EntityDescription(name: "Untagged", managedObjectClass: Untagged.self, properties: [
                    .attribute("tags", .transformable, optional: false)
                ])
            ])
        }
        #expect(named.code == .invalidModel && named.message.contains("Untagged.tags"), "\(named.message)")
        let missing = try #require(throws: ObjectGraphError.self) {
            try ManagedObjectModel(entities: [EntityDescription(name: "Untagged", managedObjectClass: Untagged.self)])
        }
        #expect(missing.message.contains("no attribute tags"), "\(missing.message)")
    }

    // The fetch language reads no part of an encoded value: a predicate over one is refused,
    // naming the property, rather than answering as if nothing matched.
    @Test func aPredicateOverACodablePropertyIsRefused() throws {
        let (_, context) = try Self.container(.inMemory, at: FileManager.default.temporaryDirectory)
        let recipe = try context.insert(Recipe.self)
        recipe.tags = ["quick"]
        try context.save()
        for predicate in [
            #Predicate<Recipe> { $0.tags.contains("quick") }, #Predicate<Recipe> { $0.tags.count > 0 },
            #Predicate<Recipe> { $0.name == "x" || $0.ratios.isEmpty },
        ] {
            let error = try #require(throws: ObjectGraphError.self) { try context.fetch(Recipe.self, where: predicate) }
            #expect(error.code == .invalidFetchRequest)
            #expect(error.message.contains("stored encoded"), "\(error.message)")
        }
        #expect(try context.fetch(Recipe.self, where: #Predicate { $0.name == "" }).count == 1, "other properties still translate")
        let sort = try #require(throws: ObjectGraphError.self) { try context.fetch(Recipe.self, sortBy: [SortDescriptor(\.difficulty)]) }
        #expect(sort.code == .invalidFetchRequest && sort.key == "difficulty", "\(sort.message)")
    }

    // Bytes that do not decode as the property's type (written through the key-value API)
    // read as the default, and the object says why; nothing is lost from the store.
    @Test func anUndecodableValueReadsAsTheDefaultWithTheError() throws {
        let (_, context) = try Self.container(.inMemory, at: FileManager.default.temporaryDirectory)
        let recipe = try context.insert(Recipe.self)
        try recipe.setValue(Self.json("{\"not\": \"an array\"}"), forKey: "tags")
        try recipe.setValue(Self.json("42"), forKey: "nutrition")
        #expect(recipe.tags == [])
        #expect(recipe.lastAccessError?.code == .transformFailed)
        #expect(recipe.nutrition == nil)
        #expect(try recipe.value(forKey: "tags") == Self.json("{\"not\": \"an array\"}"), "the stored value is kept")
    }
}

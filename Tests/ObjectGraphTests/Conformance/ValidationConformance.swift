import Foundation
import ObjectGraph
import Testing

@Suite("Conformance: validation")
struct ValidationConformance {
    @Test(arguments: allStoreFixtures)
    func everyValidationErrorIsCollected(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let nameless = try context.insertNewObject(forEntityName: "Person")
        let old = try context.makePerson("Old", age: 151)
        try old.setValue("not an email", forKey: "email")
        let young = try context.makePerson("Young", age: -1)
        do {
            try context.save()
            Issue.record("invalid objects were saved")
        } catch let error as ObjectGraphError {
            #expect(error.code == .multipleValidationErrors)
            let found = Set(error.detailedErrors.map { "\($0.code)/\($0.key ?? "")" })
            #expect(found == ["missingMandatoryProperty/name", "valueTooLarge/age", "patternMismatch/email", "valueTooSmall/age"])
            #expect(error.detailedErrors.contains { $0.objectID == nameless.objectID })
            #expect(error.detailedErrors.contains { $0.objectID == young.objectID && $0.message.contains("Person.age is -1, below the minimum 0") })
        }
        #expect(try stack.context().count(for: FetchRequest(entityName: "Person")) == 0, "nothing was saved")
        #expect(context.insertedObjects.count == 3)

        try nameless.setValue("Named", forKey: "name")
        try old.setValue(150, forKey: "age")
        try old.setValue("old@example.com", forKey: "email")
        try young.setValue(0, forKey: "age")
        try context.save()
        #expect(try stack.context().count(for: FetchRequest(entityName: "Person")) == 3)
    }

    @Test(arguments: allStoreFixtures)
    func singleValidationErrorIsThrownDirectly(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        _ = try context.insertNewObject(forEntityName: "Department")
        do {
            try context.save()
            Issue.record("a department without a name was saved")
        } catch let error as ObjectGraphError {
            #expect(error.code == .missingMandatoryProperty)
            #expect(error.entityName == "Department" && error.key == "name")
        }
    }

    @Test(arguments: allStoreFixtures)
    func toManyCountLimitsAreChecked(fixture: any StoreFixture) throws {
        let model = try ManagedObjectModel(entities: [
            EntityDescription(name: "Team", properties: [.toMany("players", "Player", inverse: "team", minCount: 2, maxCount: 3)]),
            EntityDescription(name: "Player", properties: [.toOne("team", "Team", inverse: "players")]),
        ])
        let stack = try fixture.makeStack(model: model)
        let context = stack.context()
        let team = try context.insertNewObject(forEntityName: "Team")
        try team.setValue([try context.insertNewObject(forEntityName: "Player")], forKey: "players")
        #expect { try context.save() } throws: { ($0 as? ObjectGraphError)?.code == .tooFewObjects }
        try team.setValue(try (0..<4).map { _ in try context.insertNewObject(forEntityName: "Player") }, forKey: "players")
        #expect { try context.save() } throws: { ($0 as? ObjectGraphError)?.code == .tooManyObjects }
        try team.setValue(try (0..<3).map { _ in try context.insertNewObject(forEntityName: "Player") }, forKey: "players")
        try context.save()
    }

    @Test(arguments: allStoreFixtures)
    func wrongValueTypeThrowsNamingEntityKeyAndTypes(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let ada = try stack.context().makePerson("Ada")
        do {
            try ada.setValue("old", forKey: "age")
            Issue.record("a string was accepted for an integer")
        } catch let error as ObjectGraphError {
            #expect(error.code == .wrongValueType)
            #expect(error.entityName == "Person" && error.key == "age")
            #expect(error.message.contains("expects integer16, got string"))
        }
        #expect(throws: ObjectGraphError.self) { try ada.setValue(.int64(100_000), forKey: "age") }
        #expect(try ada.value(forKey: "age") == .int16(30), "failed sets change nothing")
    }
}

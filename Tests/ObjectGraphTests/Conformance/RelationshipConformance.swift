import Foundation
import ObjectGraph
import Testing

@Suite("Conformance: relationships and inverses")
struct RelationshipConformance {
    @Test(arguments: allStoreFixtures)
    func settingToOneMaintainsToManyInverse(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let sales = try context.makeDepartment("Sales")
        let support = try context.makeDepartment("Support")
        let ada = try context.makePerson("Ada")
        try ada.setValue(sales, forKey: "department")
        #expect(try sales.objects(forKey: "employees") == [ada])
        try ada.setValue(support, forKey: "department")
        #expect(try sales.objects(forKey: "employees").isEmpty)
        #expect(try support.objects(forKey: "employees") == [ada])
        try ada.setValue(nil as ManagedObject?, forKey: "department")
        #expect(try support.objects(forKey: "employees").isEmpty)
    }

    @Test(arguments: allStoreFixtures)
    func toManyChangesMaintainToOneInverse(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let sales = try context.makeDepartment("Sales")
        let support = try context.makeDepartment("Support")
        let ada = try context.makePerson("Ada")
        let bob = try context.makePerson("Bob")
        try sales.setValue([ada, bob], forKey: "employees")
        #expect(try ada.object(forKey: "department") === sales)
        try support.addObject(bob, toRelationship: "employees")
        #expect(try bob.object(forKey: "department") === support)
        #expect(try sales.objects(forKey: "employees") == [ada], "moving bob removes him from sales")
        try sales.removeObject(ada, fromRelationship: "employees")
        #expect(try ada.object(forKey: "department") == nil)
    }

    @Test(arguments: allStoreFixtures)
    func oneToOneTakesDestinationFromPreviousOwner(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let badge = try context.insertNewObject(forEntityName: "Badge")
        let ada = try context.makePerson("Ada")
        let bob = try context.makePerson("Bob")
        try ada.setValue(badge, forKey: "badge")
        try bob.setValue(badge, forKey: "badge")
        #expect(try badge.object(forKey: "owner") === bob)
        #expect(try ada.object(forKey: "badge") == nil)
    }

    @Test(arguments: allStoreFixtures)
    func relationshipsPersistInBothDirections(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let sales = try context.makeDepartment("Sales")
        try sales.setValue([try context.makePerson("Ada"), try context.makePerson("Bob")], forKey: "employees")
        try context.save()

        let reader = stack.context()
        let department = try reader.existingObject(with: sales.objectID)
        let names = try department.objects(forKey: "employees").map { try $0.value(forKey: "name").stringValue ?? "" }
        #expect(Set(names) == ["Ada", "Bob"])
        let ada = try #require(try reader.fetch(.make("Person", .equal("name", "Ada"))).first)
        #expect(try ada.object(forKey: "department") === department)
    }

    @Test(arguments: allStoreFixtures)
    func orderedToManyKeepsOrder(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let project = try context.insertNewObject(forEntityName: "Project")
        let people = try ["Cy", "Ada", "Bob"].map { try context.makePerson($0) }
        try project.setValue(people, forKey: "members")
        try context.save()
        let reader = stack.context()
        let members = try reader.existingObject(with: project.objectID).objects(forKey: "members")
        #expect(try members.map { try $0.value(forKey: "name") } == ["Cy", "Ada", "Bob"])
    }

    @Test(arguments: allStoreFixtures)
    func relationshipToObjectOfWrongEntityThrows(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let ada = try context.makePerson("Ada")
        let note = try context.insertNewObject(forEntityName: "Note")
        do {
            try ada.setValue(note, forKey: "department")
            Issue.record("a Note was accepted as a Department")
        } catch let error as ObjectGraphError {
            #expect(error.code == .wrongValueType)
            #expect(error.message.contains("Person.department expects Department, got Note"))
        }
        let other = stack.context()
        let foreign = try other.makeDepartment("Elsewhere")
        #expect(throws: ObjectGraphError.self) { try ada.setValue(foreign, forKey: "department") }
    }

    @Test(arguments: allStoreFixtures)
    func typedRelationshipAccessorsCheckTheClass(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let sales = try context.makeDepartment("Sales")
        let ada = try context.makePerson("Ada")
        try ada.setValue(sales, forKey: "department")
        #expect(try sales.objects(forKey: "employees", as: Person.self).map(\.name) == ["Ada"])
        #expect(throws: ObjectGraphError.self) { try ada.object(forKey: "department", as: Person.self) }
        #expect(try ada.object(forKey: "department", as: ManagedObject.self) === sales)
    }

    @Test(arguments: allStoreFixtures)
    func addingAndRemovingMembersKeepsOrderedRelationshipsInOrder(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let project = try context.insertNewObject(forEntityName: "Project")
        let people = try ["A", "B", "C", "D"].map { try context.makePerson($0) }
        try project.setValue(Array(people.prefix(3)), forKey: "members")
        try project.removeObject(people[0], fromRelationship: "members")
        try project.addObject(people[3], toRelationship: "members")
        try project.addObject(people[1], toRelationship: "members")  // already there: no change
        try context.save()
        let names = try stack.read { reader in
            try reader.existingObject(with: project.objectID).objects(forKey: "members").map { try $0.value(forKey: "name") }
        }
        #expect(names == ["B", "C", "D"])
    }

    @Test(arguments: allStoreFixtures)
    func largeToManyRelationshipIsBuiltAndEmptiedOneMemberAtATime(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let department = try context.makeDepartment("Big")
        let people = try (0..<2_000).map { index in
            let person = try context.makePerson("p\(index)")
            try person.setValue(department, forKey: "department")
            return person
        }
        #expect(try department.objectIDs(forRelationshipNamed: "employees").count == 2_000)
        try context.save()
        for (index, person) in people.enumerated() where index.isMultiple(of: 2) {
            try person.setValue(nil as ManagedObject?, forKey: "department")
        }
        let remaining = Set(try department.objectIDs(forRelationshipNamed: "employees"))
        let expected = Set(people.enumerated().filter { !$0.offset.isMultiple(of: 2) }.map(\.element.objectID))
        #expect(remaining.count == 1_000)
        #expect(remaining == expected)
        try context.save()
        let stored = try stack.read { reader in
            Set(try reader.existingObject(with: department.objectID).objectIDs(forRelationshipNamed: "employees"))
        }
        #expect(stored == expected)
    }
}

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

    /// Setting a to-many with repeats, short lists (searched) and long ones (hashed), against a
    /// model of who belongs where: each person once, and every inverse
    /// right, including the people the new list drops.
    @Test(arguments: allStoreFixtures)
    func settingAToManyKeepsEachDestinationOnceAndEveryInverse(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let sales = try context.makeDepartment("Sales")
        let support = try context.makeDepartment("Support")
        let people = try (0..<40).map { try context.makePerson("p\($0)") }
        var generator = SystemRandomNumberGenerator()
        var departmentOf: [ObjectIdentifier: ManagedObject] = [:]
        for round in 0..<30 {
            // Lengths on both sides of the searched/hashed threshold, with repeats.
            let length = [0, 1, 3, 15, 16, 17, 33][round % 7]
            let picked = (0..<length).map { _ in people[Int.random(in: 0..<people.count, using: &generator)] }
            let department = round % 2 == 0 ? sales : support
            let other = department === sales ? support : sales
            try department.setValue(picked, forKey: "employees")
            var distinct: [ManagedObject] = []
            for person in picked where !distinct.contains(where: { $0 === person }) { distinct.append(person) }
            // The model: the old members leave; the picked ones move here (from the other side too).
            for person in people where departmentOf[ObjectIdentifier(person)] === department { departmentOf[ObjectIdentifier(person)] = nil }
            for person in distinct { departmentOf[ObjectIdentifier(person)] = department }
            let members = try department.objects(forKey: "employees").map(ObjectIdentifier.init)
            #expect(members.count == distinct.count && Set(members) == Set(distinct.map(ObjectIdentifier.init)), "each once")
            let others = Set(try other.objects(forKey: "employees").map(ObjectIdentifier.init))
            #expect(others == Set(people.filter { departmentOf[ObjectIdentifier($0)] === other }.map(ObjectIdentifier.init)))
            for person in people {
                #expect(try person.object(forKey: "department") === departmentOf[ObjectIdentifier(person)], "round \(round)")
            }
        }
        try context.save()
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

@Suite struct ArrayFillingTests {
    @Test func aFilledArrayIsTheRepeatedArrayWithTheRoomAskedFor() {
        for count in [0, 1, 7, 64] {
            for capacity in [0, 5, 100] {
                let filled = [Int?](filling: 3, count: count, capacity: capacity)
                #expect(filled == [Int?](repeating: 3, count: count))
                #expect(filled.capacity >= max(count, capacity))
            }
        }
        #expect([UInt8](filling: 0, count: 20, capacity: 84) == [UInt8](repeating: 0, count: 20))
    }
}

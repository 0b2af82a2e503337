import Foundation
import ObjectGraph
import Testing

@Suite("Conformance: faulting and uniquing")
struct FaultingConformance {
    private func savedPerson(_ stack: TestStack, _ name: String = "Ada") throws -> ManagedObjectID {
        let context = stack.context()
        let person = try context.makePerson(name)
        try context.save()
        return person.objectID
    }

    @Test(arguments: allStoreFixtures)
    func objectWithIDReturnsAFaultThatFiresOnFirstAccess(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let id = try savedPerson(stack)
        let context = stack.context()
        let object = context.object(with: id)
        #expect(object.isFault)
        #expect(context.registeredObject(for: id) === object)
        let person = try #require(object as? Person)
        #expect(person.fetchAwakenings == 0)
        #expect(person.name == "Ada")
        #expect(!object.isFault)
        #expect(person.fetchAwakenings == 1)
    }

    @Test(arguments: allStoreFixtures)
    func fetchedObjectsAreFaultsUnlessAskedOtherwise(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        _ = try savedPerson(stack)
        var request = FetchRequest(entityName: "Person")
        #expect(try stack.context().fetch(request).first?.isFault == true)
        request.returnsObjectsAsFaults = false
        #expect(try stack.context().fetch(request).first?.isFault == false)
    }

    // A fetched fault keeps what the fetch read: firing it reads nothing more, unless a save
    // through the coordinator came first, which it then sees.
    @Test(arguments: allStoreFixtures)
    func aFetchedFaultFiresWithTheFetchedValuesUnlessASaveCameFirst(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let id = try savedPerson(stack, "Ada")
        _ = try savedPerson(stack, "Grace")
        let context = stack.context()
        let people = try context.fetch(FetchRequest(entityName: "Person"))
        #expect(people.count == 2 && people.allSatisfy(\.isFault))
        let ada = try #require(people.first { $0.objectID == id })
        let grace = try #require(people.first { $0.objectID != id })
        #expect(try grace.value(forKey: "name") == "Grace")
        // Another context of the coordinator renames Ada before her fault fires.
        let other = stack.context()
        try other.existingObject(with: id).setValue("Ada L.", forKey: "name")
        try other.save()
        #expect(ada.isFault)
        #expect(try ada.value(forKey: "name") == "Ada L.", "the save came after the fetch: the fault reads the saved row")
    }

    @Test(arguments: allStoreFixtures)
    func oneObjectPerIDPerContext(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let id = try savedPerson(stack)
        let context = stack.context()
        let first = try context.fetch(FetchRequest(entityName: "Person"))
        let second = try context.fetch(FetchRequest(entityName: "Person"))
        #expect(first.first === second.first)
        #expect(context.object(with: id) === first.first)
        #expect(try context.existingObject(with: id) === first.first)
        #expect(stack.context().object(with: id) !== first.first, "uniquing is per context")
    }

    @Test(arguments: allStoreFixtures)
    func faultForMissingRowThrowsWhenFired(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let store = try #require(stack.store as? IncrementalStore)
        let ghost = store.newObjectID(for: try TestModel.make().entity(named: "Person"), referenceObject: .int64(9_999))
        let context = stack.context()
        let fault = context.object(with: ghost)
        #expect(fault.isFault)
        #expect(throws: ObjectGraphError.self) { try fault.value(forKey: "name") }
        do {
            _ = try context.existingObject(with: ghost)
            Issue.record("existingObject(with:) returned a missing object")
        } catch let error as ObjectGraphError {
            #expect(error.code == .objectNotFound)
        }
    }

    @Test(arguments: allStoreFixtures)
    func toManyRelationshipsFaultSeparately(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let writer = stack.context()
        let sales = try writer.makeDepartment("Sales")
        try writer.makePerson("Ada").setValue(sales, forKey: "department")
        try writer.save()

        let context = stack.context()
        let department = try context.existingObject(with: sales.objectID)
        #expect(!department.isFault)
        #expect(department.hasFault(forRelationshipNamed: "employees"))
        let employees = try department.objects(forKey: "employees")
        #expect(!department.hasFault(forRelationshipNamed: "employees"))
        #expect(employees.count == 1)
        #expect(employees.first?.isFault == true, "destinations stay faults")
        #expect(try employees.first?.object(forKey: "department") === department)
    }

    /// Turned back into a fault, an object forgets its loaded relationships even when it fires
    /// again from the row it kept (Core Data: a refreshed object's relationships are faults),
    /// and still reads that row's values.
    @Test(arguments: allStoreFixtures)
    func aRefreshedObjectFiresAgainWithItsRelationshipsFaulted(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let writer = stack.context()
        let sales = try writer.makeDepartment("Sales")
        try writer.makePerson("Ada").setValue(sales, forKey: "department")
        try writer.save()

        let context = stack.context()
        let department = try #require(try context.fetch(FetchRequest(entityName: "Department")).first)
        #expect(try department.objects(forKey: "employees").count == 1)
        #expect(!department.hasFault(forRelationshipNamed: "employees"))
        context.refresh(department, mergeChanges: false)
        #expect(department.isFault)
        #expect(try department.value(forKey: "name") == "Sales")
        #expect(!department.isFault)
        #expect(department.hasFault(forRelationshipNamed: "employees"), "the relationship loads again, from the store")
        #expect(try department.objects(forKey: "employees").count == 1)
    }

    @Test(arguments: allStoreFixtures)
    func prefetchingLoadsRelationshipDestinations(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let writer = stack.context()
        let sales = try writer.makeDepartment("Sales")
        try writer.makePerson("Ada").setValue(sales, forKey: "department")
        try writer.save()
        let context = stack.context()
        context.retainsRegisteredObjects = true
        var request = FetchRequest(entityName: "Person")
        request.relationshipKeyPathsForPrefetching = ["department"]
        let people = try context.fetch(request)
        #expect(context.registeredObject(for: sales.objectID)?.isFault == false)
        #expect(people.count == 1)
    }

    /// Prefetching many destinations (one fetch per destination entity, [FETCH-S13]) loads
    /// each of them, managers among the people included, through a to-one, a to-many and a
    /// two-step key path; the rows it kept are not served after a save changed them.
    @Test(arguments: allStoreFixtures)
    func prefetchingManyDestinationsLoadsEachAndFollowsLaterSaves(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let writer = stack.context()
        let departments = try (0..<6).map { try writer.makeDepartment("D\($0)") }
        for index in 0..<30 {
            let person = try writer.makePerson("P\(index)", entity: index % 4 == 0 ? "Manager" : "Person")
            if index % 7 != 3 { try person.setValue(departments[index % 5], forKey: "department") }
        }
        try writer.save()

        let context = stack.context()
        context.retainsRegisteredObjects = true
        var request = FetchRequest(entityName: "Person")
        request.relationshipKeyPathsForPrefetching = ["department", "department.employees"]
        let people = try context.fetch(request)
        #expect(people.count == 30)
        for department in departments.prefix(5) {
            let registered = try #require(context.registeredObject(for: department.objectID))
            #expect(!registered.isFault, "\(department.objectID) loaded")
            #expect(!registered.hasFault(forRelationshipNamed: "employees"))
        }
        #expect(context.registeredObject(for: departments[5].objectID) == nil, "no one works in D5")
        for person in people {
            #expect(!person.isFault)
            let name = try person.value(forKeyPath: "department.name")
            let expected = try person.value(forKey: "name").stringValue.flatMap { Int($0.dropFirst()) }.map { $0 % 7 == 3 ? FetchValue.null : .attribute(.string("D\($0 % 5)")) }
            #expect(name == expected, "\(String(describing: try? person.value(forKey: "name")))")
        }

        // Without retaining registered objects: the people hold their prefetched departments
        // (as Core Data's loaded relationships do), which keep the values they were fetched
        // with until refreshed; refreshed, they read the saved name.
        let reader = stack.context()
        let fetched = try reader.fetch(request)
        let held = try #require(reader.registeredObject(for: departments[1].objectID), "held by its people")
        #expect(!held.isFault)
        let renamer = stack.context()
        let renamed = try renamer.existingObject(with: departments[1].objectID)
        try renamed.setValue(.string("Renamed"), forKey: "name")
        try renamer.save()
        func moved() -> Int { fetched.filter { (try? $0.value(forKeyPath: "department.name")) == .attribute(.string("Renamed")) }.count }
        #expect(moved() == 0, "loaded departments keep their fetched values")
        reader.refresh(held, mergeChanges: false)
        #expect(moved() == 6, "the people of D1 see its saved name once it is refreshed")
    }

    /// A stack whose store holds a department ("Sales") with three people, saved.
    static func salesWithThreePeople(_ fixture: any StoreFixture) throws -> (stack: TestStack, department: ManagedObject) {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let writer = stack.context()
        let department = try writer.makeDepartment("Sales")
        for index in 0..<3 { try writer.makePerson("P\(index)").setValue(department, forKey: "department") }
        try writer.save()
        return (stack, department)
    }

    /// Prefetched destinations live as long as the objects that prefetched them: released
    /// with them, and not before.
    @Test(arguments: allStoreFixtures)
    func prefetchedDestinationsLiveAsLongAsTheirSources(fixture: any StoreFixture) throws {
        let (stack, department) = try Self.salesWithThreePeople(fixture)
        let departmentID = department.objectID
        let context = stack.context()
        var request = FetchRequest(entityName: "Person")
        request.relationshipKeyPathsForPrefetching = ["department"]
        var people: [ManagedObject]? = try context.fetch(request)
        #expect(people?.count == 3)
        #expect(context.registeredObject(for: departmentID)?.isFault == false, "held and loaded")
        people = nil
        #expect(context.registeredObject(for: departmentID) == nil, "released with the people")

        // A person turned into a fault lets go of its destinations, and so does a reset.
        people = try context.fetch(request)
        weak var held = context.registeredObject(for: departmentID)
        #expect(held != nil)
        for person in people ?? [] { context.refresh(person, mergeChanges: false) }
        #expect(held == nil, "released when its people are refreshed")
        people = try context.fetch(request)
        held = context.registeredObject(for: departmentID)
        #expect(held != nil)
        context.reset()
        #expect(held == nil, "released by a reset")
        #expect(people?.count == 3)
    }

    /// Objects that prefetched each other (people their department, the department its
    /// people) hold each other, as related objects do in Core Data, until the context goes:
    /// then they let go, and nothing is left.
    @Test(arguments: allStoreFixtures)
    func prefetchCyclesEndWithTheirContext(fixture: any StoreFixture) throws {
        let (stack, department) = try Self.salesWithThreePeople(fixture)
        weak var person: ManagedObject?
        weak var sales: ManagedObject?
        do {
            let context = stack.context()
            var request = FetchRequest(entityName: "Person")
            request.relationshipKeyPathsForPrefetching = ["department.employees"]
            let people = try context.fetch(request)
            person = people.first
            sales = context.registeredObject(for: department.objectID)
            #expect(person != nil && sales != nil)
        }
        #expect(person == nil && sales == nil, "the cycle ended with its context")
    }

    @Test(arguments: allStoreFixtures)
    func keyPathsFollowRelationships(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let sales = try context.makeDepartment("Sales")
        let ada = try context.makePerson("Ada")
        try ada.setValue(sales, forKey: "department")
        #expect(try ada.value(forKeyPath: "department.name") == .attribute("Sales"))
        #expect(try sales.value(forKeyPath: "employees.name") == .collection([.attribute("Ada")]))
        try context.save()
        let reader = stack.context()
        #expect(try reader.names(.make("Person", .equal("department.name", "Sales"))) == ["Ada"])
        #expect(try reader.names(.make("Department", .equal("employees.name", "Ada"))) == ["Sales"])
        #expect(try reader.names(.make("Person", .equal("department", object: sales.objectID))) == ["Ada"])
    }

    @Test(arguments: allStoreFixtures)
    func keyPathsWithNonASCIIAndLongNamesFollowRelationships(fixture: any StoreFixture) throws {
        let model = try ManagedObjectModel(entities: [
            EntityDescription(name: "Pièce", properties: [
                .attribute("nom", .string),
                .toOne("propriétaireDeCettePièce", "Personne", inverse: "pièces"),
            ]),
            EntityDescription(name: "Personne", properties: [
                .attribute("prénom", .string),
                .attribute("aVeryLongAttributeNameIndeed", .string),
                .toMany("pièces", "Pièce", inverse: "propriétaireDeCettePièce"),
            ]),
        ])
        let stack = try fixture.makeStack(model: model)
        let context = stack.context()
        let owner = try context.insertNewObject(forEntityName: "Personne")
        try owner.setValue(.string("Zoë"), forKey: "prénom")
        try owner.setValue(.string("long"), forKey: "aVeryLongAttributeNameIndeed")
        let room = try context.insertNewObject(forEntityName: "Pièce")
        try room.setValue(.string("salon"), forKey: "nom")
        try room.setValue(owner, forKey: "propriétaireDeCettePièce")
        try context.save()
        let reader = stack.context()
        let fetched = try #require(try reader.fetch(FetchRequest(entityName: "Pièce")).first)
        #expect(try fetched.value(forKeyPath: "propriétaireDeCettePièce.prénom") == .attribute("Zoë"))
        #expect(try fetched.value(forKeyPath: "propriétaireDeCettePièce.aVeryLongAttributeNameIndeed") == .attribute("long"))
        #expect(try fetched.value(forKeyPath: "propriétaireDeCettePièce.pièces.nom") == .collection([.attribute("salon")]))
        #expect(throws: ObjectGraphError.self) { try fetched.value(forKeyPath: "propriétaireDeCettePièce.prénomx") }
        #expect(throws: ObjectGraphError.self) { try fetched.value(forKeyPath: "nom.prénom") }
    }

    @Test(arguments: allStoreFixtures)
    func unchangedObjectsAreReleasedUnlessRetained(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let id = try savedPerson(stack)
        let context = stack.context()
        _ = try context.fetch(FetchRequest(entityName: "Person"))
        #expect(context.registeredObject(for: id) == nil, "weakly held: nothing else keeps it")
        context.retainsRegisteredObjects = true
        _ = try context.fetch(FetchRequest(entityName: "Person"))
        #expect(context.registeredObject(for: id) != nil)
    }
}

import Foundation
import ObjectGraph
import Testing

/// The stores that detect conflicting saves (optimistic locking): InMemoryStore and
/// StrataStore, fresh and reopened after every save. (The documentation's DictionaryStore
/// example leaves the last writer winning.)
let conflictDetectingStoreFixtures: [any StoreFixture] = [InMemoryFixture(), StrataFixture(), ReopeningStrataFixture(), JSONFileFixture(), BinaryStoreFixture()]

/// Merge policies (seed 003, "Merge Policies"; Core Data's NSMergePolicy documentation): two
/// contexts on one coordinator, one saving over the other's read.
@Suite("Conformance: merge policies and conflict records")
struct MergePolicyConformance {
    /// Three attributes of a person; each case changes them on either side.
    private static let keys = ["name", "age", "email"]
    private static let base: [String: AttributeValue] = ["name": "Ada", "age": .int16(30), "email": "ada@base.io"]
    private static let theirs: [String: AttributeValue] = ["name": "Ada S", "age": .int16(40), "email": "ada@store.io"]
    private static let ours: [String: AttributeValue] = ["name": "Ada O", "age": .int16(50), "email": "ada@ours.io"]

    /// What a policy leaves in the store for one property: `store` is the other context's
    /// saved value when it changed it, `ours` this context's pending value (Core Data's
    /// documented rules, property by property).
    private static func expected(_ policy: MergePolicy.MergeType, base: AttributeValue, store: AttributeValue?, ours: AttributeValue?) -> AttributeValue {
        let stored = store ?? base
        switch policy {
        case .error, .rollback: return stored
        case .mergeByPropertyStoreTrump: return store ?? ours ?? base
        case .mergeByPropertyObjectTrump: return ours ?? stored
        case .overwrite: return ours ?? base
        }
    }

    /// A store holding Ada (30), saved; a context with the policy that has loaded her, and
    /// another context to change the store under it.
    private func adaReadByTwoContexts(
        _ fixture: any StoreFixture, policy: MergePolicy.MergeType
    ) throws -> (TestStack, ada: ManagedObject, context: ManagedObjectContext, mine: ManagedObject, other: ManagedObjectContext) {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let setup = stack.context()
        let ada = try setup.makePerson("Ada", age: 30)
        try setup.save()
        let context = stack.context()
        context.mergePolicy = MergePolicy(merge: policy)
        let mine = try context.existingObject(with: ada.objectID)
        return (stack, ada, context, mine, stack.context())
    }

    private func person(_ context: ManagedObjectContext, _ id: ManagedObjectID) throws -> ManagedObject {
        try context.existingObject(with: id)
    }

    /// Every combination of the three attributes changed by neither side, the store's side,
    /// this context's, or both (64 cases), under each policy: the row after the save is what
    /// the policy implies, property by property, and the saving context agrees with it.
    @Test(arguments: conflictDetectingStoreFixtures, MergePolicy.MergeType.allCases)
    func eachPolicyLeavesTheRowItImpliesForEveryOverlapOfChanges(fixture: any StoreFixture, policy: MergePolicy.MergeType) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let setup = stack.context()
        var people: [ManagedObject] = []
        for _ in 0..<64 {
            let person = try setup.insertNewObject(forEntityName: "Person")
            for key in Self.keys { try person.setValue(Self.base[key]!, forKey: key) }
            people.append(person)
        }
        try setup.save()
        let ids = people.map(\.objectID)

        for (index, id) in ids.enumerated() {
            // Case `index`: two bits per key, 1 = the store's side changes it, 2 = ours does.
            let sides = Self.keys.enumerated().map { position, _ in (index >> (2 * position)) & 3 }
            let context = stack.context()
            context.mergePolicy = MergePolicy(merge: policy)
            let mine = try person(context, id)
            let other = stack.context()
            let theirs = try person(other, id)
            for (position, key) in Self.keys.enumerated() where sides[position] & 1 != 0 {
                try theirs.setValue(Self.theirs[key]!, forKey: key)
            }
            try other.save()
            for (position, key) in Self.keys.enumerated() where sides[position] & 2 != 0 {
                try mine.setValue(Self.ours[key]!, forKey: key)
            }
            let storeChanged = sides.contains { $0 & 1 != 0 }, oursChanged = sides.contains { $0 & 2 != 0 }
            let conflicts = storeChanged && oursChanged
            if policy == .error && conflicts {
                let error = #expect(throws: ObjectGraphError.self) { try context.save() }
                #expect(error?.code == .mergeConflict)
                #expect(error?.conflicts.map(\.objectID) == [id])
                #expect(mine.hasChanges, "a failed save leaves the changes pending")
            } else {
                try context.save()
                #expect(!mine.hasChanges, "case \(index): nothing left to save after a resolved save")
            }
            try stack.read { reader in
                let row = try person(reader, id)
                for (position, key) in Self.keys.enumerated() {
                    let want = Self.expected(
                        conflicts ? policy : .mergeByPropertyObjectTrump, base: Self.base[key]!,
                        store: sides[position] & 1 != 0 ? Self.theirs[key] : nil,
                        ours: sides[position] & 2 != 0 ? Self.ours[key] : nil)
                    #expect(try row.value(forKey: key) == want, "case \(index) (\(sides)), \(key), \(policy)")
                    if oursChanged && (policy != .error || !conflicts) {
                        #expect(try mine.value(forKey: key) == want, "the saving context holds what it saved")
                    }
                }
            }
        }
    }

    /// The conflict record (seed 003, "conflictList"): the object, its snapshot, the cached
    /// and stored rows, and both versions; one record per object, in one error.
    @Test(arguments: conflictDetectingStoreFixtures)
    func aConflictRecordHoldsTheObjectItsSnapshotTheStoredRowAndBothVersions(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let setup = stack.context()
        let sales = try setup.makeDepartment("Sales")
        let ada = try setup.makePerson("Ada", age: 30)
        let bob = try setup.makePerson("Bob", age: 40)
        try ada.setValue(sales, forKey: "department")
        try setup.save()
        let context = stack.context()
        let myAda = try context.existingObject(with: ada.objectID), myBob = try context.existingObject(with: bob.objectID)
        let other = stack.context()
        try other.existingObject(with: ada.objectID).setValue(.int16(31), forKey: "age")
        try other.existingObject(with: bob.objectID).setValue(.int16(41), forKey: "age")
        try other.save()
        try other.existingObject(with: bob.objectID).setValue(.int16(42), forKey: "age")
        try other.save()
        try myAda.setValue("Ada L.", forKey: "name")
        try myBob.setValue("Bob L.", forKey: "name")
        let error = try #require(#expect(throws: ObjectGraphError.self) { try context.save() })
        #expect(error.code == .mergeConflict && error.code.cocoaErrorCode == 133020)
        let records = Dictionary(uniqueKeysWithValues: error.conflicts.map { ($0.objectID, $0) })
        #expect(records.count == 2, "one error lists every object in conflict")
        let adaRecord = try #require(records[ada.objectID])
        #expect(adaRecord.sourceObject === myAda)
        #expect(adaRecord.oldVersionNumber == 1 && adaRecord.newVersionNumber == 2)
        #expect(adaRecord.objectSnapshot?["age"] == .attribute(.int16(30)))
        #expect(adaRecord.objectSnapshot?["name"] == .attribute("Ada"), "the snapshot is the last committed value, not the change")
        #expect(adaRecord.objectSnapshot?["department"] == .relationship(.toOne(sales.objectID)))
        #expect(adaRecord.objectSnapshot?["notes"] == nil, "snapshots hold no to-many relationship")
        #expect(adaRecord.persistedSnapshot?["age"] == .attribute(.int16(31)))
        #expect(adaRecord.cachedSnapshot == adaRecord.persistedSnapshot)
        #expect(adaRecord.persistedSnapshot?["department"] == .relationship(.toOne(sales.objectID)))
        let bobRecord = try #require(records[bob.objectID])
        #expect(bobRecord.oldVersionNumber == 1 && bobRecord.newVersionNumber == 3)
        #expect(bobRecord.persistedSnapshot?["age"] == .attribute(.int16(42)))
        #expect(try stack.read { try $0.existingObject(with: ada.objectID).value(forKey: "name") } == "Ada", "nothing was written")
    }

    /// Changed here, deleted in the store: the error policy reports a record with no stored row
    /// and version 0; every other policy lets the save go through without the object, which
    /// leaves the context as a merged delete does.
    @Test(arguments: conflictDetectingStoreFixtures, MergePolicy.MergeType.allCases)
    func anObjectChangedHereAndDeletedInTheStoreFollowsThePolicy(fixture: any StoreFixture, policy: MergePolicy.MergeType) throws {
        let (stack, ada, context, mine, other) = try adaReadByTwoContexts(fixture, policy: policy)
        other.delete(try other.existingObject(with: ada.objectID))
        try other.save()
        try mine.setValue(.int16(31), forKey: "age")
        try context.makePerson("Cy", age: 20)
        if policy == .error {
            let error = try #require(#expect(throws: ObjectGraphError.self) { try context.save() })
            let record = try #require(error.conflicts.first)
            #expect(record.persistedSnapshot == nil && record.isDeletedInStore && record.newVersionNumber == 0)
            #expect(record.oldVersionNumber == 1)
            #expect(try stack.read { try $0.count(for: .make("Person")) } == 0, "nothing was written")
        } else {
            try context.save()
            #expect(mine.managedObjectContext == nil, "the object left the context")
            #expect(context.registeredObject(for: ada.objectID) == nil)
            #expect(try stack.read { try $0.names(.make("Person")) } == ["Cy"], "the rest of the save was written")
        }
    }

    /// Deleted here, changed in the store: the error policy reports it; rollback keeps the
    /// object with the store's values; the others save the delete.
    @Test(arguments: conflictDetectingStoreFixtures, MergePolicy.MergeType.allCases)
    func anObjectDeletedHereAndChangedInTheStoreFollowsThePolicy(fixture: any StoreFixture, policy: MergePolicy.MergeType) throws {
        let (stack, ada, context, mine, other) = try adaReadByTwoContexts(fixture, policy: policy)
        try other.existingObject(with: ada.objectID).setValue(.int16(31), forKey: "age")
        try other.save()
        context.delete(mine)
        switch policy {
        case .error:
            let error = try #require(#expect(throws: ObjectGraphError.self) { try context.save() })
            #expect(error.conflicts.first?.persistedSnapshot?["age"] == .attribute(.int16(31)))
            #expect(mine.isDeleted, "the delete is still pending")
        case .rollback:
            try context.save()
            #expect(!mine.isDeleted && mine.managedObjectContext === context)
            #expect(try mine.value(forKey: "age") == .int16(31), "the object takes the store's values")
            #expect(try stack.read { try $0.count(for: .make("Person")) } == 1)
        default:
            try context.save()
            #expect(try stack.read { try $0.count(for: .make("Person")) } == 0, "the delete was saved")
        }
    }

    /// To-many relationships merge member by member: two contexts each adding an employee to
    /// one department both keep theirs, under either property policy.
    @Test(arguments: conflictDetectingStoreFixtures, [MergePolicy.MergeType.mergeByPropertyObjectTrump, .mergeByPropertyStoreTrump])
    func membersAddedOnBothSidesOfAToManyAreAllKept(fixture: any StoreFixture, policy: MergePolicy.MergeType) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let setup = stack.context()
        let sales = try setup.makeDepartment("Sales")
        try setup.makePerson("Ada").setValue(sales, forKey: "department")
        try setup.save()
        let context = stack.context()
        context.mergePolicy = MergePolicy(merge: policy)
        let mySales = try context.existingObject(with: sales.objectID)
        _ = try mySales.objects(forKey: "employees")
        let other = stack.context()
        let theirSales = try other.existingObject(with: sales.objectID)
        try theirSales.setValue("Sales EU", forKey: "name")
        try other.makePerson("Bob").setValue(theirSales, forKey: "department")
        try other.save()
        try context.makePerson("Cy").setValue(mySales, forKey: "department")
        try mySales.setValue("Sales US", forKey: "name")
        try context.save()
        try stack.read { reader in
            let department = try reader.existingObject(with: sales.objectID)
            let names = try department.objects(forKey: "employees").map { try $0.value(forKey: "name").stringValue ?? "" }
            #expect(Set(names) == ["Ada", "Bob", "Cy"])
            #expect(try department.value(forKey: "name") == (policy == .mergeByPropertyObjectTrump ? "Sales US" : "Sales EU"))
        }
    }

    /// `detectConflicts(for:)` (seed 003): an unchanged object changed in the store fails the
    /// next save; unmarked, the same save goes through; marked and unchanged in the store, too.
    @Test(arguments: conflictDetectingStoreFixtures)
    func detectConflictsChecksAnUnchangedObjectAtTheNextSave(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let setup = stack.context()
        let ada = try setup.makePerson("Ada", age: 30)
        let bob = try setup.makePerson("Bob", age: 40)
        try setup.save()
        let context = stack.context()
        let myAda = try context.existingObject(with: ada.objectID)
        context.detectConflicts(for: myAda)
        context.detectConflicts(for: try context.existingObject(with: bob.objectID))
        let other = stack.context()
        try other.existingObject(with: ada.objectID).setValue(.int16(31), forKey: "age")
        try other.save()
        try context.makePerson("Cy")
        let error = try #require(#expect(throws: ObjectGraphError.self) { try context.save() })
        #expect(error.conflicts.map(\.objectID) == [ada.objectID], "only the object changed in the store conflicts")
        #expect(try stack.read { try $0.count(for: .make("Person")) } == 2, "nothing was written")
        context.mergePolicy = .mergeByPropertyObjectTrump
        try context.save()
        #expect(try myAda.value(forKey: "age") == .int16(31), "resolving a locked object takes the store's values")
        #expect(try stack.read { try $0.count(for: .make("Person")) } == 3)

        // Unmarked: a later change in the store does not stop an unrelated save.
        try other.existingObject(with: ada.objectID).setValue(.int16(32), forKey: "age")
        try other.save()
        context.mergePolicy = .error
        try context.makePerson("Dee")
        try context.save()
    }

    /// A subclass resolves conflicts its own way and leaves the rest to `super`.
    @Test(arguments: conflictDetectingStoreFixtures)
    func aSubclassedPolicySeesTheConflictsAndCanDeferToItsType(fixture: any StoreFixture) throws {
        final class Recording: MergePolicy, @unchecked Sendable {
            var seen: [[ManagedObjectID]] = []
            override func resolve(optimisticLockingConflicts list: [MergeConflict]) throws {
                seen.append(list.map(\.objectID))
                // Keep the store's age, whatever the type says, then let the type merge the rest.
                for conflict in list {
                    if let age = conflict.persistedSnapshot?["age"]?.attributeValue {
                        conflict.sourceObject.managedObjectContext?.refresh(conflict.sourceObject, mergeChanges: true)
                        try conflict.sourceObject.setValue(age, forKey: "age")
                    }
                }
                try super.resolve(optimisticLockingConflicts: list)
            }
        }
        let stack = try fixture.makeStack(model: try TestModel.make())
        let setup = stack.context()
        let ada = try setup.makePerson("Ada", age: 30)
        try setup.save()
        let context = stack.context()
        let policy = Recording(merge: .mergeByPropertyObjectTrump)
        context.mergePolicy = policy
        let mine = try context.existingObject(with: ada.objectID)
        let other = stack.context()
        try other.existingObject(with: ada.objectID).setValue(.int16(41), forKey: "age")
        try other.save()
        try mine.setValue(.int16(50), forKey: "age")
        try mine.setValue("Ada O", forKey: "name")
        try context.save()
        #expect(policy.seen == [[ada.objectID]], "called once, with the one conflict")
        try stack.read { reader in
            let row = try reader.existingObject(with: ada.objectID)
            #expect(try row.value(forKey: "age") == .int16(41))
            #expect(try row.value(forKey: "name") == "Ada O")
        }
    }
}

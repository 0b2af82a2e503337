import Foundation
import ObjectGraph
import Testing

/// Uniqueness constraints (Core Data's `NSEntityDescription.uniquenessConstraints`,
/// `NSConstraintConflict`, `NSMergePolicy.resolve(constraintConflicts:)` and
/// `NSManagedObjectConstraintMergeError`, 133021): what a save that would duplicate a
/// constrained value does, on every store that enforces them, under every merge policy.
@Suite("Conformance: uniqueness constraints and constraint conflicts")
struct ConstraintConformance {
    /// Tags unique by name; members unique by (team, number); animals (and dogs, below them)
    /// unique by code. Tags have posts (many-to-many) and an owner (to-one, nullify).
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Tag", properties: [
                .attribute("name", .string),
                .attribute("count", .integer64, defaultValue: 0),
                .attribute("note", .string),
                .toMany("posts", "Post", inverse: "tags"),
                .toOne("owner", "Owner", inverse: "tags"),
            ], uniquenessConstraints: [["name"]]),
            EntityDescription(name: "Post", properties: [
                .attribute("title", .string),
                .toMany("tags", "Tag", inverse: "posts"),
            ]),
            EntityDescription(name: "Owner", properties: [
                .attribute("name", .string),
                .toMany("tags", "Tag", inverse: "owner"),
            ]),
            EntityDescription(name: "Member", properties: [
                .attribute("team", .string),
                .attribute("number", .integer32),
                .attribute("nick", .string),
            ], uniquenessConstraints: [["team", "number"]]),
            EntityDescription(name: "Animal", properties: [.attribute("code", .string)], uniquenessConstraints: [["code"]]),
            EntityDescription(name: "Dog", superentity: "Animal", properties: [.attribute("breed", .string)]),
        ])
    }

    @discardableResult
    private func tag(_ context: ManagedObjectContext, _ name: String?, count: Int64 = 0, note: String? = nil) throws -> ManagedObject {
        let tag = try context.insertNewObject(forEntityName: "Tag")
        if let name { try tag.setValue(.string(name), forKey: "name") }
        try tag.setValue(.int64(count), forKey: "count")
        if let note { try tag.setValue(.string(note), forKey: "note") }
        return tag
    }

    @discardableResult
    private func post(_ context: ManagedObjectContext, _ title: String) throws -> ManagedObject {
        let post = try context.insertNewObject(forEntityName: "Post")
        try post.setValue(.string(title), forKey: "title")
        return post
    }

    /// The tags in the store, fetched by a fresh context: name → (count, note, post titles, owner).
    private func storedTags(_ stack: TestStack) throws -> [String: (count: Int64, note: String?, posts: Set<String>, owner: String?, id: ManagedObjectID)] {
        try stack.read { context in
            var tags: [String: (Int64, String?, Set<String>, String?, ManagedObjectID)] = [:]
            for tag in try context.fetch(.make("Tag")) {
                let name = try tag.value(forKey: "name").stringValue ?? "<nil>"
                #expect(tags[name] == nil, "one tag named \(name) in the store")
                let posts = Set(try tag.objects(forKey: "posts").map { try $0.value(forKey: "title").stringValue ?? "" })
                let owner = try tag.object(forKey: "owner").map { try $0.value(forKey: "name").stringValue ?? "" }
                tags[name] = (try tag.value(forKey: "count").integerValue ?? -1, try tag.value(forKey: "note").stringValue, posts, owner, tag.objectID)
            }
            return tags.mapValues { (count: $0.0, note: $0.1, posts: $0.2, owner: $0.3, id: $0.4) }
        }
    }

    /// A store holding tag "swift" (count 5, note "old", owner Ann, post P0), and a second
    /// context with `policy` that inserts another "swift" (count 9, post P1, no note, no owner).
    private func duplicateOfStoredTag(
        _ fixture: any StoreFixture, policy: MergePolicy.MergeType
    ) throws -> (stack: TestStack, stored: ManagedObjectID, context: ManagedObjectContext, duplicate: ManagedObject) {
        let stack = try fixture.makeStack(model: try Self.model())
        let setup = stack.context()
        let stored = try tag(setup, "swift", count: 5, note: "old")
        let owner = try setup.insertNewObject(forEntityName: "Owner")
        try owner.setValue("Ann", forKey: "name")
        try stored.setValue(owner, forKey: "owner")
        try stored.addObject(try post(setup, "P0"), toRelationship: "posts")
        try setup.save()
        let context = stack.context()
        context.mergePolicy = MergePolicy(merge: policy)
        let duplicate = try tag(context, "swift", count: 9)
        try duplicate.addObject(try post(context, "P1"), toRelationship: "posts")
        return (stack, stored.objectID, context, duplicate)
    }

    // MARK: The model

    /// A constraint must name stored attributes of its entity, at least one, none twice
    /// (Core Data's model editor refuses the rest).
    @Test func theModelRefusesConstraintsOnWhatNoStoreCanConstrain() throws {
        let cases: [(String, [[String]])] = [
            ("an unknown name", [["nope"]]), ("a relationship", [["owner"]]), ("a transient attribute", [["scratch"]]),
            ("an empty list", [[]]), ("a name twice", [["name", "name"]]),
        ]
        for (label, constraints) in cases {
            let error = #expect(throws: ObjectGraphError.self, "\(label)") {
                try ManagedObjectModel(entities: [
                    EntityDescription(name: "Owner", properties: [.attribute("name", .string), .toMany("tags", "Tag", inverse: "owner")]),
                    EntityDescription(name: "Tag", properties: [
                        .attribute("name", .string), .attribute("scratch", .string, transient: true),
                        .toOne("owner", "Owner", inverse: "tags"),
                    ], uniquenessConstraints: constraints),
                ])
            }
            #expect(error?.code == .invalidModel, "\(label)")
        }
        let model = try Self.model()
        #expect(try model.entity(named: "Tag").uniquenessConstraints == [["name"]])
        #expect(try model.entity(named: "Dog").uniquenessConstraints == [], "a subentity declares none of its own")
    }

    // MARK: The error policy and the records

    /// Core Data: with `NSErrorMergePolicy` the save fails with
    /// `NSManagedObjectConstraintMergeError` (133021) whose conflict list has one
    /// `NSConstraintConflict` per duplicate; the store is untouched, even by the save's other
    /// objects, and the context keeps its changes.
    @Test(arguments: conflictDetectingStoreFixtures)
    func aDuplicateOfAStoredValueFailsTheSaveWithARecordAndWritesNothing(fixture: any StoreFixture) throws {
        let (stack, stored, context, duplicate) = try duplicateOfStoredTag(fixture, policy: .error)
        try tag(context, "unrelated")
        let error = try #require(throws: ObjectGraphError.self) { try context.save() }
        #expect(error.code == .constraintConflict)
        #expect(error.code.cocoaErrorCode == 133021)
        #expect(error.constraintConflicts.count == 1)
        let conflict = try #require(error.constraintConflicts.first)
        #expect(conflict.constraint == ["name"])
        #expect(conflict.constraintValues == ["name": "swift"])
        #expect(conflict.isDatabaseConflict)
        #expect(conflict.databaseObjectID == stored)
        #expect(conflict.databaseObject?.objectID == stored, "the context put the stored row's object in the record")
        #expect(conflict.databaseObject?.managedObjectContext === context)
        #expect(conflict.databaseSnapshot?["count"] == .attribute(.int64(5)))
        #expect(conflict.databaseSnapshot?["note"] == .attribute("old"))
        #expect(conflict.conflictingObjects.count == 1 && conflict.conflictingObjects[0] === duplicate)
        #expect(conflict.conflictingSnapshots.count == 1 && conflict.conflictingSnapshots[0] == nil, "an inserted object has no saved values")

        let tags = try storedTags(stack)
        #expect(tags.keys.sorted() == ["swift"], "nothing was written: not the duplicate, not the unrelated tag")
        #expect(tags["swift"]?.count == 5)
        #expect(context.hasChanges && duplicate.isInserted, "the context keeps its changes")
        // Fixed by the user, the save goes through.
        try duplicate.setValue("swift-2", forKey: "name")
        try context.save()
        #expect(try storedTags(stack).keys.sorted() == ["swift", "swift-2", "unrelated"])
    }

    /// Objects of one save that share a constrained value conflict with each other: one
    /// record, no database object, every object in it.
    @Test(arguments: conflictDetectingStoreFixtures)
    func duplicatesWithinOneSaveFailItWithOneRecordHoldingThemAll(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try Self.model())
        let context = stack.context()
        let first = try tag(context, "x"), second = try tag(context, "x"), third = try tag(context, "x")
        try tag(context, "y")
        let error = try #require(throws: ObjectGraphError.self) { try context.save() }
        #expect(error.code == .constraintConflict)
        let conflict = try #require(error.constraintConflicts.first)
        #expect(error.constraintConflicts.count == 1)
        #expect(!conflict.isDatabaseConflict && conflict.databaseObject == nil && conflict.databaseSnapshot == nil)
        #expect(Set(conflict.conflictingObjects.map(ObjectIdentifier.init)) == Set([first, second, third].map(ObjectIdentifier.init)))
        #expect(try storedTags(stack).isEmpty)
    }

    // MARK: Each policy, against a stored row

    /// Each policy against a row already in the store (Core Data's NSMergePolicy): object
    /// trump updates the stored row in place with every attribute of the inserted object
    /// (the note it never set too, as Core Data does) and its posts, keeping the owner it did
    /// not set; store trump keeps the row's values and takes the posts; overwrite puts the new
    /// object in the row's place, with the row's posts; rollback drops the new object.
    @Test(arguments: conflictDetectingStoreFixtures, MergePolicy.MergeType.allCases)
    func eachPolicyResolvesADuplicateOfAStoredRowAsCoreDataDoes(fixture: any StoreFixture, policy: MergePolicy.MergeType) throws {
        let (stack, stored, context, duplicate) = try duplicateOfStoredTag(fixture, policy: policy)
        if policy == .error {
            #expect(throws: ObjectGraphError.self) { try context.save() }
            return
        }
        let newID = duplicate.objectID
        try context.save()
        #expect(!context.hasChanges)
        let tags = try storedTags(stack)
        let swift = try #require(tags["swift"])
        #expect(tags.count == 1, "one tag named swift")
        switch policy {
        case .mergeByPropertyObjectTrump:
            #expect(swift.id == stored, "the stored row was updated in place")
            #expect(swift.count == 9 && swift.note == nil)
            #expect(swift.posts == ["P0", "P1"] && swift.owner == "Ann")
            #expect(duplicate.managedObjectContext == nil, "the duplicate left the context")
            let merged = try context.existingObject(with: stored)
            #expect(try merged.value(forKey: "count") == .int64(9), "the context's object of the row has the saved values")
        case .mergeByPropertyStoreTrump:
            #expect(swift.id == stored)
            #expect(swift.count == 5 && swift.note == "old")
            #expect(swift.posts == ["P0", "P1"] && swift.owner == "Ann")
            #expect(duplicate.managedObjectContext == nil)
        case .overwrite:
            #expect(swift.id != stored && swift.id == duplicate.objectID, "the new object replaced the stored row")
            #expect(swift.count == 9 && swift.note == nil)
            #expect(swift.posts == ["P0", "P1"] && swift.owner == nil)
            #expect(duplicate.managedObjectContext === context && !duplicate.isInserted)
        case .rollback:
            #expect(swift.id == stored)
            #expect(swift.count == 5 && swift.note == "old" && swift.posts == ["P0"])
            #expect(duplicate.managedObjectContext == nil)
            #expect(try stack.read { try $0.count(for: .make("Post")) } == 2, "the post inserted with it is saved, without the tag")
        case .error:
            break
        }
        _ = newID
    }

    /// The saved-object notification reports what the resolved save wrote: under object
    /// trump the stored row as updated, not the duplicate as inserted.
    @Test(arguments: conflictDetectingStoreFixtures)
    func theSaveNotificationReportsWhatTheResolvedSaveWrote(fixture: any StoreFixture) throws {
        let (_, stored, context, duplicate) = try duplicateOfStoredTag(fixture, policy: .mergeByPropertyObjectTrump)
        let duplicateID = duplicate.objectID
        let box = NotificationBox()
        let observer = NotificationCenter.default.addObserver(
            forName: ManagedObjectContext.didSaveObjectIDsNotification, object: context, queue: nil
        ) { box.record($0) }
        defer { NotificationCenter.default.removeObserver(observer) }
        try context.save()
        let info = try #require(box.last)
        let inserted = info[ManagedObjectContext.NotificationKey.insertedObjectIDs.rawValue] as? Set<ManagedObjectID> ?? []
        let updated = info[ManagedObjectContext.NotificationKey.updatedObjectIDs.rawValue] as? Set<ManagedObjectID> ?? []
        #expect(updated.contains(stored))
        #expect(!inserted.contains(where: { $0.entity.name == "Tag" }), "no tag was inserted")
        #expect(!inserted.contains(duplicateID) && !updated.contains(duplicateID))
    }

    // MARK: Each policy, within one save

    /// Duplicates within one save (Core Data keeps the first inserted object): the merging
    /// policies give it the values the others set (the last one's win) and their posts;
    /// overwrite and rollback keep it as it is.
    @Test(arguments: conflictDetectingStoreFixtures, MergePolicy.MergeType.allCases)
    func eachPolicyResolvesDuplicatesWithinOneSave(fixture: any StoreFixture, policy: MergePolicy.MergeType) throws {
        let stack = try fixture.makeStack(model: try Self.model())
        let context = stack.context()
        context.mergePolicy = MergePolicy(merge: policy)
        let first = try tag(context, "x", count: 1)
        try first.addObject(try post(context, "A"), toRelationship: "posts")
        let second = try tag(context, "x", count: 2, note: "n")
        try second.addObject(try post(context, "B"), toRelationship: "posts")
        if policy == .error {
            #expect(throws: ObjectGraphError.self) { try context.save() }
            return
        }
        try context.save()
        let tags = try storedTags(stack)
        let x = try #require(tags["x"])
        #expect(tags.count == 1)
        #expect(x.id == first.objectID, "the first inserted object is kept")
        #expect(second.managedObjectContext == nil)
        if policy == .mergeByPropertyObjectTrump || policy == .mergeByPropertyStoreTrump {
            #expect(x.count == 2 && x.note == "n" && x.posts == ["A", "B"])
        } else {
            #expect(x.count == 1 && x.note == nil && x.posts == ["A"])
        }
    }

    // MARK: Updates, deletes, nulls, compound and inherited constraints

    /// An update that takes a stored object's value conflicts; with rollback its change is
    /// discarded, with object trump the other row takes its changes and it is deleted.
    @Test(arguments: conflictDetectingStoreFixtures)
    func anUpdateToAnotherRowsValueConflictsAndIsResolvedByThePolicy(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try Self.model())
        let setup = stack.context()
        let a = try tag(setup, "a", count: 1), b = try tag(setup, "b", count: 2)
        try setup.save()

        let context = stack.context()
        let mine = try context.existingObject(with: b.objectID)
        try mine.setValue("a", forKey: "name")
        let error = try #require(throws: ObjectGraphError.self) { try context.save() }
        let conflict = try #require(error.constraintConflicts.first)
        #expect(conflict.databaseObjectID == a.objectID && conflict.conflictingObjects.first === mine)
        #expect(conflict.conflictingSnapshots.first??["name"] == .attribute("b"), "the updated object's saved values")

        context.mergePolicy = .rollback
        try context.save()
        #expect(try storedTags(stack).mapValues(\.count) == ["a": 1, "b": 2])

        try mine.setValue("a", forKey: "name")
        try mine.setValue(.int64(7), forKey: "count")
        context.mergePolicy = .mergeByPropertyObjectTrump
        try context.save()
        let tags = try storedTags(stack)
        #expect(tags.mapValues(\.count) == ["a": 7], "a took b's changed count; b was deleted")
        #expect(tags["a"]?.id == a.objectID)
    }

    /// Values that change hands within one save do not conflict: a swap, and a delete with an
    /// insert of the deleted value.
    @Test(arguments: conflictDetectingStoreFixtures)
    func valuesThatChangeHandsInOneSaveDoNotConflict(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try Self.model())
        let setup = stack.context()
        let a = try tag(setup, "a", count: 1), b = try tag(setup, "b", count: 2), c = try tag(setup, "c", count: 3)
        try setup.save()
        let context = stack.context()
        try context.existingObject(with: a.objectID).setValue("b", forKey: "name")
        try context.existingObject(with: b.objectID).setValue("a", forKey: "name")
        context.delete(try context.existingObject(with: c.objectID))
        try tag(context, "c", count: 30)
        try context.save()
        #expect(try storedTags(stack).mapValues(\.count) == ["a": 2, "b": 1, "c": 30])
    }

    /// A null is never a duplicate (as SQL's UNIQUE); a compound constraint conflicts only when
    /// every value is the same.
    @Test(arguments: conflictDetectingStoreFixtures)
    func nullsNeverConflictAndACompoundConstraintNeedsEveryValue(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try Self.model())
        let context = stack.context()
        func member(_ team: String?, _ number: Int32?) throws {
            let member = try context.insertNewObject(forEntityName: "Member")
            if let team { try member.setValue(.string(team), forKey: "team") }
            if let number { try member.setValue(.int32(number), forKey: "number") }
        }
        try member("red", 1); try member("red", 2); try member("blue", 1)
        try member(nil, 1); try member(nil, 1); try member("red", nil); try member("red", nil)
        try tag(context, nil); try tag(context, nil)
        try context.save()
        #expect(try stack.read { try $0.count(for: .make("Member")) } == 7)

        try member("red", 2)
        let error = try #require(throws: ObjectGraphError.self) { try context.save() }
        let conflict = try #require(error.constraintConflicts.first)
        #expect(conflict.constraint == ["team", "number"])
        #expect(conflict.constraintValues == ["team": "red", "number": .int32(2)])
    }

    /// A constraint declared by an entity holds across its subentities: a dog cannot take an
    /// animal's code.
    @Test(arguments: conflictDetectingStoreFixtures)
    func aConstraintHoldsAcrossTheDeclaringEntitysSubentities(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try Self.model())
        let setup = stack.context()
        let animal = try setup.insertNewObject(forEntityName: "Animal")
        try animal.setValue("A1", forKey: "code")
        try setup.save()
        let context = stack.context()
        let dog = try context.insertNewObject(forEntityName: "Dog")
        try dog.setValue("A1", forKey: "code")
        let error = try #require(throws: ObjectGraphError.self) { try context.save() }
        #expect(error.constraintConflicts.first?.databaseObjectID == animal.objectID)
        try dog.setValue("D1", forKey: "code")
        try context.save()
        let third = stack.context()
        let another = try third.insertNewObject(forEntityName: "Animal")
        try another.setValue("D1", forKey: "code")
        let reverse = try #require(throws: ObjectGraphError.self) { try third.save() }
        #expect(reverse.constraintConflicts.first?.databaseObjectID == dog.objectID, "an animal cannot take a dog's code")
    }

    /// Two contexts inserting the same value: the second save finds the first's row (the
    /// check runs in the store, in the save's transaction).
    @Test(arguments: conflictDetectingStoreFixtures)
    func theSecondOfTwoContextsInsertingTheSameValueConflicts(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try Self.model())
        let one = stack.context(), two = stack.context()
        try tag(one, "z", count: 1)
        let late = try tag(two, "z", count: 2)
        try one.save()
        let error = try #require(throws: ObjectGraphError.self) { try two.save() }
        #expect(error.constraintConflicts.first?.conflictingObjects.first === late)
        two.mergePolicy = .mergeByPropertyObjectTrump
        try two.save()
        #expect(try storedTags(stack).mapValues(\.count) == ["z": 2])
    }

    // MARK: Oracle

    /// Random inserts, renames and deletes of tags named from a small set, saved with the
    /// error policy: a save fails exactly when the names it would leave are not unique (the
    /// oracle: the store's names with the save applied), and then the store is untouched;
    /// after a failure the context rolls back.
    @Test(arguments: conflictDetectingStoreFixtures)
    func aSaveFailsExactlyWhenTheNamesItWouldLeaveAreNotUnique(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try Self.model())
        var generator = RandomizedConformance.SeededGenerator(state: 0xC0FFEE)
        var stored: [ManagedObjectID: String?] = [:]
        let names = ["a", "b", "c", "d", "e", "f"]
        for round in 0..<60 {
            let context = stack.context()
            var objects: [ManagedObjectID: ManagedObject] = [:]
            for id in stored.keys { objects[id] = try context.existingObject(with: id) }
            var inserted: [ManagedObject] = []
            var expected = stored
            for _ in 0..<(1 + generator.below(3)) {
                let name: String? = generator.below(8) == 0 ? nil : names[generator.below(names.count)]
                switch generator.below(3) {
                case 0:
                    inserted.append(try tag(context, name))
                case 1:
                    guard let id = objects.keys.sorted(by: { "\($0)" < "\($1)" }).dropFirst(objects.isEmpty ? 0 : generator.below(objects.count)).first,
                        let object = objects[id], !object.isDeleted else { continue }
                    try object.setValue(name.map(AttributeValue.string) ?? .null, forKey: "name")
                    expected[id] = name
                default:
                    guard let id = objects.keys.sorted(by: { "\($0)" < "\($1)" }).dropFirst(objects.isEmpty ? 0 : generator.below(objects.count)).first,
                        let object = objects[id] else { continue }
                    context.delete(object)
                    expected[id] = nil
                    objects[id] = nil
                }
            }
            let finalNames = Array(expected.values.compactMap { $0 }) + (try inserted.compactMap { try $0.value(forKey: "name").stringValue })
            let unique = Set(finalNames).count == finalNames.count
            do {
                try context.save()
                #expect(unique, "round \(round): the save went through with duplicate names \(finalNames.sorted())")
                stored = expected
                for object in inserted { stored[object.objectID] = try object.value(forKey: "name").stringValue }
            } catch let error as ObjectGraphError {
                #expect(!unique && error.code == .constraintConflict, "round \(round): \(error)")
                context.rollback()
            }
            let inStore = try stack.read { context in
                try context.fetch(.make("Tag")).map { try $0.value(forKey: "name").stringValue }
            }
            #expect(inStore.sorted { ($0 ?? "") < ($1 ?? "") } == stored.values.sorted { ($0 ?? "") < ($1 ?? "") }, "round \(round)")
        }
    }
}

/// The last notification's user info, recorded by an observer (notifications are posted
/// on the saving thread).
private final class NotificationBox: @unchecked Sendable {
    // @unchecked: written and read on the test's thread only (the save posts synchronously).
    var last: [AnyHashable: Any]?
    func record(_ notification: Notification) { last = notification.userInfo }
}

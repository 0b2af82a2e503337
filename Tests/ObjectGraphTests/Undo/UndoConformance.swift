import Foundation
import ObjectGraph
import Testing

extension RandomizedConformance.SeededGenerator {
    /// A number in `0..<bound`.
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
}

/// Undo and redo through a context's undo manager (seed 003: `undoManager`, `undo`, `redo`,
/// `processPendingChanges`, `rollback`), on every store.
@Suite("Conformance: undo and redo")
struct UndoConformance {
    /// What the context shows of one object: nil when it is not there (deleted, or gone);
    /// relationships as positions in the list of tracked objects.
    private struct ObjectState: Equatable, CustomStringConvertible {
        var values: [String: AttributeValue]
        var toOne: [String: Int?]
        var toMany: [String: [Int]]
        var description: String { "\(values) \(toOne) \(toMany)" }
    }

    private static func state(of objects: [ManagedObject], in context: ManagedObjectContext) throws -> [ObjectState?] {
        var position: [ObjectIdentifier: Int] = [:]
        for (index, object) in objects.enumerated() { position[ObjectIdentifier(object)] = index }
        func index(_ object: ManagedObject?) -> Int? { object.flatMap { position[ObjectIdentifier($0)] } }
        return try objects.map { object in
            guard object.managedObjectContext === context, !object.isDeleted else { return nil }
            switch object.entity.name {
            case "Person":
                return ObjectState(
                    values: ["name": try object.value(forKey: "name"), "age": try object.value(forKey: "age")],
                    toOne: ["department": index(try object.object(forKey: "department"))], toMany: [:])
            case "Department":
                return ObjectState(
                    values: ["name": try object.value(forKey: "name")], toOne: [:],
                    toMany: ["employees": try object.objects(forKey: "employees").compactMap(index).sorted()])
            default:
                return ObjectState(
                    values: ["title": try object.value(forKey: "title")], toOne: [:],
                    toMany: ["members": try object.objects(forKey: "members").compactMap(index)])
            }
        }
    }

    /// Random edits, an event at a time (inserts, attribute and relationship changes, ordered
    /// members, deletes with their delete rules), a save now and then; the state after each
    /// event is recorded. Undoing one level at a time goes back through every recorded state,
    /// and redoing comes forward through them again.
    @Test(arguments: allStoreFixtures, [UInt64(1), 2, 3])
    func undoAndRedoWalkBackAndForthThroughEveryRecordedState(fixture: any StoreFixture, seed: UInt64) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        context.undoManager = ManagedUndoManager()
        var random = RandomizedConformance.SeededGenerator(state: seed)
        var objects: [ManagedObject] = []
        func alive(_ entity: String) -> [ManagedObject] {
            objects.filter { $0.entity.name == entity && $0.managedObjectContext === context && !$0.isDeleted }
        }
        // Project.members has no inverse: people leave their projects before they are deleted
        // (else the save refuses the dangling reference).
        func leaveProjects(_ people: [ManagedObject]) throws {
            for project in alive("Project") {
                let members = try project.objects(forKey: "members")
                if members.contains(where: { people.contains($0) }) {
                    try project.setValue(members.filter { !people.contains($0) }, forKey: "members")
                }
            }
        }
        var states = [try Self.state(of: objects, in: context)]
        for step in 0..<40 {
            for _ in 0...random.below(3) {
                let people = alive("Person"), departments = alive("Department"), projects = alive("Project")
                switch random.below(10) {
                case 0:
                    objects.append(try context.makePerson("P\(objects.count)", age: Int16(random.below(90))))
                case 1:
                    objects.append(try context.makeDepartment("D\(objects.count)"))
                case 2:
                    let project = try context.insertNewObject(forEntityName: "Project")
                    try project.setValue("J\(objects.count)", forKey: "title")
                    objects.append(project)
                case 3 where !people.isEmpty:
                    try people[random.below(people.count)].setValue(.int16(Int16(random.below(90))), forKey: "age")
                case 4 where !people.isEmpty:
                    let person = people[random.below(people.count)]
                    try person.setValue("\(try person.value(forKey: "name").stringValue ?? "")'", forKey: "name")
                case 5 where !people.isEmpty:
                    let department = departments.isEmpty || random.below(4) == 0 ? nil : departments[random.below(departments.count)]
                    try people[random.below(people.count)].setValue(department, forKey: "department")
                case 6 where !people.isEmpty && !projects.isEmpty:
                    let project = projects[random.below(projects.count)]
                    var members = try project.objects(forKey: "members")
                    if !members.isEmpty && random.below(2) == 0 {
                        members.remove(at: random.below(members.count))
                    } else {
                        let person = people[random.below(people.count)]
                        if !members.contains(person) { members.insert(person, at: random.below(members.count + 1)) }
                    }
                    try project.setValue(members, forKey: "members")
                case 7 where !people.isEmpty:
                    let person = people[random.below(people.count)]
                    try leaveProjects([person])
                    context.delete(person)
                case 8 where !departments.isEmpty && random.below(3) == 0:
                    // Cascades to the department's employees.
                    let department = departments[random.below(departments.count)]
                    try leaveProjects(try department.objects(forKey: "employees"))
                    context.delete(department)
                case 9 where step % 7 == 6 && random.below(2) == 0:
                    // A save in the middle: undo reaches back past it.
                    context.processPendingChanges()
                    states.append(try Self.state(of: objects, in: context))
                    try context.save()
                    continue
                default:
                    break
                }
            }
            context.processPendingChanges()
            states.append(try Self.state(of: objects, in: context))
        }
        // Objects made later are absent from earlier states. Saves end an event with nothing
        // in it; equal neighbouring states are one undo level.
        states = states.map { $0 + Array(repeating: nil, count: objects.count - $0.count) }
        var levels = [states[0]]
        for state in states.dropFirst() where state != levels.last! { levels.append(state) }
        let manager = try #require(context.undoManager)
        for level in levels.indices.reversed().dropFirst() {
            #expect(manager.canUndo)
            try context.undo()
            let now = try Self.state(of: objects, in: context)
            #expect(now == levels[level], "undone to level \(level)")
            if now != levels[level] { return }
        }
        #expect(!manager.canUndo, "every level undone")
        for level in levels.indices.dropFirst() {
            try context.redo()
            #expect(try Self.state(of: objects, in: context) == levels[level], "redone to level \(level)")
        }
        #expect(!manager.canRedo)
        // The graph after redoing everything saves and reads back as it is.
        try context.save()
    }

    /// Undo after a save makes new changes, which the next save writes: an attribute goes
    /// back, an insert is deleted, and a delete brings the object back under its ID with its
    /// values.
    @Test(arguments: allStoreFixtures)
    func undoAfterASaveMakesChangesTheNextSaveWrites(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        context.undoManager = ManagedUndoManager()
        let ada = try context.makePerson("Ada", age: 30)
        let bob = try context.makePerson("Bob", age: 40)
        try context.save()
        try ada.setValue(.int16(31), forKey: "age")
        context.processPendingChanges()
        context.delete(bob)
        context.processPendingChanges()
        let cy = try context.makePerson("Cy", age: 50)
        try context.save()
        #expect(try stack.read { try $0.names(.make("Person", sortedBy: ["name"])) } == ["Ada", "Cy"])

        try context.undo()  // Cy's insert
        #expect(cy.isDeleted)
        try context.undo()  // Bob's delete
        let back = try #require(context.registeredObject(for: bob.objectID))
        #expect(back === bob && bob.isInserted && !bob.objectID.isTemporaryID)
        try context.undo()  // Ada's age
        #expect(try ada.value(forKey: "age") == .int16(30) && ada.isUpdated)
        try context.save()
        try stack.read { reader in
            #expect(try reader.names(.make("Person", sortedBy: ["name"])) == ["Ada", "Bob"])
            #expect(try reader.existingObject(with: ada.objectID).value(forKey: "age") == .int16(30))
            let bobAgain = try reader.existingObject(with: bob.objectID)
            #expect(try bobAgain.value(forKey: "age") == .int16(40), "the deleted object came back with its values, under its ID")
        }
        try context.redo()
        try context.redo()
        try context.redo()
        try context.save()
        #expect(try stack.read { try $0.names(.make("Person", sortedBy: ["name"])) } == ["Ada", "Cy"])
        #expect(try stack.read { try $0.existingObject(with: ada.objectID).value(forKey: "age") } == .int16(31))
    }

    /// Undoing a cascading delete brings back the cascaded objects and the relationships the
    /// delete rules nullified, on both ends.
    @Test(arguments: allStoreFixtures)
    func undoingACascadingDeleteRestoresTheCascadeAndBothEndsOfRelationships(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let sales = try context.makeDepartment("Sales")
        let ada = try context.makePerson("Ada"), bob = try context.makePerson("Bob")
        try ada.setValue(sales, forKey: "department")
        try bob.setValue(sales, forKey: "department")
        let badge = try context.insertNewObject(forEntityName: "Badge")
        try ada.setValue(badge, forKey: "badge")
        try context.save()
        context.undoManager = ManagedUndoManager()
        context.delete(sales)
        context.processPendingChanges()
        #expect(ada.isDeleted && bob.isDeleted && badge.isDeleted, "the delete cascaded to the employees and Ada's badge")
        try context.undo()
        #expect(!sales.isDeleted && !ada.isDeleted && !bob.isDeleted && !badge.isDeleted)
        #expect(!context.hasChanges, "everything is as saved")
        #expect(Set(try sales.objects(forKey: "employees")) == [ada, bob])
        #expect(try ada.object(forKey: "department") === sales && ada.object(forKey: "badge") === badge)
        #expect(try badge.object(forKey: "owner") === ada)
        try context.redo()
        try context.save()
        #expect(try stack.read { try $0.count(for: .make("Person")) + $0.count(for: .make("Badge")) } == 0)
    }

    /// rollback() and reset() clear the undo stack; no undo manager is the default.
    @Test func rollbackAndResetRemoveEveryUndoActionAndThereIsNoManagerByDefault() throws {
        let stack = try InMemoryFixture().makeStack(model: try TestModel.make())
        let context = stack.context()
        #expect(context.undoManager == nil)
        let manager = ManagedUndoManager()
        context.undoManager = manager
        try context.makePerson("Ada")
        context.processPendingChanges()
        #expect(manager.canUndo)
        context.rollback()
        #expect(!manager.canUndo && !manager.canRedo)
        try context.makePerson("Bob")
        context.processPendingChanges()
        try context.undo()
        #expect(manager.canRedo)
        context.reset()
        #expect(!manager.canUndo && !manager.canRedo)
    }

    /// Without event grouping, an explicit group spanning several events is undone as one.
    @Test func anExplicitGroupAcrossEventsIsUndoneAsOne() throws {
        let stack = try InMemoryFixture().makeStack(model: try TestModel.make())
        let context = stack.context()
        let manager = ManagedUndoManager()
        manager.groupsByEvent = false
        context.undoManager = manager
        manager.beginUndoGrouping()
        let ada = try context.makePerson("Ada", age: 30)
        context.processPendingChanges()
        try ada.setValue(.int16(31), forKey: "age")
        context.processPendingChanges()
        try manager.endUndoGrouping()
        manager.setActionName("Add Ada")
        #expect(manager.undoMenuItemTitle == "Undo Add Ada")
        try context.undo()
        #expect(ada.managedObjectContext == nil && context.insertedObjects.isEmpty, "both events undone: the insert is gone")
        try context.redo()
        #expect(ada.managedObjectContext === context && ada.isInserted)
        #expect(try ada.value(forKey: "age") == .int16(31))
    }

    /// An undo is an event of its own: observers hear of the objects it changed.
    @Test func anUndoPostsTheObjectsItChanged() throws {
        let stack = try InMemoryFixture().makeStack(model: try TestModel.make())
        let context = stack.context()
        let ada = try context.makePerson("Ada", age: 30)
        try context.save()
        context.undoManager = ManagedUndoManager()
        try ada.setValue(.int16(31), forKey: "age")
        context.processPendingChanges()
        let recorder = NotificationRecorder(ManagedObjectContext.objectsDidChangeNotification, from: context)
        try context.undo()
        #expect(recorder.last?.updated == [ada])
        #expect(try ada.value(forKey: "age") == .int16(30))
        #expect(!ada.hasChanges, "back at its committed value")
    }
}

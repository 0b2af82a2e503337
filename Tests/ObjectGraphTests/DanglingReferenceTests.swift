import ObjectGraph
import Testing

/// A save must not write a reference to an object the same save deletes (noAction leaves such
/// references in place; the context's validation catches them for every store).
@Suite struct DanglingReferenceTests {
    @Test(arguments: allStoreFixtures)
    func aReferenceToAnObjectTheSaveDeletesFailsValidation(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try TestModel.make())
        let context = stack.context()
        let ada = try context.makePerson("Ada")
        let note = try context.insertNewObject(forEntityName: "Note")
        try note.setValue(ada, forKey: "author")  // Person.notes is noAction
        context.delete(ada)
        do {
            try context.save()
            Issue.record("a save with a dangling reference succeeded")
        } catch let error as ObjectGraphError {
            let codes = error.code == .multipleValidationErrors ? error.detailedErrors.map(\.code) : [error.code]
            #expect(codes.contains(.danglingReference))
            #expect(error.isValidationError)
        }
        // Clearing the reference makes the save valid.
        try note.setValue(nil as ManagedObject?, forKey: "author")
        try context.save()
    }
}

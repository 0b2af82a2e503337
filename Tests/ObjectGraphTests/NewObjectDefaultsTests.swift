import Foundation
import ObjectGraph
import Testing

/// A new object starts with its entity's initial values (copied from one made with the
/// model): defaults of stored and transient attributes, no destination, no destinations;
/// a subentity's include its inherited ones. Two objects of one entity share nothing.
@Suite("New objects start with their defaults")
struct NewObjectDefaultsTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Shelf", properties: [
                .attribute("label", .string, defaultValue: "unnamed"),
                .attribute("capacity", .integer64, defaultValue: 12),
                .attribute("note", .string),
                .attribute("scratch", .string, defaultValue: "draft", transient: true),
                .toMany("books", "Book", inverse: "shelf"),
            ]),
            EntityDescription(name: "Bookcase", superentity: "Shelf", properties: [
                .attribute("doors", .integer64, defaultValue: 2),
                .toOne("room", "Book"),
            ]),
            EntityDescription(name: "Book", properties: [
                .attribute("title", .string),
                .toOne("shelf", "Shelf", inverse: "books"),
            ]),
        ])
    }

    @Test(arguments: allStoreFixtures)
    func insertedObjectsHoldTheirDefaultsAndShareNothing(fixture: any StoreFixture) throws {
        let stack = try fixture.makeStack(model: try Self.model())
        let context = stack.context()
        let shelf = try context.insertNewObject(forEntityName: "Shelf")
        #expect(try shelf.value(forKey: "label") == "unnamed")
        #expect(try shelf.value(forKey: "capacity") == 12)
        #expect(try shelf.value(forKey: "note") == .null)
        #expect(try shelf.value(forKey: "scratch") == "draft", "a transient default")
        #expect(try shelf.objects(forKey: "books").isEmpty)
        let changed = shelf.changedValues()
        #expect(changed["label"] == .attribute("unnamed") && changed["capacity"] == .attribute(12))
        #expect(changed["books"] == .relationship(.toMany([])))
        #expect(changed["note"] == nil && changed["scratch"] == nil, "no null default, no transient among the changes")

        let bookcase = try context.insertNewObject(forEntityName: "Bookcase")
        #expect(try bookcase.value(forKey: "label") == "unnamed", "an inherited default")
        #expect(try bookcase.value(forKey: "doors") == 2)
        #expect(try bookcase.value(forKey: "scratch") == "draft")
        #expect(bookcase.changedValues()["room"] == .relationship(.toOne(nil)))

        // A change to one new object leaves the next one's initial values alone.
        let book = try context.insertNewObject(forEntityName: "Book")
        try shelf.setValue(.string("fiction"), forKey: "label")
        try shelf.setValue(.string("kept"), forKey: "scratch")
        try shelf.setValue([book], forKey: "books")
        let second = try context.insertNewObject(forEntityName: "Shelf")
        #expect(try second.value(forKey: "label") == "unnamed")
        #expect(try second.value(forKey: "scratch") == "draft")
        #expect(try second.objects(forKey: "books").isEmpty)
        #expect(try book.object(forKey: "shelf") === shelf)

        try context.save()
        let reader = stack.context()
        let saved = try reader.existingObject(with: second.objectID)
        #expect(try saved.value(forKey: "label") == "unnamed" && saved.value(forKey: "capacity") == 12)
        #expect(try reader.existingObject(with: shelf.objectID).objects(forKey: "books").map(\.objectID) == [book.objectID])
    }
}

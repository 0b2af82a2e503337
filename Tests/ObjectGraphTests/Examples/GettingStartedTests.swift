import Foundation
import ObjectGraph
import Testing

/// The walk-through of the DocC article "Getting Started", step by step, so the article
/// stays true.
@Suite("Documentation: getting started")
struct GettingStartedTests {
    @Test func modelInsertSaveFetchFault() throws {
        // 1. Model
        let model = try ManagedObjectModel(entities: [
            EntityDescription(name: "Author", properties: [
                .attribute("name", .string, optional: false),
                .toMany("books", "Book", inverse: "author", deleteRule: .cascade),
            ]),
            EntityDescription(name: "Book", properties: [
                .attribute("title", .string, optional: false),
                .attribute("year", .integer16, rules: [.minimum(1450)]),
                .toOne("author", "Author", inverse: "books"),
            ]),
        ])

        // 2. Stack
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .inMemory, configuration: nil, at: nil, options: [:])
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)

        // 3. Insert
        let austen = try context.insertNewObject(forEntityName: "Author")
        try austen.setValue("Jane Austen", forKey: "name")
        for (title, year) in [("Emma", 1815), ("Persuasion", 1817)] {
            let book = try context.insertNewObject(forEntityName: "Book")
            try book.setValue(.string(title), forKey: "title")
            try book.setValue(.int64(Int64(year)), forKey: "year")
            try book.setValue(austen, forKey: "author")  // also adds the book to austen's "books"
        }

        // 4. Save
        try context.save()
        let uri = austen.objectID.uriRepresentation()  // x-coredata://<store>/Author/p1

        // 5. Fetch, in a fresh context
        let reader = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var request = FetchRequest(entityName: "Book")
        request.predicate = .greaterThan("year", 1816) && .equal("author.name", "Jane Austen")
        request.sortDescriptors = [FetchSortDescriptor(keyPath: "title")]
        let books = try reader.fetch(request)
        #expect(try FetchPredicate(format: "year > %d AND author.name == %@", 1816, "Jane Austen") == request.predicate)

        // 6. Fault
        let book = try #require(books.first)
        #expect(book.isFault)
        #expect(try book.value(forKey: "title") == "Persuasion")  // fires the fault
        #expect(!book.isFault)
        let author = try #require(try book.object(forKey: "author"))
        #expect(author.hasFault(forRelationshipNamed: "books"))
        #expect(try author.objects(forKey: "books").count == 2)

        // The URI leads back to the same object.
        let id = try #require(coordinator.managedObjectID(forURIRepresentation: uri))
        #expect(reader.object(with: id) === author)
    }

    @Test func minimalCustomStoreServesTheSameWalkThrough() throws {
        PersistentStoreCoordinator.registerStoreClass(DictionaryStore.self, type: DictionaryStore.type)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try TestModel.make())
        try coordinator.addPersistentStore(type: DictionaryStore.type)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let ada = try context.makePerson("Ada", age: 36)
        try context.save()
        let reader = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let found = try reader.fetch(.make("Person", .greaterThan("age", 30)))
        #expect(found.map(\.objectID) == [ada.objectID])
        #expect(try found.first?.value(forKey: "name") == "Ada")
    }
}

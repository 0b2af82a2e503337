import Foundation
import Strata
import StrataMacros
import Testing

// The README's two-entity program, as written there (names declared once).

@Entity final class Author: ManagedObject {
    @Attribute(.indexed) var name: String = ""
    @Relationship(inverse: \Book.author, deleteRule: .cascade) var books: Set<Book>
}

@Entity final class Book: ManagedObject {
    var title: String = ""
    var year: Int16?
    var author: Author?
}

@Suite struct ReadmeExampleTests {
    @Test func theReadmesTypedProgramRuns() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("strata-readme-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        StrataStore.register()
        let model = try ManagedObjectModel(types: [Author.self, Book.self])
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .strata, at: directory)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let lem = try context.insert(Author.self)
        lem.name = "Stanisław Lem"
        let solaris = try context.insert(Book.self)
        solaris.title = "Solaris"
        solaris.year = 1961
        solaris.author = lem
        try context.save()
        let sixties = try context.fetch(Book.self, where: #Predicate { ($0.year ?? 0) >= 1960 }, sortBy: [SortDescriptor(\.title)])
        #expect(sixties.map(\.title) == ["Solaris"])
        #expect(lem.books.count == 1)
        // Deleting the author cascades to the book.
        context.delete(lem)
        try context.save()
        #expect(try context.count(Book.self) == 0)
    }
}

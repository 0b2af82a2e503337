import Foundation
import Strata
import StrataMacros
import Testing

// Typed fetch requests and typed dictionary results (issue 18), on the README's Author and
// Book, against the by-name request on every store kind.

@Suite struct FetchDescriptorTests {
    static let books: [(title: String, year: Int16?, author: Int)] = [
        ("Solaris", 1961, 0), ("Eden", 1959, 0), ("Fiasco", 1986, 0), ("Lathe", 1971, 1), ("Always", 1985, 1), ("Untitled", nil, 1),
    ]

    /// A context on a new store of `type`, with two authors and six books saved.
    static func populated(_ type: PersistentStore.StoreType) throws -> (ManagedObjectContext, URL) {
        StrataStore.register()
        BinaryStore.register()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("strata-descriptor-\(UUID().uuidString)")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try ManagedObjectModel(types: [Author.self, Book.self]))
        if type == .inMemory { try coordinator.addPersistentStore(type: .inMemory) } else {
            try coordinator.addPersistentStore(type: type, at: directory)
        }
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let authors = try ["Lem", "Le Guin"].map { name in
            let author = try context.insert(Author.self)
            author.name = name
            return author
        }
        for book in books {
            let made = try context.insert(Book.self)
            made.title = book.title
            made.year = book.year
            made.author = authors[book.author]
        }
        try context.save()
        return (context, directory)
    }

    static let storeTypes: [PersistentStore.StoreType] = [.inMemory, .strata, .binary]

    // A descriptor's request is the request the format string makes, so stores plan both alike.
    @Test func aDescriptorTranslatesToTheRequestByName() throws {
        var descriptor = FetchDescriptor<Book>(
            predicate: #Predicate { ($0.year ?? 0) >= 1960 && $0.author?.name == "Lem" }, sortBy: [SortDescriptor(\.year, order: .reverse)])
        descriptor.fetchLimit = 5
        descriptor.fetchOffset = 1
        descriptor.fetchBatchSize = 2
        descriptor.includesSubentities = false
        descriptor.includePendingChanges = false
        descriptor.returnsObjectsAsFaults = false
        descriptor.relationshipKeyPathsForPrefetching = [\.author]
        let request = try descriptor.fetchRequest()
        #expect(request.entityName == "Book")
        #expect(request.predicate == (try FetchPredicate(format: "year != nil AND year >= 1960 AND author.name == 'Lem'")), "\(request.predicate!)")
        #expect(request.sortDescriptors == [FetchSortDescriptor(keyPath: "year", ascending: false)])
        #expect(request.fetchLimit == 5 && request.fetchOffset == 1 && request.fetchBatchSize == 2)
        #expect(!request.includesSubentities && !request.includesPendingChanges && !request.returnsObjectsAsFaults)
        #expect(request.relationshipKeyPathsForPrefetching == ["author"])
        // Defaults are the request's.
        let plain = try FetchDescriptor<Book>().fetchRequest()
        let byName = FetchRequest(entityName: "Book")
        #expect(plain.fetchLimit == byName.fetchLimit && plain.includesSubentities == byName.includesSubentities)
        #expect(plain.includesPendingChanges == byName.includesPendingChanges && plain.returnsObjectsAsFaults == byName.returnsObjectsAsFaults)
    }

    // Objects, counts and IDs through a descriptor are those of the by-name request, with
    // limits, offsets and pending changes, on every store.
    @Test(arguments: storeTypes)
    func descriptorsFetchWhatTheRequestByNameFetches(type: PersistentStore.StoreType) throws {
        let (context, directory) = try Self.populated(type)
        defer { try? FileManager.default.removeItem(at: directory) }
        var descriptor = FetchDescriptor<Book>(predicate: #Predicate { ($0.year ?? 0) > 1960 }, sortBy: [SortDescriptor(\.title)])
        #expect(try context.fetch(descriptor).map(\.title) == ["Always", "Fiasco", "Lathe", "Solaris"])
        #expect(try context.count(for: descriptor) == 4)
        descriptor.fetchOffset = 1
        descriptor.fetchLimit = 2
        let page = try context.fetch(descriptor)
        #expect(page.map(\.title) == ["Fiasco", "Lathe"])
        #expect(try context.fetchIdentifiers(descriptor) == page.map(\.objectID))
        var request = FetchRequest(entityName: "Book")
        request.predicate = try FetchPredicate(format: "year > 1960")
        request.sortDescriptors = [FetchSortDescriptor(keyPath: "title")]
        request.fetchOffset = 1
        request.fetchLimit = 2
        #expect(try context.fetch(request) == page)
        // An unsaved insert counts unless the descriptor leaves pending changes out.
        let new = try context.insert(Book.self)
        new.title = "Aniara"
        new.year = 1999
        var all = FetchDescriptor<Book>(predicate: #Predicate { ($0.year ?? 0) > 1960 })
        #expect(try context.count(for: all) == 5)
        all.includePendingChanges = false
        #expect(try context.count(for: all) == 4)
        // Prefetching through a typed key path loads the authors with the books.
        var prefetching = FetchDescriptor<Book>(sortBy: [SortDescriptor(\.title)])
        prefetching.relationshipKeyPathsForPrefetching = [\.author]
        prefetching.includePendingChanges = false
        #expect(try context.fetch(prefetching).compactMap { $0.author?.name }.count == 6)
    }

    // Typed values: one key path gives the values, several give tuples, `distinct` each
    // combination once; the same as the dictionary fetch by name.
    @Test(arguments: storeTypes)
    func fetchValuesAreTypedDictionaryResults(type: PersistentStore.StoreType) throws {
        let (context, directory) = try Self.populated(type)
        defer { try? FileManager.default.removeItem(at: directory) }
        let sorted = FetchDescriptor<Book>(sortBy: [SortDescriptor(\.title)])
        let titles: [String] = try context.fetchValues(sorted, \.title)
        #expect(titles == Self.books.map(\.title).sorted())
        let rows: [(String, Int16?)] = try context.fetchValues(sorted, \.title, \.year)
        #expect(rows.map(\.0) == titles)
        #expect(rows.first { $0.0 == "Untitled" }?.1 == .some(nil))
        #expect(rows.first { $0.0 == "Eden" }?.1 == 1959)
        let names: [String] = try context.fetchValues(FetchDescriptor<Author>(sortBy: [SortDescriptor(\.name)]), \.name, distinct: true)
        #expect(names == ["Le Guin", "Lem"])
        let decades = try context.fetchValues(FetchDescriptor<Book>(predicate: #Predicate { $0.year != nil }), \.year, distinct: true)
        #expect(Set(decades) == Set(Self.books.compactMap(\.year)))
        var request = FetchRequest(entityName: "Book")
        request.propertiesToFetch = ["title", "year"]
        request.sortDescriptors = [FetchSortDescriptor(keyPath: "title")]
        let byName = try context.fetchDictionaries(request)
        #expect(byName.map { $0["title"]?.attributeValue?.stringValue } == rows.map(\.0))
    }

    // A captured object ID stands for its object (`author == %@`), an entity-typed key path
    // compares with nil; the same objects as by name, on every store.
    @Test(arguments: storeTypes)
    func objectIDsAndNilInPredicatesStandForObjects(type: PersistentStore.StoreType) throws {
        let (context, directory) = try Self.populated(type)
        defer { try? FileManager.default.removeItem(at: directory) }
        let lem = try #require(try context.fetch(Author.self, where: #Predicate { $0.name == "Lem" }).first)
        let id = lem.objectID
        let byID = try context.fetch(FetchDescriptor<Book>(predicate: #Predicate { $0.author?.objectID == id }, sortBy: [SortDescriptor(\.title)]))
        var request = FetchRequest(entityName: "Book")
        request.predicate = try FetchPredicate(format: "author == %@", lem)
        request.sortDescriptors = [FetchSortDescriptor(keyPath: "title")]
        #expect(byID == (try context.fetch(request)) && byID.map(\.title) == ["Eden", "Fiasco", "Solaris"])
        let ids = [id]
        #expect(try context.fetch(Author.self, where: #Predicate { ids.contains($0.objectID) }) == [lem])
        let orphan = try context.insert(Book.self)
        orphan.title = "Orphan"
        #expect(try context.fetch(Book.self, where: #Predicate { $0.author == nil }).map(\.title) == ["Orphan"])
        #expect(try context.count(Book.self, where: #Predicate { $0.author != nil }) == 6)
    }

    // IDs encode as their URIs and decode through the coordinator the decoder is given; a
    // decoder without one, or a URI of no store of it, throws saying so.
    @Test func objectIDsEncodeAsTheirURIs() throws {
        let (context, directory) = try Self.populated(.strata)
        defer { try? FileManager.default.removeItem(at: directory) }
        let coordinator = try #require(context.persistentStoreCoordinator)
        let ids = try context.fetch(FetchDescriptor<Book>()).map(\.objectID)
        let data = try JSONEncoder().encode(ids)
        #expect(try JSONDecoder().decode([String].self, from: data) == ids.map { $0.uriRepresentation().absoluteString })
        let decoder = JSONDecoder()
        decoder.userInfo[.persistentStoreCoordinator] = coordinator
        #expect(try decoder.decode([ManagedObjectID].self, from: data) == ids)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([ManagedObjectID].self, from: data) }
        let foreign = try JSONEncoder().encode(["x-coredata://00000000-0000-0000-0000-000000000000/Book/p1"])
        #expect(throws: DecodingError.self) { try decoder.decode([ManagedObjectID].self, from: foreign) }
    }

    // A key path that names no stored property (a computed one) is refused, naming it.
    @Test func aKeyPathThatNamesNoPropertyIsRefused() throws {
        let (context, directory) = try Self.populated(.inMemory)
        defer { try? FileManager.default.removeItem(at: directory) }
        let error = try #require(throws: ObjectGraphError.self) { try context.fetchValues(FetchDescriptor<Book>(), \.shout) }
        #expect(error.code == .invalidFetchRequest && error.message.contains("no stored property"), "\(error.message)")
        var prefetching = FetchDescriptor<Book>()
        prefetching.relationshipKeyPathsForPrefetching = [\.shout]
        #expect(throws: ObjectGraphError.self) { try context.fetch(prefetching) }
    }
}

extension Book {
    /// Computed: no stored property.
    var shout: String { title.uppercased() }
}

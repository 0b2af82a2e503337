import Foundation
import ObjectGraph
import Testing

// Typed entities of a small library, named for fetches by hand (issue 18's macro will write
// `fetchKey(for:)`).

final class TypedAuthor: ManagedObject, FetchableEntity {
    @Managed("name") var name: String?
    @Managed("born") var born: Date?
    var books: [TypedBook] { ((try? objects(forKey: "books")) ?? []).compactMap { $0 as? TypedBook } }
    static let entityName = "Author"
    static func fetchKey(for keyPath: AnyKeyPath) -> String? {
        switch keyPath {
        case \TypedAuthor.name: "name"
        case \TypedAuthor.born: "born"
        case \TypedAuthor.books: "books"
        default: nil
        }
    }
}

final class TypedBook: ManagedObject, FetchableEntity {
    @Managed("title") var title: String?
    @Managed("pages") var pages: Int32?
    @Managed("rating") var rating: Double?
    @Managed("isRead") var isRead: Bool?
    @Managed("code") var code: UUID?
    /// Not a stored property: refused in a typed fetch.
    var shout: String { (title ?? "").uppercased() }
    var author: TypedAuthor? { (try? object(forKey: "author")) as? TypedAuthor }
    var tags: [TypedTag] { ((try? objects(forKey: "tags")) ?? []).compactMap { $0 as? TypedTag } }
    static let entityName = "Book"
    static func fetchKey(for keyPath: AnyKeyPath) -> String? {
        switch keyPath {
        case \TypedBook.title: "title"
        case \TypedBook.pages: "pages"
        case \TypedBook.rating: "rating"
        case \TypedBook.isRead: "isRead"
        case \TypedBook.code: "code"
        case \TypedBook.author: "author"
        case \TypedBook.tags: "tags"
        default: nil
        }
    }
}

final class TypedTag: ManagedObject, FetchableEntity {
    @Managed("label") var label: String?
    var books: [TypedBook] { ((try? objects(forKey: "books")) ?? []).compactMap { $0 as? TypedBook } }
    static let entityName = "Tag"
    static func fetchKey(for keyPath: AnyKeyPath) -> String? {
        switch keyPath {
        case \TypedTag.label: "label"
        case \TypedTag.books: "books"
        default: nil
        }
    }
}

/// Issue 18: Foundation's `#Predicate` and `SortDescriptor` over typed entities, translated
/// into the fetch language: each translation equals the format string's parse (so the store
/// plans it the same way, indexes included) and fetches the same objects on every store.
@Suite struct TypedPredicateTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Author", managedObjectClass: TypedAuthor.self, properties: [
                .attribute("name", .string, indexed: true), .attribute("born", .date),
                .toMany("books", "Book", inverse: "author"),
            ]),
            EntityDescription(name: "Book", managedObjectClass: TypedBook.self, properties: [
                .attribute("title", .string, indexed: true), .attribute("pages", .integer32, indexed: true),
                .attribute("rating", .double), .attribute("isRead", .boolean), .attribute("code", .uuid),
                .toOne("author", "Author", inverse: "books"), .toMany("tags", "Tag", inverse: "books"),
            ]),
            EntityDescription(name: "Tag", managedObjectClass: TypedTag.self, properties: [
                .attribute("label", .string), .toMany("books", "Book", inverse: "tags"),
            ]),
        ])
    }

    static let day = Date(timeIntervalSince1970: 86_400 * 365)
    static let code = UUID(uuidString: "00000000-0000-0000-0000-000000000007")!

    /// Two authors, six books (pages 0, 100, …, 500; some without rating), three tags.
    static func populate(_ context: ManagedObjectContext) throws {
        let authors = try ["Le Guin", "Lem"].enumerated().map { index, name in
            let author = try context.insertNewObject(forEntityName: "Author")
            try author.setValue(.string(name), forKey: "name")
            if index == 0 { try author.setValue(.date(day), forKey: "born") }
            return author
        }
        let tags = try ["sf", "classic", "short"].map { label in
            let tag = try context.insertNewObject(forEntityName: "Tag")
            try tag.setValue(.string(label), forKey: "label")
            return tag
        }
        for index in 0..<6 {
            let book = try context.insertNewObject(forEntityName: "Book")
            try book.setValue(.string(["Solaris", "Eden", "Lathe", "Fiasco", "Always", "Dispossessed"][index]), forKey: "title")
            try book.setValue(.int32(Int32(index * 100)), forKey: "pages")
            if index % 3 != 0 { try book.setValue(.double(Double(index) / 2), forKey: "rating") }
            try book.setValue(.bool(index % 2 == 0), forKey: "isRead")
            if index == 4 { try book.setValue(.uuid(code), forKey: "code") }
            if index < 5 { try book.setValue(authors[index % 2], forKey: "author") }
            for (offset, tag) in tags.enumerated() where (index + offset) % 3 == 0 || (offset == 2 && index > 3) {
                try book.addObject(tag, toRelationship: "tags")
            }
        }
        try context.save()
    }

    /// Each typed predicate with the format string it means.
    static func table(lem: ManagedObject) -> [(Predicate<TypedBook>, String, [any FetchArgument])] {
        let minimum: Int32 = 150, low = 1.0, titles = ["Eden", "Lathe", "Nowhere"], none: String? = nil
        let sf = "sf"
        return [
            (#Predicate { $0.pages! > minimum }, "pages > %@", [Int(minimum)]),
            (#Predicate { $0.title == "Eden" }, "title == 'Eden'", []),
            (#Predicate { $0.title != "Eden" }, "title != 'Eden'", []),
            (#Predicate { $0.title == none }, "title == nil", []),
            (#Predicate { $0.rating == nil }, "rating == nil", []),
            (#Predicate { ($0.rating ?? 0) >= low }, "(rating != nil AND rating >= 1.0)", []),
            (#Predicate { ($0.rating ?? 9) >= low }, "(rating != nil AND rating >= 1.0) OR rating == nil", []),
            (#Predicate { $0.pages! >= 100 && $0.pages! < 400 }, "pages >= 100 AND pages < 400", []),
            (#Predicate { $0.pages! < 100 || $0.isRead == false }, "pages < 100 OR isRead == NO", []),
            (#Predicate { !($0.title == "Eden") }, "NOT title == 'Eden'", []),
            (#Predicate { $0.isRead! }, "isRead == YES", []),
            (#Predicate { $0.code == code }, "code == %@", [code]),
            (#Predicate { $0.author?.name == "Lem" }, "author.name == 'Lem'", []),
            (#Predicate { $0.title!.contains("the") }, "title CONTAINS 'the'", []),
            (#Predicate { $0.title!.starts(with: "E") }, "title BEGINSWITH 'E'", []),
            (#Predicate { titles.contains($0.title!) }, "title IN %@", [titles]),
            (#Predicate { (100...300).contains($0.pages!) }, "pages BETWEEN {100, 300}", []),
            (#Predicate { (100..<300).contains($0.pages!) }, "pages >= 100 AND pages < 300", []),
            (#Predicate { ($0.rating ?? -1) < -0.5 }, "(rating != nil AND rating < -0.5) OR rating == nil", []),
            (#Predicate { (100...300).contains($0.pages ?? 0) }, "pages != nil AND pages BETWEEN {100, 300}", []),
            (#Predicate { (0..<300).contains($0.pages ?? 0) }, "(pages != nil AND (pages >= 0 AND pages < 300)) OR pages == nil", []),
            (#Predicate { $0.tags.contains { $0.label == sf } }, "ANY tags.label == 'sf'", []),
            (#Predicate { $0.tags.allSatisfy { $0.label != "short" } }, "ALL tags.label != 'short'", []),
            (#Predicate { $0.tags.contains { $0.label == "sf" || $0.label == "short" } },
             "SUBQUERY(tags, $v1, $v1.label == 'sf' OR $v1.label == 'short').@count > 0", []),
            (#Predicate { $0.tags.count >= 2 }, "tags.@count >= 2", []),
            (#Predicate { $0.tags.isEmpty }, "tags.@count == 0", []),
            (#Predicate { $0.tags.filter { $0.label != "sf" }.count == 1 }, "SUBQUERY(tags, $v1, $v1.label != 'sf').@count == 1", []),
            (#Predicate { $0.author?.books.contains { $0.pages! > 400 } == true }, "ANY author.books.pages > 400", []),
        ]
    }

    // Each translation is the format string's parse: the store plans both alike.
    @Test func everyTranslationIsTheFormatStringsParse() throws {
        let stack = try InMemoryFixture().makeStack(model: Self.model())
        let context = stack.context()
        try Self.populate(context)
        let lem = try #require(try context.fetch(TypedAuthor.self, where: #Predicate { $0.name == "Lem" }).first)
        for (index, (predicate, format, arguments)) in Self.table(lem: lem).enumerated() {
            let translated = try FetchPredicate(predicate)
            let parsed = try FetchPredicate(format: format, argumentArray: arguments)
            #expect(translated == parsed, "row \(index): \(format) → \(translated)")
        }
    }

    // On every store, a typed fetch finds what the format string finds, and what evaluating
    // the Foundation predicate in memory finds.
    @Test(arguments: allStoreFixtures.indices)
    func typedFetchesMatchTheFormatStringOnEveryStore(_ fixture: Int) throws {
        let stack = try allStoreFixtures[fixture].makeStack(model: Self.model())
        try stack.read { context in
            try Self.populate(context)
            let lem = try #require(try context.fetch(TypedAuthor.self, where: #Predicate { $0.name == "Lem" }).first)
            let all = try context.fetch(TypedBook.self)
            for (index, (predicate, format, arguments)) in Self.table(lem: lem).enumerated() {
                let typed = try context.fetch(TypedBook.self, where: predicate, sortBy: [SortDescriptor(\.pages)])
                var request = FetchRequest(entityName: "Book")
                request.predicate = try FetchPredicate(format: format, argumentArray: arguments)
                request.sortDescriptors = [FetchSortDescriptor(keyPath: "pages")]
                let formatted = try context.fetch(request, as: TypedBook.self)
                #expect(typed.map(\.objectID) == formatted.map(\.objectID), "\(allStoreFixtures[fixture]) row \(index): \(format)")
                #expect(try context.count(TypedBook.self, where: predicate) == typed.count)
                // Foundation's own evaluation, where it can run here (no nil forced open).
                if let expected = try? all.filter({ try predicate.evaluate($0) }) {
                    #expect(Set(expected.map(\.objectID)) == Set(typed.map(\.objectID)), "\(allStoreFixtures[fixture]) row \(index) in memory: \(format)")
                }
            }
        }
    }

    // Sort descriptors translate to the property and order; a limit applies after them.
    @Test func sortDescriptorsAndLimits() throws {
        let stack = try InMemoryFixture().makeStack(model: Self.model())
        let context = stack.context()
        try Self.populate(context)
        let sorts = try [SortDescriptor<TypedBook>(\.pages, order: .reverse), SortDescriptor(\.title)].map(FetchSortDescriptor.init)
        #expect(sorts == [FetchSortDescriptor(keyPath: "pages", ascending: false), FetchSortDescriptor(keyPath: "title")])
        let top = try context.fetch(TypedBook.self, where: #Predicate { $0.rating != nil }, sortBy: [SortDescriptor(\.rating, order: .reverse)], limit: 2)
        #expect(top.map(\.title) == ["Dispossessed", "Always"])
    }

    // What the fetch language cannot say is refused with an error naming it; nothing is fetched.
    @Test func untranslatableConstructsAreNamed() throws {
        let refused: [(Predicate<TypedBook>, String)] = [
            (#Predicate { $0.pages! + 1 > 3 }, "Arithmetic"),
            (#Predicate { ($0.isRead! ? 1 : 2) == 1 }, "Conditional"),
            (#Predicate { $0.title!.count > 3 }, "KeyPath"),
            (#Predicate { $0.shout == "EDEN" }, "names no stored property"),
            (#Predicate { ($0.rating ?? $0.rating!) > 1 }, "NilCoalesce"),
        ]
        for (predicate, name) in refused {
            let error = try #require(throws: ObjectGraphError.self) { try FetchPredicate(predicate) }
            #expect(error.code == .invalidFetchRequest)
            #expect(error.message.contains(name), "\(error.message)")
        }
        let error = try #require(throws: ObjectGraphError.self) { try FetchSortDescriptor(SortDescriptor<TypedBook>(\.shout)) }
        #expect(error.code == .invalidFetchRequest)
    }
}

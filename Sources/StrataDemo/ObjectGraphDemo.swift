import Foundation
import Strata
import StrataMacros

/// An author of the demo's library.
@Entity public final class Author: ManagedObject {
    @Attribute(.indexed) public var name: String
    public var born: Int16?
    @Relationship(inverse: \Book.author, deleteRule: .cascade) public var books: Set<Book>
}

/// A book of the demo's library, on any number of shelves.
@Entity public final class Book: ManagedObject {
    public var title: String
    @Attribute(.indexed) public var year: Int16?
    @Attribute(.indexed) public var genre: String?
    public var price: Double?
    public var author: Author?
    @Relationship(inverse: \Shelf.books) public var shelves: Set<Shelf>
}

/// A shelf of the demo's library.
@Entity public final class Shelf: ManagedObject {
    public var label: String
    public var books: Set<Book>
}

/// The `strata demo` job, the README's main job: a small library (authors, books, shelves)
/// saved in a StrataStore, reopened from disk, queried, faulted in and checked with fsck.
///
/// Every answer is checked against what the demo wrote, so the demo fails (``Report/verified``
/// false) rather than print a wrong number.
///
/// For example:
///
/// ```swift
/// let report = try ObjectGraphDemo.run(in: "/tmp/strata-demo")
/// print(report.lines.joined(separator: "\n"))
/// ```
public enum ObjectGraphDemo {
    /// What the demo did, one line per step, and whether every check passed.
    public struct Report: Sendable {
        /// One timed step of the demo.
        public struct Step: Sendable, Codable, Equatable {
            /// What the step did.
            public var title: String
            /// How long it took, in milliseconds.
            public var milliseconds: Double
        }

        /// Human-readable lines, one per step, with the time each took, and the answers.
        public var lines: [String] = []
        /// The timed steps, in order (the lines hold the same with the answers between them).
        public var steps: [Step] = []
        /// Whether every answer matched what was written, and fsck found the store clean.
        public var verified = true
        /// Checks that failed, if any.
        public var failures: [String] = []
    }

    /// The demo's model, from its typed entities: `Author` 1—* `Book` (cascade) *—* `Shelf`.
    public static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(types: [Author.self, Book.self, Shelf.self])
    }

    static let genres = ["fiction", "history", "poetry", "science", "travel"]

    /// Runs the demo in `directory` (created if missing; it must not hold a store already)
    /// with `authors` authors of `booksPerAuthor` books each; `stepStarted` is told each
    /// step's title as it starts.
    ///
    /// - Throws: store errors (a locked or foreign directory, I/O failures).
    public static func run(
        in directory: String, authors: Int = 500, booksPerAuthor: Int = 8, stepStarted: ((String) -> Void)? = nil
    ) throws -> Report {
        StrataStore.register()
        var report = Report()
        let model = try model()
        let url = URL(fileURLWithPath: directory)
        func step<T>(_ title: String, _ body: () throws -> T) rethrows -> T {
            stepStarted?(title)
            let start = ContinuousClock.now
            let result = try body()
            let elapsed = ContinuousClock.now - start
            let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
            let padded = title.count < 62 ? title + String(repeating: " ", count: 62 - title.count) : title
            report.lines.append(padded + String(format: " %9.1f ms", milliseconds))
            report.steps.append(Report.Step(title: title, milliseconds: milliseconds))
            return result
        }
        func expect(_ condition: Bool, _ what: String) {
            if !condition {
                report.verified = false
                report.failures.append(what)
                report.lines.append("  CHECK FAILED: \(what)")
            }
        }

        // Deterministic data: book i of author a.
        let bookCount = authors * booksPerAuthor
        func year(_ book: Int) -> Int16 { Int16(1800 + (book * 37) % 220) }
        func genre(_ book: Int) -> String { genres[book % genres.count] }
        func price(_ book: Int) -> Double { Double(5 + (book * 13) % 40) + 0.99 }

        // 1. Build and save.
        var coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        var store = try coordinator.addPersistentStore(type: .strata, configuration: nil, at: url, options: [:])
        var context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        try step("insert \(authors) authors, \(bookCount) books, 12 shelves; save") {
            var shelves: [Shelf] = []
            for index in 0..<12 {
                let shelf = try context.insert(Shelf.self)
                shelf.label = "Shelf \(index + 1)"
                shelves.append(shelf)
            }
            var book = 0
            for index in 0..<authors {
                let author = try context.insert(Author.self)
                author.name = String(format: "Author %04d", index)
                author.born = Int16(1750 + index % 250)
                for _ in 0..<booksPerAuthor {
                    let object = try context.insert(Book.self)
                    object.title = "Book \(book)"
                    object.year = year(book)
                    object.genre = genre(book)
                    object.price = price(book)
                    object.author = author
                    object.shelves = [shelves[book % shelves.count], shelves[(book / 7) % shelves.count]]
                    book += 1
                }
            }
            try context.save()
        }

        // 2. Small saves: change prices, delete one author (cascading to their books).
        try step("20 saves: reprice 10 books each; delete an author (cascade)") {
            let poetry = try context.fetch(Book.self, where: #Predicate { $0.genre == "poetry" }, sortBy: [SortDescriptor(\.title)], limit: 200)
            for batch in 0..<20 {
                for object in poetry.dropFirst(batch * 10).prefix(10) { object.price = 1.0 }
                try context.save()
            }
            for author in try context.fetch(Author.self, where: #Predicate { $0.name == "Author 0000" }) { context.delete(author) }
            try context.save()
        }
        let repriced = min(200, bookCount / genres.count)

        // 3. Reopen from disk.
        try coordinator.remove(store)
        context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        try step("close and reopen the store") {
            coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            store = try coordinator.addPersistentStore(type: .strata, configuration: nil, at: url, options: [:])
            context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        }
        let remainingBooks = bookCount - booksPerAuthor
        let survivors = (booksPerAuthor..<bookCount)

        // 4. Fetches.
        let counted = try step("count books (stored counters)") { try context.count(Book.self) }
        report.lines.append("    \(counted) books")
        expect(counted == remainingBooks, "count of books is \(counted), expected \(remainingBooks)")

        let early = try step("fetch books 1900 ≤ year < 1920, sorted by year, title; limit 10") { () -> [Book] in
            try context.fetch(
                Book.self, where: #Predicate { (1900..<1920).contains($0.year ?? 0) }, sortBy: [SortDescriptor(\.year), SortDescriptor(\.title)],
                limit: 10)
        }
        let earlyTitles = early.map(\.title)
        report.lines.append("    " + earlyTitles.prefix(4).joined(separator: ", ") + (earlyTitles.count > 4 ? ", …" : ""))
        let expectedEarly = survivors.filter { (1900..<1920).contains(year($0)) }
            .sorted { (year($0), "Book \($0)") < (year($1), "Book \($1)") }.prefix(10).map { "Book \($0)" }
        expect(earlyTitles == Array(expectedEarly), "the year fetch returned \(earlyTitles), expected \(Array(expectedEarly))")

        let unindexed = try step("fetch books with price > 40 (not indexed: a scan)") { () -> Int in
            try context.count(Book.self, where: #Predicate { ($0.price ?? 0) > 40 })
        }
        let repricedBooks = repricedSet(survivors, repriced)
        let expectedExpensive = survivors.filter { price($0) > 40 && !repricedBooks.contains($0) }.count
        expect(unindexed == expectedExpensive, "price > 40 counted \(unindexed), expected \(expectedExpensive)")
        report.lines.append("    \(unindexed) books")

        let groups = try step("aggregate: books and average price per genre") { () -> [[String: FetchValue]] in
            var request = FetchRequest(entityName: "Book")
            request.propertiesToFetch = ["genre", .aggregate(.count, of: "title", as: "books"), .aggregate(.average, of: "price", as: "averagePrice", type: .double)]
            request.propertiesToGroupBy = ["genre"]
            request.sortDescriptors = [FetchSortDescriptor(keyPath: "genre")]
            return try context.fetchDictionaries(request)
        }
        for group in groups {
            let name = group["genre"]?.attributeValue?.stringValue ?? "?"
            let books = group["books"]?.attributeValue?.integerValue ?? -1
            let average = group["averagePrice"]?.attributeValue?.doubleValue ?? .nan
            let label = name.count < 8 ? name + String(repeating: " ", count: 8 - name.count) : name
            report.lines.append("    " + label + String(format: " %5d books, average price %.2f", Int(books), average))
            let expected = survivors.filter { genre($0) == name }.count
            expect(books == Int64(expected), "genre \(name) has \(books) books, expected \(expected)")
        }
        expect(groups.count == genres.count, "\(groups.count) genre groups, expected \(genres.count)")

        // 5. Faults.
        let faulted = try step("fault in 100 authors and their books") { () -> (Int, Int, Bool) in
            let authorsFetched = try context.fetch(Author.self, sortBy: [SortDescriptor(\.name)], limit: 100)
            let wereFaults = authorsFetched.allSatisfy(\.isFault)
            var books = 0
            for author in authorsFetched {
                _ = author.name
                books += author.books.count
            }
            return (authorsFetched.count, books, wereFaults)
        }
        report.lines.append("    \(faulted.0) authors (fetched as faults: \(faulted.2)), \(faulted.1) books")
        expect(faulted.2, "fetched authors were not faults")
        expect(faulted.1 == min(100, authors - 1) * booksPerAuthor, "faulted \(faulted.1) books, expected \(min(100, authors - 1) * booksPerAuthor)")

        try coordinator.remove(store)

        // 6. fsck.
        let check = try step("fsck: every checksum, every row, index and relationship") { try StoreFsck.run(at: directory) }
        let problems = check.files.problems.count + (check.objects?.problems.count ?? 0)
        report.lines.append("    \(check.files.walRecords) WAL records, \(check.files.blocks) blocks, \(check.objects?.rows ?? 0) rows, \(check.objects?.references ?? 0) references, \(check.objects?.indexEntries ?? 0) index entries: \(problems == 0 ? "clean" : "\(problems) problems")")
        expect(check.isClean, "fsck found problems: \(check.files.problems.map(\.description) + (check.objects?.problems.map(\.description) ?? []))")
        return report
    }

    /// The books the second step repriced: the first `count` poetry books by title among
    /// those written before the deletion (their titles sort as strings).
    static func repricedSet(_ survivors: Range<Int>, _ count: Int) -> Set<Int> {
        let poetry = (0..<survivors.upperBound).filter { genres[$0 % genres.count] == "poetry" }
            .sorted { "Book \($0)" < "Book \($1)" }.prefix(count)
        return Set(poetry)
    }
}

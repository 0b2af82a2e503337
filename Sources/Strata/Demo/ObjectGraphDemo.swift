import Foundation
import ObjectGraph
import StrataEngine

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

    /// The demo's model: `Author` 1—* `Book` (cascade) *—* `Shelf`.
    public static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Author", properties: [
                .attribute("name", .string, optional: false, indexed: true),
                .attribute("born", .integer16),
                .toMany("books", "Book", inverse: "author", deleteRule: .cascade),
            ]),
            EntityDescription(name: "Book", properties: [
                .attribute("title", .string, optional: false),
                .attribute("year", .integer16, indexed: true),
                .attribute("genre", .string, indexed: true),
                .attribute("price", .double),
                .toOne("author", "Author", inverse: "books"),
                .toMany("shelves", "Shelf", inverse: "books"),
            ]),
            EntityDescription(name: "Shelf", properties: [
                .attribute("label", .string, optional: false),
                .toMany("books", "Book", inverse: "shelves"),
            ]),
        ])
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
            var shelves: [ManagedObject] = []
            for index in 0..<12 {
                let shelf = try context.insertNewObject(forEntityName: "Shelf")
                try shelf.setValue(.string("Shelf \(index + 1)"), forKey: "label")
                shelves.append(shelf)
            }
            var book = 0
            for index in 0..<authors {
                let author = try context.insertNewObject(forEntityName: "Author")
                try author.setValue(.string(String(format: "Author %04d", index)), forKey: "name")
                try author.setValue(.int16(Int16(1750 + index % 250)), forKey: "born")
                for _ in 0..<booksPerAuthor {
                    let object = try context.insertNewObject(forEntityName: "Book")
                    try object.setValue(.string("Book \(book)"), forKey: "title")
                    try object.setValue(.int16(year(book)), forKey: "year")
                    try object.setValue(.string(genre(book)), forKey: "genre")
                    try object.setValue(.double(price(book)), forKey: "price")
                    try object.setValue(author, forKey: "author")
                    try object.setValue([shelves[book % shelves.count], shelves[(book / 7) % shelves.count]], forKey: "shelves")
                    book += 1
                }
            }
            try context.save()
        }

        // 2. Small saves: change prices, delete one author (cascading to their books).
        try step("20 saves: reprice 10 books each; delete an author (cascade)") {
            var request = FetchRequest(entityName: "Book")
            request.predicate = try FetchPredicate(format: "genre == %@", "poetry")
            request.sortDescriptors = [FetchSortDescriptor(keyPath: "title")]
            request.fetchLimit = 200
            let poetry = try context.fetch(request)
            for batch in 0..<20 {
                for object in poetry.dropFirst(batch * 10).prefix(10) {
                    try object.setValue(.double(1.0), forKey: "price")
                }
                try context.save()
            }
            var authorRequest = FetchRequest(entityName: "Author")
            authorRequest.predicate = try FetchPredicate(format: "name == %@", "Author 0000")
            for author in try context.fetch(authorRequest) { context.delete(author) }
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
        let counted = try step("count books (stored counters)") { try context.count(for: FetchRequest(entityName: "Book")) }
        report.lines.append("    \(counted) books")
        expect(counted == remainingBooks, "count of books is \(counted), expected \(remainingBooks)")

        let early = try step("fetch books 1900 ≤ year < 1920, sorted by year, title; limit 10") { () -> [ManagedObject] in
            var request = FetchRequest(entityName: "Book")
            request.predicate = try FetchPredicate(format: "year >= 1900 AND year < 1920")
            request.sortDescriptors = [FetchSortDescriptor(keyPath: "year"), FetchSortDescriptor(keyPath: "title")]
            request.fetchLimit = 10
            return try context.fetch(request)
        }
        let earlyTitles = try early.map { try $0.value(forKey: "title").stringValue ?? "" }
        report.lines.append("    " + earlyTitles.prefix(4).joined(separator: ", ") + (earlyTitles.count > 4 ? ", …" : ""))
        let expectedEarly = survivors.filter { (1900..<1920).contains(year($0)) }
            .sorted { (year($0), "Book \($0)") < (year($1), "Book \($1)") }.prefix(10).map { "Book \($0)" }
        expect(earlyTitles == Array(expectedEarly), "the year fetch returned \(earlyTitles), expected \(Array(expectedEarly))")

        let unindexed = try step("fetch books with price > 40 (not indexed: a scan)") { () -> Int in
            var request = FetchRequest(entityName: "Book")
            request.predicate = try FetchPredicate(format: "price > 40")
            return try context.count(for: request)
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
            var request = FetchRequest(entityName: "Author")
            request.sortDescriptors = [FetchSortDescriptor(keyPath: "name")]
            request.fetchLimit = 100
            let authorsFetched = try context.fetch(request)
            let wereFaults = authorsFetched.allSatisfy(\.isFault)
            var books = 0
            for author in authorsFetched {
                _ = try author.value(forKey: "name")
                books += try author.objects(forKey: "books").count
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

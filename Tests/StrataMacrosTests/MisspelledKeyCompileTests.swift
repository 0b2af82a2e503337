import Foundation
import Testing

/// Typed code that names a key the entity does not have, or gives a property a value of
/// another type, does not compile (issue 18). Each case type-checks a small program against
/// the modules and macro plugin this test run was built with (`swiftc -typecheck`), and a
/// correct program first, so a failure is the program's and not the harness's.
@Suite struct MisspelledKeyCompileTests {
    /// The build directory of this test run: its modules and the macro plugin.
    static var buildDirectory: URL { URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent() }

    static let declarations = """
        import Foundation
        import StrataMacros

        @Entity final class Author: ManagedObject {
            var name: String = ""
            @Relationship(inverse: \\Book.author) var books: Set<Book>
        }

        @Entity final class Book: ManagedObject {
            var title: String = ""
            var tags: [String] = []
            var author: Author?
        }

        """

    /// Type-checks `body` after the declarations: the exit status and the compiler's output.
    static func typecheck(_ body: String) throws -> (status: Int32, output: String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("strata-compile-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let source = directory.appendingPathComponent("main.swift")
        try (declarations + body + "\n").write(to: source, atomically: true, encoding: .utf8)
        let build = buildDirectory
        let plugin = build.appendingPathComponent("StrataMacrosPlugin-tool").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "swiftc", "-typecheck", "-swift-version", "6", "-I", build.appendingPathComponent("Modules").path,
            "-load-plugin-executable", plugin + "#StrataMacrosPlugin", source.path,
        ]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, output)
    }

    @Test func theCorrectProgramTypeChecks() throws {
        let result = try Self.typecheck("""
            func use(_ book: Book, _ author: Author) throws -> Predicate<Book> {
                book.title = "Solaris"
                book.tags.append("sf")
                book.author = author
                return #Predicate<Book> { $0.title == "Solaris" && $0.author?.name == "Lem" }
            }
            """)
        #expect(result.status == 0, "\(result.output)")
    }

    /// Each program with the error the compiler must report.
    static let mistakes: [(body: String, error: String)] = [
        ("func use(_ book: Book) { book.titel = \"x\" }", "has no member 'titel'"),
        ("func use(_ book: Book) { book.title = 5 }", "cannot assign value of type 'Int'"),
        ("func use(_ book: Book) { book.author = book }", "cannot assign value of type 'Book'"),
        ("let p = #Predicate<Book> { $0.titel == \"x\" }", "has no member 'titel'"),
        ("let p = #Predicate<Book> { $0.author?.nam == \"x\" }", "has no member 'nam'"),
        ("struct Opaque {}\n@Entity final class Shelf: ManagedObject { var thing: Opaque? }", "Opaque"),
    ]

    @Test(arguments: mistakes.indices)
    func aMisspelledKeyOrAWrongTypeDoesNotCompile(index: Int) throws {
        let (body, expected) = Self.mistakes[index]
        let result = try Self.typecheck(body)
        #expect(result.status != 0, "compiled: \(body)")
        #expect(result.output.contains(expected), "\(body): \(result.output)")
    }
}

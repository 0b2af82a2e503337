import Foundation
import ObjectGraph
@testable import Strata
import Testing

/// Issue 17: `strata migrate` exports a store's model as JSON and migrates the store offline to
/// the model of a JSON file: lightweight in place, or by copy with `--set` expressions.
@Suite struct StrataToolMigrateTests {
    /// A StrataStore of ``CopyMigrationTests/withoutTags(isbn:)`` (version 1) at `path`.
    static func store(at path: String) throws {
        StrataStore.register()
        try CopyMigrationTests.authorsStore(type: .strata, at: URL(fileURLWithPath: path))
    }

    static func write(_ file: ModelFile, to path: String) throws {
        try JSONEncoder().encode(file).write(to: URL(fileURLWithPath: path))
    }

    /// Version 1 (with or without `isbn`) and a required `Author.bookCount` without a default:
    /// a change inference refuses, which `--set` can fill.
    static func withBookCount(isbn: Bool) throws -> ModelFile {
        var file = ModelFile(model: try CopyMigrationTests.withoutTags(isbn: isbn))
        let author = try #require(file.entities.firstIndex { $0.name == "Author" })
        var count = ModelFile.Property(name: "bookCount", kind: "attribute")
        count.type = "integer32"
        count.optional = false
        file.entities[author].properties.append(count)
        return file
    }

    @Test func theExportedModelIsTheStoresAndMigratesBack() throws {
        let scratch = try ToolScratch()
        let store = scratch.path + "/store"
        try Self.store(at: store)
        let exported = try scratch.run("migrate", store, "--export-model")
        #expect(exported.status == 0, "\(exported)")
        let file = try exported.json(ModelFile.self)
        let model = try file.model()
        #expect(model.entityVersionHashesByName == (try CopyMigrationTests.withoutTags(isbn: false)).entityVersionHashesByName)
        // The same model: nothing to do.
        try Self.write(file, to: scratch.path + "/v1.json")
        let same = try scratch.run("migrate", store, "--to", scratch.path + "/v1.json", "--json")
        #expect(same.status == 0, "\(same)")
        #expect(same.stdout.contains("\"none\""), "\(same)")
    }

    // Lightweight: an attribute added and an index added, in place.
    @Test func aLightweightChangeMigratesInPlace() throws {
        let scratch = try ToolScratch()
        let store = scratch.path + "/store"
        try Self.store(at: store)
        var file = ModelFile(model: try CopyMigrationTests.withoutTags(isbn: true))
        let book = try #require(file.entities.firstIndex { $0.name == "Book" })
        let title = try #require(file.entities[book].properties.firstIndex { $0.name == "title" })
        file.entities[book].properties[title].indexed = true
        try Self.write(file, to: scratch.path + "/v2.json")
        let run = try scratch.run("migrate", store, "--to", scratch.path + "/v2.json")
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("in place"), "\(run)")
        #expect(run.stdout.contains("Book → Book (transform)"), "\(run)")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try file.model())
        try coordinator.addPersistentStore(type: .strata, at: URL(fileURLWithPath: store))
        let strata = try #require(coordinator.persistentStores.first as? StrataStore)
        #expect(strata.indexBuildProgress == nil, "the index was built before the command returned")
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try context.count(for: LightweightMigrationTests.request("Book", "title == 'Solaris'")) == 1)
        #expect(try ObjectChecker.check(engine: try #require(strata.storageEngine), repair: false).problems.isEmpty)
        try LightweightMigrationTests.close(coordinator)
    }

    // A new required attribute without a default cannot be inferred: refused, naming it, and
    // nothing written; with --set, copied with the value of an expression.
    @Test func aSetExpressionGivesWhatInferenceCannot() throws {
        let scratch = try ToolScratch()
        let store = scratch.path + "/store"
        try Self.store(at: store)
        let file = try Self.withBookCount(isbn: false)
        try Self.write(file, to: scratch.path + "/v2.json")
        let before = try FileManager.default.contentsOfDirectory(atPath: store).sorted()

        let refused = try scratch.run("migrate", store, "--to", scratch.path + "/v2.json")
        #expect(refused.status == 2, "\(refused)")
        #expect(refused.stderr.contains("Author.bookCount"), "\(refused)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: store).sorted() == before)

        let run = try scratch.run("migrate", store, "--to", scratch.path + "/v2.json", "--set", "Author.bookCount=books.@count", "--json")
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("\"copy\""), "\(run)")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try file.model())
        try coordinator.addPersistentStore(type: .strata, at: URL(fileURLWithPath: store))
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try fetch("Author", in: context).map { try $0.value(forKey: "bookCount") } == [.int32(1), .int32(1)])
        try LightweightMigrationTests.close(coordinator)
    }

    // What the command line shows of a migration: `strata migrate` names its phase and reaches
    // 100 % on standard error (nothing on standard output but the result), and `strata
    // inspect` then lists the model versions in the record and the rows each row layout holds,
    // the old ones read upgraded.
    @Test func migrateShowsProgressAndInspectShowsEachLayoutsRows() throws {
        let scratch = try ToolScratch()
        let store = scratch.path + "/store"
        try Self.store(at: store)
        try Self.write(ModelFile(model: try CopyMigrationTests.withoutTags(isbn: true)), to: scratch.path + "/v2.json")
        let now = ["STRATA_PROGRESS_AFTER": "0"]
        let run = try scratch.run(["migrate", store, "--to", scratch.path + "/v2.json"], environment: now)
        #expect(run.status == 0, "\(run)")
        #expect(run.stderr.contains("migrate: migrating") && run.stderr.contains("100%"), "\(run)")
        #expect(!run.stdout.contains("100%"), "progress stays off standard output: \(run)")

        let inspect = try scratch.run("inspect", store)
        #expect(inspect.status == 0, "\(inspect)")
        #expect(inspect.stdout.contains("row layouts (2 model versions in the model record):"), "\(inspect)")
        let layoutLines = inspect.lines.filter { $0.contains("  layout ") && $0.contains(" rows") }
        #expect(layoutLines.contains { $0.contains("Book") && $0.contains("(model version 1 back, read upgraded)") }, "\(inspect)")

        // A copy (a value no inference gives) names its own phase.
        let file = try Self.withBookCount(isbn: true)
        try Self.write(file, to: scratch.path + "/v3.json")
        let copy = try scratch.run(["migrate", store, "--to", scratch.path + "/v3.json", "--set", "Author.bookCount=books.@count"], environment: now)
        #expect(copy.status == 0, "\(copy)")
        #expect(copy.stderr.contains("migrate: copying into the new model") && copy.stderr.contains("100%"), "\(copy)")
    }

    @Test func badArgumentsAreUsageErrors() throws {
        let scratch = try ToolScratch()
        let store = scratch.path + "/store"
        try Self.store(at: store)
        #expect(try scratch.run("migrate", store).status == 2)
        #expect(try scratch.run("migrate", store, "--to", scratch.path + "/missing.json").status == 2)
        try Data("{\"entities\": [{\"name\": \"A\", \"properties\": [{\"name\": \"x\", \"kind\": \"attribute\", \"type\": \"integer99\"}]}]}".utf8)
            .write(to: URL(fileURLWithPath: scratch.path + "/bad.json"))
        let bad = try scratch.run("migrate", store, "--to", scratch.path + "/bad.json")
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("integer99"), "\(bad)")
        #expect(try scratch.run("migrate", store, "--to", scratch.path + "/bad.json", "--set", "nonsense").status == 2)
    }
}

import Foundation
import Strata
import StrataMacros
import Testing

/// Random operations through typed objects (`@Entity` Writer, Novel, Shelf), checked after
/// every save against a plain Swift model of the same library, on the in-memory store and on a
/// StrataStore reopened from disk now and then; reads go through typed properties and
/// `#Predicate` fetches.
@Suite struct TypedDifferentialTests {
    /// A deterministic generator (SplitMix64).
    struct Random {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
    }

    /// The oracle: novels by title, each with its pages, writer and shelves; writers by name.
    struct Library: Equatable {
        var novels: [String: (pages: Int32?, writer: String?, shelves: Set<String>)] = [:]
        var writers: Set<String> = []

        static func == (a: Library, b: Library) -> Bool { a.lines == b.lines }

        /// One line per novel and writer, sorted.
        var lines: [String] {
            novels.map { title, novel in
                "\(title)|\(novel.pages.map(String.init) ?? "nil")|\(novel.writer ?? "nil")|\(novel.shelves.sorted().joined(separator: ","))"
            }.sorted() + writers.sorted().map { "writer \($0)" }
        }
    }

    /// The same lines read from the store through typed objects.
    static func lines(_ context: ManagedObjectContext) throws -> [String] {
        let novels = try context.fetch(Novel.self).map { novel in
            "\(novel.title)|\(novel.pages.map(String.init) ?? "nil")|\(novel.writer?.name ?? "nil")|\(novel.shelves.compactMap(\.label).sorted().joined(separator: ","))"
        }
        let writers = try context.fetch(Writer.self).map { "writer \($0.name)" }
        return novels.sorted() + writers.sorted()
    }

    @Test(arguments: [PersistentStore.StoreType.inMemory, .strata], [1, 2, 3] as [UInt64])
    func randomTypedOperationsMatchAPlainModel(type: PersistentStore.StoreType, seed: UInt64) throws {
        StrataStore.register()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("strata-typed-diff-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let model = try TypedModelTests.typedModel()
        func open() throws -> (PersistentStoreCoordinator, ManagedObjectContext) {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
            try coordinator.addPersistentStore(type: type, at: type == .strata ? directory : nil)
            return (coordinator, ManagedObjectContext(persistentStoreCoordinator: coordinator))
        }
        var (coordinator, context) = try open()
        var random = Random(state: seed)
        var oracle = Library()
        let shelfLabels = ["a", "b", "c"]
        for label in shelfLabels {
            let shelf = try context.insert(Shelf.self)
            shelf.label = label
        }
        try context.save()
        var nextTitle = 0, nextWriter = 0
        for step in 0..<300 {
            let novels = try context.fetch(Novel.self)
            let writers = try context.fetch(Writer.self)
            switch random.below(8) {
            case 0, 1:
                let novel = try context.insert(Novel.self)
                novel.title = "n\(nextTitle)"
                nextTitle += 1
                oracle.novels[novel.title] = (nil, nil, [])
            case 2:
                let writer = try context.insert(Writer.self)
                writer.name = "w\(nextWriter)"
                nextWriter += 1
                oracle.writers.insert(writer.name)
            case 3 where !novels.isEmpty:
                let novel = novels[random.below(novels.count)]
                let pages: Int32? = random.below(4) == 0 ? nil : Int32(random.below(500))
                novel.pages = pages
                oracle.novels[novel.title]?.pages = pages
            case 4 where !novels.isEmpty:
                let novel = novels[random.below(novels.count)]
                let writer = writers.isEmpty || random.below(5) == 0 ? nil : writers[random.below(writers.count)]
                novel.writer = writer
                oracle.novels[novel.title]?.writer = writer?.name
            case 5 where !novels.isEmpty:
                let novel = novels[random.below(novels.count)]
                let shelf = try #require(try context.fetch(Shelf.self, where: #Predicate { $0.label == "b" }).first)
                let label = shelfLabels[random.below(shelfLabels.count)]
                let chosen = try context.fetch(Shelf.self).first { $0.label == label } ?? shelf
                if novel.shelves.contains(chosen) {
                    novel.shelves.removeAll { $0 == chosen }
                    oracle.novels[novel.title]?.shelves.remove(label)
                } else {
                    novel.shelves.append(chosen)
                    oracle.novels[novel.title]?.shelves.insert(label)
                }
            case 6 where !novels.isEmpty:
                let novel = novels[random.below(novels.count)]
                context.delete(novel)
                oracle.novels[novel.title] = nil
            case 7 where !writers.isEmpty && random.below(3) == 0:
                // Cascade: the writer's novels go too.
                let writer = writers[random.below(writers.count)]
                context.delete(writer)
                oracle.writers.remove(writer.name)
                oracle.novels = oracle.novels.filter { $0.value.writer != writer.name }
            default:
                continue
            }
            if step % 7 == 6 {
                try context.save()
                if type == .strata && random.below(4) == 0 {
                    for store in coordinator.persistentStores { try coordinator.remove(store) }
                    (coordinator, context) = try open()
                }
                #expect(try Self.lines(context) == oracle.lines, "step \(step)")
                let threshold = Int32(random.below(500))
                let typedCount = try context.count(Novel.self, where: #Predicate { ($0.pages ?? -1) > threshold })
                #expect(typedCount == oracle.novels.values.filter { ($0.pages ?? -1) > threshold }.count, "step \(step): pages > \(threshold)")
                let name = "w\(random.below(max(1, nextWriter)))"
                let byWriter = try context.fetch(Novel.self, where: #Predicate { $0.writer?.name == name }).map(\.title).sorted()
                #expect(byWriter == oracle.novels.filter { $0.value.writer == name }.map(\.key).sorted(), "step \(step): novels of \(name)")
            }
        }
    }
}

import Foundation
import ObjectGraph
import Testing
@testable import Strata
@testable import StrataEngine

@Suite struct SecondaryIndexTests {
    // [IDX-S2] The in-place encoder writes exactly the bytes the definition gives: a type
    // byte, then NFC UTF-8 escaped and terminated for strings, sign-flipped big-endian for
    // integers; and a whole key is prefix, encoding, reference.
    @Test func inPlaceEncodingIsTheDefinitionsBytes() {
        let strings = ["", "a", "Zed", "caf\u{E9}", "cafe\u{301}", "nul\u{0}inside", "\u{0}", "\u{FF}\u{1F600}", String(repeating: "x", count: 300)]
        for text in strings {
            let expected: [UInt8] = [0x30] + IndexKey.escaped(IndexKey.normalizedUTF8(text))
            #expect(IndexKey.encode(.string(text)) == expected, "\(Array(text.unicodeScalars))")
            var key: [UInt8] = [7]
            IndexKey.encode(.string(text), into: &key)
            #expect(key == [7] + expected)
        }
        for number: Int64 in [0, 1, -1, 42, -42, Int64.max, Int64.min, Int64(Int16.max), Int64(Int32.min)] {
            let expected: [UInt8] = [0x20] + IndexKey.orderedInteger(number)
            #expect(IndexKey.encode(.int64(number)) == expected)
            if let narrow = Int32(exactly: number) { #expect(IndexKey.encode(.int32(narrow)) == expected) }
            if let narrow = Int16(exactly: number) { #expect(IndexKey.encode(.int16(narrow)) == expected) }
        }
        #expect(IndexKey.encode(.double(2.5)) == [0x21] + IndexKey.orderedDouble(2.5))
        #expect(IndexKey.encode(.null) == [0x00])
        #expect(IndexKey.prefix(root: "Track", attribute: "name") == [IndexKey.tag] + Array("Track".utf8) + [0] + Array("name".utf8) + [0])
        #expect(IndexKey.key(root: "Track", attribute: "name", value: .string("a"), reference: 9)
            == IndexKey.prefix(root: "Track", attribute: "name") + IndexKey.encode(.string("a")) + KeyLayout.referenceBytes(9))
    }

    // [IDX-S2] The encoding sorts as the values do.
    @Test func theIndexEncodingPreservesTheOrderOfValues() {
        let integers: [Int64] = [.min, -70_000, -1, 0, 1, 2, 255, 256, 70_000, .max]
        #expect(integers.map { IndexKey.encode(.int64($0)) } == integers.map { IndexKey.encode(.int64($0)) }.sorted { $0.lexicographicallyPrecedes($1) })
        let doubles: [Double] = [-.infinity, -1e300, -2.5, -1, -0.5, 0, 1e-300, 0.5, 1, 2.5, 1e300, .infinity]
        #expect(doubles.map { IndexKey.encode(.double($0)) } == doubles.map { IndexKey.encode(.double($0)) }.sorted { $0.lexicographicallyPrecedes($1) })
        #expect(IndexKey.encode(.double(-0.0)) == IndexKey.encode(.double(0.0)))
        let strings = ["", "\u{0}", "\u{0}a", "a", "a\u{0}", "ab", "b", "é", "日本"]
        let sorted = strings.sorted()
        #expect(sorted.map { IndexKey.encode(.string($0)) } == sorted.map { IndexKey.encode(.string($0)) }.sorted { $0.lexicographicallyPrecedes($1) })
        // Canonically equal strings share a key.
        #expect(IndexKey.encode(.string("e\u{301}")) == IndexKey.encode(.string("é")))
        // A prefix bound covers exactly the strings that begin with it.
        let prefix = IndexKey.stringPrefix("ab")
        for text in ["ab", "abc", "ab\u{0}"] { #expect(IndexKey.encode(.string(text)).starts(with: prefix)) }
        for text in ["a", "b", "ac"] { #expect(!IndexKey.encode(.string(text)).starts(with: prefix)) }
    }

    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Item", properties: [
                .attribute("name", .string, optional: false, indexed: true),
                .attribute("rank", .integer64, defaultValue: 0, indexed: true),
                .attribute("note", .string),
            ]),
            EntityDescription(name: "Special", superentity: "Item", properties: []),
        ])
    }

    /// The index entries the engine holds for `attribute`, as (encoded value, reference).
    static func entries(_ coordinator: PersistentStoreCoordinator, _ attribute: String) throws -> [[UInt8]] {
        let engine = try #require((coordinator.persistentStores.first as? StrataStore)?.storageEngine)
        return try engine.snapshot().keys(prefix: IndexKey.prefix(root: "Item", attribute: attribute))
    }

    // [IDX-S3] Index entries follow inserts, updates and deletes in the same transaction.
    @Test func indexEntriesFollowInsertsUpdatesAndDeletes() throws {
        let store = TemporaryStore()
        let coordinator = try store.coordinator(model: try Self.model())
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var items: [ManagedObject] = []
        for (i, entity) in ["Item", "Special", "Item"].enumerated() {
            let item = try context.insertNewObject(forEntityName: entity)
            try item.setValue(.string("n\(i)"), forKey: "name")
            try item.setValue(.int64(Int64(10 * i)), forKey: "rank")
            items.append(item)
        }
        try context.save()
        func expected(_ pairs: [(AttributeValue, ManagedObject)], _ attribute: String) throws -> [[UInt8]] {
            try pairs.map { value, object in
                guard case .int64(let reference)? = object.objectID.referenceObject else { throw ObjectGraphError(.invalidArgument, "no ref") }
                return IndexKey.key(root: "Item", attribute: attribute, value: value, reference: reference)
            }.sorted { $0.lexicographicallyPrecedes($1) }
        }
        #expect(try Self.entries(coordinator, "name") == expected([(.string("n0"), items[0]), (.string("n1"), items[1]), (.string("n2"), items[2])], "name"))
        try items[1].setValue("renamed", forKey: "name")
        try items[2].setValue("only the note", forKey: "note")
        context.delete(items[0])
        try context.save()
        #expect(try Self.entries(coordinator, "name") == expected([(.string("renamed"), items[1]), (.string("n2"), items[2])], "name"))
        #expect(try Self.entries(coordinator, "rank") == expected([(.int64(10), items[1]), (.int64(20), items[2])], "rank"))
        #expect(try Self.entries(coordinator, "note").isEmpty, "unindexed attributes have no entries")
    }

    /// [IDX-S3] An update moves only the entries of the indexed attributes it changes (the
    /// object read the row it replaces; a conflict's resolution reads the row again and marks
    /// what the policy writes over it as changed). Under every merge policy, with each side
    /// changing an indexed attribute, an unindexed one, both or neither, the entries after the
    /// save are exactly the rows' values.
    @Test(arguments: MergePolicy.MergeType.allCases)
    func indexEntriesMatchTheRowsAfterEveryMergePolicysSave(policy: MergePolicy.MergeType) throws {
        let store = TemporaryStore()
        let coordinator = try store.coordinator(model: try Self.model())
        let setup = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        // Per item, what the store's side (another context) and this side change: 0 nothing,
        // 1 the indexed rank, 2 the unindexed note, 3 both (and this side's name when it does).
        let cases = (0..<16).map { ($0 & 3, $0 >> 2) }
        var items: [ManagedObject] = []
        for index in cases.indices {
            let item = try setup.insertNewObject(forEntityName: "Item")
            try item.setValue(.string("n\(index)"), forKey: "name")
            try item.setValue(.int64(Int64(index)), forKey: "rank")
            items.append(item)
        }
        try setup.save()
        let ids = items.map(\.objectID)
        let mine = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        mine.mergePolicy = MergePolicy(merge: policy)
        let objects = try ids.map { try mine.existingObject(with: $0) }
        for object in objects { _ = try object.value(forKey: "rank") }
        let theirs = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for (index, (store, _)) in cases.enumerated() where store != 0 {
            let item = try theirs.existingObject(with: ids[index])
            if store & 1 != 0 { try item.setValue(.int64(Int64(100 + index)), forKey: "rank") }
            if store & 2 != 0 { try item.setValue(.string("theirs"), forKey: "note") }
        }
        try theirs.save()
        for (index, (_, ours)) in cases.enumerated() where ours != 0 {
            if ours & 1 != 0 {
                try objects[index].setValue(.int64(Int64(200 + index)), forKey: "rank")
                try objects[index].setValue(.string("m\(index)"), forKey: "name")
            }
            if ours & 2 != 0 { try objects[index].setValue(.string("ours"), forKey: "note") }
        }
        do { try mine.save() } catch { #expect(policy == .error, "\(policy): \(error)") }
        // The rows as a new context reads them, and the entries they imply.
        let reader = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var rank: [[UInt8]] = [], name: [[UInt8]] = []
        for id in ids {
            let item = try reader.existingObject(with: id)
            guard case .int64(let reference)? = id.referenceObject else { throw ObjectGraphError(.invalidArgument, "no reference") }
            rank.append(IndexKey.key(root: "Item", attribute: "rank", value: try item.value(forKey: "rank"), reference: reference))
            name.append(IndexKey.key(root: "Item", attribute: "name", value: try item.value(forKey: "name"), reference: reference))
        }
        #expect(try Self.entries(coordinator, "rank") == rank.sorted { $0.lexicographicallyPrecedes($1) }, "\(policy)")
        #expect(try Self.entries(coordinator, "name") == name.sorted { $0.lexicographicallyPrecedes($1) }, "\(policy)")
        // The overwrite policy writes this side's rank over the store's change: the case this
        // guards (an entry left at the store's value) exists only when some row moved.
        if policy == .overwrite {
            let overwritten = try reader.existingObject(with: ids[1])  // store: rank; ours: nothing
            #expect(try overwritten.value(forKey: "rank") == .int64(101), "an object this side did not change is not in its save")
            let written = try reader.existingObject(with: ids[9])  // store: rank; ours: note
            #expect(try written.value(forKey: "rank") == .int64(9), "overwrite writes the object's whole state")
        }
    }
}

@Suite struct IndexedFetchTests {
    /// The same items in a StrataStore and in the in-memory reference store.
    static func stores() throws -> (strata: PersistentStoreCoordinator, reference: PersistentStoreCoordinator, keep: TemporaryStore) {
        let model = try SecondaryIndexTests.model()
        let temporary = TemporaryStore()
        let strata = try temporary.coordinator(model: model)
        let reference = PersistentStoreCoordinator(managedObjectModel: model)
        try reference.addPersistentStore(type: .inMemory, at: nil)
        let names = ["alpha", "alp", "beta", "Beta", "é", "e\u{301}x", "gamma", "", "delta", "alphabet"]
        for coordinator in [strata, reference] {
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            for i in 0..<60 {
                let item = try context.insertNewObject(forEntityName: i % 7 == 0 ? "Special" : "Item")
                try item.setValue(.string(names[i % names.count] + (i < 10 ? "" : "\(i % 13)")), forKey: "name")
                try item.setValue(.int64(Int64((i * 37) % 23) - 11), forKey: "rank")
            }
            try context.save()
        }
        return (strata, reference, temporary)
    }

    static func results(_ coordinator: PersistentStoreCoordinator, _ entity: String, _ predicate: FetchPredicate) throws -> [String] {
        var request = FetchRequest(entityName: entity)
        request.predicate = predicate
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        return try context.fetch(request).map { "\(try $0.value(forKey: "name"))|\(try $0.value(forKey: "rank"))" }.sorted()
    }

    // [IDX-S4] Every index-served shape returns exactly what a full evaluation returns.
    @Test(arguments: [
        "name == 'alpha'", "name == 'é'", "name IN {'beta', 'gamma3', 'nothing'}", "name BEGINSWITH 'alp'",
        "name BEGINSWITH ''", "name < 'beta'", "name >= 'delta'", "rank == 3", "rank < 0", "rank <= -11",
        "rank > 5", "rank >= 11", "rank BETWEEN {-2, 4}", "rank IN {1, 2, 99}", "-3 < rank AND name BEGINSWITH 'a'",
    ])
    func indexServedFetchesMatchTheReferenceStore(format: String) throws {
        let (strata, reference, keep) = try Self.stores()
        let predicate = try FetchPredicate(format: format)
        let entity = try strata.managedObjectModel.entity(named: "Item")
        #expect(StrataStore.indexPlan(for: { var r = FetchRequest(entityName: "Item"); r.entity = entity; r.predicate = predicate; return r }(), entity: entity, root: "Item") != nil, "\(format) should use an index")
        for name in ["Item", "Special"] {
            #expect(try Self.results(strata, name, predicate) == Self.results(reference, name, predicate), "\(format) on \(name)")
        }
        withExtendedLifetime(keep) {}
    }

    // `== nil` on an indexed attribute is served by the index's null entries ([IDX-S1]: every
    // row has one entry per indexed attribute, nulls under type byte 0x00): fetches, sorted and
    // limited fetches and counts equal the reference store's.
    @Test(arguments: ["tag == nil", "tag == nil AND name BEGINSWITH 'n1'", "tag == nil OR tag == 'b'", "tag != nil"])
    func nilComparisonsOfIndexedAttributesMatchTheReferenceStore(format: String) throws {
        let model = try ManagedObjectModel(entities: [EntityDescription(name: "Item", properties: [
            .attribute("name", .string, optional: false, indexed: true), .attribute("tag", .string, indexed: true),
        ])])
        let temporary = TemporaryStore()
        let strata = try temporary.coordinator(model: model)
        let reference = PersistentStoreCoordinator(managedObjectModel: model)
        try reference.addPersistentStore(type: .inMemory, at: nil)
        for coordinator in [strata, reference] {
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            for i in 0..<80 {
                let item = try context.insertNewObject(forEntityName: "Item")
                try item.setValue(.string("n\(i)"), forKey: "name")
                if i % 3 != 0 { try item.setValue(.string(["a", "b", ""][i % 3]), forKey: "tag") }
            }
            try context.save()
        }
        let predicate = try FetchPredicate(format: format)
        let entity = try model.entity(named: "Item")
        if format == "tag == nil" {
            var request = FetchRequest(entityName: "Item")
            request.entity = entity
            request.predicate = predicate
            #expect(StrataStore.indexPlan(for: request, entity: entity, root: "Item") != nil, "== nil uses the index")
        }
        for limit in [0, 5] {
            var request = FetchRequest(entityName: "Item")
            request.predicate = predicate
            request.sortDescriptors = [FetchSortDescriptor(keyPath: "name")]
            request.fetchLimit = limit
            func names(_ coordinator: PersistentStoreCoordinator) throws -> [String] {
                let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
                return try withExtendedLifetime(context) {
                    try context.fetch(request).map { try $0.value(forKey: "name").stringValue ?? "?" }
                }
            }
            #expect(try names(strata) == names(reference), "\(format) limit \(limit)")
            #expect(
                try ManagedObjectContext(persistentStoreCoordinator: strata).count(for: request)
                    == ManagedObjectContext(persistentStoreCoordinator: reference).count(for: request), "\(format) count")
        }
        withExtendedLifetime(temporary) {}
    }

    // Comparisons an index cannot serve fall back to evaluating every row, still correctly.
    @Test(arguments: ["name ==[c] 'BETA'", "rank > 2.5", "rank != nil", "note == 'x'", "name ENDSWITH 'a'", "NOT rank == 3"])
    func unservableComparisonsFallBackToAScan(format: String) throws {
        let (strata, reference, keep) = try Self.stores()
        let predicate = try FetchPredicate(format: format)
        let entity = try strata.managedObjectModel.entity(named: "Item")
        var request = FetchRequest(entityName: "Item")
        request.entity = entity
        request.predicate = predicate
        #expect(StrataStore.indexPlan(for: request, entity: entity, root: "Item") == nil)
        #expect(try Self.results(strata, "Item", predicate) == Self.results(reference, "Item", predicate))
        withExtendedLifetime(keep) {}
    }

    // [IDX-S4] Of several servable conjuncts, the one with the fewest candidates is used.
    @Test func theMostSelectiveIndexIsChosen() throws {
        let (strata, reference, keep) = try Self.stores()
        let predicate = try FetchPredicate(format: "rank >= -11 AND name == 'alpha'")
        let entity = try strata.managedObjectModel.entity(named: "Item")
        var request = FetchRequest(entityName: "Item")
        request.entity = entity
        request.predicate = predicate
        let engine = try #require((strata.persistentStores.first as? StrataStore)?.storageEngine)
        #expect(StrataStore.indexPlans(for: request, entity: entity, root: "Item").map(\.attribute) == ["rank", "name"])
        #expect(StrataStore.bestIndexPlan(for: request, entity: entity, root: "Item", in: try engine.snapshot())?.attribute == "name")
        #expect(try Self.results(strata, "Item", predicate) == Self.results(reference, "Item", predicate))
        withExtendedLifetime(keep) {}
    }

    // [IDX-S5] Limited fetches sorted by an indexed attribute walk the index in order and stop
    // early; every page equals the reference store's, ties and secondary sorts included.
    // The last three make the walk probe the other conjunct's index per candidate for small
    // pages (more keys than the walk expects to visit) and read it into a set for large ones.
    @Test(arguments: [
        nil, "rank > 0", "name BEGINSWITH 'a'", "name IN {'beta', 'alpha3', 'gamma1', 'zzz'}", "rank IN {1, -2, 99}", "note == nil",
        "rank < 5 AND name > 'b'", "rank IN {1, -2, 99} AND name BEGINSWITH 'a'", "rank == 3 AND name > 'b'", "rank IN {-11, -10, -9, -8, -7, -6, -5, -4} AND name > ''",
    ])
    func limitedFetchesSortedByAnIndexedAttributeMatchTheReferenceStore(format: String?) throws {
        let (strata, reference, keep) = try Self.stores()
        let predicate = try format.map { try FetchPredicate(format: $0) }
        let entity = try strata.managedObjectModel.entity(named: "Item")
        func page(_ coordinator: PersistentStoreCoordinator, _ entityName: String, _ sorts: [FetchSortDescriptor], _ limit: Int, _ offset: Int, ids: Bool) throws -> [String] {
            var request = FetchRequest(entityName: entityName)
            request.predicate = predicate
            request.sortDescriptors = sorts
            request.fetchLimit = limit
            request.fetchOffset = offset
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            let objects: [ManagedObject]
            if ids {
                request.resultType = .managedObjectID
                objects = try context.fetchObjectIDs(request).map { context.object(with: $0) }
            } else {
                objects = try context.fetch(request)
            }
            return try objects.map { "\(try $0.value(forKey: "name"))|\(try $0.value(forKey: "rank"))" }
        }
        let sortings: [[FetchSortDescriptor]] = [
            [FetchSortDescriptor(keyPath: "name")], [FetchSortDescriptor(keyPath: "rank")],
            [FetchSortDescriptor(keyPath: "rank"), FetchSortDescriptor(keyPath: "name", ascending: false)],
            [FetchSortDescriptor(keyPath: "name"), FetchSortDescriptor(keyPath: "rank")],
        ]
        for sorts in sortings {
            var request = FetchRequest(entityName: "Item")
            request.entity = entity
            request.predicate = predicate
            request.sortDescriptors = sorts
            request.fetchLimit = 3
            #expect(StrataStore.orderedIndexPlan(for: request, entity: entity, root: "Item")?.attribute == sorts[0].keyPath)
            for entityName in ["Item", "Special"] {
                for limit in [1, 3, 7, 100] {
                    for offset in [0, 2] {
                        let ids = limit == 7
                        #expect(
                            try page(strata, entityName, sorts, limit, offset, ids: ids) == page(reference, entityName, sorts, limit, offset, ids: ids),
                            "\(format ?? "no predicate") \(sorts) limit \(limit) offset \(offset) on \(entityName)")
                    }
                }
            }
        }
        withExtendedLifetime(keep) {}
    }

    // Sorts the index cannot serve in order (descending, string options, a key path) use no
    // ordered plan.
    // [IDX-S5] An equality conjunct with more keys than the walk expects to visit is probed
    // per candidate; one with fewer is read into a set; a range conjunct is never probed.
    @Test func anOrderedWalkProbesLargeEqualityConjunctsAndReadsSmallOnes() throws {
        let (strata, _, keep) = try Self.stores()
        let entity = try strata.managedObjectModel.entity(named: "Item")
        let store = try #require(strata.persistentStores.first as? StrataStore)
        let snapshot = try store.openEngine().snapshot()
        func filter(_ format: String, expecting candidates: Int) throws -> StrataStore.RowFilter? {
            var request = FetchRequest(entityName: "Item")
            request.predicate = try FetchPredicate(format: format)
            let plan = try #require(StrataStore.indexPlans(for: request, entity: entity, root: "Item").first)
            return StrataStore.rowFilter(of: plan, in: snapshot, expectedCandidates: candidates)
        }
        guard case .probe(let points)? = try filter("rank IN {1, -2, 99}", expecting: 1) else {
            Issue.record("a conjunct with more keys than candidates was not probed")
            return
        }
        #expect(points.count == 3)
        guard case .set(let references)? = try filter("rank IN {1, -2, 99}", expecting: 1000) else {
            Issue.record("a conjunct with few keys was not read into a set")
            return
        }
        #expect(!references.isEmpty)
        guard case .set? = try filter("rank > 0", expecting: 1) else {
            Issue.record("a range conjunct was probed")
            return
        }
        withExtendedLifetime(keep) {}
    }

    @Test func sortsTheIndexCannotServeUseNoOrderedPlan() throws {
        let entity = try SecondaryIndexTests.model().entity(named: "Item")
        for sort in [FetchSortDescriptor(keyPath: "name", ascending: false), FetchSortDescriptor(keyPath: "name", options: [.caseInsensitive]), FetchSortDescriptor(keyPath: "note")] {
            var request = FetchRequest(entityName: "Item")
            request.entity = entity
            request.sortDescriptors = [sort]
            request.fetchLimit = 3
            #expect(StrataStore.orderedIndexPlan(for: request, entity: entity, root: "Item") == nil, "\(sort)")
        }
        var unlimited = FetchRequest(entityName: "Item")
        unlimited.entity = entity
        unlimited.sortDescriptors = [FetchSortDescriptor(keyPath: "name")]
        #expect(StrataStore.orderedIndexPlan(for: unlimited, entity: entity, root: "Item") == nil)
    }

    // [IDX-S6] Indexing is not part of the version hash: reopening with a model that indexes
    // another attribute rebuilds the entries, so index-served fetches still see every row.
    @Test func reopeningWithAModelThatIndexesOtherAttributesRebuildsTheIndexes() throws {
        func model(indexNote: Bool) throws -> ManagedObjectModel {
            try ManagedObjectModel(entities: [
                EntityDescription(name: "Item", properties: [
                    .attribute("name", .string, optional: false, indexed: !indexNote),
                    .attribute("note", .string, indexed: indexNote),
                ]),
            ])
        }
        let temporary = TemporaryStore()
        do {
            let coordinator = try temporary.coordinator(model: model(indexNote: false))
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            for i in 0..<30 {
                let item = try context.insertNewObject(forEntityName: "Item")
                try item.setValue(.string("n\(i)"), forKey: "name")
                try item.setValue(.string(i % 3 == 0 ? "odd" : "even"), forKey: "note")
            }
            try context.save()
            for store in coordinator.persistentStores { try coordinator.remove(store) }
        }
        for indexNote in [true, false, true] {
            let reopened = try temporary.coordinator(model: model(indexNote: indexNote))
            // [IDX-S9] Built in the background: a fetch meanwhile scans (checked below, after).
            let store = try #require(reopened.persistentStores.first as? StrataStore)
            var request = FetchRequest(entityName: "Item")
            request.predicate = try FetchPredicate(format: "note == 'odd'")
            #expect(try ManagedObjectContext(persistentStoreCoordinator: reopened).fetch(request).count == 10)
            try store.waitForIndexBuild()
            #expect(store.indexBuildProgress == nil)
            let engine = try #require(store.storageEngine)
            let snapshot = try engine.snapshot()
            #expect(snapshot.countKeys(from: IndexKey.prefix(root: "Item", attribute: "note"), to: StrataStore.prefixEnd(IndexKey.prefix(root: "Item", attribute: "note"))) == (indexNote ? 30 : 0))
            #expect(snapshot.countKeys(from: IndexKey.prefix(root: "Item", attribute: "name"), to: StrataStore.prefixEnd(IndexKey.prefix(root: "Item", attribute: "name"))) == (indexNote ? 0 : 30))
            let context = ManagedObjectContext(persistentStoreCoordinator: reopened)
            #expect(try context.fetch(request).count == 10)
            let report = try ObjectChecker.check(engine: engine, repair: false)
            #expect(report.problems.isEmpty, "\(report.problems)")
            for store in reopened.persistentStores { try reopened.remove(store) }
        }
    }

    // A uniqueness constraint is part of its entity's version hash (Core Data's): a model that
    // adds one opens the store only by migration. Over rows that break it, the migration fails
    // as Core Data's does (NSMigrationError, "constraint violation during attempted
    // migration") and writes nothing; once the duplicate is gone it migrates, indexes the
    // attribute and enforces the constraint.
    @Test func aModelAddingAConstraintMigratesOnlyOverRowsThatKeepIt() throws {
        func model(constrained: Bool) throws -> ManagedObjectModel {
            try ManagedObjectModel(entities: [
                EntityDescription(name: "Item", properties: [
                    .attribute("name", .string),
                    .attribute("code", .string),
                ], uniquenessConstraints: constrained ? [["code"]] : []),
            ])
        }
        #expect(try model(constrained: true).entitiesByName["Item"]?.versionHash != model(constrained: false).entitiesByName["Item"]?.versionHash)
        let codePrefix = IndexKey.prefix(root: "Item", attribute: "code")
        let temporary = TemporaryStore()
        do {
            let coordinator = try temporary.coordinator(model: model(constrained: false))
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            for i in 0..<10 {
                let item = try context.insertNewObject(forEntityName: "Item")
                try item.setValue(.string("n\(i)"), forKey: "name")
                // "Cafe\u{301}" and "Café" are canonically equivalent: the same value.
                try item.setValue(.string(i == 9 ? "c0" : i == 8 ? "Cafe\u{301}" : i == 7 ? "Café" : "c\(i)"), forKey: "code")
            }
            try context.save()
            for store in coordinator.persistentStores { try coordinator.remove(store) }
        }
        let bare = try #require(throws: ObjectGraphError.self) { try temporary.coordinator(model: model(constrained: true)) }
        #expect(bare.code == .incompatibleModel && bare.message.contains("uniqueness constraints none in the store, (code) in the model"), "\(bare)")
        for duplicates in [["c0", "Cafe\u{301}"], ["Cafe\u{301}"]] {
            let before = try ModelSafetyTests.files(of: temporary)
            let failed = try #require(throws: ObjectGraphError.self) {
                try temporary.coordinator(model: model(constrained: true), options: LightweightMigrationTests.migrating)
            }
            #expect(failed.code == .migrationFailed && failed.code.cocoaErrorCode == 134110, "\(failed)")
            #expect(failed.entityName == "Item" && failed.key == "code")
            #expect(failed.message.contains("constraint violation during attempted migration"))
            #expect(duplicates.contains { failed.message.contains("code = \"\($0.prefix(3))") }, "\(failed.message)")
            #expect(try ModelSafetyTests.files(of: temporary) == before, "nothing was written")
            // The old model removes one duplicate; the next attempt finds the other.
            let fixing = try temporary.coordinator(model: model(constrained: false))
            let context = ManagedObjectContext(persistentStoreCoordinator: fixing)
            var request = FetchRequest(entityName: "Item")
            request.predicate = try FetchPredicate(format: "name == %@", duplicates.count == 2 ? "n9" : "n8")
            for item in try context.fetch(request) { context.delete(item) }
            try context.save()
            for store in fixing.persistentStores { try fixing.remove(store) }
        }
        for pass in 0..<2 {
            let reopened = try temporary.coordinator(model: model(constrained: true), options: pass == 0 ? LightweightMigrationTests.migrating : [:])
            let store = try #require(reopened.persistentStores.first as? StrataStore)
            try store.waitForIndexBuild()
            let engine = try #require(store.storageEngine)
            #expect(try engine.snapshot().countKeys(from: codePrefix, to: StrataStore.prefixEnd(codePrefix)) == 8 + pass, "pass \(pass)")
            #expect(try StrataStore.indexesAreCurrent(for: model(constrained: true), in: engine.snapshot()))
            let context = ManagedObjectContext(persistentStoreCoordinator: reopened)
            for code in ["c5", "c0", "Café"] {
                let duplicate = try context.insertNewObject(forEntityName: "Item")
                try duplicate.setValue(.string(code), forKey: "code")
                let error = try #require(throws: ObjectGraphError.self) { try context.save() }
                #expect(error.code == .constraintConflict)
                context.rollback()
            }
            let fresh = try context.insertNewObject(forEntityName: "Item")
            try fresh.setValue(.string("new\(pass)"), forKey: "code")
            try context.save()
            let report = try ObjectChecker.check(engine: engine, repair: false)
            #expect(report.problems.isEmpty, "\(report.problems)")
            for store in reopened.persistentStores { try reopened.remove(store) }
        }
    }

    // [MIG-1] A compound constraint added is checked over its entity's hierarchy: rows conflict
    // only when every value is equal and none is null, a subentity's rows with its
    // superentity's; another hierarchy's rows with the same attributes never do.
    @Test(arguments: [false, true])
    func anAddedCompoundConstraintIsCheckedOverItsHierarchy(captainDuplicates: Bool) throws {
        func model(constrained: Bool) throws -> ManagedObjectModel {
            try ManagedObjectModel(entities: [
                EntityDescription(name: "Member", properties: [
                    .attribute("team", .string), .attribute("number", .integer64),
                ], uniquenessConstraints: constrained ? [["team", "number"]] : []),
                EntityDescription(name: "Captain", superentity: "Member", properties: [.attribute("armband", .boolean)]),
                EntityDescription(name: "Coach", properties: [.attribute("team", .string), .attribute("number", .integer64)]),
            ])
        }
        let temporary = TemporaryStore()
        do {
            let coordinator = try temporary.coordinator(model: model(constrained: false))
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            let rows: [(String, String?, Int64)] = [
                ("Member", "red", 1), ("Member", "red", 2), ("Member", "blue", 1), ("Member", nil, 3), ("Member", nil, 3),
                ("Captain", captainDuplicates ? "red" : "green", captainDuplicates ? 2 : 7), ("Coach", "red", 1),
            ]
            for (entity, team, number) in rows {
                let object = try context.insertNewObject(forEntityName: entity)
                try object.setValue(team.map(AttributeValue.string) ?? .null, forKey: "team")
                try object.setValue(.int64(number), forKey: "number")
            }
            try context.save()
            for store in coordinator.persistentStores { try coordinator.remove(store) }
        }
        if captainDuplicates {
            let error = try #require(throws: ObjectGraphError.self) {
                try temporary.coordinator(model: model(constrained: true), options: LightweightMigrationTests.migrating)
            }
            #expect(error.code == .migrationFailed && error.entityName == "Member" && error.key == "team", "\(error)")
            #expect(error.message.contains("team = \"red\", number = 2"), "\(error.message)")
            return
        }
        let coordinator = try temporary.coordinator(model: model(constrained: true), options: LightweightMigrationTests.migrating)
        let store = try #require(coordinator.persistentStores.first as? StrataStore)
        try store.waitForIndexBuild()
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let captain = try context.insertNewObject(forEntityName: "Captain")
        try captain.setValue("blue", forKey: "team")
        try captain.setValue(.int64(1), forKey: "number")
        #expect(throws: ObjectGraphError.self, "a captain duplicates a member") { try context.save() }
        context.rollback()
        let coach = try context.insertNewObject(forEntityName: "Coach")
        try coach.setValue("blue", forKey: "team")
        try coach.setValue(.int64(1), forKey: "number")
        try context.save()
        for store in coordinator.persistentStores { try coordinator.remove(store) }
    }

    // [IDX-S7] Counts the indexes answer exactly read no row and equal the reference store's;
    // the others (BEGINSWITH, subentities only, non-index parts) are counted from rows, also
    // equal.
    @Test(arguments: [
        ("name == 'alpha'", true), ("name IN {'beta', 'gamma3', 'nothing'}", true), ("rank < 0", true),
        ("rank BETWEEN {-2, 4} AND name > 'b'", true), ("rank >= 11 AND rank <= 11", true), ("name == 'é'", true),
        ("name BEGINSWITH 'alp'", false), ("rank > 0 AND note == nil", false), ("rank > 0 OR name == 'beta'", false),
        ("rank IN {1, 1, -2, 1}", true), ("rank IN {-2, 1}", true),
    ])
    func countsMatchTheReferenceStore(format: String, indexOnly: Bool) throws {
        let (strata, reference, keep) = try Self.stores()
        let predicate = try FetchPredicate(format: format)
        let entity = try strata.managedObjectModel.entity(named: "Item")
        let engine = try #require((strata.persistentStores.first as? StrataStore)?.storageEngine)
        var request = FetchRequest(entityName: "Item")
        request.entity = entity
        request.predicate = predicate
        request.resultType = .count
        let names = Set(request.matchingEntityNames())
        let served = StrataStore.indexOnlyMatches(
            for: request, entity: entity, root: "Item", names: names, model: strata.managedObjectModel, in: try engine.snapshot())
        #expect((served != nil) == indexOnly, "\(format)")
        for entityName in ["Item", "Special"] {
            var count = FetchRequest(entityName: entityName)
            count.predicate = predicate
            let strataCount = try ManagedObjectContext(persistentStoreCoordinator: strata).count(for: count)
            let referenceCount = try ManagedObjectContext(persistentStoreCoordinator: reference).count(for: count)
            #expect(strataCount == referenceCount, "\(format) on \(entityName)")
            if entityName == "Item", let served {
                #expect(served.count == referenceCount)
                // One conjunct is counted from its keys alone, repeated values once.
                let counted = StrataStore.indexOnlyCount(
                    for: request, entity: entity, root: "Item", names: names, model: strata.managedObjectModel, in: try engine.snapshot())
                #expect(counted == referenceCount, "\(format): counted from keys")
            }
        }
        withExtendedLifetime(keep) {}
    }
}

import Foundation
import ObjectGraph
@testable import Strata
import StrataEngine
import Testing

/// Model A of these tests and the variants they reopen its store with: Team 1—* Member
/// (cascade), Captain a subentity of Member, and Tag, which has no rows.
struct SafetyModel {
    var nameIndexed = false
    var nicknameIndexed = false
    var nickname = false
    var scoreType: AttributeType = .integer64
    var nameOptional = false
    var teamToMany = false
    var scratch = false
    var scoreDefault: AttributeValue = .null
    var membersDeleteRule: DeleteRule = .cascade
    var tagColor = false

    func make() throws -> ManagedObjectModel {
        var member: [PropertyDescription] = [
            .attribute("name", .string, optional: nameOptional, indexed: nameIndexed),
            .attribute("score", scoreType, defaultValue: scoreDefault),
            teamToMany ? .toMany("team", "Team", inverse: "members") : .toOne("team", "Team", inverse: "members"),
        ]
        if nickname { member.append(.attribute("nickname", .string, indexed: nicknameIndexed)) }
        if scratch { member.append(.attribute("scratch", .string, transient: true)) }
        return try ManagedObjectModel(entities: [
            EntityDescription(name: "Team", properties: [
                .attribute("name", .string, optional: false),
                .toMany("members", "Member", inverse: "team", deleteRule: membersDeleteRule),
            ]),
            EntityDescription(name: "Member", properties: member),
            EntityDescription(name: "Captain", superentity: "Member", properties: [.attribute("since", .date)]),
            EntityDescription(name: "Tag", properties: [.attribute("label", .string)] + (tagColor ? [.attribute("color", .string, indexed: true)] : [])),
        ])
    }

    /// A model that shares nothing with model A.
    static func unrelated() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Invoice", properties: [
                .attribute("number", .integer64, optional: false, indexed: true),
                .toMany("lines", "Line", inverse: "invoice", deleteRule: .cascade),
            ]),
            EntityDescription(name: "Line", properties: [
                .attribute("amount", .double),
                .toOne("invoice", "Invoice", inverse: "lines"),
            ]),
        ])
    }
}

/// Issue 13, SPEC.md [OPEN-1]: a store opened with a model that does not match its own is
/// refused, naming the differences, before anything is written; differences the version hashes do not cover
/// (indexing, defaults, delete rules, transient properties) open the store.
@Suite struct ModelSafetyTests {
    /// A store of model A (or `model`) with a team of three saved in it, closed.
    static func savedStore(_ model: SafetyModel = SafetyModel()) throws -> TemporaryStore {
        let store = TemporaryStore()
        let coordinator = try store.coordinator(model: model.make())
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let team = try context.insertNewObject(forEntityName: "Team")
        try team.setValue("Owls", forKey: "name")
        for (index, (name, entity)) in [("Ada", "Captain"), ("Grace", "Member"), ("Linus", "Member")].enumerated() {
            let member = try context.insertNewObject(forEntityName: entity)
            try member.setValue(.string(name), forKey: "name")
            try member.setValue(model.scoreType == .integer64 ? .int64(Int64(index)) : .string("\(index)"), forKey: "score")
            try member.setValue(team, forKey: "team")
        }
        try context.save()
        for persistent in coordinator.persistentStores { try coordinator.remove(persistent) }
        return store
    }

    /// Every file of the store directory and its bytes.
    static func files(of store: TemporaryStore) throws -> [String: Data] {
        var files: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: store.url.path) {
            files[name] = try Data(contentsOf: store.url.appendingPathComponent(name))
        }
        return files
    }

    /// The error adding the store with `model` throws, or `nil` (and an issue) if it opens;
    /// either way, an issue unless every file of the store keeps its bytes.
    static func refusal(
        _ store: TemporaryStore, _ model: ManagedObjectModel, options: [String: AttributeValue] = [:],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> ObjectGraphError? {
        let before = try files(of: store)
        defer { #expect((try? files(of: store)) == before, "every file of the store keeps its bytes", sourceLocation: sourceLocation) }
        do {
            let coordinator = try store.coordinator(model: model, options: options)
            Issue.record("the store opened with a model that does not match it", sourceLocation: sourceLocation)
            for persistent in coordinator.persistentStores { try? coordinator.remove(persistent) }
            return nil
        } catch let error as ObjectGraphError {
            #expect(error.code == .incompatibleModel, "\(error)", sourceLocation: sourceLocation)
            return error
        } catch {
            Issue.record("not an ObjectGraphError: \(error)", sourceLocation: sourceLocation)
            return nil
        }
    }

    /// Model A still opens the store and reads the three members and the team back, and fsck
    /// finds nothing wrong.
    static func expectIntact(_ store: TemporaryStore, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let coordinator = try store.coordinator(model: SafetyModel().make())
        // [IDX-S9] An index the model no longer asks for is deleted in the background: fsck
        // checks the store once that is done.
        try (coordinator.persistentStores.first as? StrataStore)?.waitForIndexBuild()
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try names(fetch("Member", in: context)) == ["Ada", "Grace", "Linus"], sourceLocation: sourceLocation)
        #expect(try context.count(for: FetchRequest(entityName: "Team")) == 1, sourceLocation: sourceLocation)
        let engine = try #require((coordinator.persistentStores.first as? StrataStore)?.storageEngine)
        let report = try ObjectChecker.check(engine: engine, repair: false)
        #expect(report.problems.isEmpty, "\(report.problems)", sourceLocation: sourceLocation)
        for persistent in coordinator.persistentStores { try coordinator.remove(persistent) }
    }

    // [OPEN-1] An unrelated model was adopted: its model record replaced the store's, so fsck then read
    // every row with the wrong model. It is refused, naming the entities on either side, and
    // the store's files keep every byte.
    @Test(arguments: [false, true])
    func anUnrelatedModelIsRefusedAndNothingIsWritten(readOnly: Bool) throws {
        let store = try Self.savedStore()
        let options: [String: AttributeValue] = readOnly ? [PersistentStore.readOnlyOption: .bool(true)] : [:]
        let error = try #require(try Self.refusal(store, try SafetyModel.unrelated(), options: options))
        for name in ["Team", "Member", "Captain", "Tag", "Invoice", "Line"] {
            #expect(error.message.contains(name), "\(error.message)")
        }
        #expect(error.detailedErrors.count == 6, "one detail per entity missing or added: \(error)")
        try Self.expectIntact(store)
    }

    /// Model A with one entity changed in a way its version hash covers, and what the error must
    /// say about it.
    static let changes: [(name: String, model: SafetyModel, mentions: [String], absent: [String])] = [
        ("a property added", SafetyModel(nickname: true), ["Member", "nickname", "not in the store", "Captain"], ["Team", "Tag"]),
        ("an indexed property added", SafetyModel(nicknameIndexed: true, nickname: true), ["Member", "nickname", "Captain"], ["Team", "Tag"]),
        ("a type changed", SafetyModel(scoreType: .string), ["Member", "score", "integer64", "string", "Captain"], ["Team", "Tag"]),
        ("optionality changed", SafetyModel(nameOptional: true), ["Member", "name", "optional", "required", "Captain"], ["Team", "Tag"]),
        ("an indexed property's optionality changed", SafetyModel(nameIndexed: true, nameOptional: true), ["Member", "name", "optional"], ["Team", "Tag"]),
        ("a to-one made to-many", SafetyModel(teamToMany: true), ["Member", "team", "to-one", "to-many", "Captain"], ["Team", "Tag"]),
        // No row to fail decoding: the [IDX-S6] rebuild used to commit the new model record.
        ("an indexed property added to an entity without rows", SafetyModel(tagColor: true), ["Tag", "color", "not in the store"], ["Team", "Member"]),
    ]

    // [OPEN-1] A changed entity was refused only after loading had written the new model record (a WAL
    // record); now it is refused before anything is written, read-write or read-only, and the
    // error says which property differs and how.
    @Test(arguments: 0..<7, [false, true])
    func aChangedEntityIsRefusedBeforeAnythingIsWritten(change: Int, readOnly: Bool) throws {
        let (label, model, mentions, absent) = Self.changes[change]
        let store = try Self.savedStore()
        let options: [String: AttributeValue] = readOnly ? [PersistentStore.readOnlyOption: .bool(true)] : [:]
        let error = try #require(try Self.refusal(store, try model.make(), options: options), "\(label)")
        for word in mentions { #expect(error.message.contains(word), "\(label): \(error.message)") }
        for word in absent { #expect(!error.message.contains(word), "\(label): \(word) did not change: \(error.message)") }
        try Self.expectIntact(store)
    }

    // [IDX-S6] A model that differs only in indexing opens; the indexes are rebuilt in one
    // transaction and the data reads back, through the new index too.
    @Test func aModelThatOnlyChangesIndexingOpensAndRebuildsTheIndexes() throws {
        let store = try Self.savedStore()
        let coordinator = try store.coordinator(model: SafetyModel(nameIndexed: true).make())
        try (coordinator.persistentStores.first as? StrataStore)?.waitForIndexBuild()
        let engine = try #require((coordinator.persistentStores.first as? StrataStore)?.storageEngine)
        let prefix = IndexKey.prefix(root: "Member", attribute: "name")
        #expect(try engine.snapshot().countKeys(from: prefix, to: StrataStore.prefixEnd(prefix)) == 3)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try names(fetch("Member", in: context, where: FetchPredicate(format: "name == 'Grace'"))) == ["Grace"])
        #expect(try names(fetch("Captain", in: context)) == ["Ada"])
        #expect(try ObjectChecker.check(engine: engine, repair: false).problems.isEmpty)
        let stored = try ModelRecord.decode(try #require(try engine.get(KeyLayout.modelKey)))
        #expect(try stored.entity(named: "Member").attributesByName["name"]?.isIndexed == true, "the new model record")
        for persistent in coordinator.persistentStores { try coordinator.remove(persistent) }
        try Self.expectIntact(store)
    }

    // [OPEN-1] The identical model writes nothing at open (nor at close); so do differences outside the
    // version hash (a default value, a delete rule, a transient property), which open the store.
    @Test(arguments: [
        SafetyModel(), SafetyModel(scoreDefault: .int64(7)), SafetyModel(membersDeleteRule: .nullify), SafetyModel(scratch: true),
    ])
    func aMatchingModelOpensWithoutWriting(model: SafetyModel) throws {
        let store = try Self.savedStore()
        let before = try Self.files(of: store)
        for readOnly in [false, true] {
            let options: [String: AttributeValue] = readOnly ? [PersistentStore.readOnlyOption: .bool(true)] : [:]
            let coordinator = try store.coordinator(model: model.make(), options: options)
            #expect(try Self.files(of: store) == before, "nothing written at open")
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            #expect(try names(fetch("Member", in: context)) == ["Ada", "Grace", "Linus"])
            for persistent in coordinator.persistentStores { try coordinator.remove(persistent) }
            #expect(try Self.files(of: store) == before, "nothing written at close")
        }
    }

    /// Deletes the model record (a store saved before it existed, [KEY-1]) and, with
    /// `dropHashes`, the version hashes from the metadata record too.
    static func dropModelRecord(of store: TemporaryStore, dropHashes: Bool = false) throws {
        let engine = try Engine.open(at: store.url.path)
        var batch = WriteBatch()
        batch.delete(KeyLayout.modelKey)
        if dropHashes {
            var record = try MetadataRecord.decode(try #require(try engine.get(KeyLayout.metadataKey)))
            record.metadata = record.metadata.filter { !$0.key.hasPrefix(PersistentStore.modelVersionHashKeyPrefix) }
            batch.put(KeyLayout.metadataKey, record.encode())
        }
        _ = try engine.commit(batch)
        try engine.close()
    }

    // [OPEN-1] A store with rows but no model record: its version hashes decide. A changed entity is
    // refused without writing; the same model opens, rebuilds the indexes and writes the
    // record ([IDX-S6]).
    @Test func aStoreWithoutAModelRecordIsCheckedByItsVersionHashes() throws {
        let store = try Self.savedStore()
        try Self.dropModelRecord(of: store)
        let error = try #require(try Self.refusal(store, try SafetyModel(nameIndexed: true, scoreType: .string).make()))
        #expect(error.message.contains("Member") && error.message.contains("Captain") && !error.message.contains("Team"), "\(error.message)")
        let unrelated = try #require(try Self.refusal(store, try SafetyModel.unrelated()))
        #expect(unrelated.message.contains("Invoice") && unrelated.message.contains("Team"), "\(unrelated.message)")
        let coordinator = try store.coordinator(model: SafetyModel(nameIndexed: true).make())
        try (coordinator.persistentStores.first as? StrataStore)?.waitForIndexBuild()
        let engine = try #require((coordinator.persistentStores.first as? StrataStore)?.storageEngine)
        #expect(try engine.get(KeyLayout.modelKey) != nil, "the rebuild writes the model record")
        let prefix = IndexKey.prefix(root: "Member", attribute: "name")
        #expect(try engine.snapshot().countKeys(from: prefix, to: StrataStore.prefixEnd(prefix)) == 3)
        for persistent in coordinator.persistentStores { try coordinator.remove(persistent) }
        try Self.expectIntact(store)
    }

    // [OPEN-1] Rows, but neither a model record nor version hashes: the entities that have rows must be
    // in the model.
    @Test func aStoreWithRowsButNoModelIsNotAdoptedByAnUnrelatedModel() throws {
        let store = try Self.savedStore()
        try Self.dropModelRecord(of: store, dropHashes: true)
        let error = try #require(try Self.refusal(store, try SafetyModel.unrelated()))
        #expect(error.message.contains("Member") && error.message.contains("Team"), "\(error.message)")
        try Self.expectIntact(store)
    }

    // [IDX-S6] A read-only open cannot rebuild the indexes: with a model that indexes an
    // attribute the store has no entries for, fetches scan instead of finding nothing, and
    // nothing is written.
    @Test func aReadOnlyOpenWithOtherIndexesDoesNotUseThem() throws {
        let store = try Self.savedStore()
        let before = try Self.files(of: store)
        let coordinator = try store.coordinator(
            model: SafetyModel(nameIndexed: true).make(), options: [PersistentStore.readOnlyOption: .bool(true)])
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try names(fetch("Member", in: context, where: FetchPredicate(format: "name == 'Grace'"))) == ["Grace"])
        var count = FetchRequest(entityName: "Member")
        count.predicate = try FetchPredicate(format: "name >= 'B'")
        #expect(try context.count(for: count) == 2)
        var page = FetchRequest(entityName: "Member")
        page.sortDescriptors = [FetchSortDescriptor(keyPath: "name")]
        page.fetchLimit = 2
        #expect(try names(context.fetch(page)) == ["Ada", "Grace"])
        var distinct = FetchRequest(entityName: "Member")
        distinct.propertiesToFetch = [.keyPath("name")]
        distinct.returnsDistinctResults = true
        #expect(try context.fetchDictionaries(distinct).count == 3)
        for persistent in coordinator.persistentStores { try coordinator.remove(persistent) }
        #expect(try Self.files(of: store) == before)
    }
}

import Dispatch
import Foundation
import ObjectGraph
@testable import Strata
import StrataEngine
import Testing
import StrataSync

/// A small model: Team 1—* Member (cascade), Member is subclassed by Captain.
enum StoreTestModel {
    static func make(extraAttribute: Bool = false) throws -> ManagedObjectModel {
        var memberProperties: [PropertyDescription] = [
            .attribute("name", .string, optional: false),
            .attribute("score", .integer64, defaultValue: 0),
            .toOne("team", "Team", inverse: "members"),
        ]
        if extraAttribute { memberProperties.append(.attribute("nickname", .string)) }
        return try ManagedObjectModel(entities: [
            EntityDescription(name: "Team", properties: [
                .attribute("name", .string, optional: false),
                .toMany("members", "Member", inverse: "team", deleteRule: .cascade),
            ]),
            EntityDescription(name: "Member", properties: memberProperties),
            EntityDescription(name: "Captain", superentity: "Member", properties: [.attribute("since", .date)]),
        ])
    }
}

/// A store directory that is removed when the test ends.
final class TemporaryStore {
    let url: URL
    init() {
        StrataStore.register()
        url = FileManager.default.temporaryDirectory.appendingPathComponent("strata-store-tests-\(UUID().uuidString)")
    }
    deinit { try? FileManager.default.removeItem(at: url) }

    func coordinator(model: ManagedObjectModel? = nil, options: [String: AttributeValue] = [:]) throws -> PersistentStoreCoordinator {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try model ?? StoreTestModel.make())
        try coordinator.addPersistentStore(type: .strata, at: url, options: options)
        return coordinator
    }

    /// A coordinator on an InMemoryStore (the reference) and one on this store, both with
    /// `model` and both filled by `populate`: the two sides of a differential test.
    func referenceAndStrata(
        model: ManagedObjectModel, populate: (PersistentStoreCoordinator) throws -> Void
    ) throws -> (reference: PersistentStoreCoordinator, strata: PersistentStoreCoordinator) {
        let reference = PersistentStoreCoordinator(managedObjectModel: model)
        try reference.addPersistentStore(type: .inMemory, configuration: nil, at: nil, options: [:])
        let strata = try coordinator(model: model)
        try populate(reference)
        try populate(strata)
        return (reference, strata)
    }
}

func fetch(_ entity: String, in context: ManagedObjectContext, where predicate: FetchPredicate? = nil) throws -> [ManagedObject] {
    var request = FetchRequest(entityName: entity)
    request.predicate = predicate
    request.sortDescriptors = [FetchSortDescriptor(keyPath: "name", ascending: true)]
    return try context.fetch(request)
}

func names(_ objects: [ManagedObject]) throws -> [String] {
    try objects.map { try $0.value(forKey: "name").stringValue ?? "?" }
}

@Suite struct StrataStoreTests {
    /// Saves a team of three, one of them a captain.
    static func populate(_ coordinator: PersistentStoreCoordinator) throws {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let team = try context.insertNewObject(forEntityName: "Team")
        try team.setValue("Owls", forKey: "name")
        for (name, entity) in [("Ada", "Captain"), ("Grace", "Member"), ("Linus", "Member")] {
            let member = try context.insertNewObject(forEntityName: entity)
            try member.setValue(.string(name), forKey: "name")
            try member.setValue(team, forKey: "team")
        }
        try context.save()
    }

    @Test func whatWasSavedIsReadBackAfterTheEngineIsClosedAndReopened() throws {
        let store = TemporaryStore()
        do {
            let coordinator = try store.coordinator()
            try Self.populate(coordinator)
            for persistent in coordinator.persistentStores { try coordinator.remove(persistent) }
        }
        let coordinator = try store.coordinator()
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try names(fetch("Member", in: context)) == ["Ada", "Grace", "Linus"])
        #expect(try names(fetch("Captain", in: context)) == ["Ada"])
        let team = try #require(try fetch("Team", in: context).first)
        let members = try team.objectIDs(forRelationshipNamed: "members")
        #expect(members.count == 3)
        #expect(try context.count(for: FetchRequest(entityName: "Member")) == 3)
        // URIs survive the reopen: the store identifier is persisted.
        let uri = team.objectID.uriRepresentation()
        #expect(coordinator.managedObjectID(forURIRepresentation: uri) == team.objectID)
    }

    @Test func versionsStartAtOneAndGrowByOnePerSave() throws {
        let store = TemporaryStore()
        let coordinator = try store.coordinator()
        try Self.populate(coordinator)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let ada = try #require(try fetch("Member", in: context).first)
        _ = try ada.value(forKey: "name")
        #expect(ada.committedVersion == 1)
        for score in 1...3 {
            try ada.setValue(.int64(Int64(score)), forKey: "score")
            try context.save()
        }
        #expect(ada.committedVersion == 4)
        let fresh = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let again = try fresh.existingObject(with: ada.objectID)
        _ = try again.value(forKey: "name")
        #expect(again.committedVersion == 4)
    }

    // [SAVE-1]
    @Test func aSaveOverAConcurrentChangeFailsWithAConflictAndWritesNothing() throws {
        let store = TemporaryStore()
        let coordinator = try store.coordinator()
        try Self.populate(coordinator)
        let first = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let second = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let a = try #require(try fetch("Member", in: first).first)
        let b = try second.existingObject(with: a.objectID)
        _ = try a.value(forKey: "name")
        _ = try b.value(forKey: "name")
        try a.setValue(.int64(10), forKey: "score")
        try first.save()
        try b.setValue(.int64(20), forKey: "score")
        let newcomer = try second.insertNewObject(forEntityName: "Member")
        try newcomer.setValue("Newcomer", forKey: "name")
        do {
            try second.save()
            Issue.record("the conflicting save succeeded")
        } catch let error as ObjectGraphError {
            #expect(error.code == .mergeConflict)
            #expect(error.code.cocoaErrorCode == 133020)
            let conflict = try #require(error.conflicts.first)
            #expect(error.conflicts.count == 1)
            #expect(conflict.sourceObject === b && conflict.objectID == a.objectID)
            #expect(conflict.oldVersionNumber == 1 && conflict.newVersionNumber == 2)
            #expect(conflict.persistedSnapshot?["score"] == .attribute(.int64(10)) && conflict.cachedSnapshot?["score"] == .attribute(.int64(10)))
            #expect(conflict.objectSnapshot?["score"] != .attribute(.int64(10)), "the object's snapshot is what it read")
        }
        let check = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try check.existingObject(with: a.objectID).value(forKey: "score") == .int64(10))
        #expect(try names(fetch("Member", in: check)).contains("Newcomer") == false, "nothing of the failed save was written")
    }

    @Test func countingAnEntityUsesTheStoredCounters() throws {
        let store = TemporaryStore()
        let coordinator = try store.coordinator()
        try Self.populate(coordinator)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try context.count(for: FetchRequest(entityName: "Member")) == 3)
        #expect(try context.count(for: FetchRequest(entityName: "Captain")) == 1)
        let grace = try #require(try fetch("Member", in: context, where: .equal("name", "Grace")).first)
        context.delete(grace)
        try context.save()
        #expect(try context.count(for: FetchRequest(entityName: "Member")) == 2)
        let engine = try #require((coordinator.persistentStores.first as? StrataStore)?.storageEngine)
        #expect(try engine.snapshot().count == 7, "three rows, the metadata record, the model record and the two remaining members' Team.members keys")
    }

    // [ROW-5] The store keeps the model it was saved with, written once per load, so tools
    // can decode rows without the application.
    @Test func theStoreKeepsItsModelAndWritesItOncePerLoad() throws {
        // Every flag and kind the record carries.
        let model = try ManagedObjectModel(entities: [
            EntityDescription(name: "Thing", isAbstract: true, properties: [
                .attribute("label", .string, optional: false, indexed: true),
                .attribute("scratch", .integer32, transient: true),
                .attribute("blob", .binaryData),
            ]),
            EntityDescription(name: "Box", superentity: "Thing", properties: [
                .toMany("items", "Item", inverse: "box", ordered: true, minCount: 0, maxCount: 9, deleteRule: .deny),
            ]),
            EntityDescription(name: "Item", superentity: "Thing", properties: [
                .attribute("weight", .double, indexed: true),
                .toOne("box", "Box", inverse: "items", optional: true, deleteRule: .noAction),
            ]),
        ])
        let store = TemporaryStore()
        let coordinator = try store.coordinator(model: model)
        let seed = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let box = try seed.insertNewObject(forEntityName: "Box")
        try box.setValue("crate", forKey: "label")
        try seed.save()
        let engine = try #require((coordinator.persistentStores.first as? StrataStore)?.storageEngine)
        let bytes = try #require(try engine.get(KeyLayout.modelKey))
        let stored = try ModelRecord.decode(bytes)
        #expect(stored.entities.map(\.name).sorted() == model.entities.map(\.name).sorted())
        for entity in model.entities {
            let copy = try #require(stored.entitiesByName[entity.name])
            #expect(copy.superentityName == entity.superentityName)
            #expect(copy.isAbstract == entity.isAbstract)
            #expect(copy.properties.map(\.name) == entity.properties.map(\.name))
            for attribute in entity.attributes {
                let other = try #require(copy.attributesByName[attribute.name])
                #expect(other.attributeType == attribute.attributeType && other.isIndexed == attribute.isIndexed
                    && other.isOptional == attribute.isOptional && other.isTransient == attribute.isTransient)
            }
            for relationship in entity.relationships {
                let other = try #require(copy.relationshipsByName[relationship.name])
                #expect(other.destinationEntityName == relationship.destinationEntityName && other.inverseName == relationship.inverseName
                    && other.isToMany == relationship.isToMany && other.isOrdered == relationship.isOrdered
                    && other.deleteRule == relationship.deleteRule && other.minCount == relationship.minCount
                    && other.maxCount == relationship.maxCount)
            }
        }
        #expect(stored.entityVersionHashesByName == model.entityVersionHashesByName, "the stored model describes the same entities")
        // A second save leaves the record alone.
        let written = try #require(try engine.snapshot().sequence(of: KeyLayout.modelKey))
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let item = try context.insertNewObject(forEntityName: "Item")
        try item.setValue("pen", forKey: "label")
        try context.save()
        #expect(try engine.snapshot().sequence(of: KeyLayout.modelKey) == written)
    }

    // Register/unregister keep exactly the registered rows pinned in the engine's cache (the
    // calls reach the pins in batches; rowCacheStats applies what is waiting).
    @Test func registeredRowsArePinnedAndUnregisteredOnesAreNot() throws {
        let store = TemporaryStore()
        let coordinator = try store.coordinator()
        try Self.populate(coordinator)
        let strata = try #require(coordinator.persistentStores.first as? StrataStore)
        func stats() throws -> RowCacheStats { try #require(strata.rowCacheStats()) }
        #expect(try stats().pinnedKeys == 0, "the populating context is gone")
        do {
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            context.stalenessInterval = 0  // faults read the store, not the coordinator's cache
            let members = try fetch("Member", in: context)
            #expect(try stats().pinnedKeys == 3)
            for member in members { _ = try member.value(forKey: "name") }
            #expect(try stats().pinnedEntries >= 3, "fired faults keep their rows resident")
            context.reset()
            #expect(try stats().pinnedKeys == 0)
            let teams = try fetch("Team", in: context)
            #expect(try stats().pinnedKeys == 1)
            withExtendedLifetime(teams) {}
            // Registered objects are held weakly: once the result goes, so does the pin.
        }
        // The context is gone: its registrations are gone with it.
        #expect(try stats().pinnedKeys == 0)
        #expect(strata.bookkeepingErrors.isEmpty)
    }

    // An unregister of rows never registered is recorded against exactly those IDs, alone or
    // in a batch, and changes no count of the others.
    @Test func unbalancedUnregistersNameTheirIDs() throws {
        let store = TemporaryStore()
        let coordinator = try store.coordinator()
        try Self.populate(coordinator)
        let strata = try #require(coordinator.persistentStores.first as? StrataStore)
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let ids = try fetch("Member", in: context).map(\.objectID)
        try #require(ids.count == 3)
        let pinned = try #require(strata.rowCacheStats()).pinnedKeys
        strata.managedObjectContextDidRegisterObjects(with: [ids[0], ids[2]])
        strata.managedObjectContextDidUnregisterObjects(with: [ids[0], ids[1], ids[2], ids[1]])
        // ids[1] had the context's registration only: its first unregister takes that one.
        #expect(strata.bookkeepingErrors.map(\.objectID) == [ids[1]])
        strata.managedObjectContextDidUnregisterObjects(with: [ids[1]])
        #expect(strata.bookkeepingErrors.map(\.objectID) == [ids[1], ids[1]])
        #expect(try #require(strata.rowCacheStats()).pinnedKeys == pinned - 1)
        withExtendedLifetime(context) {}
    }

    // A fetch's faults fire from the rows the fetch read: no row is read again; a refreshed
    // object in a context that wants fresh values reads its row.
    @Test func fetchedFaultsFireWithoutReadingTheirRowsAgain() throws {
        let store = TemporaryStore()
        let coordinator = try store.coordinator()
        try Self.populate(coordinator)
        let strata = try #require(coordinator.persistentStores.first as? StrataStore)
        func reads() throws -> Int {
            let stats = try #require(strata.rowCacheStats())
            return stats.hits + stats.misses + stats.walReads
        }
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let members = try fetch("Member", in: context)
        #expect(members.count == 3 && members.allSatisfy(\.isFault))
        let before = try reads()
        for member in members { _ = try member.value(forKey: "name") }
        #expect(try reads() == before, "the fetched rows fired the faults")
        context.refresh(members[0], mergeChanges: false)
        context.stalenessInterval = 0
        _ = try members[0].value(forKey: "name")
        #expect(try reads() == before + 1, "a refreshed object reads its row")
    }

    // Fetching and releasing leaves no count behind: the store's counts go back to nothing.
    @Test func rowsFetchedAndReleasedLeaveNoPin() throws {
        let store = TemporaryStore()
        let coordinator = try store.coordinator()
        try Self.populate(coordinator)
        let strata = try #require(coordinator.persistentStores.first as? StrataStore)
        let engine = try #require(strata.storageEngine)
        _ = strata.rowCacheStats()
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        for _ in 0..<5 {
            let members = try fetch("Member", in: context)
            #expect(members.count == 3)
        }
        context.processPendingChanges()  // the last fetch's deallocations, batched
        #expect(strata.rowPins.counts.withLock { $0.isEmpty }, "each fetch's registrations were balanced by its releases")
        #expect(engine.cacheStats().pinnedKeys == 0)
        #expect(strata.bookkeepingErrors.isEmpty)
    }

    @Test func aForeignFileAtTheURLIsRefusedAndLeftUntouched() throws {
        let store = TemporaryStore()
        try Data("hello".utf8).write(to: store.url)
        #expect(throws: ObjectGraphError.self) { _ = try store.coordinator() }
        #expect(try Data(contentsOf: store.url) == Data("hello".utf8))
        do {
            _ = try store.coordinator()
        } catch let error as ObjectGraphError {
            #expect(error.code == .storeOpenFailed)
            #expect(error.message.contains("not a Strata store"))
        }
    }

    @Test func aZeroLengthReservationFileBecomesTheStore() throws {
        let store = TemporaryStore()
        try Data().write(to: store.url)
        try Self.populate(try store.coordinator())
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: store.url.path, isDirectory: &isDirectory) && isDirectory.boolValue)
    }

    @Test func anIncompatibleModelIsRefusedNamingTheEntitiesThatDifferAndChangesNothing() throws {
        let store = TemporaryStore()
        do { try Self.populate(try store.coordinator()) }
        let before = try FileManager.default.contentsOfDirectory(atPath: store.url.path).sorted()
        do {
            _ = try store.coordinator(model: try StoreTestModel.make(extraAttribute: true))
            Issue.record("an incompatible model was accepted")
        } catch let error as ObjectGraphError {
            #expect(error.code == .incompatibleModel)
            #expect(error.message.contains("Member.nickname") && error.message.contains("Captain"))
            #expect(!error.message.contains("Team"))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.url.path).sorted() == before)
        let context = ManagedObjectContext(persistentStoreCoordinator: try store.coordinator())
        #expect(try fetch("Member", in: context).count == 3, "the store still opens with its own model")
    }

    @Test func aStoreHeldByAnotherProcessGivesALockedError() throws {
        let store = TemporaryStore()
        do {
            let coordinator = try store.coordinator()
            for persistent in coordinator.persistentStores { try coordinator.remove(persistent) }
        }
        // flock(1) is a real second process holding the store's lock.
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/flock")
        // It holds the lock until its standard input closes.
        holder.arguments = [store.url.appendingPathComponent("LOCK").path, "-c", "echo held; read _"]
        let output = Pipe(), input = Pipe()
        holder.standardOutput = output
        holder.standardInput = input
        try holder.run()
        defer {
            try? input.fileHandleForWriting.close()
            holder.waitUntilExit()
        }
        let line = output.fileHandleForReading.availableData  // blocks until the lock is held
        #expect(String(decoding: line, as: UTF8.self).contains("held"))
        do {
            _ = try store.coordinator()
            Issue.record("a locked store was opened")
        } catch let error as ObjectGraphError {
            #expect(error.code == .storeLocked)
            #expect(error.message.contains("LOCK"))
        }
    }

    @Test func aCorruptSegmentIsAClearErrorAndNothingIsOverwritten() throws {
        let store = TemporaryStore()
        do {
            let coordinator = try store.coordinator()
            try Self.populate(coordinator)
            let engine = try #require((coordinator.persistentStores.first as? StrataStore)?.storageEngine)
            try engine.flush()
            for persistent in coordinator.persistentStores { try coordinator.remove(persistent) }
        }
        let segment = try #require(try FileManager.default.contentsOfDirectory(atPath: store.url.path).first { $0.hasSuffix(".seg") })
        let path = store.url.appendingPathComponent(segment)
        var bytes = try Data(contentsOf: path)
        bytes[bytes.count - 20] ^= 0xFF  // inside the footer
        try bytes.write(to: path)
        do {
            _ = try store.coordinator()
            Issue.record("a corrupt store was opened")
        } catch let error as ObjectGraphError {
            #expect(error.code == .storeCorrupted)
            #expect(error.message.contains(segment))
        }
        #expect(try Data(contentsOf: path) == bytes)
    }

    @Test func badOptionsAreRefused() throws {
        let store = TemporaryStore()
        #expect(throws: ObjectGraphError.self) { _ = try store.coordinator(options: [StrataStore.durabilityOption: "sometimes"]) }
        _ = try store.coordinator(options: [StrataStore.durabilityOption: "normal", StrataStore.compactionOption: false])
    }

    // Several contexts on several threads through one coordinator; a fetch during a save sees
    // all of the save or none of it.
    @Test func contextsOnSeveralThreadsSeeWholeSavesOnly() throws {
        let store = TemporaryStore()
        let coordinator = try store.coordinator(options: [StrataStore.durabilityOption: "none"])
        let torn = Locked<[String]>([])
        let group = DispatchGroup()
        for writer in 0..<2 {
            DispatchQueue.global().async(group: group) {
                let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
                for round in 0..<15 {
                    do {
                        let team = try context.insertNewObject(forEntityName: "Team")
                        try team.setValue(.string("w\(writer)r\(round)"), forKey: "name")
                        for i in 0..<4 {
                            let member = try context.insertNewObject(forEntityName: "Member")
                            try member.setValue(.string("w\(writer)r\(round)m\(i)"), forKey: "name")
                            try member.setValue(team, forKey: "team")
                        }
                        try context.save()
                    } catch {
                        torn.withLock { $0.append("save: \(error)") }
                    }
                }
            }
        }
        DispatchQueue.global().async(group: group) {
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            for _ in 0..<40 {
                do {
                    let teams = try context.count(for: FetchRequest(entityName: "Team"))
                    let members = try context.count(for: FetchRequest(entityName: "Member"))
                    let listed = try context.fetchObjectIDs(FetchRequest(entityName: "Member")).count
                    if members < teams * 4 || listed % 4 != 0 { torn.withLock { $0.append("saw \(teams) teams, \(members)/\(listed) members") } }
                } catch {
                    torn.withLock { $0.append("fetch: \(error)") }
                }
            }
        }
        group.wait()
        #expect(torn.withLock { $0 } == [])
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        #expect(try context.count(for: FetchRequest(entityName: "Member")) == 120)
    }
}

import Dispatch
import Foundation
import ObjectGraph
import StrataEngine
import StrataSync
import Testing

@testable import Strata

/// A file system whose WAL syncs wait while a gate is closed, and count themselves.
final class GatedFileSystem: FileSystem {
    let base = PosixFileSystem()
    /// Whether WAL syncs wait; the syncs that started; the gate's condition.
    private let gate = NSCondition()
    // Protected by `gate`.
    nonisolated(unsafe) private var closed = false
    nonisolated(unsafe) private var started = 0

    func close() { gate.withLock { closed = true } }
    func open() {
        gate.withLock {
            closed = false
            gate.broadcast()
        }
    }
    /// WAL syncs that started so far.
    var syncs: Int { gate.withLock { started } }
    /// Waits until `count` WAL syncs have started.
    func waitForSyncs(_ count: Int) {
        gate.withLock { while started < count { gate.wait() } }
    }

    fileprivate func syncing(_ path: String) {
        guard path.hasSuffix(".wal") else { return }
        gate.withLock {
            started += 1
            gate.broadcast()
            while closed { gate.wait() }
        }
    }

    func open(_ path: String, mode: FileOpenMode) throws(StoreError) -> any StrataEngine.FileHandle {
        GatedHandle(try base.open(path, mode: mode), fs: self)
    }
    func kind(of path: String) throws(StoreError) -> FileKind? { try base.kind(of: path) }
    func contentsOfDirectory(_ path: String) throws(StoreError) -> [String] { try base.contentsOfDirectory(path) }
    func createDirectory(_ path: String) throws(StoreError) { try base.createDirectory(path) }
    func remove(_ path: String) throws(StoreError) { try base.remove(path) }
    func rename(_ from: String, to: String) throws(StoreError) { try base.rename(from, to: to) }
    func syncDirectory(_ path: String) throws(StoreError) { try base.syncDirectory(path) }
    func lock(_ path: String) throws(StoreError) -> any FileLock { try base.lock(path) }
    func sharedLock(_ path: String) throws(StoreError) -> (any FileLock)? { try base.sharedLock(path) }
}

/// A handle of ``GatedFileSystem``: the base handle's, with syncs gated.
final class GatedHandle: StrataEngine.FileHandle {
    let base: any StrataEngine.FileHandle
    let fs: GatedFileSystem
    init(_ base: any StrataEngine.FileHandle, fs: GatedFileSystem) {
        self.base = base
        self.fs = fs
    }
    var path: String { base.path }
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(StoreError) -> Int { try base.read(into: buffer, at: offset) }
    func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StoreError) { try base.write(bytes, at: offset) }
    func size() throws(StoreError) -> UInt64 { try base.size() }
    func truncate(to size: UInt64) throws(StoreError) { try base.truncate(to: size) }
    func sync() throws(StoreError) {
        fs.syncing(path)
        try base.sync()
    }
    func close() { base.close() }
}

/// A StrataStore on the file system its test hands it, by path.
final class GatedStrataStore: StrataStore, @unchecked Sendable {
    static let type = PersistentStore.StoreType("GatedStrata")
    /// Protected by its lock; read when a store loads.
    static let fileSystems = Locked<[String: GatedFileSystem]>([:])

    override func engineOptions(_ options: EngineOptions) -> EngineOptions {
        var options = options
        if let path = url?.path, let fs = Self.fileSystems.withLock({ $0[path] }) { options.fileSystem = fs }
        return options
    }
}

/// [SAVE-3] Saves from several contexts share a sync: each is built on the saves still in
/// flight (their rows, relationship keys and metadata record), and a conflict with one of
/// them is found as with a committed save.
@Suite struct GroupCommitTests {
    struct Stack {
        let coordinator: PersistentStoreCoordinator
        let fs: GatedFileSystem
        let url: URL
    }

    func stack(model: ManagedObjectModel? = nil) throws -> Stack {
        PersistentStoreCoordinator.registerStoreClass(GatedStrataStore.self, type: GatedStrataStore.type)
        let url = FileManager.default.temporaryDirectory.appending(path: "group-commit-\(UUID().uuidString)")
        let fs = GatedFileSystem()
        GatedStrataStore.fileSystems.withLock { $0[url.path] = fs }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try model ?? StoreTestModel.make())
        try coordinator.addPersistentStore(type: GatedStrataStore.type, at: url)
        return Stack(coordinator: coordinator, fs: fs, url: url)
    }

    /// Saves `body`'s changes on a new thread; the save's error, when it finishes.
    func saveInBackground(_ context: ManagedObjectContext, _ body: @escaping @Sendable (ManagedObjectContext) throws -> Void) -> DispatchGroup {
        let done = DispatchGroup()
        done.enter()
        context.perform {
            defer { done.leave() }
            do {
                try body(context)
                try context.save()
            } catch {
                Issue.record("the background save failed: \(error)")
            }
        }
        return done
    }

    @Test func savesBuiltWhileAnotherSyncsShareTheNextSyncAndKeepTheCounts() throws {
        let stack = try stack()
        defer { try? FileManager.default.removeItem(at: stack.url) }
        let setup = ManagedObjectContext(persistentStoreCoordinator: stack.coordinator)
        let team = try setup.insertNewObject(forEntityName: "Team")
        try team.setValue("Red", forKey: "name")
        // Cat has no team: deleting her changes no row but hers.
        for name in ["Ann", "Ben", "Cat"] {
            let member = try setup.insertNewObject(forEntityName: "Member")
            try member.setValue(.string(name), forKey: "name")
            if name != "Cat" { try member.setValue(team, forKey: "team") }
        }
        try setup.save()
        let members = try setup.fetch(FetchRequest(entityName: "Member")).sorted { try $0.value(forKey: "name").stringValue ?? "" < $1.value(forKey: "name").stringValue ?? "" }
        let (ann, ben, cat) = (members[0].objectID, members[1].objectID, members[2].objectID)
        let teamID = team.objectID
        let syncsBefore = stack.fs.syncs

        // The first save waits in its sync; two more are built and submitted meanwhile.
        stack.fs.close()
        let first = ManagedObjectContext(concurrencyType: .privateQueue)
        first.persistentStoreCoordinator = stack.coordinator
        let firstDone = saveInBackground(first) { context in
            let dan = try context.insertNewObject(forEntityName: "Member")
            try dan.setValue("Dan", forKey: "name")
            try dan.setValue(context.object(with: teamID), forKey: "team")
            try context.object(with: ann).setValue(.int64(41), forKey: "score")
        }
        stack.fs.waitForSyncs(syncsBefore + 1)
        let second = ManagedObjectContext(concurrencyType: .privateQueue)
        second.persistentStoreCoordinator = stack.coordinator
        let secondDone = saveInBackground(second) { context in
            try context.object(with: ben).setValue(.int64(42), forKey: "score")
            let eve = try context.insertNewObject(forEntityName: "Member")
            try eve.setValue("Eve", forKey: "name")
        }
        let third = ManagedObjectContext(concurrencyType: .privateQueue)
        third.persistentStoreCoordinator = stack.coordinator
        let thirdDone = saveInBackground(third) { context in context.delete(context.object(with: cat)) }
        let store = try #require(stack.coordinator.persistentStores.first as? StrataStore)
        // Both are in flight (built on the first) before the gate opens.
        let deadline = ContinuousClock.now + .seconds(30)
        while store.savesInFlight < 3, ContinuousClock.now < deadline { sched_yield() }
        #expect(store.savesInFlight == 3, "three saves in flight at once")
        stack.fs.open()
        firstDone.wait()
        secondDone.wait()
        thirdDone.wait()
        #expect(stack.fs.syncs == syncsBefore + 2, "the second and third saves shared one sync")

        let reader = ManagedObjectContext(persistentStoreCoordinator: stack.coordinator)
        let names = try reader.fetch(FetchRequest(entityName: "Member")).map { try $0.value(forKey: "name").stringValue ?? "" }.sorted()
        #expect(names == ["Ann", "Ben", "Dan", "Eve"])
        #expect(try reader.count(for: FetchRequest(entityName: "Member")) == 4, "the metadata record's count follows every save")
        #expect(try reader.existingObject(with: teamID).objects(forKey: "members").count == 3, "Dan joined Ann and Ben")
        #expect(try reader.existingObject(with: ann).value(forKey: "score") == .int64(41))
        #expect(try reader.existingObject(with: ben).value(forKey: "score") == .int64(42))
        let engine = try #require(store.storageEngine)
        let record = try StrataStore.record(in: try engine.snapshot())
        #expect(record.rowCounts["Member"] == 4, "each save's record was built on the one before, in flight")
        #expect(record.rowCounts["Team"] == 1)
        try stack.coordinator.remove(store)
        let report = try StoreFsck.run(at: stack.url.path)
        #expect(report.isClean, "fsck finds the rows, keys and counts consistent")
    }

    @Test func aSaveConflictingWithASaveInFlightIsRefused() throws {
        let stack = try stack()
        defer { try? FileManager.default.removeItem(at: stack.url) }
        let setup = ManagedObjectContext(persistentStoreCoordinator: stack.coordinator)
        let ann = try setup.insertNewObject(forEntityName: "Member")
        try ann.setValue("Ann", forKey: "name")
        try setup.save()
        let annID = ann.objectID
        // The late context reads Ann before the first save changes her.
        let late = ManagedObjectContext(persistentStoreCoordinator: stack.coordinator)
        let lateAnn = try late.existingObject(with: annID)
        _ = try lateAnn.value(forKey: "score")

        let syncsBefore = stack.fs.syncs
        stack.fs.close()
        let first = ManagedObjectContext(concurrencyType: .privateQueue)
        first.persistentStoreCoordinator = stack.coordinator
        let firstDone = saveInBackground(first) { context in
            try context.object(with: annID).setValue(.int64(50), forKey: "score")
        }
        stack.fs.waitForSyncs(syncsBefore + 1)
        try lateAnn.setValue("Anne", forKey: "name")
        let error = #expect(throws: ObjectGraphError.self) { try late.save() }
        #expect(error?.code == .mergeConflict, "the row in flight is newer than the one the context read")
        stack.fs.open()
        firstDone.wait()
        let reader = ManagedObjectContext(persistentStoreCoordinator: stack.coordinator)
        let stored = try reader.existingObject(with: annID)
        #expect(try stored.value(forKey: "score") == .int64(50), "the first save's change is not lost")
        #expect(try stored.value(forKey: "name") == .string("Ann"))
    }

    /// [SAVE-4] Uniqueness is checked through the saves in flight: a value a save in flight
    /// inserts is taken, and one it renames away is free.
    @Test func uniquenessIsCheckedAgainstTheSavesInFlight() throws {
        let model = try ManagedObjectModel(entities: [
            EntityDescription(name: "Tag", properties: [.attribute("name", .string)], uniquenessConstraints: [["name"]]),
        ])
        let stack = try stack(model: model)
        defer { try? FileManager.default.removeItem(at: stack.url) }
        let setup = ManagedObjectContext(persistentStoreCoordinator: stack.coordinator)
        let a = try setup.insertNewObject(forEntityName: "Tag")
        try a.setValue("a", forKey: "name")
        try setup.save()
        let aID = a.objectID

        let syncsBefore = stack.fs.syncs
        stack.fs.close()
        let first = ManagedObjectContext(concurrencyType: .privateQueue)
        first.persistentStoreCoordinator = stack.coordinator
        let firstDone = saveInBackground(first) { context in
            try context.insertNewObject(forEntityName: "Tag").setValue("x", forKey: "name")
            try context.object(with: aID).setValue("b", forKey: "name")
        }
        stack.fs.waitForSyncs(syncsBefore + 1)
        let late = ManagedObjectContext(persistentStoreCoordinator: stack.coordinator)
        for taken in ["x", "b"] {
            try late.insertNewObject(forEntityName: "Tag").setValue(.string(taken), forKey: "name")
            let error = #expect(throws: ObjectGraphError.self, "\(taken) is written by the save in flight") { try late.save() }
            #expect(error?.code == .constraintConflict)
            late.rollback()
        }
        let second = ManagedObjectContext(concurrencyType: .privateQueue)
        second.persistentStoreCoordinator = stack.coordinator
        let secondDone = saveInBackground(second) { context in
            try context.insertNewObject(forEntityName: "Tag").setValue("a", forKey: "name")
        }
        // The second save is built on the first, in flight, before the gate opens.
        let store = try #require(stack.coordinator.persistentStores.first as? StrataStore)
        let deadline = ContinuousClock.now + .seconds(30)
        while store.savesInFlight < 2, ContinuousClock.now < deadline { sched_yield() }
        #expect(store.savesInFlight == 2, "the second save was built while the first was in flight")
        stack.fs.open()
        firstDone.wait()
        secondDone.wait()
        let reader = ManagedObjectContext(persistentStoreCoordinator: stack.coordinator)
        let names = try reader.fetch(FetchRequest(entityName: "Tag")).map { try $0.value(forKey: "name").stringValue ?? "" }
        #expect(names.sorted() == ["a", "b", "x"], "a, renamed away in flight, was free for the second save")
    }
}

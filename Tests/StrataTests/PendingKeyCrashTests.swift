import Foundation
import ObjectGraph
@testable import Strata
import StrataEngine
import Testing

/// Issue 17, SPEC.md [MIG-5] under crashes: a store saved with a to-one, migrated to a
/// many-to-many whose keys are left pending, saved (rows of the old layout rewritten), then
/// built in small background batches, crashed at every I/O operation of the whole run. Whatever the crash, the store opens with the new
/// model, every purchase has the customers its last acknowledged (or in-flight) save gave it,
/// and fsck finds nothing wrong: a crash leaves the old model or the new one, never a mix that
/// loses a member.
@Suite struct PendingKeyCrashTests {
    typealias Enumerator = CrashPointEnumerator<Progress>
    typealias Model = PendingRelationshipKeyTests
    /// The first save (v1), the migration (keys pending), the save of rows still in the old
    /// layout, and the build.
    typealias Progress = MigrationCrashProgress

    static let path = "/strata-pending-crash-store"

    /// Every purchase as `total=customers`, sorted (the shape ``PendingRelationshipKeyTests``
    /// reads).
    static let before = PendingRelationshipKeyTests.version1
    /// After the last save: purchase 1 gains C3, purchase 2 loses its customer.
    static let after: [String] = {
        var rows = PendingRelationshipKeyTests.version1
        rows[1] = "1=C1,C3"
        rows[2] = "2="
        return rows
    }()

    static func enumerator() throws -> Enumerator {
        Progress.enumerator("pending relationship keys", run: run(on:), read: read) { progress in
            if progress.changed { return [after] }
            if progress.saved { return progress.migrated && progress.inFlight ? [before, after] : [before] }
            return progress.inFlight ? [[], before] : [[]]
        }
    }

    /// Opens the store on `fs` with `options` and `model`, runs `body`, removes the store.
    static func withStore<R>(
        _ fs: FaultInjectingFileSystem, version: Int, options: [String: AttributeValue] = [:],
        _ body: (PersistentStoreCoordinator) throws -> R
    ) throws -> R {
        try FaultStrataStore.withStore(fs, path: path, model: Model.model(version: version), options: options, body)
    }

    /// The v1 save; the migration, its keys left pending, and a save of rows still in the old
    /// layout; then the background build in batches of 3 rows.
    static func run(on fs: FaultInjectingFileSystem) -> Progress {
        var progress = Progress()
        guard !SharedEngine.isOpen(path: path) else {
            progress.staleEngine = true
            return progress
        }
        do {
            progress.inFlight = true
            try withStore(fs, version: 1) { coordinator in
                let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
                let customers = try (0..<4).map { index in
                    let customer = try context.insertNewObject(forEntityName: "Customer")
                    try customer.setValue(.string("C\(index)"), forKey: "name")
                    return customer
                }
                for index in 0..<Model.purchases {
                    let purchase = try context.insertNewObject(forEntityName: "Purchase")
                    try purchase.setValue(.int64(Int64(index)), forKey: "total")
                    if index < Model.purchases - 1 { try purchase.setValue(customers[index % 4], forKey: "customer") }
                }
                try context.save()
            }
            progress.saved = true
            progress.inFlight = false
            let deferred = LightweightMigrationTests.migrating.merging([StrataStore.indexBuildOption: .string("deferred")]) { $1 }
            try withStore(fs, version: 2, options: deferred) { coordinator in
                // Migrated, the keys pending: the save rewrites rows still in the old layout.
                progress.migrated = true
                progress.inFlight = true
                let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
                var request = FetchRequest(entityName: "Purchase")
                request.sortDescriptors = [FetchSortDescriptor(keyPath: "total", ascending: true)]
                let purchases = try context.fetch(request)
                let c3 = try #require(try context.fetch(LightweightMigrationTests.request("Customer", "name == 'C3'")).first)
                try purchases[1].addObject(c3, toRelationship: "customer")
                try purchases[2].removeObject(try #require(try purchases[2].objects(forKey: "customer").first), fromRelationship: "customer")
                try context.save()
                progress.changed = true
                progress.inFlight = false
            }
            var options = LightweightMigrationTests.migrating
            options[StrataStore.indexBuildBatchOption] = .int64(3)
            try withStore(fs, version: 2, options: options) { coordinator in
                try #require(coordinator.persistentStores.first as? StrataStore).waitForIndexBuild()
            }
            progress.built = true
        } catch {}
        return progress
    }

    /// Opens the crashed store with the new model (migrating it if the crash came first;
    /// reading pending keys as they are, no build) and reads every purchase; fsck must be clean.
    static func read(_ fs: FaultInjectingFileSystem) throws -> [String] {
        let options = LightweightMigrationTests.migrating.merging([StrataStore.indexBuildOption: .string("deferred")]) { $1 }
        return try MigrationCrashProgress.readChecked(
            path: path, open: { try withStore(fs, version: 2, options: options, $0) }, observe: Model.purchaseCustomers)
    }

    @Test func aCrashAnywhereLeavesEveryMember() throws {
        try MigrationCrashProgress.expectEveryCrashRecovers(try Self.enumerator(), run: Self.run(on:), read: Self.read, final: Self.after)
    }
}

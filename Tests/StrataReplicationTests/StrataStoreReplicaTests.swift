import Foundation
import ObjectGraph
import Strata
import Testing

@testable import StrataReplication

/// A StrataStore read from a read replica (issue 20): the replica's directory, opened read-only
/// after each refresh, answers fetches as the primary did at the sequence the replica reports.
@Suite(.enabled(if: S3TestServer.isAvailable, "no S3 server: run Scripts/s3-server start and export what it prints"))
struct StrataStoreReplicaTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Note", properties: [
                .attribute("title", .string, optional: false, defaultValue: "", indexed: true), .attribute("rank", .integer64),
            ])
        ])
    }

    /// The titles a StrataStore at `directory` holds, opened with `options`.
    static func titles(_ directory: String, _ model: ManagedObjectModel, readOnly: Bool) throws -> [String] {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let store = try coordinator.addPersistentStore(
            type: .strata, at: URL(fileURLWithPath: directory), options: readOnly ? [PersistentStore.readOnlyOption: .bool(true)] : [:])
        defer { try? coordinator.remove(store) }
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var request = FetchRequest(entityName: "Note")
        request.sortDescriptors = [FetchSortDescriptor(keyPath: "title")]
        return try context.fetch(request).map { try $0.value(forKey: "title").stringValue ?? "" }
    }

    @Test func aStrataStoreOpenedOnAReplicaAnswersAsThePrimaryDid() throws {
        StrataStore.register()
        let (client, bucket) = try S3TestServer.bucket()
        let location = ReplicaLocation(bucket: bucket, prefix: "notes")
        let primary = temporaryDirectory("notes"), replicaDirectory = temporaryDirectory("replica")
        defer {
            try? FileManager.default.removeItem(atPath: primary)
            try? FileManager.default.removeItem(atPath: replicaDirectory)
        }
        let model = try Self.model()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        let store = try coordinator.addPersistentStore(type: .strata, at: URL(fileURLWithPath: primary))
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let replicator = try Replicator(directory: primary, client: client, location: location)
        let replica = try ReadReplica(client: client, location: location, directory: replicaDirectory)
        var written: [String] = []
        for round in 0..<3 {
            for index in 0..<20 {
                let note = try context.insertNewObject(forEntityName: "Note")
                let title = String(format: "r%d-%02d", round, index)
                try note.setValue(.string(title), forKey: "title")
                try note.setValue(.int64(Int64(index)), forKey: "rank")
                written.append(title)
            }
            try context.save()
            try replicator.replicateOnce()
            let status = try replica.refresh()
            #expect(status.sequence == replicator.replicatedSequence)
            #expect(try Self.titles(replicaDirectory, model, readOnly: true) == written.sorted(), "round \(round)")
        }
        try coordinator.remove(store)
    }
}

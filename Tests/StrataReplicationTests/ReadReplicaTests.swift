import Foundation
import StrataEngine
import Testing

@testable import StrataReplication

/// Read replicas fed from object storage (issue 20): each refresh shows a whole prefix of the
/// primary's transactions, the one its status names.
@Suite(.enabled(if: S3TestServer.isAvailable, "no S3 server: run Scripts/s3-server start and export what it prints"))
struct ReadReplicaTests {
    static func contents(_ snapshot: Snapshot) throws -> [String: String] {
        var found: [String: String] = [:]
        for (key, value) in try snapshot.scan() { found[String(decoding: key, as: UTF8.self)] = String(decoding: value, as: UTF8.self) }
        return found
    }

    /// A replica refreshed after each replication pass of a primary under load (commits,
    /// flushes, WAL rollovers) reads exactly the oracle's state at the sequence it reports,
    /// and a snapshot taken before a refresh keeps reading its own state.
    @Test func aReplicaFollowingAPrimaryReadsWholePrefixesOfItsTransactions() throws {
        let (client, bucket) = try S3TestServer.bucket()
        let location = ReplicaLocation(bucket: bucket, prefix: "follow")
        let primaryDirectory = temporaryDirectory("primary"), replicaDirectory = temporaryDirectory("replica")
        defer {
            try? FileManager.default.removeItem(atPath: primaryDirectory)
            try? FileManager.default.removeItem(atPath: replicaDirectory)
        }
        let primary = try OracleStore(directory: primaryDirectory)
        let replicator = try Replicator(directory: primaryDirectory, client: client, location: location, chunkBytes: 4096)
        let replica = try ReadReplica(client: client, location: location, directory: replicaDirectory)
        #expect(throws: ReplicationError.self) { try replica.snapshot() }
        var held: (Snapshot, [String: String])? = nil
        for round in 0..<8 {
            try primary.commit(25, tag: "r\(round)")
            try replicator.replicateOnce()
            if round % 3 == 2 { try primary.engine.flush() }
            let status = try replica.refresh()
            #expect(status.generation == replicator.generation)
            #expect(status.sequence == replicator.replicatedSequence, "round \(round)")
            let snapshot = try replica.snapshot()
            #expect(try Self.contents(snapshot) == primary.contents(at: status.sequence), "round \(round)")
            if let (old, expected) = held { #expect(try Self.contents(old) == expected, "an older snapshot keeps its state") }
            held = (snapshot, try Self.contents(snapshot))
            #expect((status.age ?? 99) < 30)
        }
        try primary.engine.close()
    }

    /// The primary replaced by another store (a new generation): the replica follows the new
    /// one from scratch, never mixing the two.
    @Test func aReplicaFollowsANewGenerationFromScratch() throws {
        let (client, bucket) = try S3TestServer.bucket()
        let location = ReplicaLocation(bucket: bucket, prefix: "")
        let one = temporaryDirectory("one"), two = temporaryDirectory("two"), replicaDirectory = temporaryDirectory("replica")
        defer {
            for path in [one, two, replicaDirectory] { try? FileManager.default.removeItem(atPath: path) }
        }
        let first = try OracleStore(directory: one)
        try first.commit(30, tag: "one")
        try first.engine.flush()
        try first.commit(5, tag: "one")
        try Replicator(directory: one, client: client, location: location).replicateOnce()
        let replica = try ReadReplica(client: client, location: location, directory: replicaDirectory)
        let before = try replica.refresh()
        #expect(try Self.contents(try replica.snapshot()) == first.contents(at: before.sequence))
        try first.engine.close()
        let second = try OracleStore(directory: two)
        try second.commit(7, tag: "two")
        let secondReplicator = try Replicator(directory: two, client: client, location: location)
        try secondReplicator.replicateOnce()
        let after = try replica.refresh()
        #expect(after.generation == secondReplicator.generation && after.generation != before.generation)
        #expect(try Self.contents(try replica.snapshot()) == second.contents(at: after.sequence))
        try second.engine.close()
    }
}

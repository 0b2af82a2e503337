import Foundation
import StrataEngine
import Testing

@testable import StrataReplication

/// A store written transaction by transaction, with its state after each one: the oracle a
/// restore at any sequence is compared with.
final class OracleStore {
    let directory: String
    let engine: Engine
    /// The store's contents after each committed sequence.
    private(set) var states: [(sequence: UInt64, contents: [String: String])] = []
    private var contents: [String: String] = [:]
    private var random: SystemRandomNumberGenerator

    init(directory: String) throws {
        self.directory = directory
        var options = EngineOptions()
        options.walRolloverBytes = 64 << 10
        options.compaction.automatic = false
        engine = try Engine.open(at: directory, options: options)
        random = SystemRandomNumberGenerator()
    }

    /// Commits `count` transactions of a few puts and deletes over 30 keys.
    func commit(_ count: Int, tag: String = "") throws {
        for _ in 0..<count {
            var batch = WriteBatch()
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                let key = "k\(Int.random(in: 0..<30, using: &random))"
                if Int.random(in: 0..<5, using: &random) == 0 {
                    batch.delete(Array(key.utf8))
                    contents[key] = nil
                } else {
                    let value = "\(tag)v\(Int.random(in: 0..<1_000_000, using: &random))" + String(repeating: "x", count: Int.random(in: 0..<200, using: &random))
                    batch.put(Array(key.utf8), Array(value.utf8))
                    contents[key] = value
                }
            }
            let sequence = try engine.commit(batch)
            states.append((sequence, contents))
        }
    }

    /// What the oracle holds after `sequence`.
    func contents(at sequence: UInt64) -> [String: String] {
        states.last { $0.sequence <= sequence }?.contents ?? [:]
    }

    /// Every key of the store at `directory`, read through an engine.
    static func read(_ directory: String) throws -> [String: String] {
        let engine = try Engine.open(at: directory)
        defer { try? engine.close() }
        var found: [String: String] = [:]
        for index in 0..<30 {
            if let value = try engine.get(Array("k\(index)".utf8)) { found["k\(index)"] = String(decoding: value, as: UTF8.self) }
        }
        return found
    }
}

func temporaryDirectory(_ name: String) -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("strata-\(name)-\(UUID().uuidString)").path
}

/// Backup and restore through a real S3 server (issue 20).
@Suite(.enabled(if: S3TestServer.isAvailable, "no S3 server: run Scripts/s3-server start and export what it prints"))
struct ReplicationTests {
    /// A store written with flushes (segments) and rollovers (several WALs), replicated now and
    /// then, restores at its newest point and at earlier sequences to exactly the transactions
    /// up to each.
    @Test func aRestoreHoldsEveryTransactionUpToItsPointAndNoneAfter() throws {
        let (client, bucket) = try S3TestServer.bucket()
        let location = ReplicaLocation(bucket: bucket, prefix: "stores/one")
        let directory = temporaryDirectory("primary")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try OracleStore(directory: directory)
        let replicator = try Replicator(directory: directory, client: client, location: location, chunkBytes: 2048)
        var passes: [ReplicationPass] = []
        for round in 0..<6 {
            try store.commit(15, tag: "r\(round)")
            passes.append(try replicator.replicateOnce())
            // A flush after a pass: the WAL it retires was uploaded first.
            if round % 2 == 1 { try store.engine.flush() }
        }
        try store.commit(5, tag: "last")
        passes.append(try replicator.replicateOnce())
        #expect(passes.reduce(0) { $0 + $1.segments } >= 3)
        #expect(passes.reduce(0) { $0 + $1.walChunks } > 6)
        let newest = try #require(store.states.last?.sequence)
        #expect(replicator.replicatedSequence == newest)

        let restored = temporaryDirectory("restored")
        defer { try? FileManager.default.removeItem(atPath: restored) }
        let report = try Restore.run(client: client, location: location, into: restored)
        #expect(report.sequence == newest && report.generation == replicator.generation)
        #expect(try OracleStore.read(restored) == store.contents(at: newest))

        // Earlier points: every transaction up to each, none after.
        for sequence in [store.states[0].sequence, store.states[20].sequence, store.states[44].sequence, store.states[77].sequence, newest - 1] {
            let earlier = temporaryDirectory("earlier")
            defer { try? FileManager.default.removeItem(atPath: earlier) }
            let report = try Restore.run(client: client, location: location, into: earlier, at: .sequence(sequence))
            #expect(report.sequence == sequence)
            #expect(try OracleStore.read(earlier) == store.contents(at: sequence), "at \(sequence)")
        }
        let beyond = try #require(throws: ReplicationError.self) {
            try Restore.run(client: client, location: location, into: temporaryDirectory("beyond"), at: .sequence(newest + 1))
        }
        #expect(beyond.kind == .notReplicated)
        try store.engine.close()
    }

    /// Transactions whose WAL was flushed into a segment before a pass uploaded it are not a
    /// point the replica kept: a restore there is refused, naming the nearest one before it.
    @Test func aPointWhoseWALWasFlushedUnreplicatedIsRefused() throws {
        let (client, bucket) = try S3TestServer.bucket()
        let location = ReplicaLocation(bucket: bucket, prefix: "gaps")
        let directory = temporaryDirectory("primary")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try OracleStore(directory: directory)
        let replicator = try Replicator(directory: directory, client: client, location: location)
        try store.commit(10)
        try replicator.replicateOnce()
        try store.commit(10)
        try store.engine.flush()
        try store.commit(10)
        try replicator.replicateOnce()
        let kept = store.states[9].sequence, lost = store.states[14].sequence
        let restored = temporaryDirectory("restored")
        defer { try? FileManager.default.removeItem(atPath: restored) }
        try Restore.run(client: client, location: location, into: restored, at: .sequence(kept))
        #expect(try OracleStore.read(restored) == store.contents(at: kept))
        let error = try #require(throws: ReplicationError.self) {
            try Restore.run(client: client, location: location, into: temporaryDirectory("lost"), at: .sequence(lost))
        }
        #expect(error.kind == .notReplicated && error.message.contains("nearest before it is \(kept)"), "\(error)")
        let latest = temporaryDirectory("latest")
        defer { try? FileManager.default.removeItem(atPath: latest) }
        try Restore.run(client: client, location: location, into: latest)
        #expect(try OracleStore.read(latest) == store.contents(at: store.states.last!.sequence))
        try store.engine.close()
    }

    /// A prune keeps every point from the newest manifest older than the window on, and
    /// deletes the rest: older manifests, segments and WAL chunks no kept point needs.
    @Test func aPruneKeepsThePointsOfTheWindowAndDeletesTheRest() throws {
        let (client, bucket) = try S3TestServer.bucket()
        let location = ReplicaLocation(bucket: bucket, prefix: "retained")
        let directory = temporaryDirectory("primary")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try OracleStore(directory: directory)
        let replicator = try Replicator(directory: directory, client: client, location: location)
        // Four passes, each after 20 commits, a flush after each of the first three: manifest
        // versions 1…4, whose segments hold 0, 20, 40 and 60 transactions, each with its WAL.
        for round in 0..<4 {
            try store.commit(20, tag: "r\(round)")
            try replicator.replicateOnce()
            if round < 3 { try store.engine.flush() }
        }
        let before = try #require(try ReplicaNames.generations(in: location, client: client).last?.content)
        try #require(before.manifests.count == 4)
        // The window begins between the third and the fourth version: the third stays, as the
        // base of the window's oldest points.
        let third = before.manifests[2], fourth = before.manifests[3]
        let now = Date()
        let window = now.timeIntervalSince(third.time.addingTimeInterval(max(0.0005, fourth.time.timeIntervalSince(third.time) / 2)))
        let report = try replicator.prune(retaining: .milliseconds(Int(window * 1000)), now: now)
        #expect(report.manifests == 2 && report.generations == 0, "\(report)")
        let after = try #require(try ReplicaNames.generations(in: location, client: client).last?.content)
        #expect(after.manifests.first?.version == third.version)
        #expect(after.segments.count < before.segments.count || report.segments == 0)
        #expect(report.walChunks > 0 && after.chunks.keys.min() ?? 0 > before.chunks.keys.min() ?? 0)
        // Points from the kept base on restore exactly; older ones are refused.
        let newest = try #require(store.states.last?.sequence)
        for sequence in [third.lastSequence, third.lastSequence + 3, newest] {
            let restored = temporaryDirectory("restored")
            defer { try? FileManager.default.removeItem(atPath: restored) }
            try Restore.run(client: client, location: location, into: restored, at: .sequence(sequence))
            #expect(try OracleStore.read(restored) == store.contents(at: sequence), "at \(sequence)")
        }
        let old = try #require(throws: ReplicationError.self) {
            try Restore.run(client: client, location: location, into: temporaryDirectory("old"), at: .sequence(store.states[5].sequence))
        }
        #expect(old.kind == .notReplicated, "\(old)")
        // Passes go on after a prune.
        try store.commit(5)
        #expect(try replicator.replicateOnce().walChunks >= 1)
        try store.engine.close()
    }

    /// A replicator started again (after a crash, say) continues the generation and uploads
    /// only what is new.
    @Test func aNewReplicatorResumesWithoutUploadingAgain() throws {
        let (client, bucket) = try S3TestServer.bucket()
        let location = ReplicaLocation(bucket: bucket, prefix: "")
        let directory = temporaryDirectory("primary")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try OracleStore(directory: directory)
        try store.commit(30)
        try store.engine.flush()
        let first = try Replicator(directory: directory, client: client, location: location)
        let initial = try first.replicateOnce()
        #expect(initial.segments >= 1 && initial.manifests == 1)
        let again = try Replicator(directory: directory, client: client, location: location)
        #expect(again.generation == first.generation)
        #expect(try again.replicateOnce() == ReplicationPass(replicatedSequence: first.replicatedSequence), "nothing uploaded twice")
        try store.commit(10)
        let more = try again.replicateOnce()
        #expect(more.segments == 0 && more.walChunks >= 1 && more.manifests <= 1)
        let restored = temporaryDirectory("restored")
        defer { try? FileManager.default.removeItem(atPath: restored) }
        try Restore.run(client: client, location: location, into: restored)
        #expect(try OracleStore.read(restored) == store.contents(at: store.states.last!.sequence))
        try store.engine.close()
    }

    /// Another store replicated to the same location starts a generation of its own: a restore
    /// takes the newest whole, and an older one by name, never a mix.
    @Test func anotherStoreStartsANewGenerationAndRestoresNeverMixThem() throws {
        let (client, bucket) = try S3TestServer.bucket()
        let location = ReplicaLocation(bucket: bucket, prefix: "shared")
        let one = temporaryDirectory("one"), two = temporaryDirectory("two")
        defer {
            try? FileManager.default.removeItem(atPath: one)
            try? FileManager.default.removeItem(atPath: two)
        }
        let first = try OracleStore(directory: one)
        try first.commit(20, tag: "one")
        let firstReplicator = try Replicator(directory: one, client: client, location: location)
        try firstReplicator.replicateOnce()
        try first.engine.close()
        let second = try OracleStore(directory: two)
        try second.commit(12, tag: "two")
        let secondReplicator = try Replicator(directory: two, client: client, location: location)
        #expect(secondReplicator.generation != firstReplicator.generation)
        try secondReplicator.replicateOnce()
        let newest = temporaryDirectory("newest"), older = temporaryDirectory("older")
        defer {
            try? FileManager.default.removeItem(atPath: newest)
            try? FileManager.default.removeItem(atPath: older)
        }
        try Restore.run(client: client, location: location, into: newest)
        #expect(try OracleStore.read(newest) == second.contents(at: second.states.last!.sequence))
        try Restore.run(client: client, location: location, into: older, generation: firstReplicator.generation)
        #expect(try OracleStore.read(older) == first.contents(at: first.states.last!.sequence))
        try second.engine.close()
    }

    /// A damaged or missing object fails the restore naming it, and leaves no store behind.
    @Test func aDamagedOrMissingObjectFailsTheRestoreNamingIt() throws {
        let (client, bucket) = try S3TestServer.bucket()
        let location = ReplicaLocation(bucket: bucket, prefix: "p")
        let directory = temporaryDirectory("primary")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try OracleStore(directory: directory)
        try store.commit(20)
        let replicator = try Replicator(directory: directory, client: client, location: location, chunkBytes: 1024)
        try replicator.replicateOnce()
        try store.engine.flush()
        try store.commit(20)
        try replicator.replicateOnce()
        try store.engine.close()
        let objects = try client.list(bucket: bucket, prefix: "p/")
        let segment = try #require(objects.first { $0.key.contains("/segments/") })
        let original = try client.get(bucket: bucket, key: segment.key)
        var damaged = original
        damaged[damaged.count / 2] ^= 0xFF
        try client.put(damaged, bucket: bucket, key: segment.key, metadata: try #require(try client.head(bucket: bucket, key: segment.key)).metadata)
        let target = temporaryDirectory("target")
        let corrupt = try #require(throws: ReplicationError.self) { try Restore.run(client: client, location: location, into: target) }
        #expect(corrupt.kind == .corrupt && corrupt.message.contains(segment.key), "\(corrupt)")
        #expect(!FileManager.default.fileExists(atPath: target))
        try client.put(original, bucket: bucket, key: segment.key, metadata: ["crc32c": String(CRC32C.checksum([UInt8](original)))])
        // A chunk the newest point needs: one of the newest WAL's, after its first.
        let chunks = objects.filter { $0.key.contains("/wal/") }.sorted { $0.key < $1.key }
        let newestWAL = try #require(chunks.last?.key.split(separator: "/").dropLast().last)
        let needed = chunks.filter { $0.key.split(separator: "/").dropLast().last == newestWAL }
        try #require(needed.count >= 2)
        try client.delete(bucket: bucket, key: needed[1].key)
        let gap = try #require(throws: ReplicationError.self) { try Restore.run(client: client, location: location, into: target) }
        #expect(gap.kind == .missing && gap.message.contains("WAL"), "\(gap)")
        #expect(!FileManager.default.fileExists(atPath: target))
    }
}

/// A pass reads a WAL from where its chunks end: the records found in that tail are the ones
/// found in the whole file from the same offset, for every record boundary and limit.
@Suite struct WALTailTests {
    @Test func recordsOfATailAreThoseOfTheWholeFile() throws {
        let directory = temporaryDirectory("tail")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try OracleStore(directory: directory)
        try store.commit(40)
        try store.engine.close()
        let name = try #require(try FileManager.default.contentsOfDirectory(atPath: directory).first { $0.hasSuffix(".wal") })
        let bytes = try Replicator.readFile(directory + "/" + name)
        let whole = StoreFiles.walRecords(in: bytes, from: 0, limit: bytes.count)
        #expect(whole.count == 40 && whole.last?.end == bytes.count)
        for start in [StoreFiles.walHeaderSize] + whole.map(\.end) {
            for limit in [bytes.count, (start + bytes.count) / 2, start] {
                let (base, tail) = try Replicator.readFile(directory + "/" + name, from: start)
                #expect(base == start && tail.count == bytes.count - start)
                #expect(
                    StoreFiles.walRecords(inTail: tail, at: base, from: start, limit: limit)
                        == StoreFiles.walRecords(in: bytes, from: start, limit: limit), "from \(start) to \(limit)")
            }
        }
    }
}

import Foundation
import StrataEngine
import StrataSync

/// Where a read replica stands.
public struct ReplicaStatus: Sendable, Equatable, Codable {
    /// The generation it follows.
    public var generation: String
    /// Every transaction up to this sequence number is visible, none after.
    public var sequence: UInt64
    /// When the replicator read the newest records visible (the primary committed them at most
    /// its lag before), or `nil` before the first refresh found any.
    public var replicatedAt: Date?
    /// How far behind the primary the replica may be: now minus ``replicatedAt`` plus the
    /// replicator's lag (which it does not know, so not added here).
    public var age: TimeInterval? { replicatedAt.map { Date().timeIntervalSince($0) } }
}

/// A read replica (issue 20): a local store directory fed from a replica in object storage,
/// read through a read-only engine that each ``refresh()`` replaces with one at the newest
/// point replicated. Reads see whole transactions only (chunks hold whole records, and each
/// engine opens one consistent manifest), at a sequence ``status`` reports; a snapshot taken
/// before a refresh keeps reading what it saw.
///
/// The directory is the replica's own: a normal store, which a read-only `StrataStore` (or
/// `strata fsck`) can open too, between refreshes.
public final class ReadReplica: Sendable {
    /// The local directory.
    public let directory: String
    /// The replica followed.
    public let location: ReplicaLocation

    private let client: S3Client
    /// The current engine and status; a refresh replaces both together.
    private let current: Locked<(engine: Engine?, status: ReplicaStatus?)>
    /// Serialises refreshes.
    private let refreshing = Locked(())

    /// A replica of `location` kept in `directory` (created if missing; what a previous replica
    /// left there is reused), following its newest generation. Call ``refresh()`` to load.
    public init(client: S3Client, location: ReplicaLocation, directory: String) throws(ReplicationError) {
        self.client = client
        self.location = location
        self.directory = directory
        current = Locked((nil, nil))
        do { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) } catch {
            throw ReplicationError(.store, "cannot create \(directory): \(error)")
        }
    }

    /// The newest state loaded, or `nil` before the first refresh.
    public var status: ReplicaStatus? { current.withLock { $0.status } }

    /// A snapshot of the newest state loaded.
    ///
    /// - Throws: ``ReplicationError`` (`notReplicated`) before a refresh loaded anything.
    public func snapshot() throws(ReplicationError) -> Snapshot {
        guard let engine = current.withLock({ $0.engine }) else {
            throw ReplicationError(.notReplicated, "the replica of \(location) has loaded nothing yet: call refresh()")
        }
        do { return try engine.snapshot() } catch { throw .store(error) }
    }

    /// Downloads what the replica gained since the last refresh (new segments, the WALs' new
    /// chunks, the newest manifest) into the directory and opens it at the newest point; a
    /// generation newer than the one followed is followed from scratch.
    ///
    /// - Throws: ``ReplicationError`` when the replica cannot be read or the result does not
    ///   open; the previous state stays readable.
    @discardableResult
    public func refresh() throws(ReplicationError) -> ReplicaStatus {
        try refreshing.withLock { (_) throws(ReplicationError) -> ReplicaStatus in
            let generations = try ReplicaNames.generations(in: location, client: client)
            guard let (name, content) = generations.last, let newestManifest = content.manifests.last else {
                throw ReplicationError(.notReplicated, "\(location) holds no replica")
            }
            let previous = current.withLock { $0.status }
            if let previous, previous.generation != name { try clearDirectory() }
            let root = ReplicaNames.generationPrefix(name)
            let manifest = try Restore.downloadManifest(client, location, root + newestManifest.key).manifest
            var keep: Set<String> = [StoreFiles.manifestName]
            for segment in manifest.segments {
                let path = directory + "/" + StoreFiles.segmentName(segment.number)
                keep.insert(StoreFiles.segmentName(segment.number))
                if Self.size(of: path) == Int(segment.size) { continue }
                let bytes = try Restore.download(client, location, root + ReplicaNames.segment(segment.number))
                try Self.replace(path, with: bytes)
            }
            var wals: [UInt32] = []
            var newest = manifest.lastSequence
            var replicatedAt = newestManifest.time
            for wal in content.chunks.keys.sorted() where wal >= (manifest.wals.min() ?? 0) {
                guard let pieces = content.chunks[wal], pieces.first?.start == 0 else { continue }
                let path = directory + "/" + StoreFiles.walName(wal)
                let local = (try? Replicator.readFile(path)) ?? []
                // A gap ends what is usable, until a later refresh finds the chunk.
                let (bytes, _) = try ReplicaNames.join(local, pieces) { (piece) throws(ReplicationError) -> [UInt8] in
                    try Restore.download(client, location, root + ReplicaNames.walChunk(piece))
                }
                let added = bytes.count != local.count
                let records = StoreFiles.walRecords(in: bytes, from: 0, limit: bytes.count)
                let end = records.last?.end ?? min(bytes.count, StoreFiles.walHeaderSize)
                if added || end != bytes.count { try Self.replace(path, with: Array(bytes.prefix(end))) }
                if let last = records.last, last.sequence > newest {
                    newest = last.sequence
                    replicatedAt = max(replicatedAt, pieces.last { $0.end <= end }?.time ?? replicatedAt)
                }
                keep.insert(StoreFiles.walName(wal))
                wals.append(wal)
            }
            if wals.isEmpty {
                throw ReplicationError(.missing, "\(location) generation \(name) holds no WAL of its newest manifest")
            }
            try Self.replace(directory + "/" + StoreFiles.manifestName, with: StoreFiles.encodeManifest(Restore.naming(wals, in: manifest)))
            var options = EngineOptions()
            options.readOnly = true
            let engine: Engine
            do throws(StoreError) { engine = try Engine.open(at: directory, options: options) } catch { throw .store(error) }
            let status = ReplicaStatus(generation: name, sequence: newest, replicatedAt: replicatedAt)
            current.withLock { $0 = (engine, status) }
            // Files the new state does not name: the previous engine (and its snapshots) keeps
            // the ones it opened until it goes.
            for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where !keep.contains(name) {
                try? FileManager.default.removeItem(atPath: directory + "/" + name)
            }
            return status
        }
    }

    private func clearDirectory() throws(ReplicationError) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
            try? FileManager.default.removeItem(atPath: directory + "/" + name)
        }
    }

    private static func size(of path: String) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue
    }

    /// Writes `bytes` to `path` through a temporary file renamed over it, so that no reader
    /// sees a file half written.
    private static func replace(_ path: String, with bytes: [UInt8]) throws(ReplicationError) {
        let temporary = path + ".replica-tmp"
        try Restore.write(bytes, to: temporary)
        guard rename(temporary, path) == 0 else {
            throw ReplicationError(.store, "cannot rename \(temporary) to \(path): errno \(errno)")
        }
    }
}

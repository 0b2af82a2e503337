import Foundation
import StrataEngine
import StrataSync

/// What one replication pass uploaded.
public struct ReplicationPass: Sendable, Equatable, Codable {
    /// Segments uploaded.
    public var segments = 0
    /// WAL chunks uploaded.
    public var walChunks = 0
    /// Manifest versions uploaded.
    public var manifests = 0
    /// Bytes uploaded.
    public var bytes = 0
    /// The newest sequence number the bucket holds after the pass (in a WAL chunk or below a
    /// manifest's `lastSequence`).
    public var replicatedSequence: UInt64 = 0
}

/// What a prune deleted (``Replicator/prune(retaining:now:)``).
public struct PruneReport: Sendable, Equatable, Codable {
    /// Manifest versions deleted.
    public var manifests = 0
    /// Segments deleted.
    public var segments = 0
    /// WAL chunks deleted.
    public var walChunks = 0
    /// Older generations deleted whole.
    public var generations = 0
}

/// Continuous backup of a store directory to object storage (issue 20): every sealed segment
/// once, the WAL as it grows in chunks of whole records that are never overwritten, and every
/// manifest version, under one generation of the location.
///
/// The replicator reads the store's files while its engine writes them, in this process or
/// another, and never writes them. It uploads a WAL's records only up to the durable bound
/// (`SYNC`, [DUR-1]) when the bound names that WAL, so what it uploads was acknowledged or
/// recoverable; a segment only once a manifest names it (it is synced then, [SEG-*]); a
/// manifest after the objects it names. Each object carries its CRC-32C, and each upload is
/// checked by its size. Its state is the bucket's: a replicator started after a crash or a
/// network failure lists what is there and goes on without uploading it again.
public final class Replicator: Sendable {
    /// The store directory.
    public let directory: String
    /// Where it goes.
    public let location: ReplicaLocation
    /// The generation this replicator writes.
    public let generation: String
    /// At most this many bytes per WAL chunk (a record larger than this is a chunk alone).
    public let chunkBytes: Int

    private let client: S3Client
    /// What is in the bucket: the replicator's only state, behind a lock (passes may run from
    /// any thread; one at a time).
    private let state: Locked<State>

    private struct State {
        var segments: Set<UInt32>
        var walEnds: [UInt32: Int]
        var lastManifest: StoreFiles.ManifestContent?
        var manifestVersion: UInt64
        var replicatedSequence: UInt64
    }

    /// A replicator of the store at `directory` to `location`: it continues the location's
    /// newest generation when that generation is this store's (its newest WAL chunk matches
    /// the store's bytes, or the store has moved past every file it names), else starts one.
    ///
    /// - Throws: ``ReplicationError`` when the store's manifest cannot be read or the bucket
    ///   cannot be listed.
    public init(directory: String, client: S3Client, location: ReplicaLocation, chunkBytes: Int = 8 << 20) throws(ReplicationError) {
        self.directory = directory
        self.client = client
        self.location = location
        self.chunkBytes = max(1, chunkBytes)
        let manifest = try Self.readManifest(directory)
        let generations = try ReplicaNames.generations(in: location, client: client)
        if let (name, content) = generations.last,
            try Self.isSameStore(content, generation: name, directory: directory, manifest: manifest, client: client, location: location)
        {
            generation = name
            var last: StoreFiles.ManifestContent?
            if let newest = content.manifests.last {
                let key = location.key(ReplicaNames.generationPrefix(name) + newest.key)
                if let bytes = try? client.get(bucket: location.bucket, key: key) {
                    last = try? StoreFiles.decodeManifest([UInt8](bytes), path: key)
                }
            }
            let walSequence = content.chunks.values.flatMap { $0 }.map(\.lastSequence).max() ?? 0
            state = Locked(State(
                segments: Set(content.segments.keys), walEnds: content.chunks.mapValues { $0.map(\.end).max() ?? 0 },
                lastManifest: last, manifestVersion: content.manifests.last?.version ?? 0,
                replicatedSequence: max(walSequence, content.manifests.map(\.lastSequence).max() ?? 0)))
        } else {
            generation = ReplicaNames.newGeneration()
            state = Locked(State(segments: [], walEnds: [:], lastManifest: nil, manifestVersion: 0, replicatedSequence: 0))
        }
    }

    /// Whether `content` (generation `name`) was written from the store at `directory`.
    private static func isSameStore(
        _ content: ReplicaNames.Generation, generation name: String, directory: String, manifest: StoreFiles.ManifestContent,
        client: S3Client, location: ReplicaLocation
    ) throws(ReplicationError) -> Bool {
        // The newest WAL both hold: its last chunk must be the store's bytes there.
        if let wal = manifest.wals.filter({ content.chunks[$0] != nil }).max(), let chunk = content.chunks[wal]?.last {
            let local = try? readFile(directory + "/" + StoreFiles.walName(wal))
            guard let local, local.count >= chunk.end else { return false }
            let key = location.key(ReplicaNames.generationPrefix(name) + ReplicaNames.walChunk(chunk))
            let remote: Data
            do { remote = try client.get(bucket: location.bucket, key: key) } catch { throw .storage(error) }
            return [UInt8](remote) == Array(local[chunk.start..<chunk.end])
        }
        // No WAL in common: the same store only if it has moved past every file the
        // generation names (the replicator was away while WALs were flushed).
        let newest = max(content.segments.keys.max() ?? 0, content.chunks.keys.max() ?? 0)
        return newest > 0 && (manifest.wals.min() ?? 0) > newest
    }

    /// The newest sequence the bucket holds for this generation.
    public var replicatedSequence: UInt64 { state.withLock { $0.replicatedSequence } }

    /// Uploads what the store has that the bucket does not: new segments, the WALs' new
    /// durable records, and the manifest if it changed.
    ///
    /// - Throws: ``ReplicationError``; what was uploaded before the failure stays, and the
    ///   next pass goes on from there.
    @discardableResult
    public func replicateOnce() throws(ReplicationError) -> ReplicationPass {
        try state.withLock { (state) throws(ReplicationError) -> ReplicationPass in
            var pass = ReplicationPass()
            let manifest = try Self.readManifest(directory)
            let bound = Self.readDurableBound(directory)
            let root = ReplicaNames.generationPrefix(generation)
            for segment in manifest.segments where !state.segments.contains(segment.number) {
                // A segment compaction removed after the manifest was read is in a newer
                // manifest's place already: the next pass sees that one.
                guard let bytes = try? Self.readFile(directory + "/" + StoreFiles.segmentName(segment.number)) else { continue }
                try upload(bytes, key: root + ReplicaNames.segment(segment.number))
                state.segments.insert(segment.number)
                pass.segments += 1
                pass.bytes += bytes.count
            }
            for wal in manifest.wals {
                let start = state.walEnds[wal] ?? 0
                // The WAL from where the generation's chunks end (the whole file the first
                // time): a pass reads what is new, not the WAL again.
                guard let (base, bytes) = try? Self.readFile(directory + "/" + StoreFiles.walName(wal), from: start) else { continue }
                // Only what the durable bound covers of the WAL it names; older WALs were
                // synced whole at rollover.
                var limit = base + bytes.count
                if let bound, bound.walNumber == wal { limit = min(limit, Int(bound.walEnd)) }
                let records = start == 0
                    ? StoreFiles.walRecords(in: bytes, from: 0, limit: limit)
                    : StoreFiles.walRecords(inTail: bytes, at: base, from: start, limit: limit)
                var chunks: [(start: Int, records: ArraySlice<StoreFiles.WALRecordExtent>)] = []
                if start == 0 && records.isEmpty {
                    if bytes.count >= StoreFiles.walHeaderSize { chunks.append((0, [])) }
                } else {
                    var first = records.startIndex
                    var chunkStart = start
                    for index in records.indices where records[index].end - chunkStart > chunkBytes && index > first {
                        chunks.append((chunkStart, records[first..<index]))
                        chunkStart = records[index].start
                        first = index
                    }
                    if first < records.endIndex { chunks.append((chunkStart, records[first...])) }
                }
                for (chunkStart, chunkRecords) in chunks {
                    let end = chunkRecords.last?.end ?? StoreFiles.walHeaderSize
                    let chunk = ReplicaNames.WALChunk(
                        wal: wal, start: chunkStart, end: end, firstSequence: chunkRecords.first?.sequence ?? 0,
                        lastSequence: chunkRecords.last?.sequence ?? 0, time: Date())
                    try upload(Array(bytes[(chunkStart - base)..<(end - base)]), key: root + ReplicaNames.walChunk(chunk))
                    state.walEnds[wal] = end
                    state.replicatedSequence = max(state.replicatedSequence, chunk.lastSequence)
                    pass.walChunks += 1
                    pass.bytes += end - chunkStart
                }
            }
            if state.lastManifest != manifest {
                let bytes = StoreFiles.encodeManifest(manifest)
                let version = state.manifestVersion + 1
                try upload(bytes, key: root + ReplicaNames.manifest(version: version, lastSequence: manifest.lastSequence, time: Date()))
                state.manifestVersion = version
                state.lastManifest = manifest
                state.replicatedSequence = max(state.replicatedSequence, manifest.lastSequence)
                pass.manifests += 1
                pass.bytes += bytes.count
            }
            pass.replicatedSequence = state.replicatedSequence
            return pass
        }
    }

    /// Deletes what no point replicated within `retention` before `now` needs ([REP-6]): the
    /// manifest versions before the newest one older than the window (which stays, as the base
    /// of the window's oldest points), segments no kept manifest names, the chunks of WALs older
    /// than every WAL the kept manifests name, and older generations whose every object is
    /// older than the window. Points older than the window are then refused by a restore.
    @discardableResult
    public func prune(retaining retention: Duration, now: Date = Date()) throws(ReplicationError) -> PruneReport {
        try state.withLock { (state) throws(ReplicationError) -> PruneReport in
            let cutoff = now.addingTimeInterval(-(Double(retention.components.seconds) + Double(retention.components.attoseconds) / 1e18))
            var report = PruneReport()
            var doomed: [String] = []
            for (name, content) in try ReplicaNames.generations(in: location, client: client) {
                let root = ReplicaNames.generationPrefix(name)
                if name != generation {
                    let times = content.chunks.values.flatMap { $0 }.map(\.time) + content.manifests.map(\.time)
                    guard (times.max() ?? .distantPast) < cutoff else { continue }
                    doomed += content.segments.keys.map { root + ReplicaNames.segment($0) }
                        + content.chunks.values.flatMap { $0 }.map { root + ReplicaNames.walChunk($0) } + content.manifests.map { root + $0.key }
                    report.generations += 1
                    continue
                }
                guard let oldestKept = content.manifests.last(where: { $0.time < cutoff }) ?? content.manifests.first else { continue }
                var segments = Set(state.lastManifest?.segments.map(\.number) ?? [])
                var oldestWAL = UInt32.max
                for manifest in content.manifests where manifest.version >= oldestKept.version {
                    let decoded = try Restore.downloadManifest(client, location, root + manifest.key).manifest
                    segments.formUnion(decoded.segments.map(\.number))
                    oldestWAL = min(oldestWAL, decoded.wals.min() ?? .max)
                }
                for manifest in content.manifests where manifest.version < oldestKept.version {
                    doomed.append(root + manifest.key)
                    report.manifests += 1
                }
                for number in content.segments.keys where !segments.contains(number) {
                    doomed.append(root + ReplicaNames.segment(number))
                    state.segments.remove(number)
                    report.segments += 1
                }
                for (wal, chunks) in content.chunks where wal < oldestWAL {
                    doomed += chunks.map { root + ReplicaNames.walChunk($0) }
                    state.walEnds[wal] = nil
                    report.walChunks += chunks.count
                }
            }
            for relative in doomed {
                do throws(S3Error) { try client.delete(bucket: location.bucket, key: location.key(relative)) } catch { throw .storage(error) }
            }
            return report
        }
    }

    /// Replicates until `shouldStop` answers true, a pass every `lag` (the most a committed
    /// transaction waits before upload, besides the upload itself), and with a `retention`, a
    /// prune after the first pass and every ten minutes after. A failed pass or prune is
    /// retried at the next one; `onPass` hears of each pass and each failure.
    public func run(
        lag: Duration = .seconds(1), retention: Duration? = nil, shouldStop: @Sendable () -> Bool,
        onPass: @Sendable (Result<ReplicationPass, ReplicationError>) -> Void = { _ in }
    ) {
        var lastPrune: Date?
        while !shouldStop() {
            do throws(ReplicationError) { onPass(.success(try replicateOnce())) } catch { onPass(.failure(error)) }
            if let retention, lastPrune.map({ Date().timeIntervalSince($0) >= 600 }) ?? true {
                do throws(ReplicationError) {
                    try prune(retaining: retention)
                    lastPrune = Date()
                } catch { onPass(.failure(error)) }
            }
            Thread.sleep(forTimeInterval: Double(lag.components.seconds) + Double(lag.components.attoseconds) / 1e18)
        }
    }

    /// Uploads `bytes` at `relative` (under the prefix) with their CRC-32C, and checks the
    /// object's size.
    private func upload(_ bytes: [UInt8], key relative: String) throws(ReplicationError) {
        let key = location.key(relative)
        let crc = CRC32C.checksum(bytes)
        do {
            try client.putLarge(Data(bytes), bucket: location.bucket, key: key, metadata: ["crc32c": String(crc)])
            guard let info = try client.head(bucket: location.bucket, key: key), info.size == bytes.count,
                info.metadata["crc32c"] == String(crc)
            else {
                throw ReplicationError(.corrupt, "\(location.bucket)/\(key) does not hold the \(bytes.count) bytes just uploaded")
            }
        } catch let error as S3Error {
            throw .storage(error)
        } catch let error as ReplicationError {
            throw error
        } catch {
            throw ReplicationError(.storage, "\(error)")
        }
    }

    static func readManifest(_ directory: String) throws(ReplicationError) -> StoreFiles.ManifestContent {
        let path = directory + "/" + StoreFiles.manifestName
        let bytes: [UInt8]
        do { bytes = try readFile(path) } catch {
            throw ReplicationError(.store, "cannot read \(path): \(error)")
        }
        do { return try StoreFiles.decodeManifest(bytes, path: path) } catch { throw .store(error) }
    }

    static func readDurableBound(_ directory: String) -> (walNumber: UInt32, sequence: UInt64, walEnd: UInt64)? {
        let path = directory + "/" + StoreFiles.durableBoundName
        guard let bytes = try? readFile(path) else { return nil }
        return try? StoreFiles.decodeDurableBound(bytes, path: path)
    }

    static func readFile(_ path: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// The bytes of the file at `path` from `offset` to its end, with that offset (the whole
    /// file for 0).
    static func readFile(_ path: String, from offset: Int) throws -> (base: Int, bytes: [UInt8]) {
        guard offset > 0 else { return (0, try readFile(path)) }
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(offset))
        return (offset, [UInt8](try handle.readToEnd() ?? Data()))
    }
}

import Foundation
import StrataEngine

/// The point a restore brings a store back to.
public enum RestorePoint: Sendable, Equatable {
    /// The newest point replicated.
    case latest
    /// Just after the transaction of this sequence number: every transaction up to it, none
    /// after.
    case sequence(UInt64)
    /// The newest point replicated at or before this time (as the replicator read the WAL).
    case time(Date)
}

/// What a restore made.
public struct RestoreReport: Sendable, Equatable, Codable {
    /// The generation restored from.
    public var generation: String
    /// Every transaction up to this sequence number is in the restored store, none after.
    public var sequence: UInt64
    /// The manifest version the restore started from.
    public var manifestVersion: UInt64
    /// Segments downloaded.
    public var segments: Int
    /// WAL files written (replayed by the engine when the store opens).
    public var wals: Int
    /// Bytes downloaded.
    public var bytes: Int
}

/// Builds a store from a replica (issue 20): the segments of the newest manifest version at or
/// below the point, and the WALs' records after it up to the point, all from one generation.
public enum Restore {
    /// Restores the replica at `location` into `directory` (which must not exist or be empty)
    /// as of `point`, from `generation` (the newest by default), then checks the store as
    /// `strata fsck` does.
    ///
    /// - Throws: ``ReplicationError``: `notReplicated` for a point the generation does not
    ///   reach, `missing` for an object it needs that is not there (a WAL chunk gap included),
    ///   `corrupt` for one whose size or checksum is not what was uploaded, `store` when the
    ///   restored store does not check clean; the directory is then removed.
    @discardableResult
    public static func run(
        client: S3Client, location: ReplicaLocation, into directory: String, at point: RestorePoint = .latest,
        generation: String? = nil
    ) throws(ReplicationError) -> RestoreReport {
        let generations = try ReplicaNames.generations(in: location, client: client)
        guard let chosen = generation.map({ name in generations.first { $0.name == name } }) ?? generations.last else {
            throw ReplicationError(.notReplicated, "\(location) holds no replica" + (generation.map { " of generation \($0)" } ?? ""))
        }
        let (name, content) = chosen
        let root = ReplicaNames.generationPrefix(name)
        let chunks = content.chunks.values.flatMap { $0 }
        let newest = max(chunks.map(\.lastSequence).max() ?? 0, content.manifests.map(\.lastSequence).max() ?? 0)
        let target: UInt64
        switch point {
        case .latest: target = newest
        case .sequence(let sequence):
            guard sequence <= newest else {
                throw ReplicationError(.notReplicated, "\(location) generation \(name) reaches sequence \(newest), not \(sequence)")
            }
            target = sequence
        case .time(let time):
            let reached = chunks.filter { $0.time <= time }.map(\.lastSequence) + content.manifests.filter { $0.time <= time }.map(\.lastSequence)
            guard let sequence = reached.max() else {
                throw ReplicationError(.notReplicated, "\(location) generation \(name) holds nothing replicated by \(time)")
            }
            target = sequence
        }
        guard let base = content.manifests.last(where: { $0.lastSequence <= target }) else {
            throw ReplicationError(.notReplicated, "\(location) generation \(name) has no manifest at or below sequence \(target)")
        }

        let fileManager = FileManager.default
        if let existing = try? fileManager.contentsOfDirectory(atPath: directory), !existing.isEmpty {
            throw ReplicationError(.invalidArgument, "\(directory) is not empty; a restore writes a new store")
        }
        do { try fileManager.createDirectory(atPath: directory, withIntermediateDirectories: true) } catch {
            throw ReplicationError(.store, "cannot create \(directory): \(error)")
        }
        do {
            return try restore(
                client: client, location: location, root: root, name: name, content: content, base: base, target: target, into: directory)
        } catch {
            try? fileManager.removeItem(atPath: directory)
            throw error
        }
    }

    private static func restore(
        client: S3Client, location: ReplicaLocation, root: String, name: String, content: ReplicaNames.Generation,
        base: ReplicaNames.ManifestVersion, target: UInt64, into directory: String
    ) throws(ReplicationError) -> RestoreReport {
        var report = RestoreReport(generation: name, sequence: target, manifestVersion: base.version, segments: 0, wals: 0, bytes: 0)
        let (manifest, manifestBytes) = try downloadManifest(client, location, root + base.key)
        report.bytes += manifestBytes
        for segment in manifest.segments {
            let bytes = try download(client, location, root + ReplicaNames.segment(segment.number))
            guard UInt64(bytes.count) == segment.size else {
                throw ReplicationError(
                    .corrupt, "\(location.bucket)/\(location.key(root + ReplicaNames.segment(segment.number))) holds \(bytes.count) bytes; the manifest says \(segment.size)")
            }
            try write(bytes, to: directory + "/" + StoreFiles.segmentName(segment.number))
            report.segments += 1
            report.bytes += bytes.count
        }
        // The WALs from the manifest's oldest on, each its chunks joined and cut after the last
        // record at or below the target; a WAL whose records all come later is left out, but
        // the manifest's newest WAL is always kept (a manifest names one).
        let firstWAL = manifest.wals.min() ?? 0
        var wals: [UInt32] = []
        // Sequence numbers are consecutive ([WAL-3], one per transaction): the records after
        // the manifest's segments must be every one up to the target, or the point is not one
        // the replica kept (a WAL flushed into a segment before it was uploaded).
        var expected = manifest.lastSequence + 1
        for wal in content.chunks.keys.sorted() where wal >= firstWAL {
            guard let pieces = content.chunks[wal], pieces.first?.start == 0 else {
                throw ReplicationError(.missing, "\(location) generation \(name) has no chunk holding the start of WAL \(wal)")
            }
            if wal > (manifest.wals.max() ?? 0), let first = pieces.first(where: { $0.firstSequence > 0 }), first.firstSequence > target { break }
            // Chunks wholly after the target are not needed, but the first holds the header.
            let (bytes, gap) = try ReplicaNames.join([], pieces, skip: { $0.firstSequence > target && $0.start > 0 }) {
                (piece) throws(ReplicationError) -> [UInt8] in try download(client, location, root + ReplicaNames.walChunk(piece))
            }
            if let gap, gap < (pieces.first { $0.firstSequence > target && $0.start > 0 }?.start ?? Int.max) {
                throw ReplicationError(.missing, "\(location) generation \(name): WAL \(wal) has no chunk for the bytes from \(gap) on")
            }
            let records = StoreFiles.walRecords(in: bytes, from: 0, limit: bytes.count)
            guard records.last?.end ?? StoreFiles.walHeaderSize == bytes.count else {
                throw ReplicationError(.corrupt, "\(location) generation \(name): WAL \(wal)'s chunks do not hold whole, valid records")
            }
            for record in records where record.sequence > manifest.lastSequence && record.sequence <= target {
                guard record.sequence == expected else { break }
                expected += 1
            }
            let keep = records.last(where: { $0.sequence <= target })?.end ?? StoreFiles.walHeaderSize
            if keep == StoreFiles.walHeaderSize && !manifest.wals.contains(wal) { continue }
            try write(Array(bytes.prefix(keep)), to: directory + "/" + StoreFiles.walName(wal))
            wals.append(wal)
            report.wals += 1
            report.bytes += keep
        }
        guard expected > target else {
            throw ReplicationError(
                .notReplicated,
                "\(location) generation \(name) does not hold sequence \(expected) (its WAL was flushed into a segment before it was uploaded): \(target) is not a point it kept; the nearest before it is \(expected - 1)")
        }
        guard !wals.isEmpty else {
            throw ReplicationError(.missing, "\(location) generation \(name) holds no WAL of manifest version \(base.version)")
        }
        try write(StoreFiles.encodeManifest(naming(wals, in: manifest)), to: directory + "/" + StoreFiles.manifestName)
        let check: CheckReport
        do { check = try StoreChecker.check(at: directory) } catch { throw .store(error) }
        guard check.isClean else {
            throw ReplicationError(.store, "the restored store does not check clean: \(check.problems.map { "\($0)" }.joined(separator: "; "))")
        }
        return report
    }

    /// The object at `relative`, its size and CRC-32C checked against what was uploaded.
    static func download(_ client: S3Client, _ location: ReplicaLocation, _ relative: String) throws(ReplicationError) -> [UInt8] {
        let key = location.key(relative)
        let data: Data
        let info: S3ObjectInfo
        do { (data, info) = try client.getWithInfo(bucket: location.bucket, key: key) } catch {
            if error.kind == .notFound { throw ReplicationError(.missing, "\(location.bucket)/\(key) is missing", storageError: error) }
            throw .storage(error)
        }
        let bytes = [UInt8](data)
        guard info.metadata["crc32c"] == String(CRC32C.checksum(bytes)), info.size == bytes.count else {
            throw ReplicationError(.corrupt, "\(location.bucket)/\(key) does not match the checksum it was uploaded with")
        }
        return bytes
    }

    /// The manifest at `relative`, downloaded (checked) and decoded, with its size.
    static func downloadManifest(
        _ client: S3Client, _ location: ReplicaLocation, _ relative: String
    ) throws(ReplicationError) -> (manifest: StoreFiles.ManifestContent, bytes: Int) {
        let bytes = try download(client, location, relative)
        do { return (try StoreFiles.decodeManifest(bytes, path: location.key(relative)), bytes.count) } catch {
            throw ReplicationError(.corrupt, "\(location.bucket)/\(location.key(relative)) is not a manifest: \(error)")
        }
    }

    /// `manifest` naming `wals` as its WALs, its file counter above every file it names.
    static func naming(_ wals: [UInt32], in manifest: StoreFiles.ManifestContent) -> StoreFiles.ManifestContent {
        var named = manifest
        named.wals = wals
        named.nextFileNumber = max(manifest.nextFileNumber, (wals.max() ?? 0) + 1, (manifest.segments.map(\.number).max() ?? 0) + 1)
        return named
    }

    static func write(_ bytes: [UInt8], to path: String) throws(ReplicationError) {
        guard FileManager.default.createFile(atPath: path, contents: Data(bytes)) else {
            throw ReplicationError(.store, "cannot write \(path)")
        }
    }
}

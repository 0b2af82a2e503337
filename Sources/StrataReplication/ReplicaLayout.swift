import Foundation
import StrataEngine

/// Where a store is replicated: a bucket and a key prefix, written `s3://bucket/prefix`.
public struct ReplicaLocation: Sendable, Equatable, CustomStringConvertible {
    /// The bucket.
    public var bucket: String
    /// The key prefix, without a trailing `/` (empty: the bucket's root).
    public var prefix: String

    /// A location in `bucket` under `prefix`.
    public init(bucket: String, prefix: String) {
        self.bucket = bucket
        self.prefix = prefix.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
    }

    /// The location `s3://bucket/prefix` names.
    ///
    /// - Throws: ``ReplicationError`` for a URL that is not `s3://` with a bucket.
    public init(url: String) throws(ReplicationError) {
        guard url.hasPrefix("s3://") else {
            throw ReplicationError(.invalidArgument, "\(url) is not an s3://bucket/prefix location")
        }
        let rest = url.dropFirst(5)
        let bucket = rest.prefix { $0 != "/" }
        guard !bucket.isEmpty else { throw ReplicationError(.invalidArgument, "\(url) names no bucket") }
        self.init(bucket: String(bucket), prefix: String(rest.dropFirst(bucket.count)))
    }

    /// `s3://bucket/prefix`.
    public var description: String { "s3://\(bucket)" + (prefix.isEmpty ? "" : "/" + prefix) }

    /// The key of `path` under the prefix.
    func key(_ path: String) -> String { prefix.isEmpty ? path : prefix + "/" + path }
}

/// What went wrong replicating or restoring, naming the object or file.
public struct ReplicationError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure.
    public enum Kind: Sendable, Equatable {
        /// A request to object storage failed.
        case storage
        /// The store's files could not be read or written.
        case store
        /// An object in the bucket is damaged: its size or checksum is not what was uploaded,
        /// or it does not decode.
        case corrupt
        /// An object a restore needs is not in the bucket.
        case missing
        /// The point asked for is not among those replicated.
        case notReplicated
        /// A wrong argument.
        case invalidArgument
    }

    /// The kind of failure.
    public let kind: Kind
    /// What failed, naming the object or file.
    public let message: String
    /// The object storage error underneath, if any.
    public let storageError: S3Error?
    /// The store error underneath, if any.
    public let storeError: StoreError?

    /// An error of `kind`.
    public init(_ kind: Kind, _ message: String, storageError: S3Error? = nil, storeError: StoreError? = nil) {
        self.kind = kind
        self.message = message
        self.storageError = storageError
        self.storeError = storeError
    }

    /// The message.
    public var description: String { message }

    static func storage(_ error: S3Error) -> ReplicationError { ReplicationError(.storage, error.description, storageError: error) }
    static func store(_ error: StoreError) -> ReplicationError { ReplicationError(.store, "\(error)", storeError: error) }
}

/// The names of a replica's objects, under `<prefix>/generations/<generation>/`:
///
/// - `segments/NNNNNNNN.seg`: a sealed segment, uploaded once;
/// - `wal/NNNNNNNN/<start>-<end>-<first>-<last>-<ms>`: bytes `start..<end` of WAL `NNNNNNNN`
///   (whole records; the first chunk holds the header), the first and last sequence in them
///   (hex; 0 when none) and when they were read (milliseconds since 1970); never overwritten;
/// - `manifests/<version>-<lastSequence>-<ms>`: each manifest as it changed, in order.
///
/// A generation is one lineage of the store: a replicator that finds the bucket's newest
/// generation is not the store it reads (another store, or one restored or rebuilt) starts a
/// new one, so a restore never mixes two. Generation names sort by creation time. Every
/// object carries its CRC-32C in the metadata `crc32c`.
enum ReplicaNames {
    static let generations = "generations/"

    static func newGeneration(now: Date = Date()) -> String {
        String(format: "%016llx", UInt64(now.timeIntervalSince1970 * 1000)) + String(format: "%08x", UInt32.random(in: 0...UInt32.max))
    }

    static func generationPrefix(_ generation: String) -> String { generations + generation + "/" }

    static func segment(_ number: UInt32) -> String { "segments/" + StoreFiles.segmentName(number) }

    static func manifest(version: UInt64, lastSequence: UInt64, time: Date) -> String {
        "manifests/" + hex(version) + "-" + hex(lastSequence) + "-" + milliseconds(time)
    }

    static func walChunk(_ chunk: WALChunk) -> String {
        "wal/" + String(format: "%08u", chunk.wal) + "/" + hex(UInt64(chunk.start)) + "-" + hex(UInt64(chunk.end)) + "-"
            + hex(chunk.firstSequence) + "-" + hex(chunk.lastSequence) + "-" + milliseconds(chunk.time)
    }

    static func hex(_ value: UInt64) -> String { String(format: "%016llx", value) }
    static func milliseconds(_ time: Date) -> String { String(format: "%013llu", UInt64(max(0, time.timeIntervalSince1970 * 1000))) }

    /// A chunk of a WAL in the bucket.
    struct WALChunk: Equatable {
        var wal: UInt32
        var start: Int
        var end: Int
        var firstSequence: UInt64
        var lastSequence: UInt64
        var time: Date
    }

    /// A manifest version in the bucket.
    struct ManifestVersion: Equatable {
        var version: UInt64
        var lastSequence: UInt64
        var time: Date
        var key: String
    }

    /// What one generation holds, from a listing of its objects (keys relative to it).
    struct Generation {
        var segments: [UInt32: S3ObjectInfo] = [:]
        var chunks: [UInt32: [WALChunk]] = [:]
        var manifests: [ManifestVersion] = []

        init(_ objects: [(relative: String, info: S3ObjectInfo)]) {
            for (relative, info) in objects {
                let parts = relative.split(separator: "/").map(String.init)
                if parts.count == 2, parts[0] == "segments", parts[1].hasSuffix(".seg"), let number = UInt32(parts[1].dropLast(4)) {
                    segments[number] = info
                } else if parts.count == 3, parts[0] == "wal", let wal = UInt32(parts[1]) {
                    let fields = parts[2].split(separator: "-").map(String.init)
                    guard fields.count == 5, let start = UInt64(fields[0], radix: 16), let end = UInt64(fields[1], radix: 16),
                        let first = UInt64(fields[2], radix: 16), let last = UInt64(fields[3], radix: 16), let ms = UInt64(fields[4])
                    else { continue }
                    chunks[wal, default: []].append(WALChunk(
                        wal: wal, start: Int(start), end: Int(end), firstSequence: first, lastSequence: last,
                        time: Date(timeIntervalSince1970: Double(ms) / 1000)))
                } else if parts.count == 2, parts[0] == "manifests" {
                    let fields = parts[1].split(separator: "-").map(String.init)
                    guard fields.count == 3, let version = UInt64(fields[0], radix: 16), let last = UInt64(fields[1], radix: 16),
                        let ms = UInt64(fields[2])
                    else { continue }
                    manifests.append(ManifestVersion(version: version, lastSequence: last, time: Date(timeIntervalSince1970: Double(ms) / 1000), key: relative))
                }
            }
            for wal in chunks.keys { chunks[wal]?.sort { $0.start < $1.start } }
            manifests.sort { $0.version < $1.version }
        }
    }

    /// `existing` (a WAL's first bytes) extended with `pieces` (its chunks, in start order):
    /// a chunk may overlap what is there already (a pass whose upload succeeded unconfirmed is
    /// uploaded again from the same place with another end), so each chunk adds the bytes past
    /// the end so far, after its overlap is checked against them. Stops before a chunk that
    /// starts past the end (a gap: returned as `gap`), or one `skip` says is not needed.
    static func join(
        _ existing: [UInt8], _ pieces: [WALChunk], skip: (WALChunk) -> Bool = { _ in false },
        download: (WALChunk) throws(ReplicationError) -> [UInt8]
    ) throws(ReplicationError) -> (bytes: [UInt8], gap: Int?) {
        var bytes = existing
        for piece in pieces.sorted(by: { ($0.start, -$0.end) < ($1.start, -$1.end) }) where piece.end > bytes.count {
            guard piece.start <= bytes.count else { return (bytes, bytes.count) }
            if skip(piece) { break }
            let chunk = try download(piece)
            guard chunk.count == piece.end - piece.start else {
                throw ReplicationError(.corrupt, "the chunk of WAL \(piece.wal) for bytes \(piece.start)..<\(piece.end) holds \(chunk.count) bytes")
            }
            let overlap = bytes.count - piece.start
            guard chunk.prefix(overlap).elementsEqual(bytes[piece.start...]) else {
                throw ReplicationError(.corrupt, "the chunk of WAL \(piece.wal) for bytes \(piece.start)..<\(piece.end) differs from another chunk where they overlap")
            }
            bytes += chunk[overlap...]
        }
        return (bytes, nil)
    }

    /// The generations under `location`, oldest first, each with its objects.
    static func generations(in location: ReplicaLocation, client: S3Client) throws(ReplicationError) -> [(name: String, content: Generation)] {
        let root = location.key(generations)
        let objects: [S3ObjectInfo]
        do { objects = try client.list(bucket: location.bucket, prefix: root) } catch { throw .storage(error) }
        var byGeneration: [String: [(String, S3ObjectInfo)]] = [:]
        for object in objects {
            let relative = object.key.dropFirst(root.count)
            guard let slash = relative.firstIndex(of: "/") else { continue }
            byGeneration[String(relative[..<slash]), default: []].append((String(relative[relative.index(after: slash)...]), object))
        }
        return byGeneration.keys.sorted().map { ($0, Generation(byGeneration[$0] ?? [])) }
    }
}

import BenchmarkSupport
import Foundation
import Glibc
import Synchronization

/// A failure while running the engine comparison: which system, doing what, where.
public struct EngineComparisonError: Error, CustomStringConvertible {
    /// "Strata", "LevelDB", "RocksDB", "SQLite" or "raw disk".
    public let system: String
    /// What was being done, e.g. "open" or "write batch".
    public let operation: String
    /// The file or directory concerned, when there is one.
    public let path: String?
    /// What the system said.
    public let message: String

    /// An error of `system` while doing `operation` at `path`.
    public init(system: String, operation: String, path: String?, message: String) {
        self.system = system
        self.operation = operation
        self.path = path
        self.message = message
    }

    /// "LevelDB: open failed at /tmp/x/leveldb-seq: IO error: …".
    public var description: String {
        "\(system): \(operation) failed\(path.map { " at \($0)" } ?? ""): \(message)"
    }
}

/// One key and one value.
typealias KeyValuePair = (key: [UInt8], value: [UInt8])

/// How often an open store syncs its log.
enum SyncMode: Sendable {
    /// Never per commit (Strata `.none`, LevelDB/RocksDB `sync = false`, SQLite
    /// `synchronous = NORMAL`); a `write(_:sync: true)` syncs explicitly.
    case deferred
    /// Every commit is on stable storage before it returns (Strata `.full`, `sync = true`,
    /// `synchronous = FULL`).
    case everyCommit
}

/// What a read pass or a scan found.
struct ReadTally: Sendable {
    /// Keys found.
    var found = 0
    /// Bytes of keys and values returned.
    var bytes = 0
}

/// A key/value system under comparison.
protocol KeyValueSystem: Sendable {
    /// The name in the tables: "Strata", "LevelDB", "RocksDB" or "SQLite".
    var name: String { get }
    /// How the system is configured, for the notes.
    var setup: String { get }
    /// Opens (creating when missing) the store in directory `path`.
    func open(at path: String, mode: SyncMode) throws -> any KeyValueStore
}

/// An open store. Implementations are safe to call from several threads at once for ``put``
/// (the concurrent commit test); everything else is called from one thread.
protocol KeyValueStore: AnyObject, Sendable {
    /// Commits `pairs` atomically as one batch or transaction. With `sync`, this batch is on
    /// stable storage when the call returns whatever the ``SyncMode``.
    func write(_ pairs: [KeyValuePair], sync: Bool) throws
    /// Puts one pair in a commit of its own (durable under ``SyncMode/everyCommit``).
    func put(_ key: [UInt8], _ value: [UInt8]) throws
    /// Gets `keys[i]` for every `i` of `indices`, in that order, from one thread.
    func read(_ keys: [[UInt8]], at indices: [Int]) throws -> ReadTally
    /// Reads every key and value in key order.
    func scan() throws -> ReadTally
    /// Moves everything to its final place and compacts or rewrites it fully; returns when done.
    func compactFully() throws
    /// Closes the store; later calls are errors.
    func close() throws
}

/// Fills `store` with `keys[i]` for each `i` of `order`, in batches of `batchSize`, with values
/// taken in turn from `values` (as `Workload.fill` does for the engine). The last batch is
/// synced, so that everything is durable when this returns.
func fill(
    _ store: any KeyValueStore, keys: [[UInt8]], order: [Int], values: [[UInt8]], batchSize: Int
) throws {
    var pairs: [KeyValuePair] = []
    pairs.reserveCapacity(batchSize)
    for (n, index) in order.enumerated() {
        pairs.append((keys[index], values[n % values.count]))
        if pairs.count == batchSize {
            try store.write(pairs, sync: n == order.count - 1)
            pairs.removeAll(keepingCapacity: true)
        }
    }
    if !pairs.isEmpty { try store.write(pairs, sync: true) }
}

/// Runs `threads` OS threads, each putting one key per commit until `deadline`; returns the
/// number of commits. Thread `t` writes keys `t * 10^9 + n`, so threads never share a key.
func runCommitters(
    _ store: any KeyValueStore, threads: Int, until deadline: ContinuousClock.Instant, value: [UInt8]
) throws -> Int {
    try Committers.run(threads: threads, until: deadline, value: value) { key, value in try store.put(key, value) }
}

/// The sum of the sizes of the regular files under `path` (recursively).
func directoryBytes(_ path: String) throws -> UInt64 {
    guard let enumerator = FileManager.default.enumerator(atPath: path) else {
        throw EngineComparisonError(system: "harness", operation: "list files", path: path, message: "cannot read the directory")
    }
    var total: UInt64 = 0
    while let name = enumerator.nextObject() as? String {
        var info = stat()
        guard stat(path + "/" + name, &info) == 0 else { continue }
        if (info.st_mode & S_IFMT) == S_IFREG { total += UInt64(info.st_size) }
    }
    return total
}

/// Creates `path` and its parents when missing.
func makeDirectory(_ path: String, system: String) throws {
    do {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    } catch {
        throw EngineComparisonError(system: system, operation: "create directory", path: path, message: "\(error)")
    }
}

/// The message of `errno`.
func errnoMessage() -> String { String(cString: strerror(errno)) }

import CRocksDB
import Foundation
import Glibc

/// RocksDB (Debian's librocksdb) through its C API.
struct RocksDBSystem: KeyValueSystem {
    /// LRU block cache capacity.
    let blockCacheBytes: Int
    /// Memtable size (`write_buffer_size`, set through `optimize_level_style_compaction`).
    let writeBufferBytes: Int
    /// Background threads (`increase_parallelism`).
    let threads: Int

    var name: String { "RocksDB" }

    var setup: String {
        "RocksDB (\(libraryFile(defining: "rocksdb_open") ?? "librocksdb")): increase_parallelism(\(threads)), "
            + "optimize_level_style_compaction(\(4 * writeBufferBytes >> 20) MiB memtable budget: write_buffer_size "
            + "\(writeBufferBytes >> 20) MiB, level-style compaction), then LZ4 on every level "
            + "(compression and compression_per_level), block-based tables with a full bloom filter of 10 bits/key "
            + "and an LRU block cache of \(blockCacheBytes >> 20) MiB, other options default; WriteOptions.sync "
            + "false for the no-sync rows (the last batch of a fill synced), true for the fsync-per-commit rows"
    }

    func open(at path: String, mode: SyncMode) throws -> any KeyValueStore {
        try RocksDBStore(
            path: path, mode: mode, blockCacheBytes: blockCacheBytes, writeBufferBytes: writeBufferBytes, threads: threads)
    }
}

/// An open RocksDB database. RocksDB's `DB` is safe for concurrent use, hence the unchecked
/// `Sendable`; the option objects are only read after `init`.
final class RocksDBStore: KeyValueStore, @unchecked Sendable {
    private let path: String
    private let database: OpaquePointer
    private let readOptions: OpaquePointer
    private let writeOptions: OpaquePointer
    private let syncedWriteOptions: OpaquePointer
    private var isClosed = false

    init(path: String, mode: SyncMode, blockCacheBytes: Int, writeBufferBytes: Int, threads: Int) throws {
        self.path = path
        guard let options = rocksdb_options_create(), let table = rocksdb_block_based_options_create(),
            let cache = rocksdb_cache_create_lru(blockCacheBytes), let filter = rocksdb_filterpolicy_create_bloom_full(10),
            let readOptions = rocksdb_readoptions_create(), let writeOptions = rocksdb_writeoptions_create(),
            let syncedWriteOptions = rocksdb_writeoptions_create()
        else {
            // Impossible in practice: these only allocate.
            throw EngineComparisonError(system: "RocksDB", operation: "create options", path: path, message: "out of memory")
        }
        // The database copies the options, the table factory and the cache reference at open.
        defer {
            rocksdb_cache_destroy(cache)
            rocksdb_block_based_options_destroy(table)
            rocksdb_options_destroy(options)
        }
        rocksdb_options_set_create_if_missing(options, 1)
        rocksdb_options_increase_parallelism(options, Int32(threads))
        rocksdb_options_optimize_level_style_compaction(options, UInt64(4 * writeBufferBytes))
        rocksdb_options_set_compression(options, Int32(rocksdb_lz4_compression))
        // optimize_level_style_compaction leaves levels 0 and 1 uncompressed: LZ4 everywhere, as Strata.
        let levels = [Int32](repeating: Int32(rocksdb_lz4_compression), count: 7)
        levels.withUnsafeBufferPointer { rocksdb_options_set_compression_per_level(options, $0.baseAddress, $0.count) }
        rocksdb_block_based_options_set_filter_policy(table, filter)  // the table options own the filter
        rocksdb_block_based_options_set_block_cache(table, cache)
        rocksdb_options_set_block_based_table_factory(options, table)
        rocksdb_writeoptions_set_sync(writeOptions, mode == .everyCommit ? 1 : 0)
        rocksdb_writeoptions_set_sync(syncedWriteOptions, 1)
        var error: UnsafeMutablePointer<CChar>? = nil
        let database = rocksdb_open(options, path, &error)
        if let message = Self.take(error) {
            Self.destroy(readOptions, writeOptions, syncedWriteOptions)
            throw EngineComparisonError(system: "RocksDB", operation: "open", path: path, message: message)
        }
        guard let database else {
            Self.destroy(readOptions, writeOptions, syncedWriteOptions)
            throw EngineComparisonError(system: "RocksDB", operation: "open", path: path, message: "no handle and no error")
        }
        self.database = database
        self.readOptions = readOptions
        self.writeOptions = writeOptions
        self.syncedWriteOptions = syncedWriteOptions
    }

    deinit {
        if !isClosed { rocksdb_close(database) }
        Self.destroy(readOptions, writeOptions, syncedWriteOptions)
    }

    private static func destroy(_ readOptions: OpaquePointer, _ writeOptions: OpaquePointer, _ synced: OpaquePointer) {
        rocksdb_writeoptions_destroy(synced)
        rocksdb_writeoptions_destroy(writeOptions)
        rocksdb_readoptions_destroy(readOptions)
    }

    /// The message in `error`, freed; `nil` when there was no error.
    private static func take(_ error: UnsafeMutablePointer<CChar>?) -> String? {
        guard let error else { return nil }
        defer { rocksdb_free(error) }
        return String(cString: error)
    }

    /// Throws when `error` is set (freeing it).
    private func check(_ error: UnsafeMutablePointer<CChar>?, _ operation: String) throws {
        if let message = Self.take(error) {
            throw EngineComparisonError(system: "RocksDB", operation: operation, path: path, message: message)
        }
    }

    func write(_ pairs: [KeyValuePair], sync: Bool) throws {
        guard let batch = rocksdb_writebatch_create() else {
            throw EngineComparisonError(system: "RocksDB", operation: "create batch", path: path, message: "out of memory")
        }
        defer { rocksdb_writebatch_destroy(batch) }
        for pair in pairs {
            pair.key.withUnsafeBufferPointer { key in
                pair.value.withUnsafeBufferPointer { value in
                    rocksdb_writebatch_put(batch, chars(key), key.count, chars(value), value.count)
                }
            }
        }
        var error: UnsafeMutablePointer<CChar>? = nil
        rocksdb_write(database, sync ? syncedWriteOptions : writeOptions, batch, &error)
        try check(error, "write batch")
    }

    func put(_ key: [UInt8], _ value: [UInt8]) throws {
        var error: UnsafeMutablePointer<CChar>? = nil
        key.withUnsafeBufferPointer { key in
            value.withUnsafeBufferPointer { value in
                rocksdb_put(database, writeOptions, chars(key), key.count, chars(value), value.count, &error)
            }
        }
        try check(error, "put")
    }

    func read(_ keys: [[UInt8]], at indices: [Int]) throws -> ReadTally {
        var tally = ReadTally()
        for index in indices {
            var error: UnsafeMutablePointer<CChar>? = nil
            var length = 0
            let value = keys[index].withUnsafeBufferPointer { key in
                rocksdb_get(database, readOptions, chars(key), key.count, &length, &error)
            }
            try check(error, "get")
            if let value {
                tally.found += 1
                tally.bytes += keys[index].count + length
                rocksdb_free(value)
            }
        }
        return tally
    }

    func scan() throws -> ReadTally {
        guard let iterator = rocksdb_create_iterator(database, readOptions) else {
            throw EngineComparisonError(system: "RocksDB", operation: "create iterator", path: path, message: "no iterator")
        }
        defer { rocksdb_iter_destroy(iterator) }
        var tally = ReadTally()
        rocksdb_iter_seek_to_first(iterator)
        while rocksdb_iter_valid(iterator) != 0 {
            var keyLength = 0, valueLength = 0
            _ = rocksdb_iter_key(iterator, &keyLength)
            _ = rocksdb_iter_value(iterator, &valueLength)
            tally.found += 1
            tally.bytes += keyLength + valueLength
            rocksdb_iter_next(iterator)
        }
        var error: UnsafeMutablePointer<CChar>? = nil
        rocksdb_iter_get_error(iterator, &error)
        try check(error, "iterate")
        return tally
    }

    func compactFully() throws {
        // Flushes the memtables, then compacts the whole key range (CompactRange with defaults).
        rocksdb_compact_range(database, nil, 0, nil, 0)
    }

    func close() throws {
        guard !isClosed else { return }
        isClosed = true
        rocksdb_close(database)
    }
}

/// The file name, symbolic links resolved, of the shared library that defines the C symbol
/// `symbol` in this process (for example "librocksdb.so.7.8.3"), or `nil`: the mapping of
/// /proc/self/maps that holds the symbol's address.
func libraryFile(defining symbol: String) -> String? {
    // A nil handle is RTLD_DEFAULT: search every loaded object.
    guard let address = dlsym(nil, symbol).map({ UInt(bitPattern: $0) }) else { return nil }
    let fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    // /proc files report a size of 0: read until the end.
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { break }
        bytes += buffer[0..<count]
    }
    // Lines are "start-end perms offset device inode path".
    for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count >= 6, let dash = fields[0].firstIndex(of: "-"),
            let low = UInt(fields[0][..<dash], radix: 16),
            let high = UInt(fields[0][fields[0].index(after: dash)...], radix: 16),
            low <= address, address < high
        else { continue }
        let path = fields[5...].joined(separator: " ")
        return URL(fileURLWithPath: path).resolvingSymlinksInPath().lastPathComponent
    }
    return nil
}

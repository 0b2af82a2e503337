import CLevelDB

/// LevelDB (Debian's libleveldb, built with Snappy) through its C API.
struct LevelDBSystem: KeyValueSystem {
    /// LRU block cache capacity.
    let blockCacheBytes: Int
    /// Memtable size before it is written as a level-0 table (`write_buffer_size`).
    let writeBufferBytes: Int

    var name: String { "LevelDB" }

    var setup: String {
        "LevelDB \(leveldb_major_version()).\(leveldb_minor_version()): Snappy compression (LevelDB has no LZ4), "
            + "bloom filter 10 bits/key, LRU block cache \(blockCacheBytes >> 20) MiB, write_buffer_size "
            + "\(writeBufferBytes >> 20) MiB (matching Strata's WAL rollover; LevelDB's default is 4 MiB), "
            + "other options default (4 KiB blocks, 2 MiB tables, max_open_files 1000); WriteOptions.sync false "
            + "for the no-sync rows (the last batch of a fill synced), true for the fsync-per-commit rows"
    }

    func open(at path: String, mode: SyncMode) throws -> any KeyValueStore {
        try LevelDBStore(path: path, mode: mode, blockCacheBytes: blockCacheBytes, writeBufferBytes: writeBufferBytes)
    }
}

/// An open LevelDB database. LevelDB's `DB` is safe for concurrent use, hence the unchecked
/// `Sendable`; the option objects are only read after `init`.
final class LevelDBStore: KeyValueStore, @unchecked Sendable {
    private let path: String
    private let database: OpaquePointer
    private let options: OpaquePointer
    private let cache: OpaquePointer
    private let filter: OpaquePointer
    private let readOptions: OpaquePointer
    private let writeOptions: OpaquePointer
    private let syncedWriteOptions: OpaquePointer
    private var isClosed = false

    init(path: String, mode: SyncMode, blockCacheBytes: Int, writeBufferBytes: Int) throws {
        self.path = path
        guard let options = leveldb_options_create(), let cache = leveldb_cache_create_lru(blockCacheBytes),
            let filter = leveldb_filterpolicy_create_bloom(10), let readOptions = leveldb_readoptions_create(),
            let writeOptions = leveldb_writeoptions_create(), let syncedWriteOptions = leveldb_writeoptions_create()
        else {
            // Impossible in practice: these only allocate.
            throw EngineComparisonError(system: "LevelDB", operation: "create options", path: path, message: "out of memory")
        }
        leveldb_options_set_create_if_missing(options, 1)
        leveldb_options_set_compression(options, Int32(leveldb_snappy_compression))
        leveldb_options_set_cache(options, cache)
        leveldb_options_set_filter_policy(options, filter)
        leveldb_options_set_write_buffer_size(options, writeBufferBytes)
        leveldb_writeoptions_set_sync(writeOptions, mode == .everyCommit ? 1 : 0)
        leveldb_writeoptions_set_sync(syncedWriteOptions, 1)
        var error: UnsafeMutablePointer<CChar>? = nil
        let database = leveldb_open(options, path, &error)
        if let message = Self.take(error) {
            Self.destroy(options, cache, filter, readOptions, writeOptions, syncedWriteOptions)
            throw EngineComparisonError(system: "LevelDB", operation: "open", path: path, message: message)
        }
        guard let database else {
            Self.destroy(options, cache, filter, readOptions, writeOptions, syncedWriteOptions)
            throw EngineComparisonError(system: "LevelDB", operation: "open", path: path, message: "no handle and no error")
        }
        self.database = database
        self.options = options
        self.cache = cache
        self.filter = filter
        self.readOptions = readOptions
        self.writeOptions = writeOptions
        self.syncedWriteOptions = syncedWriteOptions
    }

    deinit {
        if !isClosed { leveldb_close(database) }
        Self.destroy(options, cache, filter, readOptions, writeOptions, syncedWriteOptions)
    }

    private static func destroy(
        _ options: OpaquePointer, _ cache: OpaquePointer, _ filter: OpaquePointer, _ readOptions: OpaquePointer,
        _ writeOptions: OpaquePointer, _ syncedWriteOptions: OpaquePointer
    ) {
        leveldb_writeoptions_destroy(syncedWriteOptions)
        leveldb_writeoptions_destroy(writeOptions)
        leveldb_readoptions_destroy(readOptions)
        leveldb_options_destroy(options)
        leveldb_filterpolicy_destroy(filter)
        leveldb_cache_destroy(cache)
    }

    /// The message in `error`, freed; `nil` when there was no error.
    private static func take(_ error: UnsafeMutablePointer<CChar>?) -> String? {
        guard let error else { return nil }
        defer { leveldb_free(error) }
        return String(cString: error)
    }

    /// Throws when `error` is set (freeing it).
    private func check(_ error: UnsafeMutablePointer<CChar>?, _ operation: String) throws {
        if let message = Self.take(error) {
            throw EngineComparisonError(system: "LevelDB", operation: operation, path: path, message: message)
        }
    }

    func write(_ pairs: [KeyValuePair], sync: Bool) throws {
        guard let batch = leveldb_writebatch_create() else {
            throw EngineComparisonError(system: "LevelDB", operation: "create batch", path: path, message: "out of memory")
        }
        defer { leveldb_writebatch_destroy(batch) }
        for pair in pairs {
            pair.key.withUnsafeBufferPointer { key in
                pair.value.withUnsafeBufferPointer { value in
                    leveldb_writebatch_put(batch, chars(key), key.count, chars(value), value.count)
                }
            }
        }
        var error: UnsafeMutablePointer<CChar>? = nil
        leveldb_write(database, sync ? syncedWriteOptions : writeOptions, batch, &error)
        try check(error, "write batch")
    }

    func put(_ key: [UInt8], _ value: [UInt8]) throws {
        var error: UnsafeMutablePointer<CChar>? = nil
        key.withUnsafeBufferPointer { key in
            value.withUnsafeBufferPointer { value in
                leveldb_put(database, writeOptions, chars(key), key.count, chars(value), value.count, &error)
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
                leveldb_get(database, readOptions, chars(key), key.count, &length, &error)
            }
            try check(error, "get")
            if let value {
                tally.found += 1
                tally.bytes += keys[index].count + length
                leveldb_free(value)
            }
        }
        return tally
    }

    func scan() throws -> ReadTally {
        guard let iterator = leveldb_create_iterator(database, readOptions) else {
            throw EngineComparisonError(system: "LevelDB", operation: "create iterator", path: path, message: "no iterator")
        }
        defer { leveldb_iter_destroy(iterator) }
        var tally = ReadTally()
        leveldb_iter_seek_to_first(iterator)
        while leveldb_iter_valid(iterator) != 0 {
            var keyLength = 0, valueLength = 0
            _ = leveldb_iter_key(iterator, &keyLength)
            _ = leveldb_iter_value(iterator, &valueLength)
            tally.found += 1
            tally.bytes += keyLength + valueLength
            leveldb_iter_next(iterator)
        }
        var error: UnsafeMutablePointer<CChar>? = nil
        leveldb_iter_get_error(iterator, &error)
        try check(error, "iterate")
        return tally
    }

    func compactFully() throws {
        // Writes the memtable out, then compacts every level down (LevelDB's CompactRange).
        leveldb_compact_range(database, nil, 0, nil, 0)
    }

    func close() throws {
        guard !isClosed else { return }
        isClosed = true
        leveldb_close(database)
    }
}

/// The bytes of `buffer` as the `const char *` the C APIs take.
func chars(_ buffer: UnsafeBufferPointer<UInt8>) -> UnsafePointer<CChar>? {
    buffer.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) }
}

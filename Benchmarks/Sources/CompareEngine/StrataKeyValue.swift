import StrataEngine

/// StrataEngine with its defaults except durability and the row cache budget.
struct StrataSystem: KeyValueSystem {
    /// Row cache budget (`EngineOptions.rowCacheBytes`).
    let rowCacheBytes: Int

    var name: String { "Strata" }

    var setup: String {
        "Strata: StrataEngine defaults (64 MiB WAL rollover, \(EngineOptions().blockSize >> 10) KiB LZ4 blocks, "
            + "automatic compaction), "
            + "row cache \(rowCacheBytes >> 20) MiB; durability .none for the no-sync rows (a final sync() makes "
            + "the fill durable), .full (group commit) for the fsync-per-commit rows"
    }

    func open(at path: String, mode: SyncMode) throws -> any KeyValueStore {
        var options = EngineOptions()
        options.durability = mode == .everyCommit ? .full : .none
        options.rowCacheBytes = rowCacheBytes
        do {
            return StrataKeyValueStore(engine: try Engine.open(at: path, options: options), path: path)
        } catch {
            throw EngineComparisonError(system: name, operation: "open", path: path, message: "\(error)")
        }
    }
}

/// An open StrataEngine.
final class StrataKeyValueStore: KeyValueStore {
    let engine: Engine
    let path: String

    init(engine: Engine, path: String) {
        self.engine = engine
        self.path = path
    }

    /// Runs `body`, turning a ``StoreError`` into an ``EngineComparisonError`` for `operation`.
    private func attempt<T>(_ operation: String, _ body: () throws(StoreError) -> T) throws -> T {
        do {
            return try body()
        } catch {
            throw EngineComparisonError(system: "Strata", operation: operation, path: error.path ?? path, message: "\(error)")
        }
    }

    func write(_ pairs: [KeyValuePair], sync: Bool) throws {
        var batch = WriteBatch()
        for pair in pairs { batch.put(pair.key, pair.value) }
        try attempt("commit") { () throws(StoreError) in
            try engine.commit(batch)
            if sync { try engine.sync() }
        }
    }

    func put(_ key: [UInt8], _ value: [UInt8]) throws {
        try attempt("put") { () throws(StoreError) in _ = try engine.put(key, value) }
    }

    func read(_ keys: [[UInt8]], at indices: [Int]) throws -> ReadTally {
        try attempt("get") { () throws(StoreError) -> ReadTally in
            var tally = ReadTally()
            for index in indices {
                if let value = try engine.get(keys[index]) {
                    tally.found += 1
                    tally.bytes += keys[index].count + value.count
                }
            }
            return tally
        }
    }

    func scan() throws -> ReadTally {
        try attempt("scan") { () throws(StoreError) -> ReadTally in
            var tally = ReadTally()
            try engine.snapshot().forEach { key, value in
                tally.found += 1
                tally.bytes += key.count + value.count
                return true
            }
            return tally
        }
    }

    func compactFully() throws {
        try attempt("flush and compact(.full)") { () throws(StoreError) in
            try engine.flush()
            engine.waitForCompaction()
            try engine.compact(.full)
            engine.waitForCompaction()
        }
    }

    func close() throws {
        try attempt("close") { () throws(StoreError) in try engine.close() }
    }
}

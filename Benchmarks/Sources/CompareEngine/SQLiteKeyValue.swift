import Foundation
import GRDB
import GRDBSQLite

/// SQLite as a key/value table, `kv(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID`, through GRDB.
///
/// GRDB opens and configures the connections (a `DatabasePool`: WAL mode, one writer
/// connection, readers); the loops bind and step statements prepared once per batch or read
/// pass through SQLite's C API on GRDB's connection, so that GRDB's per-value conversions do not
/// count against SQLite.
struct SQLiteSystem: KeyValueSystem {
    /// Page cache per connection (`PRAGMA cache_size`).
    let cacheBytes: Int

    var name: String { "SQLite" }

    var setup: String {
        "SQLite \(String(cString: sqlite3_libversion())) through GRDB 7.10 (DatabasePool): journal_mode=WAL, "
            + "kv(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID, INSERT OR REPLACE, one transaction per batch; "
            + "synchronous=NORMAL for the no-sync rows (the last transaction of a fill with FULL), FULL for the "
            + "fsync-per-commit rows (commits from several threads queue for GRDB's one writer connection); "
            + "cache_size \(cacheBytes >> 20) MiB per connection; otherwise defaults (4 KiB pages, no mmap, "
            + "wal_autocheckpoint 1000 pages); prepared statements stepped through the C API"
    }

    func open(at path: String, mode: SyncMode) throws -> any KeyValueStore {
        try SQLiteStore(directory: path, mode: mode, cacheBytes: cacheBytes)
    }
}

/// An open SQLite database in a directory of its own (`kv.sqlite` and its WAL).
final class SQLiteStore: KeyValueStore {
    private let path: String
    private let pool: DatabasePool
    private let mode: SyncMode

    static let insert = "INSERT OR REPLACE INTO kv(k, v) VALUES (?, ?)"

    init(directory: String, mode: SyncMode, cacheBytes: Int) throws {
        try makeDirectory(directory, system: "SQLite")
        path = directory + "/kv.sqlite"
        self.mode = mode
        var configuration = Configuration()
        let kibibytes = cacheBytes >> 10
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA cache_size = -\(kibibytes)") }
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "CREATE TABLE IF NOT EXISTS kv(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID")
                // GRDB sets synchronous = NORMAL when it turns WAL mode on; the durable rows need FULL.
                if mode == .everyCommit { try db.execute(sql: "PRAGMA synchronous = FULL") }
                let expected = mode == .everyCommit ? 2 : 1
                let actual = try Int.fetchOne(db, sql: "PRAGMA synchronous")
                guard actual == expected else {
                    throw EngineComparisonError(
                        system: "SQLite", operation: "set synchronous", path: path,
                        message: "PRAGMA synchronous is \(actual.map(String.init) ?? "nil"), expected \(expected)")
                }
            }
        } catch let error as EngineComparisonError {
            throw error
        } catch {
            throw EngineComparisonError(system: "SQLite", operation: "open", path: path, message: "\(error)")
        }
    }

    /// Runs `body`, turning GRDB's errors into an ``EngineComparisonError`` for `operation`.
    private func attempt<T>(_ operation: String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as EngineComparisonError {
            throw error
        } catch {
            throw EngineComparisonError(system: "SQLite", operation: operation, path: path, message: "\(error)")
        }
    }

    /// An error for the connection's last failure.
    private func failure(_ db: Database, _ operation: String, _ code: Int32) -> EngineComparisonError {
        let message = db.sqliteConnection.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) } ?? "no message"
        return EngineComparisonError(system: "SQLite", operation: operation, path: path, message: "code \(code): \(message)")
    }

    /// Prepares `sql` on `db`'s connection, runs `body` with it and finalizes it.
    private func withStatement<T>(_ db: Database, _ sql: String, _ body: (OpaquePointer) throws -> T) throws -> T {
        var statement: OpaquePointer? = nil
        let code = sqlite3_prepare_v2(db.sqliteConnection, sql, -1, &statement, nil)
        guard code == SQLITE_OK, let statement else { throw failure(db, "prepare \(sql)", code) }
        defer { sqlite3_finalize(statement) }
        return try body(statement)
    }

    /// Binds `key` and `value` to the insert `statement` and steps it once.
    private func insert(_ db: Database, _ statement: OpaquePointer, _ key: [UInt8], _ value: [UInt8]) throws {
        let code = key.withUnsafeBytes { key in
            value.withUnsafeBytes { value -> Int32 in
                // A nil destructor is SQLITE_STATIC: the buffers outlive the step.
                sqlite3_bind_blob(statement, 1, key.baseAddress, Int32(key.count), nil)
                sqlite3_bind_blob(statement, 2, value.baseAddress, Int32(value.count), nil)
                let code = sqlite3_step(statement)
                sqlite3_reset(statement)
                sqlite3_clear_bindings(statement)
                return code
            }
        }
        guard code == SQLITE_DONE else { throw failure(db, "insert", code) }
    }

    func write(_ pairs: [KeyValuePair], sync: Bool) throws {
        try attempt("write transaction") {
            try pool.writeWithoutTransaction { db in
                let raise = sync && mode == .deferred
                if raise { try db.execute(sql: "PRAGMA synchronous = FULL") }
                try db.inTransaction {
                    try withStatement(db, Self.insert) { statement in
                        for pair in pairs { try insert(db, statement, pair.key, pair.value) }
                    }
                    return .commit
                }
                if raise { try db.execute(sql: "PRAGMA synchronous = NORMAL") }
            }
        }
    }

    func put(_ key: [UInt8], _ value: [UInt8]) throws {
        try attempt("put") {
            // One statement in autocommit mode: one transaction, synced under synchronous = FULL.
            try pool.writeWithoutTransaction { db in
                try insert(db, try db.cachedStatement(sql: Self.insert).sqliteStatement, key, value)
            }
        }
    }

    func read(_ keys: [[UInt8]], at indices: [Int]) throws -> ReadTally {
        try attempt("read") {
            try pool.read { db in
                try withStatement(db, "SELECT v FROM kv WHERE k = ?") { statement in
                    var tally = ReadTally()
                    for index in indices {
                        let (code, length) = keys[index].withUnsafeBytes { key -> (Int32, Int) in
                            sqlite3_bind_blob(statement, 1, key.baseAddress, Int32(key.count), nil)
                            let code = sqlite3_step(statement)
                            var length = 0
                            if code == SQLITE_ROW {
                                _ = sqlite3_column_blob(statement, 0)
                                length = Int(sqlite3_column_bytes(statement, 0))
                            }
                            sqlite3_reset(statement)
                            sqlite3_clear_bindings(statement)
                            return (code, length)
                        }
                        if code == SQLITE_ROW {
                            tally.found += 1
                            tally.bytes += keys[index].count + length
                        } else if code != SQLITE_DONE {
                            throw failure(db, "select", code)
                        }
                    }
                    return tally
                }
            }
        }
    }

    func scan() throws -> ReadTally {
        try attempt("scan") {
            try pool.read { db in
                try withStatement(db, "SELECT k, v FROM kv ORDER BY k") { statement in
                    var tally = ReadTally()
                    while true {
                        let code = sqlite3_step(statement)
                        guard code == SQLITE_ROW else {
                            if code == SQLITE_DONE { break }
                            throw failure(db, "scan", code)
                        }
                        _ = sqlite3_column_blob(statement, 0)
                        _ = sqlite3_column_blob(statement, 1)
                        tally.found += 1
                        tally.bytes += Int(sqlite3_column_bytes(statement, 0)) + Int(sqlite3_column_bytes(statement, 1))
                    }
                    return tally
                }
            }
        }
    }

    func compactFully() throws {
        try attempt("checkpoint and VACUUM") {
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
                try db.execute(sql: "VACUUM")
                try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            }
        }
    }

    func close() throws {
        try attempt("close") { try pool.close() }
    }
}

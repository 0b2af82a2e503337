import Foundation
import StrataEngine
import Synchronization
import StrataSync

/// One open engine per store directory in this process, shared by every StrataStore at that
/// path (several coordinators on one store, as Core Data allows). The engine's own lock keeps
/// other processes out.
///
/// Thread safety: `open` is protected by `registry`; `saveLock` serialises the building of
/// saves from every coordinator and holds the saves in flight; `nextReference` hands out
/// references to all of them.
final class SharedEngine: Sendable {
    let path: String
    let engine: Engine
    /// Held while a save reads current versions and builds its transaction, and while anything
    /// else that writes reads what it builds on; holds the saves submitted and not yet
    /// committed ([SAVE-3]).
    let saveLock = Locked<SavesInFlight>(SavesInFlight())
    /// The next reference to hand out.
    let nextReference: Locked<Int64>

    private init(path: String, engine: Engine, nextReference: Int64) {
        self.path = path
        self.engine = engine
        self.nextReference = Locked(nextReference)
    }

    /// Open engines by standardized path, with how many stores use each.
    private static let registry = Locked<[String: (shared: SharedEngine, users: Int)]>([:])

    /// The engine at `path`, opened with `options` (and `firstReference` from its metadata) if
    /// no store in this process has it open yet.
    static func acquire(
        path: String, options: EngineOptions, firstReference: (Engine) throws -> Int64
    ) throws -> SharedEngine {
        let key = URL(fileURLWithPath: path).standardizedFileURL.path
        if let shared = registry.withLock({ registry -> SharedEngine? in
            guard let entry = registry[key] else { return nil }
            registry[key] = (entry.shared, entry.users + 1)
            return entry.shared
        }) {
            return shared
        }
        let engine = try mappingEngineErrors("open the store at \(path)") { () throws(StoreError) in
            try Engine.open(at: path, options: options)
        }
        let shared: SharedEngine
        do {
            shared = SharedEngine(path: key, engine: engine, nextReference: try firstReference(engine))
        } catch {
            try? engine.close()
            throw error
        }
        return registry.withLock { registry in
            // Another thread may have opened it meanwhile; the lock means it cannot have.
            registry[key] = (shared, (registry[key]?.users ?? 0) + 1)
            return shared
        }
    }

    /// Whether a store in this process has the engine at `path` open (for tests that check
    /// that a store they removed let go of its engine).
    static func isOpen(path: String) -> Bool {
        let key = URL(fileURLWithPath: path).standardizedFileURL.path
        return registry.withLock { $0[key] != nil }
    }

    /// Runs `body` with the save lock held and no save in flight: the saves submitted before
    /// are committed (or failed) first, so `body`'s snapshot holds everything before it. For
    /// writers other than saves (metadata, index rebuilds).
    func withSavesSettled<T>(_ body: (inout SavesInFlight) throws -> T) throws -> T {
        try saveLock.withLock { saves in
            if let last = saves.saves.last { _ = try? engine.wait(for: last.ticket) }
            saves.saves.removeAll()
            return try body(&saves)
        }
    }

    /// Gives the engine back; the last user closes it.
    func release() {
        let last = Self.registry.withLock { registry -> Bool in
            guard let entry = registry[path] else { return false }
            if entry.users <= 1 {
                registry[path] = nil
                return true
            }
            registry[path] = (entry.shared, entry.users - 1)
            return false
        }
        if last { try? engine.close() }
    }
}

import Foundation
import Logging
import ObjectGraph
import StrataSync
import Testing

@testable import Strata

/// A StrataStore whose engine logs to the test's sink (its `engineOptions(_:)` override, as an
/// application sets its logger).
final class LoggedStrataStore: StrataStore, @unchecked Sendable {
    static let type = PersistentStore.StoreType("LoggedStrata")
    /// Where each store path's log goes, set by the test before it adds the store.
    /// Protected by its lock; read by `engineOptions` when a store loads.
    static let logs = Locked<[String: StoreLoggingTests.EventLog]>([:])

    override func engineOptions(_ options: EngineOptions) -> EngineOptions {
        var options = options
        guard let path = url?.path, let log = Self.logs.withLock({ $0[path] }) else { return options }
        options.logger = Logger(label: "test", factory: { _ in StoreLoggingTests.CapturingHandler(log: log) })
        return options
    }
}

/// The store logs its own events through its engine's logger, beside the engine's.
@Suite struct StoreLoggingTests {
    struct Event: Sendable {
        var level: Logger.Level
        var message: String
        var metadata: [String: String]
    }

    /// Every event of one store's logger; protected by `events`' lock.
    final class EventLog: Sendable {
        let events = Locked<[Event]>([])
        var all: [Event] { events.withLock { $0 } }
    }

    struct CapturingHandler: LogHandler {
        let log: EventLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let values = (event.metadata ?? [:]).mapValues { "\($0)" }
            log.events.withLock { $0.append(Event(level: event.level, message: "\(event.message)", metadata: values)) }
        }
    }

    /// [IDX-S6] Reopened with a model that indexes another attribute, the store rebuilds the
    /// entries and says so (a notice with what changed); the engine's own events are in the
    /// same log.
    @Test func reconcilingTheIndexesIsLogged() throws {
        StrataStore.register()
        PersistentStoreCoordinator.registerStoreClass(LoggedStrataStore.self, type: LoggedStrataStore.type)
        func model(indexNote: Bool) throws -> ManagedObjectModel {
            try ManagedObjectModel(entities: [
                EntityDescription(name: "Item", properties: [
                    .attribute("name", .string, optional: false, indexed: !indexNote),
                    .attribute("note", .string, indexed: indexNote),
                ]),
            ])
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("strata-log-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let first = EventLog()
        LoggedStrataStore.logs.withLock { $0[directory.path] = first }
        do {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: try model(indexNote: false))
            let store = try coordinator.addPersistentStore(type: LoggedStrataStore.type, at: directory)
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            for i in 0..<30 {
                let item = try context.insertNewObject(forEntityName: "Item")
                try item.setValue(.string("n\(i)"), forKey: "name")
                try item.setValue(.string("x"), forKey: "note")
            }
            try context.save()
            try coordinator.remove(store)
        }
        #expect(first.all.contains { $0.message == "opened the store" && $0.metadata["path"] == directory.path })

        let second = EventLog()
        LoggedStrataStore.logs.withLock { $0[directory.path] = second }
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try model(indexNote: true))
        // A synchronous build reconciles at the open ([IDX-S6]); a background one logs when done.
        let store = try coordinator.addPersistentStore(
            type: LoggedStrataStore.type, at: directory, options: [StrataStore.indexBuildOption: .string("synchronous")])
        let reconciled = try #require(second.all.first { $0.message == "reconciled the store with the model" }, "\(second.all.map(\.message))")
        #expect(reconciled.level == .notice && reconciled.metadata["indexEntriesChanged"] == "60", "\(reconciled)")
        #expect(reconciled.metadata["rows"] == "30" && reconciled.metadata["path"] == directory.path, "\(reconciled)")
        try coordinator.remove(store)
    }
}

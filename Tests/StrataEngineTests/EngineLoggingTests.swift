import Glibc
import Logging
import StrataSync
import Testing
@testable import StrataEngine

/// What the engine tells its logger ([EngineOptions.logger]): opening, torn tails, rollovers,
/// flushes, compactions and a failed sync, each with the metadata that says where; nothing by
/// default.
@Suite struct EngineLoggingTests {
    /// One logged event.
    struct Event: Sendable {
        var level: Logger.Level
        var message: String
        var metadata: [String: String]
    }

    /// Every event a test's logger was given; protected by `events`' lock.
    final class EventLog: Sendable {
        let events = Locked<[Event]>([])
        var all: [Event] { events.withLock { $0 } }
    }

    /// Hands every event to its log.
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

    static func capturing() -> (Logger, EventLog) {
        let log = EventLog()
        return (Logger(label: "test", factory: { _ in CapturingHandler(log: log) }), log)
    }

    @Test func theEngineLogsItsOwnWorkWithWhereItHappened() throws {
        let fs = FaultInjectingFileSystem()
        let (logger, events) = Self.capturing()
        var options = testOptions(fs, rollover: 2048)
        options.logger = logger
        let engine = try Engine.open(at: "/store", options: options)
        for n in 0..<200 { try engine.put(testKey(n), Array(repeating: UInt8(n % 251), count: 40)) }
        try engine.compact(.full)
        try engine.close()

        let logged = events.all
        let opened = try #require(logged.first { $0.message == "opened the store" })
        #expect(opened.level == .info && opened.metadata["path"] == "/store" && opened.metadata["sequence"] == "0")
        let rollover = try #require(logged.first { $0.message == "WAL rolled over" })
        #expect(rollover.metadata["file"] == Format.walFileName(1), "\(rollover)")
        #expect(rollover.metadata["bytes"].flatMap(UInt64.init).map { $0 >= 2048 } == true, "\(rollover)")
        let flushed = try #require(logged.first { $0.message == "flushed a WAL into a segment" })
        #expect(flushed.metadata["file"] == Format.walFileName(1) && flushed.metadata["segment"]?.hasSuffix(".seg") == true, "\(flushed)")
        let compacted = try #require(logged.first { $0.message == "compacted segments" })
        #expect(compacted.level == .info && compacted.metadata["bytesRead"].flatMap(UInt64.init).map { $0 > 0 } == true, "\(compacted)")
        #expect(logged.allSatisfy { $0.level == .info }, "a healthy store logs nothing above info: \(logged.filter { $0.level != .info })")

        // A write torn by a crash: the reopen cuts the tail and says so, as a warning naming
        // the WAL and the offset.
        do {
            let writer = try Engine.open(at: "/store", options: options)
            try writer.put([0x7A], [1])
            fs.tearNextWrite(matching: ".wal", keeping: 20)
            #expect(throws: StoreError.self) { try writer.put([0x7B], Array(repeating: 2, count: 100)) }
        }
        fs.crash(keeping: .all)  // the torn write's 20 bytes reach the disk
        let (tornLogger, tornEvents) = Self.capturing()
        var reopenOptions = options
        reopenOptions.logger = tornLogger
        try Engine.open(at: "/store", options: reopenOptions).close()
        let torn = try #require(tornEvents.all.first { $0.message == "cut a torn tail off the active WAL" }, "\(tornEvents.all)")
        #expect(torn.level == .warning && torn.metadata["file"]?.hasSuffix(".wal") == true, "\(torn)")
        #expect(torn.metadata["offset"].flatMap(UInt64.init).map { $0 > 0 } == true, "\(torn)")
        #expect(torn.metadata["bytes"] == "20", "\(torn)")
    }

    @Test func aFailedSyncIsLoggedAsAnErrorOnce() throws {
        let fs = FaultInjectingFileSystem()
        let (logger, events) = Self.capturing()
        var options = testOptions(fs)
        options.logger = logger
        let engine = try Engine.open(at: "/store", options: options)
        try engine.put([1], [1])
        fs.failNext(.sync, matching: ".wal", errno: EIO)
        #expect(throws: StoreError.self) { try engine.put([2], [2]) }
        #expect(throws: StoreError.self) { try engine.put([3], [3]) }
        try? engine.close()
        let errors = events.all.filter { $0.level == .error }
        #expect(errors.count == 1, "\(errors)")
        #expect(errors.first?.message == "engine poisoned: read-only until reopened")
        #expect(errors.first?.metadata["errno"] == "\(EIO)", "\(errors)")
    }

    @Test func theDefaultLoggerDiscardsEverything() {
        let options = EngineOptions()
        #expect(options.logger.handler is SwiftLogNoOpLogHandler)
    }
}

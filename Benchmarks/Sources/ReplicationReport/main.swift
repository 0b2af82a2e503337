import Foundation
import StrataEngine
import ObjectGraph
import Strata
import StrataReplication

// replication-report: continuous backup to S3-compatible object storage measured (issue 20).
//
//   replication-report [--quick] [--results FILE]
//
// Needs an S3 server: `Scripts/s3-server start` prints the environment to export (radosgw on
// 127.0.0.1). Measures, on the engine workload (transactions of four 256-byte puts committed
// at full durability by one writer while a replicator makes a pass every --lag):
// - replication lag: from a commit's acknowledgement to the end of the pass that uploaded it,
//   p50 and p99;
// - bytes uploaded per byte committed (keys and values) and per byte of the WAL;
// - restore time of a store of --rows rows (1M; 100k with --quick) in segments;
// - reads per second from a read replica beside the primary's, the same random keys.

/// A value behind a lock, shared between the writer, the replicator's thread and the report.
final class Locked<Value>: @unchecked Sendable {
    // @unchecked: `value` is touched only under `lock`.
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

struct Settings {
    var quick = false
    var results: String?
    var lag = 1.0
    var transactions = 20_000
    var rows = 1_000_000

    init(_ arguments: [String]) throws {
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            switch argument {
            case "--quick": quick = true
            case "--results": results = iterator.next()
            case "--lag": lag = Double(iterator.next() ?? "") ?? lag
            case "--rows": rows = Int(iterator.next() ?? "") ?? rows
            default: throw ReportError("unknown argument \(argument); usage: replication-report [--quick] [--results FILE] [--lag SECONDS] [--rows N]")
            }
        }
        if quick {
            transactions = 600
            rows = 100_000
            lag = min(lag, 0.2)
        }
    }
}

struct ReportError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func seconds(_ start: ContinuousClock.Instant) -> Double {
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

func percentile(_ values: [Double], _ fraction: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * fraction))]
}

/// For each commit, the seconds from its acknowledgement to the end of the first pass that
/// replicated its sequence.
func lagSeconds(
    _ commits: [(sequence: UInt64, at: ContinuousClock.Instant)], _ passes: [(sequence: UInt64, at: ContinuousClock.Instant, bytes: Int)]
) -> [Double] {
    commits.compactMap { commit in
        guard let pass = passes.first(where: { $0.sequence >= commit.sequence }) else { return nil }
        let elapsed = pass.at - commit.at
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }
}

func temporaryDirectory(_ name: String) -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("strata-replication-\(name)-\(UUID().uuidString)").path
}

func value(_ index: Int, _ size: Int) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: size)
    var state = UInt64(truncatingIfNeeded: index) &* 0x9E37_79B9_7F4A_7C15
    for position in 0..<size {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        bytes[position] = UInt8(truncatingIfNeeded: state >> 56)
    }
    return bytes
}

func run() throws -> [String] {
    let settings = try Settings(Array(CommandLine.arguments.dropFirst()))
    let configuration: S3Configuration
    do { configuration = try S3Configuration.fromEnvironment() } catch {
        throw ReportError("no S3 server: \(error); run Scripts/s3-server start and export what it prints")
    }
    let client = S3Client(configuration)
    let bucket = "strata-report-\(UUID().uuidString.lowercased().prefix(12))"
    try client.createBucket(bucket)
    var lines: [String] = []
    func report(_ line: String) {
        print(line)
        lines.append(line)
    }
    report("replication-report: \(CommandLine.arguments.joined(separator: " "))")
    report("S3 server: \(configuration.endpoint.absoluteString); lag \(settings.lag) s")

    // 1. Lag and upload volume under a steady writer.
    let directory = temporaryDirectory("primary")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let engine = try Engine.open(at: directory)
    let replicator = try Replicator(directory: directory, client: client, location: ReplicaLocation(bucket: bucket, prefix: "lag"))
    let acknowledged = Locked<[(sequence: UInt64, at: ContinuousClock.Instant)]>([])
    let passes = Locked<[(sequence: UInt64, at: ContinuousClock.Instant, bytes: Int)]>([])
    let done = Locked(false)
    let stopped = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        replicator.run(lag: .milliseconds(Int(settings.lag * 1000)), shouldStop: { done.withLock { $0 } }) { outcome in
            if case .success(let pass) = outcome {
                passes.withLock { $0.append((pass.replicatedSequence, .now, pass.bytes)) }
            }
        }
        stopped.signal()
    }
    var committedBytes = 0
    let writeStart = ContinuousClock.now
    for transaction in 0..<settings.transactions {
        var batch = WriteBatch()
        for put in 0..<4 {
            let key = Array("k\(transaction % 5_000)-\(put)".utf8)
            let bytes = value(transaction * 4 + put, 256)
            batch.put(key, bytes)
            committedBytes += key.count + bytes.count
        }
        let sequence = try engine.commit(batch)
        acknowledged.withLock { $0.append((sequence, .now)) }
    }
    let writeSeconds = seconds(writeStart)
    // Wait for the pass that uploads the last commit, then stop.
    let last = acknowledged.withLock { $0.last?.sequence ?? 0 }
    let waitStart = ContinuousClock.now
    while passes.withLock({ ($0.last?.sequence ?? 0) < last }), seconds(waitStart) < 120 { Thread.sleep(forTimeInterval: 0.01) }
    done.withLock { $0 = true }
    stopped.wait()
    let walBytes = (try FileManager.default.contentsOfDirectory(atPath: directory)).filter { $0.hasSuffix(".wal") }
        .reduce(0) { $0 + ((try? FileManager.default.attributesOfItem(atPath: directory + "/" + $1)[.size] as? NSNumber)?.intValue ?? 0) }
    let passList = passes.withLock { $0 }
    let lags = lagSeconds(acknowledged.withLock { $0 }, passList)
    let uploaded = passList.reduce(0) { $0 + $1.bytes }
    report("")
    report("| engine workload, \(settings.transactions) transactions of 4 × 256-byte puts (full durability), \(String(format: "%.0f", Double(settings.transactions) / writeSeconds)) tx/s | value |")
    report("|---|---:|")
    report(String(format: "| replication lag p50 (commit acknowledged → its pass done) | %.3f s |", percentile(lags, 0.5)))
    report(String(format: "| replication lag p99 | %.3f s |", percentile(lags, 0.99)))
    report(String(format: "| bytes uploaded per byte committed (keys and values) | %.2f |", Double(uploaded) / Double(committedBytes)))
    report(String(format: "| bytes uploaded per byte of WAL written | %.2f |", Double(uploaded) / Double(max(1, walBytes))))
    report("| passes | \(passList.count) |")
    try engine.close()

    // 1b. The same under the object-graph workload: saves of 10 notes through a StrataStore.
    StrataStore.register()
    let notes = temporaryDirectory("notes")
    defer { try? FileManager.default.removeItem(atPath: notes) }
    let model = try ManagedObjectModel(entities: [
        EntityDescription(name: "Note", properties: [.attribute("title", .string, optional: false, defaultValue: "", indexed: true), .attribute("body", .string)])
    ])
    let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
    let store = try coordinator.addPersistentStore(type: .strata, at: URL(fileURLWithPath: notes))
    guard let notesEngine = (store as? StrataStore)?.storageEngine else { throw ReportError("the store has no engine") }
    let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
    let graphReplicator = try Replicator(directory: notes, client: client, location: ReplicaLocation(bucket: bucket, prefix: "notes"))
    let saved = Locked<[(sequence: UInt64, at: ContinuousClock.Instant)]>([])
    let graphPasses = Locked<[(sequence: UInt64, at: ContinuousClock.Instant, bytes: Int)]>([])
    let graphDone = Locked(false)
    let graphStopped = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        graphReplicator.run(lag: .milliseconds(Int(settings.lag * 1000)), shouldStop: { graphDone.withLock { $0 } }) { outcome in
            if case .success(let pass) = outcome { graphPasses.withLock { $0.append((pass.replicatedSequence, .now, pass.bytes)) } }
        }
        graphStopped.signal()
    }
    let saves = settings.transactions / 4
    let graphStart = ContinuousClock.now
    for save in 0..<saves {
        for index in 0..<10 {
            let note = try context.insertNewObject(forEntityName: "Note")
            try note.setValue(.string("n\(save)-\(index)"), forKey: "title")
            try note.setValue(.string(String(repeating: "x", count: 200)), forKey: "body")
        }
        try context.save()
        context.reset()
        let sequence = try notesEngine.snapshot().sequence
        saved.withLock { $0.append((sequence, .now)) }
    }
    let graphSeconds = seconds(graphStart)
    let lastSave = saved.withLock { $0.last?.sequence ?? 0 }
    let graphWait = ContinuousClock.now
    while graphPasses.withLock({ ($0.last?.sequence ?? 0) < lastSave }), seconds(graphWait) < 120 { Thread.sleep(forTimeInterval: 0.01) }
    graphDone.withLock { $0 = true }
    graphStopped.wait()
    let graphPassList = graphPasses.withLock { $0 }
    let graphLags = lagSeconds(saved.withLock { $0 }, graphPassList)
    try coordinator.remove(store)
    report("")
    report("| object-graph workload, \(saves) saves of 10 notes through a StrataStore, \(String(format: "%.0f", Double(saves) / graphSeconds)) saves/s | value |")
    report("|---|---:|")
    report(String(format: "| replication lag p50 (save returned → its pass done) | %.3f s |", percentile(graphLags, 0.5)))
    report(String(format: "| replication lag p99 | %.3f s |", percentile(graphLags, 0.99)))
    report("| bytes uploaded | \(ByteCountFormatter.string(fromByteCount: Int64(graphPassList.reduce(0) { $0 + $1.bytes }), countStyle: .binary)) |")

    // 2. Restore time of a store of `rows` rows, and replica reads beside the primary's.
    let large = temporaryDirectory("large")
    defer { try? FileManager.default.removeItem(atPath: large) }
    var options = EngineOptions()
    options.durability = .normal
    let primary = try Engine.open(at: large, options: options)
    var index = 0
    while index < settings.rows {
        var batch = WriteBatch()
        for _ in 0..<min(10_000, settings.rows - index) {
            batch.put(Array(String(format: "row%09d", index).utf8), value(index, 100))
            index += 1
        }
        _ = try primary.commit(batch)
    }
    try primary.flush()
    let location = ReplicaLocation(bucket: bucket, prefix: "large")
    let backupStart = ContinuousClock.now
    let pass = try Replicator(directory: large, client: client, location: location).replicateOnce()
    let backupSeconds = seconds(backupStart)
    let restored = temporaryDirectory("restored")
    defer { try? FileManager.default.removeItem(atPath: restored) }
    let restoreStart = ContinuousClock.now
    let restore = try Restore.run(client: client, location: location, into: restored)
    let restoreSeconds = seconds(restoreStart)
    let replicaDirectory = temporaryDirectory("replica")
    defer { try? FileManager.default.removeItem(atPath: replicaDirectory) }
    let replica = try ReadReplica(client: client, location: location, directory: replicaDirectory)
    try replica.refresh()
    let keys = (0..<100_000).map { Array(String(format: "row%09d", ($0 &* 7919) % settings.rows).utf8) }
    func readsPerSecond(_ snapshot: Snapshot) throws -> Double {
        let start = ContinuousClock.now
        var found = 0
        for key in keys where try snapshot.get(key) != nil { found += 1 }
        guard found == keys.count else { throw ReportError("\(keys.count - found) keys missing") }
        return Double(keys.count) / seconds(start)
    }
    let primaryReads = try readsPerSecond(try primary.snapshot())
    let replicaReads = try readsPerSecond(try replica.snapshot())
    try primary.close()
    report("")
    report("| store of \(settings.rows) rows (100-byte values) in segments | value |")
    report("|---|---:|")
    report(String(format: "| first backup (one pass, %@ uploaded) | %.2f s |", ByteCountFormatter.string(fromByteCount: Int64(pass.bytes), countStyle: .binary), backupSeconds))
    report(String(format: "| restore, checked as fsck checks (%@ downloaded) | %.2f s |", ByteCountFormatter.string(fromByteCount: Int64(restore.bytes), countStyle: .binary), restoreSeconds))
    report(String(format: "| reads per second, primary (100k random gets) | %.0f |", primaryReads))
    report(String(format: "| reads per second, read replica (the same gets) | %.0f (%.2f× the primary's) |", replicaReads, replicaReads / primaryReads))
    return lines
}

do {
    let lines = try run()
    if let index = CommandLine.arguments.firstIndex(of: "--results"), index + 1 < CommandLine.arguments.count {
        try (lines.joined(separator: "\n") + "\n").write(toFile: CommandLine.arguments[index + 1], atomically: true, encoding: .utf8)
    }
} catch {
    FileHandle.standardError.write(Data("replication-report: \(error)\n".utf8))
    exit(2)
}

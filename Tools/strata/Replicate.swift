import ArgumentParser
import Foundation
import StrataReplication
import StrataSync

/// `strata replicate <store> s3://bucket/prefix`.
struct Replicate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Back a store up to S3-compatible object storage continuously, until interrupted.",
        discussion: """
            Uploads every sealed segment once, the write-ahead log's durable records in chunks \
            as it grows, and every manifest version, one pass every --lag seconds, while the \
            application writes the store. Started again after a crash or a network failure, it \
            goes on from what the bucket holds. Credentials and the endpoint come from \
            AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION and STRATA_S3_ENDPOINT (or \
            AWS_ENDPOINT_URL). `strata restore` brings the store back as of any point kept.

            Examples:
              strata replicate /var/lib/app/store s3://backups/app
              strata replicate --once /var/lib/app/store s3://backups/app
            """)

    @Argument(help: "The store directory.")
    var store: String

    @Argument(help: "Where it goes: s3://bucket/prefix.")
    var location: String

    @Option(help: "Seconds between passes: the most a commit waits before its upload starts.")
    var lag: Double = 1

    @Flag(help: "Run one pass and exit.")
    var once = false

    @Option(help: "Keep this many days of history: every point since then stays restorable, older objects are deleted (after the first pass and every ten minutes). Without it nothing is deleted.")
    var retainDays: Double?

    @OptionGroup var output: OutputOptions

    func run() throws {
        if let retainDays, retainDays <= 0 || !retainDays.isFinite {
            throw ToolFailure(message: "strata: replicate: --retain-days must be a positive number of days.")
        }
        let retention = retainDays.map { Duration.milliseconds(Int64($0 * 86_400_000)) }
        let replicator = try replicationExplained {
            let client = S3Client(try S3Configuration.fromEnvironment())
            let target = try ReplicaLocation(url: location)
            try client.createBucket(target.bucket)
            return try Replicator(directory: store, client: client, location: target)
        }
        if !output.quiet { Output.line("replicate \(store) to \(location), generation \(replicator.generation)") }
        if once {
            let pass = try replicationExplained { try replicator.replicateOnce() }
            if let retention { _ = try replicationExplained { try replicator.prune(retaining: retention) } }
            if output.json { return try Output.json(WithVerdict(verdict: "ok", result: pass)) }
            Output.line("  \(pass.segments) segments, \(pass.walChunks) WAL chunks, \(pass.manifests) manifests, \(Output.bytes(UInt64(pass.bytes))); replicated up to sequence \(pass.replicatedSequence)")
            return
        }
        let stop = Locked(false)
        let signals = [SIGINT, SIGTERM].map { number -> DispatchSourceSignal in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number)
            source.setEventHandler { stop.withLock { $0 = true } }
            source.resume()
            return source
        }
        defer { signals.forEach { $0.cancel() } }
        let quiet = output.quiet
        replicator.run(lag: .milliseconds(Int(lag * 1000)), retention: retention, shouldStop: { stop.withLock { $0 } }) { outcome in
            switch outcome {
            case .success(let pass) where pass.bytes > 0 && !quiet:
                Output.line("  uploaded \(pass.segments) segments, \(pass.walChunks) WAL chunks, \(pass.manifests) manifests; up to sequence \(pass.replicatedSequence)")
            case .failure(let error):
                Output.error("strata: replicate: \(error.message) (retrying at the next pass)")
            default: break
            }
        }
    }
}

/// `strata restore s3://bucket/prefix <directory>`.
struct RestoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Build a store from its replica in object storage, as of any point kept.",
        discussion: """
            Writes a new store into the directory (which must not exist or be empty): the \
            segments of the replica's newest manifest at or before the point, and the \
            write-ahead log's records after it up to the point, all from one generation of the \
            replica (the newest, or --generation), then checks it as fsck does. Every \
            transaction up to the point is in it and none after. A point whose log was flushed \
            before it was uploaded is refused, naming the nearest one kept.

            Examples:
              strata restore s3://backups/app /var/lib/app/restored
              strata restore s3://backups/app /tmp/app-then --at 120345
              strata restore s3://backups/app /tmp/app-then --at-time 2026-11-29T01:30:00Z
            """)

    @Argument(help: "The replica: s3://bucket/prefix.")
    var location: String

    @Argument(help: "The directory to build the store in.")
    var directory: String

    @Option(name: .customLong("at"), help: "The sequence number to restore to (every transaction up to it).")
    var sequence: UInt64?

    @Option(name: .customLong("at-time"), help: "The time to restore to (ISO 8601, such as 2026-11-29T01:30:00Z).")
    var time: String?

    @Option(help: "The generation to restore from (the newest by default).")
    var generation: String?

    @OptionGroup var output: OutputOptions

    func run() throws {
        if sequence != nil && time != nil { throw ToolFailure(message: "strata: restore: give --at or --at-time, not both.") }
        var point = RestorePoint.latest
        if let sequence { point = .sequence(sequence) }
        if let time {
            guard let date = ISO8601DateFormatter().date(from: time) else {
                throw ToolFailure(message: "strata: restore: --at-time \(time) is not an ISO 8601 time such as 2026-11-29T01:30:00Z.")
            }
            point = .time(date)
        }
        let report = try replicationExplained {
            try Restore.run(
                client: S3Client(try S3Configuration.fromEnvironment()), location: try ReplicaLocation(url: location), into: directory,
                at: point, generation: generation)
        }
        if output.json {
            return try Output.json(WithVerdict(verdict: "ok", result: report))
        }
        Output.line("restored \(directory) from \(location) generation \(report.generation) up to sequence \(report.sequence)")
        Output.line("  \(report.segments) segments, \(report.wals) WAL files, \(Output.bytes(UInt64(report.bytes))) downloaded; checked clean")
    }
}

/// Runs `body`, turning replication and S3 errors into an explained ``ToolFailure``.
func replicationExplained<T>(_ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as ReplicationError {
        throw ToolFailure(Explanation(code: "replication", message: "strata: \(error.message)"))
    } catch let error as S3Error {
        throw ToolFailure(Explanation(code: "s3", message: "strata: \(error.description)"))
    }
}

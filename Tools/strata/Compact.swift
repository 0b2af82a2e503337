import ArgumentParser
import Foundation
import Strata

/// `strata compact <store>`.
struct Compact: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Compact a store offline: flush its log into segments and rewrite segments holding dead data.",
        discussion: """
            Takes the store's lock (a store open in another process is refused: compact it \
            from that process, where the background compactor runs, or close it first), writes \
            the WAL into segments, rewrites every segment whose dead bytes pass the thresholds, \
            drops tombstones nothing needs, and reports bytes before and after. Rows written \
            under an older model version are rewritten in the newest layout; a version no row \
            needs any more leaves the model record (SPEC.md [MIG-2]).

            Examples:
              strata compact /var/lib/app/store                       the engine's thresholds (20 % dead)
              strata compact --full /var/lib/app/store                rewrite every segment
              strata compact --min-dead-ratio 0.05 /var/lib/app/store
            """)

    @Argument(help: "The store directory.")
    var store: String

    @Flag(help: "Rewrite every segment, whatever its dead bytes.")
    var full = false

    @Option(name: .customLong("min-dead-ratio"), help: "Victim threshold: a segment whose dead share is at least this (0…1; default 0.2).")
    var minDeadRatio: Double?

    @Option(name: .customLong("max-dead-bytes"), help: "Victim threshold: a segment with at least this many dead bytes (default 64 MiB).")
    var maxDeadBytes: UInt64?

    @Option(name: .customLong("small-segment-bytes"), help: "Segments smaller than this are merged (default 4 MiB).")
    var smallSegmentBytes: UInt64?

    @OptionGroup var output: OutputOptions

    func validate() throws {
        if let minDeadRatio, !(0...1).contains(minDeadRatio) { throw ValidationError("--min-dead-ratio must be between 0 and 1") }
        if full && (minDeadRatio != nil || maxDeadBytes != nil || smallSegmentBytes != nil) {
            throw ValidationError("--full rewrites everything; it takes no thresholds")
        }
    }

    func run() throws {
        var policy = full ? CompactionOptions.full : CompactionOptions()
        if let minDeadRatio { policy.minDeadRatio = minDeadRatio }
        if let maxDeadBytes { policy.maxDeadBytes = maxDeadBytes }
        if let smallSegmentBytes { policy.smallSegmentBytes = smallSegmentBytes }
        let progress = Progress("compact", quiet: output.quiet || output.json)
        let chosen = policy
        let report = try explained(path: store) {
            try OfflineCompaction.run(at: store, policy: chosen, logger: output.logger) { step in
                switch step.phase {
                case .opening: progress.begin("opening the store (replaying its log)")
                case .flushing: progress.begin("flushing the log into segments")
                case .compacting:
                    progress.begin("compacting")
                    progress.update(step.bytesDone, of: step.bytesTotal)
                }
            }
        }
        progress.finish()
        if output.json { return try Output.json(WithVerdict(verdict: "compacted", result: report)) }
        Output.line("compact \(report.path)")
        Output.line("  bytes:    \(Output.bytes(report.bytesBefore)) → \(Output.bytes(report.bytesAfter)) (reclaimed \(Output.bytes(report.bytesReclaimed)))")
        Output.line("  live:     \(Output.bytes(report.liveBytesBefore)) → \(Output.bytes(report.liveBytesAfter)), \(report.keyCount) keys")
        Output.line("  segments: \(report.segmentsBefore) → \(report.segmentsAfter) (\(report.segmentsRemoved) removed, \(report.segmentsWritten) written); WAL files \(report.walsBefore) → \(report.walsAfter)")
        Output.line("  tombstones dropped: \(report.tombstonesDropped)")
        if report.modelVersionsDropped > 0 {
            Output.line("  model versions dropped: \(report.modelVersionsDropped) (their rows rewritten in the newest layout)")
        }
        Output.line(String(format: "  time:     %.3f s", report.seconds))
    }
}

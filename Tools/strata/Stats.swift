import ArgumentParser
import Foundation
import Strata

/// `strata stats <store>`.
struct Stats: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the numbers an operator tracks: space amplification, keys, index memory, cache counters.",
        discussion: """
            Opens the store read-only (recovery and index build included: the time is shown) \
            and prints disk bytes, live and dead entry bytes, space amplification (disk bytes per \
            byte of live data as stored: `strata compact` brings it toward 1), WAL and segment counts, the in-memory index's \
            size, and the row cache counters of the engine this command opened (another \
            process's cache is not visible from outside it).

            Examples:
              strata stats /var/lib/app/store
              strata stats --json /var/lib/app/store | jq .spaceAmplification
            """)

    @Argument(help: "The store directory, or a binary store file.")
    var store: String

    @OptionGroup var output: OutputOptions

    func run() throws {
        if BinaryStoreInspector.isBinaryStore(at: store) {
            let report = try explained(path: store) { try BinaryStoreInspector.inspect(at: store) }
            if output.json { return try Output.json(WithVerdict(verdict: "ok", result: report)) }
            Output.line("stats \(report.path) (binary store)")
            Output.line("  disk:                \(Output.bytes(UInt64(report.fileBytes))), generation \(report.generation)")
            Output.line("  objects:             \(report.objects)")
            Output.line(String(format: "  compression:         %.2f× (objects)", report.compressionRatio))
            Output.line("  rows:                " + report.entities.filter { $0.objects > 0 }.map { "\($0.name) \($0.objects)" }.joined(separator: ", "))
            return
        }
        // Opening replays the log and builds the index: it is what can take a while here.
        let progress = Progress("stats", quiet: output.quiet || output.json)
        progress.begin("opening the store (replaying its log)")
        let report = try explained(path: store) { try StoreInspector.stats(at: store, logger: output.logger) }
        progress.finish()
        if output.json { return try Output.json(WithVerdict(verdict: "ok", result: report)) }
        Output.line("stats \(report.path)")
        Output.line("  keys:                \(report.keyCount)")
        Output.line("  disk:                \(Output.bytes(report.diskBytes)) (\(report.walFiles) WAL files \(Output.bytes(report.walBytes)), \(report.segmentFiles) segments \(Output.bytes(report.segmentBytes)))")
        Output.line("  entries:             live \(Output.bytes(report.liveBytes)), dead \(Output.bytes(report.deadBytes)) (before compression)")
        Output.line(String(format: "  space amplification: %.2f×", report.spaceAmplification))
        Output.line(String(format: "  index memory:        %@ (%.1f bytes per key, keys included)", Output.bytes(UInt64(report.indexMemoryBytes)), report.indexBytesPerKey))
        Output.line("  WAL memory:          \(Output.bytes(UInt64(report.walMemoryBytes))) (WAL values are read from memory)")
        Output.line("  last sequence:       \(report.lastSequence)")
        Output.line(String(format: "  open time:           %.3f s", report.openSeconds))
        Output.line("  row cache (this process): \(report.rowCacheDescription)")
        if !report.rowCounts.isEmpty {
            Output.line("  rows:                " + report.rowCounts.sorted(by: { $0.key < $1.key }).map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        }
    }
}

import Logging
import Dispatch
import Foundation
import StrataEngine

/// What `OfflineCompaction/run(at:policy:fileSystem:progress:)` did.
public struct CompactReport: Sendable, Equatable, Codable {
    /// The store.
    public var path: String
    /// Bytes of every live file before and after.
    public var bytesBefore: UInt64
    /// See ``bytesBefore``.
    public var bytesAfter: UInt64
    /// Bytes of live entries before and after (equal unless tombstones were dropped).
    public var liveBytesBefore: UInt64
    /// See ``liveBytesBefore``.
    public var liveBytesAfter: UInt64
    /// Segments before and after.
    public var segmentsBefore: Int
    /// See ``segmentsBefore``.
    public var segmentsAfter: Int
    /// Segments the compaction removed and wrote.
    public var segmentsRemoved: Int
    /// See ``segmentsRemoved``.
    public var segmentsWritten: Int
    /// WAL files before and after (the log is flushed into segments first).
    public var walsBefore: Int
    /// See ``walsBefore``.
    public var walsAfter: Int
    /// Tombstones dropped ([CMP-4]).
    public var tombstonesDropped: Int
    /// Keys with a value (unchanged by compaction).
    public var keyCount: Int
    /// Wall-clock seconds of the whole run (open, flush, compaction, close).
    public var seconds: Double
    /// Older model versions the model record no longer keeps: every row of their layouts was
    /// rewritten in the newest one ([MIG-2], [CMP-7]).
    public var modelVersionsDropped = 0

    /// Bytes reclaimed.
    public var bytesReclaimed: UInt64 { bytesBefore - min(bytesBefore, bytesAfter) }
}

/// Progress of an offline compaction: its phase and, while compacting, bytes of victims read
/// so far of the bytes that may be read.
public struct CompactProgress: Sendable {
    /// What an offline compaction is doing.
    public enum Phase: String, Sendable {
        /// Opening the store: replaying its log and building its index (no byte counts).
        case opening
        /// Writing the log out into segments (no byte counts).
        case flushing
        /// Rewriting segments; the byte counts say how far.
        case compacting
    }

    /// The phase.
    public var phase: Phase = .compacting
    /// Bytes read so far.
    public var bytesDone: UInt64
    /// Bytes of the segments that may be read (an upper bound).
    public var bytesTotal: UInt64
}

/// `strata compact`: opens a store (taking its lock, so never one open elsewhere), flushes its
/// WAL into segments, compacts until no segment is a victim under the policy, and closes it.
///
/// For example:
///
/// ```swift
/// let report = try OfflineCompaction.run(at: "/var/lib/app/store", policy: .full)
/// print("reclaimed \(report.bytesReclaimed) bytes")
/// ```
public enum OfflineCompaction {
    /// Compacts the store at `path` to completion under `policy` (the engine's default
    /// thresholds when nil; `CompactionOptions/full` rewrites every segment).
    ///
    /// `logger` (none by default) hears what the engine tells: opening, the flush, each
    /// compaction ([EngineOptions.logger]).
    ///
    /// - Throws: `StoreError` for a path that is not a store, a store locked by another
    ///   process, damage (run `strata fsck`), or I/O errors.
    public static func run(
        at path: String, policy: CompactionOptions? = nil, fileSystem: any FileSystem = PosixFileSystem(),
        logger: Logger? = nil, progress: (@Sendable (CompactProgress) -> Void)? = nil
    ) throws(StoreError) -> CompactReport {
        let start = ContinuousClock.now
        guard case .directory? = try fileSystem.kind(of: path) else {
            throw StoreError(.notFound, "no store directory at this path", path: path)
        }
        var options = EngineOptions()
        options.compaction = policy ?? CompactionOptions()
        options.compaction.automatic = false
        options.backgroundFlush = false
        options.fileSystem = fileSystem
        if let logger { options.logger = logger }
        progress?(CompactProgress(phase: .opening, bytesDone: 0, bytesTotal: 0))
        let engine = try Engine.open(at: path, options: options)
        // [CMP-7] Rows of older layouts the model record keeps are written in the newest one.
        let record = (try? engine.get(KeyLayout.modelKey)).flatMap { $0 }.flatMap { try? ModelRecord.decodeRecord($0) }
        let layout = record.flatMap { try? StoreLayout(record: $0) }
        if let layout { engine.setCompactionRewriter(StrataStore.compactionRewriter(layout)) }
        do throws(StoreError) {
            let before = try engine.stats()
            progress?(CompactProgress(phase: .flushing, bytesDone: 0, bytesTotal: 0))
            try engine.flush()
            let flushed = try engine.stats()
            // Progress: poll the compactor's counters while it runs on its queue.
            let total = flushed.segments.reduce(0) { $0 + $1.sizeBytes }
            progress?(CompactProgress(phase: .compacting, bytesDone: 0, bytesTotal: total))
            let ticker = progress.map { report in
                let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "strata.compact.progress"))
                timer.schedule(deadline: .now() + .milliseconds(200), repeating: .milliseconds(200))
                timer.setEventHandler { report(CompactProgress(bytesDone: engine.compactionStats().bytesRead, bytesTotal: total)) }
                timer.resume()
                return timer
            }
            defer { ticker?.cancel() }
            try engine.compact(policy)
            let dropped = try record.map { (record) throws(StoreError) -> Int in try dropUnneededVersions(record, in: engine) } ?? 0
            let after = try engine.stats()
            // Done: the whole budget is accounted for, whether or not every segment was a victim.
            progress?(CompactProgress(bytesDone: total, bytesTotal: total))
            try engine.close()
            let elapsed = ContinuousClock.now - start
            return CompactReport(
                path: path, bytesBefore: before.diskBytes, bytesAfter: after.diskBytes, liveBytesBefore: before.liveBytes,
                liveBytesAfter: after.liveBytes, segmentsBefore: before.segments.count, segmentsAfter: after.segments.count,
                segmentsRemoved: after.compaction.segmentsRemoved, segmentsWritten: after.compaction.segmentsWritten,
                walsBefore: before.wals.count, walsAfter: after.wals.count, tombstonesDropped: after.compaction.tombstonesDropped,
                keyCount: after.keyCount,
                seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
                modelVersionsDropped: dropped)
        } catch {
            try? engine.close()
            throw error
        }
    }

    /// [MIG-2] Drops from the model record the older versions whose layouts no row has any more
    /// (a survey of the rows' headers); the number dropped.
    private static func dropUnneededVersions(_ record: ModelRecord, in engine: Engine) throws(StoreError) -> Int {
        guard record.versions.count > 1 else { return 0 }
        let present: Set<UInt64>
        do {
            present = Set(try StoreSurvey.survey(try engine.snapshot()).rows.keys.map { StoreLayout.legacyKey(number: $0.number, layoutID: $0.layoutID) })
        } catch let error as StoreError {
            throw error
        } catch {
            return 0  // rows that do not read: fsck's to report; the record stays as it is
        }
        let current = record.current.layoutKeys
        var kept = [record.current]
        for version in record.versions.dropFirst() where !version.layoutKeys.subtracting(current).isDisjoint(with: present) {
            kept.append(version)
        }
        guard kept.count < record.versions.count else { return 0 }
        var batch = WriteBatch()
        batch.put(KeyLayout.modelKey, ModelRecord(versions: kept, nextEntity: record.nextEntity, keySpaces: record.keySpaces, retired: record.retired, keyNames: record.keyNames).encode())
        _ = try engine.commit(batch)
        return record.versions.count - kept.count
    }
}

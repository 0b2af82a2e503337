import Dispatch
import Glibc

// [REC-5] Open's index build: the segments' hints merged into the in-memory index, on one
// thread or two (SPEC.md [SEG-4], [REC-5]).

extension Engine {
    /// Bytes of entries, tombstones and superseded entries counted per cursor of a merge.
    struct HintBytes {
        var entries: [UInt64]
        var tombstones: [UInt64]
        var dead: [UInt64]

        init(cursors: Int) {
            entries = Array(repeating: 0, count: cursors)
            tombstones = entries
            dead = entries
        }

        /// Adds each cursor's bytes to its file's usage (files with no hint get no entry).
        func add(to usage: inout [UInt32: FileUsage], fileNumbers: [UInt32]) {
            for (list, number) in fileNumbers.enumerated() where entries[list] > 0 {
                usage[number, default: FileUsage()].entryBytes += entries[list]
                usage[number, default: FileUsage()].tombstoneBytes += tombstones[list]
                usage[number, default: FileUsage()].deadBytes += dead[list]
            }
        }
    }

    /// [REC-5] The index of the live keys hint cursors describe (repair's salvaged hints), as
    /// ``merge(_:into:bytes:)`` builds it; counts each file's bytes into `usage`.
    static func buildIndex<Cursor: HintCursor>(from cursors: inout [Cursor], usage: inout [UInt32: FileUsage]) throws(StoreError) -> KeyIndex {
        var builder = KeyIndex.Builder()
        var bytes = HintBytes(cursors: cursors.count)
        try merge(&cursors, into: &builder, bytes: &bytes)
        bytes.add(to: &usage, fileNumbers: cursors.map(\.fileNumber))
        return builder.finish()
    }

    /// [REC-5] The index of the live keys the segments' hints describe, read through
    /// ``SegmentHintCursor``s; counts each file's bytes into `usage` and each segment's smallest
    /// sequence into `minimumSequences`.
    ///
    /// With enough hints and a second core, two threads build it: the key space is cut at the
    /// first key of the middle hint block of the largest segment, each thread merges the hints
    /// on its side of the cut (each segment's cursors start and stop where a search of its hint
    /// blocks puts the cut) into leaves of its own, and the leaves are joined. The checks are the
    /// one-thread merge's: every pair of neighbouring hints is compared by one of the halves,
    /// and the halves' counts together must be the footer's.
    ///
    /// - Parameter threshold: the hints (by the footers' counts) from which two threads build
    ///   it (tests lower it).
    static func buildIndex(
        from readers: [SegmentReader], usage: inout [UInt32: FileUsage], minimumSequences: inout [UInt32: UInt64],
        parallelFrom threshold: UInt64 = parallelBuildThreshold
    ) throws(StoreError) -> KeyIndex {
        let hints = readers.reduce(UInt64(0)) { $0 &+ $1.entryCount }
        if hints >= threshold, sysconf(Int32(_SC_NPROCESSORS_ONLN)) >= 2,
            let split = try splitPoint(of: readers)
        {
            return try buildIndexInTwoHalves(readers, split: split, usage: &usage, minimumSequences: &minimumSequences)
        }
        var cursors: [SegmentHintCursor] = []
        for reader in readers { cursors.append(try SegmentHintCursor(reader)) }
        let index = try buildIndex(from: &cursors, usage: &usage)
        for cursor in cursors { minimumSequences[cursor.fileNumber] = cursor.minimumSequence ?? 0 }
        return index
    }

    /// Hints (by the footers' counts) from which open builds the index on two threads.
    static let parallelBuildThreshold: UInt64 = 200_000

    /// Where a two-thread build cuts the key space: the key, and for each segment the hint
    /// block the key falls in (the last whose first hint, or the first hint after it, is at most
    /// the key). `nil` when the largest segment has fewer than two hint blocks.
    static func splitPoint(of readers: [SegmentReader]) throws(StoreError) -> (key: [UInt8], blocks: [Int])? {
        guard let largest = readers.max(by: { $0.entryCount < $1.entryCount }), largest.hintBlocks.count >= 2 else { return nil }
        /// The first key of hint block `block` or of a later one; `nil` past the last hint.
        func firstKey(_ reader: SegmentReader, atOrAfter block: Int) throws(StoreError) -> [UInt8]? {
            let cursor = try SegmentHintCursor(reader, startingAt: block)
            return cursor.isAtEnd ? nil : cursor.withKey { Array($0) }
        }
        guard let key = try firstKey(largest, atOrAfter: largest.hintBlocks.count / 2) else { return nil }
        var blocks: [Int] = []
        for reader in readers {
            // The last block whose first key (at or after it) is at most the key; 0 if none is.
            var low = 0, high = reader.hintBlocks.count - 1
            while low < high {
                let middle = (low + high + 1) / 2
                if let first = try firstKey(reader, atOrAfter: middle), compareKeys(first, key) <= 0 {
                    low = middle
                } else {
                    high = middle - 1
                }
            }
            blocks.append(max(0, low))
        }
        return (key, blocks)
    }

    /// One half of a two-thread build: its leaves, its cursors (for their counts) and bytes.
    private struct BuiltHalf {
        var builder: KeyIndex.Builder
        var cursors: [SegmentHintCursor]
        var bytes: HintBytes
    }

    /// What the two threads of a build hand back, each in its own field.
    ///
    /// Thread safety: `low` is written only by the first iteration of the build's
    /// `concurrentPerform`, `high` only by the second, and both are read after it returns.
    private final class BuiltHalves: @unchecked Sendable {
        var low: Result<BuiltHalf, StoreError>?
        var high: Result<BuiltHalf, StoreError>?
    }

    /// ``buildIndex(from:usage:minimumSequences:)`` on two threads, cut at `split`.
    private static func buildIndexInTwoHalves(
        _ readers: [SegmentReader], split: (key: [UInt8], blocks: [Int]), usage: inout [UInt32: FileUsage],
        minimumSequences: inout [UInt32: UInt64]
    ) throws(StoreError) -> KeyIndex {
        let halves = BuiltHalves()
        DispatchQueue.concurrentPerform(iterations: 2) { half in
            let result = Result { () throws(StoreError) -> BuiltHalf in
                var cursors: [SegmentHintCursor] = []
                for (reader, block) in zip(readers, split.blocks) {
                    cursors.append(
                        half == 0
                            ? try SegmentHintCursor(reader, below: split.key, splitBlock: block)
                            : try SegmentHintCursor(reader, from: split.key, startingAt: block))
                }
                var builder = KeyIndex.Builder()
                var bytes = HintBytes(cursors: cursors.count)
                try merge(&cursors, into: &builder, bytes: &bytes)
                return BuiltHalf(builder: builder, cursors: cursors, bytes: bytes)
            }
            if half == 0 { halves.low = result } else { halves.high = result }
        }
        guard let lowResult = halves.low, let highResult = halves.high else {
            throw StoreError(.corruption, "the index build lost a half")  // concurrentPerform runs both
        }
        var low = try lowResult.get()
        let high = try highResult.get()
        for (index, reader) in readers.enumerated() {
            let read = low.cursors[index].readBeforeSplitBlock + high.cursors[index].read
            guard read == reader.entryCount else {
                throw StoreError.corruption(
                    "footer counts \(reader.entryCount) entries but hints hold \(read)", path: reader.path,
                    offset: reader.fileSize - UInt64(Format.segmentFooterSize))
            }
            minimumSequences[reader.fileNumber] =
                [low.cursors[index].minimumSequence, high.cursors[index].minimumSequence].compactMap { $0 }.min() ?? 0
        }
        let numbers = readers.map(\.fileNumber)
        low.bytes.add(to: &usage, fileNumbers: numbers)
        high.bytes.add(to: &usage, fileNumbers: numbers)
        low.builder.append(high.builder)
        return low.builder.finish()
    }

    /// [REC-5] Merges hint cursors into `builder`: per key the highest sequence wins, a winning
    /// delete leaves no key; counts each cursor's entry, tombstone and dead bytes. A k-way
    /// merge that holds one hint block per segment and makes no array per key.
    static func merge<Cursor: HintCursor>(
        _ cursors: inout [Cursor], into builder: inout KeyIndex.Builder, bytes: inout HintBytes
    ) throws(StoreError) {
        // Worked on through a buffer pointer: an array element was copied at each access.
        try cursors.withUnsafeMutableBufferPointer { (cursors) throws(StoreError) in
            var candidates: [Int] = []
            candidates.reserveCapacity(cursors.count)
            while true {
                // The cursors whose current hint has the smallest key, and one whose key is the
                // smallest above it (the bound; -1 when no other cursor has a hint).
                candidates.removeAll(keepingCapacity: true)
                var bound = -1
                for list in cursors.indices where !cursors[list].isAtEnd {
                    guard let first = candidates.first else {
                        candidates.append(list)
                        continue
                    }
                    let order = cursors[list].compareKey(with: cursors[first])
                    if order < 0 {
                        // Every key seen so far is at least the old smallest, which is below the
                        // old bound: the old smallest is the new bound.
                        bound = first
                        candidates.removeAll(keepingCapacity: true)
                        candidates.append(list)
                    } else if order == 0 {
                        candidates.append(list)
                    } else if bound < 0 || cursors[list].compareKey(with: cursors[bound]) < 0 {
                        bound = list
                    }
                }
                guard var winner = candidates.first else { break }
                if candidates.count == 1 {
                    // One cursor holds the smallest key: its hints up to the bound's key are the
                    // index's, one comparison each (segments written by successive saves hold
                    // runs of keys no other segment has, and this took a three-segment open's
                    // merge from k-1 comparisons and a candidate list per key to one). With one
                    // cursor (a compacted store) there is no bound: one run takes every hint.
                    var entries: UInt64 = 0, tombstones: UInt64 = 0
                    repeat {
                        let length = UInt64(cursors[winner].location.length)
                        entries += length
                        if cursors[winner].isDelete {
                            tombstones += length
                        } else {
                            let entry = IndexEntry(sequence: cursors[winner].sequence, location: cursors[winner].location)
                            cursors[winner].withKey { builder.appendAscending($0, entry) }
                        }
                        try cursors[winner].advance()
                    } while !cursors[winner].isAtEnd && (bound < 0 || cursors[winner].compareKey(with: cursors[bound]) < 0)
                    bytes.entries[winner] += entries
                    bytes.tombstones[winner] += tombstones
                    continue
                }
                for list in candidates.dropFirst() where cursors[list].sequence > cursors[winner].sequence { winner = list }
                for list in candidates {
                    let length = UInt64(cursors[list].location.length)
                    bytes.entries[list] += length
                    if cursors[list].isDelete {
                        bytes.tombstones[list] += length
                    } else if list != winner {
                        bytes.dead[list] += length
                    }
                }
                if !cursors[winner].isDelete {
                    // Each cursor ascends strictly and the smallest key is taken each time, so the
                    // keys reach the builder in ascending order.
                    let entry = IndexEntry(sequence: cursors[winner].sequence, location: cursors[winner].location)
                    cursors[winner].withKey { builder.appendAscending($0, entry) }
                }
                for list in candidates { try cursors[list].advance() }
            }
        }
    }
}

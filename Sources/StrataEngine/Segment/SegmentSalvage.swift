/// Repair's salvage of a segment whose header, footer or block table do not check out
/// (SPEC.md [SEG-8], [REC-7]): every block whose own framing and CRC hold is kept, whatever
/// happened to the structures around it.
extension SegmentReader {
    /// What ``salvage(fileSystem:path:fileNumber:recordedSize:)`` made of a damaged segment.
    struct Salvaged {
        /// A reader of what checks out. When the block table checked out it lists the table's
        /// blocks and ``SegmentReader/rebuiltHints`` is `nil` (the caller checks the segment's
        /// hints against its data blocks as for any segment); otherwise it lists the data
        /// blocks found by scanning, in file order, and carries the hints rebuilt from them.
        var reader: SegmentReader
        /// The byte ranges that are not used, in file order, with what they held where known.
        var dropped: [DroppedRange]
        /// Entries the segment's own hint blocks (found by scanning, their CRCs holding)
        /// describe but no salvaged data block holds, in hint (key) order.
        var lost: [LostEntry]
    }

    /// Salvages the segment at `path`: the header is checked on its own ([SEG-2]); when the
    /// footer and block table check out ([SEG-5], [SEG-6]) their blocks are used; otherwise
    /// the blocks are found by scanning the file ([SEG-8]). Never throws for damage, only for
    /// I/O errors and a header or footer of a newer format whose checksum holds.
    ///
    /// - Parameter recordedSize: the size the manifest records; bytes missing beyond the
    ///   file's end are reported as dropped.
    static func salvage(
        fileSystem: any FileSystem, path: String, fileNumber: UInt32, recordedSize: UInt64?
    ) throws(StoreError) -> Salvaged {
        let handle = try fileSystem.open(path, mode: .readOnly)
        let size: UInt64, bytes: [UInt8]
        do throws(StoreError) {
            size = try handle.size()
            bytes = try handle.read(exactly: Int(size), at: 0)
        } catch {
            handle.close()
            throw error
        }
        let analysis: Analysis
        do throws(StoreError) {
            analysis = try bytes.withBytes { (raw) throws(StoreError) -> Analysis in
                try analyse(raw, path: path, fileNumber: fileNumber, recordedSize: recordedSize)
            }
        } catch {
            handle.close()
            throw error
        }
        let reader = SegmentReader(
            path: path, fileNumber: fileNumber, fileSize: size, handle: handle, dataBlocks: analysis.dataBlocks,
            hintBlocks: analysis.hintBlocks, entryCount: analysis.entryCount, maxSequence: analysis.maxSequence,
            rebuiltHints: analysis.rebuiltHints)
        return Salvaged(reader: reader, dropped: analysis.dropped.sorted { $0.offset < $1.offset }, lost: analysis.lost)
    }

    /// The outcome of ``analyse(_:path:fileNumber:recordedSize:)``.
    struct Analysis {
        var dataBlocks: [Block] = []
        var hintBlocks: [Block] = []
        var entryCount: UInt64 = 0
        var maxSequence: UInt64 = 0
        var rebuiltHints: [Hint]? = nil
        var dropped: [DroppedRange] = []
        var lost: [LostEntry] = []
    }

    /// How many bytes the scan may checksum for candidate blocks that turn out not to be
    /// blocks, for a file of `size` bytes: a bound that keeps the scan linear in the file's
    /// size whatever the file holds ([SEG-8]).
    static func scanBudget(fileSize size: Int) -> Int { 4 * size + 65_536 }

    /// Salvages the segment bytes `raw` (the whole file).
    static func analyse(
        _ raw: UnsafeRawBufferPointer, path: String, fileNumber: UInt32, recordedSize: UInt64?
    ) throws(StoreError) -> Analysis {
        let size = raw.count
        var result = Analysis()
        func drop(_ range: Range<Int>, _ reason: String, heldEntries: Bool, sequences: ClosedRange<UInt64>? = nil) {
            guard !range.isEmpty else { return }
            result.dropped.append(
                DroppedRange(
                    path: path, offset: UInt64(range.lowerBound), length: UInt64(range.count), reason: reason,
                    sequences: sequences, heldEntries: heldEntries))
        }
        // [SEG-2] The header holds nothing but the magic and the file number: on its own.
        let headerEnd = min(size, Format.segmentHeaderSize)
        do throws(StoreError) {
            try checkHeader(UnsafeRawBufferPointer(rebasing: raw[0..<headerEnd]), path: path, fileNumber: fileNumber)
        } catch where error.code == .corruption {
            drop(0..<headerEnd, "segment header: \(error.message)", heldEntries: false)
        }
        // [SEG-6] [SEG-5] The footer, then the block table it locates.
        var footer: Footer? = nil
        var footerProblem = "the segment is \(size) bytes, too short for a footer"
        var limit = size  // where blocks end: the table when the footer says where it is
        if size >= Format.segmentHeaderSize + Format.segmentFooterSize {
            let footerOffset = size - Format.segmentFooterSize
            do throws(StoreError) {
                let parsed = try parseFooter(
                    UnsafeRawBufferPointer(rebasing: raw[footerOffset...]), path: path, footerOffset: UInt64(footerOffset))
                let tableLength = Int(try parsed.checkTablePosition(footerOffset: UInt64(footerOffset), path: path))
                footer = parsed
                limit = Int(parsed.table)
                do throws(StoreError) {
                    let blocks = try parseTable(
                        UnsafeRawBufferPointer(rebasing: raw[limit..<limit + tableLength]), footer: parsed, path: path)
                    // Only the header was damaged: the table's blocks, whose hints the caller checks.
                    result.dataBlocks = Array(blocks[0..<parsed.data])
                    result.hintBlocks = Array(blocks[parsed.data...])
                    result.entryCount = parsed.entries
                    result.maxSequence = parsed.maxSequence
                    return result
                } catch where error.code == .corruption {
                    drop(limit..<footerOffset, "block table: \(error.message); the blocks are found by scanning", heldEntries: false)
                }
            } catch where error.code == .corruption {
                footerProblem = error.message
            }
        }

        // [SEG-8] Scan for the blocks, then tell data blocks from hint blocks by what they hold.
        let scan = scanBlocks(raw, from: headerEnd, to: limit)
        var gaps = scan.gaps
        var firstHintOffset: Int? = nil
        var decodedEntries: [Hint] = []
        var ownHints: [(hint: Hint, position: UInt64)] = []
        for block in scan.blocks {
            let start = Int(block.offset), end = start + Format.blockHeaderSize + Int(block.storedCount)
            let unpacked: [UInt8]
            do throws(StoreError) {
                unpacked = try unpack(UnsafeRawBufferPointer(rebasing: raw[start..<end]), block: block, path: path)
            } catch {
                drop(start..<end, "block's checksum holds but \(error.message)", heldEntries: firstHintOffset == nil)
                continue
            }
            let position = UInt32(result.dataBlocks.count)
            if let entries = decodeEntries(unpacked, fileNumber: fileNumber, position: position) {
                result.dataBlocks.append(block)
                decodedEntries += entries.hints
                if !entries.complete {
                    drop(start..<end, "an entry of this data block does not decode; the entries before it are kept", heldEntries: true)
                }
            } else if let hints = decodeHints(unpacked, fileNumber: fileNumber) {
                if firstHintOffset == nil { firstHintOffset = start }
                result.hintBlocks.append(block)
                ownHints += hints
            } else {
                drop(start..<end, "block's checksum holds but it holds neither entries nor hints", heldEntries: firstHintOffset == nil)
            }
        }
        if let recordedSize, recordedSize > UInt64(size) {
            gaps.append(size..<Int(clamping: recordedSize))
        }

        // Without a footer, the bytes after the last block may still be a block table that
        // lists exactly the blocks found: then only the footer (or what is left of it) is lost.
        var tableEnd: Int? = nil
        if footer == nil, let trailing = gaps.first(where: { $0.upperBound >= size && $0.lowerBound < size }) {
            tableEnd = consistentTable(raw, at: trailing.lowerBound, found: scan.blocks)
        }

        // What the segment's own hints say each gap held: a hint no salvaged entry matches was
        // lost, in the gap between the salvaged data blocks of the positions around it.
        struct EntryID: Hashable {
            var key: [UInt8]
            var sequence: UInt64
            var isDelete: Bool
        }
        var salvagedAt: [EntryID: Int] = [:]
        for hint in decodedEntries {
            salvagedAt[EntryID(key: hint.key, sequence: hint.sequence, isDelete: hint.isDelete)] = Int(hint.location.position)
        }
        var originalPosition = [UInt64?](repeating: nil, count: result.dataBlocks.count)
        var lostHints: [(hint: Hint, position: UInt64)] = []
        for own in ownHints {
            if let at = salvagedAt[EntryID(key: own.hint.key, sequence: own.hint.sequence, isDelete: own.hint.isDelete)] {
                if originalPosition[at] == nil { originalPosition[at] = own.position }
            } else {
                lostHints.append(own)
            }
        }
        result.lost = lostHints.map { LostEntry(key: $0.hint.key, sequence: $0.hint.sequence, isDelete: $0.hint.isDelete, path: path) }
        // Gaps at or after the first hint block held hints, the table or the footer (data
        // blocks come first, [SEG-5]); the others may have held data blocks.
        let hintArea = firstHintOffset ?? Int.max
        /// The bytes after the last block (and any missing after them) when a block table that
        /// checks out accounts for every block: the table and the footer, no data.
        func isTableAndFooter(_ gap: Range<Int>) -> Bool { tableEnd != nil && gap.upperBound >= size }
        let dataGaps = gaps.filter { $0.lowerBound < hintArea && !isTableAndFooter($0) }
        // The hints are complete when no hint block can be missing: no gap after the first one
        // but a trailing block table that checks out.
        let hintsComplete = firstHintOffset != nil && gaps.allSatisfy { $0.lowerBound < hintArea || isTableAndFooter($0) }
        // Each data gap lies between the salvaged data blocks before and after it; their
        // original positions (from the hints that match their entries) bracket the positions
        // of the blocks the gap held. One sweep, then a binary search per lost hint: no step
        // costs the product of two counts, whatever the file holds.
        let blockCount = result.dataBlocks.count
        var knownBefore = [UInt64?](repeating: nil, count: blockCount + 1)  // last known in 0..<i
        for i in 0..<blockCount { knownBefore[i + 1] = originalPosition[i] ?? knownBefore[i] }
        var knownFrom = [UInt64?](repeating: nil, count: blockCount + 1)  // first known in i...
        for i in stride(from: blockCount - 1, through: 0, by: -1) { knownFrom[i] = originalPosition[i] ?? knownFrom[i + 1] }
        var brackets: [(after: UInt64?, before: UInt64?, gap: Int)] = []
        var nextBlock = 0
        for (index, gap) in dataGaps.enumerated() {
            while nextBlock < blockCount, Int(result.dataBlocks[nextBlock].offset) < gap.lowerBound { nextBlock += 1 }
            brackets.append((knownBefore[nextBlock], knownFrom[nextBlock], index))
        }
        brackets.sort { ($0.after == nil ? 0 : 1, $0.after ?? 0, $0.gap) < ($1.after == nil ? 0 : 1, $1.after ?? 0, $1.gap) }
        var assigned = [ClosedRange<UInt64>?](repeating: nil, count: dataGaps.count)
        for lost in lostHints {
            // The last bracket whose lower end is below the position.
            var low = 0, high = brackets.count
            while low < high {
                let middle = (low + high) / 2
                if brackets[middle].after.map({ $0 < lost.position }) ?? true { low = middle + 1 } else { high = middle }
            }
            guard low > 0, brackets[low - 1].before.map({ lost.position < $0 }) ?? true else { continue }
            let gap = brackets[low - 1].gap
            let known = assigned[gap]
            assigned[gap] = min(known?.lowerBound ?? lost.hint.sequence, lost.hint.sequence)...max(known?.upperBound ?? lost.hint.sequence, lost.hint.sequence)
        }
        var dataGapIndex = 0
        for gap in gaps {
            if let tableEnd, isTableAndFooter(gap) {
                if gap.lowerBound < size {
                    drop(tableEnd..<size, "segment footer: \(footerProblem); the blocks and the block table check out", heldEntries: false)
                } else {
                    drop(gap, "missing: the segment is \(size) bytes, the manifest recorded \(recordedSize ?? 0); it held the rest of the footer", heldEntries: false)
                }
            } else if gap.lowerBound < hintArea {
                let index = dataGapIndex
                dataGapIndex += 1
                let reason = gap.lowerBound >= size
                    ? "missing: the segment is \(size) bytes, the manifest recorded \(recordedSize ?? 0)"
                    : "damaged data blocks: no block whose checksum holds starts in these bytes"
                drop(gap, reason, heldEntries: true, sequences: hintsComplete ? assigned[index] : nil)
            } else if gap.lowerBound >= size {
                drop(gap, "missing: the segment is \(size) bytes, the manifest recorded \(recordedSize ?? 0); it held hints, the block table and the footer", heldEntries: false)
            } else if gap.upperBound >= size && footer == nil {
                drop(gap, "hint blocks, block table and footer that do not check out (footer: \(footerProblem)); hints are rebuilt from the data blocks", heldEntries: false)
            } else {
                drop(gap, "a hint block that does not check out; hints are rebuilt from the data blocks", heldEntries: false)
            }
        }
        if let stopped = scan.gaveUpAt {
            // Reported as part of the gap that starts there; say why the scan stopped.
            if let index = result.dropped.firstIndex(where: { $0.offset <= UInt64(stopped) && UInt64(stopped) < $0.offset + $0.length }) {
                result.dropped[index].reason += " (the scan stopped: too many candidate block headers fail their checksum)"
            }
        }

        // The index comes from the entries found, newest per key, in key order ([REC-5]).
        decodedEntries.sort { $0.key == $1.key ? $0.sequence > $1.sequence : $0.key.precedes($1.key) }
        var unique: [Hint] = []
        unique.reserveCapacity(decodedEntries.count)
        for hint in decodedEntries where unique.last?.key != hint.key { unique.append(hint) }
        result.entryCount = UInt64(unique.count)
        result.maxSequence = max(
            footer?.maxSequence ?? 0, decodedEntries.map(\.sequence).max() ?? 0, ownHints.map(\.hint.sequence).max() ?? 0)
        result.rebuiltHints = unique
        return result
    }

    /// [SEG-3] The block whose header at `p` is plausible before `limit`: reserved bytes zero,
    /// a known compression, a raw length above zero (no block is empty) and within LZ4's
    /// largest expansion ([SEG-1]), stored bytes that end by `limit`. Its CRC is not checked.
    static func candidateBlock(_ raw: UnsafeRawBufferPointer, at p: Int, limit: Int) -> Block? {
        guard p >= 0, limit <= raw.count, limit - p >= Format.blockHeaderSize,
            raw[p + 13] == 0, raw[p + 14] == 0, raw[p + 15] == 0
        else { return nil }
        let stored = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: p + 4, as: UInt32.self))
        let rawCount = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: p + 8, as: UInt32.self))
        guard rawCount > 0, UInt64(stored) <= UInt64(limit - p - Format.blockHeaderSize) else { return nil }
        switch raw[p + 12] {
        case Format.compressionNone:
            guard stored == rawCount else { return nil }
        case Format.compressionLZ4:
            guard stored > 0, UInt64(rawCount) <= UInt64(stored) * 255 + 64 else { return nil }
        default:
            return nil
        }
        return Block(offset: UInt64(p), storedCount: stored, rawCount: rawCount)
    }

    /// Whether the CRC of `block` (a candidate of `raw`) holds.
    static func checksumHolds(_ raw: UnsafeRawBufferPointer, _ block: Block) -> Bool {
        let p = Int(block.offset), end = p + Format.blockHeaderSize + Int(block.storedCount)
        let crc = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: p, as: UInt32.self))
        return crc == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[(p + 4)..<end]))
    }

    /// [SEG-8] The blocks between `start` and `limit` found by their own framing: from `start`,
    /// a block whose CRC holds is taken and the scan goes on where it ends; elsewhere the scan
    /// moves on one byte at a time (first trying where a damaged block's header says it ends)
    /// and the bytes it passes are a gap. Every offset costs O(1) plus, for a plausible header,
    /// a CRC over the bytes it claims; the CRCs of taken blocks add up to at most the file, and
    /// those of candidates that fail to ``scanBudget(fileSize:)``: past it, the rest is one gap
    /// (`gaveUpAt` says where). So the scan is linear in the file's size whatever it holds.
    static func scanBlocks(
        _ raw: UnsafeRawBufferPointer, from start: Int, to limit: Int
    ) -> (blocks: [Block], gaps: [Range<Int>], gaveUpAt: Int?) {
        var blocks: [Block] = [], gaps: [Range<Int>] = []
        var budget = scanBudget(fileSize: raw.count)
        var p = start
        var gapStart: Int? = nil
        func valid(_ q: Int) -> Block? {
            guard let block = candidateBlock(raw, at: q, limit: limit) else { return nil }
            if checksumHolds(raw, block) { return block }
            budget -= Format.blockHeaderSize - 4 + Int(block.storedCount)
            return nil
        }
        while p < limit {
            guard budget > 0 else {
                gaps.append((gapStart ?? p)..<limit)
                return (blocks, gaps, p)
            }
            if let block = valid(p) {
                if let gap = gapStart { gaps.append(gap..<p) }
                gapStart = nil
                blocks.append(block)
                p += Format.blockHeaderSize + Int(block.storedCount)
                continue
            }
            if gapStart == nil {
                gapStart = p
                // A block whose lengths survived but whose bytes did not: the next block
                // starts where it says it ends (or the block table, when the footer says where).
                if let damaged = candidateBlock(raw, at: p, limit: limit) {
                    let end = p + Format.blockHeaderSize + Int(damaged.storedCount)
                    if (end == limit && limit < raw.count) || valid(end) != nil {
                        p = end
                        continue
                    }
                }
            }
            p += 1
        }
        if let gap = gapStart { gaps.append(gap..<limit) }
        return (blocks, gaps, nil)
    }

    /// The end of a block table at `offset` of `raw` that lists exactly blocks tiling the
    /// segment from its header to `offset` ([SEG-5]), every block in `found` among them, and
    /// leaves at most a footer's bytes after it; `nil` when the bytes are not such a table.
    static func consistentTable(_ raw: UnsafeRawBufferPointer, at offset: Int, found: [Block]) -> Int? {
        var expected = UInt64(Format.segmentHeaderSize)
        var rows: [UInt64: Block] = [:]
        var position = offset
        while UInt64(offset) > expected {
            guard position + Format.blockTableEntrySize <= raw.count else { return nil }
            let row = Block(
                offset: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: position, as: UInt64.self)),
                storedCount: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: position + 8, as: UInt32.self)),
                rawCount: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: position + 12, as: UInt32.self)))
            guard row.offset == expected else { return nil }
            expected = row.offset + UInt64(Format.blockHeaderSize) + UInt64(row.storedCount)
            rows[row.offset] = row
            position += Format.blockTableEntrySize
        }
        guard expected == UInt64(offset), raw.count - position <= Format.segmentFooterSize else { return nil }
        for block in found {
            guard let row = rows[block.offset], row.storedCount == block.storedCount, row.rawCount == block.rawCount else {
                return nil
            }
        }
        return position
    }

    /// The entries of a decompressed data block as hints at data block `position`, when its
    /// first entry decodes with its CRC ([ENT-1]); `complete` is false when one after it
    /// does not. `nil` when the block does not start with an entry (a hint block).
    static func decodeEntries(
        _ block: [UInt8], fileNumber: UInt32, position: UInt32
    ) -> (hints: [Hint], complete: Bool)? {
        block.withUnsafeBytes { buffer in
            var reader = ByteReader(buffer)
            var hints: [Hint] = []
            while !reader.isAtEnd {
                let start = reader.position
                guard case .success(let entry) = LogEntry.decode(from: &reader, keyOnly: true) else {
                    return hints.isEmpty ? nil : (hints, false)
                }
                hints.append(
                    Hint(
                        key: entry.key, isDelete: entry.isDelete, sequence: entry.sequence,
                        location: ValueLocation(
                            fileNumber: fileNumber, position: position, offset: UInt32(start),
                            length: UInt32(reader.position - start))))
            }
            return hints.isEmpty ? nil : (hints, true)
        }
    }

    /// The hints of a decompressed hint block ([SEG-4]) with the data block position each
    /// names (not checked: the blocks were found by scanning), or `nil` unless every byte
    /// decodes as hints.
    static func decodeHints(_ block: [UInt8], fileNumber: UInt32) -> [(hint: Hint, position: UInt64)]? {
        block.withUnsafeBytes { buffer in
            var reader = ByteReader(buffer)
            var hints: [(hint: Hint, position: UInt64)] = []
            while !reader.isAtEnd {
                guard let kind = reader.u8(), kind == Format.entryPut || kind == Format.entryDelete,
                    let keyCount = reader.length(limit: Format.maxKeyLength), let key = reader.array(keyCount),
                    let sequence = reader.varint(), let position = reader.varint(), let offset = reader.varint(),
                    let length = reader.varint()
                else { return nil }
                hints.append(
                    (Hint(
                        key: key, isDelete: kind == Format.entryDelete, sequence: sequence,
                        location: ValueLocation(
                            fileNumber: fileNumber, position: UInt32(truncatingIfNeeded: position),
                            offset: UInt32(truncatingIfNeeded: offset), length: UInt32(truncatingIfNeeded: length))),
                     position))
            }
            return hints.isEmpty ? nil : hints
        }
    }
}

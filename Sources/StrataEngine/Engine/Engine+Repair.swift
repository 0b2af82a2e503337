/// Repair's part of opening a store (SPEC.md [REC-7], [SEG-8], [DUR-4]): evidence kept before a
/// file is cut, segments salvaged block by block, hints checked against the data, a WAL or a
/// manifest made anew.
extension Engine {
    /// [DUR-3] [DUR-4] Writes `bytes` to a new file in the store directory named `name` (or
    /// `name-2`, `name-3`, …, the first that is free), syncs it and the directory, and returns
    /// its path. Evidence an open keeps before it cuts or rewrites a WAL.
    static func keepCopy(
        _ bytes: [UInt8], named name: String, in path: String, fileSystem fs: any FileSystem
    ) throws(StoreError) -> String {
        var candidate = path + "/" + name
        var suffix = 2
        while try fs.kind(of: candidate) != nil {
            candidate = path + "/" + name + "-" + String(suffix)
            suffix += 1
        }
        let handle = try fs.open(candidate, mode: .createNew)
        defer { handle.close() }
        try handle.write(bytes, at: 0)
        try handle.sync()
        try fs.syncDirectory(path)
        return candidate
    }

    /// Repair: the segment, opened as usual when its header, footer and block table check out,
    /// else salvaged block by block ([SEG-8]): what could not be used is added to `report`.
    static func salvageSegment(
        _ segment: Manifest.Segment, path: String, fileSystem: any FileSystem, blockCache: BlockCache,
        report: inout RepairReport
    ) throws(StoreError) -> SegmentReader {
        do throws(StoreError) {
            return try openSegment(path: path, number: segment.fileNumber, fileSystem: fileSystem, blockCache: blockCache)
        } catch where error.code == .corruption && (try? fileSystem.exists(path)) == true {
            let salvaged = try SegmentReader.salvage(
                fileSystem: fileSystem, path: path, fileNumber: segment.fileNumber, recordedSize: segment.size)
            report.dropped += salvaged.dropped
            report.lost += salvaged.lost
            return salvaged.reader
        }
    }

    /// Repair: creates WAL `number` holding only its header, synced, its directory entry too.
    static func createEmptyWAL(_ number: UInt32, in path: String, fileSystem fs: any FileSystem) throws(StoreError) {
        let handle = try fs.open(path + "/" + Format.walFileName(number), mode: .createNew)
        defer { handle.close() }
        try handle.write(WALRecord.fileHeader(fileNumber: number), at: 0)
        try handle.sync()
        try fs.syncDirectory(path)
    }

    /// Repair: a manifest naming every segment and WAL present, in file-number order. A WAL
    /// whose number a segment also has (never made by the engine: a file copied in) is renamed
    /// to a fresh number, keeping its place among the WALs ([MAN-2]: a manifest names no
    /// number twice); a read-only repair, which renames nothing, leaves it out and reports it.
    static func rebuiltManifest(
        path: String, numbered: [(number: UInt32, ext: String)], options: EngineOptions, report: inout RepairReport
    ) throws(StoreError) -> Manifest {
        let fs = options.fileSystem
        let sorted = numbered.sorted { $0.number < $1.number }
        let segmentNumbers = Set(sorted.filter { $0.ext == Format.segmentExtension }.map(\.number))
        var manifest = Manifest(nextFileNumber: (sorted.last?.number ?? 0) &+ 1, lastSequence: 0, wals: [], segments: [])
        for item in sorted where item.ext == Format.walExtension {
            guard segmentNumbers.contains(item.number) else {
                manifest.wals.append(item.number)
                continue
            }
            let walPath = path + "/" + Format.walFileName(item.number)
            guard !options.readOnly else {
                var size: UInt64 = 0
                if case .file(let bytes)? = try fs.kind(of: walPath) { size = bytes }
                report.dropped.append(
                    DroppedRange(
                        path: walPath, offset: 0, length: size,
                        reason: "WAL shares its file number with a segment; a read-only repair cannot renumber it, so it is not read"))
                continue
            }
            let number = manifest.allocateFileNumber()
            try fs.rename(walPath, to: path + "/" + Format.walFileName(number))
            try fs.syncDirectory(path)
            manifest.wals.append(number)
        }
        for item in sorted where item.ext == Format.segmentExtension {
            let size: UInt64
            if case .file(let bytes)? = try options.fileSystem.kind(of: path + "/" + Format.segmentFileName(item.number)) {
                size = bytes
            } else {
                size = 0
            }
            manifest.segments.append(.init(fileNumber: item.number, size: size))
        }
        if manifest.wals.isEmpty {
            guard !options.readOnly else {
                throw StoreError.corruption(
                    "no WAL file left to rebuild the manifest around; a read-only repair cannot create one",
                    path: path + "/" + Format.manifestFileName, offset: 0)
            }
            let number = manifest.allocateFileNumber()
            try createEmptyWAL(number, in: path, fileSystem: options.fileSystem)
            manifest.wals = [number]
        }
        return manifest
    }

    /// Repair: a segment's hints, checked against its data blocks. Hints of a block that fails
    /// its checks are dropped; damaged hint blocks are rebuilt from the data blocks ([REC-7]).
    static func salvagedHints(of reader: SegmentReader, report: inout RepairReport) -> [SegmentReader.Hint] {
        // A segment salvaged by scanning carries hints rebuilt from its data blocks ([SEG-8]).
        if let rebuilt = reader.rebuiltHints { return rebuilt }
        var badBlocks: Set<UInt32> = []
        var droppedAt: [UInt32: Int] = [:]  // bad block → its entry in report.dropped
        for (index, block) in reader.dataBlocks.enumerated() {
            do throws(StoreError) {
                _ = try reader.readBlock(block)
            } catch {
                badBlocks.insert(UInt32(index))
                droppedAt[UInt32(index)] = report.dropped.count
                report.dropped.append(
                    DroppedRange(
                        path: reader.path, offset: block.offset,
                        length: UInt64(Format.blockHeaderSize) + UInt64(block.storedCount), reason: "data block: \(error.message)"))
            }
        }
        do throws(StoreError) {
            let all = try reader.readHints()
            let hints = all.filter { !badBlocks.contains($0.location.position) }
            // Every hint must describe the entry it points at; one that does not means the
            // hints cannot be trusted, and they are rebuilt from the data.
            var memo = BlockMemo()
            for hint in hints {
                let entry = try reader.entry(in: try memo.block(hint.location.position, of: reader), at: hint.location)
                guard entry.key == hint.key, entry.sequence == hint.sequence, entry.isDelete == hint.isDelete else {
                    throw StoreError.corruption(
                        "a hint does not describe the entry it points at", path: reader.path,
                        offset: reader.dataBlocks[Int(hint.location.position)].offset)
                }
            }
            // The hints checked out: those of the dropped blocks say what was lost.
            if !badBlocks.isEmpty {
                var sequences: [UInt32: ClosedRange<UInt64>] = [:]
                for hint in all where badBlocks.contains(hint.location.position) {
                    report.lost.append(LostEntry(key: hint.key, sequence: hint.sequence, isDelete: hint.isDelete, path: reader.path))
                    let known = sequences[hint.location.position]
                    sequences[hint.location.position] = min(known?.lowerBound ?? hint.sequence, hint.sequence)...max(known?.upperBound ?? hint.sequence, hint.sequence)
                }
                for (block, range) in sequences {
                    if let at = droppedAt[block] { report.dropped[at].sequences = range }
                }
            }
            return hints
        } catch {
            // The damaged hint block when one failed its checks, else (hints that disagree with
            // the data or the footer) every hint block: none of them is used.
            let start = reader.hintBlocks.first?.offset ?? 0
            let end = reader.hintBlocks.last.map { $0.offset + UInt64(Format.blockHeaderSize) + UInt64($0.storedCount) } ?? start
            let damaged = reader.hintBlocks.first { $0.offset == error.offset }
            report.dropped.append(
                DroppedRange(
                    path: reader.path, offset: damaged?.offset ?? start,
                    length: damaged.map { UInt64(Format.blockHeaderSize) + UInt64($0.storedCount) } ?? end - start,
                    reason: "hints rebuilt from the data blocks: \(error.message)", heldEntries: false))
            var ignored: [DroppedRange] = []  // bad data blocks were reported above
            return reader.salvageHints(dropped: &ignored)
        }
    }
}

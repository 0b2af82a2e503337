/// What one live file of an open store holds, read from the file itself: the figures
/// `strata inspect` prints beside ``EngineStats``'s live and dead bytes.
public struct FileLayout: Sendable, Equatable, Codable {
    /// Which kind of file.
    public enum Kind: String, Sendable, Equatable, Codable {
        /// A write-ahead log (SPEC.md [WAL-*]).
        case wal
        /// An immutable segment (SPEC.md [SEG-*]).
        case segment
    }

    /// WAL or segment.
    public var kind: Kind
    /// The file's number.
    public var fileNumber: UInt32
    /// The file's path.
    public var path: String
    /// Bytes on disk.
    public var sizeBytes: UInt64
    /// Entries (puts and deletes) in the file.
    public var entries: Int
    /// WAL records (transactions); 0 for a segment.
    public var records: Int
    /// Data blocks; 0 for a WAL.
    public var dataBlocks: Int
    /// Hint blocks; 0 for a WAL.
    public var hintBlocks: Int
    /// Bytes of the data blocks before compression (segments) or of the entries (WALs).
    public var rawBytes: UInt64
    /// Bytes of the data blocks as stored (compressed) or of the entries (WALs).
    public var storedBytes: UInt64
    /// The lowest and highest sequence numbers in the file, if it holds any entry.
    public var firstSequence: UInt64?
    /// See ``firstSequence``.
    public var lastSequence: UInt64?

    /// Raw bytes per stored byte of the data blocks (1 for a WAL; 1 when empty).
    public var compressionRatio: Double { storedBytes == 0 ? 1 : Double(rawBytes) / Double(storedBytes) }
}

extension Engine {
    /// Reads every live WAL and segment and describes what each holds: record, entry and
    /// block counts, compressed and raw sizes, sequence ranges. It reads whole files (every
    /// block's checksum is verified on the way), so it costs a scan of the store.
    ///
    /// - Throws: ``StoreError`` when a file cannot be read or a block fails its checksum.
    public func fileLayout() throws(StoreError) -> [FileLayout] {
        let manifest = writer.withLock { $0.manifest }
        var layouts: [FileLayout] = []
        for number in manifest.wals {
            let walPath = path + "/" + Format.walFileName(number)
            let handle = try fileSystem.open(walPath, mode: .readOnly)
            defer { handle.close() }
            let bytes = try handle.read(exactly: Int(try handle.size()), at: 0)
            var layout = FileLayout(
                kind: .wal, fileNumber: number, path: walPath, sizeBytes: UInt64(bytes.count), entries: 0, records: 0,
                dataBlocks: 0, hintBlocks: 0, rawBytes: 0, storedBytes: 0)
            // Read in repair mode so a torn tail or a damaged record does not hide the rest.
            let reader = WALReader(path: walPath, bytes: bytes, isNewest: number == manifest.wals.last, repair: true)
            _ = try reader.read { record in
                layout.records += 1
                for item in record.entries {
                    layout.entries += 1
                    layout.rawBytes += UInt64(item.length)
                    layout.firstSequence = min(layout.firstSequence ?? .max, item.entry.sequence)
                    layout.lastSequence = max(layout.lastSequence ?? 0, item.entry.sequence)
                }
            }
            layout.storedBytes = layout.rawBytes
            layouts.append(layout)
        }
        for segment in manifest.segments {
            let reader = try shared.withLock { (state) throws(StoreError) -> SegmentReader in
                guard let file = state.files[segment.fileNumber], case .segment(let reader) = file.content else {
                    throw StoreError(.corruption, "segment \(segment.fileNumber) is named by the manifest but not open", path: path)
                }
                return reader
            }
            var layout = FileLayout(
                kind: .segment, fileNumber: segment.fileNumber, path: reader.path, sizeBytes: reader.fileSize,
                entries: Int(reader.entryCount), records: 0, dataBlocks: reader.dataBlocks.count,
                hintBlocks: reader.hintBlocks.count,
                rawBytes: reader.dataBlocks.reduce(0) { $0 + UInt64($1.rawCount) },
                storedBytes: reader.dataBlocks.reduce(0) { $0 + UInt64($1.storedCount) })
            if reader.entryCount > 0 {
                let hints = try reader.readHints()
                layout.firstSequence = hints.map(\.sequence).min()
                layout.lastSequence = hints.map(\.sequence).max()
            }
            layouts.append(layout)
        }
        return layouts
    }
}

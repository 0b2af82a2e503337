import StrataSync

/// One WAL's bytes in memory ([WAL-5]): what open read and checked (every record's CRC), then
/// every record this engine appended. WAL values are read from here, never from the file
/// again: a point read costs no system call and no CRC, a scan no window of reads.
///
/// Offsets are the file's. The bytes live in chunks that are never moved or freed before the
/// image: a commit's records go into the last chunk when they fit, else into a new one, so no
/// entry spans two chunks.
///
/// Thread safety: the chunk list is protected by `chunks`'s lock. Bytes are written only by
/// the committing writer (writer lock held), past every entry the index has published and
/// before the commit publishes its own, so a reader of a snapshot reads the bytes of the
/// entries it sees without the lock.
final class WALImage: Sendable {
    /// A run of the WAL's bytes: file offsets `start ..< start + used`, at `base`.
    struct Chunk: @unchecked Sendable {
        // @unchecked: `base` points at memory the image owns; a reader reads only bytes
        // written before it could learn of them (see the type's thread safety note).
        let start: UInt64
        let base: UnsafeMutableRawPointer
        let capacity: Int
        var used: Int

        /// Whether the chunk holds file offsets `offset ..< offset + length`.
        @inline(__always)
        func holds(_ offset: UInt64, _ length: Int) -> Bool {
            offset >= start && offset + UInt64(length) <= start + UInt64(used)
        }

        /// Whether the chunk holds the entry `entry` locates.
        @inline(__always)
        func holds(_ entry: IndexEntry) -> Bool { holds(UInt64(entry.location.offset), Int(entry.location.length)) }

        /// Calls `body` with the value of the entry `entry` locates for `key` (which this
        /// chunk holds), its framing checked (kind, sequence, key, lengths; not its CRC,
        /// [WAL-5]); `path` names the WAL in errors.
        @inline(__always)
        func withValue<R>(
            key: UnsafeRawBufferPointer, entry: IndexEntry, path: @autoclosure () -> String,
            _ body: (UnsafeRawBufferPointer) throws(StoreError) -> R
        ) throws(StoreError) -> R {
            let start = UInt64(entry.location.offset)
            let bytes = self.bytes(at: start, count: Int(entry.location.length))
            let range = try LogEntry.valueRange(
                in: bytes, key: key, sequence: entry.sequence, path: path(), offset: start)
            return try body(UnsafeRawBufferPointer(rebasing: bytes[range]))
        }

        /// The bytes at file offset `offset` (which the chunk holds, ``holds(_:_:)``).
        @inline(__always)
        func bytes(at offset: UInt64, count: Int) -> UnsafeRawBufferPointer {
            UnsafeRawBufferPointer(start: base + Int(offset - start), count: count)
        }
    }

    /// Bytes of a new chunk (more when one commit's records are larger).
    static let chunkBytes = 4 << 20

    private let chunks: Locked<[Chunk]>

    /// An image of the first `count` bytes of `bytes` (a WAL as open read it, up to its last
    /// valid record), with room for `headroom` more bytes in the same chunk.
    init(_ bytes: [UInt8], count: Int, headroom: Int) {
        let capacity = max(1, count + headroom)
        let base = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
        bytes.withUnsafeBytes { raw in
            if count > 0, let source = raw.baseAddress { base.copyMemory(from: source, byteCount: count) }
        }
        chunks = Locked([Chunk(start: 0, base: base, capacity: capacity, used: count)])
    }

    deinit {
        chunks.withLock { chunks in
            for chunk in chunks { chunk.base.deallocate() }
        }
    }

    /// Bytes the image holds (its memory, not counting unused room).
    var byteCount: Int { chunks.withLock { $0.reduce(0) { $0 + $1.used } } }

    /// Appends `bytes`, which the WAL holds from `offset` on: the end of what the image holds
    /// (a commit's records, written to the file). Writer lock held.
    func append(_ bytes: [UInt8], at offset: UInt64) {
        guard !bytes.isEmpty else { return }
        chunks.withLock { chunks in
            bytes.withUnsafeBytes { raw in
                guard let source = raw.baseAddress else { return }
                if let last = chunks.indices.last, chunks[last].start + UInt64(chunks[last].used) == offset,
                    chunks[last].capacity - chunks[last].used >= raw.count
                {
                    (chunks[last].base + chunks[last].used).copyMemory(from: source, byteCount: raw.count)
                    chunks[last].used += raw.count
                } else {
                    let capacity = max(Self.chunkBytes, raw.count)
                    let base = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
                    base.copyMemory(from: source, byteCount: raw.count)
                    chunks.append(Chunk(start: offset, base: base, capacity: capacity, used: raw.count))
                }
            }
        }
    }

    /// The chunk holding the entry `entry` locates, or the corruption error naming `path`
    /// when none does.
    func chunk(of entry: IndexEntry, path: @autoclosure () -> String) throws(StoreError) -> Chunk {
        let start = UInt64(entry.location.offset), length = Int(entry.location.length)
        guard let chunk = chunk(holding: start, length: length) else {
            throw StoreError.corruption("index points past what the WAL holds (\(length) bytes)", path: path(), offset: start)
        }
        return chunk
    }

    /// The chunk holding file offsets `offset ..< offset + length`, or `nil` when no chunk
    /// does (the index points past what the WAL held: corruption).
    func chunk(holding offset: UInt64, length: Int) -> Chunk? {
        chunks.withLock { chunks in
            var low = 0, high = chunks.count
            while low < high {
                let mid = (low + high) / 2
                if chunks[mid].start <= offset { low = mid + 1 } else { high = mid }
            }
            guard low > 0, chunks[low - 1].holds(offset, length) else { return nil }
            return chunks[low - 1]
        }
    }
}

/// A consistent, immutable view of the store at one sequence number.
///
/// Taking a snapshot is O(1). It sees every transaction up to ``sequence`` and none after,
/// whatever commits, flushes or compactions happen meanwhile: the files it reads stay alive
/// until the snapshot is gone.
///
/// For example:
///
/// ```swift
/// let snapshot = try engine.snapshot()
/// for (key, value) in try snapshot.scan(prefix: Array("user/".utf8)) { … }
/// ```
public struct Snapshot: Sendable {
    /// The newest transaction this snapshot sees.
    public let sequence: UInt64
    let index: KeyIndex
    let files: [UInt32: LiveFile]
    let cache: RowCache?

    /// How many keys the snapshot holds. O(1).
    public var count: Int { index.count }

    /// The value of `key`, or `nil` if it has none.
    public func get(_ key: [UInt8]) throws(StoreError) -> [UInt8]? {
        guard let entry = index.lookup(key) else { return nil }
        var value: [UInt8] = []
        if try withWALValue(key, entry: entry, { value = Array($0) }) { return value }
        var reader = Reader(self)
        return try reader.value(of: key, entry: entry, inWAL: false)
    }

    /// Calls `body` with the value of `entry` in place and returns `true` when it is in a WAL
    /// (read from the WAL's image, [WAL-5], without a reader's memo); `false`, calling nothing,
    /// when it is not.
    private func withWALValue(_ key: [UInt8], entry: IndexEntry, _ body: (UnsafeRawBufferPointer) -> Void) throws(StoreError) -> Bool {
        guard let file = files[entry.location.fileNumber], case .wal(_, let image) = file.content else { return false }
        cache?.countWALRead()
        let chunk = try image.chunk(of: entry, path: file.path)
        try key.withBytes { (raw) throws(StoreError) in
            try chunk.withValue(key: raw, entry: entry, path: file.path) { body($0) }
        }
        return true
    }

    /// Calls `body` with the value of `key` and returns `true`, or returns `false` if it has
    /// none: the read ``get(_:)`` makes, without its copy when the value is in a WAL's image
    /// (in place) or in the row cache. Not generic: `body` keeps what it needs.
    public func withValue(_ key: [UInt8], _ body: (UnsafeRawBufferPointer) -> Void) throws(StoreError) -> Bool {
        guard let entry = index.lookup(key) else { return false }
        if try withWALValue(key, entry: entry, body) { return true }
        var reader = Reader(self)
        try reader.value(of: key, entry: entry, inWAL: false).withUnsafeBytes(body)
        return true
    }

    /// Whether `key` has a value. Reads only the index.
    public func contains(_ key: [UInt8]) -> Bool { index.lookup(key) != nil }

    /// Whether `key` (bytes valid for the call) has a value in this snapshot: a probe of a
    /// key assembled in a caller's buffer, with no array made for it.
    public func contains(_ key: UnsafeRawBufferPointer) -> Bool { index.lookup(key) != nil }

    /// The probe scope of the keys that start with `prefix` in this snapshot
    /// (``KeyIndex/Scope``): for many lookups of `prefix` followed by a reference, each
    /// starting below the levels all of them share. Reads only the index.
    public func probeScope(forPrefix prefix: [UInt8]) -> KeyIndex.Scope { index.scope(ofPrefix: prefix) }

    /// The sequence number of the transaction that last wrote `key`, or `nil`.
    public func sequence(of key: [UInt8]) -> UInt64? { index.lookup(key)?.sequence }

    /// The sequence number of `key`'s live entry, or `nil`, looked up from the leaf `finger`
    /// remembers (``KeyIndex/lookup(_:finger:)``): for many keys in ascending order.
    public func sequence(of key: [UInt8], finger: inout KeyIndex.Finger) -> UInt64? {
        key.withUnsafeBytes { index.lookup($0, finger: &finger)?.sequence }
    }

    /// Every key and value with `lowerBound <= key < upperBound` (no upper bound when `nil`),
    /// in ascending key order.
    public func scan(from lowerBound: [UInt8] = [], to upperBound: [UInt8]? = nil) throws(StoreError) -> [(key: [UInt8], value: [UInt8])] {
        var result: [(key: [UInt8], value: [UInt8])] = []
        try forEach(from: lowerBound, to: upperBound) { key, value in
            result.append((key, value))
            return true
        }
        return result
    }

    /// Every key starting with `prefix` and its value, in ascending key order.
    public func scan(prefix: [UInt8]) throws(StoreError) -> [(key: [UInt8], value: [UInt8])] {
        try scan(from: prefix, to: KeyIndex.prefixEnd(prefix))
    }

    /// The keys in `[lowerBound, upperBound)`, in ascending order. Reads only the index.
    public func keys(from lowerBound: [UInt8], to upperBound: [UInt8]?) -> [[UInt8]] {
        index.cursor(from: lowerBound, to: upperBound).map(\.key)
    }

    /// How many keys lie in `[lowerBound, upperBound)`, counting at most `limit`. Reads only
    /// the index.
    public func countKeys(from lowerBound: [UInt8], to upperBound: [UInt8]?, limit: Int = .max) -> Int {
        index.countKeys(from: lowerBound, to: upperBound, limit: limit)
    }

    /// Calls `body` with each key in `[lowerBound, upperBound)`, in ascending order, until it
    /// returns `false`. Reads only the index (no value is read).
    public func forEachKey(from lowerBound: [UInt8], to upperBound: [UInt8]?, _ body: ([UInt8]) throws -> Bool) rethrows {
        var cursor = index.cursor(from: lowerBound, to: upperBound)
        while let (key, _) = cursor.next() {
            guard try body(key) else { return }
        }
    }

    /// Calls `body` with the bytes of each key in `[lowerBound, upperBound)` (valid only during
    /// the call), in ascending order, until it returns `false`. Reads only the index and copies
    /// no key.
    public func forEachKeyBytes(from lowerBound: [UInt8], to upperBound: [UInt8]?, _ body: (UnsafeRawBufferPointer) throws -> Bool) rethrows {
        var cursor = index.cursor(from: lowerBound, to: upperBound)
        try cursor.forEachKey(body)
    }

    /// The keys starting with `prefix`, in ascending order. Reads only the index.
    public func keys(prefix: [UInt8]) -> [[UInt8]] {
        index.cursor(from: prefix, to: KeyIndex.prefixEnd(prefix)).map(\.key)
    }

    /// Calls `body` with each key and value in `[lowerBound, upperBound)`, in ascending key
    /// order, until it returns `false`.
    public func forEach(
        from lowerBound: [UInt8] = [], to upperBound: [UInt8]? = nil,
        _ body: ([UInt8], [UInt8]) throws(StoreError) -> Bool
    ) throws(StoreError) {
        try forEachView(from: lowerBound, to: upperBound) { (key, value) throws(StoreError) -> Bool in
            try body(Array(key), Array(value))
        }
    }
}

extension Snapshot {
    /// Calls `body` with the bytes of each key in `[lowerBound, upperBound)` and of its value,
    /// in ascending key order, until it returns `false`: a scan that copies neither (both are
    /// valid only during the call; the value lies in the decompressed block or the WAL window
    /// the scan reads through). Each entry is checked as ``forEach(from:to:_:)`` checks it.
    public func forEachView(
        from lowerBound: [UInt8] = [], to upperBound: [UInt8]? = nil,
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws(StoreError) -> Bool
    ) throws(StoreError) {
        var memo = BlockMemo()
        var cursor = index.cursor(from: lowerBound, to: upperBound)
        try cursor.forEachEntry { (key, entry) throws(StoreError) -> Bool in
            try withValue(key: key, entry: entry, blockMemo: &memo) { (value) throws(StoreError) -> Bool in try body(key, value) }
        }
    }

    /// Calls `body` with the value bytes of `key`'s entry, read in place (see
    /// ``forEachView(from:to:_:)``).
    @inline(__always)
    func withValue<R>(
        key: UnsafeRawBufferPointer, entry: IndexEntry, blockMemo: inout BlockMemo,
        _ body: (UnsafeRawBufferPointer) throws(StoreError) -> R
    ) throws(StoreError) -> R {
        try blockMemo.withValue(key: key, entry: entry, files: files, body)
    }
}

extension Snapshot {
    /// Point reads of one snapshot that share what they read: the last decompressed segment
    /// block and the last WAL window (see `BlockMemo`), so reading rows in key order (the
    /// members of a relationship, candidates from an index) decompresses each block once and
    /// reads the WAL a window at a time, not one `pread` per row. Reads go through the row
    /// cache as ``Snapshot/get(_:)`` does. One reader, one thread.
    public struct Reader {
        /// The snapshot read.
        public let snapshot: Snapshot
        private var memo = BlockMemo()
        /// The index leaf of the last read: reads in key order search it first.
        private var finger = KeyIndex.Finger()

        /// A reader of `snapshot`.
        public init(_ snapshot: Snapshot) {
            self.snapshot = snapshot
        }

        /// The value of `key`, or `nil` if it has none (as ``Snapshot/get(_:)``).
        public mutating func get(_ key: [UInt8]) throws(StoreError) -> [UInt8]? {
            guard let entry = key.withUnsafeBytes({ snapshot.index.lookup($0, finger: &finger) }) else { return nil }
            return try value(of: key, entry: entry)
        }

        /// Calls `body` with the value of `key` in place and returns `true`, or returns `false`
        /// if it has none: the same read as ``get(_:)``, without a copy of a value that is in
        /// the row cache or in a WAL's image (a value read from a segment is copied into the
        /// cache, as `get` does). Not generic, so a call costs no metadata lookup across the
        /// module boundary: `body` keeps what it needs.
        public mutating func withValue(_ key: [UInt8], _ body: (UnsafeRawBufferPointer) -> Void) throws(StoreError) -> Bool {
            try withValue(key, caching: true, body)
        }

        /// ``withValue(_:_:)``, and with `caching` false a value read from a segment is read
        /// in place from its block and not put in the row cache (a cached one is still read
        /// from the cache): for a caller that keeps its own copy of the value for as long as
        /// it matters (a store's row read into the node of an object, which holds it), so
        /// that the read copies it once, not into the cache and then again.
        public mutating func withValue(
            _ key: [UInt8], caching: Bool, _ body: (UnsafeRawBufferPointer) -> Void
        ) throws(StoreError) -> Bool {
            guard let entry = key.withUnsafeBytes({ snapshot.index.lookup($0, finger: &finger) }) else { return false }
            if try memo.isWAL(entry.location.fileNumber, in: snapshot.files) {
                // [WAL-5] In memory already, and never cached: read in place below.
                snapshot.cache?.countWALRead()
            } else if caching {
                // From the row cache (its array, not a copy), or read and cached.
                try value(of: key, entry: entry, inWAL: false).withUnsafeBytes(body)
                return true
            } else if let cached = snapshot.cache?.lookup(key, sequence: entry.sequence) {
                cached.withUnsafeBytes(body)
                return true
            }
            try key.withBytes { (raw) throws(StoreError) in
                try snapshot.withValue(key: raw, entry: entry, blockMemo: &memo) { body($0) }
            }
            return true
        }

        /// The value of `key`, whose index entry is `entry`: from the row cache, or read and
        /// (unless it is in a WAL) cached.
        mutating func value(of key: [UInt8], entry: IndexEntry, inWAL known: Bool? = nil) throws(StoreError) -> [UInt8] {
            // [WAL-5] A value in a WAL is read from its image, in memory already: it is never
            // cached, so the cache is not asked. (`known`: the caller has looked already.)
            let inWAL: Bool
            if let known { inWAL = known } else { inWAL = try memo.isWAL(entry.location.fileNumber, in: snapshot.files) }
            if inWAL {
                snapshot.cache?.countWALRead()
            } else if let cached = snapshot.cache?.lookup(key, sequence: entry.sequence) {
                return cached
            }
            let value = try key.withBytes { (raw) throws(StoreError) -> [UInt8] in
                try snapshot.withValue(key: raw, entry: entry, blockMemo: &memo) { Array($0) }
            }
            if inWAL { return value }
            // Empty values (index and relationship keys, whose meaning is the key) are not
            // worth a cache entry; leaving them out lets commits skip them cheaply
            // (RowCache.update).
            if !value.isEmpty { snapshot.cache?.insert(key, sequence: entry.sequence, value: value) }
            return value
        }
    }
}

/// Remembers the last decompressed segment block, so scans decompress each block once, and
/// the last chunk of a WAL image read ([WAL-5]), so reads in one chunk take no lock. WAL bytes
/// at an offset never change once written, and a snapshot only reads entries it indexes,
/// which are complete.
struct BlockMemo {
    /// The file of the last value read: a scan reads most values from one file, so the
    /// snapshot's table of files is not consulted per value.
    private var lastFile: LiveFile? = nil
    /// ``lastFile``'s number (`UInt32.max` before the first read).
    private var lastNumber = UInt32.max
    /// ``lastFile``'s reader when it is a segment (`nil` for a WAL), not retained:
    /// ``lastFile`` holds it. Read per value without copying the file's content (whose copy
    /// counts a reference).
    private var lastSegment: Unmanaged<SegmentReader>? = nil
    /// ``lastFile``'s image when it is a WAL, not retained (``lastFile`` holds it).
    private var lastImage: Unmanaged<WALImage>? = nil
    /// The chunk of ``lastImage`` the last WAL value came from.
    private var chunk: WALImage.Chunk? = nil
    /// The address of the reader whose block ``block`` is (compared, never dereferenced).
    private var segment: UnsafeMutableRawPointer? = nil
    private var position: UInt32 = 0
    /// The block snapshot reads read from (through the engine's block cache); held so that
    /// ``blockBytes`` stays valid.
    private var block: SegmentBlock? = nil
    /// ``block``'s bytes, read without counting a reference per value.
    private var blockBytes = UnsafeRawBufferPointer(start: nil, count: 0)
    /// The block ``block(_:of:)`` returned last (open's and compaction's reads, which do not
    /// go through the cache), with its reader's address and position.
    private var array: [UInt8] = []
    private var arraySegment: UnsafeMutableRawPointer? = nil
    private var arrayPosition: UInt32 = 0

    /// Calls `body` with the value bytes of `key`'s entry (`entry` is its index entry), read
    /// in place from the decompressed block this memo holds, reading a new one when the entry
    /// is elsewhere, or from the WAL's image; `files` are the snapshot's. A segment entry's
    /// framing is checked (its block's CRC was checked when read, [SEG-3]); so is a WAL
    /// entry's (its record's CRC was checked when open read it, or the engine wrote it,
    /// [WAL-5]).
    mutating func withValue<R>(
        key: UnsafeRawBufferPointer, entry: IndexEntry, files: [UInt32: LiveFile],
        _ body: (UnsafeRawBufferPointer) throws(StoreError) -> R
    ) throws(StoreError) -> R {
        let location = entry.location
        if location.fileNumber != lastNumber { try switchFile(to: location.fileNumber, in: files) }
        guard let segment = lastSegment else { return try withWALValue(key: key, entry: entry, body) }
        // Compared by address first: taking the reader out of `Unmanaged` retains it, which a
        // scan would pay per row.
        if self.segment != segment.toOpaque() || position != location.position {
            try load(location.position, of: segment.takeUnretainedValue())
        }
        let start = Int(location.offset), end = start + Int(location.length)
        let block = blockBytes
        guard end <= block.count else {
            throw StoreError.corruption("entry runs past the end of its block", path: path, offset: blockOffset(location))
        }
        let range = try LogEntry.valueRange(
            in: UnsafeRawBufferPointer(rebasing: block[start..<end]), key: key, sequence: entry.sequence,
            path: path, offset: blockOffset(location))
        return try body(UnsafeRawBufferPointer(rebasing: block[start + range.lowerBound..<start + range.upperBound]))
    }

    /// Whether file `number` of `files` (a snapshot's) is a WAL; it becomes the file read.
    mutating func isWAL(_ number: UInt32, in files: [UInt32: LiveFile]) throws(StoreError) -> Bool {
        if number != lastNumber { try switchFile(to: number, in: files) }
        return lastImage != nil
    }

    /// The path of the last file read, for errors.
    private var path: String { lastFile?.path ?? "" }

    /// The offset in its file of the block at `location`, for errors.
    private func blockOffset(_ location: ValueLocation) -> UInt64 {
        lastSegment?._withUnsafeGuaranteedRef { $0.blockOffset(Int(location.position)) } ?? 0
    }

    /// Makes file `number` of `files` the one read.
    @inline(never)
    private mutating func switchFile(to number: UInt32, in files: [UInt32: LiveFile]) throws(StoreError) {
        guard let file = files[number] else {
            throw StoreError(.corruption, "index points at file \(number), which is not part of the store")
        }
        lastFile = file
        lastNumber = number
        chunk = nil
        switch file.content {
        case .segment(let reader):
            lastSegment = Unmanaged.passUnretained(reader)
            lastImage = nil
        case .wal(_, let image):
            lastSegment = nil
            lastImage = Unmanaged.passUnretained(image)
        }
    }

    /// `body` with the value of the WAL entry at `entry`'s location, from ``lastFile``'s image.
    private mutating func withWALValue<R>(
        key: UnsafeRawBufferPointer, entry: IndexEntry, _ body: (UnsafeRawBufferPointer) throws(StoreError) -> R
    ) throws(StoreError) -> R {
        if chunk?.holds(entry) != true {
            guard let image = lastImage else {
                throw StoreError(.corruption, "index points at file \(lastNumber), which is neither a WAL nor a segment")
            }
            chunk = try image.takeUnretainedValue().chunk(of: entry, path: path)
        }
        guard let chunk else { throw StoreError(.corruption, "no WAL chunk read", path: path) }
        return try chunk.withValue(key: key, entry: entry, path: path, body)
    }

    /// Data block `position` of `reader`, read from its file unless it is the block this
    /// returned last: for open and compaction, which read every block once and must not push
    /// the blocks snapshots use out of the engine's block cache.
    mutating func block(_ position: UInt32, of reader: SegmentReader) throws(StoreError) -> [UInt8] {
        let id = Unmanaged.passUnretained(reader).toOpaque()
        if arraySegment != id || arrayPosition != position {
            array = try reader.readDataBlock(Int(position))
            arraySegment = id
            arrayPosition = position
        }
        return array
    }

    /// Makes data block `position` of `reader` the one held, reading it unless it already is.
    @inline(__always)
    private mutating func load(_ position: UInt32, of reader: SegmentReader) throws(StoreError) {
        let id = Unmanaged.passUnretained(reader).toOpaque()
        if segment != id || self.position != position {
            let loaded = try reader.cachedDataBlock(Int(position))
            block = loaded
            blockBytes = loaded.bytes
            segment = id
            self.position = position
        }
    }
}

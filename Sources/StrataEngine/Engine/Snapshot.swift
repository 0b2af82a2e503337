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
        var reader = Reader(self)
        return try reader.get(key)
    }

    /// Whether `key` has a value. Reads only the index.
    public func contains(_ key: [UInt8]) -> Bool { index.lookup(key) != nil }

    /// Whether `key` (bytes valid for the call) has a value in this snapshot: a probe of a
    /// key assembled in a caller's buffer, with no array made for it.
    public func contains(_ key: UnsafeRawBufferPointer) -> Bool { index.lookup(key) != nil }

    /// Whether the key made of `prefix` and then `suffix`'s 8 bytes, big-endian, has a value
    /// in this snapshot: a probe assembled on the stack (index keys ending in a reference).
    public func contains(_ prefix: [UInt8], followedBy suffix: UInt64) -> Bool {
        let index = self.index
        return withUnsafeTemporaryAllocation(byteCount: prefix.count + 8, alignment: 1) { buffer in
            prefix.withUnsafeBytes { buffer.copyMemory(from: $0) }
            withUnsafeBytes(of: suffix.bigEndian) { UnsafeMutableRawBufferPointer(rebasing: buffer[prefix.count...]).copyMemory(from: $0) }
            return index.lookup(UnsafeRawBufferPointer(buffer)) != nil
        }
    }

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
        var cursor = index.cursor(from: lowerBound, to: upperBound)
        return cursor.count(limit: limit)
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
    func withValue<R>(
        key: UnsafeRawBufferPointer, entry: IndexEntry, blockMemo: inout BlockMemo,
        _ body: (UnsafeRawBufferPointer) throws(StoreError) -> R
    ) throws(StoreError) -> R {
        let location = entry.location
        guard let file = blockMemo.file(location.fileNumber, in: files) else {
            throw StoreError(.corruption, "index points at file \(location.fileNumber), which is not part of the store")
        }
        switch file.content {
        case .segment(let segment):
            let block = try blockMemo.block(location.position, of: segment)
            return try segment.withEntryBytes(in: block, at: location) { (bytes, offset) throws(StoreError) -> R in
                // The block's CRC was checked when it was read ([SEG-3]): the entry's own CRC
                // covers bytes already verified, so only its framing is checked.
                let range = try LogEntry.valueRange(
                    in: bytes, key: key, sequence: entry.sequence, path: file.path, offset: offset, verifyingChecksum: false)
                return try body(UnsafeRawBufferPointer(rebasing: bytes[range]))
            }
        case .wal(let handle):
            return try blockMemo.withWALEntryBytes(at: location, of: file, handle: handle) { (bytes) throws(StoreError) -> R in
                let range = try LogEntry.valueRange(
                    in: bytes, key: key, sequence: entry.sequence, path: file.path, offset: UInt64(location.offset))
                return try body(UnsafeRawBufferPointer(rebasing: bytes[range]))
            }
        }
    }
}

extension Snapshot {
    /// Point reads of one snapshot that share what they read: the last decompressed segment
    /// block and the last WAL window (see ``BlockMemo``), so reading rows in key order (the
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
            if let cached = snapshot.cache?.lookup(key, sequence: entry.sequence) { return cached }
            let value = try key.withBytes { (raw) throws(StoreError) -> [UInt8] in
                try snapshot.withValue(key: raw, entry: entry, blockMemo: &memo) { Array($0) }
            }
            // Empty values (index and relationship keys, whose meaning is the key) are not
            // worth a cache entry; leaving them out lets commits skip them cheaply
            // (RowCache.update).
            if !value.isEmpty { snapshot.cache?.insert(key, sequence: entry.sequence, value: value) }
            return value
        }
    }
}

/// Remembers the last decompressed segment block, so scans decompress each block once, and
/// the last window read from a WAL, so a scan reads WAL entries a window at a time instead of
/// one `pread` each. WAL bytes at an offset never change once written, and a snapshot only
/// reads entries it indexes, which are complete.
struct BlockMemo {
    /// The file of the last value read: a scan reads most values from one file, so the
    /// snapshot's table of files is not consulted per value.
    private var lastFile: LiveFile? = nil
    private var segment: ObjectIdentifier? = nil
    private var position: UInt32 = 0
    private var bytes: [UInt8] = []
    private var wal: ObjectIdentifier? = nil
    private var walStart: UInt64 = 0
    private var walBytes: [UInt8] = []
    /// Where the last WAL entry read ended.
    private var walEnd: UInt64 = 0

    /// The most bytes read from a WAL at a time by scans.
    static let walWindow = 256 * 1024
    /// The first forward window of a scan; each further one doubles, up to ``walWindow``. A
    /// short scan (a few rows of a small entity) then reads a few kilobytes, not a quarter
    /// megabyte (whose buffer alone costs a mapping and its page faults).
    static let firstWALWindow = 8 * 1024
    /// The size of the next forward window.
    private var nextWALWindow = BlockMemo.firstWALWindow

    /// The live file numbered `number` among `files` (the snapshot's), remembered for the
    /// next read.
    mutating func file(_ number: UInt32, in files: [UInt32: LiveFile]) -> LiveFile? {
        if let lastFile, lastFile.number == number { return lastFile }
        lastFile = files[number]
        return lastFile
    }

    /// Calls `body` with the bytes of the WAL entry at `location`, from the current window or
    /// a new one.
    mutating func withWALEntryBytes<R>(
        at location: ValueLocation, of file: LiveFile, handle: any FileHandle,
        _ body: (UnsafeRawBufferPointer) throws(StoreError) -> R
    ) throws(StoreError) -> R {
        let id = ObjectIdentifier(file)
        let start = UInt64(location.offset), length = Int(location.length)
        if wal != id || start < walStart || start + UInt64(length) > walStart + UInt64(walBytes.count) {
            // A window pays off only when the scan walks the WAL forwards (entries written in
            // key order); an entry far from the last one is read alone.
            let forward = wal == id && start >= walEnd && start - walEnd <= UInt64(Self.walWindow / 4)
            walEnd = start + UInt64(length)
            guard forward || wal != id else {
                wal = id
                walBytes = []
                walStart = 0
                return try handle.read(exactly: length, at: start).withBytes(body)
            }
            walBytes = try handle.read(upTo: forward ? max(length, nextWALWindow) : length, at: start)
            if forward { nextWALWindow = min(2 * nextWALWindow, Self.walWindow) }
            wal = id
            walStart = start
            guard walBytes.count >= length else {
                // A short read: fall back to reading exactly this entry.
                wal = nil
                return try handle.read(exactly: length, at: start).withBytes(body)
            }
        }
        walEnd = start + UInt64(length)
        let from = Int(start - walStart)
        return try walBytes.withBytes { (raw) throws(StoreError) -> R in
            try body(UnsafeRawBufferPointer(rebasing: raw[from..<from + length]))
        }
    }

    mutating func block(_ position: UInt32, of reader: SegmentReader) throws(StoreError) -> [UInt8] {
        let id = ObjectIdentifier(reader)
        if segment != id || self.position != position {
            bytes = try reader.readDataBlock(Int(position))
            segment = id
            self.position = position
        }
        return bytes
    }
}

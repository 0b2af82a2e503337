#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Compares two byte strings as unsigned bytes (memcmp order; a proper prefix sorts first).
/// Returns a negative number, zero or a positive number.
@inline(__always)
func compareKeys(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
    let common = min(a.count, b.count)
    // Non-empty buffers always have a base address, so the `if let` only skips empty ones.
    if common > 0, let pa = a.baseAddress, let pb = b.baseAddress {
        let order = memcmp(pa, pb, common)
        if order != 0 { return Int(order) }
    }
    return a.count - b.count
}

/// Compares two byte arrays in key order.
@inline(__always)
func compareKeys(_ a: [UInt8], _ b: [UInt8]) -> Int {
    a.withUnsafeBytes { ra in b.withUnsafeBytes { rb in compareKeys(ra, rb) } }
}

/// Makes room for `extra` more elements, growing by about a quarter (not doubling) so that
/// nodes keep little slack; `limit` caps the growth where the final size is known.
@inline(__always)
func reserveRoom<T>(_ array: inout [T], extra: Int, limit: Int = Int.max) {
    let needed = array.count + extra
    if needed > array.capacity {
        array.reserveCapacity(max(needed, min(limit, needed + max(4, needed / 4))))
    }
}

/// A fresh array holding `slice` with room for `slack` more elements, sharing no storage.
@inline(__always)
func freshArray<T>(_ slice: ArraySlice<T>, slack: Int) -> [T] {
    var result: [T] = []
    result.reserveCapacity(slice.count + slack)
    result.append(contentsOf: slice)
    return result
}

/// Byte-string keys stored end to end in one buffer, with each key's end offset, and each
/// key's *head*: its eight bytes after a prefix all the keys share, as one integer.
///
/// Key `i` is `bytes[ends[i - 1] ..< ends[i]]` (starting at 0 for `i == 0`). Two allocations
/// per node instead of one per key, plus the heads.
///
/// The keys are in ascending order (a node's). A search compares the probe with the shared
/// prefix once, then mostly compares heads as integers (big-endian, so integer order is byte
/// order): only keys whose heads tie with the probe's are compared byte by byte. Every
/// mutation keeps ``prefixLength`` a prefix all keys share (the longest one whenever the heads
/// are rebuilt; a shorter one stays correct) and ``heads`` in step with the keys.
struct PackedKeys: Sendable {
    /// All keys, concatenated.
    private(set) var bytes: [UInt8] = []
    /// The end offset of each key in `bytes`.
    private(set) var ends: [UInt32] = []
    /// Each key's eight bytes from ``prefixLength`` on, big-endian, zero-padded past its end.
    private(set) var heads: [UInt64] = []
    /// How many leading bytes every key shares with key 0 (every key is at least this long).
    private(set) var prefixLength = 0

    init() {}

    init(bytes: [UInt8], ends: [UInt32]) {
        self.bytes = bytes
        self.ends = ends
        rebuildHeads()
    }

    /// The number of keys.
    var count: Int { ends.count }

    /// The byte range of key `i`.
    @inline(__always)
    func range(_ i: Int) -> Range<Int> {
        (i == 0 ? 0 : Int(ends[i - 1]))..<Int(ends[i])
    }

    /// A copy of key `i`.
    func key(_ i: Int) -> [UInt8] {
        Array(bytes[range(i)])
    }

    /// Key `i` as a slice of the keys' storage: no copy of its bytes.
    func keySlice(_ i: Int) -> ArraySlice<UInt8> {
        bytes[range(i)]
    }

    /// Calls `body` with the bytes of key `i`.
    @inline(__always)
    func withKey<R>(_ i: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let r = range(i)
        return try bytes.withUnsafeBytes { raw in
            try body(UnsafeRawBufferPointer(rebasing: raw[r]))
        }
    }

    /// Makes room for `keys` more keys of about `bytes` bytes in all.
    mutating func reserveCapacity(keys: Int, bytes byteCount: Int) {
        ends.reserveCapacity(ends.count + keys)
        heads.reserveCapacity(heads.count + keys)
        bytes.reserveCapacity(bytes.count + byteCount)
    }

    /// Drops the growth slack of the buffers (a node that will not grow).
    mutating func shrinkToFit() {
        bytes = freshArray(bytes[...], slack: 0)
        ends = freshArray(ends[...], slack: 0)
        heads = freshArray(heads[...], slack: 0)
    }

    /// The eight bytes of `key` from `offset`, big-endian, zero-padded past its end.
    @inline(__always)
    static func head(_ key: UnsafeRawBufferPointer, from offset: Int) -> UInt64 {
        let available = key.count - offset
        if available >= 8 { return UInt64(bigEndian: key.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
        var head: UInt64 = 0
        var shift: UInt64 = 56
        var at = offset
        while at < key.count {
            head |= UInt64(key[at]) << shift
            shift &-= 8
            at += 1
        }
        return head
    }

    /// Sets ``prefixLength`` to the longest prefix the keys share (that of the first and the
    /// last, the keys being in order) and recomputes every head.
    private mutating func rebuildHeads() {
        heads.removeAll(keepingCapacity: true)
        guard !ends.isEmpty else {
            prefixLength = 0
            return
        }
        let first = range(0), last = range(ends.count - 1)
        let (length, heads) = bytes.withUnsafeBytes { raw -> (Int, [UInt64]) in
            var length = 0
            let limit = min(first.count, last.count)
            while length < limit, raw[first.lowerBound + length] == raw[last.lowerBound + length] { length += 1 }
            var heads = self.heads
            heads.reserveCapacity(ends.count)
            for i in 0..<ends.count { heads.append(Self.head(UnsafeRawBufferPointer(rebasing: raw[range(i)]), from: length)) }
            return (length, heads)
        }
        prefixLength = length
        self.heads = heads
    }

    /// Whether `key` starts with the prefix the keys share (and so can take a head as it is).
    @inline(__always)
    private func sharesPrefix(_ key: UnsafeRawBufferPointer) -> Bool {
        guard !ends.isEmpty else { return false }
        guard key.count >= prefixLength else { return false }
        guard prefixLength > 0 else { return true }
        return bytes.withUnsafeBytes { raw in memcmp(raw.baseAddress!, key.baseAddress!, prefixLength) == 0 }
    }

    /// Where `probe` stands against the shared prefix: `-1` below every key, `1` above every
    /// key, `0` when it starts with the prefix (its head then decides against the keys').
    @inline(__always)
    private func prefixOrder(_ probe: UnsafeRawBufferPointer, _ raw: UnsafeRawBufferPointer) -> Int {
        let shared = min(prefixLength, probe.count)
        if shared > 0, let a = probe.baseAddress, let b = raw.baseAddress {
            let order = memcmp(a, b, shared)
            if order != 0 { return order < 0 ? -1 : 1 }
        }
        // A probe shorter than the prefix is a proper prefix of every key: below them all.
        return probe.count < prefixLength ? -1 : 0
    }

    /// The index of the first key `>= probe`, and whether that key equals `probe`.
    @inline(__always)
    func lowerBound(_ probe: UnsafeRawBufferPointer) -> (index: Int, found: Bool) {
        search(probe, passingEqual: false)
    }

    /// The number of keys `<= probe`: in an internal node, the index of the child to descend.
    @inline(__always)
    func upperBound(_ probe: UnsafeRawBufferPointer) -> Int {
        search(probe, passingEqual: true).index
    }

    /// The binary search of both bounds: the first key above `probe` (`passingEqual`) or not
    /// below it, and whether a key equal to `probe` stopped the search (never when
    /// `passingEqual`). Heads decide; keys are compared byte by byte only when their head
    /// ties with the probe's.
    @inline(__always)
    private func search(_ probe: UnsafeRawBufferPointer, passingEqual: Bool) -> (index: Int, found: Bool) {
        bytes.withUnsafeBytes { raw in
            guard !ends.isEmpty else { return (0, false) }
            switch prefixOrder(probe, raw) {
            case -1: return (0, false)
            case 1: return (ends.count, false)
            default: break
            }
            let probeHead = Self.head(probe, from: prefixLength)
            return ends.withUnsafeBufferPointer { ends in
                heads.withUnsafeBufferPointer { heads in
                    var low = 0
                    var high = ends.count
                    while low < high {
                        let mid = (low + high) >> 1
                        let head = heads[mid]
                        let order: Int
                        if head != probeHead {
                            order = head < probeHead ? -1 : 1
                        } else {
                            let start = mid == 0 ? 0 : Int(ends[mid - 1])
                            order = compareKeys(
                                UnsafeRawBufferPointer(start: raw.baseAddress.map { $0 + start }, count: Int(ends[mid]) - start), probe)
                        }
                        if order < 0 || (passingEqual && order == 0) {
                            low = mid + 1
                        } else if order > 0 {
                            high = mid
                        } else {
                            return (mid, true)
                        }
                    }
                    return (low, false)
                }
            }
        }
    }

    /// Inserts `key` so that it becomes key `i`.
    mutating func insert(_ key: UnsafeRawBufferPointer, at i: Int, limit: Int) {
        let shares = sharesPrefix(key)
        let start = i == 0 ? 0 : Int(ends[i - 1])
        let length = UInt32(key.count)
        reserveRoom(&bytes, extra: key.count)
        reserveRoom(&ends, extra: 1, limit: limit)
        bytes.insert(contentsOf: key, at: start)
        ends.insert(UInt32(start) + length, at: i)
        if length != 0 { Self.shift(&ends, from: i + 1, by: length, up: true) }
        if shares {
            reserveRoom(&heads, extra: 1, limit: limit)
            heads.insert(Self.head(key, from: prefixLength), at: i)
        } else {
            rebuildHeads()
        }
    }

    /// Appends `key` after the last key.
    mutating func append(_ key: UnsafeRawBufferPointer) {
        let shares = sharesPrefix(key)
        bytes.appendBytes(key)
        ends.append(UInt32(bytes.count))
        if shares {
            heads.append(Self.head(key, from: prefixLength))
        } else {
            rebuildHeads()
        }
    }

    /// Appends all of `other`'s keys.
    mutating func append(contentsOf other: PackedKeys) {
        let base = UInt32(bytes.count)
        reserveRoom(&bytes, extra: other.bytes.count)
        reserveRoom(&ends, extra: other.count)
        bytes.append(contentsOf: other.bytes)
        for end in other.ends { ends.append(base + end) }
        reserveRoom(&heads, extra: other.count)
        rebuildHeads()
    }

    /// Adds `length` to (`up`) or takes it from every end from `start` on: one pass over the
    /// buffer, with no bounds or uniqueness check per end.
    @inline(__always)
    private static func shift(_ ends: inout [UInt32], from start: Int, by length: UInt32, up: Bool) {
        ends.withUnsafeMutableBufferPointer { buffer in
            guard start < buffer.count, let base = buffer.baseAddress else { return }
            var at = base + start
            let end = base + buffer.count
            if up {
                while at < end { at.pointee &+= length; at += 1 }
            } else {
                while at < end { at.pointee &-= length; at += 1 }
            }
        }
    }

    /// Removes key `i`. The keys left still share the prefix: it stays.
    mutating func remove(at i: Int) {
        let r = range(i)
        bytes.removeSubrange(r)
        ends.remove(at: i)
        heads.remove(at: i)
        let length = UInt32(r.count)
        if length != 0 { Self.shift(&ends, from: i, by: length, up: false) }
        if ends.isEmpty { prefixLength = 0 }
    }

    /// Replaces key `i` with `key`.
    mutating func replace(at i: Int, with key: [UInt8], limit: Int) {
        remove(at: i)
        key.withUnsafeBytes { insert($0, at: i, limit: limit) }
    }

    /// A fresh copy of keys `r`, sharing no storage, with room for about `slack` more keys.
    func slice(_ r: Range<Int>, slack: Int) -> PackedKeys {
        guard !r.isEmpty else { return PackedKeys() }
        let start = r.lowerBound == 0 ? 0 : Int(ends[r.lowerBound - 1])
        let end = Int(ends[r.upperBound - 1])
        let byteSlack = slack == 0 ? 0 : (end - start) / r.count * slack
        var sliceEnds: [UInt32] = []
        sliceEnds.reserveCapacity(r.count + slack)
        let base = UInt32(start)
        for j in r { sliceEnds.append(ends[j] - base) }
        var result = PackedKeys(bytes: freshArray(bytes[start..<end], slack: byteSlack), ends: sliceEnds)
        result.heads.reserveCapacity(r.count + slack)
        return result
    }
}

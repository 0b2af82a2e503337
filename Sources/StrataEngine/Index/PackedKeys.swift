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

/// Byte-string keys stored end to end in one buffer, with each key's end offset.
///
/// Key `i` is `bytes[ends[i - 1] ..< ends[i]]` (starting at 0 for `i == 0`). Two allocations
/// per node instead of one per key.
struct PackedKeys: Sendable {
    /// All keys, concatenated.
    var bytes: [UInt8] = []
    /// The end offset of each key in `bytes`.
    var ends: [UInt32] = []

    init() {}

    init(bytes: [UInt8], ends: [UInt32]) {
        self.bytes = bytes
        self.ends = ends
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

    /// Calls `body` with the bytes of key `i`.
    @inline(__always)
    func withKey<R>(_ i: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let r = range(i)
        return try bytes.withUnsafeBytes { raw in
            try body(UnsafeRawBufferPointer(rebasing: raw[r]))
        }
    }

    /// The index of the first key `>= probe`, and whether that key equals `probe`.
    @inline(__always)
    func lowerBound(_ probe: UnsafeRawBufferPointer) -> (index: Int, found: Bool) {
        bytes.withUnsafeBytes { raw in
            ends.withUnsafeBufferPointer { ends in
                var low = 0
                var high = ends.count
                while low < high {
                    let mid = (low + high) >> 1
                    let start = mid == 0 ? 0 : Int(ends[mid - 1])
                    let key = UnsafeRawBufferPointer(
                        start: raw.baseAddress.map { $0 + start }, count: Int(ends[mid]) - start)
                    let order = compareKeys(key, probe)
                    if order < 0 {
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

    /// The number of keys `<= probe`: in an internal node, the index of the child to descend.
    @inline(__always)
    func upperBound(_ probe: UnsafeRawBufferPointer) -> Int {
        bytes.withUnsafeBytes { raw in
            ends.withUnsafeBufferPointer { ends in
                var low = 0
                var high = ends.count
                while low < high {
                    let mid = (low + high) >> 1
                    let start = mid == 0 ? 0 : Int(ends[mid - 1])
                    let key = UnsafeRawBufferPointer(
                        start: raw.baseAddress.map { $0 + start }, count: Int(ends[mid]) - start)
                    if compareKeys(key, probe) <= 0 {
                        low = mid + 1
                    } else {
                        high = mid
                    }
                }
                return low
            }
        }
    }

    /// Inserts `key` so that it becomes key `i`.
    mutating func insert(_ key: UnsafeRawBufferPointer, at i: Int, limit: Int) {
        let start = i == 0 ? 0 : Int(ends[i - 1])
        let length = UInt32(key.count)
        reserveRoom(&bytes, extra: key.count)
        reserveRoom(&ends, extra: 1, limit: limit)
        bytes.insert(contentsOf: key, at: start)
        ends.insert(UInt32(start) + length, at: i)
        if length != 0 {
            for j in (i + 1)..<ends.count { ends[j] += length }
        }
    }

    /// Appends `key` after the last key.
    mutating func append(_ key: UnsafeRawBufferPointer) {
        bytes.append(contentsOf: key)
        ends.append(UInt32(bytes.count))
    }

    /// Appends all of `other`'s keys.
    mutating func append(contentsOf other: PackedKeys) {
        let base = UInt32(bytes.count)
        reserveRoom(&bytes, extra: other.bytes.count)
        reserveRoom(&ends, extra: other.count)
        bytes.append(contentsOf: other.bytes)
        for end in other.ends { ends.append(base + end) }
    }

    /// Removes key `i`.
    mutating func remove(at i: Int) {
        let r = range(i)
        bytes.removeSubrange(r)
        ends.remove(at: i)
        let length = UInt32(r.count)
        if length != 0 {
            for j in i..<ends.count { ends[j] -= length }
        }
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
        var result = PackedKeys(
            bytes: freshArray(bytes[start..<end], slack: byteSlack), ends: [])
        result.ends.reserveCapacity(r.count + slack)
        let base = UInt32(start)
        for j in r { result.ends.append(ends[j] - base) }
        return result
    }
}

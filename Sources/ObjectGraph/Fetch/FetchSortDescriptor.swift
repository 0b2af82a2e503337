import Foundation

/// One sort key of a fetch: a key path, a direction and string comparison options
/// (Core Data's `NSSortDescriptor`).
///
/// For example:
///
/// ```swift
/// request.sortDescriptors = [
///     FetchSortDescriptor(keyPath: "department.name"),
///     FetchSortDescriptor(keyPath: "name", options: .localizedStandard),
///     FetchSortDescriptor(keyPath: "projects.@count", ascending: false),
/// ]
/// ```
///
/// The key path may go through to-one relationships and may end with a collection
/// operator (`projects.@count`); a key path that yields several values (through a
/// to-many relationship) cannot be sorted on and throws.
///
/// Order: `null` is smaller than every value, as in Core Data's SQLite store, so nulls
/// come first in ascending order and last in descending order. Numbers compare across
/// widths; strings by Unicode scalar order unless ``options`` ask for case- or
/// diacritic-insensitive or numeric comparison; values of kinds that do not compare (a
/// string against a number) are ordered by kind name so that sorting stays total.
/// Sorting is stable: ties keep the order in which the candidates came.
public struct FetchSortDescriptor: Sendable, Hashable, CustomStringConvertible {
    /// The key path whose values are compared.
    public var keyPath: String
    /// Whether smaller values come first.
    public var ascending: Bool
    /// String comparison options: ``ComparisonOptions/caseInsensitive``,
    /// ``ComparisonOptions/diacriticInsensitive``, ``ComparisonOptions/numeric``, or
    /// ``ComparisonOptions/localizedStandard`` for all three.
    public var options: ComparisonOptions

    /// Creates a sort descriptor.
    public init(keyPath: String, ascending: Bool = true, options: ComparisonOptions = []) {
        self.keyPath = keyPath
        self.ascending = ascending
        self.options = options
    }

    /// A descriptor that orders strings as Finder does: case- and diacritic-insensitive,
    /// digit runs by value (Foundation's `localizedStandardCompare`, without locale rules).
    public static func localizedStandard(_ keyPath: String, ascending: Bool = true) -> FetchSortDescriptor {
        FetchSortDescriptor(keyPath: keyPath, ascending: ascending, options: .localizedStandard)
    }

    /// The descriptor with the opposite direction.
    public var reversed: FetchSortDescriptor {
        FetchSortDescriptor(keyPath: keyPath, ascending: !ascending, options: options)
    }

    /// The key path, the direction and the options, such as `name ASC [cd numeric]`.
    public var description: String {
        var flags: [String] = []
        if options.contains(.caseInsensitive) { flags.append("c") }
        if options.contains(.diacriticInsensitive) { flags.append("d") }
        if options.contains(.numeric) { flags.append("numeric") }
        return "\(keyPath) \(ascending ? "ASC" : "DESC")" + (flags.isEmpty ? "" : " [\(flags.joined(separator: " "))]")
    }

    /// The value this descriptor compares for one subject.
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidFetchRequest`` when the key path yields
    ///   several values, or the subject's error for an unknown key.
    public func sortValue<T: FetchEvaluable>(of subject: T) throws -> FetchValue {
        let value = try FetchExpression.read(keyPath, from: nil, subject: subject)
        if case .collection = value {
            throw ObjectGraphError(
                .invalidFetchRequest,
                "Cannot sort by \"\(keyPath)\": it reaches several values through a to-many relationship; sort by an aggregate such as \(keyPath.split(separator: ".").first.map(String.init) ?? keyPath).@count instead.",
                key: keyPath)
        }
        return value
    }

    /// Compares two subjects by this descriptor.
    public func compare(_ lhs: some FetchEvaluable, _ rhs: some FetchEvaluable) throws -> ComparisonResult {
        order(try sortValue(of: lhs), try sortValue(of: rhs))
    }

    /// Compares two values by this descriptor's direction and options.
    public func order(_ lhs: FetchValue, _ rhs: FetchValue) -> ComparisonResult {
        let result = FetchValue.sortOrder(lhs, rhs, options: options)
        guard !ascending else { return result }
        switch result {
        case .orderedAscending: return .orderedDescending
        case .orderedDescending: return .orderedAscending
        case .orderedSame: return .orderedSame
        }
    }

    /// Sorts subjects by several descriptors, the first deciding first; ties keep their
    /// original order. Each subject's values are read once.
    ///
    /// With `keeping`, only the first `keeping` subjects of that order are returned (a page's
    /// offset plus limit): they are selected in one pass, most subjects costing one comparison
    /// with the current last of the page, instead of sorting everything.
    public static func sort<T: FetchEvaluable>(_ items: [T], by descriptors: [FetchSortDescriptor], keeping: Int? = nil) throws -> [T] {
        guard !descriptors.isEmpty, items.count > 1 else { return keeping.map { Array(items.prefix($0)) } ?? items }
        var keys: [FetchValue] = []
        keys.reserveCapacity(items.count * descriptors.count)
        for item in items {
            for descriptor in descriptors { keys.append(try descriptor.sortValue(of: item)) }
        }
        return sort(items, keys: keys, by: descriptors, keeping: keeping)
    }

    /// Sorts items whose sort values were read already: `keys` holds, for each item in order,
    /// one value per descriptor (item `i`'s value for descriptor `d` at `i * descriptors.count
    /// + d`), as ``sortValue(of:)`` gives it. Stores that read the values faster than a key
    /// path can (by ordinal, each relationship destination once) sort with this; the order,
    /// ties and `keeping` are those of ``sort(_:by:keeping:)``.
    ///
    /// - Precondition: `keys.count == items.count * descriptors.count`.
    public static func sort<T>(_ items: [T], keys: [FetchValue], by descriptors: [FetchSortDescriptor], keeping: Int? = nil) -> [T] {
        guard !descriptors.isEmpty, items.count > 1 else { return keeping.map { Array(items.prefix($0)) } ?? items }
        return sortedIndices(keys: keys, count: items.count, by: descriptors, keeping: keeping).map { items[$0] }
    }

    /// The order of ``sort(_:keys:by:keeping:)`` as positions: the first (or the first
    /// `keeping`) of `0..<count` in sorted order. Not generic, so a store's sort of its own
    /// row type runs this code compiled once, not a generic version per call.
    ///
    /// - Precondition: `keys.count == count * descriptors.count`.
    public static func sortedIndices(keys: [FetchValue], count: Int, by descriptors: [FetchSortDescriptor], keeping: Int? = nil) -> [Int] {
        sortedIndices(keys: keys, count: count, by: descriptors, keeping: keeping, firstKeyBytes: nil)
    }

    /// ``sortedIndices(keys:count:by:keeping:)`` for a caller that has every item's first key
    /// as ASCII bytes already (one buffer, with where each item's bytes end), read from where
    /// the values are stored: those bytes order the items, and the first key of each item in
    /// `keys` is not read (any value will do there).
    ///
    /// - Precondition: the first descriptor compares without options.
    package static func sortedIndices(
        keys: [FetchValue], count: Int, by descriptors: [FetchSortDescriptor], keeping: Int?,
        firstKeyBytes: (bytes: [UInt8], ends: [Int])?
    ) -> [Int] {
        guard !descriptors.isEmpty, count > 1 else { return Array(0..<(keeping.map { min(max($0, 0), count) } ?? count)) }
        precondition(keys.count == count * descriptors.count, "one sort value per item and descriptor")
        precondition(firstKeyBytes == nil || (descriptors[0].options.isEmpty && firstKeyBytes?.ends.count == count))
        let stride = descriptors.count
        // A first key that is an ASCII string for every item, compared without options, orders
        // as its bytes do (ASCII is its own normal form): those bytes are compared instead,
        // from one buffer holding them all.
        let first = firstKeyBytes ?? (descriptors[0].options.isEmpty ? Self.asciiBytes(keys, stride: stride, count: count) : nil)
        let firstAscending = descriptors[0].ascending
        let hasFirst = first != nil
        // Each item's first eight bytes as one big-endian number (zero after its end): two
        // items whose numbers differ are ordered by them, as by their bytes, and only ties
        // compare the whole strings.
        let prefixes = first.map { Self.bytePrefixes($0.bytes, ends: $0.ends) } ?? []
        return (first?.bytes ?? []).withUnsafeBufferPointer { bytes in
            (first?.ends ?? []).withUnsafeBufferPointer { ends in
            prefixes.withUnsafeBufferPointer { prefixes in
            // A strict total order: ties keep their original order.
            func precedes(_ a: Int, _ b: Int) -> Bool {
                var start = 0
                if hasFirst {
                    if prefixes[a] != prefixes[b] { return firstAscending ? prefixes[a] < prefixes[b] : prefixes[a] > prefixes[b] }
                    let order = Self.byteOrder(bytes, a == 0 ? 0 : ends[a - 1], ends[a], b == 0 ? 0 : ends[b - 1], ends[b])
                    if order != 0 { return firstAscending ? order < 0 : order > 0 }
                    start = 1
                }
                for index in start..<stride {
                    let descriptor = descriptors[index]
                    switch descriptor.order(keys[a * stride + index], keys[b * stride + index]) {
                    case .orderedAscending: return true
                    case .orderedDescending: return false
                    case .orderedSame: continue
                    }
                }
                return a < b
            }
            if let keeping, keeping >= 0, keeping * 4 < count {
                guard keeping > 0 else { return [] }
                var page: [Int] = []  // the best so far, in order
                page.reserveCapacity(keeping + 1)
                for index in 0..<count {
                    if page.count == keeping, let last = page.last, !precedes(index, last) { continue }
                    var low = 0, high = page.count
                    while low < high {
                        let middle = (low + high) / 2
                        if precedes(page[middle], index) { low = middle + 1 } else { high = middle }
                    }
                    page.insert(index, at: low)
                    if page.count > keeping { page.removeLast() }
                }
                return page
            }
            var order = Array(0..<count)
            order.withUnsafeMutableBufferPointer { $0.sort(by: precedes) }
            return keeping.map { Array(order.prefix(max($0, 0))) } ?? order
            }
            }
        }
    }

    /// The first eight bytes of each item in `bytes` (item `i` ends at `ends[i]`) as a
    /// big-endian number, zero-padded past the item's end: where two numbers differ, they
    /// order the items as their bytes do (a shorter item reads as zeros where the longer
    /// one goes on, and a difference there puts the shorter first, as byte order does).
    private static func bytePrefixes(_ bytes: [UInt8], ends: [Int]) -> [UInt64] {
        bytes.withUnsafeBufferPointer { bytes in
            var start = 0
            return ends.map { end in
                var prefix: UInt64 = 0
                for index in 0..<8 {
                    prefix <<= 8
                    if start + index < end { prefix |= UInt64(bytes[start + index]) }
                }
                start = end
                return prefix
            }
        }
    }

    /// The UTF-8 bytes of each item's first key (`keys[i * stride]`) when every one is an
    /// ASCII string, one after another, with where each ends; `nil` otherwise.
    private static func asciiBytes(_ keys: [FetchValue], stride: Int, count: Int) -> (bytes: [UInt8], ends: [Int])? {
        var bytes: [UInt8] = []
        var ends: [Int] = []
        ends.reserveCapacity(count)
        for item in 0..<count {
            guard case .attribute(.string(var text)) = keys[item * stride] else { return nil }
            let ascii = text.withUTF8 { utf8 in
                guard !utf8.contains(where: { $0 >= 0x80 }) else { return false }
                bytes.append(contentsOf: utf8)
                return true
            }
            guard ascii else { return nil }
            ends.append(bytes.count)
        }
        return (bytes, ends)
    }

    /// The byte order of `bytes[aStart..<aEnd]` and `bytes[bStart..<bEnd]`: negative, zero or
    /// positive.
    private static func byteOrder(_ bytes: UnsafeBufferPointer<UInt8>, _ aStart: Int, _ aEnd: Int, _ bStart: Int, _ bEnd: Int) -> Int {
        let aCount = aEnd - aStart, bCount = bEnd - bStart
        let common = min(aCount, bCount)
        if common > 0, let base = bytes.baseAddress {
            let order = Int(memcmp(base + aStart, base + bStart, common))
            if order != 0 { return order }
        }
        return aCount - bCount
    }
}

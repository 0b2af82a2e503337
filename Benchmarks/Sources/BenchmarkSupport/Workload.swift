import StrataEngine

/// Keys, values and write patterns shared by the package-benchmark suite and `engine-report`,
/// so both measure the same work.
///
/// Keys are 16 bytes: `key` and a zero-padded decimal number, so numeric order is key order.
/// Values are 100 bytes, half random printable bytes and half a repeat of them (LevelDB's
/// `db_bench` data: LZ4 compresses it to a little over half).
public enum Workload {
    /// Bytes in every key.
    public static let keyLength = 16
    /// Bytes in every value.
    public static let valueLength = 100
    /// Operations per ``WriteBatch`` in the fill and overwrite workloads.
    public static let batchSize = 1000

    /// The key of number `index` (`0 ..< 10^13`).
    ///
    /// For example, `key(42)` is `"key0000000000042"`.
    public static func key(_ index: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: UInt8(ascii: "0"), count: keyLength)
        bytes[0] = UInt8(ascii: "k")
        bytes[1] = UInt8(ascii: "e")
        bytes[2] = UInt8(ascii: "y")
        var rest = index
        var position = keyLength - 1
        while rest > 0 && position >= 3 {
            bytes[position] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
            position -= 1
        }
        return bytes
    }

    /// The keys `0 ..< count`, in order.
    public static func keys(_ count: Int) -> [[UInt8]] {
        (0..<count).map(key)
    }

    /// `count` distinct half-compressible values, from a fixed seed.
    public static func values(_ count: Int = 4096, seed: UInt64 = 0x5EED) -> [[UInt8]] {
        var random = SplitMix64(seed: seed)
        return (0..<count).map { _ in
            let half = (0..<(valueLength / 2)).map { _ in UInt8(0x20 + random.next() % 95) }
            return Array((half + half).prefix(valueLength))
        }
    }

    /// The numbers `0 ..< count` in a random order, from a fixed seed.
    public static func shuffledIndices(_ count: Int, seed: UInt64 = 0xD1CE) -> [Int] {
        var random = SplitMix64(seed: seed)
        return Array(0..<count).shuffled(using: &random)
    }

    /// `count` numbers drawn uniformly, with replacement, from `0 ..< range`.
    public static func randomIndices(_ count: Int, in range: Int, seed: UInt64 = 0xF00D) -> [Int] {
        var random = SplitMix64(seed: seed)
        return (0..<count).map { _ in Int(random.next() % UInt64(range)) }
    }

    /// Commits `keys[i]` for each `i` of `order`, in batches of ``batchSize``, with values taken
    /// in turn from `values`.
    public static func fill(
        _ engine: Engine, keys: [[UInt8]], order: [Int], values: [[UInt8]], batchSize: Int = batchSize
    ) throws(StoreError) {
        var batch = WriteBatch()
        for (n, index) in order.enumerated() {
            batch.put(keys[index], values[n % values.count])
            if batch.count == batchSize {
                try engine.commit(batch)
                batch = WriteBatch()
            }
        }
        if !batch.isEmpty { try engine.commit(batch) }
    }

    /// Options for a benchmark store: the engine's defaults with `durability`, and the WAL
    /// rollover size and row cache budget when given (a budget of 0 sends every read to the files).
    public static func options(
        _ durability: Durability, walRolloverBytes: UInt64? = nil, rowCacheBytes: Int? = nil
    ) -> EngineOptions {
        var options = EngineOptions()
        options.durability = durability
        if let walRolloverBytes { options.walRolloverBytes = walRolloverBytes }
        if let rowCacheBytes { options.rowCacheBytes = rowCacheBytes }
        return options
    }
}

/// A small, fast, seedable generator (SplitMix64), so every run uses the same data.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator that starts from `seed`.
    public init(seed: UInt64) { state = seed }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

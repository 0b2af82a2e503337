import Foundation

/// Zipf-distributed ranks: rank `r` of `0 ..< count` is drawn with probability proportional to
/// `1 / (r + 1)^exponent`, so rank 0 is the most frequent.
///
/// Draws invert the cumulative distribution with a binary search over a precomputed table:
/// exact for any exponent (including 1), O(`count`) memory and setup, O(log `count`) a draw.
///
/// For example, with `count` 50,000 and exponent 0.99 rank 0 comes about 8% of the time and the
/// top 1% of ranks about 58% of the time.
public struct ZipfGenerator: Sendable {
    /// How many ranks there are.
    public let count: Int
    /// The skew `s`: 0 is uniform, larger is more skewed.
    public let exponent: Double
    /// `cumulative[r]` is the probability of drawing a rank `<= r`; the last element is 1.
    private let cumulative: [Double]

    /// A generator over ranks `0 ..< count` (at least 1) with skew `exponent` (at least 0).
    public init(count: Int, exponent: Double) {
        precondition(count > 0 && exponent >= 0, "ZipfGenerator needs count > 0 and exponent >= 0")
        self.count = count
        self.exponent = exponent
        var sums: [Double] = []
        sums.reserveCapacity(count)
        var total = 0.0
        for rank in 0..<count {
            total += 1 / pow(Double(rank + 1), exponent)
            sums.append(total)
        }
        // x / x == 1 exactly, so the last element is 1 and every draw in [0, 1) finds a rank.
        cumulative = sums.map { $0 / total }
    }

    /// The probability that a draw falls among the `top` most frequent ranks (`0 ..< top`).
    public func mass(ofTop top: Int) -> Double {
        top <= 0 ? 0 : cumulative[min(top, count) - 1]
    }

    /// The next rank, using `generator` for one uniform draw.
    public func next<G: RandomNumberGenerator>(using generator: inout G) -> Int {
        let uniform = Double.random(in: 0..<1, using: &generator)
        var low = 0
        var high = count - 1
        while low < high {
            let middle = (low + high) / 2
            if cumulative[middle] > uniform { high = middle } else { low = middle + 1 }
        }
        return low
    }
}

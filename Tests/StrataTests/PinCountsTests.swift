@testable import Strata
import Testing

/// The row pins' count table against a dictionary: random registers and unregisters of
/// references in sequence, scattered and colliding, unregisters of rows never registered,
/// reservations, and the table growing and shrinking as a large fetch's rows come and go.
@Suite struct PinCountsTests {
    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func pinCountsMatchADictionary(seed: UInt64) {
        var random = DiffRandom(seed: seed)
        func next() -> UInt64 { random.next() }
        // References in a run (as a store allocates them), far apart, and multiples of a
        // large power of two (equal low bits).
        let pool: [Int64] = (1...400).map { Int64($0) } + (0..<100).map { _ in Int64(bitPattern: next()) } + (1...100).map { Int64($0) << 40 }
        var table = PinCounts()
        var model: [Int64: Int] = [:]
        for step in 0..<20_000 {
            let key = pool[Int(next() % UInt64(pool.count))]
            switch next() % 10 {
            case 0..<5:
                table.increment(key)
                model[key, default: 0] += 1
            case 5..<9:
                let expected = model[key] != nil
                let decremented = table.decrement(key)
                #expect(decremented == expected, "step \(step)")
                if let count = model[key] { model[key] = count > 1 ? count - 1 : nil }
            default:
                table.reserveCapacity(table.count + Int(next() % 300))
            }
            #expect(table.count == model.count)
            #expect(table.count(of: key) == model[key] ?? 0)
        }
        for key in pool { #expect(table.count(of: key) == model[key] ?? 0) }
        // Everything released: the table is empty.
        for (key, count) in model {
            for _ in 0..<count {
                let decremented = table.decrement(key)
                #expect(decremented)
            }
        }
        #expect(table.isEmpty)
        for key in pool {
            let decremented = table.decrement(key)
            #expect(table.count(of: key) == 0 && !decremented)
        }
    }

    /// A very large fetch's rows registered in one batch and released one by one: the table
    /// grows, then shrinks back to the size it keeps; smaller fetches leave it as it is.
    @Test func aLargeBatchGrowsThenShrinks() {
        var table = PinCounts()
        table.reserveCapacity(100_000)
        for reference in 1...100_000 { table.increment(Int64(reference)) }
        #expect(table.count == 100_000 && table.capacity >= 200_000)
        for reference in stride(from: 100_000, through: 1, by: -1) {
            let decremented = table.decrement(Int64(reference))
            #expect(decremented)
        }
        #expect(table.isEmpty && table.capacity <= 16_384)
        let kept = table.capacity
        for reference in 1...3_000 { table.increment(Int64(reference)) }
        for reference in 1...3_000 { _ = table.decrement(Int64(reference)) }
        #expect(table.isEmpty && table.capacity == kept)
    }
}

import Foundation
import Testing

@testable import Strata

/// A save writes its rows in key order (`StrataStore.inKeyOrder`): row keys ([KEY-2]) grouped by
/// entity and sorted by reference as integers, other keys by their bytes. Checked against a
/// plain byte-order sort, with the rows' positions kept (equal keys stay in their order).
@Suite struct SaveOrderTests {
    /// Rows of a few entities in random order, with references of every size and sign.
    @Test func rowKeysComeInTheOrderOfTheirBytes() {
        var generator = SystemRandomNumberGenerator()
        let roots = ["Order", "Customer", "Cust", "Product", "É", "A"]
        for round in 0..<200 {
            let count = Int.random(in: 0...300, using: &generator)
            let width = round % 4
            let keys: [[UInt8]] = (0..<count).map { _ in
                let root = roots[Int.random(in: 0..<(1 + round % roots.count), using: &generator)]
                let reference: Int64 = switch width {
                case 0: Int64.random(in: 1...1_000, using: &generator)
                case 1: Int64.random(in: 1...(1 << 40), using: &generator)
                case 2: Int64.random(in: -5...5, using: &generator)
                default: Int64.random(in: .min ... .max, using: &generator)
                }
                return KeyLayout.rowKey(root: root, reference: reference)
            }
            expectByteOrder(keys)
        }
    }

    /// Keys of other shapes (short, of one length, mixed with row keys; more than 16 entities):
    /// the byte order still.
    @Test func otherKeysComeInTheOrderOfTheirBytes() {
        var generator = SystemRandomNumberGenerator()
        for round in 0..<200 {
            let count = Int.random(in: 0...200, using: &generator)
            let keys: [[UInt8]] = (0..<count).map { _ in
                switch round % 3 {
                case 0:
                    return (0..<Int.random(in: 0...12, using: &generator)).map { _ in UInt8.random(in: 0...3, using: &generator) }
                case 1:
                    return KeyLayout.rowKey(root: "E\(Int.random(in: 0..<40, using: &generator))", reference: Int64.random(in: 1...50, using: &generator))
                default:
                    return Bool.random(using: &generator)
                        ? KeyLayout.rowKey(root: "Order", reference: Int64.random(in: 1...50, using: &generator))
                        : [0x01] + Array("Order".utf8) + [UInt8.random(in: 0...255, using: &generator)]
                }
            }
            expectByteOrder(keys)
        }
    }

    /// Sorted rows come back as they were.
    @Test func rowsInOrderAreKept() {
        let keys = (1...50).map { KeyLayout.rowKey(root: "Order", reference: Int64($0)) }
        #expect(StrataStore.inKeyOrder(Array(keys.indices), key: { keys[$0] }) == Array(keys.indices))
    }

    private func expectByteOrder(_ keys: [[UInt8]]) {
        let positions = Array(keys.indices)
        let expected = positions.sorted { a, b in
            keys[a].lexicographicallyPrecedes(keys[b]) || (keys[a] == keys[b] && a < b)
        }
        let ordered = StrataStore.inKeyOrder(positions, key: { keys[$0] })
        #expect(ordered.map { keys[$0] } == expected.map { keys[$0] }, "\(keys.count) keys")
        #expect(Set(ordered) == Set(positions))
    }
}

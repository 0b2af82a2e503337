@testable import Strata
import Testing

/// [FETCH-S10] Grouped member counts are found by position in the owners' reference order
/// (from the last lookup, else by binary search): random lookups, in runs up and down and
/// at random, of owners with and without members, against a dictionary.
@Suite struct GroupedMemberCountTests {
    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func lookupsInAnyOrderAnswerAsADictionary(seed: UInt64) {
        var random = DiffRandom(seed: seed)
        var oracle: [Int64: Int] = [:]
        for _ in 0..<random.int(0...200) { oracle[Int64(random.int(-500...500))] = random.int(1...9) }
        var counts = StrataStore.RowSource.MemberCounts(relationship: ObjectIdentifier(GroupedMemberCountTests.self), prefix: [], keys: 0, threshold: 0)
        let owners = oracle.keys.sorted()
        counts.owners = owners
        counts.counts = owners.map { oracle[$0] ?? 0 }
        var lookups: [Int64] = []
        for _ in 0..<40 {
            let start = Int64(random.int(-520...520)), length = random.int(1...60)
            switch random.int(0...2) {
            case 0: lookups += (0..<length).map { start + Int64($0) }
            case 1: lookups += (0..<length).map { start - Int64($0) }
            default: lookups += (0..<length).map { _ in Int64(random.int(-520...520)) }
            }
        }
        lookups += [.min, .max, owners.first ?? 0, owners.last ?? 0]
        for reference in lookups {
            #expect(counts.count(of: reference) == oracle[reference] ?? 0, "seed \(seed), owner \(reference)")
        }
    }
}

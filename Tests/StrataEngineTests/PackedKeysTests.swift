import Testing

@testable import StrataEngine

/// The searches of a node's packed keys decide mostly on integer heads after a shared prefix;
/// they must answer as a search by bytes does, for keys shorter than the prefix plus eight,
/// keys that are prefixes of others, zero bytes (a head pads with zeros) and 0xFF, whatever
/// sequence of inserts, appends and removals built the node.
@Suite struct PackedKeysTests {
    /// Every byte string over `alphabet` of length up to `length`, after `prefix`.
    static func keys(prefix: [UInt8], alphabet: [UInt8], upTo length: Int) -> [[UInt8]] {
        var result: [[UInt8]] = [prefix]
        var frontier: [[UInt8]] = [prefix]
        for _ in 0..<length {
            frontier = frontier.flatMap { key in alphabet.map { key + [$0] } }
            result += frontier
        }
        return result
    }

    /// `keys`'s answers against a linear search of `model` (ascending), for every probe.
    static func expectSearchesMatch(_ keys: PackedKeys, _ model: [[UInt8]], probes: [[UInt8]]) {
        #expect(keys.count == model.count)
        for (i, key) in model.enumerated() { #expect(keys.key(i) == key) }
        for probe in probes {
            let lower = model.firstIndex { compareKeys($0, probe) >= 0 } ?? model.count
            let upper = model.firstIndex { compareKeys($0, probe) > 0 } ?? model.count
            let found = probe.withUnsafeBytes { keys.lowerBound($0) }
            #expect(found.index == lower && found.found == (lower < model.count && model[lower] == probe), "lowerBound \(probe)")
            #expect(probe.withUnsafeBytes { keys.upperBound($0) } == upper, "upperBound \(probe)")
        }
    }

    @Test(arguments: [[], [7, 7, 7], Array(repeating: UInt8(0xFF), count: 9)] as [[UInt8]])
    func searchesAnswerAsAByteSearchWhateverBuiltTheKeys(prefix: [UInt8]) {
        // Lengths past prefix + 8 exercise ties of heads; 0 and 0xFF the padding and the top.
        let universe = Self.keys(prefix: prefix, alphabet: [0, 1, 0xFF], upTo: 4)
            + [prefix + Array(repeating: 0, count: 10), prefix + Array(repeating: 0xFF, count: 10) + [0]]
        let probes = Self.keys(prefix: [], alphabet: [0, 7, 0xFF], upTo: 3) + universe + [prefix + [1, 0, 0, 0, 0, 0, 0, 0, 0, 1]]
        var generator = SeededRandom(seed: UInt64(prefix.count))
        for round in 0..<6 {
            var keys = PackedKeys()
            var model: [[UInt8]] = []
            // Random inserts (each where it sorts), with appends of a new largest key.
            for key in universe.shuffled(using: &generator).prefix(40 + 20 * round) {
                let (index, found) = key.withUnsafeBytes { keys.lowerBound($0) }
                guard !found else { continue }
                if index == keys.count, Bool.random(using: &generator) {
                    key.withUnsafeBytes { keys.append($0) }
                } else {
                    key.withUnsafeBytes { keys.insert($0, at: index, limit: .max) }
                }
                model.insert(key, at: index)
            }
            Self.expectSearchesMatch(keys, model, probes: probes)
            // Removals keep the prefix (still shared); slices and merges rebuild it.
            for _ in 0..<(model.count / 2) {
                let index = Int.random(in: 0..<model.count, using: &generator)
                keys.remove(at: index)
                model.remove(at: index)
            }
            Self.expectSearchesMatch(keys, model, probes: probes)
            let cut = model.count / 3
            var merged = keys.slice(0..<cut, slack: 2)
            merged.append(contentsOf: keys.slice(cut..<model.count, slack: 0))
            Self.expectSearchesMatch(merged, model, probes: probes)
            Self.expectSearchesMatch(PackedKeys(bytes: keys.bytes, ends: keys.ends), model, probes: probes)
        }
    }
}

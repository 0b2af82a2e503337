import Testing

@testable import StrataEngine

/// [REC-5] Open's merge of several segments' hints into the index, against a plain model: per
/// key the highest sequence wins, a winning delete leaves no key, and each file's entry,
/// tombstone and dead bytes are counted. The lists are shaped as stores leave them: runs of
/// keys that no other segment has (successive saves), keys spread over the whole space
/// (updates), and both at once, so that the merge's runs, ties and interleavings all occur.
@Suite struct HintMergeTests {
    struct Hint {
        var key: Int
        var isDelete: Bool
        var sequence: UInt64
        var length: UInt32
    }

    /// `count` lists of hints over keys `0..<universe`, each ascending, with sequences unique
    /// across the lists.
    static func lists(count: Int, universe: Int, using rng: inout SeededRandom) -> [[Hint]] {
        var keyLists: [[Int]] = []
        for _ in 0..<count {
            switch Int.random(in: 0..<3, using: &rng) {
            case 0:  // a run of consecutive keys
                let start = Int.random(in: 0..<universe, using: &rng)
                let end = Int.random(in: start...min(universe - 1, start + universe / 3), using: &rng)
                keyLists.append(Array(start...end))
            case 1:  // keys spread over the whole space
                keyLists.append((0..<universe).filter { _ in Int.random(in: 0..<4, using: &rng) == 0 })
            default:  // a few runs with gaps between them
                var keys: [Int] = []
                var key = Int.random(in: 0..<8, using: &rng)
                while key < universe {
                    let run = Int.random(in: 1...6, using: &rng)
                    keys.append(contentsOf: key..<min(universe, key + run))
                    key += run + Int.random(in: 1...10, using: &rng)
                }
                keyLists.append(keys)
            }
        }
        let total = keyLists.reduce(0) { $0 + $1.count }
        var sequences = (1...UInt64(max(total, 1))).shuffled(using: &rng)
        return keyLists.map { keys in
            keys.map { key in
                Hint(
                    key: key, isDelete: Int.random(in: 0..<5, using: &rng) == 0, sequence: sequences.removeLast(),
                    length: UInt32.random(in: 1...50, using: &rng))
            }
        }
    }

    static func key(_ n: Int) -> [UInt8] { testKey(n) }

    @Test func mergedHintsKeepEachKeysNewestEntryAndCountEveryFilesBytes() throws {
        var rng = SeededRandom(seed: 17)
        for round in 0..<400 {
            let count = Int.random(in: 1...5, using: &rng)
            let universe = Int.random(in: 1...80, using: &rng)
            let lists = Self.lists(count: count, universe: universe, using: &rng)

            // The model: each key's newest hint, and each file's bytes.
            var newest: [Int: (list: Int, hint: Hint)] = [:]
            for (list, hints) in lists.enumerated() {
                for hint in hints where hint.sequence > (newest[hint.key]?.hint.sequence ?? 0) {
                    newest[hint.key] = (list, hint)
                }
            }
            var expectedUsage: [UInt32: FileUsage] = [:]
            for (list, hints) in lists.enumerated() where !hints.isEmpty {
                var usage = FileUsage()
                for hint in hints {
                    usage.entryBytes += UInt64(hint.length)
                    if hint.isDelete {
                        usage.tombstoneBytes += UInt64(hint.length)
                    } else if newest[hint.key]?.hint.sequence != hint.sequence {
                        usage.deadBytes += UInt64(hint.length)
                    }
                }
                expectedUsage[UInt32(list + 1)] = usage
            }
            let expected = newest.filter { !$0.value.hint.isDelete }.sorted { $0.key < $1.key }

            var cursors = lists.enumerated().map { list, hints in
                var packed = PackedHints()
                for hint in hints {
                    let location = ValueLocation(fileNumber: UInt32(list + 1), position: 0, offset: 0, length: hint.length)
                    Self.key(hint.key).withUnsafeBytes {
                        packed.append(key: $0, isDelete: hint.isDelete, sequence: hint.sequence, location: location)
                    }
                }
                return PackedHintCursor(packed, fileNumber: UInt32(list + 1))
            }
            var usage: [UInt32: FileUsage] = [:]
            let index = try Engine.buildIndex(from: &cursors, usage: &usage)
            try index.checkInvariants()

            var built: [([UInt8], IndexEntry)] = []
            var cursor = index.cursor()
            while let next = cursor.next() { built.append(next) }
            #expect(built.map(\.0) == expected.map { Self.key($0.key) }, "round \(round): the live keys in order")
            #expect(
                built.map(\.1) == expected.map {
                    IndexEntry(
                        sequence: $0.value.hint.sequence,
                        location: ValueLocation(fileNumber: UInt32($0.value.list + 1), position: 0, offset: 0, length: $0.value.hint.length))
                }, "round \(round): each key's newest entry")
            #expect(usage == expectedUsage, "round \(round): each file's bytes")
            #expect(cursors.allSatisfy { $0.isAtEnd }, "round \(round): every hint read")
        }
    }
}

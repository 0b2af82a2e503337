import Testing

@testable import StrataEngine

/// [REC-5] Open's index build on two threads (the key space cut at a key, each half merged
/// from its own hint cursors, the leaves joined) against the one-thread merge of the same
/// segments: the same index, file usage and smallest sequences, and the same damage found.
@Suite struct SplitIndexBuildTests {
    /// What a build gives, in comparable form.
    struct Built: Equatable {
        var entries: [[UInt8]: IndexEntry] = [:]
        var order: [[UInt8]] = []
        var usage: [UInt32: FileUsage] = [:]
        var minimumSequences: [UInt32: UInt64] = [:]
    }

    /// Builds the index of `readers` on one thread (`split` false) or two.
    static func build(_ readers: [SegmentReader], split: Bool) throws(StoreError) -> Built {
        var built = Built()
        let index = try Engine.buildIndex(
            from: readers, usage: &built.usage, minimumSequences: &built.minimumSequences, parallelFrom: split ? 0 : .max)
        try index.checkInvariants()
        var cursor = index.cursor()
        while let (key, entry) = cursor.next() {
            built.entries[key] = entry
            built.order.append(key)
        }
        #expect(index.count == built.order.count)
        return built
    }

    /// The segments an engine leaves after `rounds` flushes of random puts and deletes over
    /// `keys` keys (512-byte blocks, so each segment has many hint blocks), with the live keys.
    static func segments(seed: UInt64, rounds: Int, keys: Int) throws -> ([SegmentReader], Set<[UInt8]>) {
        let fs = FaultInjectingFileSystem()
        let engine = try Engine.open(at: "/store", options: testOptions(fs, rollover: 1 << 30))
        var rng = SeededRandom(seed: seed)
        var model: [[UInt8]: [UInt8]] = [:]
        for _ in 0..<rounds {
            let batch = ModelBatch.random(keys: keys, maxOperations: keys / 2, maxValue: 40, using: &rng)
            try engine.commit(batch.writeBatch)
            batch.apply(to: &model)
            try engine.flush()
        }
        try engine.close()
        let manifest = try #require(try Manifest.load(fileSystem: fs, directory: "/store"))
        let readers = try manifest.segments.map { segment throws(StoreError) in
            try SegmentReader.open(
                fileSystem: fs, path: "/store/" + Format.segmentFileName(segment.fileNumber), fileNumber: segment.fileNumber)
        }
        return (readers, Set(model.keys))
    }

    @Test func twoThreadsBuildWhatOneThreadBuildsFromOneOrManySegments() throws {
        for seed in UInt64(1)...4 {
            for rounds in [1, 2, 5] {
                let (readers, live) = try Self.segments(seed: seed, rounds: rounds, keys: 600)
                #expect(readers.count == rounds)
                #expect(readers.contains { $0.hintBlocks.count >= 2 })
                let one = try Self.build(readers, split: false)
                let two = try Self.build(readers, split: true)
                #expect(one == two, "seed \(seed), \(rounds) segments")
                #expect(Set(one.order) == live, "seed \(seed), \(rounds) segments")
            }
        }
    }

    /// The result of reading a crafted segment 5 made of `keys` in hint blocks as `split` says.
    static func crafted(_ keys: [String], split: [Int], entryCount: Int? = nil, twoThreads: Bool) -> Result<Built, StoreError> {
        let fs = FaultInjectingFileSystem()
        fs.setContents(DecoderRobustnessTests.segment(keys: keys, split: split, entryCount: entryCount), of: "/f/00000005.seg")
        do throws(StoreError) {
            let reader = try SegmentReader.open(fileSystem: fs, path: "/f/00000005.seg", fileNumber: 5)
            return .success(try build([reader], split: twoThreads))
        } catch {
            return .failure(error)
        }
    }

    @Test func everyNeighbourOutOfOrderIsFoundWhereverTheCutFalls() throws {
        let keys = (0..<12).map { String(UnicodeScalar(UInt8(ascii: "a") + UInt8($0))) }
        for split in [[3, 3, 3, 3], [1, 5, 0, 6], [6, 6], [2, 2, 2, 2, 2, 2]] {
            let one = try Self.crafted(keys, split: split, twoThreads: false).get()
            let two = try Self.crafted(keys, split: split, twoThreads: true).get()
            #expect(one == two && one.order.count == keys.count, "\(split)")
            for i in 0..<(keys.count - 1) {
                for swapped in [keys[..<i] + [keys[i + 1], keys[i]] + keys[(i + 2)...], keys[..<i] + [keys[i], keys[i]] + keys[(i + 2)...]] {
                    for twoThreads in [false, true] {
                        guard case .failure(let error) = Self.crafted(Array(swapped), split: split, twoThreads: twoThreads) else {
                            Issue.record("\(swapped) in blocks \(split) was built (two threads: \(twoThreads))")
                            continue
                        }
                        #expect(error.code == .corruption && error.message.contains("ascending key order"), "\(swapped) \(split): \(error)")
                    }
                }
            }
        }
    }

    @Test func hintsFewerOrMoreThanTheFooterCountsAreFoundByBothBuilds() {
        let keys = (0..<12).map { String(UnicodeScalar(UInt8(ascii: "a") + UInt8($0))) }
        for count in [0, 11, 13] {
            for twoThreads in [false, true] {
                guard case .failure(let error) = Self.crafted(keys, split: [3, 3, 3, 3], entryCount: count, twoThreads: twoThreads) else {
                    Issue.record("footer count \(count) for 12 hints was accepted (two threads: \(twoThreads))")
                    continue
                }
                #expect(error.code == .corruption && error.message.contains("footer counts \(count) entries"), "\(count): \(error)")
            }
        }
    }
}

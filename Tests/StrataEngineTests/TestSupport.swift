import Testing
@testable import StrataEngine

/// A small deterministic random number generator (SplitMix64) so every test run is repeatable.
struct SeededRandom: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255, using: &self) } }
}

/// `key-0042` style keys, so ordering is easy to read in failures.
func testKey(_ n: Int) -> [UInt8] {
    let digits = String(n)
    return Array(("key-" + String(repeating: "0", count: max(0, 5 - digits.count)) + digits).utf8)
}

/// Options for tests: in-memory fault-injecting file system, inline flushes, invariant checks.
func testOptions(_ fs: FaultInjectingFileSystem, rollover: UInt64 = 4096, durability: Durability = .full) -> EngineOptions {
    var options = EngineOptions()
    options.fileSystem = fs
    options.walRolloverBytes = rollover
    options.blockSize = 512
    options.backgroundFlush = false
    options.checkInvariants = true
    options.durability = durability
    options.compaction.automatic = false  // tests compact explicitly, so sync points are deterministic
    // Files hold exactly what was written ([WAL-6]'s zeros ahead of the records are tested on
    // their own, in WALPreallocationTests).
    options.walPreallocationBytes = 0
    return options
}

/// Everything the engine holds, as a dictionary.
func contents(of engine: Engine) throws -> [[UInt8]: [UInt8]] {
    var result: [[UInt8]: [UInt8]] = [:]
    for (key, value) in try engine.snapshot().scan() { result[key] = value }
    return result
}

/// A model transaction: applies to a dictionary as the engine should.
struct ModelBatch {
    var operations: [(key: [UInt8], value: [UInt8]?)] = []

    var writeBatch: WriteBatch {
        var batch = WriteBatch()
        for operation in operations {
            if let value = operation.value { batch.put(operation.key, value) } else { batch.delete(operation.key) }
        }
        return batch
    }

    func apply(to model: inout [[UInt8]: [UInt8]]) {
        for operation in operations { model[operation.key] = operation.value }
    }

    static func random(keys: Int, maxOperations: Int, maxValue: Int, using rng: inout SeededRandom) -> ModelBatch {
        var batch = ModelBatch()
        for _ in 0..<Int.random(in: 1...maxOperations, using: &rng) {
            let key = testKey(Int.random(in: 0..<keys, using: &rng))
            if Int.random(in: 0..<5, using: &rng) == 0 {
                batch.operations.append((key, nil))
            } else {
                batch.operations.append((key, rng.bytes(Int.random(in: 0...maxValue, using: &rng))))
            }
        }
        return batch
    }
}

/// The `StoreError` that `body` throws, or `nil` if it returns. Any other error is recorded as
/// a test issue. (An untyped closure: Swift 6.3 does not infer typed throws from context here.)
func caught<T>(_ body: () throws -> T) -> StoreError? {
    do {
        _ = try body()
        return nil
    } catch let error as StoreError {
        return error
    } catch {
        Issue.record("expected a StoreError, got \(error)")
        return nil
    }
}

/// [DUR-1] Rewrites the store's `SYNC` record to say that only transactions up to `sequence`
/// were synced (keeping the WAL it names): the commits after it become a tail that was never
/// acknowledged, as when a crash came before their sync.
func setDurableBound(_ fs: FaultInjectingFileSystem, _ sequence: UInt64, store: String = "/store") throws {
    let path = store + "/" + Format.syncFileName
    let current = try #require(try SyncRecord.decode(fs.contents(of: path) ?? [], path: path))
    fs.setContents(SyncRecord(walNumber: current.walNumber, sequence: sequence, walEnd: current.walEnd).encodeFile(), of: path)
}

import StrataSync

/// Decompressed segment data blocks, shared by every snapshot of one engine and bounded by
/// bytes: a scan or a row-cache miss that needs a block another read decompressed takes it
/// from here instead of reading, checking and decompressing it again.
///
/// Blocks are immutable once written and checked ([SEG-3]) when first read, so a cached
/// block is the block on disk. Keys are (reader, block position), where each
/// ``SegmentReader`` takes a fresh reader number from the cache when it opens and drops its
/// blocks when it closes: a segment that compaction deleted, or a file number reused by
/// another open, never answers from here.
///
/// Eviction is CLOCK (second chance): a hit marks the block, and the hand passing a marked
/// block clears the mark instead of evicting it, so blocks a scan reads again outlive blocks
/// read once, at the cost of a flag per hit rather than a list move.
///
/// Cost: a lookup or an insert is one lock, one hash of a 12-byte key and O(1) amortised
/// eviction; a hit hands out the block by reference (a retain, no copy). ``drop(reader:)``
/// is O(blocks cached).
final class BlockCache: Sendable {
    /// A block: the reader that read it and its position among the reader's data blocks.
    struct Key: Hashable {
        var reader: UInt64
        var position: UInt32
    }

    /// One cached block in the clock.
    private struct Slot {
        var key: Key
        var block: SegmentBlock
        /// Set by a hit; the hand clears it once before evicting the block.
        var referenced: Bool
    }

    /// Everything that changes: protected by ``state``'s lock.
    private struct State {
        /// The clock; `nil` where a block was dropped (its index is in ``free``).
        var slots: [Slot?] = []
        var positions: [Key: Int] = [:]
        var free: [Int] = []
        var hand = 0
        var bytes = 0
        var nextReader: UInt64 = 1
        var stats = BlockCacheStats()
    }

    /// The most bytes of decompressed blocks kept; 0 keeps none.
    let capacityBytes: Int
    /// Protects the clock, the key table, the byte total, the reader numbers and the counters.
    private let state = Locked(State())

    /// Creates an empty cache that keeps up to `capacityBytes` of blocks (a negative
    /// capacity is 0).
    init(capacityBytes: Int) {
        self.capacityBytes = max(0, capacityBytes)
    }

    /// A reader number no other reader of this cache has had.
    func newReader() -> UInt64 {
        state.withLock { state in
            defer { state.nextReader += 1 }
            return state.nextReader
        }
    }

    /// The cached block at `key`, marking it used, or `nil` (counted as a miss).
    func block(_ key: Key) -> SegmentBlock? {
        state.withLock { state in
            guard let index = state.positions[key] else {
                state.stats.misses += 1
                return nil
            }
            state.stats.hits += 1
            state.slots[index]?.referenced = true
            return state.slots[index]?.block
        }
    }

    /// Caches `block` at `key`, evicting blocks not used since the hand last passed them
    /// until it fits. A block larger than the whole capacity is not cached; a key already
    /// cached keeps its block (both hold the same bytes).
    func insert(_ key: Key, _ block: SegmentBlock) {
        let size = block.bytes.count
        guard capacityBytes > 0, size <= capacityBytes else { return }
        state.withLock { state in
            guard state.positions[key] == nil else { return }
            while state.bytes + size > capacityBytes, evictOne(&state) {}
            let slot = Slot(key: key, block: block, referenced: false)
            let index: Int
            if let reused = state.free.popLast() {
                index = reused
                state.slots[index] = slot
            } else {
                index = state.slots.count
                state.slots.append(slot)
            }
            state.positions[key] = index
            state.bytes += size
        }
    }

    /// Drops every block of `reader` (a segment reader closing).
    func drop(reader: UInt64) {
        state.withLock { state in
            for (index, slot) in state.slots.enumerated() where slot?.key.reader == reader {
                remove(at: index, &state)
            }
        }
    }

    /// The cache's counters.
    var stats: BlockCacheStats {
        state.withLock { state in
            var stats = state.stats
            stats.blocks = state.positions.count
            stats.bytes = state.bytes
            stats.capacityBytes = capacityBytes
            return stats
        }
    }

    /// Moves the hand to the next block not used since it last passed, and evicts it;
    /// `false` when nothing is cached.
    private func evictOne(_ state: inout State) -> Bool {
        guard !state.positions.isEmpty else { return false }
        // At most two turns: the first clears every mark it passes.
        while true {
            if state.hand >= state.slots.count { state.hand = 0 }
            let index = state.hand
            state.hand += 1
            guard let slot = state.slots[index] else { continue }
            if slot.referenced {
                state.slots[index]?.referenced = false
                continue
            }
            remove(at: index, &state)
            state.stats.evictions += 1
            return true
        }
    }

    private func remove(at index: Int, _ state: inout State) {
        guard let slot = state.slots[index] else { return }
        state.slots[index] = nil
        state.positions[slot.key] = nil
        state.free.append(index)
        state.bytes -= slot.block.bytes.count
    }
}

/// A decompressed segment data block shared by the block cache and the snapshots reading it:
/// its bytes stay at one address, unchanged, for the block's lifetime, so a reader holding the
/// block reads them through ``bytes`` without counting a reference per value.
///
/// `@unchecked Sendable`: the bytes are written once, in `init`, and only read after; the
/// memory is freed in `deinit`, when no holder is left.
final class SegmentBlock: @unchecked Sendable {
    /// The block's bytes, valid while the block lives.
    let bytes: UnsafeRawBufferPointer
    /// The memory ``bytes`` lies in (at least one byte, so there always is one to free).
    private let memory: UnsafeMutableRawBufferPointer

    /// A block of `count` bytes that `fill` writes (all of them, returning `true`); `nil`
    /// when it returns `false`.
    init?(count: Int, fill: (UnsafeMutableRawBufferPointer) -> Bool) {
        let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 16)
        guard fill(UnsafeMutableRawBufferPointer(rebasing: memory[0..<count])) else {
            memory.deallocate()
            return nil
        }
        self.memory = memory
        bytes = UnsafeRawBufferPointer(rebasing: memory[0..<count])
    }

    /// A block holding a copy of `contents`.
    init(_ contents: [UInt8]) {
        let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: max(contents.count, 1), alignment: 16)
        contents.withUnsafeBytes { memory.copyMemory(from: $0) }
        self.memory = memory
        bytes = UnsafeRawBufferPointer(rebasing: memory[0..<contents.count])
    }

    deinit { memory.deallocate() }
}

/// The counters of an engine's cache of decompressed segment blocks (``Engine/stats()``).
public struct BlockCacheStats: Sendable, Equatable {
    /// Block reads answered from the cache.
    public var hits = 0
    /// Block reads that had to read and decompress the block.
    public var misses = 0
    /// Blocks dropped to stay within the capacity.
    public var evictions = 0
    /// Blocks cached now.
    public var blocks = 0
    /// Bytes of the cached blocks (decompressed).
    public var bytes = 0
    /// The most bytes the cache keeps (``EngineOptions/blockCacheBytes``).
    public var capacityBytes = 0

    /// Counters all zero.
    public init() {}
}

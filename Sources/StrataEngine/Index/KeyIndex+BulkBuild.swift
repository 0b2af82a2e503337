extension KeyIndex {
    /// Builds an index from `elements` in strictly ascending key order, in O(n).
    ///
    /// Fills leaves left to right (full, except that the last two share their keys evenly),
    /// then builds each internal level from the one below. This is how the engine builds its
    /// index at open from sorted segment footers.
    ///
    /// - Throws: ``StoreError/Code/invalidArgument`` if a key is not greater than the one
    ///   before it.
    public init<S: Sequence>(sortedUnique elements: S) throws(StoreError)
    where S.Element == (key: [UInt8], entry: IndexEntry) {
        try self.init(
            sortedUnique: elements, leafCapacity: Self.defaultLeafCapacity,
            branchCapacity: Self.defaultBranchCapacity)
    }

    /// Builds an index from sorted, unique `elements` with the given node sizes.
    init<S: Sequence>(
        sortedUnique elements: S, leafCapacity: Int, branchCapacity: Int
    ) throws(StoreError) where S.Element == (key: [UInt8], entry: IndexEntry) {
        var builder = Builder(leafCapacity: leafCapacity, branchCapacity: branchCapacity)
        for (key, entry) in elements {
            try key.withBytes { (raw) throws(StoreError) in try builder.append(raw, entry) }
        }
        self = builder.finish()
    }

    /// Builds an index from keys handed over one at a time in strictly ascending order, as
    /// raw bytes: open feeds it straight from hint blocks, without an array per key.
    struct Builder {
        private var index: KeyIndex
        private var level: [Node] = []
        private var firstKeys: [[UInt8]] = []  // the smallest key under each node of `level`
        private var bytes: [UInt8] = []  // the leaf being filled; keeps its capacity
        private var ends: [UInt32] = []
        private var entries: [IndexEntry] = []
        /// The last key of the leaves already flushed (the current leaf's last key is in `bytes`).
        private var flushedLast: [UInt8]? = nil
        private var total = 0

        init(leafCapacity: Int = KeyIndex.defaultLeafCapacity, branchCapacity: Int = KeyIndex.defaultBranchCapacity) {
            index = KeyIndex(leafCapacity: leafCapacity, branchCapacity: branchCapacity)
            entries.reserveCapacity(index.shape.leafCapacity)
            ends.reserveCapacity(index.shape.leafCapacity)
        }

        /// Adds the next key, which must be greater than every key before it.
        ///
        /// - Throws: ``StoreError/Code/invalidArgument`` if it is not.
        mutating func append(_ key: UnsafeRawBufferPointer, _ entry: IndexEntry) throws(StoreError) {
            let order: Int
            if let last = ends.last {
                let start = ends.count >= 2 ? Int(ends[ends.count - 2]) : 0
                order = bytes.withUnsafeBytes { compareKeys(UnsafeRawBufferPointer(rebasing: $0[start..<Int(last)]), key) }
            } else if let flushedLast {
                order = flushedLast.withUnsafeBytes { compareKeys($0, key) }
            } else {
                order = -1
            }
            if order >= 0 {
                throw StoreError(
                    .invalidArgument,
                    "bulk build needs strictly ascending keys, but key #\(total) (\(key.count) bytes) "
                        + "is not greater than the key before it")
            }
            appendAscending(key, entry)
        }

        /// Adds the next key, which the caller knows is greater than every key before it
        /// (open's merge of hint cursors that checked their own order): no comparison.
        mutating func appendAscending(_ key: UnsafeRawBufferPointer, _ entry: IndexEntry) {
            if entries.count == index.shape.leafCapacity { flush() }
            if entries.isEmpty { firstKeys.append(Array(key)) }
            bytes.appendBytes(key)
            ends.append(UInt32(bytes.count))
            entries.append(entry)
            total += 1
        }

        private mutating func flush() {
            let start = ends.count >= 2 ? Int(ends[ends.count - 2]) : 0
            flushedLast = Array(bytes[start..<bytes.count])
            level.append(
                Node(
                    keys: PackedKeys(
                        bytes: freshArray(bytes[...], slack: 0), ends: freshArray(ends[...], slack: 0)),
                    entries: freshArray(entries[...], slack: 0)))
            bytes.removeAll(keepingCapacity: true)
            ends.removeAll(keepingCapacity: true)
            entries.removeAll(keepingCapacity: true)
        }

        /// Appends every key `other` holds, all greater than this builder's keys (the upper half
        /// of a build split by key): its leaves follow this builder's.
        mutating func append(_ other: Builder) {
            guard other.total > 0 else { return }
            guard total > 0 else {
                self = other
                return
            }
            var other = other
            if !entries.isEmpty { flush() }
            if !other.entries.isEmpty { other.flush() }
            let join = level.count - 1
            level += other.level
            firstKeys += other.firstKeys
            flushedLast = other.flushedLast
            total += other.total
            shareIfUnderfull(join)
        }

        /// When leaf `position` or the one after it is underfull, shares their keys evenly
        /// between two leaves (one leaf when they fit in one).
        private mutating func shareIfUnderfull(_ position: Int) {
            let shape = index.shape
            guard position >= 0, position + 1 < level.count,
                level[position].fill < shape.minLeaf || level[position + 1].fill < shape.minLeaf
            else { return }
            let next = level.remove(at: position + 1)
            firstKeys.remove(at: position + 1)
            let merged = level[position]
            merged.keys.append(contentsOf: next.keys)
            merged.entries.append(contentsOf: next.entries)
            if merged.fill > shape.leafCapacity, let split = merged.split(shape) {
                level.insert(split.right, at: position + 1)
                firstKeys.insert(split.separator, at: position + 1)
            }
        }

        /// The index of every key appended.
        mutating func finish() -> KeyIndex {
            guard total > 0 else { return index }
            if !entries.isEmpty { flush() }
            // An underfull last leaf shares the last two leaves' keys evenly.
            shareIfUnderfull(level.count - 2)
            while level.count > 1 {
                (level, firstKeys) = index.buildBranches(over: level, firstKeys: firstKeys)
            }
            index.root = level[0]
            index.count = total
            return index
        }
    }

    /// Groups `nodes` evenly into the fewest internal nodes that hold them.
    fileprivate func buildBranches(
        over nodes: [Node], firstKeys: [[UInt8]]
    ) -> ([Node], [[UInt8]]) {
        let groups = (nodes.count + shape.branchCapacity - 1) / shape.branchCapacity
        let base = nodes.count / groups
        let extra = nodes.count % groups
        var parents: [Node] = []
        var parentKeys: [[UInt8]] = []
        parents.reserveCapacity(groups)
        parentKeys.reserveCapacity(groups)
        var start = 0
        for group in 0..<groups {
            let end = start + base + (group < extra ? 1 : 0)
            var separators = PackedKeys()
            separators.reserveCapacity(keys: end - start - 1, bytes: 0)
            for i in (start + 1)..<end {
                firstKeys[i].withUnsafeBytes { separators.append($0) }
            }
            separators.shrinkToFit()
            parents.append(Node(separators: separators, children: Array(nodes[start..<end])))
            parentKeys.append(firstKeys[start])
            start = end
        }
        return (parents, parentKeys)
    }
}

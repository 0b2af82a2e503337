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
        self.init(leafCapacity: leafCapacity, branchCapacity: branchCapacity)
        let capacity = shape.leafCapacity
        var level: [Node] = []
        var firstKeys: [[UInt8]] = []  // the smallest key under each node of `level`
        var bytes: [UInt8] = []  // scratch for the leaf being filled; keeps its capacity
        var ends: [UInt32] = []
        var entries: [IndexEntry] = []
        entries.reserveCapacity(capacity)
        ends.reserveCapacity(capacity)
        var previous: [UInt8]? = nil
        var total = 0

        func flush() {
            level.append(
                Node(
                    keys: PackedKeys(
                        bytes: freshArray(bytes[...], slack: 0), ends: freshArray(ends[...], slack: 0)),
                    entries: freshArray(entries[...], slack: 0)))
            bytes.removeAll(keepingCapacity: true)
            ends.removeAll(keepingCapacity: true)
            entries.removeAll(keepingCapacity: true)
        }

        for (key, entry) in elements {
            if let previous, compareKeys(previous, key) >= 0 {
                throw StoreError(
                    .invalidArgument,
                    "bulk build needs strictly ascending keys, but key #\(total) (\(key.count) bytes) "
                        + "is not greater than the key before it")
            }
            if entries.count == capacity { flush() }
            if entries.isEmpty { firstKeys.append(key) }
            bytes.append(contentsOf: key)
            ends.append(UInt32(bytes.count))
            entries.append(entry)
            previous = key
            total += 1
        }
        guard total > 0 else { return }
        flush()
        if level.count >= 2, level[level.count - 1].fill < shape.minLeaf {
            // The last leaf is underfull: share the last two leaves' keys evenly.
            let last = level.removeLast()
            let merged = level[level.count - 1]
            merged.keys.append(contentsOf: last.keys)
            merged.entries.append(contentsOf: last.entries)
            firstKeys.removeLast()
            // Two leaves hold more than one leaf's capacity, so the split cannot fail.
            if let split = merged.split(shape) {
                level.append(split.right)
                firstKeys.append(split.separator)
            }
        }
        while level.count > 1 {
            (level, firstKeys) = buildBranches(over: level, firstKeys: firstKeys)
        }
        root = level[0]
        count = total
    }

    /// Groups `nodes` evenly into the fewest internal nodes that hold them.
    private func buildBranches(
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
            separators.ends.reserveCapacity(end - start - 1)
            for i in (start + 1)..<end {
                firstKeys[i].withUnsafeBytes { separators.append($0) }
            }
            separators.bytes = freshArray(separators.bytes[...], slack: 0)  // drop growth slack
            parents.append(Node(separators: separators, children: Array(nodes[start..<end])))
            parentKeys.append(firstKeys[start])
            start = end
        }
        return (parents, parentKeys)
    }
}

extension KeyIndex {
    /// The fill bounds of a tree's nodes.
    struct Shape: Sendable, Equatable {
        /// The most keys a leaf holds.
        let leafCapacity: Int
        /// The most children an internal node holds.
        let branchCapacity: Int

        /// The fewest keys a non-root leaf holds.
        var minLeaf: Int { leafCapacity / 2 }
        /// The fewest children a non-root internal node holds.
        var minBranch: Int { branchCapacity / 2 }

        /// The most keys `node` may hold (leaf) or children (internal).
        @inline(__always)
        func capacity(of node: Node) -> Int { node.isLeaf ? leafCapacity : branchCapacity }

        /// The fewest keys or children a non-root `node` may hold.
        @inline(__always)
        func minimum(of node: Node) -> Int { node.isLeaf ? minLeaf : minBranch }
    }

    /// The right half split off an overflowing node, and the separator that goes between.
    struct Split {
        /// The smallest key that may be in `right`'s subtree.
        var separator: [UInt8]
        /// The new right sibling.
        var right: Node
    }

    /// A node of the copy-on-write B+tree.
    ///
    /// A leaf holds keys (packed) and their entries, in ascending order. An internal node holds
    /// `n` children and `n - 1` separators: child `i` holds keys in `[separator[i-1],
    /// separator[i])`.
    // @unchecked Sendable: mutated only while uniquely referenced, i.e. never while reachable from another KeyIndex value.
    // Exclusivity is unchecked on the fields (it costs a runtime call per access on the read
    // path): a node is written only through its owning KeyIndex's mutating methods, which the
    // compiler already checks for exclusive access, and only while no other value reaches it.
    final class Node: @unchecked Sendable {
        /// Leaf: the keys. Internal: the separators.
        @exclusivity(unchecked) var keys: PackedKeys
        /// Leaf: the entry of each key. Internal: empty.
        @exclusivity(unchecked) var entries: [IndexEntry]
        /// Internal: the children. Leaf: empty.
        @exclusivity(unchecked) var children: [Node]
        /// Whether this is a leaf.
        let isLeaf: Bool

        /// Creates a leaf.
        init(keys: PackedKeys, entries: [IndexEntry]) {
            self.keys = keys
            self.entries = entries
            self.children = []
            self.isLeaf = true
        }

        /// Creates an internal node.
        init(separators: PackedKeys, children: [Node]) {
            self.keys = separators
            self.entries = []
            self.children = children
            self.isLeaf = false
        }

        /// A shallow copy: shares array storage until either side mutates it.
        func copy() -> Node {
            isLeaf
                ? Node(keys: keys, entries: entries)
                : Node(separators: keys, children: children)
        }

        /// Internal node: the child whose subtree may hold `key`, handed back unretained (the
        /// caller keeps the whole tree alive).
        @inline(__always)
        func child(toward key: UnsafeRawBufferPointer) -> Unmanaged<Node> {
            let i = keys.upperBound(key)
            return children.withUnsafeBufferPointer { Unmanaged.passUnretained($0[i]) }
        }

        /// Leaf: the entry of `key`, if present.
        @inline(__always)
        func entry(of key: UnsafeRawBufferPointer) -> IndexEntry? {
            let (i, found) = keys.lowerBound(key)
            return found ? entries.withUnsafeBufferPointer { $0[i] } : nil
        }

        /// The number of keys (leaf) or children (internal): what the fill bounds limit.
        @inline(__always)
        var fill: Int { isLeaf ? entries.count : children.count }

        /// Makes child `i` safe to mutate: replaces it by a shallow copy if anything else
        /// (another tree, a snapshot, a cursor) references it. `self` must be unique.
        @inline(__always)
        func uniqueChild(_ i: Int) -> Node {
            if !isKnownUniquelyReferenced(&children[i]) {
                children[i] = children[i].copy()
            }
            return children[i]
        }
    }
}

// MARK: - Mutation of uniquely referenced nodes

extension KeyIndex.Node {
    typealias Node = KeyIndex.Node

    /// Inserts or replaces `key` in this subtree, which must be uniquely referenced.
    /// Returns the previous entry, and the split-off right sibling if this node overflowed.
    func upsert(
        _ key: UnsafeRawBufferPointer, _ entry: IndexEntry, _ shape: KeyIndex.Shape
    ) -> (previous: IndexEntry?, split: KeyIndex.Split?) {
        if isLeaf {
            let (i, found) = keys.lowerBound(key)
            if found {
                let previous = entries[i]
                entries[i] = entry
                return (previous, nil)
            }
            keys.insert(key, at: i, limit: shape.leafCapacity + 1)
            reserveRoom(&entries, extra: 1, limit: shape.leafCapacity + 1)
            entries.insert(entry, at: i)
            return (nil, entries.count > shape.leafCapacity ? split(shape) : nil)
        }
        let i = keys.upperBound(key)
        let (previous, childSplit) = uniqueChild(i).upsert(key, entry, shape)
        guard let childSplit else { return (previous, nil) }
        childSplit.separator.withUnsafeBytes {
            keys.insert($0, at: i, limit: shape.branchCapacity)
        }
        reserveRoom(&children, extra: 1, limit: shape.branchCapacity + 1)
        children.insert(childSplit.right, at: i + 1)
        return (previous, children.count > shape.branchCapacity ? split(shape) : nil)
    }

    /// Removes `key` from this subtree, which must be uniquely referenced and must hold `key`.
    /// Children that underflow are rebalanced; this node itself may be left underfull.
    func remove(_ key: UnsafeRawBufferPointer, _ shape: KeyIndex.Shape) -> IndexEntry? {
        if isLeaf {
            let (i, found) = keys.lowerBound(key)
            guard found else { return nil }
            keys.remove(at: i)
            let removed = entries.remove(at: i)
            if entries.capacity - entries.count > entries.count / 2 + 8 {
                // Mostly empty after many removes: give the slack back.
                let slack = max(1, shape.leafCapacity / 8)
                keys = keys.slice(0..<keys.count, slack: slack)
                entries = freshArray(entries[...], slack: slack)
            }
            return removed
        }
        let i = keys.upperBound(key)
        // No local reference to the child survives this call, so that `rebalance` can find it
        // uniquely referenced and mutate it in place.
        let removed = uniqueChild(i).remove(key, shape)
        if removed != nil, children[i].fill < shape.minimum(of: children[i]) {
            rebalance(around: i, shape)
        }
        return removed
    }

    /// Fixes underfull child `i` by merging it with a sibling, or, for leaves that together
    /// overflow one, by moving keys from the fuller to the emptier until each holds half
    /// (as merging and splitting again would leave them, copying each key once instead of
    /// twice). This node must be uniquely referenced.
    func rebalance(around i: Int, _ shape: KeyIndex.Shape) {
        // Internal nodes always have at least two children, so a sibling exists.
        let left = i > 0 ? i - 1 : i
        let target = uniqueChild(left)
        if target.isLeaf, target.fill + children[left + 1].fill > shape.leafCapacity {
            redistributeLeaves(target, uniqueChild(left + 1), separator: left, shape)
            return
        }
        let source = children[left + 1]
        if target.isLeaf {
            target.keys.append(contentsOf: source.keys)
            reserveRoom(&target.entries, extra: source.entries.count)
            target.entries.append(contentsOf: source.entries)
        } else {
            keys.withKey(left) { target.keys.insert($0, at: target.keys.count, limit: .max) }
            target.keys.append(contentsOf: source.keys)
            reserveRoom(&target.children, extra: source.children.count)
            target.children.append(contentsOf: source.children)
        }
        if target.fill > shape.capacity(of: target), let split = target.split(shape) {
            children[left + 1] = split.right
            keys.replace(at: left, with: split.separator, limit: shape.branchCapacity)
        } else {
            children.remove(at: left + 1)
            keys.remove(at: left)
        }
    }

    /// Gives adjacent leaves `left` and `right` (children `separator` and `separator + 1`,
    /// too many keys for one leaf together) half the keys each, the lower half to the left
    /// (as ``split(_:)`` divides), and makes the separator the right leaf's first key. The
    /// leaf that gives keys is rebuilt with fresh storage; the one that takes them grows.
    private func redistributeLeaves(_ left: Node, _ right: Node, separator: Int, _ shape: KeyIndex.Shape) {
        let leftCount = left.entries.count, rightCount = right.entries.count
        let half = (leftCount + rightCount) / 2
        let slack = max(1, shape.leafCapacity / 8)
        if leftCount < half {
            // The right leaf's first keys move to the end of the left one.
            let moved = half - leftCount
            left.keys.append(contentsOf: right.keys.slice(0..<moved, slack: 0))
            reserveRoom(&left.entries, extra: moved)
            left.entries.append(contentsOf: right.entries[0..<moved])
            right.keys = right.keys.slice(moved..<rightCount, slack: slack)
            right.entries = freshArray(right.entries[moved...], slack: slack)
        } else if leftCount > half {
            // The left leaf's last keys move to the front of the right one.
            var keys = left.keys.slice(half..<leftCount, slack: rightCount + slack)
            keys.append(contentsOf: right.keys)
            var entries = freshArray(left.entries[half...], slack: rightCount + slack)
            entries.append(contentsOf: right.entries)
            right.keys = keys
            right.entries = entries
            left.keys = left.keys.slice(0..<half, slack: slack)
            left.entries = freshArray(left.entries[..<half], slack: slack)
        }
        keys.replace(at: separator, with: right.keys.key(0), limit: shape.branchCapacity)
    }

    /// Moves the upper half of this node into a new right sibling, leaving both with fresh,
    /// tightly sized storage. Returns `nil` only for a node too small to split.
    func split(_ shape: KeyIndex.Shape) -> KeyIndex.Split? {
        let total = fill
        guard total >= 2 else { return nil }
        let half = total / 2
        if isLeaf {
            let slack = max(1, shape.leafCapacity / 8)
            let right = Node(
                keys: keys.slice(half..<total, slack: slack),
                entries: freshArray(entries[half..<total], slack: slack))
            keys = keys.slice(0..<half, slack: slack)
            entries = freshArray(entries[0..<half], slack: slack)
            return KeyIndex.Split(separator: right.keys.key(0), right: right)
        }
        // Children [0, half) stay, [half, total) move; separator half - 1 moves up.
        let slack = max(1, shape.branchCapacity / 8)
        let separator = keys.key(half - 1)
        let right = Node(
            separators: keys.slice(half..<(total - 1), slack: slack),
            children: freshArray(children[half..<total], slack: slack))
        keys = keys.slice(0..<(half - 1), slack: slack)
        children = freshArray(children[0..<half], slack: slack)
        return KeyIndex.Split(separator: separator, right: right)
    }
}

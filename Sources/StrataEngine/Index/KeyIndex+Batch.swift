/// Applying many changes in one pass over the tree: each leaf the changes reach is rebuilt
/// once with all of its changes, and each internal node on their paths once, instead of one
/// descent, one shift of a leaf's keys and (under a snapshot) one copy of a path per change.
extension KeyIndex {
    /// One change of a batch: `key` gets `entry`, or is removed when `entry` is `nil`.
    struct BatchChange {
        var key: [UInt8]
        var entry: IndexEntry?
    }

    /// Nodes of one height that replace a subtree, in key order, with the separator between
    /// each pair: each within capacity, possibly underfull (the parent fixes that), possibly
    /// none (everything removed).
    fileprivate struct Pieces {
        var nodes: [Node] = []
        /// `separators[i]` goes between `nodes[i]` and `nodes[i + 1]`.
        var separators: [[UInt8]] = []

        /// Appends `node`, with `separator` before it when it is not the first.
        mutating func append(_ node: Node, after separator: @autoclosure () -> [UInt8]) {
            if !nodes.isEmpty { separators.append(separator()) }
            nodes.append(node)
        }
    }

    /// Applies `changes`, in strictly ascending key order, one pass over the tree; calls
    /// `replaced(position, entry)` for each change that replaces or removes an indexed entry,
    /// in key order. Nodes shared with snapshots are never written: every node the changes
    /// reach is rebuilt, every other one is kept as it is.
    ///
    /// - Precondition: the keys are strictly ascending.
    mutating func apply(sortedChanges changes: [BatchChange], replaced: (Int, IndexEntry) -> Void) {
        guard !changes.isEmpty else { return }
        var delta = 0
        let pieces = Self.applying(changes, 0..<changes.count, to: root, shape, delta: &delta, replaced: replaced)
        count += delta
        var nodes = pieces.nodes, separators = pieces.separators
        guard !nodes.isEmpty else {
            root = Node(keys: PackedKeys(), entries: [])
            return
        }
        // More than one node at the top: new levels above them until one remains.
        while nodes.count > 1 {
            let grouped = Self.group(nodes, separators, capacity: shape.branchCapacity)
            nodes = grouped.nodes
            separators = grouped.separators
        }
        root = nodes[0]
        // An internal root left with one child is replaced by it: the tree gets shorter.
        while !root.isLeaf, root.children.count == 1 { root = root.children[0] }
    }

    /// The pieces that replace `node` once `changes[range]` (all within its key range) are
    /// applied. Adds to `delta` the keys added less the keys removed.
    fileprivate static func applying(
        _ changes: [BatchChange], _ range: Range<Int>, to node: Node, _ shape: Shape, delta: inout Int,
        replaced: (Int, IndexEntry) -> Void
    ) -> Pieces {
        if node.isLeaf { return leafApplying(changes, range, to: node, shape, delta: &delta, replaced: replaced) }
        // The node's children, each replaced by its pieces when changes reach it.
        var children = Pieces()
        var next = range.lowerBound
        let last = node.children.count - 1
        for index in 0...last {
            var end = next
            if index == last {
                end = range.upperBound
            } else {
                node.keys.withKey(index) { separator in
                    while end < range.upperBound, changes[end].key.withUnsafeBytes({ compareKeys($0, separator) }) < 0 { end += 1 }
                }
            }
            // The separator before child `index` bounds whatever replaces it from below.
            if end == next {
                children.append(node.children[index], after: node.keys.key(index - 1))
            } else {
                let replacing = applying(changes, next..<end, to: node.children[index], shape, delta: &delta, replaced: replaced)
                for (position, piece) in replacing.nodes.enumerated() {
                    children.append(piece, after: position == 0 ? node.keys.key(index - 1) : replacing.separators[position - 1])
                }
            }
            next = end
        }
        fixUnderfull(&children, shape)
        guard !children.nodes.isEmpty else { return Pieces() }
        return group(children.nodes, children.separators, capacity: shape.branchCapacity)
    }

    /// The leaves that replace `leaf` once `changes[range]` are merged into its keys.
    private static func leafApplying(
        _ changes: [BatchChange], _ range: Range<Int>, to leaf: Node, _ shape: Shape, delta: inout Int,
        replaced: (Int, IndexEntry) -> Void
    ) -> Pieces {
        // (Appended in place, not through a nested function: one that captured the arrays
        // would box them and check exclusive access at every append.)
        var bytes: [UInt8] = []
        var ends: [UInt32] = []
        var entries: [IndexEntry] = []
        let estimate = leaf.entries.count + range.count
        bytes.reserveCapacity(leaf.keys.bytes.count + range.count * (changes[range.lowerBound].key.count + 2))
        ends.reserveCapacity(estimate)
        entries.reserveCapacity(estimate)
        var position = range.lowerBound
        leaf.entries.withUnsafeBufferPointer { leafEntries in
            leaf.keys.bytes.withUnsafeBytes { raw in
                for index in 0..<leafEntries.count {
                    let key = UnsafeRawBufferPointer(rebasing: raw[leaf.keys.range(index)])
                    var order = 1
                    while position < range.upperBound {
                        order = changes[position].key.withUnsafeBytes { compareKeys($0, key) }
                        guard order <= 0 else { break }
                        let change = changes[position]
                        if order == 0 {
                            replaced(position, leafEntries[index])
                            if change.entry == nil { delta -= 1 }
                        } else if change.entry != nil {
                            delta += 1
                        }
                        if let entry = change.entry {
                            bytes.append(contentsOf: change.key)
                            ends.append(UInt32(bytes.count))
                            entries.append(entry)
                        }
                        position += 1
                        if order == 0 { break }
                    }
                    if order != 0 {
                        bytes.append(contentsOf: key)
                        ends.append(UInt32(bytes.count))
                        entries.append(leafEntries[index])
                    }
                }
            }
        }
        while position < range.upperBound {
            let change = changes[position]
            if let entry = change.entry {
                delta += 1
                bytes.append(contentsOf: change.key)
                ends.append(UInt32(bytes.count))
                entries.append(entry)
            }
            position += 1
        }
        guard !entries.isEmpty else { return Pieces() }
        let keys = PackedKeys(bytes: bytes, ends: ends)
        guard entries.count > shape.leafCapacity else { return Pieces(nodes: [Node(keys: keys, entries: entries)]) }
        // Cut into the fewest leaves that hold them, of nearly equal size (each at least half
        // full, since there are more keys than one leaf holds).
        let parts = (entries.count + shape.leafCapacity - 1) / shape.leafCapacity
        var pieces = Pieces()
        var start = 0
        for part in 0..<parts {
            let end = entries.count * (part + 1) / parts
            let piece = keys.slice(start..<end, slack: 0)
            pieces.append(Node(keys: piece, entries: Array(entries[start..<end])), after: piece.key(0))
            start = end
        }
        return pieces
    }

    /// Merges each underfull node of `pieces` (all of one height) with a neighbour, splitting
    /// the result in two when it overflows, until none is underfull or one node is left.
    /// Builds new nodes: the pieces may be shared with snapshots.
    private static func fixUnderfull(_ pieces: inout Pieces, _ shape: Shape) {
        var index = 0
        while index < pieces.nodes.count, pieces.nodes.count > 1 {
            guard pieces.nodes[index].fill < shape.minimum(of: pieces.nodes[index]) else {
                index += 1
                continue
            }
            // With the next node when there is one, else with the previous.
            let left = index + 1 < pieces.nodes.count ? index : index - 1
            let (a, b) = (pieces.nodes[left], pieces.nodes[left + 1])
            let separator = pieces.separators[left]
            let merged: Pieces
            if a.isLeaf {
                var keys = a.keys.slice(0..<a.keys.count, slack: b.keys.count)
                keys.append(contentsOf: b.keys)
                let leaf = Node(keys: keys, entries: a.entries + b.entries)
                // Two halves, each at least half full, when they overflow one leaf.
                if leaf.fill > shape.leafCapacity, let split = leaf.split(shape) {
                    merged = Pieces(nodes: [leaf, split.right], separators: [split.separator])
                } else {
                    merged = Pieces(nodes: [leaf])
                }
            } else {
                // The children of both, the separator between them pulled down; an underfull
                // child (the only one its parent had left) is merged with its new neighbours.
                var children = Pieces(nodes: a.children + b.children)
                for node in [a, b] {
                    for index in 0..<node.keys.count { children.separators.append(node.keys.key(index)) }
                    if node === a { children.separators.append(separator) }
                }
                fixUnderfull(&children, shape)
                merged = group(children.nodes, children.separators, capacity: shape.branchCapacity)
            }
            pieces.nodes.replaceSubrange(left...(left + 1), with: merged.nodes)
            pieces.separators.replaceSubrange(left..<(left + 1), with: merged.separators)
            // A merged node may still be underfull (both were small): look at it again.
            index = merged.nodes.count == 1 ? left : left + merged.nodes.count
        }
    }

    /// `nodes` (of one height, `separators` between them) under the fewest internal nodes of
    /// at most `capacity` children, of nearly equal size; the separators between those.
    fileprivate static func group(_ nodes: [Node], _ separators: [[UInt8]], capacity: Int) -> Pieces {
        let parts = (nodes.count + capacity - 1) / capacity
        var result = Pieces()
        var start = 0
        for part in 0..<parts {
            let end = nodes.count * (part + 1) / parts
            var keys = PackedKeys()
            for separator in separators[start..<(end - 1)] { separator.withUnsafeBytes { keys.append($0) } }
            result.append(Node(separators: keys, children: Array(nodes[start..<end])), after: separators[start - 1])
            start = end
        }
        return result
    }
}

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
        /// `separators[i]` goes between `nodes[i]` and `nodes[i + 1]`: slices of the nodes'
        /// key storage, so that keeping a node's separators copies no bytes.
        var separators: [ArraySlice<UInt8>] = []

        /// Appends `node`, with `separator` before it when it is not the first.
        mutating func append(_ node: Node, after separator: @autoclosure () -> ArraySlice<UInt8>) {
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
                children.append(node.children[index], after: node.keys.keySlice(index - 1))
            } else {
                let replacing = applying(changes, next..<end, to: node.children[index], shape, delta: &delta, replaced: replaced)
                for (position, piece) in replacing.nodes.enumerated() {
                    children.append(piece, after: position == 0 ? node.keys.keySlice(index - 1) : replacing.separators[position - 1])
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
        let (keys, entries) =
            range.count * inPlaceDivisor <= leaf.entries.count
            ? leafChanged(changes, range, in: leaf, shape, delta: &delta, replaced: replaced)
            : leafMerged(changes, range, into: leaf, delta: &delta, replaced: replaced)
        guard !entries.isEmpty else { return Pieces() }
        guard entries.count > shape.leafCapacity else { return Pieces(nodes: [Node(keys: keys, entries: entries)]) }
        // Cut into the fewest leaves that hold them, of nearly equal size (each at least half
        // full, since there are more keys than one leaf holds).
        let parts = (entries.count + shape.leafCapacity - 1) / shape.leafCapacity
        var pieces = Pieces()
        var start = 0
        for part in 0..<parts {
            let end = entries.count * (part + 1) / parts
            let piece = keys.slice(start..<end, slack: 0)
            pieces.append(Node(keys: piece, entries: Array(entries[start..<end])), after: piece.keySlice(0))
            start = end
        }
        return pieces
    }

    /// A leaf takes its changes one at a time into copies of its arrays when they are at most
    /// one in this many of its keys: copying a leaf's arrays whole and shifting them a few
    /// times costs less than rebuilding the leaf key by key (about 21k instructions for 128
    /// keys), which pays once a leaf gets more changes than that.
    static let inPlaceDivisor = 8

    /// `leaf`'s keys and entries with `changes[range]` applied one at a time to copies of its
    /// arrays (the leaf itself, maybe shared with snapshots, is not written).
    private static func leafChanged(
        _ changes: [BatchChange], _ range: Range<Int>, in leaf: Node, _ shape: Shape, delta: inout Int,
        replaced: (Int, IndexEntry) -> Void
    ) -> (PackedKeys, [IndexEntry]) {
        var keys = leaf.keys
        var entries = leaf.entries
        let limit = shape.leafCapacity + range.count
        for position in range {
            let change = changes[position]
            change.key.withUnsafeBytes { key in
                let (index, found) = keys.lowerBound(key)
                if found {
                    replaced(position, entries[index])
                    if let entry = change.entry {
                        entries[index] = entry
                    } else {
                        keys.remove(at: index)
                        entries.remove(at: index)
                        delta -= 1
                    }
                } else if let entry = change.entry {
                    keys.insert(key, at: index, limit: limit)
                    reserveRoom(&entries, extra: 1, limit: limit)
                    entries.insert(entry, at: index)
                    delta += 1
                }
            }
        }
        return (keys, entries)
    }

    /// `leaf`'s keys and entries merged with `changes[range]` into new arrays, in one pass.
    private static func leafMerged(
        _ changes: [BatchChange], _ range: Range<Int>, into leaf: Node, delta: inout Int,
        replaced: (Int, IndexEntry) -> Void
    ) -> (PackedKeys, [IndexEntry]) {
        var merged = LeafContents(capacity: leaf.entries.count + range.count, bytes: leaf.keys.bytes.count)
        var copied = 0  // the leaf's keys before this one are in `merged` or replaced
        for position in range {
            let change = changes[position]
            // Where it goes: most often at the next key not copied yet (a run of consecutive
            // keys changed, or keys past the leaf's last), one comparison; else a search.
            let (index, found) = change.key.withUnsafeBytes { key -> (Int, Bool) in
                guard copied < leaf.keys.count else { return (copied, false) }
                let order = leaf.keys.withKey(copied) { compareKeys(key, $0) }
                return order <= 0 ? (copied, order == 0) : leaf.keys.lowerBound(key)
            }
            merged.append(leaf, copied..<index)
            if found {
                replaced(position, leaf.entries[index])
                if change.entry == nil { delta -= 1 }
                copied = index + 1
            } else {
                if change.entry != nil { delta += 1 }
                copied = index
            }
            if let entry = change.entry { merged.append(change.key, entry) }
        }
        merged.append(leaf, copied..<leaf.entries.count)
        guard !merged.entries.isEmpty else { return (PackedKeys(), []) }
        return (PackedKeys(bytes: merged.bytes, ends: merged.ends), merged.entries)
    }

    /// A leaf's keys and entries as they are built, in order. (A struct: a nested function
    /// appending to captured arrays would box them and check exclusive access at every call.)
    private struct LeafContents {
        var bytes: [UInt8] = []
        var ends: [UInt32] = []
        var entries: [IndexEntry] = []

        init(capacity: Int, bytes byteCount: Int) {
            bytes.reserveCapacity(byteCount + byteCount / 2)
            ends.reserveCapacity(capacity)
            entries.reserveCapacity(capacity)
        }

        /// Appends `leaf`'s keys `run` with their entries, bytes copied at once.
        mutating func append(_ leaf: Node, _ run: Range<Int>) {
            guard !run.isEmpty else { return }
            let from = run.lowerBound == 0 ? 0 : Int(leaf.keys.ends[run.lowerBound - 1])
            let base = bytes.count - from
            bytes.append(contentsOf: leaf.keys.bytes[from..<Int(leaf.keys.ends[run.upperBound - 1])])
            for index in run { ends.append(UInt32(Int(leaf.keys.ends[index]) + base)) }
            entries.append(contentsOf: leaf.entries[run])
        }

        /// Appends `key` with `entry`.
        mutating func append(_ key: [UInt8], _ entry: IndexEntry) {
            bytes.append(contentsOf: key)
            ends.append(UInt32(bytes.count))
            entries.append(entry)
        }
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
                    merged = Pieces(nodes: [leaf, split.right], separators: [split.separator[...]])
                } else {
                    merged = Pieces(nodes: [leaf])
                }
            } else {
                // The children of both, the separator between them pulled down; an underfull
                // child (the only one its parent had left) is merged with its new neighbours.
                var children = Pieces(nodes: a.children + b.children)
                for node in [a, b] {
                    for index in 0..<node.keys.count { children.separators.append(node.keys.keySlice(index)) }
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
    fileprivate static func group(_ nodes: [Node], _ separators: [ArraySlice<UInt8>], capacity: Int) -> Pieces {
        let parts = (nodes.count + capacity - 1) / capacity
        var result = Pieces()
        var start = 0
        for part in 0..<parts {
            let end = nodes.count * (part + 1) / parts
            // The node's separators packed at once (their common prefix and heads found once).
            var bytes: [UInt8] = []
            var ends: [UInt32] = []
            ends.reserveCapacity(end - 1 - start)
            for separator in separators[start..<(end - 1)] {
                bytes.append(contentsOf: separator)
                ends.append(UInt32(bytes.count))
            }
            let keys = PackedKeys(bytes: bytes, ends: ends)
            result.append(Node(separators: keys, children: Array(nodes[start..<end])), after: separators[start - 1])
            start = end
        }
        return result
    }
}

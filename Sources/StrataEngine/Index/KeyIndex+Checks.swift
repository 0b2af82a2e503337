extension KeyIndex {
    /// About how many bytes the tree's nodes occupy: node objects, array storage by capacity,
    /// and malloc overhead. Nodes shared with snapshots are counted in full. O(nodes).
    public var estimatedMemoryBytes: Int {
        Self.memory(of: root)
    }

    /// Bytes of one allocation of `payload` bytes, with malloc overhead.
    private static func allocation(_ payload: Int) -> Int { payload + 16 }

    /// Bytes of an array's heap storage (none for an empty array with no capacity).
    private static func storage<T>(_ array: [T]) -> Int {
        array.capacity == 0 ? 0 : allocation(32 + array.capacity * MemoryLayout<T>.stride)
    }

    private static func memory(of node: Node) -> Int {
        // Object header (16 bytes) plus fields: the packed keys (three array references and
        // the prefix length), two more array references (one for the other kind's, empty),
        // and the leaf flag.
        let object = allocation(16 + 6 * 8 + 8)
        var total = object + storage(node.keys.bytes) + storage(node.keys.ends) + storage(node.keys.heads)
        total += storage(node.entries) + storage(node.children)
        for child in node.children { total += memory(of: child) }
        return total
    }

    /// Checks the tree's structure and throws ``StoreError/Code/corruption`` naming the first
    /// violation: keys strictly ascending within and across nodes and within their separators'
    /// bounds, node fill bounds, uniform leaf depth, and `count`.
    public func checkInvariants() throws(StoreError) {
        var leafDepth: Int? = nil
        let total = try check(root, depth: 0, lower: nil, upper: nil, leafDepth: &leafDepth)
        guard total == count else {
            throw violation("count is \(count) but the leaves hold \(total) keys")
        }
        if !root.isLeaf, root.children.count < 2 {
            throw violation("internal root has \(root.children.count) children, needs 2 or more")
        }
    }

    private func violation(_ message: String) -> StoreError {
        StoreError(.corruption, "key index invariant violated: \(message)")
    }

    /// Checks the subtree at `node`, whose keys must lie in `[lower, upper)`, and returns how
    /// many keys it holds.
    private func check(
        _ node: Node, depth: Int, lower: [UInt8]?, upper: [UInt8]?, leafDepth: inout Int?
    ) throws(StoreError) -> Int {
        let keys = node.keys
        let isRoot = depth == 0
        guard keys.ends.last.map({ Int($0) == keys.bytes.count }) ?? keys.bytes.isEmpty else {
            throw violation("packed keys end at \(keys.ends.last ?? 0) of \(keys.bytes.count) bytes")
        }
        for i in 0..<keys.count where (i == 0 ? 0 : keys.ends[i - 1]) > keys.ends[i] {
            throw violation("key offsets decrease at \(i) at depth \(depth)")
        }
        for i in 0..<keys.count {
            let key = keys.key(i)
            if i > 0, compareKeys(keys.key(i - 1), key) >= 0 {
                throw violation("keys not strictly ascending at \(i) at depth \(depth)")
            }
            if let lower, compareKeys(key, lower) < 0 {
                throw violation("key \(i) at depth \(depth) is below its separator")
            }
            if let upper, compareKeys(key, upper) >= 0 {
                throw violation("key \(i) at depth \(depth) is not below its upper separator")
            }
            // The searches' shortcut: every key shares key 0's first prefixLength bytes, and
            // its head is its next eight.
            let prefix = keys.prefixLength
            if key.count < prefix || (i > 0 && key[..<prefix] != keys.key(0)[..<prefix]) {
                throw violation("key \(i) at depth \(depth) does not share the node's \(prefix)-byte prefix")
            }
            guard keys.heads.count == keys.count, keys.heads[i] == key.withUnsafeBytes({ PackedKeys.head($0, from: prefix) }) else {
                throw violation("head of key \(i) at depth \(depth) is not its bytes after the prefix")
            }
        }
        let fill = node.fill
        if fill > shape.capacity(of: node) || (!isRoot && fill < shape.minimum(of: node)) {
            throw violation(
                "\(node.isLeaf ? "leaf" : "internal node") at depth \(depth) holds \(fill), "
                    + "outside \(shape.minimum(of: node))...\(shape.capacity(of: node))")
        }
        if node.isLeaf {
            guard node.children.isEmpty, keys.count == node.entries.count else {
                throw violation("leaf at depth \(depth) has \(keys.count) keys, "
                    + "\(node.entries.count) entries, \(node.children.count) children")
            }
            if let leafDepth, leafDepth != depth {
                throw violation("leaves at depths \(leafDepth) and \(depth)")
            }
            leafDepth = depth
            return keys.count
        }
        guard node.entries.isEmpty, keys.count == node.children.count - 1 else {
            throw violation("internal node at depth \(depth) has \(keys.count) separators, "
                + "\(node.children.count) children, \(node.entries.count) entries")
        }
        var total = 0
        for (i, child) in node.children.enumerated() {
            let childLower = i == 0 ? lower : keys.key(i - 1)
            let childUpper = i == keys.count ? upper : keys.key(i)
            total += try check(
                child, depth: depth + 1, lower: childLower, upper: childUpper,
                leafDepth: &leafDepth)
        }
        return total
    }
}

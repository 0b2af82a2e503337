extension KeyIndex {
    /// An ordered walk over the keys of one snapshot of a ``KeyIndex``, from an inclusive
    /// lower bound to an optional exclusive upper bound.
    ///
    /// The cursor holds references to the nodes it walks, so later mutations of any
    /// `KeyIndex` value (including the one it was made from) do not affect it.
    public struct Cursor: IteratorProtocol, Sequence, Sendable {
        /// The path from the root to the current leaf. For an internal node, `index` is the
        /// next child to visit; for the leaf, the next key to yield.
        private var stack: [(node: Node, index: Int)]
        /// Keys `>=` this end the walk.
        private let upperBound: [UInt8]?

        init(root: Node, from lowerBound: UnsafeRawBufferPointer, to upperBound: [UInt8]?) {
            self.upperBound = upperBound
            // Room for the whole path at once (a tree of millions of keys is a few levels
            // deep): growing the array level by level costs an allocation per level.
            stack = []
            stack.reserveCapacity(8)
            var node = root
            while !node.isLeaf {
                let child = node.keys.upperBound(lowerBound)
                stack.append((node, child + 1))
                node = node.children[child]
            }
            stack.append((node, node.keys.lowerBound(lowerBound).index))
        }

        /// Moves to the next key of the range and returns its leaf and position, or `nil` at
        /// the end of the range.
        private mutating func advance() -> (node: Node, index: Int)? {
            while let (node, index) = stack.last {
                let top = stack.count - 1
                if node.isLeaf {
                    if index < node.entries.count {
                        if let upperBound {
                            let below = upperBound.withUnsafeBytes { bound in
                                node.keys.withKey(index) { compareKeys($0, bound) < 0 }
                            }
                            guard below else {
                                stack.removeAll()
                                return nil
                            }
                        }
                        stack[top].index = index + 1
                        return (node, index)
                    }
                    stack.removeLast()
                } else if index < node.children.count {
                    stack[top].index = index + 1
                    stack.append((node.children[index], 0))
                } else {
                    stack.removeLast()
                }
            }
            return nil
        }

        /// The next key and its entry, or `nil` at the end of the range.
        public mutating func next() -> (key: [UInt8], entry: IndexEntry)? {
            guard let (node, index) = advance() else { return nil }
            return (node.keys.key(index), node.entries[index])
        }

        /// Calls `body` with the next key's bytes (valid only during the call), or returns
        /// `nil` at the end of the range: a walk that copies no key.
        public mutating func nextKey<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R? {
            guard let (node, index) = advance() else { return nil }
            return try node.keys.withKey(index, body)
        }

        /// Calls `body` with the next key's bytes (valid only during the call) and its entry,
        /// or returns `nil` at the end of the range.
        public mutating func nextEntry<R>(_ body: (UnsafeRawBufferPointer, IndexEntry) throws(StoreError) -> R) throws(StoreError) -> R? {
            guard let (node, index) = advance() else { return nil }
            let entry = node.entries[index]
            let result: Result<R, StoreError> = node.keys.withKey(index) { key in
                Result { () throws(StoreError) -> R in try body(key, entry) }
            }
            return try result.get()
        }

        /// Calls `body` with each remaining key of the range (its bytes, valid only during the
        /// call) and its entry, until `body` returns `false` or the range ends: the keys of a
        /// leaf are visited in one loop over that leaf (no per-key walk of the path or
        /// reference count), then the walk moves to the next leaf.
        public mutating func forEachEntry(
            _ body: (UnsafeRawBufferPointer, IndexEntry) throws(StoreError) -> Bool
        ) throws(StoreError) {
            var failure: StoreError?
            walkLeaves { leaf, index, key in
                do throws(StoreError) {
                    return try body(key, leaf.entries[index])
                } catch {
                    failure = error
                    return false
                }
            }
            if let failure { throw failure }
        }

        /// Calls `body` with each remaining key of the range (valid only during the call),
        /// until `body` returns `false` or the range ends, a leaf at a time (see
        /// ``forEachEntry(_:)``).
        public mutating func forEachKey(_ body: (UnsafeRawBufferPointer) throws -> Bool) rethrows {
            try walkLeaves { _, _, key in try body(key) }
        }

        /// Counts the remaining keys of the range, stopping once `limit` are counted (the
        /// cursor is then exhausted): a leaf wholly below the upper bound is counted from its
        /// length, one key compared; only the last leaf is searched for the bound.
        public mutating func count(limit: Int = .max) -> Int {
            var counted = 0
            while counted < limit, let (node, first) = advance() {
                let top = stack.count - 1
                let count = node.entries.count
                var end = count
                if let upperBound {
                    let inside = upperBound.withUnsafeBytes { bound in node.keys.withKey(count - 1) { compareKeys($0, bound) < 0 } }
                    if !inside { end = upperBound.withUnsafeBytes { node.keys.lowerBound($0).index } }
                }
                counted += end - first
                guard end == count else { break }
                stack[top].index = count
            }
            stack.removeAll()
            return Swift.min(counted, limit)
        }

        /// The walk of ``forEachEntry(_:)`` and ``forEachKey(_:)``: `visit` gets each remaining
        /// key's leaf, position and bytes, leaf by leaf, until it returns `false` or the range
        /// ends (the cursor is then exhausted).
        private mutating func walkLeaves(_ visit: (Node, Int, UnsafeRawBufferPointer) throws -> Bool) rethrows {
            while let (node, first) = advance() {
                let top = stack.count - 1
                let count = node.entries.count
                let more = try node.keys.bytes.withUnsafeBytes { raw in
                    // A leaf whose last key is below the bound is walked without comparing
                    // each key to it.
                    let bounded = count > first && upperBound.map { bound in
                        bound.withUnsafeBytes { compareKeys(UnsafeRawBufferPointer(rebasing: raw[node.keys.range(count - 1)]), $0) >= 0 }
                    } ?? false
                    var index = first
                    while index < count {
                        let key = UnsafeRawBufferPointer(rebasing: raw[node.keys.range(index)])
                        if bounded, let upperBound, !upperBound.withUnsafeBytes({ compareKeys(key, $0) < 0 }) { return false }
                        guard try visit(node, index, key) else { return false }
                        index += 1
                    }
                    return true
                }
                guard more else {
                    stack.removeAll()
                    return
                }
                stack[top].index = count
            }
        }
    }

    /// A cursor over keys `>= lowerBound` and, if `upperBound` is given, `< upperBound`.
    public func cursor(from lowerBound: [UInt8] = [], to upperBound: [UInt8]? = nil) -> Cursor {
        lowerBound.withUnsafeBytes { Cursor(root: root, from: $0, to: upperBound) }
    }

    /// The number of keys in `[lowerBound, upperBound)`, at most `limit`. A range that ends
    /// in the leaf where it starts (one owner's members, most counts) is counted there with two
    /// searches and no cursor; any other by descending the tree once: the two leaves at its
    /// ends are searched, the leaves between them only contribute their key counts.
    public func countKeys(from lowerBound: [UInt8], to upperBound: [UInt8]?, limit: Int = .max) -> Int {
        if let upperBound {
            let inLeaf: Int? = lowerBound.withUnsafeBytes { lower in
                upperBound.withUnsafeBytes { upper in
                    // The leaf a cursor from `lowerBound` starts in.
                    var node = root
                    while !node.isLeaf { node = node.children[node.keys.upperBound(lower)] }
                    let count = node.entries.count
                    let first = node.keys.lowerBound(lower).index
                    // Keys after this leaf are above its last key: when that key is at or past
                    // the upper bound, every key of the range is here.
                    guard first < count, node.keys.withKey(count - 1, { compareKeys($0, upper) >= 0 }) else { return nil }
                    return Swift.max(0, node.keys.lowerBound(upper).index - first)
                }
            }
            if let inLeaf { return Swift.min(inLeaf, limit) }
        }
        guard limit > 0 else { return 0 }
        let counted = lowerBound.withUnsafeBytes { lower in
            if let upperBound {
                return upperBound.withUnsafeBytes { Self.countKeys(in: root, lower: lower, upper: $0, limit: limit) }
            }
            return Self.countKeys(in: root, lower: lower, upper: nil, limit: limit)
        }
        return Swift.min(counted, limit)
    }

    /// The keys of `node`'s subtree at or above `lower` (when given) and below `upper` (when
    /// given); the count may stop anywhere at or past `limit` (above 0). A child whose keys
    /// all lie inside the range is counted without a key comparison.
    private static func countKeys(in node: Node, lower: UnsafeRawBufferPointer?, upper: UnsafeRawBufferPointer?, limit: Int) -> Int {
        if node.isLeaf {
            let start = lower.map { node.keys.lowerBound($0).index } ?? 0
            let end = upper.map { node.keys.lowerBound($0).index } ?? node.entries.count
            return Swift.max(0, end - start)
        }
        // Child `i` holds the keys from separator `i - 1` (included) to separator `i` (excluded),
        // as a cursor descends: the first child of the range is the one holding `lower`, the
        // last the one holding the keys just below `upper`.
        let first = lower.map { node.keys.upperBound($0) } ?? 0
        let last = upper.map { node.keys.upperBound($0) } ?? node.children.count - 1
        guard first < last else {
            return first == last ? countKeys(in: node.children[first], lower: lower, upper: upper, limit: limit) : 0
        }
        var total = countKeys(in: node.children[first], lower: lower, upper: nil, limit: limit)
        var child = first + 1
        while child < last, total < limit {
            total += countAllKeys(in: node.children[child], limit: limit - total)
            child += 1
        }
        if total < limit { total += countKeys(in: node.children[last], lower: nil, upper: upper, limit: limit - total) }
        return total
    }

    /// Every key of `node`'s subtree, stopping anywhere at or past `limit`.
    private static func countAllKeys(in node: Node, limit: Int) -> Int {
        if node.isLeaf { return node.entries.count }
        var total = 0
        for child in node.children {
            total += countAllKeys(in: child, limit: limit - total)
            if total >= limit { break }
        }
        return total
    }

    /// Calls `body` with each key that starts with `prefix` and its entry, in key order,
    /// until `body` returns `false`. An empty prefix visits every key.
    public func forEach(
        prefix: [UInt8], _ body: ([UInt8], IndexEntry) throws -> Bool
    ) rethrows {
        var cursor = cursor(from: prefix, to: Self.prefixEnd(prefix))
        while let (key, entry) = cursor.next() {
            guard try body(key, entry) else { return }
        }
    }

    /// The smallest key greater than every key that starts with `prefix`, or `nil` if there
    /// is none (the prefix is empty or all `0xFF`).
    package static func prefixEnd(_ prefix: [UInt8]) -> [UInt8]? {
        var end = prefix
        return formPrefixEnd(&end) ? end : nil
    }

    /// Turns `key` into ``prefixEnd(_:)`` of it, in place (no array made when its storage
    /// can be reused); returns `false`, leaving `key` empty, when it has none.
    package static func formPrefixEnd(_ key: inout [UInt8]) -> Bool {
        while let last = key.last {
            if last < 0xFF {
                key[key.count - 1] = last + 1
                return true
            }
            key.removeLast()
        }
        return false
    }
}

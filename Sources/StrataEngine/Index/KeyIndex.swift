/// The engine's in-memory key index: every live key, mapped to its ``IndexEntry``.
///
/// A persistent (copy-on-write) B+tree ordered by unsigned byte comparison (memcmp order,
/// a proper prefix first). Copying a `KeyIndex` is O(1) and gives an independent snapshot:
/// mutating one copy never changes another, because a mutation copies each node on its path
/// that is shared (path copying) and changes only nodes that it references uniquely.
///
/// Leaves pack their keys into one byte buffer and their entries into one flat array, so a key
/// costs its bytes plus about 30–40 bytes. Keys may be up to 64 KiB.
///
/// ```swift
/// var index = KeyIndex()
/// index.upsert(Array("apple".utf8), entry)
/// let snapshot = index          // O(1); unaffected by later writes to `index`
/// index.remove(Array("apple".utf8))
/// snapshot.lookup(Array("apple".utf8))   // still `entry`
/// ```
public struct KeyIndex: Sendable {
    /// The default most keys per leaf: about 5 KiB per leaf for 16-byte keys.
    public static let defaultLeafCapacity = 128
    /// The default most children per internal node.
    public static let defaultBranchCapacity = 64

    /// The root node: a leaf (possibly empty) or an internal node with at least two children.
    var root: Node
    /// The fill bounds of the nodes.
    let shape: Shape
    /// The number of keys in the index.
    public internal(set) var count: Int

    /// Creates an empty index.
    public init() {
        self.init(leafCapacity: Self.defaultLeafCapacity, branchCapacity: Self.defaultBranchCapacity)
    }

    /// Creates an empty index with the given node sizes (at least 2 keys per leaf and 4
    /// children per internal node; smaller values are raised). Small sizes are for tests.
    init(leafCapacity: Int, branchCapacity: Int) {
        shape = Shape(leafCapacity: max(2, leafCapacity), branchCapacity: max(4, branchCapacity))
        root = Node(keys: PackedKeys(), entries: [])
        count = 0
    }

    /// Whether the index holds no keys.
    public var isEmpty: Bool { count == 0 }

    // MARK: Lookup

    /// The entry of `key`, or `nil` if the index does not hold it.
    public func lookup(_ key: UnsafeRawBufferPointer) -> IndexEntry? {
        withLeaf(toward: key) { $0.entry(of: key) }
    }

    /// Calls `body` with the leaf whose range holds `key`, reached from the root.
    @inline(__always)
    private func withLeaf<R>(toward key: UnsafeRawBufferPointer, _ body: (Node) -> R) -> R {
        Self.withLeaf(toward: key, from: root, body)
    }

    /// Calls `body` with the leaf under `start` whose range holds `key`. `start` keeps every
    /// node below it alive, so the walk needs no reference counting.
    @inline(__always)
    fileprivate static func withLeaf<R>(toward key: UnsafeRawBufferPointer, from start: Node, _ body: (Node) -> R) -> R {
        withExtendedLifetime(start) {
            var node = Unmanaged.passUnretained(start)
            while !node._withUnsafeGuaranteedRef({ $0.isLeaf }) {
                node = node._withUnsafeGuaranteedRef { $0.child(toward: key) }
            }
            return node._withUnsafeGuaranteedRef(body)
        }
    }

    /// The keys of one index value that start with a prefix, found from the lowest node whose
    /// range holds them all (``KeyIndex/scope(ofPrefix:)``) instead of from the root: an index
    /// probe repeated for many keys under one prefix (a fetch testing each candidate row
    /// against another conjunct's index) skips the levels above that node.
    ///
    /// A scope holds its node, so it reads the index value it came from (a snapshot's) however
    /// that index changes later.
    public struct Scope: Sendable {
        /// The prefix every key the scope looks up starts with.
        public let prefix: [UInt8]
        /// The lowest node whose key range holds every key that starts with ``prefix``.
        let node: Node

        /// Whether the key made of ``prefix`` and then `suffix`'s 8 bytes, big-endian, is in
        /// the index (a probe assembled on the stack: index keys ending in a reference).
        public func contains(followedBy suffix: UInt64) -> Bool {
            prefix.withUnsafeBytes { Self.contains(prefix: $0, node: Unmanaged.passUnretained(node), followedBy: suffix) }
        }

        /// ``contains(followedBy:)`` on a scope's parts, which the caller keeps alive: the
        /// prefix's bytes and the node are read where they are, not retained for the probe.
        @inline(__always)
        fileprivate static func contains(prefix: UnsafeRawBufferPointer, node start: Unmanaged<Node>, followedBy suffix: UInt64) -> Bool {
            let count = prefix.count
            return withUnsafeTemporaryAllocation(byteCount: count + 8, alignment: 1) { buffer in
                buffer.copyMemory(from: prefix)
                buffer.storeBytes(of: suffix.bigEndian, toByteOffset: count, as: UInt64.self)
                let key = UnsafeRawBufferPointer(buffer)
                var node = start
                while !node._withUnsafeGuaranteedRef({ $0.isLeaf }) {
                    node = node._withUnsafeGuaranteedRef { $0.child(toward: key) }
                }
                return node._withUnsafeGuaranteedRef { $0.entry(of: key) } != nil
            }
        }
    }

    /// Groups of probe scopes tested together, one suffix at a time: a suffix passes when, in
    /// every group, some scope holds its prefix followed by the suffix (a fetch's conjuncts, each
    /// a few index values, tested for each candidate row's reference). The prefixes' bytes sit
    /// in one array and the nodes are held unretained beside the scopes that own them, so a test
    /// retains and releases nothing: copying each scope out of an array for its probe (a retain
    /// and a release of its prefix and its node, atomic operations) cost more than the probe's
    /// descent on some hosts.
    public struct ProbeGroups: Sendable {
        /// The scopes, which keep the nodes alive.
        private let scopes: [Scope]
        /// Every scope's prefix, one after another.
        private let prefixBytes: [UInt8]
        /// Per scope: where its prefix starts in ``prefixBytes``, its length, its node.
        private let probes: [(start: Int, count: Int, node: Unmanaged<Node>)]
        /// Where each group's scopes end in ``probes``.
        private let groupEnds: [Int]

        /// The groups, in order; an empty group passes nothing.
        public init(_ groups: [[Scope]]) {
            var scopes: [Scope] = [], bytes: [UInt8] = [], probes: [(start: Int, count: Int, node: Unmanaged<Node>)] = []
            var ends: [Int] = []
            for group in groups {
                for scope in group {
                    probes.append((bytes.count, scope.prefix.count, Unmanaged.passUnretained(scope.node)))
                    bytes += scope.prefix
                    scopes.append(scope)
                }
                ends.append(probes.count)
            }
            self.scopes = scopes
            prefixBytes = bytes
            self.probes = probes
            groupEnds = ends
        }

        /// Whether there is no group (every suffix passes).
        public var isEmpty: Bool { groupEnds.isEmpty }

        /// Whether, in every group, a scope holds its prefix followed by `suffix`'s 8 bytes,
        /// big-endian.
        public func pass(_ suffix: UInt64) -> Bool {
            withExtendedLifetime(scopes) {
                prefixBytes.withUnsafeBytes { all in
                    probes.withUnsafeBufferPointer { probes in
                        groupEnds.withUnsafeBufferPointer { ends in
                            var start = 0
                            for end in ends {
                                var found = false
                                for index in start..<end {
                                    let probe = probes[index]
                                    let prefix = UnsafeRawBufferPointer(rebasing: all[probe.start..<(probe.start + probe.count)])
                                    if Scope.contains(prefix: prefix, node: probe.node, followedBy: suffix) {
                                        found = true
                                        break
                                    }
                                }
                                if !found { return false }
                                start = end
                            }
                            return true
                        }
                    }
                }
            }
        }
    }

    /// The scope of the keys that start with `prefix` (see ``Scope``): descends from the root
    /// while one child's range holds all of them. Child `i` of an internal node holds the keys
    /// from separator `i - 1` up to, not including, separator `i`; the child the prefix itself
    /// falls in holds every key that starts with it unless the next separator starts with it
    /// too (a separator above the prefix that does not start with it is above all such keys).
    public func scope(ofPrefix prefix: [UInt8]) -> Scope {
        var node = root
        prefix.withUnsafeBytes { prefixBytes in
            while !node.isLeaf {
                let i = node.keys.upperBound(prefixBytes)
                if i < node.keys.count, node.keys.withKey(i, { $0.starts(with: prefixBytes) }) { break }
                node = node.children[i]
            }
        }
        return Scope(prefix: prefix, node: node)
    }

    /// The entry of `key`, or `nil` if the index does not hold it.
    public func lookup(_ key: [UInt8]) -> IndexEntry? {
        key.withUnsafeBytes { lookup($0) }
    }

    /// The leaf the last ``lookup(_:finger:)`` ended in. Point reads in key order (the
    /// members of a relationship, a fetch's candidate rows) mostly land in the same leaf, and
    /// a key between its first and last keys can only be there: the next lookup searches
    /// that leaf alone instead of descending from the root. Use a finger with one index
    /// value only (a snapshot's): it keeps the leaf it remembers alive.
    ///
    /// A finger that keeps missing (reads scattered over the index) stops looking at its leaf,
    /// so scattered reads cost what lookups from the root cost.
    public struct Finger {
        fileprivate var leaf: Node?
        /// Lookups its leaf answered, and lookups that had to descend.
        fileprivate var hits = 0, misses = 0
        /// A finger that remembers no leaf yet.
        public init() {}

        /// Whether the leaf is worth trying: until 16 misses, then while at least one lookup
        /// in four lands in it.
        fileprivate var isUseful: Bool { misses < 16 || hits * 3 >= misses }
    }

    /// The entry of `key`, or `nil` if the index does not hold it, starting from the leaf
    /// `finger` remembers when `key` falls within it; `finger` then remembers the leaf the
    /// lookup ended in.
    public func lookup(_ key: UnsafeRawBufferPointer, finger: inout Finger) -> IndexEntry? {
        guard finger.isUseful else { return lookup(key) }
        if let leaf = finger.leaf {
            let found: IndexEntry?? = Unmanaged.passUnretained(leaf)._withUnsafeGuaranteedRef { leaf in
                let count = leaf.keys.count
                guard count > 0, leaf.keys.withKey(0, { compareKeys($0, key) <= 0 }),
                    leaf.keys.withKey(count - 1, { compareKeys(key, $0) <= 0 })
                else { return .none }
                return .some(leaf.entry(of: key))
            }
            if let found {
                finger.hits += 1
                return found
            }
            finger.misses += 1
        }
        return withLeaf(toward: key) { leaf in
            finger.leaf = leaf
            return leaf.entry(of: key)
        }
    }

    /// The entry of `key`, or `nil` if the index does not hold it.
    public func lookup(_ key: some Collection<UInt8>) -> IndexEntry? {
        if let found = key.withContiguousStorageIfAvailable({ lookup(UnsafeRawBufferPointer($0)) }) {
            return found
        }
        return lookup(Array(key))
    }

    // MARK: Mutation

    /// Sets the entry of `key`, returning the entry it replaced, or `nil` if `key` is new.
    @discardableResult
    public mutating func upsert(_ key: [UInt8], _ entry: IndexEntry) -> IndexEntry? {
        key.withUnsafeBytes { upsert($0, entry) }
    }

    /// Sets the entry of `key`, returning the entry it replaced, or `nil` if `key` is new.
    @discardableResult
    public mutating func upsert(_ key: UnsafeRawBufferPointer, _ entry: IndexEntry) -> IndexEntry? {
        if !isKnownUniquelyReferenced(&root) { root = root.copy() }
        let (previous, split) = root.upsert(key, entry, shape)
        if let split {
            var separators = PackedKeys()
            split.separator.withUnsafeBytes { separators.append($0) }
            root = Node(separators: separators, children: [root, split.right])
        }
        if previous == nil { count += 1 }
        return previous
    }

    /// Removes `key`, returning its entry, or `nil` (changing nothing) if the index does not
    /// hold it.
    @discardableResult
    public mutating func remove(_ key: [UInt8]) -> IndexEntry? {
        key.withUnsafeBytes { remove($0) }
    }

    /// Removes `key`, returning its entry, or `nil` (changing nothing) if the index does not
    /// hold it.
    @discardableResult
    public mutating func remove(_ key: UnsafeRawBufferPointer) -> IndexEntry? {
        // Look first so that removing an absent key copies no nodes.
        guard lookup(key) != nil else { return nil }
        if !isKnownUniquelyReferenced(&root) { root = root.copy() }
        let removed = root.remove(key, shape)
        // An internal root left with one child is replaced by it: the tree gets shorter.
        while !root.isLeaf, root.children.count == 1 {
            root = root.children[0]
        }
        if removed != nil { count -= 1 }
        return removed
    }

    /// Removes every key.
    public mutating func removeAll() {
        root = Node(keys: PackedKeys(), entries: [])
        count = 0
    }
}

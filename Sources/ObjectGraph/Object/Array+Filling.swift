extension Array {
    /// `count` copies of `value`, with room for at least `capacity` elements: the array
    /// `Array(repeating:count:)` makes, made through the growth path the compiler specializes
    /// for `Element`.
    ///
    /// `Array(repeating:count:)` (and `Array(unsafeUninitializedCapacity:initializingWith:)`)
    /// allocate through the standard library's unspecialized code, which looks the storage
    /// class's type metadata up in the runtime at every call: 350–650 instructions, more than
    /// a row's slots cost to fill. Use this where arrays are made per object or per row.
    @inlinable
    package init(filling value: Element, count: Int, capacity: Int = 0) {
        self.init()
        reserveCapacity(Swift.max(count, capacity))
        append(contentsOf: repeatElement(value, count: count))
    }
}

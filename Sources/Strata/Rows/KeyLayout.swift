/// Where StrataStore keeps things in the engine's key space (SPEC.md [KEY-1]…[KEY-3]).
///
/// ```
/// 0x00 "metadata"                                   the metadata record ([ROW-4])
/// 0x00 "model"                                      the model of the last save ([ROW-5])
/// 0x01 rootEntityName 0x00 reference (8 bytes, BE)   one row per object ([ROW-1])
/// ```
///
/// Every entity hierarchy (an entity without a superentity and all its subentities) shares
/// one key space named after its root, so a fetch of an entity and its subentities is one
/// prefix scan. References are big-endian with the sign bit flipped, so keys sort by
/// reference.
enum KeyLayout {
    static let metadataKey: [UInt8] = [0x00] + Array("metadata".utf8)
    static let modelKey: [UInt8] = [0x00] + Array("model".utf8)
    static let rowTag: UInt8 = 0x01

    /// The prefix of every row of the hierarchy rooted at `root`.
    static func rowPrefix(root: String) -> [UInt8] {
        [rowTag] + Array(root.utf8) + [0x00]
    }

    /// The first key after every row of the hierarchy rooted at `root`.
    static func rowPrefixEnd(root: String) -> [UInt8] {
        [rowTag] + Array(root.utf8) + [0x01]
    }

    /// The key of one row.
    static func rowKey(root: String, reference: Int64) -> [UInt8] {
        rowPrefix(root: root) + referenceBytes(reference)
    }

    /// A reference as the unsigned number whose big-endian bytes key it ([KEY-2]): the sign
    /// bit flipped, so unsigned order is the references' order.
    static func orderedReference(_ reference: Int64) -> UInt64 {
        UInt64(bitPattern: reference) ^ (1 << 63)
    }

    /// A reference as 8 bytes that sort as the references do: big-endian, sign bit flipped.
    static func referenceBytes(_ reference: Int64) -> [UInt8] {
        withUnsafeBytes(of: orderedReference(reference).bigEndian) { Array($0) }
    }

    /// Appends a reference's 8 bytes ([KEY-2]) to a key.
    static func appendReference(_ reference: Int64, to key: inout [UInt8]) {
        withUnsafeBytes(of: orderedReference(reference).bigEndian) { key.append(contentsOf: $0) }
    }

    /// Replaces the reference in a key's last 8 bytes ([KEY-2]).
    ///
    /// - Precondition: `key` ends with a reference.
    static func replaceReference(_ reference: Int64, in key: inout [UInt8]) {
        let ordered = orderedReference(reference).bigEndian
        key.withUnsafeMutableBytes { $0.storeBytes(of: ordered, toByteOffset: $0.count - 8, as: UInt64.self) }
    }

    /// The reference at the end of a row key.
    static func reference(fromRowKey key: [UInt8]) -> Int64? {
        key.withUnsafeBytes { reference(fromKeyBytes: $0) }
    }

    /// The reference in the last 8 bytes of a row or index key.
    static func reference(fromKeyBytes key: UnsafeRawBufferPointer) -> Int64? {
        guard key.count >= 9 else { return nil }
        let ordered = UInt64(bigEndian: key.loadUnaligned(fromByteOffset: key.count - 8, as: UInt64.self))
        return Int64(bitPattern: ordered ^ (1 << 63))
    }
}

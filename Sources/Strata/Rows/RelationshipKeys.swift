import ObjectGraph
import StrataEngine

/// Unordered to-many relationships as engine keys (SPEC.md [REL-1]…[REL-4]), not lists in
/// rows: one key per (owner, member) pair, with an empty value.
///
/// ```
/// 0x03 root 0x00 relationship 0x00 owner (8 bytes, as [KEY-2]) member (8 bytes) memberEntity (u16 BE)
/// ```
///
/// `root` is the root of the owner's hierarchy and `relationship` the to-many's name. A
/// one-to-many's keys are written by the member's saves, from its to-one (a foreign-key
/// index: the owner's row is never rewritten for them); a many-to-many's keys exist in both
/// directions, each side writing its own under its own relationship; a to-many without an
/// inverse has keys in its one direction. Adding or removing a member is one put or delete
/// per direction.
enum RelationshipKeys {
    static let tag: UInt8 = 0x03

    /// How a relationship is stored ([REL-1]).
    enum Storage: Equatable {
        /// In the row: attributes, to-ones, ordered to-many lists.
        case row
        /// Keys maintained by the members' to-one `inverse` (one-to-many).
        case foreignKey(inverse: RelationshipDescription)
        /// Keys maintained by the owner (and mirrored when the inverse is keyed too).
        case join

        static func == (a: Storage, b: Storage) -> Bool {
            switch (a, b) {
            case (.row, .row), (.join, .join): return true
            case (.foreignKey(let x), .foreignKey(let y)): return x === y
            default: return false
            }
        }
    }

    /// How `relationship` is stored: unordered, stored to-many relationships are keys.
    static func storage(of relationship: RelationshipDescription) -> Storage {
        guard relationship.isToMany, !relationship.isOrdered, !relationship.isTransient else { return .row }
        if let inverse = relationship.inverseRelationship, inverse.isToOne, !inverse.isTransient {
            return .foreignKey(inverse: inverse)
        }
        return .join
    }

    /// Whether `relationship` is stored as keys.
    static func isKeyed(_ relationship: RelationshipDescription) -> Bool { storage(of: relationship) != .row }

    /// The prefix of every key of one relationship of the hierarchy rooted at `root`.
    static func relationshipPrefix(root: String, relationship: String) -> [UInt8] {
        [tag] + Array(root.utf8) + [0x00] + Array(relationship.utf8) + [0x00]
    }

    /// The prefix of the keys of one owner's members.
    static func ownerPrefix(root: String, relationship: String, owner: Int64) -> [UInt8] {
        var key = relationshipPrefix(root: root, relationship: relationship)
        KeyLayout.appendReference(owner, to: &key)
        return key
    }

    /// The key of one (owner, member) pair: the owner's prefix, then the member.
    static func key(ownerPrefix: [UInt8], member: StoredObject) -> [UInt8] {
        var key = ownerPrefix
        key.reserveCapacity(ownerPrefix.count + 10)
        appendMember(member, to: &key)
        return key
    }

    /// The key of `member` under `owner` in a relationship whose prefix is `relationshipPrefix`,
    /// made in one allocation.
    static func key(relationshipPrefix: [UInt8], owner: Int64, member: StoredObject) -> [UInt8] {
        var key: [UInt8] = []
        key.reserveCapacity(relationshipPrefix.count + 18)
        key.append(contentsOf: relationshipPrefix)
        KeyLayout.appendReference(owner, to: &key)
        appendMember(member, to: &key)
        return key
    }

    /// Appends a member's 10 bytes: its reference ([KEY-2]) and its entity number.
    private static func appendMember(_ member: StoredObject, to key: inout [UInt8]) {
        KeyLayout.appendReference(member.reference, to: &key)
        key.append(UInt8(truncatingIfNeeded: member.entity >> 8))
        key.append(UInt8(truncatingIfNeeded: member.entity))
    }

    /// The member at the end of a key (its last 10 bytes).
    static func member(fromKeyBytes key: UnsafeRawBufferPointer) -> StoredObject? {
        guard key.count >= 18 else { return nil }
        let count = key.count
        var ordered: UInt64 = 0
        for index in (count - 10)..<(count - 2) { ordered = ordered << 8 | UInt64(key[index]) }
        let entity = UInt16(key[count - 2]) << 8 | UInt16(key[count - 1])
        return StoredObject(entity: entity, reference: Int64(bitPattern: ordered ^ (1 << 63)))
    }

    /// The owner's reference in a key (the 8 bytes before its member's 10).
    static func owner(fromKeyBytes key: UnsafeRawBufferPointer) -> Int64? {
        guard key.count >= 18 else { return nil }
        return KeyLayout.reference(fromKeyBytes: UnsafeRawBufferPointer(rebasing: key[..<(key.count - 10)]))
    }

    /// The end of the key range that starts with `prefix`.
    static func end(of prefix: [UInt8]) -> [UInt8] {
        KeyIndex.prefixEnd(prefix) ?? [tag + 1]
    }

    /// Every member of one owner, in reference order.
    static func members(_ ownerPrefix: [UInt8], in snapshot: Snapshot) -> [StoredObject] {
        var members: [StoredObject] = []
        forEachMember(ownerPrefix, in: snapshot) { member in
            members.append(member)
            return true
        }
        return members
    }

    /// Calls `body` with each member of one owner, in reference order, until it returns `false`.
    static func forEachMember(_ ownerPrefix: [UInt8], in snapshot: Snapshot, _ body: (StoredObject) -> Bool) {
        snapshot.forEachKeyBytes(from: ownerPrefix, to: end(of: ownerPrefix)) { key in
            guard key.count == ownerPrefix.count + 10, let member = member(fromKeyBytes: key) else { return true }
            return body(member)
        }
    }

    /// A relationship key taken apart: the parts of [REL-1], or `nil` if `key` is not one.
    static func parse(_ key: [UInt8]) -> (root: String, relationship: String, owner: Int64, member: StoredObject)? {
        guard key.first == tag, key.count >= 1 + 1 + 1 + 1 + 1 + 18 else { return nil }
        let body = key[1..<(key.count - 18)]
        // root 0x00 relationship 0x00: two zeros at least, the last one ending the body.
        guard let firstZero = body.firstIndex(of: 0), body.last == 0, firstZero < body.endIndex - 1 else { return nil }
        let rootBytes = body[body.startIndex..<firstZero]
        let nameBytes = body[(firstZero + 1)..<(body.endIndex - 1)]
        guard !rootBytes.isEmpty, !nameBytes.isEmpty, !nameBytes.contains(0),
            let root = String(validating: rootBytes, as: UTF8.self),
            let name = String(validating: nameBytes, as: UTF8.self)
        else { return nil }
        return key.withUnsafeBytes { raw in
            guard let owner = owner(fromKeyBytes: raw), let member = member(fromKeyBytes: raw)
            else { return nil }
            return (root, name, owner, member)
        }
    }
}

import Foundation
import StrataSync

/// A predicate on an entity: the key of work that depends on the two alone (the checks a
/// context makes before a fetch, a store's compiled predicate and plans), kept for the next
/// fetch of the same shape.
///
/// Holds its entity, so the entity's identity cannot be reused while a key is kept. Hashing
/// feeds the hasher one word, a fingerprint of the predicate's operators, key paths and
/// constants, instead of running it over every string of the predicate (which costs more than
/// the rest of a lookup); equality compares whole predicates.
package struct EntityPredicate: Hashable, Sendable {
    package let entity: EntityDescription
    package let predicate: FetchPredicate

    package init(_ entity: EntityDescription, _ predicate: FetchPredicate) {
        self.entity = entity
        self.predicate = predicate
    }

    package static func == (lhs: EntityPredicate, rhs: EntityPredicate) -> Bool {
        lhs.entity === rhs.entity && lhs.predicate == rhs.predicate
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(entity))
        var fingerprint = Fingerprint()
        fingerprint.add(predicate)
        hasher.combine(fingerprint.value)
    }

    /// Whether a lookup of `predicate` costs little next to the work it would save: no object
    /// among its constants and no list of more than eight (comparing object IDs, or long lists,
    /// costs as much as the checks of the comparisons that hold them).
    package static func isCheapKey(_ predicate: FetchPredicate) -> Bool {
        func cheap(_ expression: FetchExpression) -> Bool {
            switch expression {
            case .constant(.object): return false
            case .constant(.collection(let values)): return values.count <= 8 && !values.contains { if case .object = $0 { true } else { false } }
            case .aggregate(let parts): return parts.count <= 8 && parts.allSatisfy(cheap)
            default: return true
            }
        }
        switch predicate {
        case .value: return true
        case .and(let parts), .or(let parts): return parts.allSatisfy(isCheapKey)
        case .not(let inner): return isCheapKey(inner)
        case .comparison(let left, _, let right, _, _): return cheap(left) && cheap(right)
        }
    }

    /// FNV-1a over a predicate's parts: cheap, and enough to spread a few hundred shapes
    /// (expressions other than key paths and constants add only their kind; equality tells
    /// such predicates apart).
    struct Fingerprint {
        private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

        mutating func add(word: UInt64) { value = (value ^ word) &* 0x100_0000_01b3 }

        mutating func add(text: String) {
            var text = text
            text.withUTF8 { for byte in $0 { add(word: UInt64(byte)) } }
            add(word: 0xFF)  // a separator no UTF-8 text holds
        }

        mutating func add(_ predicate: FetchPredicate) {
            switch predicate {
            case .value(let constant):
                add(word: constant ? 1 : 2)
            case .and(let parts), .or(let parts):
                if case .and = predicate { add(word: 3) } else { add(word: 4) }
                for part in parts { add(part) }
                add(word: 5)
            case .not(let inner):
                add(word: 6)
                add(inner)
            case .comparison(let left, let op, let right, let modifier, _):
                add(word: 7)
                add(text: op.rawValue)
                if modifier != .direct { add(word: 14) }
                add(left)
                add(right)
            }
        }

        mutating func add(_ expression: FetchExpression) {
            switch expression {
            case .keyPath(let path): add(text: path)
            case .constant(let value): add(value)
            case .aggregate(let parts):
                add(word: 8)
                for part in parts { add(part) }
                add(word: 5)
            default: add(word: 15)
            }
        }

        mutating func add(_ value: FetchValue) {
            switch value {
            case .attribute(.string(let text)): add(text: text)
            case .attribute(.int64(let number)): add(word: UInt64(bitPattern: number))
            case .attribute(.int32(let number)): add(word: UInt64(bitPattern: Int64(number)))
            case .attribute(.int16(let number)): add(word: UInt64(bitPattern: Int64(number)))
            case .attribute(.double(let number)): add(word: number.bitPattern)
            case .attribute(.date(let date)): add(word: date.timeIntervalSinceReferenceDate.bitPattern)
            case .attribute(.bool(let flag)): add(word: flag ? 10 : 11)
            case .attribute(.null): add(word: 12)
            case .attribute: add(word: 13)  // rarer kinds: equality tells them apart
            case .collection(let values):
                add(word: 8)
                for value in values { add(value) }
                add(word: 5)
            case .object(let id):
                add(word: 9)
                if case .int64(let reference)? = id.referenceObject { add(word: UInt64(bitPattern: reference)) }
            }
        }
    }
}

/// Recent entries by key, at most `capacity` of them: when full, the next insert empties the
/// table first (a workload of ever new keys, such as a predicate with a new constant each time,
/// pays one lookup and one insert). (StrataStore's fetch plans keep the same rule in a
/// dictionary of their own: this generic table is not specialized across modules.)
///
/// Thread safety: a value; its owner keeps it behind a lock.
struct RecentTable<Key: Hashable, Value> {
    let capacity: Int
    private var entries: [Key: Value] = [:]

    init(capacity: Int) { self.capacity = capacity }

    subscript(key: Key) -> Value? { entries[key] }

    mutating func insert(_ value: Value, for key: Key) {
        if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
        entries[key] = value
    }
}

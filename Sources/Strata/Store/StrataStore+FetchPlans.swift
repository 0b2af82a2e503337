import Foundation
import ObjectGraph
import StrataEngine
import StrataSync

extension StrataStore {
    /// [FETCH-S18] What a fetch works out from its predicate and entity alone, kept for the
    /// next fetch of the same shape: the predicate compiled for row views and for scanned rows,
    /// and its index plans. Repeated fetches (a screen's list, a lookup by name) then skip the
    /// compilation and the planning, as a database's prepared statement does.
    ///
    /// Made only for predicates ``isPlanCacheable(_:entity:)`` accepts, whose compiled form is
    /// the same for every snapshot and holds no state of its own.
    ///
    /// Thread safety: immutable once made (every field a `let`), and shared by fetches on any
    /// thread. `@unchecked` because the compiled predicates are closures: those of a cacheable
    /// predicate capture only constants, ordinals and immutable patterns (no semi-join, whose
    /// sets come from one snapshot, and no `MATCHES`, whose expression is looked up lazily).
    final class FetchPlan: @unchecked Sendable {
        /// The entity the predicate was compiled for (held, so its identifier is not reused).
        let entity: EntityDescription
        /// The key space ([KEY-2]) the index plans are for.
        let root: String
        /// Every index plan of the predicate's conjuncts (``indexPlans(for:entity:root:)``),
        /// before any filter of the indexes a fetch may use.
        let indexPlans: [IndexPlan]
        let compiled: CompiledFetchPredicate<RowView>
        let scanCompiled: CompiledFetchPredicate<BorrowedRowView>

        init(
            entity: EntityDescription, root: String, indexPlans: [IndexPlan], compiled: CompiledFetchPredicate<RowView>,
            scanCompiled: CompiledFetchPredicate<BorrowedRowView>
        ) {
            self.entity = entity
            self.root = root
            self.indexPlans = indexPlans
            self.compiled = compiled
            self.scanCompiled = scanCompiled
        }
    }

    /// The fetch plans of recent request shapes ([FETCH-S18]), by entity and predicate; a
    /// shape that has none is kept as `nil`, so that it is not examined again. At most
    /// ``capacity`` shapes: when full, the table starts over (a workload of many shapes, such
    /// as a predicate with a new constant each time, pays one lookup and one insert a fetch).
    ///
    /// Thread safety: a value, kept in ``StrataStore/fetchPlans``'s lock.
    struct FetchPlans {
        struct Key: Hashable {
            let entity: ObjectIdentifier
            let predicate: FetchPredicate

            /// The entity and a fingerprint of the predicate's cacheable shape (its operators,
            /// key paths and constants, by their bytes), fed to the hasher as one word: the
            /// synthesized hash of a predicate runs the hasher over every string of it and costs
            /// more than the rest of the lookup. Equality still compares whole predicates.
            func hash(into hasher: inout Hasher) {
                hasher.combine(entity)
                var fingerprint = Fingerprint()
                fingerprint.add(predicate)
                hasher.combine(fingerprint.value)
            }
        }

        /// FNV-1a over a predicate's parts: cheap, and enough to spread a few hundred shapes.
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
                case .comparison(let left, let op, let right, _, _):
                    add(word: 7)
                    add(text: op.rawValue)
                    if case .keyPath(let path) = left { add(text: path) }
                    if case .constant(let value) = right { add(value) }
                    if case .aggregate(let parts) = right {
                        for case .constant(let value) in parts { add(value) }
                        add(word: 5)
                    }
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
                case .object: add(word: 9)
                }
            }
        }

        static let capacity = 256
        private var plans: [Key: FetchPlan?] = [:]

        /// The entry for `key`: `.some(nil)` for a shape known to have no plan, `nil` for one
        /// not seen.
        func entry(_ key: Key) -> FetchPlan?? { plans[key] }

        mutating func insert(_ plan: FetchPlan?, for key: Key) {
            if plans.count >= Self.capacity { plans.removeAll(keepingCapacity: true) }
            plans[key] = .some(plan)
        }

        var count: Int { plans.count }
    }

    /// The plan of `predicate` on `entity` ([FETCH-S18]), from the cache or made and kept
    /// there now; `nil` for a predicate that has none.
    func fetchPlan(for predicate: FetchPredicate, entity: EntityDescription, layout: StoreLayout) throws -> FetchPlan? {
        let key = FetchPlans.Key(entity: ObjectIdentifier(entity), predicate: predicate)
        // A plan holds its entity, so the identifier names that entity while the plan is kept;
        // a shape known to have none may outlive its entity, and then just has none.
        if let found = fetchPlans.withLock({ $0.entry(key) }) { return found.flatMap { $0.entity === entity ? $0 : nil } }
        var plan: FetchPlan? = nil
        if Self.isPlanCacheable(predicate, entity: entity) {
            let root = layout.keySpace(of: entity)
            var request = FetchRequest(entityName: entity.name)
            request.entity = entity
            request.predicate = predicate
            plan = FetchPlan(
                entity: entity, root: root, indexPlans: Self.indexPlans(for: request, entity: entity, root: root),
                compiled: try predicate.compiled(for: entity, as: RowView.self),
                scanCompiled: try predicate.compiled(for: entity, as: BorrowedRowView.self))
        }
        let made = plan
        fetchPlans.withLock { $0.insert(made, for: key) }
        return plan
    }

    /// Whether a predicate's compiled form and index plans depend on nothing but itself and
    /// `entity` ([FETCH-S18]): every comparison is a stored attribute of `entity` against a
    /// constant (or a list of constants), without a modifier and other than `MATCHES`, under
    /// `AND`, `OR` and `NOT`. Key
    /// paths through relationships (semi-joins, whose sets come from a snapshot), `SELF`,
    /// subqueries, functions and variables are not.
    static func isPlanCacheable(_ predicate: FetchPredicate, entity: EntityDescription) -> Bool {
        switch predicate {
        case .value:
            return true
        case .and(let parts), .or(let parts):
            return parts.allSatisfy { isPlanCacheable($0, entity: entity) }
        case .not(let inner):
            return isPlanCacheable(inner, entity: entity)
        case .comparison(.keyPath(let path), let op, let right, .direct, _):
            guard op != .matches, let attribute = entity.attributesByName[path], !attribute.isTransient else { return false }
            switch right {
            case .constant(let constant): return !constant.namesObjects
            // `IN {'a', 'b'}`, `BETWEEN {1, 2}`: a list of constants.
            case .aggregate(let parts):
                return parts.allSatisfy { part in
                    if case .constant(let constant) = part { return !constant.namesObjects } else { return false }
                }
            default: return false
            }
        case .comparison:
            return false
        }
    }
}

extension FetchValue {
    /// Whether the value is or holds an object ID (an attribute is never compared with one;
    /// such a predicate is left to the general path).
    fileprivate var namesObjects: Bool {
        switch self {
        case .attribute: return false
        case .collection(let values): return values.contains { $0.namesObjects }
        default: return true
        }
    }
}

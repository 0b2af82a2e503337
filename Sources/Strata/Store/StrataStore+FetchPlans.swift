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
        /// The key space ([KEY-2]) the index plans are for.
        let root: String
        /// Every index plan of the predicate's conjuncts (``indexPlans(for:entity:root:)``),
        /// before any filter of the indexes a fetch may use.
        let indexPlans: [IndexPlan]
        let compiled: CompiledFetchPredicate<RowView>
        let scanCompiled: CompiledFetchPredicate<BorrowedRowView>

        init(
            root: String, indexPlans: [IndexPlan], compiled: CompiledFetchPredicate<RowView>,
            scanCompiled: CompiledFetchPredicate<BorrowedRowView>
        ) {
            self.root = root
            self.indexPlans = indexPlans
            self.compiled = compiled
            self.scanCompiled = scanCompiled
        }
    }

    /// How many request shapes ``fetchPlans`` keeps ([FETCH-S18]): when full, the next shape
    /// empties the table first (a workload of ever new shapes, such as a predicate with a new
    /// constant each time, pays one lookup and one insert a fetch).
    static let fetchPlanCapacity = 256

    /// The plan of `predicate` on `entity` ([FETCH-S18]), from the cache or made and kept
    /// there now; `nil` for a predicate that has none (tested before any lookup: the test
    /// stops at the first key path through a relationship, and costs less than hashing a
    /// predicate that holds objects).
    func fetchPlan(for predicate: FetchPredicate, entity: EntityDescription, layout: StoreLayout) throws -> FetchPlan? {
        guard Self.isPlanCacheable(predicate, entity: entity) else { return nil }
        let key = EntityPredicate(entity, predicate)
        if let found = fetchPlans.withLock({ $0[key] }) { return found }
        let root = layout.keySpace(of: entity)
        var request = FetchRequest(entityName: entity.name)
        request.entity = entity
        request.predicate = predicate
        let plan = FetchPlan(
            root: root, indexPlans: Self.indexPlans(for: request, entity: entity, root: root),
            compiled: try predicate.compiled(for: entity, as: RowView.self),
            scanCompiled: try predicate.compiled(for: entity, as: BorrowedRowView.self))
        fetchPlans.withLock { plans in
            if plans.count >= Self.fetchPlanCapacity { plans.removeAll(keepingCapacity: true) }
            plans[key] = plan
        }
        return plan
    }

    /// Whether a predicate's compiled form and index plans depend on nothing but itself and
    /// `entity` ([FETCH-S18]): every comparison is a stored attribute of `entity` against a
    /// constant (or a list of constants), without a modifier and other than `MATCHES`, under
    /// `AND`, `OR` and `NOT`. Key paths through relationships (semi-joins, whose sets come from
    /// a snapshot), `SELF`, subqueries, functions and variables are not.
    static func isPlanCacheable(_ predicate: FetchPredicate, entity: EntityDescription) -> Bool {
        switch predicate {
        case .value:
            return true
        case .and(let parts), .or(let parts):
            return parts.allSatisfy { isPlanCacheable($0, entity: entity) }
        case .not(let inner):
            return isPlanCacheable(inner, entity: entity)
        case .comparison(.keyPath(let path), let op, let right, .direct, _):
            // By the entity's name table: a `String`-hashed dictionary lookup costs more.
            guard op != .matches, let attribute = entity.propertyIfAny(named: path) as? AttributeDescription, !attribute.isTransient
            else { return false }
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

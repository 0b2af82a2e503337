import ObjectGraph
import StrataEngine

extension StrataStore {
    /// Key ranges of one secondary index that hold every row a fetch can match.
    struct IndexPlan: CustomStringConvertible {
        var attribute: String
        /// Half-open key ranges `[lower, upper)`.
        var ranges: [(lower: [UInt8], upper: [UInt8])]
        /// For `==` and `IN`: each range is one value's keys, its lower bound that value's key
        /// without a reference.
        var isPoints = false
        /// For `==` and `IN`: the keys without their reference, one per value, so a row's
        /// entry can be probed directly (the ranges' lower bounds).
        var points: [[UInt8]]? { isPoints ? ranges.map(\.lower) : nil }
        var description: String { "index on \(attribute), \(ranges.count) range(s)" }
    }

    /// [IDX-S4] The first conjunct of the predicate that an index can serve, as key ranges, or
    /// `nil` to scan the hierarchy (fetches use ``bestIndexPlan(for:entity:root:in:)``). Only plain comparisons of an indexed attribute with a
    /// constant of the attribute's own kind, without string options, qualify; the whole
    /// predicate is still evaluated on every candidate.
    static func indexPlan(for request: FetchRequest, entity: EntityDescription, root: String) -> IndexPlan? {
        indexPlans(for: request, entity: entity, root: root).first
    }

    /// Of the plans the predicate allows, the one with the fewest candidate keys in
    /// `snapshot`, counting each plan's keys only up to the best count so far.
    static func bestIndexPlan(
        for request: FetchRequest, entity: EntityDescription, root: String, in snapshot: Snapshot, plans: [IndexPlan]? = nil
    ) -> IndexPlan? {
        let candidates = plans ?? indexPlans(for: request, entity: entity, root: root)
        // One plan: nothing to choose, no key counted.
        if candidates.count == 1 { return candidates[0] }
        var best: (plan: IndexPlan, count: Int)? = nil
        for plan in candidates {
            var count = 0
            let limit = best?.count ?? .max
            for range in plan.ranges where count < limit {
                count += snapshot.countKeys(from: range.lower, to: range.upper, limit: limit - count)
            }
            if count < (best?.count ?? .max) { best = (plan, count) }
        }
        return best?.plan
    }

    /// [IDX-S5] For an object or ID fetch with a limit whose first sort descriptor is an
    /// ascending, option-free sort on an indexed attribute of an exactly ordered kind
    /// (integers, booleans, strings, dates, UUIDs), the ranges of that attribute's index to
    /// walk in order: those of a conjunct on the attribute, else the whole index (every row
    /// has an entry, nulls first, as the sort puts them). Index order is the sort's order, and
    /// ties are in reference order, as a stable sort of a scan leaves them.
    static func orderedIndexPlan(
        for request: FetchRequest, entity: EntityDescription, root: String, plans: [IndexPlan]? = nil
    ) -> IndexPlan? {
        guard request.fetchLimit > 0, request.resultType == .managedObject || request.resultType == .managedObjectID,
            let first = request.sortDescriptors.first, first.ascending, first.options.isEmpty,
            !first.keyPath.containsByte(UInt8(ascii: ".")), let attribute = entity.propertiesByName[first.keyPath] as? AttributeDescription,
            attribute.hasIndexEntries, !attribute.isTransient
        else { return nil }
        switch attribute.attributeType {
        case .integer16, .integer32, .integer64, .boolean, .string, .date, .uuid: break
        default: return nil
        }
        if let plan = (plans ?? indexPlans(for: request, entity: entity, root: root)).first(where: { $0.attribute == attribute.name }) {
            let sorted = plan.ranges.sorted { $0.lower.precedes($1.lower) }
            var merged: [(lower: [UInt8], upper: [UInt8])] = []
            for range in sorted {
                if let last = merged.last, !last.upper.precedes(range.lower) {
                    if last.upper.precedes(range.upper) { merged[merged.count - 1].upper = range.upper }
                } else {
                    merged.append(range)
                }
            }
            return IndexPlan(attribute: attribute.name, ranges: merged)
        }
        let prefix = IndexKey.prefix(root: root, attribute: attribute.name)
        return IndexPlan(attribute: attribute.name, ranges: [(prefix, prefixEnd(prefix))])
    }

    /// [IDX-S7] The references a predicate matches, read from indexes alone, when it is a
    /// conjunction of comparisons that indexes answer exactly (`==`, `IN`, `<`, `<=`, `>`,
    /// `>=`, `BETWEEN` on integer, boolean, string, date and UUID attributes; not `BEGINSWITH`,
    /// whose byte prefix is not a grapheme prefix) and the fetch covers the whole hierarchy
    /// (index entries do not say which subentity a row is). `nil` otherwise.
    static func indexOnlyMatches(
        for request: FetchRequest, entity: EntityDescription, root: String, names: Set<String>,
        model: ManagedObjectModel, in snapshot: Snapshot, plans: [IndexPlan]? = nil
    ) -> Set<Int64>? {
        guard let plans = exactIndexPlans(for: request, entity: entity, root: root, names: names, model: model, plans: plans) else { return nil }
        var matches: Set<Int64>? = nil
        for plan in plans {
            var found = Set<Int64>()
            for range in plan.ranges {
                snapshot.forEachKeyBytes(from: range.lower, to: range.upper) { key in
                    if let reference = KeyLayout.reference(fromKeyBytes: key), matches?.contains(reference) ?? true {
                        found.insert(reference)
                    }
                    return true
                }
            }
            matches = found
            if found.isEmpty { break }
        }
        return matches
    }

    /// [IDX-S7] The count of ``indexOnlyMatches(for:entity:root:names:model:in:plans:)``; one
    /// conjunct is counted from its keys without collecting references (a row has one entry
    /// per indexed attribute, so the distinct ranges of one conjunct hold each match once).
    static func indexOnlyCount(
        for request: FetchRequest, entity: EntityDescription, root: String, names: Set<String>,
        model: ManagedObjectModel, in snapshot: Snapshot, plans: [IndexPlan]? = nil
    ) -> Int? {
        guard let exact = exactIndexPlans(for: request, entity: entity, root: root, names: names, model: model, plans: plans) else { return nil }
        guard exact.count == 1 else {
            return indexOnlyMatches(for: request, entity: entity, root: root, names: names, model: model, in: snapshot, plans: exact)?.count
        }
        var count = 0
        var previous: [UInt8]? = nil
        for range in exact[0].ranges.sorted(by: { $0.lower.precedes($1.lower) }) where range.lower != previous {
            previous = range.lower
            count += snapshot.countKeys(from: range.lower, to: range.upper)
        }
        return count
    }

    /// The plans of a predicate that indexes answer exactly ([IDX-S7]), or `nil`.
    private static func exactIndexPlans(
        for request: FetchRequest, entity: EntityDescription, root: String, names: Set<String>,
        model: ManagedObjectModel, plans: [IndexPlan]?
    ) -> [IndexPlan]? {
        guard let predicate = request.predicate else { return nil }
        func leaves(_ predicate: FetchPredicate) -> Int {
            if case .and(let parts) = predicate { return parts.reduce(0) { $0 + leaves($1) } }
            return 1
        }
        let constraints = predicate.conjunctiveConstraints
        guard !constraints.isEmpty, leaves(predicate) == constraints.count,
            !constraints.contains(where: { $0.op == .beginsWith }),
            Set(model.entities.filter { $0.rootEntityName == entity.rootEntityName && !$0.isAbstract }.map(\.name)).isSubset(of: names)
        else { return nil }
        let plans = plans ?? indexPlans(for: request, entity: entity, root: root)
        guard plans.count == constraints.count else { return nil }
        for plan in plans {
            guard let attribute = entity.attributesByName[plan.attribute] else { return nil }
            switch attribute.attributeType {
            case .integer16, .integer32, .integer64, .boolean, .string, .date, .uuid: continue
            default: return nil
            }
        }
        return plans
    }

    /// A way to rule out rows by one conjunct's index without reading them.
    enum RowFilter {
        /// Every reference the conjunct's ranges hold.
        case set(Set<Int64>)
        /// The conjunct's keys without reference, as probe scopes of the fetch's snapshot: a
        /// row passes when one of them, followed by its reference, is in the index. Each probe
        /// starts from the lowest index node that holds its point's keys, not from the root.
        case probe([KeyIndex.Scope])
    }

    /// The filters of an ordered walk, laid out for a test per candidate that copies nothing out
    /// of them: iterating `[RowFilter]` copied each filter and each of its scopes (a retain and a
    /// release of every array and node, ~8 atomic operations a candidate), which on an Intel host
    /// cost more than the probes' descents.
    struct RowFilters {
        /// The reference sets.
        private var sets: [Set<Int64>] = []
        /// The probed conjuncts, a group of scopes each.
        private let probes: KeyIndex.ProbeGroups

        init(_ filters: [RowFilter]) {
            var groups: [[KeyIndex.Scope]] = []
            for filter in filters {
                switch filter {
                case .set(let references): sets.append(references)
                case .probe(let scopes): groups.append(scopes)
                }
            }
            probes = KeyIndex.ProbeGroups(groups)
        }

        /// Whether `reference` passes every filter.
        func passes(_ reference: Int64) -> Bool {
            let inSets = sets.withUnsafeBufferPointer { buffer in
                for index in buffer.indices where !buffer[index].contains(reference) { return false }
                return true
            }
            guard inSets, !probes.isEmpty else { return inSets }
            // Each probe key is the point and the reference, in key order.
            return probes.pass(KeyLayout.orderedReference(reference))
        }
    }

    /// [IDX-S5] How a conjunct's index filters the candidates of an ordered walk that expects to
    /// visit about `expectedCandidates` rows: a conjunct of at most 8 values whose keys are more
    /// than that is probed per candidate (a few hundred lookups instead of reading thousands of
    /// keys); otherwise its references, when at most ``prefilterCap``. `nil`: no filter.
    static func rowFilter(of plan: IndexPlan, in snapshot: Snapshot, expectedCandidates: Int) -> RowFilter? {
        if let points = plan.points, points.count <= 8 {
            if let small = referenceSet(of: plan, in: snapshot, cap: expectedCandidates) { return .set(small) }
            return .probe(points.map { snapshot.probeScope(forPrefix: $0) })
        }
        return referenceSet(of: plan, in: snapshot, cap: prefilterCap).map(RowFilter.set)
    }

    /// The references in a plan's ranges, or `nil` when they are more than `cap` (reading them
    /// would cost more than it saves). Every plan's ranges hold at least the rows its conjunct
    /// matches, so a row whose reference is missing cannot match the predicate.
    static func referenceSet(of plan: IndexPlan, in snapshot: Snapshot, cap: Int) -> Set<Int64>? {
        var count = 0
        for range in plan.ranges {
            count += snapshot.countKeys(from: range.lower, to: range.upper, limit: cap + 1 - count)
            if count > cap { return nil }
        }
        var references = Set<Int64>(minimumCapacity: count)
        for range in plan.ranges {
            snapshot.forEachKeyBytes(from: range.lower, to: range.upper) { key in
                if let reference = KeyLayout.reference(fromKeyBytes: key) { references.insert(reference) }
                return true
            }
        }
        return references
    }

    /// Every plan the predicate's conjuncts allow, in conjunct order. The functions above take
    /// them as `plans` when the caller has computed them already (a fetch computes them once).
    static func indexPlans(for request: FetchRequest, entity: EntityDescription, root: String) -> [IndexPlan] {
        guard let predicate = request.predicate else { return [] }
        var plans: [IndexPlan] = []
        for constraint in predicate.conjunctiveConstraints where constraint.options.isEmpty && !constraint.keyPath.containsByte(UInt8(ascii: ".")) {
            // By the entity's name table: a `String`-hashed dictionary lookup costs more.
            guard let attribute = entity.propertyIfAny(named: constraint.keyPath) as? AttributeDescription,
                attribute.hasIndexEntries, !attribute.isTransient, let kind = typeByte(of: attribute.attributeType)
            else { continue }
            let prefix = IndexKey.prefix(root: root, attribute: attribute.name)
            func encoded(_ value: FetchValue) -> [UInt8]? {
                guard case .attribute(let attributeValue) = value, attributeValue != .null else { return nil }
                var key: [UInt8] = []
                key.reserveCapacity(prefix.count + 24 + (attributeValue.stringValue?.utf8.count ?? 0))
                key.append(contentsOf: prefix)
                IndexKey.encode(attributeValue, into: &key)
                return key[prefix.count] == kind ? key : nil
            }
            // The bounds of the attribute's type, for open ranges only (made when used).
            var kindStart: [UInt8] { prefix + [kind] }
            var kindEnd: [UInt8] { prefix + [kind + 1] }
            var ranges: [(lower: [UInt8], upper: [UInt8])] = []
            var isPoints = false
            switch constraint.op {
            case .equal:
                if case .attribute(.null) = constraint.value {
                    // `== nil`: every row has an entry, a null one under type byte 0x00.
                    let key = prefix + IndexKey.encode(.null)
                    ranges = [(key, Self.prefixEnd(key))]
                    isPoints = true
                    break
                }
                guard let key = encoded(constraint.value) else { continue }
                ranges = [(key, Self.prefixEnd(key))]
                isPoints = true
            case .in:
                guard case .collection(let values) = constraint.value else { continue }
                let keys = values.map(encoded)
                guard !keys.contains(where: { $0 == nil }) else { continue }
                ranges = keys.compactMap { $0 }.map { ($0, Self.prefixEnd($0)) }
                isPoints = true
            case .lessThan:
                guard let key = encoded(constraint.value) else { continue }
                ranges = [(kindStart, key)]
            case .lessThanOrEqual:
                guard let key = encoded(constraint.value) else { continue }
                ranges = [(kindStart, Self.prefixEnd(key))]
            case .greaterThan:
                guard let key = encoded(constraint.value) else { continue }
                ranges = [(Self.prefixEnd(key), kindEnd)]
            case .greaterThanOrEqual:
                guard let key = encoded(constraint.value) else { continue }
                ranges = [(key, kindEnd)]
            case .between:
                guard case .collection(let bounds) = constraint.value, bounds.count == 2,
                    let low = encoded(bounds[0]), let high = encoded(bounds[1])
                else { continue }
                ranges = [(low, Self.prefixEnd(high))]
            case .beginsWith:
                guard case .attribute(.string(let text)) = constraint.value, kind == 0x30 else { continue }
                let start = prefix + IndexKey.stringPrefix(text)
                ranges = [(start, Self.prefixEnd(start))]
            default:
                continue
            }
            plans.append(IndexPlan(attribute: attribute.name, ranges: ranges, isPoints: isPoints))
        }
        return plans
    }

    /// The type byte ([IDX-S2]) every value of an attribute type encodes with.
    /// [IDX-S8] The attribute whose distinct values a dictionary fetch asks for, when its index
    /// answers it: distinct results of one property, a key path to an indexed, stored
    /// attribute of a type whose index encoding is exact (integers, booleans, strings, dates,
    /// UUIDs: two keys are equal only for equal values), over the entity's whole hierarchy (a
    /// root entity, with its subentities if it has any), with no predicate, grouping or
    /// sort by anything else; `nil` otherwise.
    static func distinctIndexAttribute(of request: FetchRequest, entity: EntityDescription) -> AttributeDescription? {
        guard request.resultType == .dictionary, request.returnsDistinctResults, request.predicate == nil,
            request.propertiesToGroupBy == nil, request.havingPredicate == nil,
            entity.superentity == nil, entity.subentities.isEmpty || request.includesSubentities,
            let properties = request.propertiesToFetch, properties.count == 1, case .keyPath(let name) = properties[0],
            request.dictionaryRowKeyPaths == [name],
            let attribute = entity.attributesByName[name], attribute.hasIndexEntries, !attribute.isTransient
        else { return nil }
        switch attribute.attributeType {
        case .integer16, .integer32, .integer64, .boolean, .string, .date, .uuid: return attribute
        default: return nil
        }
    }

    static func typeByte(of type: AttributeType) -> UInt8? {
        switch type {
        case .integer16, .integer32, .integer64, .boolean: return 0x20
        case .double, .float, .decimal: return 0x21
        case .string, .uri: return 0x30
        case .date: return 0x40
        case .uuid: return 0x50
        case .binaryData, .transformable: return 0x60
        @unknown default: return nil
        }
    }

    /// The first key after every key that starts with `prefix` (index prefixes never end in
    /// 0xFF bytes only, so one exists).
    static func prefixEnd(_ prefix: [UInt8]) -> [UInt8] {
        KeyIndex.prefixEnd(prefix) ?? [0xFF]
    }
}

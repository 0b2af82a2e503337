import ObjectGraph
import StrataEngine

extension StrataStore {
    func executeRequest(_ request: any PersistentStoreRequest, with context: ManagedObjectContext?) throws -> PersistentStoreResult {
        switch request {
        case let fetch as FetchRequest: return try execute(fetch, with: context, reading: nil)
        case let save as SaveChangesRequest: return try execute(save)
        default: throw ObjectGraphError(.unsupportedRequest, "StrataStore does not handle \(request.requestType) requests.")
        }
    }

    func model() throws -> ManagedObjectModel {
        guard let model = persistentStoreCoordinator?.managedObjectModel else {
            throw ObjectGraphError(.noPersistentStore, "The store is not part of a coordinator.")
        }
        return model
    }

    /// A fetch; `reading` is the snapshot of an enclosing fetch (a semi-join's inner fetch reads
    /// what the outer one reads).
    private func execute(_ request: FetchRequest, with context: ManagedObjectContext?, reading: Snapshot? = nil) throws -> PersistentStoreResult {
        let model = try model()
        var request = request
        if request.entity == nil { request.entity = try model.entity(named: request.entityName) }
        // The names of the entities the fetch matches, made only where a path needs them.
        func names() -> Set<String> { request.matchingEntityNames() }
        let engine = try openEngine()
        let snapshot = try reading ?? mappingEngineErrors("take a snapshot") { () throws(StoreError) in try engine.snapshot() }
        // [ROW-4] A count of whole entities is the sum of stored counters: O(entities).
        if request.resultType == .count && request.predicate == nil && request.fetchOffset == 0 && request.fetchLimit == 0 {
            let record = try cachedRecord(in: snapshot)
            return .count(record.rowCount(of: names()))
        }
        let layout = try storeLayout()
        let source = RowSource(snapshot: snapshot, store: self, layout: layout)
        // The entities the fetch matches (`names`: the fetched entity and, when included, its
        // subentities), by entity number: no name is compared per row.
        let fetched = request.entity.map { !request.includesSubentities || $0.subentities.isEmpty ? [$0] : $0.selfAndAllSubentities } ?? []
        var wanted = [Bool](repeating: false, count: layout.entities.count)
        for entity in fetched {
            if let number = layout.number(of: entity) { wanted[Int(number)] = true }
        }
        func matches(_ row: RowBytes) -> Bool { wanted[Int(row.entityNumber)] }
        // The predicate, compiled once: key paths to ordinals. Rows are filtered as they are
        // read, so the result shaping below sees matches only.
        // Semi-joins found while compiling, by leaf: their destination sets also choose
        // candidate rows through relationship keys ([FETCH-S2]).
        // (A list searched by equality: a fetch has a join or two, and hashing a predicate
        // costs more than comparing it.)
        var joins = SemiJoins()
        let compiled = try request.predicate.map { predicate in
            try predicate.compiled(for: try request.entity ?? model.entity(named: request.entityName), as: RowView.self) { leaf, entity in
                guard let join = try self.semiJoin(leaf, entity: entity, in: snapshot, layout: layout) else { return nil }
                joins.add(join, for: leaf)
                return { try join.test($0) }
            }
        }
        func accepts(_ view: RowView) throws -> Bool { try compiled?.evaluate(view) ?? true }
        // The same predicate for rows a scan tests before copying them: the semi-joins found
        // above, no new ones.
        func compiledForScan() throws -> CompiledFetchPredicate<BorrowedRowView>? {
            try request.predicate.map { predicate in
                try predicate.compiled(for: try request.entity ?? model.entity(named: request.entityName), as: BorrowedRowView.self) { leaf, _ in
                    joins.join(for: leaf).map { join in { try join.test($0) } }
                }
            }
        }
        var rows: [RowView] = []
        /// A dictionary fetch's columns, when the scan read them from the rows it met.
        // (A plain array and a flag: appending through an optional copied the array per row.)
        var scannedColumns: [[FetchValue]] = []
        var columnsScanned = false
        // A plain count keeps no row: the matches are counted as they are read.
        let countsOnly = request.resultType == .count && request.sortDescriptors.isEmpty
            && request.fetchOffset == 0 && request.fetchLimit == 0
        var counted = 0
        // A fetch of objects or IDs: its rows are the results, sorted and paged as they are.
        let returnsRows = request.resultType == .managedObject || request.resultType == .managedObjectID
        // [FETCH-S6] Objects or IDs with a limit and no sort: the page is the first matches in
        // reference order, so reading stops once offset + limit rows match.
        let enough = returnsRows && request.sortDescriptors.isEmpty && request.fetchLimit > 0
            ? request.fetchOffset + request.fetchLimit : Int.max
        /// Reads candidate rows in reference order, keeping the matches.
        func readCandidates(_ references: [Int64], root: String) throws {
            let prefix = request.entity.map { $0.rootEntityName == root ? rowPrefix(of: $0) : KeyLayout.rowPrefix(root: root) }
                ?? KeyLayout.rowPrefix(root: root)
            if !countsOnly { rows.reserveCapacity(rows.count + min(references.count, enough)) }
            for reference in references where rows.count < enough {
                guard let row = try source.readOnce(prefix: prefix, root: root, reference: reference) else { continue }
                if matches(row), let entity = layout.entity(number: row.entityNumber) {
                    let view = RowView(reference: reference, row: row, entity: entity, source: source)
                    if try accepts(view) {
                        if countsOnly { counted += 1 } else { rows.append(view) }
                    }
                }
            }
        }
        // Each hierarchy once, in name order.
        let roots = fetched.count == 1 ? [fetched[0].rootEntityName] : Set(fetched.map(\.rootEntityName)).sorted()
        // Whether the indexes are the model's ([IDX-S6]; not after a read-only open with a
        // model that indexes other attributes): if not, no index serves the fetch.
        let indexed = indexesServeFetches.load(ordering: .relaxed)
        // One hierarchy: the predicate's index plans, computed once for every path below.
        let hierarchy: (root: String, entity: EntityDescription, plans: [IndexPlan])? = {
            guard roots.count == 1, let root = roots.first, let entity = request.entity else { return nil }
            return (root, entity, indexed ? Self.indexPlans(for: request, entity: entity, root: root) : [])
        }()
        // [IDX-S7] A count that indexes answer exactly reads no row.
        if request.resultType == .count && request.fetchOffset == 0 && request.fetchLimit == 0, let (root, entity, plans) = hierarchy,
            let count = Self.indexOnlyCount(
                for: request, entity: entity, root: root, names: names(), model: model, in: snapshot, plans: plans)
        {
            return .count(count)
        }
        if indexed, let (root, entity, _) = hierarchy, let attribute = Self.distinctIndexAttribute(of: request, entity: entity) {
            // [IDX-S8] The distinct values of one indexed attribute: the index holds them in
            // order, each value's keys together; one row per value gives its stored form.
            let prefix = IndexKey.prefix(root: root, attribute: attribute.name)
            let rowPrefix = KeyLayout.rowPrefix(root: root)
            var columns: [[FetchValue]] = []
            var last: [UInt8]? = nil
            try snapshot.forEachKeyBytes(from: prefix, to: Self.prefixEnd(prefix)) { key in
                guard key.count >= prefix.count + 8 else { return true }
                let value = UnsafeRawBufferPointer(rebasing: key[prefix.count..<(key.count - 8)])
                if let last, last.withUnsafeBytes({ $0.elementsEqualBytes(value) }) { return true }
                guard let reference = KeyLayout.reference(fromKeyBytes: key),
                    let row = try source.readOnce(prefix: rowPrefix, root: root, reference: reference),
                    matches(row), let rowEntity = layout.entity(number: row.entityNumber)
                else { return true }
                let view = RowView(reference: reference, row: row, entity: rowEntity, source: source)
                columns.append([try view.fetchValue(forKeyPath: attribute.name)])
                last = Array(value)
                return true
            }
            return .dictionaries(try request.dictionaries(fromColumns: columns))
        }
        // Whether the rows are in the fetch's order already (an ordered walk of its only sort).
        var presorted = false
        if let (root, _, _) = hierarchy, let predicate = request.predicate, let found = selfCandidates(predicate, root: root, layout: layout),
            found.count <= max(64, try cachedRecord(in: snapshot).rowCount(of: names()) / 3)
        {
            // [FETCH-S13] `SELF IN %@`: the objects' rows are the candidates, read by reference;
            // the whole predicate (that conjunct included) decides on each.
            try readCandidates(found, root: root)
        } else if indexed, let (root, entity, plans) = hierarchy,
            let ordered = Self.orderedIndexPlan(for: request, entity: entity, root: root, plans: plans)
        {
            // Index order is the sort's order, ties in reference order (as a stable sort of a
            // scan leaves them): with one sort descriptor, the walk's order is the answer's.
            presorted = request.sortDescriptors.count == 1
            // [IDX-S5] A limited fetch sorted by an indexed attribute walks that index in order
            // and stops once the page is full (and the last value's ties are in).
            let needed = request.fetchOffset + request.fetchLimit
            // The other conjuncts' indexes rule rows out before they are read: a conjunct with a
            // few values is probed per candidate when its keys outnumber what the walk will
            // visit; others, where small, become a reference set.
            let filters = plans.filter { $0.attribute != ordered.attribute }
                .compactMap { Self.rowFilter(of: $0, in: snapshot, expectedCandidates: 4 * needed) }
            var matched = 0
            var lastValue: [UInt8]? = nil
            let rowPrefix = KeyLayout.rowPrefix(root: root)
            walk: for range in ordered.ranges {
                try snapshot.forEachKeyBytes(from: range.lower, to: range.upper) { key in
                    let value = UnsafeRawBufferPointer(rebasing: key.dropLast(8))
                    if matched >= needed, lastValue?.withUnsafeBytes({ $0.elementsEqualBytes(value) }) != true { return false }
                    guard let reference = KeyLayout.reference(fromKeyBytes: key),
                        Self.passes(reference, filters, in: snapshot),
                        let row = try source.readOnce(prefix: rowPrefix, root: root, reference: reference),
                        matches(row), let rowEntity = layout.entity(number: row.entityNumber)
                    else { return true }
                    let view = RowView(reference: reference, row: row, entity: rowEntity, source: source)
                    if try accepts(view) {
                        rows.append(view)
                        matched += 1
                        lastValue = Array(value)
                    }
                    return true
                }
                if matched >= needed { break walk }
            }
        } else if let (root, entity, plans) = hierarchy,
            let plan = Self.bestIndexPlan(for: request, entity: entity, root: root, in: snapshot, plans: plans)
        {
            // [IDX-S4] Candidates from the index, in reference order like a scan, each once. One
            // value's keys come in reference order already: no set, no sort.
            var found: [Int64] = []
            for range in plan.ranges {
                snapshot.forEachKeyBytes(from: range.lower, to: range.upper) { key in
                    if let reference = KeyLayout.reference(fromKeyBytes: key) { found.append(reference) }
                    return true
                }
            }
            if !zip(found, found.dropFirst()).allSatisfy({ $0 < $1 }) {
                found.sort()
                found = found.indices.compactMap { $0 > 0 && found[$0] == found[$0 - 1] ? nil : found[$0] }
            }
            // Other conjuncts' indexes, where not much larger, narrow the rows to read.
            for other in plans where other.attribute != plan.attribute {
                guard !found.isEmpty else { break }
                if let set = Self.referenceSet(of: other, in: snapshot, cap: min(Self.prefilterCap, 16 * found.count)) {
                    found.removeAll { !set.contains($0) }
                }
            }
            try readCandidates(found, root: root)
        } else if let (root, entity, _) = hierarchy, let predicate = request.predicate,
            let found = try keyCandidates(
                predicate, entity: entity, joins: joins, snapshot: snapshot,
                rowCount: try cachedRecord(in: snapshot).rowCount(of: names()))
        {
            // The candidates satisfy the conjunct they came from: its test is not run again.
            found.join.exact.value = true
            if found.leaf == predicate, request.resultType == .count || request.resultType == .managedObjectID,
                request.sortDescriptors.isEmpty, request.fetchOffset == 0, request.fetchLimit == 0
            {
                // [FETCH-S3] The whole predicate is that conjunct: the answer is the candidates
                // the index holds (a row of the fetched entities under each key), no row read.
                // Members come in reference order: each row key is the last one with its
                // reference rewritten, looked up from the previous key's index leaf.
                var key = KeyLayout.rowPrefix(root: root)
                KeyLayout.appendReference(0, to: &key)
                var finger = KeyIndex.Finger()
                var ids: [ManagedObjectID] = [], count = 0
                for member in found.members where Int(member.entity) < wanted.count && wanted[Int(member.entity)] {
                    KeyLayout.replaceReference(member.reference, in: &key)
                    guard snapshot.sequence(of: key, finger: &finger) != nil else { continue }
                    count += 1
                    if request.resultType == .managedObjectID, let memberEntity = layout.entity(number: member.entity) {
                        ids.append(newObjectID(for: memberEntity, referenceObject: .int64(member.reference)))
                    }
                }
                return request.resultType == .count ? .count(count) : .objectIDs(ids)
            }
            try readCandidates(found.members.map(\.reference), root: root)
        } else {
            let scanTest = try compiledForScan()
            // [FETCH-S9] A sorted page of objects or IDs keeps only its rows as the scan goes.
            let top: TopRows? = returnsRows && request.fetchLimit > 0 && !request.sortDescriptors.isEmpty
                ? request.entity.flatMap {
                    TopRows(count: request.fetchOffset + request.fetchLimit, descriptors: request.sortDescriptors, entity: $0, source: source)
                } : nil
            // A dictionary fetch's columns are read as the scan meets its rows: no row is copied.
            let columnPaths = request.resultType == .dictionary && top == nil && !countsOnly ? request.dictionaryRowKeyPaths : nil
            if columnPaths != nil {
                columnsScanned = true
                scannedColumns.reserveCapacity(try cachedRecord(in: snapshot).rowCount(of: names()))
            }
            for root in roots where rows.count < enough {
                var failure: Error? = nil
                _ = try mappingEngineErrors("scan \(root) rows") { () throws(StoreError) in
                    // [FETCH-S7] Each row is checked and tested where the engine holds it; only
                    // a row the predicate accepts (and the fetch keeps) is copied.
                    try snapshot.forEachView(from: KeyLayout.rowPrefix(root: root), to: KeyLayout.rowPrefixEnd(root: root)) { key, value in
                        do {
                            guard let reference = KeyLayout.reference(fromKeyBytes: key) else { return true }
                            let fields = try RowFields(value, store: layout, context: .key(root: root, reference: reference), readByEngine: true)
                            if wanted[Int(fields.entityNumber)], let entity = layout.unretainedEntity(number: fields.entityNumber) {
                                let borrowed = BorrowedRowView(fields: fields, reference: reference, entity: entity.takeUnretainedValue(), source: source)
                                if try scanTest?.evaluate(borrowed) ?? true {
                                    if countsOnly {
                                        counted += 1
                                    } else if let top {
                                        try top.offer(borrowed)
                                    } else if columnsScanned {
                                        scannedColumns.append(try (columnPaths ?? []).map { try borrowed.fetchValue(forKeyPath: $0) })
                                    } else {
                                        rows.append(borrowed.view())
                                    }
                                }
                            }
                            return rows.count < enough
                        } catch {
                            failure = error
                            return false
                        }
                    }
                }
                if let failure { throw failure }
            }
            if let top { rows = top.views }
        }
        if countsOnly { return .count(counted + rows.count) }
        // Sorting, paging and every result shape: the fetch language's own engine. The rows
        // matched the predicate already.
        request.predicate = nil
        if returnsRows {
            // [FETCH-S4] Sort keys read by ordinal, each destination's once; then the page.
            if !presorted {
                rows = try StrataStore.sorted(
                    rows, by: request.sortDescriptors, entity: request.entity,
                    keeping: request.fetchLimit > 0 ? request.fetchOffset + request.fetchLimit : nil)
            }
            request.sortDescriptors = []
        }
        if request.resultType == .managedObject, let context {
            // The rows are decoded already: they reach the context with the objects.
            let matched = try request.filterSortAndPage(rows)
            // [FETCH-S8] With a batch size, rows reach the context for the first batch only:
            // later batches are read when they are reached.
            let loaded = request.fetchBatchSize > 0 ? min(request.fetchBatchSize, matched.count) : matched.count
            var objects = objects(for: matched.prefix(loaded).map { $0.node() }, in: context, returnsObjectsAsFaults: request.returnsObjectsAsFaults)
            for row in matched.dropFirst(loaded) { objects.append(context.object(with: row.objectID)) }
            return .objects(objects)
        }
        if request.resultType == .dictionary, let paths = request.dictionaryRowKeyPaths {
            // Each row's key paths read once, through compiled readers; the grouping and
            // aggregation then work on plain values.
            let columns = columnsScanned ? scannedColumns : try rows.map { row in try paths.map { try row.fetchValue(forKeyPath: $0) } }
            return .dictionaries(try request.dictionaries(fromColumns: columns))
        }
        return try request.apply(to: rows, objectID: \.objectID)
    }

    /// [FETCH-S1] A comparison through a relationship (`artist.name == "X"`, `ANY tags.name ==
    /// "jazz"`) answered from the destination's matches: one fetch of the destination entity
    /// for `rest op constant` (through its indexes when it has them), then each row's
    /// destination reference is looked up in that set instead of reading the destination row.
    /// Only comparisons that no row without a destination satisfies (`null op constant` is
    /// false) qualify, so a missing or dangling destination answers false either way; `nil`
    /// leaves the comparison to the default evaluation.
    func semiJoin(
        _ leaf: FetchPredicate, entity: EntityDescription, in snapshot: Snapshot, layout: StoreLayout
    ) throws -> SemiJoin? {
        if case .comparison(.member(.subquery(.keyPath(let path), let variable, let inner), "@count"), let op, .constant(let constant), .direct, let options) = leaf,
            let relationship = entity.relationshipsByName[path], !relationship.isTransient, relationship.ordinal >= 0,
            case .foreignKey(let inverse) = RelationshipKeys.storage(of: relationship), let destination = relationship.destinationEntity,
            let element = FetchPredicate.elementPredicate(inner, variable: variable),
            let root = try? model().entity(named: destination.rootEntityName),
            try cachedRecord(in: snapshot).rowCount(of: root.selfAndAllSubentities.map(\.name)) <= RowSource.memberGroupRowCap
        {
            // [FETCH-S14] One fetch of the members that match, read for their owner.
            var members = FetchRequest(entityName: destination.name)
            members.entity = destination
            members.predicate = element
            members.resultType = .dictionary
            members.propertiesToFetch = [.keyPath(inverse.name)]
            guard case .dictionaries(let rows) = try execute(members, with: nil, reading: snapshot) else { return nil }
            var counts: [Int64: Int] = [:]
            for row in rows {
                guard case .object(let owner)? = row[inverse.name], case .int64(let reference)? = owner.referenceObject else { continue }
                counts[reference, default: 0] += 1
            }
            var join = SemiJoin(relationship: nil, references: [], owners: nil, exact: Flag())
            join.subqueryCounts = (counts, op, constant, options)
            return join
        }
        if case .comparison(.keyPath(let path), let op, .constant(let constant), .direct, _) = leaf, op == .equal || op == .notEqual,
            !path.utf8.contains(UInt8(ascii: ".")), let relationship = entity.relationshipsByName[path], relationship.isToOne,
            !relationship.isTransient, relationship.ordinal >= 0
        {
            // [FETCH-S15] A to-one against nil, or not equal to an object: its stored reference
            // tested in place, no ID made per row.
            switch constant {
            case .attribute(.null):
                var join = SemiJoin(relationship: nil, references: [], owners: nil, exact: Flag())
                join.toOne = (relationship.ordinal, nil, op == .equal)
                return join
            case .object(let id) where op == .notEqual:
                var objects = Set<StoredObject>()
                if id.persistentStore === self || id.storeIdentifier == identifier, case .int64(let reference)? = id.referenceObject,
                    let number = layout.number(of: id.entity)
                {
                    objects.insert(StoredObject(entity: number, reference: reference))
                }
                var join = SemiJoin(relationship: nil, references: [], owners: nil, exact: Flag())
                join.toOne = (relationship.ordinal, objects, false)
                return join
            default:
                break
            }
        }
        if let objects = Self.selfComparison(leaf) {
            // [FETCH-S13] `SELF IN %@` on a scanned row: a set lookup by entity and reference.
            var rows = Set<StoredObject>(minimumCapacity: objects.count)
            for id in objects {
                guard id.persistentStore === self || id.storeIdentifier == identifier, case .int64(let reference)? = id.referenceObject,
                    let number = layout.number(of: id.entity)
                else { continue }
                rows.insert(StoredObject(entity: number, reference: reference))
            }
            var join = SemiJoin(relationship: nil, references: [], owners: nil, exact: Flag())
            join.selfObjects = rows
            return join
        }
        if let (path, op, constant) = Self.objectComparison(leaf), !path.utf8.contains(UInt8(ascii: ".")),
            let relationship = entity.relationshipsByName[path], !relationship.isTransient, relationship.ordinal >= 0,
            relationship.isToOne || RelationshipKeys.isKeyed(relationship)
        {
            // A to-one compares as itself: `album == %@` or `album IN %@`, not CONTAINS.
            if relationship.isToOne {
                guard case .comparison(.keyPath, let written, .constant, .direct, _) = leaf, written == .equal || written == .in else {
                    return nil
                }
            }
            return try objectSemiJoin(relationship, op: op, constant: constant, in: snapshot, layout: layout)
        }
        guard case .comparison(.keyPath(let path), let op, .constant(let constant), let modifier, let options) = leaf,
            let dot = path.utf8.firstIndex(of: UInt8(ascii: ".")), !path.utf8.contains(UInt8(ascii: "@")), !path.utf8.contains(UInt8(ascii: "$"))
        else { return nil }
        // By UTF-8 position: a search by `Character` costs more than the rest of the plan.
        let head = String(path[..<dot]), rest = String(path[path.utf8.index(after: dot)...])
        guard let relationship = entity.relationshipsByName[head], !relationship.isTransient, relationship.ordinal >= 0,
            let destination = relationship.destinationEntity, !rest.isEmpty, rest != "self", rest != "SELF",
            (relationship.isToOne && modifier == .direct) || (relationship.isToMany && modifier == .any),
            !FetchPredicate.comparisonHoldsForNull(op, constant, options: options)
        else { return nil }
        var inner = FetchRequest(entityName: destination.name)
        inner.entity = destination
        inner.predicate = .comparison(.keyPath(rest), op, .constant(constant), modifier: .direct, options: options)
        inner.resultType = .managedObjectID
        // [FETCH-S5] Through a to-many, more matching destinations than a few per row of the
        // fetched entity make the row-by-row test cheaper (each row's members are read until
        // one matches): the inner fetch stops past that many, and the comparison is left to it.
        let rowCount = relationship.isToMany ? try cachedRecord(in: snapshot).rowCount(of: entity.selfAndAllSubentities.map(\.name)) : 0
        let cap = relationship.isToMany ? max(64, 4 * rowCount) : nil
        if let cap { inner.fetchLimit = cap + 1 }
        guard case .objectIDs(let ids) = try execute(inner, with: nil, reading: snapshot) else { return nil }
        if let cap, ids.count > cap { return nil }
        var references = Set<Int64>(minimumCapacity: ids.count)
        for id in ids { if case .int64(let reference)? = id.referenceObject { references.insert(reference) } }
        return SemiJoin(
            relationship: relationship, references: references,
            owners: try semiJoinOwners(relationship, matches: ids, rowCount: rowCount, in: snapshot, layout: layout),
            exact: Flag())
    }

    /// A comparison of a relationship with objects, as (key path, `==` or `IN`, constant):
    /// `album == %@`, `album IN %@`, and for a to-many `ANY playlists == %@`, `playlists
    /// CONTAINS %@`, `%@ IN playlists`, `ANY playlists IN %@` (a to-many's `==` without `ANY`
    /// is `ANY` too, as the fetch language evaluates it). `nil` for anything else.
    static func objectComparison(_ leaf: FetchPredicate) -> (path: String, op: FetchComparisonOperator, constant: FetchValue)? {
        switch leaf {
        case .comparison(.keyPath(let path), let op, .constant(let constant), let modifier, _)
        where modifier == .direct || modifier == .any:
            switch (op, constant, modifier) {
            case (.equal, .object, _), (.in, .collection, _): return (path, op, constant)
            case (.contains, .object, .direct): return (path, .equal, constant)
            default: return nil
            }
        case .comparison(.constant(let constant), .in, .keyPath(let path), .direct, _):
            guard case .object = constant else { return nil }
            return (path, .equal, constant)
        default:
            return nil
        }
    }

    /// [FETCH-S12] `album == %@` and `album IN %@` with objects of this store: a semi-join whose
    /// destinations are those objects, with no inner fetch. Each object's row is read to check
    /// that it exists and is of the entity its ID names (a row's to-one then equals the ID
    /// exactly when it holds the object's reference); an object whose row is of another entity,
    /// an object of another store and a temporary ID match no row. `nil`, leaving the
    /// comparison to row-by-row evaluation, when a constant is not an object or an object's
    /// row is missing (rows may still point at it).
    private func objectSemiJoin(
        _ relationship: RelationshipDescription, op: FetchComparisonOperator, constant: FetchValue, in snapshot: Snapshot,
        layout: StoreLayout
    ) throws -> SemiJoin? {
        let values: [FetchValue]
        switch (op, constant) {
        case (.equal, .object): values = [constant]
        case (.in, .collection(let list)): values = list
        default: return nil
        }
        guard values.count <= 1_024 else { return nil }
        var ids: [ManagedObjectID] = []
        for value in values {
            guard case .object(let id) = value else { return nil }
            ids.append(id)
        }
        let source = RowSource(snapshot: snapshot, store: self, layout: layout)
        var references = Set<Int64>(minimumCapacity: ids.count)
        for id in ids {
            guard id.persistentStore === self || id.storeIdentifier == identifier, case .int64(let reference)? = id.referenceObject,
                let number = layout.number(of: id.entity)
            else { continue }
            let found = try source.withRowOnce(of: StoredObject(entity: number, reference: reference)) { fields, _ in
                fields.entityNumber == number
            }
            guard let found else { return nil }
            if found { references.insert(reference) }
        }
        return SemiJoin(relationship: relationship, references: references, owners: nil, exact: Flag())
    }

    /// [FETCH-S1] The owners of the matching destinations of a one-to-many (keys kept from the
    /// members' to-one, [REL-2]): each match's to-one, read from its row. A row then satisfies
    /// the semi-join exactly when it is one of them, with none of its keys read. `nil` for
    /// other relationships, and when the matches outnumber the fetched entities' rows
    /// (`rowCount`): reading each match's row would then cost more than the rows' keys.
    private func semiJoinOwners(
        _ relationship: RelationshipDescription, matches: [ManagedObjectID], rowCount: Int, in snapshot: Snapshot, layout: StoreLayout
    ) throws -> Set<Int64>? {
        guard relationship.isToMany, case .foreignKey(let inverse) = RelationshipKeys.storage(of: relationship),
            matches.count <= rowCount
        else { return nil }
        let source = RowSource(snapshot: snapshot, store: self, layout: layout)
        var owners = Set<Int64>(minimumCapacity: matches.count)
        for id in matches {
            guard case .int64(let reference)? = id.referenceObject, let number = layout.number(of: id.entity) else { continue }
            let owner = try source.withRowOnce(of: StoredObject(entity: number, reference: reference)) { fields, entity -> Int64? in
                guard let toOne = entity.relationshipsByName[inverse.name], toOne.ordinal >= 0 else { return nil }
                return try fields.object(atOrdinal: toOne.ordinal)?.reference
            }
            if let owner { owners.insert(owner) }
        }
        return owners
    }

    /// The semi-joins a fetch's compiled predicate found, by the leaf they answer.
    struct SemiJoins {
        private var entries: [(leaf: FetchPredicate, join: SemiJoin)] = []

        mutating func add(_ join: SemiJoin, for leaf: FetchPredicate) {
            if let index = entries.firstIndex(where: { $0.leaf == leaf }) { entries[index].join = join } else { entries.append((leaf, join)) }
        }

        func join(for leaf: FetchPredicate) -> SemiJoin? { entries.first { $0.leaf == leaf }?.join }
    }

    /// A Boolean shared between a fetch's plan and the closures it compiled; one fetch, one
    /// thread.
    final class Flag {
        var value = false
    }

    /// A comparison through a relationship answered from the destination's matches ([FETCH-S1]).
    struct SemiJoin {
        /// The relationship the key path starts with (for `SELF IN %@`, [FETCH-S13], `nil`).
        let relationship: RelationshipDescription?
        /// The references of the destination rows that satisfy the rest of the key path.
        let references: Set<Int64>
        /// For a one-to-many, the references of the rows those destinations belong to, when
        /// they were read: the rows that satisfy the comparison.
        let owners: Set<Int64>?
        /// Set when the rows tested are known to satisfy the comparison (they are candidates
        /// read from this join's relationship keys, [FETCH-S2]): the test then answers true.
        let exact: Flag
        /// For `SELF IN %@`: the objects' rows, by concrete entity number and reference.
        var selfObjects: Set<StoredObject>? = nil
        /// For `album == nil`, `album != nil` and `album != %@` ([FETCH-S15]): the to-one's
        /// ordinal, the objects compared with (`nil` for nil), and whether the comparison is `==`.
        var toOne: (ordinal: Int, objects: Set<StoredObject>?, equal: Bool)? = nil
        /// For `SUBQUERY(rel, $x, …).@count op constant` ([FETCH-S14]): each owner's number of
        /// matching members, and the comparison.
        var subqueryCounts: (counts: [Int64: Int], op: FetchComparisonOperator, constant: FetchValue, options: ComparisonOptions)? = nil

        /// Whether a row's destinations include one of them.
        func test<Row: StoredRowAccess>(_ row: Row) throws -> Bool {
            if exact.value { return true }
            if let selfObjects { return selfObjects.contains(StoredObject(entity: row.entityNumber, reference: row.reference)) }
            if let toOne {
                let target = try row.storedObject(atOrdinal: toOne.ordinal)
                guard let objects = toOne.objects else { return (target == nil) == toOne.equal }
                return !(target.map(objects.contains) ?? false)
            }
            if let subqueryCounts {
                let count = FetchValue.attribute(.int64(Int64(subqueryCounts.counts[row.reference] ?? 0)))
                return try FetchPredicate.compareValues(count, subqueryCounts.op, subqueryCounts.constant, options: subqueryCounts.options)
            }
            guard let relationship else { return false }
            if let owners { return owners.contains(row.reference) }
            if relationship.isToOne {
                guard let target = try row.storedObject(atOrdinal: relationship.ordinal) else { return false }
                return references.contains(target.reference)
            }
            return try row.storedObjects(atOrdinal: relationship.ordinal).contains { references.contains($0.reference) }
        }
    }

    /// [FETCH-S2] The candidate rows of a fetch one of whose top-level conjuncts is a semi-join
    /// through a relationship whose inverse is keyed ([REL-1]): the members of each matching
    /// destination, read from its keys, in reference order, with the semi-join and the conjunct
    /// they satisfy; `nil` when no conjunct qualifies or the candidates would be more than a
    /// third of the rows `rowCount` (a scan is cheaper). Of several qualifying conjuncts, the
    /// one with the fewest destinations is used.
    func keyCandidates(
        _ predicate: FetchPredicate, entity: EntityDescription, joins: SemiJoins, snapshot: Snapshot, rowCount: Int
    ) throws -> (members: [StoredObject], join: SemiJoin, leaf: FetchPredicate)? {
        func conjuncts(_ predicate: FetchPredicate) -> [FetchPredicate] {
            if case .and(let parts) = predicate { return parts.flatMap(conjuncts) }
            return [predicate]
        }
        let usable = conjuncts(predicate).compactMap { leaf in joins.join(for: leaf).map { (leaf, $0) } }.filter { _, join in
            guard let inverse = join.relationship?.inverseRelationship else { return false }
            return RelationshipKeys.isKeyed(inverse) && join.relationship?.destinationEntity != nil
        }
        guard let (leaf, best) = usable.min(by: { $0.1.references.count < $1.1.references.count }),
            let inverse = best.relationship?.inverseRelationship, let destination = best.relationship?.destinationEntity
        else { return nil }
        let cap = max(rowCount / 3, 64)
        if best.references.count == 1, let owner = best.references.first {
            // One destination: its members' keys are in reference order, each once.
            let members = RelationshipKeys.members(ownerPrefix(inverse, owner: destination, reference: owner), in: snapshot)
            return members.count > cap ? nil : (members, best, leaf)
        }
        var candidates: [Int64: UInt16] = [:]
        for owner in best.references {
            for member in RelationshipKeys.members(ownerPrefix(inverse, owner: destination, reference: owner), in: snapshot) {
                candidates[member.reference] = member.entity
                if candidates.count > cap { return nil }
            }
        }
        let members = candidates.map { StoredObject(entity: $0.value, reference: $0.key) }.sorted { $0.reference < $1.reference }
        return (members, best, leaf)
    }

    /// [FETCH-S13] The references a top-level conjunct `SELF == %@` or `SELF IN %@` (objects)
    /// allows in the hierarchy rooted at `root`, ascending and each once: the integer
    /// references of this store's objects of that hierarchy (an object of another store or
    /// hierarchy, or a temporary ID, is no row of it). `nil` when no conjunct has that shape,
    /// or a constant is not an object. (The fetch reads them only while they are at most a third
    /// of the rows: more, and a scan costs less.)
    func selfCandidates(_ predicate: FetchPredicate, root: String, layout: StoreLayout) -> [Int64]? {
        func conjuncts(_ predicate: FetchPredicate) -> [FetchPredicate] {
            if case .and(let parts) = predicate { return parts.flatMap(conjuncts) }
            return [predicate]
        }
        for conjunct in conjuncts(predicate) {
            guard let ids = Self.selfComparison(conjunct) else { continue }
            var references: [Int64] = []
            references.reserveCapacity(ids.count)
            for id in ids {
                guard id.persistentStore === self || id.storeIdentifier == identifier, case .int64(let reference)? = id.referenceObject,
                    id.entity.rootEntityName == root
                else { continue }
                references.append(reference)
            }
            references.sort()
            return references.indices.compactMap { $0 > 0 && references[$0] == references[$0 - 1] ? nil : references[$0] }
        }
        return nil
    }

    /// The objects of `SELF == %@`, `%@ == SELF` or `SELF IN %@` when every constant is an
    /// object; `nil` for anything else.
    static func selfComparison(_ leaf: FetchPredicate) -> [ManagedObjectID]? {
        let values: [FetchValue]
        switch leaf {
        case .comparison(.evaluatedObject, .equal, .constant(let value), .direct, _),
            .comparison(.constant(let value), .equal, .evaluatedObject, .direct, _):
            values = [value]
        case .comparison(.evaluatedObject, .in, .constant(.collection(let list)), .direct, _):
            values = list
        default:
            return nil
        }
        var ids: [ManagedObjectID] = []
        ids.reserveCapacity(values.count)
        for value in values {
            guard case .object(let id) = value else { return nil }
            ids.append(id)
        }
        return ids
    }

    /// The most index keys read to rule rows out before reading them ([IDX-S5], [IDX-S4]).
    static let prefilterCap = 50_000

    /// The metadata record of `snapshot`, decoded once per version of the record.
    func cachedRecord(in snapshot: Snapshot) throws -> MetadataRecord {
        guard let sequence = snapshot.sequence(of: KeyLayout.metadataKey) else { return MetadataRecord() }
        if let cached = state.withLock({ $0.metadataCache }), cached.sequence == sequence { return cached.record }
        let record = try Self.record(in: snapshot)
        state.withLock { $0.metadataCache = (sequence, record) }
        return record
    }

    static func record(in snapshot: Snapshot) throws -> MetadataRecord {
        guard let bytes = try mappingEngineErrors("read the metadata record", { () throws(StoreError) in try snapshot.get(KeyLayout.metadataKey) }) else {
            return MetadataRecord()
        }
        return try MetadataRecord.decode(bytes)
    }

    // MARK: Faulting

    func node(for objectID: ManagedObjectID) throws -> IncrementalStoreNode {
        let layout = try storeLayout()
        return node(from: try storedRow(objectID, layout: layout), objectID: objectID, layout: layout)
    }

    /// The node of a row read in place: its stored attributes and to-one destinations, by
    /// ordinal of the ID's entity (to-many destinations fault separately), decoded one
    /// property at a time when an object first reads it.
    func node(from row: RowBytes, objectID: ManagedObjectID, layout: StoreLayout, ids: ObjectIDMaker? = nil) -> IncrementalStoreNode {
        // A row read with the store's layout and ID maker is its node's values (one
        // allocation); another is copied with them.
        let values: RowStorage
        if let held = row.storage.values, held.layout === layout {
            values = row.storage
        } else {
            values = row.storage.withBytes { raw, header in
                RowStorage.make(
                    copying: raw, header: RowStorage.Header(
                        count: header.pointee.count, layout: header.pointee.layout, version: header.pointee.version,
                        context: header.pointee.context,
                        values: RowStorage.Values(layout: layout, ids: ids ?? objectIDMaker)))
            }
        }
        return IncrementalStoreNode(objectID: objectID, lazyValues: values, version: row.version)
    }

    func storedDestinations(of relationship: RelationshipDescription, for objectID: ManagedObjectID) throws -> RelationshipValue {
        let layout = try storeLayout()
        func id(_ target: StoredObject) -> ManagedObjectID? {
            layout.entity(number: target.entity).map { newObjectID(for: $0, referenceObject: .int64(target.reference)) }
        }
        if RelationshipKeys.isKeyed(relationship) {
            // [REL-3] One prefix scan of the owner's keys; the owner's row is read only to
            // tell a missing object from one without members.
            let engine = try openEngine()
            let snapshot = try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try engine.snapshot() }
            let reference = try integerReference(objectID)
            let members = RelationshipKeys.members(ownerPrefix(relationship, owner: objectID.entity, reference: reference), in: snapshot)
            if members.isEmpty {
                let key = try rowKey(objectID)
                guard try mappingEngineErrors("read \(objectID)", { () throws(StoreError) in try snapshot.get(key) }) != nil else {
                    throw ObjectGraphError(.objectNotFound, "\(objectID) is not in the store.", entityName: objectID.entityName, objectID: objectID)
                }
            }
            return .toMany(members.compactMap(id))
        }
        let row = try storedRow(objectID, layout: layout)
        guard let field = row.field(ofOrdinal: relationship.ordinal) else { return relationship.isToMany ? .toMany([]) : .toOne(nil) }
        switch try row.value(field) {
        case .objects(let targets): return .toMany(targets.compactMap(id))
        case .object(let target): return relationship.isToMany ? .toMany(id(target).map { [$0] } ?? []) : .toOne(id(target))
        default: return relationship.isToMany ? .toMany([]) : .toOne(nil)
        }
    }

    func storedRow(_ objectID: ManagedObjectID, layout: StoreLayout) throws -> RowBytes {
        let key = try rowKey(objectID)
        let engine = try openEngine()
        // Checked where the engine holds the bytes and copied once, into the row's storage.
        let values = RowStorage.Values(layout: layout, ids: objectIDMaker)
        var read: Result<RowBytes, any Error>? = nil
        let found = try mappingEngineErrors("read \(objectID)") { () throws(StoreError) -> Bool in
            try engine.snapshot().withValue(key) { raw in
                read = Result { try RowBytes(raw: raw, store: layout, context: .object(objectID), readByEngine: true, values: values) }
            }
        }
        guard found, let read else {
            throw ObjectGraphError(.objectNotFound, "\(objectID) is not in the store.", entityName: objectID.entityName, objectID: objectID)
        }
        return try read.get()
    }
}


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
    func execute(_ request: FetchRequest, with context: ManagedObjectContext?, reading: Snapshot? = nil) throws -> PersistentStoreResult {
        try execute(request, with: context, reading: reading, columns: nil)
    }

    /// The values of a dictionary fetch of plain key paths, row after row (row `i`'s value of
    /// `dictionaryRowKeyPaths[j]` at `i * paths.count + j`), with no dictionary made per row:
    /// for the store's own inner fetches, which read the values back.
    final class ColumnValues {
        /// Set when the fetch delivered its values here; `nil` when it answered otherwise
        /// (its dictionaries then hold the values).
        var values: [FetchValue]?
    }

    /// A fetch whose dictionary result, when `columns` is given and the fetch reads plain key
    /// paths without grouping or sorting, is left in `columns` (the result is then empty).
    func execute(
        _ request: FetchRequest, with context: ManagedObjectContext?, reading: Snapshot?, columns: ColumnValues?
    ) throws -> PersistentStoreResult {
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
        // Row views do not retain their source: it lives until the fetch returns.
        defer { withExtendedLifetime(source) {} }
        // The entities the fetch matches (`names`: the fetched entity and, when included, its
        // subentities), by entity number: no name is compared per row.
        let fetched = request.entity.map { !request.includesSubentities || $0.subentities.isEmpty ? [$0] : $0.selfAndAllSubentities } ?? []
        let wanted = request.entity.flatMap { layout.fetchMask(of: $0, includesSubentities: request.includesSubentities) } ?? {
            var wanted = [Bool](repeating: false, count: layout.numberCount)
            for entity in fetched {
                if let number = layout.number(of: entity) { wanted[Int(number)] = true }
            }
            return wanted
        }()
        func matches(_ row: RowBytes) -> Bool { wanted[Int(row.entityNumber)] }
        // A plain count keeps no row: the matches are counted as they are read.
        let countsOnly = request.resultType == .count && request.sortDescriptors.isEmpty
            && request.fetchOffset == 0 && request.fetchLimit == 0
        // [FETCH-S16] A count of a to-one against nil, from its one-to-many's keys.
        if countsOnly, let entity = request.entity,
            let count = try foreignKeyNullCount(
                request.predicate, entity: entity, wanted: wanted, rowCount: { try cachedRecord(in: snapshot).rowCount(of: names()) },
                layout: layout, in: snapshot)
        {
            return .count(count)
        }
        // The predicate, compiled once: key paths to ordinals. Rows are filtered as they are
        // read, so the result shaping below sees matches only.
        // Semi-joins found while compiling, by leaf: their destination sets also choose
        // candidate rows through relationship keys ([FETCH-S2]).
        // (A list searched by equality: a fetch has a join or two, and hashing a predicate
        // costs more than comparing it.)
        var joins = SemiJoins()
        // [FETCH-S18] A predicate of this entity's attributes alone was compiled and planned by
        // an earlier fetch of the same shape.
        let plan = try request.predicate.flatMap { predicate in
            try request.entity.flatMap { try fetchPlan(for: predicate, entity: $0, layout: layout) }
        }
        let compiled = try plan?.compiled ?? request.predicate.map { predicate in
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
            if let plan { return plan.scanCompiled }
            return try request.predicate.map { predicate in
                try predicate.compiled(for: try request.entity ?? model.entity(named: request.entityName), as: BorrowedRowView.self) { leaf, _ in
                    joins.join(for: leaf).map { join in { try join.test($0) } }
                }
            }
        }
        var rows: [RowView] = []
        /// A dictionary fetch's values, row after row, when the scan read them from the rows
        /// it met: one buffer, no array per row.
        // (A plain array and a flag: appending through an optional copied the array per row.)
        var scannedValues: [FetchValue] = []
        var columnsScanned = false
        var counted = 0
        // A fetch of objects or IDs: its rows are the results, sorted and paged as they are.
        let returnsRows = request.resultType == .managedObject || request.resultType == .managedObjectID
        // [FETCH-S6] Objects or IDs with a limit and no sort: the page is the first matches in
        // reference order, so reading stops once offset + limit rows match.
        let enough = returnsRows && request.sortDescriptors.isEmpty && request.fetchLimit > 0
            ? request.fetchOffset + request.fetchLimit : Int.max
        /// [FETCH-S7] The row `value` of `reference` (in the hierarchy rooted at `root`), checked
        /// where the engine holds it and viewed there, or `nil` for a retired row ([MIG-4]: no
        /// object) or one of an entity the fetch does not match. The view is valid while
        /// `value` is; only a row the fetch keeps is copied (``BorrowedRowView/view()``).
        @inline(__always)
        func borrowedRow(_ value: UnsafeRawBufferPointer, reference: Int64, root: String, scratch: RowScratch?) throws -> BorrowedRowView? {
            guard !layout.isRetiredRow(value) else { return nil }
            let fields = try RowFields(value, store: layout, context: .key(root: root, reference: reference), readByEngine: true, scratch: scratch)
            guard wanted[Int(fields.entityNumber)], let entity = layout.unretainedEntity(number: fields.entityNumber) else { return nil }
            return BorrowedRowView(fields: fields, reference: reference, entity: entity.takeUnretainedValue(), source: source)
        }
        /// Reads candidate rows in reference order, keeping the matches: each tested where the
        /// engine holds it, as a scan's rows are ([FETCH-S7]). The rows are read through a
        /// reader of their own: a test that reads a destination's row (through the source's
        /// reader) cannot move the bytes under the row being tested.
        func readCandidates(_ references: [Int64], root: String) throws {
            var key = request.entity.map { layout.keySpace(of: $0) == root ? rowPrefix(of: $0) : KeyLayout.rowPrefix(root: root) }
                ?? KeyLayout.rowPrefix(root: root)
            if !countsOnly { rows.reserveCapacity(rows.count + min(references.count, enough)) }
            let test = try compiledForScan()
            // [MIG-2] Rows in an older layout are read upgraded, one at a time, in this buffer.
            let scratch = layout.hasLegacy ? RowScratch() : nil
            var reader = Snapshot.Reader(snapshot)
            // The row key of each candidate: the last one, its reference rewritten in place.
            KeyLayout.appendReference(0, to: &key)
            var failure: (any Error)? = nil
            for reference in references where rows.count < enough {
                KeyLayout.replaceReference(reference, in: &key)
                // A row read for a node is not put in the engine's row cache: its object holds it.
                _ = try mappingEngineErrors("read a row") { () throws(StoreError) in
                    try reader.withValue(key, caching: false) { raw in
                        do {
                            guard let borrowed = try borrowedRow(raw, reference: reference, root: root, scratch: scratch),
                                try test?.evaluate(borrowed) ?? true
                            else { return }
                            if countsOnly { counted += 1 } else { rows.append(borrowed.view()) }
                        } catch {
                            failure = error
                        }
                    }
                }
                if let failure { throw failure }
            }
        }
        // Each hierarchy's key space ([KEY-2]) once, in name order.
        let roots = fetched.count == 1 ? [layout.keySpace(of: fetched[0])] : Set(fetched.map { layout.keySpace(of: $0) }).sorted()
        // Whether the indexes are the model's ([IDX-S6]; not after a read-only open with a
        // model that indexes other attributes): if not, no index serves the fetch.
        let indexed = indexesServeFetches.load(ordering: .relaxed)
        // [IDX-S9] Indexes a background build has not finished serve no fetch.
        let unbuilt = indexBuildRunning.load(ordering: .relaxed) ? state.withLock { $0.unbuiltIndexes } : []
        func usable(_ root: String, _ attribute: String) -> Bool { unbuilt.isEmpty || !unbuilt.contains(root + "\u{0}" + attribute) }
        // One hierarchy: the predicate's index plans, computed once for every path below.
        let hierarchy: (root: String, entity: EntityDescription, plans: [IndexPlan])? = {
            guard roots.count == 1, let root = roots.first, let entity = request.entity else { return nil }
            guard indexed else { return (root, entity, []) }
            let plans = plan.flatMap { $0.root == root ? $0.indexPlans : nil } ?? Self.indexPlans(for: request, entity: entity, root: root)
            return (root, entity, unbuilt.isEmpty ? plans : plans.filter { usable(root, $0.attribute) })
        }()
        // [IDX-S7] A count that indexes answer exactly reads no row (not while entries of
        // retired rows may remain, [MIG-4]).
        let entriesExact = !layout.hasRetiredRows(in: snapshot)
        if entriesExact, request.resultType == .count && request.fetchOffset == 0 && request.fetchLimit == 0, let (root, entity, plans) = hierarchy,
            let count = Self.indexOnlyCount(
                for: request, entity: entity, root: root, names: names(), model: model, in: snapshot, plans: plans)
        {
            return .count(count)
        }
        if indexed, entriesExact, let (root, entity, _) = hierarchy, let attribute = Self.distinctIndexAttribute(of: request, entity: entity),
            usable(root, attribute.name)
        {
            // [IDX-S8] The distinct values of one indexed attribute: the index holds them in
            // order, each value's keys together; one row per value gives its stored form.
            let prefix = IndexKey.prefix(root: root, attribute: attribute.name)
            let rowPrefix = KeyLayout.rowPrefix(root: root)
            var values: [FetchValue] = []
            var last: [UInt8]? = nil
            let isString = attribute.attributeType == .string
            try snapshot.forEachKeyBytes(from: prefix, to: Self.prefixEnd(prefix)) { key in
                guard key.count >= prefix.count + 8 else { return true }
                let value = UnsafeRawBufferPointer(rebasing: key[prefix.count..<(key.count - 8)])
                if let last, last.withUnsafeBytes({ $0.elementsEqualBytes(value) }) { return true }
                if isString, let text = Self.asciiText(ofIndexValue: value) {
                    // An ASCII string's index bytes are its stored form: no row is read (the
                    // entries are exact here, as for [IDX-S7]'s counts).
                    values.append(.attribute(.string(text)))
                    last = Array(value)
                    return true
                }
                guard let reference = KeyLayout.reference(fromKeyBytes: key),
                    let row = try source.readOnce(prefix: rowPrefix, root: root, reference: reference),
                    matches(row), let rowEntity = layout.entity(number: row.entityNumber)
                else { return true }
                let view = RowView(reference: reference, row: row, entity: rowEntity, source: source)
                values.append(try view.fetchValue(forKeyPath: attribute.name))
                last = Array(value)
                return true
            }
            // Each value came once: its index bytes differ from the last value's, and these
            // encodings give equal values equal bytes (a date's -0 and +0 included, [IDX-S2]).
            request.returnsDistinctResults = false
            return .dictionaries(try request.dictionaries(fromValues: values))
        }
        // Whether the rows are in the fetch's order already (an ordered walk of its only sort).
        var presorted = false
        // (A planned predicate has no `SELF`.)
        if plan == nil, let (root, _, _) = hierarchy, let predicate = request.predicate,
            let found = selfCandidates(predicate, root: root, layout: layout, joins: joins),
            found.count <= max(64, try cachedRecord(in: snapshot).rowCount(of: names()) / 3)
        {
            // [FETCH-S13] `SELF IN %@`: the objects' rows are the candidates, read by reference;
            // the whole predicate (that conjunct included) decides on each.
            try readCandidates(found, root: root)
        } else if indexed, let (root, entity, plans) = hierarchy,
            let ordered = Self.orderedIndexPlan(for: request, entity: entity, root: root, plans: plans), usable(root, ordered.attribute)
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
            let filters = RowFilters(plans.filter { $0.attribute != ordered.attribute }
                .compactMap { Self.rowFilter(of: $0, in: snapshot, expectedCandidates: 4 * needed) })
            var matched = 0
            var lastValue: [UInt8]? = nil
            let rowPrefix = KeyLayout.rowPrefix(root: root)
            walk: for range in ordered.ranges {
                try snapshot.forEachKeyBytes(from: range.lower, to: range.upper) { key in
                    let value = UnsafeRawBufferPointer(rebasing: key.dropLast(8))
                    if matched >= needed, lastValue?.withUnsafeBytes({ $0.elementsEqualBytes(value) }) != true { return false }
                    guard let reference = KeyLayout.reference(fromKeyBytes: key),
                        filters.passes(reference),
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
                found.sortDroppingRepeats { $0 }
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
            // [FETCH-S3] A count, or an ID fetch without sort, is answered from the candidates'
            // keys alone when the conjunct they come from is the whole predicate.
            case let keysAnswer = countsOnly || request.resultType == .managedObjectID && request.sortDescriptors.isEmpty,
            let found = try keyCandidates(
                predicate, entity: entity, joins: joins, snapshot: snapshot,
                rowCount: try cachedRecord(in: snapshot).rowCount(of: names()),
                // Candidates that cost no row read are cheaper than a scan, however many.
                keysAnswer: keysAnswer && Self.conjuncts(predicate).count == 1)
        {
            // The candidates satisfy the conjunct they came from: its test is not run again.
            found.join.exact.value = true
            if keysAnswer, found.leaf == predicate {
                // [FETCH-S3] The whole predicate is that conjunct: the answer is the candidates
                // the index holds (a row of the fetched entities under each key), no row read.
                // Members come in reference order (a scan's order, so an offset and a limit
                // take a stretch of them, [FETCH-S6]): each row key is the last one with its
                // reference rewritten, looked up from the previous key's index leaf.
                var key = KeyLayout.rowPrefix(root: root)
                KeyLayout.appendReference(0, to: &key)
                var finger = KeyIndex.Finger()
                var ids: [ManagedObjectID] = [], count = 0
                let skipped = request.fetchOffset, limit = request.fetchLimit > 0 ? request.fetchLimit : Int.max
                // Keys that cannot outlive their member's row need no lookup of it: a one-to-many's
                // key goes with the member's row, and a many-to-many member deleted under any rule
                // but no action leaves its owners (which delete their keys of it), [REL-2].
                let membersExist = found.join.relationship.map { $0.isToOne || $0.deleteRule != .noAction } ?? false
                for member in found.members where Int(member.entity) < wanted.count && wanted[Int(member.entity)] {
                    KeyLayout.replaceReference(member.reference, in: &key)
                    guard membersExist || snapshot.sequence(of: key, finger: &finger) != nil else { continue }
                    count += 1
                    if request.resultType == .managedObjectID, count > skipped, let memberEntity = layout.entity(number: member.entity) {
                        ids.append(newObjectID(for: memberEntity, referenceObject: .int64(member.reference)))
                        if ids.count == limit { break }
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
            // [FETCH-S8] A sorted fetch of objects with a batch size keeps its rows' sort keys only.
            let keyed: KeyedRows? = top == nil && request.resultType == .managedObject && context != nil && request.fetchBatchSize > 0
                && !request.sortDescriptors.isEmpty
                ? request.entity.flatMap { KeyedRows(descriptors: request.sortDescriptors, entity: $0, source: source) } : nil
            // A dictionary fetch's columns are read as the scan meets its rows: no row is copied.
            let columnPaths = request.resultType == .dictionary && top == nil && !countsOnly ? request.dictionaryRowKeyPaths : nil
            // Each column's reader, found once for the entity of the rows last met (a scan meets
            // one entity's rows, or a few entities' in turn).
            let paths = columnPaths ?? []
            var columnEntity: ObjectIdentifier? = nil
            var columnReaders: [KeyPathReader?] = []
            if columnPaths != nil {
                columnsScanned = true
                scannedValues.reserveCapacity(try cachedRecord(in: snapshot).rowCount(of: names()) * (columnPaths?.count ?? 0))
            }
            // [FETCH-S19] Distinct values of one stored string attribute: a row whose ASCII value
            // was met before is dropped on its bytes (the fetch's distinct pass still runs over
            // the rest, so other text keeps its canonical equality).
            // (A sort by the attribute names it again among the columns: the value fills each.)
            var distinct: (ordinal: Int, seen: DistinctASCII)? = nil
            if let columnPaths, request.returnsDistinctResults, request.propertiesToGroupBy == nil,
                request.havingPredicate == nil, let fetched = request.propertiesToFetch, fetched.count == 1,
                case .keyPath(let key) = fetched[0], columnPaths.allSatisfy({ $0 == key }),
                let attribute = request.entity?.attributesByName[key],
                attribute.attributeType == .string, !attribute.isTransient, attribute.ordinal >= 0
            {
                distinct = (attribute.ordinal, DistinctASCII())
            }
            // [MIG-2] Rows in an older layout are read upgraded, one at a time, in this buffer.
            let scratch = layout.hasLegacy ? RowScratch() : nil
            for root in roots where rows.count < enough {
                var failure: Error? = nil
                _ = try mappingEngineErrors("scan \(root) rows") { () throws(StoreError) in
                    // [FETCH-S7] Each row is checked and tested where the engine holds it; only
                    // a row the predicate accepts (and the fetch keeps) is copied.
                    try snapshot.forEachView(from: KeyLayout.rowPrefix(root: root), to: KeyLayout.rowPrefixEnd(root: root)) { key, value in
                        do {
                            guard let reference = KeyLayout.reference(fromKeyBytes: key) else { return true }
                            if let borrowed = try borrowedRow(value, reference: reference, root: root, scratch: scratch), try scanTest?.evaluate(borrowed) ?? true {
                                if countsOnly {
                                    counted += 1
                                } else if let top {
                                    try top.offer(borrowed)
                                } else if let keyed {
                                    try keyed.add(borrowed)
                                } else if columnsScanned {
                                    if let ordinal = distinct?.ordinal,
                                        let ascii = borrowed.fields.testStringBytes(atOrdinal: ordinal, { text -> Bool? in
                                            let raw = UnsafeRawBufferPointer(text)
                                            guard Text.isASCII(raw) else { return nil }
                                            if distinct?.seen.insert(raw) == true, let value = Text.decode(raw) {
                                                for _ in paths.indices { scannedValues.append(.attribute(.string(value))) }
                                            }
                                            return true
                                        }), ascii
                                    {
                                        return rows.count < enough
                                    }
                                    if columnEntity != ObjectIdentifier(borrowed.entity) {
                                        columnEntity = ObjectIdentifier(borrowed.entity)
                                        columnReaders = paths.map { source.reader(of: borrowed.entity, keyPath: $0) }
                                    }
                                    for index in paths.indices {
                                        if let reader = columnReaders[index] {
                                            scannedValues.append(try reader.value(of: borrowed))
                                        } else {
                                            scannedValues.append(try borrowed.fetchValue(forKeyPath: paths[index]))
                                        }
                                    }
                                } else {
                                    rows.append(borrowed.view())
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
            if let keyed, let context { return .objects(try batchedObjects(keyed, request: request, source: source, context: context)) }
        }
        if countsOnly { return .count(counted + rows.count) }
        // Sorting, paging and every result shape: the fetch language's own engine. The rows
        // matched the predicate already.
        if returnsRows, !presorted {
            // [FETCH-S4] Sort keys read by ordinal, each destination's once; then the page.
            rows = try StrataStore.sorted(
                rows, by: request.sortDescriptors, entity: request.entity,
                keeping: request.fetchLimit > 0 ? request.fetchOffset + request.fetchLimit : nil)
        }
        if request.resultType == .managedObject, let context {
            // The rows are decoded already: they reach the context with the objects. They are
            // matched and sorted, so only the page is left (the request is not changed: that
            // would copy its fields).
            let matched = request.page(rows)
            // [FETCH-S8] With a batch size, rows reach the context for the first batch only:
            // later batches are read when they are reached.
            let loaded = request.fetchBatchSize > 0 ? min(request.fetchBatchSize, matched.count) : matched.count
            // Room for every result at once: the registry grows once, not at each doubling
            // (`objects(for:in:returnsObjectsAsFaults:)` makes room for the first batch only).
            if loaded < matched.count { context.reserveRegistrations(matched.count) }
            var objects = objects(for: matched.prefix(loaded).map { $0.node() }, in: context, returnsObjectsAsFaults: request.returnsObjectsAsFaults)
            for row in matched.dropFirst(loaded) { objects.append(context.object(with: row.objectID)) }
            return .objects(objects)
        }
        request.predicate = nil
        if returnsRows { request.sortDescriptors = [] }
        if request.resultType == .dictionary, let paths = request.dictionaryRowKeyPaths {
            // Each row's key paths read once, through compiled readers; the grouping and
            // aggregation then work on plain values.
            if !columnsScanned {
                scannedValues.reserveCapacity(rows.count * paths.count)
                for row in rows { for path in paths { scannedValues.append(try row.fetchValue(forKeyPath: path)) } }
            }
            if let columns, request.propertiesToGroupBy == nil, request.sortDescriptors.isEmpty, !request.returnsDistinctResults,
                request.havingPredicate == nil, request.fetchOffset == 0, request.fetchLimit == 0
            {
                columns.values = scannedValues
                return .dictionaries([])
            }
            return .dictionaries(try request.dictionaries(fromValues: scannedValues))
        }
        return try request.apply(to: rows, objectID: \.objectID)
    }

    /// [FETCH-S8] The objects of a batched sorted fetch whose matching rows `keyed` holds: in
    /// sort order and paged, the first batch made with its rows (read by key now, from the
    /// fetch's snapshot), the rest faults without a row.
    private func batchedObjects(
        _ keyed: KeyedRows, request: FetchRequest, source: RowSource, context: ManagedObjectContext
    ) throws -> [ManagedObject] {
        let order = request.page(keyed.order())
        let loaded = min(request.fetchBatchSize, order.count)
        // Room for every result at once: the registry grows once, not at each doubling.
        context.reserveRegistrations(order.count)
        var nodes: [IncrementalStoreNode] = []
        nodes.reserveCapacity(loaded)
        for position in order.prefix(loaded) {
            let entity = keyed.entity(at: position), reference = keyed.references[position]
            let root = source.layout.keySpace(of: entity)
            // The scan met the row in this snapshot: it is there.
            guard let row = try source.readOnce(prefix: KeyLayout.rowPrefix(root: root), root: root, reference: reference) else {
                throw ObjectGraphError(.storeCorrupted, "row \(root) #\(reference) matched the fetch and then could not be read.", entityName: entity.name)
            }
            nodes.append(RowView(reference: reference, row: row, entity: entity, source: source).node())
        }
        var objects = objects(for: nodes, in: context, returnsObjectsAsFaults: request.returnsObjectsAsFaults)
        objects.reserveCapacity(order.count)
        for position in order.dropFirst(loaded) {
            objects.append(context.object(with: source.id(for: keyed.entity(at: position), reference: keyed.references[position])))
        }
        return objects
    }

    /// The text of an encoded string index value ([IDX-S2]: type byte 0x30, the bytes, 0x00
    /// 0x01) when every byte of it is ASCII and none is escaped, else `nil`: such a text is
    /// stored as those very bytes (ASCII is its own normalisation form C).
    static func asciiText(ofIndexValue value: UnsafeRawBufferPointer) -> String? {
        guard value.count >= 3, value[0] == 0x30, value[value.count - 2] == 0x00, value[value.count - 1] == 0x01 else { return nil }
        let text = UnsafeRawBufferPointer(rebasing: value[1..<(value.count - 2)])
        for byte in text where byte == 0x00 || byte >= 0x80 { return nil }
        return Text.decode(text)
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
        if row.storage.keepsValues(of: layout) {
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
        let engine = try openEngine()
        let snapshot = try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try engine.snapshot() }
        let targets = try storedTargets(of: relationship, for: objectID, layout: layout, in: snapshot)
        guard relationship.isToMany else {
            return .toOne(targets.first.flatMap { target in layout.entity(number: target.entity).map { objectIDMaker.id(for: $0, reference: target.reference) } })
        }
        // The IDs of the targets (those of entities in the model), in one array made to size,
        // each entity's home found once per run of its members.
        var ids: [ManagedObjectID] = []
        ids.reserveCapacity(targets.count)
        var maker: (entity: UInt16, ids: EntityIDMaker)? = nil
        for target in targets {
            if maker?.entity != target.entity {
                guard let entity = layout.entity(number: target.entity) else { continue }
                maker = (target.entity, objectIDMaker.maker(for: entity))
            }
            if let id = maker?.ids.id(reference: target.reference) { ids.append(id) }
        }
        return .toMany(ids)
    }

    /// The stored destinations of `relationship` of `objectID` in `snapshot`, in order (at most
    /// one for a to-one); a target of an entity the model no longer has is among them.
    ///
    /// - Throws: `objectNotFound` when `objectID` has no row.
    func storedTargets(
        of relationship: RelationshipDescription, for objectID: ManagedObjectID, layout: StoreLayout, in snapshot: Snapshot
    ) throws -> [StoredObject] {
        if RelationshipKeys.isKeyed(relationship) {
            // [REL-3] One prefix scan of the owner's keys; the owner's row is read only to
            // tell a missing object from one without members.
            let reference = try integerReference(objectID)
            var members = RelationshipKeys.members(ownerPrefix(relationship, owner: objectID.entity, reference: reference), in: snapshot)
            if layout.keysPending(relationship, in: snapshot) {
                // [MIG-5] Keys still pending: the members the owner's row holds too.
                members = Self.merging(members, try layout.pendingMembers(of: relationship, owner: objectID.entity, reference: reference, in: snapshot))
            }
            if members.isEmpty {
                let key = try rowKey(objectID)
                guard try mappingEngineErrors("read \(objectID)", { () throws(StoreError) in try snapshot.get(key) }) != nil else {
                    throw ObjectGraphError(.objectNotFound, "\(objectID) is not in the store.", entityName: objectID.entityName, objectID: objectID)
                }
            }
            return members
        }
        if layout.keysPending(relationship, in: snapshot),
            let list = try layout.pendingList(of: relationship, owner: objectID.entity, reference: integerReference(objectID), in: snapshot)
        {
            // [MIG-5] A row of an older layout whose list is still its keys (the row and the
            // keys read from one snapshot).
            return list
        }
        let row = try storedRow(objectID, layout: layout, in: snapshot)
        guard let field = row.field(ofOrdinal: relationship.ordinal) else { return [] }
        switch try row.value(field) {
        case .objects(let targets): return targets
        case .object(let target): return [target]
        default: return []
        }
    }

    /// [REL-5] A to-many's destinations with their rows, read from one snapshot in the order
    /// of their keys (each index leaf and block met once): the faults made for them fire
    /// without a read, as the faults of a fetch do. A row that is missing, retired, of another
    /// entity than its key says, or does not read is left out (`nil`): its fault reads it, and
    /// reports what is wrong, when it fires. Only StrataStore itself answers: a subclass may
    /// answer relationship faults its own way.
    package func destinationsWithRows(
        of relationship: RelationshipDescription, for objectID: ManagedObjectID
    ) throws -> (ids: [ManagedObjectID], rows: [IncrementalStoreNode?])? {
        guard relationship.isToMany, Swift.type(of: self) == StrataStore.self else { return nil }
        let layout = try storeLayout()
        let engine = try openEngine()
        let snapshot = try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try engine.snapshot() }
        let targets = try storedTargets(of: relationship, for: objectID, layout: layout, in: snapshot)
        let source = RowSource(snapshot: snapshot, store: self, layout: layout)
        var ids: [ManagedObjectID] = []
        var rows: [IncrementalStoreNode?] = []
        ids.reserveCapacity(targets.count)
        rows.reserveCapacity(targets.count)
        for target in targets {
            guard let entity = layout.entity(number: target.entity) else { continue }
            let id = source.id(for: entity, reference: target.reference)
            ids.append(id)
            rows.append(source.node(ofMember: entity, reference: target.reference, id: id))
        }
        return (ids, rows)
    }

    /// The rows of `ids` for a fetch's prefetching through a to-one relationship or a later batch
    /// of a batched fetch ([FETCH-S8]), read from one
    /// snapshot in key order (each index leaf and WAL chunk or block met once, as a to-many's
    /// members are, [REL-5]) and checked as a fetch's rows are. An ID that is not a permanent
    /// ID of this store, or whose row is missing, retired, of another entity, or does not read,
    /// gets `nil`: its fault reads its row, and reports what is wrong, when it fires. Only
    /// StrataStore itself answers: a subclass may load faults its own way.
    package func rows(of ids: [ManagedObjectID]) throws -> [IncrementalStoreNode?]? {
        guard Swift.type(of: self) == StrataStore.self else { return nil }
        let layout = try storeLayout()
        let engine = try openEngine()
        let snapshot = try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try engine.snapshot() }
        let source = RowSource(snapshot: snapshot, store: self, layout: layout)
        let maker = objectIDMaker
        var order: [(reference: Int64, index: Int)] = []
        order.reserveCapacity(ids.count)
        for index in ids.indices {
            if let reference = ids[index].integerReference(madeLike: maker) { order.append((reference, index)) }
        }
        // A row key ends in its reference, so that rows sort by reference ([KEY-2]): within a
        // hierarchy, this is the keys' order.
        order.sort { $0.reference < $1.reference }
        var rows = [IncrementalStoreNode?](repeating: nil, count: ids.count)
        for (reference, index) in order {
            rows[index] = source.node(ofMember: ids[index].entity, reference: reference, id: ids[index])
        }
        return rows
    }

    /// The row of `objectID`, read from `snapshot` (the store's newest when `nil`).
    func storedRow(_ objectID: ManagedObjectID, layout: StoreLayout, in snapshot: Snapshot? = nil) throws -> RowBytes {
        let key = try rowKey(objectID, layout: layout)
        let engine = try openEngine()
        // Checked where the engine holds the bytes and copied once, into the row's storage.
        let values = RowStorage.Values(layout: layout, ids: objectIDMaker)
        var read: Result<RowBytes, any Error>? = nil
        let reader: Snapshot
        if let snapshot { reader = snapshot } else { reader = try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try engine.snapshot() } }
        let found = try mappingEngineErrors("read \(objectID)") { () throws(StoreError) -> Bool in
            try reader.withValue(key) { raw in
                // [MIG-4] A retired row (of a removed entity) is no object.
                if layout.isRetiredRow(raw) { return }
                read = Result { try RowBytes(raw: raw, store: layout, context: .object(objectID), readByEngine: true, values: values) }
            }
        }
        guard found, let read else {
            throw ObjectGraphError(.objectNotFound, "\(objectID) is not in the store.", entityName: objectID.entityName, objectID: objectID)
        }
        return try read.get()
    }
}


/// [REL-5] Firing a to-many to make its objects reads the destinations' rows along.
extension StrataStore: MemberRowsSource {}

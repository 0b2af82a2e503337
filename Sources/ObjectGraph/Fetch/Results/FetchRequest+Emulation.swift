import Foundation

/// The in-memory emulation of every result-shaping property of a fetch request, for
/// stores that have no native support for some of them (seed 002 allows a store to
/// emulate `propertiesToGroupBy` and `havingPredicate` in memory). A store hands its
/// candidate rows (any ``FetchEvaluable``) to ``apply(to:objectID:)`` and returns the
/// result.
extension FetchRequest {
    /// The whole result of the request over a store's candidates: predicate, sort
    /// descriptors, offset and limit, then the result type (IDs for object fetches, the
    /// count, or dictionaries with grouping, having, distinct and aggregates).
    ///
    /// For example, inside a store's `execute(_:with:)`:
    ///
    /// ```swift
    /// return try request.apply(to: candidateRows, objectID: \.objectID)
    /// ```
    ///
    /// - Parameters:
    ///   - candidates: every row of the fetched entities, in the store's natural order.
    ///   - objectID: the object ID of a candidate.
    /// - Returns: ``PersistentStoreResult/objectIDs(_:)`` for object and ID fetches
    ///   (the context makes the objects), ``PersistentStoreResult/count(_:)`` or
    ///   ``PersistentStoreResult/dictionaries(_:)``.
    public func apply<T: FetchEvaluable>(to candidates: [T], objectID: (T) -> ManagedObjectID) throws -> PersistentStoreResult {
        switch resultType {
        case .managedObject, .managedObjectID:
            return .objectIDs(try filterSortAndPage(candidates).map(objectID))
        case .count:
            return .count(page(try filter(candidates)).count)
        case .dictionary:
            return .dictionaries(try dictionaries(from: try filter(candidates)))
        }
    }

    /// The candidates that satisfy the predicate, in their order.
    public func filter<T: FetchEvaluable>(_ candidates: [T]) throws -> [T] {
        guard let predicate else { return candidates }
        return try candidates.filter { try predicate.evaluate(with: $0) }
    }

    /// Builds the dictionaries of a ``FetchRequestResultType/dictionary`` fetch from rows
    /// that already passed the predicate.
    ///
    /// Without aggregates or ``propertiesToGroupBy``, each row gives one dictionary of
    /// ``propertiesToFetch``, in the order of ``sortDescriptors``. With them, rows are
    /// grouped by the values of the group-by properties (all rows form one group when
    /// there are aggregates and no group-by); each group gives one dictionary whose
    /// aggregates are computed over the group's rows by ``FetchAggregation``. Every
    /// non-aggregate property fetched must then be grouped by. Sort descriptors that name
    /// a result key order the groups; the others order the rows before grouping (groups
    /// appear in the order of their first row). Then ``havingPredicate`` filters,
    /// ``returnsDistinctResults`` drops repeated dictionaries, and offset and limit apply.
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidFetchRequest`` for an ungrouped property,
    ///   a `havingPredicate` without grouping, or duplicate result names;
    ///   ``ObjectGraphError/Code/unknownKey`` for an unknown key.
    public func dictionaries<T: FetchEvaluable>(from rows: [T]) throws -> [[String: FetchValue]] {
        let (properties, grouping) = try dictionaryShape()
        guard let grouping else {
            let sorted = try FetchSortDescriptor.sort(rows, by: sortDescriptors)
            // Distinct rows are told apart by their values in property order (the same test as
            // comparing the dictionaries), so a repeated row makes no dictionary.
            let rows = ResultRows(properties.map(\.name))
            var seen: Set<[FetchValue]> = []
            var results: [[String: FetchValue]] = []
            for row in sorted {
                let values = try properties.map { try value(of: $0, for: CollectionOfOne(row)) }
                if returnsDistinctResults, !seen.insert(values).inserted { continue }
                results.append(rows.row { values[$0] })
            }
            return page(results)
        }
        let names = Set(properties.map(\.name))
        let resultSort = sortDescriptors.filter { names.contains($0.keyPath) }
        let rowSort = sortDescriptors.filter { !names.contains($0.keyPath) }
        let sorted = try FetchSortDescriptor.sort(rows, by: rowSort)
        // Groups in the order of their first row: each key hashed once per row.
        var groupOfKey: [[FetchValue]: Int] = [:]
        var groups: [[T]] = []
        for row in sorted {
            let key = try grouping.map { try value(of: $0, for: CollectionOfOne(row)) }
            if let index = groupOfKey[key] {
                groups[index].append(row)
            } else {
                groupOfKey[key] = groups.count
                groups.append([row])
            }
        }
        if grouping.isEmpty && groups.isEmpty { groups = [[]] }
        var results = try groups.map { members in
            try Self.resultRow(properties.map(\.name)) { try value(of: properties[$0], for: members) }
        }
        if let havingPredicate {
            results = try results.filter { try havingPredicate.evaluate(with: FetchValueRow($0), variables: $0) }
        }
        if !resultSort.isEmpty {
            results = try FetchSortDescriptor.sort(results.map(FetchValueRow.init), by: resultSort).map(\.values)
        }
        if returnsDistinctResults { results = Self.distinct(results) }
        return page(results)
    }

    /// The entity, properties and grouping of a dictionary fetch (`nil` grouping: one
    /// dictionary per row), checked: the errors ``dictionaries(from:)`` documents.
    private func dictionaryShape() throws -> (properties: [FetchProperty], grouping: [FetchProperty]?) {
        guard let entity else {
            throw ObjectGraphError(.invalidFetchRequest, "The fetch request's entity is not resolved.", entityName: entityName)
        }
        let properties = fetchedProperties(of: entity)
        var names: Set<String> = []
        for property in properties {
            guard names.insert(property.name).inserted else {
                throw ObjectGraphError(.invalidFetchRequest, "Two properties to fetch are named \"\(property.name)\".", entityName: entity.name, key: property.name)
            }
            if case .keyPath(let key) = property, entity.propertiesByName[key] == nil, !key.containsByte(UInt8(ascii: ".")), key != "self", key != "SELF" {
                throw ObjectGraphError(.unknownKey, "Entity \(entity.name) has no property \"\(key)\" to fetch.", entityName: entity.name, key: key)
            }
        }
        let grouping = propertiesToGroupBy ?? (properties.contains(where: \.isAggregate) ? [] : nil)
        guard let grouping else {
            if havingPredicate != nil {
                throw ObjectGraphError(.invalidFetchRequest, "havingPredicate needs propertiesToGroupBy or an aggregate expression.", entityName: entity.name)
            }
            return (properties, nil)
        }
        for property in properties where !property.isAggregate {
            guard grouping.contains(where: { $0.name == property.name || $0.expression == property.expression }) else {
                throw ObjectGraphError(
                    .invalidFetchRequest,
                    "Property \"\(property.name)\" is fetched but neither grouped by nor an aggregate; add it to propertiesToGroupBy or fetch an aggregate of it.",
                    entityName: entity.name, key: property.name)
            }
        }
        return (properties, grouping)
    }

    /// The properties a dictionary fetch of `entity` returns: ``propertiesToFetch``, or every
    /// stored attribute.
    func fetchedProperties(of entity: EntityDescription) -> [FetchProperty] {
        propertiesToFetch ?? entity.attributes.filter { !$0.isTransient }.map { FetchProperty.keyPath($0.name) }
    }

    /// The value of a property for a group of rows (one row when not grouping).
    private func value<T: FetchEvaluable, Rows: Collection<T>>(of property: FetchProperty, for rows: Rows) throws -> FetchValue {
        switch property {
        case .keyPath(let path):
            guard let first = rows.first else { return .null }
            return try FetchExpression.keyPath(path).evaluate(with: first)
        case .expression(let description):
            guard case .function(let function, let arguments) = description.expression else {
                guard let first = rows.first else { return .null }
                return description.converted(try description.expression.evaluate(with: first))
            }
            var values: [FetchValue] = []
            for row in rows {
                for argument in arguments {
                    let value = try argument.evaluate(with: row)
                    if case .collection(let members) = value { values += members } else { values.append(value) }
                }
            }
            return description.converted(FetchAggregation.apply(function, to: values))
        }
    }

    /// The key paths a ``FetchRequestResultType/dictionary`` fetch reads from each row (the
    /// properties to fetch and to group by, the arguments of their functions and aggregates,
    /// the sort descriptors), when each is a plain key path (no collection operator, not
    /// `self`, no variable or subquery); `nil` when the fetch reads anything else.
    ///
    /// A store that reads those key paths faster than through a ``FetchEvaluable`` builds one
    /// ``FetchValueRow`` per row and calls ``dictionaries(fromValueRows:)``.
    public var dictionaryRowKeyPaths: [String]? {
        guard let entity else { return nil }
        var paths: [String] = []
        func plain(_ path: String) -> Bool {
            !path.isEmpty && path != "self" && path != "SELF" && !path.containsByte(UInt8(ascii: "@"))
                && !path.containsByte(UInt8(ascii: "$"))
        }
        func collect(_ expression: FetchExpression) -> Bool {
            switch expression {
            case .constant: return true
            case .keyPath(let path):
                guard plain(path) else { return false }
                paths.append(path)
                return true
            case .function(_, let arguments): return arguments.allSatisfy(collect)
            case .aggregate(let items): return items.allSatisfy(collect)
            default: return false
            }
        }
        for property in fetchedProperties(of: entity) + (propertiesToGroupBy ?? []) {
            guard collect(property.expression) else { return nil }
        }
        for descriptor in sortDescriptors {
            guard plain(descriptor.keyPath) else { return nil }
            paths.append(descriptor.keyPath)
        }
        var seen: Set<String> = []
        return paths.filter { seen.insert($0).inserted }
    }

    /// ``dictionaries(from:)`` for rows whose values a store has read: one ``FetchValueRow``
    /// per row, holding the value of each key path of ``dictionaryRowKeyPaths`` as the row's
    /// ``FetchEvaluable/fetchValue(forKeyPath:)`` gives it. The results are the same.
    public func dictionaries(fromValueRows rows: [FetchValueRow]) throws -> [[String: FetchValue]] {
        try dictionaries(from: rows)
    }

    /// ``dictionaries(from:)`` for rows a store read by column: `rows[i][j]` is row `i`'s
    /// value of `dictionaryRowKeyPaths[j]`, as ``FetchEvaluable/fetchValue(forKeyPath:)``
    /// gives it. The results and errors are the same. Without sort descriptors or a having
    /// predicate, properties that are key paths, or functions of key paths and constants, are
    /// computed on the columns: no dictionary per row, no key path read per value.
    public func dictionaries(fromColumns rows: [[FetchValue]]) throws -> [[String: FetchValue]] {
        guard let paths = dictionaryRowKeyPaths else {
            throw ObjectGraphError(.invalidFetchRequest, "The fetch request reads more than plain key paths; it has no columns.", entityName: entityName)
        }
        var values: [FetchValue] = []
        values.reserveCapacity(rows.count * paths.count)
        for row in rows {
            guard row.count == paths.count else {
                throw ObjectGraphError(.invalidArgument, "A row has \(row.count) values for \(paths.count) key paths.", entityName: entityName)
            }
            values += row
        }
        return try dictionaries(fromValues: values)
    }

    /// One dictionary result: `names[j]` to `value(j)`, built in storage of its final size.
    /// The names are unique (``dictionaryShape()`` refuses duplicates). A row built through
    /// `Dictionary(uniqueKeysWithValues:)` from two arrays zipped cost about six times as much
    /// (its generic merge, and an array of values per row).
    @inline(__always)
    static func resultRow(_ names: [String], _ value: (Int) throws -> FetchValue) rethrows -> [String: FetchValue] {
        var row = [String: FetchValue](minimumCapacity: names.count)
        for index in names.indices { row[names[index]] = try value(index) }
        return row
    }

    /// Result rows of one shape, made from a template: each row is a copy of a dictionary
    /// holding the names, its values set by position, so no name is hashed per row (hashing
    /// the names cost more than the rest of a row). A later name given twice wins, as in
    /// ``resultRow(_:_:)``.
    struct ResultRows {
        private let template: [String: FetchValue]
        private let positions: [Dictionary<String, FetchValue>.Index]

        init(_ names: [String]) {
            var template = [String: FetchValue](minimumCapacity: names.count)
            for name in names { template[name] = .attribute(.null) }
            self.template = template
            // Every name was just inserted: each has a position.
            positions = names.compactMap { template.index(forKey: $0) }
        }

        /// A row whose `names[i]` is `value(i)`. The copy of the template keeps its layout, so
        /// the positions stay valid in it (a dictionary's copy keeps its indices).
        func row(_ value: (Int) throws -> FetchValue) rethrows -> [String: FetchValue] {
            var row = template
            for index in positions.indices { row.values[positions[index]] = try value(index) }
            return row
        }
    }

    /// ``dictionaries(fromColumns:)`` for rows laid end to end: row `i`'s value of
    /// `dictionaryRowKeyPaths[j]` is `values[i * paths.count + j]`. A store that reads many
    /// rows keeps one buffer instead of an array per row.
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidArgument`` when `values` is not a whole number
    ///   of rows.
    public func dictionaries(fromValues values: [FetchValue]) throws -> [[String: FetchValue]] {
        guard let paths = dictionaryRowKeyPaths else {
            throw ObjectGraphError(.invalidFetchRequest, "The fetch request reads more than plain key paths; it has no columns.", entityName: entityName)
        }
        let stride = paths.count
        guard stride > 0 ? values.count % stride == 0 : values.isEmpty else {
            throw ObjectGraphError(.invalidArgument, "\(values.count) values do not make rows of \(stride) key paths.", entityName: entityName)
        }
        let rowCount = stride > 0 ? values.count / stride : 0
        func byName() -> [FetchValueRow] {
            (0..<rowCount).map { index in
                // A key path given twice keeps its first column.
                var named = [String: FetchValue](minimumCapacity: stride)
                for (offset, path) in paths.enumerated() where named[path] == nil { named[path] = values[index * stride + offset] }
                return FetchValueRow(named)
            }
        }
        guard sortDescriptors.isEmpty, havingPredicate == nil else { return try dictionaries(from: byName()) }
        let (properties, grouping) = try dictionaryShape()
        var column: [String: Int] = [:]
        for (index, path) in paths.enumerated() where column[path] == nil { column[path] = index }
        guard let compiled = ColumnProperty.compile(properties, columns: column),
            let keys = ColumnProperty.compile(grouping ?? [], columns: column)
        else { return try dictionaries(from: byName()) }
        let names = properties.map(\.name)
        guard grouping != nil else {
            if compiled.count == 1 {
                // One column: its values hashed as they are, no array per row.
                var seen: Set<FetchValue> = []
                var results: [[String: FetchValue]] = []
                results.reserveCapacity(returnsDistinctResults ? 16 : rowCount)
                for index in 0..<rowCount {
                    let value = compiled[0].value(over: CollectionOfOne(index), in: values, stride: stride)
                    if returnsDistinctResults, !seen.insert(value).inserted { continue }
                    results.append([names[0]: value])
                }
                return page(results)
            }
            var seen: Set<[FetchValue]> = []
            if returnsDistinctResults { seen.reserveCapacity(rowCount) }
            var results: [[String: FetchValue]] = []
            results.reserveCapacity(rowCount)
            let rows = ResultRows(names)
            for index in 0..<rowCount {
                if returnsDistinctResults {
                    let row = compiled.map { $0.value(over: CollectionOfOne(index), in: values, stride: stride) }
                    guard seen.insert(row).inserted else { continue }
                    results.append(rows.row { row[$0] })
                } else {
                    results.append(rows.row { compiled[$0].value(over: CollectionOfOne(index), in: values, stride: stride) })
                }
            }
            return page(results)
        }
        // No key (aggregates of the whole result): one group, every row, nothing hashed.
        if keys.isEmpty {
            return page([Self.resultRow(names) { compiled[$0].value(over: 0..<rowCount, in: values, stride: stride) }])
        }
        // Groups in the order of their first row, as in dictionaries(from:); a single key is
        // hashed alone (keys are equal exactly when their values are).
        // (The key read from a constant, not from `keys` per row: that copied the property.)
        let first = keys[0]
        let groups: [[Int]] = keys.count == 1
            ? Self.groups(rowCount) { first.value(over: CollectionOfOne($0), in: values, stride: stride) }
            : Self.groups(rowCount) { index in keys.map { $0.value(over: CollectionOfOne(index), in: values, stride: stride) } }
        let rows = ResultRows(names)
        var results = groups.map { members in
            rows.row { compiled[$0].value(over: members, in: values, stride: stride) }
        }
        if returnsDistinctResults { results = Self.distinct(results) }
        return page(results)
    }

    /// Rows `0..<count` grouped by `key`, as row numbers, the groups in the order of their
    /// first row.
    private static func groups<Key: Hashable>(_ count: Int, by key: (Int) -> Key) -> [[Int]] {
        var groupOfKey: [Key: Int] = [:]
        var groups: [[Int]] = []
        for index in 0..<count {
            let key = key(index)
            if let group = groupOfKey[key] {
                groups[group].append(index)
            } else {
                groupOfKey[key] = groups.count
                groups.append([index])
            }
        }
        return groups
    }

    private static func distinct(_ results: [[String: FetchValue]]) -> [[String: FetchValue]] {
        var seen: Set<[String: FetchValue]> = []
        return results.filter { seen.insert($0).inserted }
    }
}

/// A fetched or grouped property computed on a row's columns (``FetchRequest/dictionaries(fromColumns:)``):
/// what `FetchRequest.value(of:for:)` computes through ``FetchEvaluable``, for the shapes that
/// need nothing but the columns.
private enum ColumnProperty {
    /// A key path: the first row's value.
    case column(Int)
    /// A non-function expression of a description: its value for the first row, converted.
    case converted(ColumnArgument, FetchExpressionDescription)
    /// A function over every row's argument values (collections flattened into them).
    case function(FetchFunction, [ColumnArgument], FetchExpressionDescription)

    /// The compiled properties, or `nil` if one needs more than the columns.
    static func compile(_ properties: [FetchProperty], columns: [String: Int]) -> [ColumnProperty]? {
        var compiled: [ColumnProperty] = []
        for property in properties {
            switch property {
            case .keyPath(let path):
                guard let index = columns[path] else { return nil }
                compiled.append(.column(index))
            case .expression(let description):
                if case .function(let function, let arguments) = description.expression {
                    var compiledArguments: [ColumnArgument] = []
                    for argument in arguments {
                        guard let compiledArgument = ColumnArgument(argument, columns: columns) else { return nil }
                        compiledArguments.append(compiledArgument)
                    }
                    compiled.append(.function(function, compiledArguments, description))
                } else {
                    guard let argument = ColumnArgument(description.expression, columns: columns) else { return nil }
                    compiled.append(.converted(argument, description))
                }
            }
        }
        return compiled
    }

    /// The property's value over the rows numbered `rows` (one row when not grouping) of
    /// `table`, whose row `i` is `table[i * stride ..< (i + 1) * stride]`; `.null` for no row
    /// unless a function.
    func value<Rows: Collection<Int>>(over rows: Rows, in table: [FetchValue], stride: Int) -> FetchValue {
        switch self {
        case .column(let index):
            guard let first = rows.first else { return .null }
            return table[first * stride + index].flattened
        case .converted(let argument, let description):
            guard let first = rows.first else { return .null }
            return description.converted(argument.value(in: table, row: first * stride))
        case .function(let function, let arguments, let description):
            var values: [FetchValue] = []
            values.reserveCapacity(rows.count * arguments.count)
            for row in rows {
                let start = row * stride
                for argument in arguments {
                    // A column's plain value is appended as it is; collections are flattened.
                    if case .column(let index) = argument {
                        let value = table[start + index]
                        if case .collection = value {} else {
                            values.append(value)
                            continue
                        }
                    }
                    let value = argument.value(in: table, row: start)
                    if case .collection(let members) = value { values += members } else { values.append(value) }
                }
            }
            return description.converted(FetchAggregation.apply(function, to: values))
        }
    }
}

/// An argument of a ``ColumnProperty``: a column or a constant.
private enum ColumnArgument {
    case column(Int)
    case constant(FetchValue)

    init?(_ expression: FetchExpression, columns: [String: Int]) {
        switch expression {
        case .constant(let value): self = .constant(value)
        case .keyPath(let path):
            guard let index = columns[path] else { return nil }
            self = .column(index)
        default: return nil
        }
    }

    /// The argument's value in the row starting at `table[start]` (a key path's value
    /// flattened, as a read gives it).
    func value(in table: [FetchValue], row start: Int) -> FetchValue {
        switch self {
        case .column(let index): return table[start + index].flattened
        case .constant(let value): return value
        }
    }
}

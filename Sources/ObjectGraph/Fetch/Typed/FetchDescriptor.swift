import Foundation

/// A typed fetch: what to fetch of a ``FetchableEntity`` type, kept as a value to run again.
/// It plays the part of Core Data's `NSFetchRequest<Book>` and has SwiftData's shape:
///
/// ```swift
/// var recent = FetchDescriptor<Book>(predicate: #Predicate { ($0.year ?? 0) >= 2000 },
///                                    sortBy: [SortDescriptor(\.title)])
/// recent.fetchLimit = 20
/// let books: [Book] = try context.fetch(recent)
/// let total = try context.count(for: recent)
/// let titles: [(String, Int16?)] = try context.fetchValues(recent, \.title, \.year)
/// ```
///
/// Running it translates the predicate and sort descriptors into the fetch language
/// (``FetchPredicate/init(_:)``, ``FetchSortDescriptor/init(_:)``) into a ``FetchRequest``,
/// so it uses the indexes and plans the equivalent format string would. The untyped
/// ``FetchRequest`` stays what stores receive: a descriptor is a typed way to make one
/// (``fetchRequest()``), and its settings are the request's.
public struct FetchDescriptor<T: ManagedObject & FetchableEntity> {
    /// Which objects: a Foundation predicate over `T`, or all of them.
    public var predicate: Predicate<T>?
    /// Their order: the first descriptor first, ties broken by the next.
    public var sortBy: [SortDescriptor<T>]
    /// At most this many results (0: no limit), as ``FetchRequest/fetchLimit``.
    public var fetchLimit: Int?
    /// Skip this many results first, as ``FetchRequest/fetchOffset``.
    public var fetchOffset: Int?
    /// Whether objects of `T`'s subentities are fetched too (by default they are), as
    /// ``FetchRequest/includesSubentities``.
    public var includesSubentities = true
    /// Whether the context's unsaved changes count (by default they do), as
    /// ``FetchRequest/includesPendingChanges``.
    public var includePendingChanges = true
    /// Results arrive in batches of this size, as ``FetchRequest/fetchBatchSize`` (0: all at once).
    public var fetchBatchSize = 0
    /// Whether results may arrive as faults, as ``FetchRequest/returnsObjectsAsFaults``.
    public var returnsObjectsAsFaults = true
    /// Relationships whose destinations are fetched with the results, as
    /// ``FetchRequest/relationshipKeyPathsForPrefetching``: each a key path to a relationship
    /// of `T`.
    public var relationshipKeyPathsForPrefetching: [PartialKeyPath<T>] = []

    /// A descriptor of the objects of `T` that match `predicate`, sorted by `sortBy`.
    public init(predicate: Predicate<T>? = nil, sortBy: [SortDescriptor<T>] = []) {
        self.predicate = predicate
        self.sortBy = sortBy
    }

    /// The untyped request the descriptor stands for, its predicate and sort descriptors
    /// translated into the fetch language.
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidFetchRequest`` naming what does not translate
    ///   (a construct of the predicate, a sort key path, a prefetched key path that names no
    ///   relationship of `T`).
    public func fetchRequest() throws -> FetchRequest {
        var request = try FetchRequest(for: T.self, predicate: predicate, sortBy: sortBy)
        if let fetchLimit { request.fetchLimit = fetchLimit }
        if let fetchOffset { request.fetchOffset = fetchOffset }
        request.includesSubentities = includesSubentities
        request.includesPendingChanges = includePendingChanges
        request.fetchBatchSize = fetchBatchSize
        request.returnsObjectsAsFaults = returnsObjectsAsFaults
        request.relationshipKeyPathsForPrefetching = try relationshipKeyPathsForPrefetching.map { keyPath in
            guard let name = T.fetchKey(for: keyPath) else {
                throw ObjectGraphError(
                    .invalidFetchRequest, "\(T.self) names no stored property for the prefetched key path \(keyPath).", entityName: T.entityName)
            }
            return name
        }
        return request
    }
}

extension ManagedObjectContext {
    /// The objects a typed descriptor describes, with pending changes as ``fetch(_:)-(FetchRequest)`` has them.
    ///
    /// - Throws: as ``FetchDescriptor/fetchRequest()``, or the fetch's own errors.
    public func fetch<T: ManagedObject & FetchableEntity>(_ descriptor: FetchDescriptor<T>) throws -> [T] {
        try fetch(try descriptor.fetchRequest(), as: T.self)
    }

    /// The number of objects ``fetch(_:)-(FetchDescriptor<T>)`` would return, counted without making them.
    ///
    /// - Throws: as ``FetchDescriptor/fetchRequest()``, or the count's own errors.
    public func count<T: ManagedObject & FetchableEntity>(for descriptor: FetchDescriptor<T>) throws -> Int {
        try count(for: try descriptor.fetchRequest())
    }

    /// The IDs of the objects a typed descriptor describes, as ``fetchObjectIDs(_:)`` has them.
    ///
    /// - Throws: as ``FetchDescriptor/fetchRequest()``, or the fetch's own errors.
    public func fetchIdentifiers<T: ManagedObject & FetchableEntity>(_ descriptor: FetchDescriptor<T>) throws -> [ManagedObjectID] {
        try fetchObjectIDs(try descriptor.fetchRequest())
    }

    /// Typed dictionary results: for each object a descriptor describes, the values of some
    /// of its attributes, as a tuple in the order of `keyPaths` (one key path gives the values
    /// themselves). With `distinct`, each combination of values once. The store reads just
    /// those values, as a dictionary fetch (``fetchDictionaries(_:)``) does, and as there,
    /// pending changes are not applied.
    ///
    /// ```swift
    /// let countries: [String] = try context.fetchValues(FetchDescriptor<Customer>(), \.country, distinct: true)
    /// let rows: [(String, Int16?)] = try context.fetchValues(FetchDescriptor<Book>(sortBy: [SortDescriptor(\.title)]), \.title, \.year)
    /// ```
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidFetchRequest`` for a key path that names no
    ///   attribute of `T`, a descriptor that does not translate, or the fetch's own errors;
    ///   ``ObjectGraphError/Code/wrongValueType`` for a stored value that is not of the key
    ///   path's type.
    public func fetchValues<T: ManagedObject & FetchableEntity, each V: TypedAttributeValue>(
        _ descriptor: FetchDescriptor<T>, _ keyPaths: repeat KeyPath<T, each V>, distinct: Bool = false
    ) throws -> [(repeat each V)] {
        var names: [String] = []
        for keyPath in repeat each keyPaths {
            guard let name = T.fetchKey(for: keyPath) else {
                throw ObjectGraphError(.invalidFetchRequest, "\(T.self) names no stored property for the key path \(keyPath).", entityName: T.entityName)
            }
            names.append(name)
        }
        var request = try descriptor.fetchRequest()
        request.propertiesToFetch = names.map { .keyPath($0) }
        request.returnsDistinctResults = distinct
        return try fetchDictionaries(request).map { row in
            var column = 0
            func next<Value: TypedAttributeValue>(_ type: Value.Type) throws -> Value {
                let name = names[column]
                column += 1
                let stored = row[name]?.attributeValue ?? .null
                guard let value = Value(attributeValue: stored) else {
                    throw ObjectGraphError(
                        .wrongValueType, "\(T.entityName).\(name) holds \(stored.typeName), not \(Value.self).", entityName: T.entityName, key: name)
                }
                return value
            }
            return (repeat try next((each V).self))
        }
    }
}

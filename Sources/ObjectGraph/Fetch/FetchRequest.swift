import Foundation

/// What a fetch returns: objects, their IDs, dictionaries of values, or a count
/// (Core Data's `NSFetchRequestResultType`).
public enum FetchRequestResultType: Sendable, Hashable {
    /// Managed objects.
    case managedObject
    /// Object IDs.
    case managedObjectID
    /// One dictionary of property values per result.
    case dictionary
    /// The number of results.
    case count
}

/// A description of the objects to fetch (Core Data's `NSFetchRequest`), with every
/// property the Incremental Store Programming Guide lists.
///
/// For example:
///
/// ```swift
/// var request = FetchRequest(entityName: "Person")
/// request.predicate = .greaterThan("age", 30)
/// request.sortDescriptors = [FetchSortDescriptor(keyPath: "name")]
/// request.fetchLimit = 10
/// let people = try context.fetch(request)
/// ```
public struct FetchRequest: PersistentStoreRequest, Sendable {
    /// Always ``PersistentStoreRequestType/fetch``.
    public var requestType: PersistentStoreRequestType { .fetch }
    /// The stores to search; `nil` for every store that holds the entity.
    public var affectedStores: [PersistentStore]?
    /// The name of the entity to fetch.
    public var entityName: String
    /// The entity, once resolved by the context (stores always receive it set).
    public var entity: EntityDescription?
    /// The condition results must meet; `nil` for all instances.
    public var predicate: FetchPredicate?
    /// The order of the results.
    public var sortDescriptors: [FetchSortDescriptor] = []
    /// The most results to return; 0 for no limit.
    public var fetchLimit = 0
    /// The number of leading results to skip.
    public var fetchOffset = 0
    /// How many objects are realised at a time; 0 for all. Results are complete either way:
    /// with a batch size, an object fetch returns every result, the first batch with its
    /// values at hand and the later ones as faults that read their whole batch when the
    /// first of it fires (Core Data's batched results).
    public var fetchBatchSize = 0
    /// What the fetch returns.
    public var resultType: FetchRequestResultType = .managedObject
    /// Whether instances of subentities match.
    public var includesSubentities = true
    /// Whether the context's unsaved changes are taken into account (handled by the context).
    public var includesPendingChanges = true
    /// Whether values are loaded with the objects (a hint; `false` leaves them as faults).
    public var includesPropertyValues = true
    /// Whether returned objects are faults; `false` fulfils them before returning.
    public var returnsObjectsAsFaults = true
    /// Relationship key paths whose destinations are loaded with the results.
    public var relationshipKeyPathsForPrefetching: [String] = []
    /// The properties of a dictionary result: key paths (string literals) and named
    /// expressions; `nil` for all stored attributes.
    public var propertiesToFetch: [FetchProperty]?
    /// Whether a dictionary fetch drops duplicate dictionaries.
    public var returnsDistinctResults = false
    /// The properties a dictionary fetch groups by.
    public var propertiesToGroupBy: [FetchProperty]?
    /// The condition a group must meet, evaluated against each result dictionary (it may
    /// name fetched expressions, as key paths or as `$variables`).
    public var havingPredicate: FetchPredicate?
    /// Whether objects already in the context are updated with the values fetched.
    public var shouldRefreshRefetchedObjects = false

    /// A request for instances of the named entity.
    public init(entityName: String) {
        self.entityName = entityName
    }

    /// A request for instances of an entity.
    public init(entity: EntityDescription) {
        self.entityName = entity.name
        self.entity = entity
    }

    /// The entities whose instances match: the entity, and its subentities when
    /// ``includesSubentities`` is true.
    public func matchingEntityNames() -> Set<String> {
        guard let entity else { return [entityName] }
        if !includesSubentities || entity.subentities.isEmpty { return [entity.name] }
        return Set(entity.selfAndAllSubentities.map(\.name))
    }

    /// Applies predicate, sort descriptors, offset and limit to candidate results, the
    /// way a store that evaluates in memory does.
    public func filterSortAndPage<T: FetchEvaluable>(_ candidates: [T]) throws -> [T] {
        if predicate == nil && sortDescriptors.isEmpty { return page(candidates) }
        var results = candidates
        if let predicate { results = try results.filter { try predicate.evaluate(with: $0) } }
        // A limited page keeps only what it shows: offset plus limit subjects, selected.
        results = try FetchSortDescriptor.sort(results, by: sortDescriptors, keeping: fetchLimit > 0 ? fetchOffset + fetchLimit : nil)
        return page(results)
    }

    /// Applies offset and limit.
    public func page<T>(_ results: [T]) -> [T] {
        if fetchOffset <= 0 && (fetchLimit <= 0 || fetchLimit >= results.count) { return results }
        var slice = results[...]
        if fetchOffset > 0 { slice = slice.dropFirst(fetchOffset) }
        if fetchLimit > 0 { slice = slice.prefix(fetchLimit) }
        return Array(slice)
    }
}

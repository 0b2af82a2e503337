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
    /// The request's fields, shared between copies until one is changed: a request passes
    /// through the context, the coordinator and the store, and a copy is then one reference
    /// count instead of one per field.
    private struct Fields {
        var affectedStores: [PersistentStore]? = nil
        var entityName: String
        var predicate: FetchPredicate? = nil
        var sortDescriptors: [FetchSortDescriptor] = []
        var fetchLimit: Int = 0
        var fetchOffset: Int = 0
        var fetchBatchSize: Int = 0
        var resultType: FetchRequestResultType = .managedObject
        var includesSubentities: Bool = true
        var includesPendingChanges: Bool = true
        var includesPropertyValues: Bool = true
        var returnsObjectsAsFaults: Bool = true
        var relationshipKeyPathsForPrefetching: [String] = []
        var propertiesToFetch: [FetchProperty]? = nil
        var returnsDistinctResults: Bool = false
        var propertiesToGroupBy: [FetchProperty]? = nil
        var havingPredicate: FetchPredicate? = nil
        var shouldRefreshRefetchedObjects: Bool = false
    }

    /// The fields' box. Thread safety: a box is changed only while this request is its sole
    /// owner (``fields`` copies it first otherwise), so a shared box is never written.
    private final class Box: @unchecked Sendable {
        var fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    private var box: Box
    /// The resolved entity, beside the box: the context resolves it for every fetch, and
    /// setting it on a shared request would otherwise copy every field.
    private var resolvedEntity: EntityDescription?

    /// The fields for changing, in a box of this request's own.
    private var fields: Fields {
        get { box.fields }
        _modify {
            if !isKnownUniquelyReferenced(&box) { box = Box(box.fields) }
            yield &box.fields
        }
    }

    /// The stores to search; `nil` for every store that holds the entity.
    public var affectedStores: [PersistentStore]? {
        get { box.fields.affectedStores }
        set { fields.affectedStores = newValue }
    }
    /// The name of the entity to fetch.
    public var entityName: String {
        get { box.fields.entityName }
        // Setting what is there already copies nothing (a shared request stays shared).
        set { if newValue != box.fields.entityName { fields.entityName = newValue } }
    }
    /// The entity, once resolved by the context (stores always receive it set).
    public var entity: EntityDescription? {
        get { resolvedEntity }
        set { resolvedEntity = newValue }
    }
    /// The condition results must meet; `nil` for all instances.
    public var predicate: FetchPredicate? {
        get { box.fields.predicate }
        set { if !(newValue == nil && box.fields.predicate == nil) { fields.predicate = newValue } }
    }
    /// The order of the results.
    public var sortDescriptors: [FetchSortDescriptor] {
        get { box.fields.sortDescriptors }
        set { if !(newValue.isEmpty && box.fields.sortDescriptors.isEmpty) { fields.sortDescriptors = newValue } }
    }
    /// The most results to return; 0 for no limit.
    public var fetchLimit: Int {
        get { box.fields.fetchLimit }
        set { fields.fetchLimit = newValue }
    }
    /// The number of leading results to skip.
    public var fetchOffset: Int {
        get { box.fields.fetchOffset }
        set { fields.fetchOffset = newValue }
    }
    /// How many objects are realised at a time; 0 for all. Results are complete either way:
    /// with a batch size, an object fetch returns every result, the first batch with its
    /// values at hand and the later ones as faults that read their whole batch when the
    /// first of it fires (Core Data's batched results).
    public var fetchBatchSize: Int {
        get { box.fields.fetchBatchSize }
        set { fields.fetchBatchSize = newValue }
    }
    /// What the fetch returns.
    public var resultType: FetchRequestResultType {
        get { box.fields.resultType }
        set { if newValue != box.fields.resultType { fields.resultType = newValue } }
    }
    /// Whether instances of subentities match.
    public var includesSubentities: Bool {
        get { box.fields.includesSubentities }
        set { fields.includesSubentities = newValue }
    }
    /// Whether the context's unsaved changes are taken into account (handled by the context).
    public var includesPendingChanges: Bool {
        get { box.fields.includesPendingChanges }
        set { fields.includesPendingChanges = newValue }
    }
    /// Whether values are loaded with the objects (a hint; `false` leaves them as faults).
    public var includesPropertyValues: Bool {
        get { box.fields.includesPropertyValues }
        set { fields.includesPropertyValues = newValue }
    }
    /// Whether returned objects are faults; `false` fulfils them before returning.
    public var returnsObjectsAsFaults: Bool {
        get { box.fields.returnsObjectsAsFaults }
        set { fields.returnsObjectsAsFaults = newValue }
    }
    /// Relationship key paths whose destinations are loaded with the results: for each step
    /// of a key path, the destinations that are faults are read by one fetch per destination
    /// entity (`SELF IN` their IDs), and the context keeps their rows (up to 8,192), so a
    /// destination released and reached again later fires without a read while no save came
    /// through the coordinator.
    public var relationshipKeyPathsForPrefetching: [String] {
        get { box.fields.relationshipKeyPathsForPrefetching }
        set { fields.relationshipKeyPathsForPrefetching = newValue }
    }
    /// The properties of a dictionary result: key paths (string literals) and named
    /// expressions; `nil` for all stored attributes.
    public var propertiesToFetch: [FetchProperty]? {
        get { box.fields.propertiesToFetch }
        set { fields.propertiesToFetch = newValue }
    }
    /// Whether a dictionary fetch drops duplicate dictionaries.
    public var returnsDistinctResults: Bool {
        get { box.fields.returnsDistinctResults }
        set { fields.returnsDistinctResults = newValue }
    }
    /// The properties a dictionary fetch groups by.
    public var propertiesToGroupBy: [FetchProperty]? {
        get { box.fields.propertiesToGroupBy }
        set { fields.propertiesToGroupBy = newValue }
    }
    /// The condition a group must meet, evaluated against each result dictionary (it may
    /// name fetched expressions, as key paths or as `$variables`).
    public var havingPredicate: FetchPredicate? {
        get { box.fields.havingPredicate }
        set { fields.havingPredicate = newValue }
    }
    /// Whether objects already in the context are updated with the values fetched.
    public var shouldRefreshRefetchedObjects: Bool {
        get { box.fields.shouldRefreshRefetchedObjects }
        set { fields.shouldRefreshRefetchedObjects = newValue }
    }

    /// A request for instances of the named entity.
    public init(entityName: String) {
        box = Box(Fields(entityName: entityName))
    }

    /// A request for instances of an entity.
    public init(entity: EntityDescription) {
        box = Box(Fields(entityName: entity.name))
        resolvedEntity = entity
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

import Foundation

/// A Swift type that stands for an entity in typed fetches: Foundation's `#Predicate` and
/// `SortDescriptor` over it translate into the fetch language (``FetchPredicate``,
/// ``FetchSortDescriptor``), so a typed fetch runs in the store with the same indexes and
/// plans as the equivalent format string.
///
/// The type names its entity and, for each key path of a stored property, the property's
/// name in the model:
///
/// ```swift
/// final class Book: ManagedObject, FetchableEntity {
///     @Managed("title") var title: String?
///     @Managed("pages") var pages: Int32?
///     static let entityName = "Book"
///     static func fetchKey(for keyPath: AnyKeyPath) -> String? {
///         switch keyPath {
///         case \Book.title: "title"
///         case \Book.pages: "pages"
///         default: nil
///         }
///     }
/// }
///
/// let long = try context.fetch(Book.self, where: #Predicate { ($0.pages ?? 0) > 300 },
///                              sortBy: [SortDescriptor(\.title)])
/// ```
///
/// A relationship's destination type must be a `FetchableEntity` too, for predicates that
/// follow it (`$0.author?.name == "Lem"`); a to-many relationship is a Swift collection of
/// the destination type (`Set<Tag>` or `[Tag]`).
public protocol FetchableEntity {
    /// The entity's name in the model.
    static var entityName: String { get }
    /// The name in the model of the stored property (attribute or relationship) that
    /// `keyPath` reads, or `nil` when it reads none (a typed fetch using it is refused).
    static func fetchKey(for keyPath: AnyKeyPath) -> String?
}

extension FetchPredicate {
    /// The fetch-language form of a Foundation predicate over a typed entity.
    ///
    /// Translated: `==`, `!=`, `<`, `<=`, `>`, `>=` between key paths and captured values
    /// (numbers, strings, dates, UUIDs, data, URLs, decimals, booleans, `nil`, managed
    /// objects, and arrays or sets of them); `&&`, `||`, `!`; key paths through to-one
    /// relationships, optional chaining (`$0.author?.name`), `!` and `??` with a captured
    /// default; string `contains(_:)` and `starts(with:)` (`CONTAINS`, `BEGINSWITH`);
    /// `contains(_:)` of a captured collection (`IN`) or of a to-many relationship (an
    /// object `IN` it); `contains(where:)` and `allSatisfy(_:)` over a to-many relationship
    /// (`ANY`/`ALL`, or a `SUBQUERY` for a compound test); `count` and `isEmpty` of a to-many
    /// relationship or of its `filter(_:)` (`@count`, `SUBQUERY(…).@count`); and
    /// `(a...b).contains(x)`, `(a..<b).contains(x)` (`BETWEEN`, or two comparisons).
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidFetchRequest`` naming the first construct
    ///   the fetch language has no form for (arithmetic, a conditional, a string's length,
    ///   a key path the type does not name, a transformable `Codable` attribute, …); such a predicate can still be evaluated in
    ///   memory with `Predicate.evaluate(_:)`.
    public init<T: FetchableEntity>(_ predicate: Predicate<T>) throws {
        var translator = PredicateTranslator(root: predicate.variable.key)
        self = try translator.predicate(of: predicate.expression)
    }
}

extension FetchSortDescriptor {
    /// The fetch-language form of a Foundation sort descriptor over a typed entity: the
    /// property its key path names, in its order.
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidFetchRequest`` when the descriptor has no key
    ///   path (one made from a comparator alone), the type names none for it, or it reads a
    ///   transformable (`Codable`) attribute.
    public init<T: FetchableEntity>(_ descriptor: SortDescriptor<T>) throws {
        guard let keyPath = descriptor.keyPath else {
            throw ObjectGraphError(.invalidFetchRequest, "A sort descriptor over \(T.self) without a key path cannot be translated into the fetch language.", entityName: T.entityName)
        }
        guard let name = T.fetchKey(for: keyPath) else {
            throw ObjectGraphError(
                .invalidFetchRequest, "\(T.self) names no stored property for the sort key path \(keyPath).", entityName: T.entityName)
        }
        if PredicateTranslator.isStoredEncoded(type(of: keyPath).valueType) {
            throw ObjectGraphError(
                .invalidFetchRequest, "\(T.self).\(name) is stored encoded (a transformable attribute): a fetch cannot sort by it.",
                entityName: T.entityName, key: name)
        }
        self.init(keyPath: name, ascending: descriptor.order == .forward)
    }
}

extension FetchRequest {
    /// A fetch of `type`'s entity with a Foundation predicate and sort descriptors,
    /// translated into the fetch language (``FetchPredicate/init(_:)``).
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidFetchRequest`` naming what does not translate.
    public init<T: FetchableEntity>(
        for type: T.Type, predicate: Predicate<T>? = nil, sortBy: [SortDescriptor<T>] = []
    ) throws {
        self.init(entityName: T.entityName)
        if let predicate { self.predicate = try FetchPredicate(predicate) }
        var sorts: [FetchSortDescriptor] = []
        for descriptor in sortBy { sorts.append(try FetchSortDescriptor(descriptor)) }
        sortDescriptors = sorts
    }
}

extension ManagedObjectContext {
    /// The objects of `type` that match a Foundation predicate, sorted and limited as asked,
    /// with pending changes as ``fetch(_:)-(FetchRequest)`` has them.
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidFetchRequest`` for a predicate or sort
    ///   descriptor that does not translate (``FetchPredicate/init(_:)``), or the fetch's
    ///   own errors.
    public func fetch<T: ManagedObject & FetchableEntity>(
        _ type: T.Type, where predicate: Predicate<T>? = nil, sortBy: [SortDescriptor<T>] = [], limit: Int = 0
    ) throws -> [T] {
        var request = try FetchRequest(for: type, predicate: predicate, sortBy: sortBy)
        request.fetchLimit = limit
        return try fetch(request, as: type)
    }

    /// The number of objects of `type` that match a Foundation predicate, as
    /// ``count(for:)-(FetchRequest)`` counts them.
    ///
    /// - Throws: as ``fetch(_:where:sortBy:limit:)``.
    public func count<T: ManagedObject & FetchableEntity>(_ type: T.Type, where predicate: Predicate<T>? = nil) throws -> Int {
        try count(for: FetchRequest(for: type, predicate: predicate))
    }
}

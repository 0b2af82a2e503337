import Foundation

/// The kind of a request sent to a store (Core Data's `NSPersistentStoreRequestType`).
///
/// A struct rather than an enum so that later request kinds (batch updates and
/// deletes) can be added without breaking stores that switch over the existing ones.
public struct PersistentStoreRequestType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The kind's stable name.
    public let rawValue: String
    /// Creates a kind from its name.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The kind's name.
    public var description: String { rawValue }
    /// A ``FetchRequest``.
    public static let fetch = PersistentStoreRequestType(rawValue: "fetch")
    /// A ``SaveChangesRequest``.
    public static let save = PersistentStoreRequestType(rawValue: "save")
}

/// A request a coordinator sends to its stores (Core Data's `NSPersistentStoreRequest`).
///
/// Stores must expect request types they do not know and answer them with an
/// ``ObjectGraphError/Code/unsupportedRequest`` error.
public protocol PersistentStoreRequest {
    /// The request's kind.
    var requestType: PersistentStoreRequestType { get }
    /// The stores the request is limited to; `nil` for every store that can serve it.
    var affectedStores: [PersistentStore]? { get }
}

/// What a store returns from ``IncrementalStore/execute(_:with:)``.
public enum PersistentStoreResult {
    /// Managed objects (usually faults made with ``ManagedObjectContext/object(with:)``).
    case objects([ManagedObject])
    /// Object IDs; also accepted for a managed-object fetch, the context makes the objects.
    case objectIDs([ManagedObjectID])
    /// Dictionaries of property values, for a dictionary fetch.
    case dictionaries([[String: FetchValue]])
    /// A count, for a count fetch.
    case count(Int)
    /// The empty result of a save.
    case saved
}

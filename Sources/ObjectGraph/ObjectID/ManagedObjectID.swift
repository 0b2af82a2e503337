import Foundation

/// The identity of a managed object across contexts and stores (Core Data's
/// `NSManagedObjectID`).
///
/// An ID is temporary from the object's insertion until the store assigns a permanent
/// one (before the store records the insert); a permanent ID never changes. IDs are
/// values: equal when they name the same entity, store and reference, and usable as
/// dictionary keys across contexts and threads.
///
/// For example:
///
/// ```swift
/// let uri = person.objectID.uriRepresentation()   // x-coredata://<store>/Person/p1
/// let same = coordinator.managedObjectID(forURIRepresentation: uri)
/// ```
public struct ManagedObjectID: Sendable, Hashable, CustomStringConvertible {
    /// Whether the ID is temporary or permanent, and its key.
    public enum Kind: Sendable, Hashable {
        /// Assigned at insertion; replaced before the store records the object.
        case temporary(UUID)
        /// Assigned by a store; never changes.
        case permanent(ReferenceObject)
    }

    /// The object's entity.
    public let entity: EntityDescription
    /// The identifier of the store holding the object; `nil` while temporary.
    public let storeIdentifier: String?
    /// The ID's kind and key.
    public let kind: Kind
    /// The store that created the ID, while it is alive.
    public weak let persistentStore: PersistentStore?

    /// A new temporary ID for an object of `entity`.
    public static func temporary(for entity: EntityDescription) -> ManagedObjectID {
        ManagedObjectID(entity: entity, storeIdentifier: nil, kind: .temporary(UUID()), store: nil)
    }

    init(entity: EntityDescription, storeIdentifier: String?, kind: Kind, store: PersistentStore?) {
        self.entity = entity
        self.storeIdentifier = storeIdentifier
        self.kind = kind
        self.persistentStore = store
    }

    /// The entity's name.
    public var entityName: String { entity.name }

    /// Whether the ID is temporary.
    public var isTemporaryID: Bool {
        if case .temporary = kind { return true } else { return false }
    }

    /// The store's key for the object, if the ID is permanent.
    public var referenceObject: ReferenceObject? {
        if case .permanent(let reference) = kind { return reference } else { return nil }
    }

    /// The ID as a URI: `x-coredata://<store identifier>/<Entity>/p<reference>` when
    /// permanent, `x-coredata:///<Entity>/t<UUID>` while temporary.
    public func uriRepresentation() -> URL {
        let text: String
        switch kind {
        case .permanent(let reference):
            text = "x-coredata://\(storeIdentifier ?? "")/\(entity.name)/p\(reference.uriComponent)"
        case .temporary(let uuid):
            text = "x-coredata:///\(entity.name)/t\(uuid.uuidString)"
        }
        // Entity names and store identifiers are URI-safe in practice; escape anyway.
        return URL(string: text)
            ?? URL(string: text.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? "x-coredata:///")
            ?? URL(fileURLWithPath: "/")
    }

    /// The URI as text.
    public var description: String { uriRepresentation().absoluteString }

    /// Equal when entity name, store identifier and kind are equal.
    public static func == (lhs: ManagedObjectID, rhs: ManagedObjectID) -> Bool {
        lhs.kind == rhs.kind && lhs.storeIdentifier == rhs.storeIdentifier && lhs.entity.name == rhs.entity.name
    }

    /// Hashes entity name, store identifier and kind.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(entity.name)
        hasher.combine(storeIdentifier)
        hasher.combine(kind)
    }
}

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
    public var entity: EntityDescription { storage.entity }
    /// The identifier of the store holding the object; `nil` while temporary.
    public var storeIdentifier: String? { storage.storeIdentifier }
    /// The ID's kind and key.
    public var kind: Kind { storage.kind }
    /// The store that created the ID, while it is alive.
    public var persistentStore: PersistentStore? { storage.persistentStore }

    /// The fields, in one immutable object: copying an ID is one retain (not one per field
    /// plus a weak-reference copy), and its hash is computed once. IDs are copied and hashed
    /// on every registration, fault and fetch.
    final class Storage: @unchecked Sendable {
        // Immutable after init; `persistentStore` is a weak reference the runtime protects.
        let entity: EntityDescription
        let storeIdentifier: String?
        let kind: Kind
        weak let persistentStore: PersistentStore?
        /// The hash of entity name, store identifier and kind.
        let fieldHash: Int

        init(entity: EntityDescription, storeIdentifier: String?, kind: Kind, store: PersistentStore?) {
            self.entity = entity
            self.storeIdentifier = storeIdentifier
            self.kind = kind
            self.persistentStore = store
            var hasher = Hasher()
            hasher.combine(entity.name)
            hasher.combine(storeIdentifier)
            hasher.combine(kind)
            self.fieldHash = hasher.finalize()
        }
    }

    let storage: Storage

    /// A new temporary ID for an object of `entity`.
    public static func temporary(for entity: EntityDescription) -> ManagedObjectID {
        ManagedObjectID(entity: entity, storeIdentifier: nil, kind: .temporary(UUID()), store: nil)
    }

    init(entity: EntityDescription, storeIdentifier: String?, kind: Kind, store: PersistentStore?) {
        storage = Storage(entity: entity, storeIdentifier: storeIdentifier, kind: kind, store: store)
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
        if lhs.storage === rhs.storage { return true }
        return lhs.storage.fieldHash == rhs.storage.fieldHash && lhs.kind == rhs.kind
            && lhs.storeIdentifier == rhs.storeIdentifier && lhs.entity.name == rhs.entity.name
    }

    /// Hashes entity name, store identifier and kind (computed once per ID).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(storage.fieldHash)
    }
}

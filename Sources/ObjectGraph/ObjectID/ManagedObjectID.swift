import Foundation
import StrataSync
import Synchronization

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
    public var storeIdentifier: String? { storage.store?.identifier }
    /// The ID's kind and key.
    public var kind: Kind { storage.kind }
    /// The store that created the ID, while it is alive.
    public var persistentStore: PersistentStore? { storage.store?.store }

    /// The fields, in one immutable object: copying an ID is one retain (not one per field),
    /// and its hash is computed once, from hashes computed once per entity and per store.
    /// IDs are copied and hashed on every registration, fault and fetch.
    final class Storage: @unchecked Sendable {
        // Immutable after init (`StoreToken` is itself immutable).
        let entity: EntityDescription
        let store: StoreToken?
        let kind: Kind
        /// The hash of entity name, store identifier and kind.
        let fieldHash: Int
        /// Whether ``kind`` is temporary (read on every registration; no copy of the kind).
        let isTemporary: Bool

        init(entity: EntityDescription, store: StoreToken?, kind: Kind) {
            self.entity = entity
            self.store = store
            self.kind = kind
            let kindHash: Int
            switch kind {
            case .permanent(.int64(let reference)): kindHash = Int(truncatingIfNeeded: reference)
            default: kindHash = kind.hashValue
            }
            if case .temporary = kind { isTemporary = true } else { isTemporary = false }
            self.fieldHash = Self.mix(Self.mix(entity.nameHash, store?.identifierHash ?? 0), kindHash)
        }

        /// Combines two hashes (the final `hash(into:)` feeds the result to `Hasher`).
        static func mix(_ a: Int, _ b: Int) -> Int {
            let x = UInt64(bitPattern: Int64(a)) &* 0x9E37_79B9_7F4A_7C15
            return Int(bitPattern: UInt(truncatingIfNeeded: (x ^ (x >> 29)) &+ UInt64(bitPattern: Int64(b))))
        }
    }

    let storage: Storage

    /// A new temporary ID for an object of `entity`.
    ///
    /// Temporary UUIDs are one random UUID per process with a counter in its last eight
    /// bytes: unique, and free of a random-number call per object.
    public static func temporary(for entity: EntityDescription) -> ManagedObjectID {
        ManagedObjectID(entity: entity, store: nil, kind: .temporary(TemporaryIDs.next()))
    }

    init(entity: EntityDescription, store: StoreToken?, kind: Kind) {
        storage = Storage(entity: entity, store: store, kind: kind)
    }

    /// The entity's name.
    public var entityName: String { entity.name }

    /// Whether the ID is temporary.
    public var isTemporaryID: Bool { storage.isTemporary }

    /// The store's key for the object, if the ID is permanent.
    public var referenceObject: ReferenceObject? {
        if case .permanent(let reference) = kind { return reference } else { return nil }
    }

    /// The integer reference of a permanent ID of the store whose IDs `maker` makes (the same
    /// store token, or failing that the same store identifier), else `nil`: a store checks
    /// an ID it is handed with one comparison, without loading its weak store reference.
    package func integerReference(madeLike maker: ObjectIDMaker) -> Int64? {
        let storage = self.storage
        guard let token = storage.store, token === maker.token || token.identifier == maker.token.identifier,
            case .permanent(.int64(let reference)) = storage.kind
        else { return nil }
        return reference
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
        let a = lhs.storage, b = rhs.storage
        if a === b { return true }
        guard a.fieldHash == b.fieldHash, a.kind == b.kind else { return false }
        guard a.store === b.store || a.store?.identifier == b.store?.identifier else { return false }
        return a.entity === b.entity || a.entity.name == b.entity.name
    }

    /// Hashes entity name, store identifier and kind (computed once per ID).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(storage.fieldHash)
    }

    /// The hash dictionaries and sets use: the ID's field hash (which mixes the per-process
    /// seeded hashes of its entity name and store identifier, so it is not predictable from
    /// outside) and the table's seed through ``seededHash(_:seed:)``, instead of a full
    /// `Hasher` run: every registration, fault and deallocation looks an ID up.
    public func _rawHashValue(seed: Int) -> Int {
        seededHash(storage.fieldHash, seed: seed)
    }
}

/// Makes permanent object IDs of one store (``PersistentStore/objectIDMaker``): the
/// store's identity is read once, not once per ID.
package struct ObjectIDMaker: Sendable {
    let token: StoreToken

    /// The ID of the object of `entity` with the integer reference `reference`.
    package func id(for entity: EntityDescription, reference: Int64) -> ManagedObjectID {
        ManagedObjectID(entity: entity, store: token, kind: .permanent(.int64(reference)))
    }
}

/// A store's identity as object IDs hold it: its identifier and that identifier's hash,
/// computed once, and a weak reference to the store, formed once per store instead of
/// once per ID.
final class StoreToken: Sendable {
    let identifier: String
    let identifierHash: Int
    weak let store: PersistentStore?
    /// The store as an incremental store, if it is one: cast once, not per registration.
    weak let incrementalStore: IncrementalStore?

    init(identifier: String, store: PersistentStore?) {
        self.identifier = identifier
        self.identifierHash = identifier.hashValue
        self.store = store
        self.incrementalStore = store as? IncrementalStore
    }
}

/// The source of temporary IDs' UUIDs: a random UUID per process whose last eight bytes
/// are replaced by a counter.
enum TemporaryIDs {
    private static let base = UUID().uuid
    private static let counter = Atomic<UInt64>(0)

    static func next() -> UUID {
        let n = counter.add(1, ordering: .relaxed).newValue
        var bytes = base
        withUnsafeMutableBytes(of: &bytes) { raw in
            raw.storeBytes(of: n.bigEndian, toByteOffset: 8, as: UInt64.self)
        }
        return UUID(uuid: bytes)
    }
}

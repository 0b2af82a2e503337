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
    public var entity: EntityDescription { home.entity }
    /// The identifier of the store holding the object; `nil` while temporary.
    public var storeIdentifier: String? { home.store?.identifier }
    /// The ID's kind and key.
    public var kind: Kind { boxed?.kind ?? .permanent(.int64(reference)) }
    /// The store that created the ID, while it is alive.
    public var persistentStore: PersistentStore? { home.store?.store }

    /// An ID's entity and store, with their hash: one object shared by every integer ID of
    /// one entity in one store (``StoreToken/home(for:)``), so copying an ID is one retain
    /// and making one allocates nothing. IDs of other kinds (temporary, or a reference that
    /// is not an integer) each have their own, a ``Boxed`` holding the kind.
    class Home: @unchecked Sendable {
        // Immutable after init (`StoreToken` is itself immutable).
        let entity: EntityDescription
        let store: StoreToken?
        /// The hash of entity name and store identifier (shared), or of entity name, store
        /// identifier and kind (boxed).
        let hash: Int
        /// Whether this is a ``Boxed``, one ID's own home.
        let isBoxed: Bool

        init(entity: EntityDescription, store: StoreToken?, kindHash: Int? = nil) {
            self.entity = entity
            self.store = store
            let base = ManagedObjectID.mix(entity.nameHash, store?.identifierHash ?? 0)
            self.hash = kindHash.map { ManagedObjectID.mix(base, $0) } ?? base
            self.isBoxed = kindHash != nil
        }
    }

    /// The home of one ID whose kind is not an integer reference.
    final class Boxed: Home, @unchecked Sendable {
        let kind: Kind
        /// Whether ``kind`` is temporary (read on every registration; no copy of the kind).
        let isTemporary: Bool

        init(entity: EntityDescription, store: StoreToken?, kind: Kind) {
            self.kind = kind
            if case .temporary = kind { isTemporary = true } else { isTemporary = false }
            super.init(entity: entity, store: store, kindHash: ManagedObjectID.kindHash(kind))
        }
    }

    /// The entity and store, shared (integer references) or the ID's own (other kinds).
    let home: Home
    /// The integer reference when ``home`` is shared; 0 otherwise.
    let reference: Int64

    /// Combines two hashes (the final `hash(into:)` feeds the result to `Hasher`).
    static func mix(_ a: Int, _ b: Int) -> Int {
        let x = UInt64(bitPattern: Int64(a)) &* 0x9E37_79B9_7F4A_7C15
        return Int(bitPattern: UInt(truncatingIfNeeded: (x ^ (x >> 29)) &+ UInt64(bitPattern: Int64(b))))
    }

    /// The hash of a kind: an integer reference is its own hash, so both forms of an ID agree.
    fileprivate static func kindHash(_ kind: Kind) -> Int {
        switch kind {
        case .permanent(.int64(let reference)):
            return Int(truncatingIfNeeded: reference)
        case .temporary(let uuid):
            // The two halves mixed with the process's seeds: made for every inserted object,
            // so no hasher run; the seeds keep the spread from being chosen from outside.
            let (high, low) = withUnsafeBytes(of: uuid.uuid) { ($0.load(as: UInt64.self), $0.load(fromByteOffset: 8, as: UInt64.self)) }
            let first = seededHash(Int(truncatingIfNeeded: high), seed: TemporaryIDs.hashSeeds.0)
            return seededHash(first ^ Int(truncatingIfNeeded: low), seed: TemporaryIDs.hashSeeds.1)
        default:
            return kind.hashValue
        }
    }

    /// The hash of entity name, store identifier and kind.
    var fieldHash: Int {
        let home = self.home
        return home.isBoxed ? home.hash : Self.mix(home.hash, Int(truncatingIfNeeded: reference))
    }

    /// The home as the ID's own, when it is one (no dynamic cast).
    private var boxed: Boxed? { home.isBoxed ? unsafeDowncast(home, to: Boxed.self) : nil }

    /// A new temporary ID for an object of `entity`.
    ///
    /// Temporary UUIDs are one random UUID per process with a counter in its last eight
    /// bytes: unique, and free of a random-number call per object.
    public static func temporary(for entity: EntityDescription) -> ManagedObjectID {
        ManagedObjectID(entity: entity, store: nil, kind: .temporary(TemporaryIDs.next()))
    }

    init(entity: EntityDescription, store: StoreToken?, kind: Kind) {
        if let store, case .permanent(.int64(let reference)) = kind {
            self.init(home: store.home(for: entity), reference: reference)
        } else {
            self.init(home: Boxed(entity: entity, store: store, kind: kind), reference: 0)
        }
    }

    /// An integer ID of a shared home.
    init(home: Home, reference: Int64) {
        self.home = home
        self.reference = reference
    }

    /// The entity's name.
    public var entityName: String { entity.name }

    /// Whether the ID is temporary.
    public var isTemporaryID: Bool { boxed?.isTemporary ?? false }

    /// The store's key for the object, if the ID is permanent.
    public var referenceObject: ReferenceObject? {
        if case .permanent(let reference) = kind { return reference } else { return nil }
    }

    /// The integer reference of a permanent ID of the store whose IDs `maker` makes (the same
    /// store token, or failing that the same store identifier), else `nil`: a store checks
    /// an ID it is handed with one comparison, without loading its weak store reference.
    package func integerReference(madeLike maker: ObjectIDMaker) -> Int64? {
        // Compared in place: nothing bound, so nothing retained (every registration asks).
        guard home.store === maker.token || (home.store.map { $0.identifier == maker.token.identifier } ?? false) else { return nil }
        guard home.isBoxed else { return reference }
        let boxed = unsafeDowncast(home, to: Boxed.self)
        guard case .permanent(.int64(let reference)) = boxed.kind else { return nil }
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
        let a = lhs.home, b = rhs.home
        // One shared home: same entity and store, so the references decide. A boxed home
        // is one ID's own (reference 0 on both sides).
        if a === b { return lhs.reference == rhs.reference }
        // Different homes: most such pairs differ, and their hashes say so at once (a table's
        // probe compares keys of one bucket chain, mostly unequal ones).
        guard lhs.fieldHash == rhs.fieldHash, lhs.kind == rhs.kind else { return false }
        guard a.store === b.store || a.store?.identifier == b.store?.identifier else { return false }
        return a.entity === b.entity || a.entity.name == b.entity.name
    }

    /// Hashes entity name, store identifier and kind.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(fieldHash)
    }

    /// The hash dictionaries and sets use: the ID's field hash (which mixes the per-process
    /// seeded hashes of its entity name and store identifier, so it is not predictable from
    /// outside) and the table's seed through ``seededHash(_:seed:)``, instead of a full
    /// `Hasher` run: every registration, fault and deallocation looks an ID up.
    public func _rawHashValue(seed: Int) -> Int {
        seededHash(fieldHash, seed: seed)
    }
}

/// Makes permanent object IDs of one store (``PersistentStore/objectIDMaker``): the
/// store's identity is read once, not once per ID.
package struct ObjectIDMaker: Sendable {
    let token: StoreToken

    /// The ID of the object of `entity` with the integer reference `reference`.
    package func id(for entity: EntityDescription, reference: Int64) -> ManagedObjectID {
        ManagedObjectID(home: token.home(for: entity), reference: reference)
    }

    /// A maker of the IDs of `entity` alone: its home is found once, not once per ID.
    package func maker(for entity: EntityDescription) -> EntityIDMaker {
        EntityIDMaker(entity: entity, home: token.home(for: entity))
    }
}

/// Makes the permanent IDs of one entity of one store (``ObjectIDMaker/maker(for:)``).
package struct EntityIDMaker {
    /// The entity whose IDs this makes.
    package let entity: EntityDescription
    let home: ManagedObjectID.Home

    /// The ID of the object with the integer reference `reference`.
    package func id(reference: Int64) -> ManagedObjectID { ManagedObjectID(home: home, reference: reference) }
}

/// A store's identity as object IDs hold it: its identifier and that identifier's hash,
/// computed once, a weak reference to the store, formed once per store instead of
/// once per ID, and the homes of its integer IDs, one per entity.
final class StoreToken: Sendable {
    let identifier: String
    let identifierHash: Int
    weak let store: PersistentStore?
    /// The store as an incremental store, if it is one: cast once, not per registration.
    weak let incrementalStore: IncrementalStore?
    /// The shared homes of this store's integer IDs, one per entity, as an immutable list
    /// read without a lock (every fetched row and destination makes an ID). A new entity's
    /// home publishes a longer list; ``publishedHomes`` keeps every list published alive, so
    /// a reader's unretained list stays valid. A home keeps its entity alive, so no other
    /// entity can take its identifier while it is listed.
    private let homes = Atomic<Unmanaged<HomeList>?>(nil)
    /// Every list ``homes`` published, newest last; protected by its lock, which also orders
    /// publication.
    private let publishedHomes = Locked<[HomeList]>([])

    /// One published list of homes.
    final class HomeList: Sendable {
        let entries: [(entity: ObjectIdentifier, home: ManagedObjectID.Home)]
        init(_ entries: [(entity: ObjectIdentifier, home: ManagedObjectID.Home)]) { self.entries = entries }
    }

    init(identifier: String, store: PersistentStore?) {
        self.identifier = identifier
        self.identifierHash = identifier.hashValue
        self.store = store
        self.incrementalStore = store as? IncrementalStore
    }

    /// The home every integer ID of `entity` in this store shares.
    func home(for entity: EntityDescription) -> ManagedObjectID.Home {
        let key = ObjectIdentifier(entity)
        if let list = homes.load(ordering: .acquiring) {
            for entry in list.takeUnretainedValue().entries where entry.entity == key { return entry.home }
        }
        return publishedHomes.withLock { lists in
            let entries = lists.last?.entries ?? []
            for entry in entries where entry.entity == key { return entry.home }
            let home = ManagedObjectID.Home(entity: entity, store: self)
            let list = HomeList(entries + [(key, home)])
            lists.append(list)
            homes.store(Unmanaged.passUnretained(list), ordering: .releasing)
            return home
        }
    }
}

/// The source of temporary IDs' UUIDs: a random UUID per process whose last eight bytes
/// are replaced by a counter.
enum TemporaryIDs {
    private static let base = UUID().uuid
    /// Per-process seeds for temporary IDs' hashes.
    static let hashSeeds = (Int.random(in: .min ... .max), Int.random(in: .min ... .max))
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

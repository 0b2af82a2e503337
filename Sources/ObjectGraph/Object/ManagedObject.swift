import Foundation
import StrataSync

/// An object of the object graph (Core Data's `NSManagedObject`): an instance of an
/// entity, owned by one context, whose values load on demand and whose changes the
/// context tracks until they are saved.
///
/// Use it directly with key-based accessors, or subclass it with typed properties:
///
/// ```swift
/// final class Person: ManagedObject {
///     @Managed("name") var name: String?
///     var department: ManagedObject? {
///         get { try? object(forKey: "department") }
///     }
/// }
/// ```
///
/// A managed object is not `Sendable`: use it only on the thread of its context. Pass
/// its ``objectID`` to other contexts instead.
open class ManagedObject: Hashable, CustomStringConvertible {
    /// The object's entity.
    public let entity: EntityDescription
    /// The object's ID: temporary until the object is first saved (or
    /// ``ManagedObjectContext/obtainPermanentIDs(for:)`` is called), permanent after.
    public internal(set) var objectID: ManagedObjectID {
        get {
            if let id = assignedID { return id }
            // An object made outside a context gets its temporary ID when first asked: a
            // fault made by a context is given its permanent ID before anything asks.
            let id = ManagedObjectID.temporary(for: entity)
            assignedID = id
            return id
        }
        set { assignedID = newValue }
    }
    @exclusivity(unchecked) private var assignedID: ManagedObjectID?
    /// The context the object is registered in, if any; `nil` once that context is gone.
    public internal(set) var managedObjectContext: ManagedObjectContext? {
        get { contextLink?.context }
        set { contextLink = newValue?.link }
    }
    /// The link to the object's context (``ContextLink``): held strongly, where a weak
    /// reference to the context would cost a side-table load and release at every read.
    @exclusivity(unchecked) private var contextLink: ContextLink?

    // Change tracking, owned by the context's thread. Values are kept by property ordinal.
    /// The object's one store of committed values, read through ``snapshot`` (a loaded object)
    /// or ``faultRow`` (a fault), as ``isLoaded`` says.
    ///
    /// A fault keeps here the row the fetch that returned it read, or the row its values came
    /// from before it turned into a fault (``ObjectSnapshot/asFaultRow(of:)``); firing it only marks
    /// it loaded, reading no row, while no save came through the coordinator since the row was
    /// read and the context's staleness interval allows it. With the loaded objects' rows these
    /// are the object graph's row cache, one row per object.
    @exclusivity(unchecked) private var committed: ObjectSnapshot?
    /// Whether ``committed`` holds the object's loaded values (else the object is a fault, or
    /// new, and it holds at most a fault's row). Never true while ``committed`` is `nil`.
    @exclusivity(unchecked) private var isLoaded = false
    /// Last committed values; `nil` while the object is a fault (or new). Setting it loads the
    /// object with those values, or (`nil`) drops them and any row.
    var snapshot: ObjectSnapshot? {
        _read {
            if isLoaded { yield committed } else { yield nil }
        }
        _modify {
            if isLoaded {
                yield &committed
                isLoaded = committed != nil
            } else {
                var unloaded: ObjectSnapshot? = nil
                yield &unloaded
                if let unloaded {
                    committed = unloaded
                    isLoaded = true
                }
            }
        }
        set {
            committed = newValue
            isLoaded = newValue != nil
        }
    }
    /// A fault's row (see ``committed``); `nil` while the object is loaded or has no row.
    /// Setting it on a loaded object is a programming error.
    var faultRow: ObjectSnapshot? {
        get { isLoaded ? nil : committed }
        set {
            assert(!isLoaded, "a loaded object keeps no fault row")
            if !isLoaded { committed = newValue }
        }
    }
    /// Uncommitted values, as they are: a slot may hold member changes of a relationship
    /// whose committed members are not loaded (``UnloadedMembers``). Read through
    /// ``changes`` unless the reader handles those; changed only here.
    @exclusivity(unchecked) private(set) var pending = PendingChanges()
    /// Uncommitted values. Attribute and to-one values that return to their committed
    /// value are dropped; to-many ones stay pending once changed. Member changes recorded
    /// without loading the committed members are applied to them first (loading them).
    final var changes: PendingChanges {
        @inline(__always) _read {
            if pending.hasUnloadedMembers { loadUnloadedMembers() }
            yield pending
        }
        @inline(__always) _modify {
            if pending.hasUnloadedMembers { loadUnloadedMembers() }
            yield &pending
        }
    }
    /// Whether the object is inserted and not yet saved.
    @exclusivity(unchecked) var inserted = false
    /// Whether the object is deleted and the delete not yet saved.
    @exclusivity(unchecked) var deleted = false
    /// Whether a temporary ID names an object that exists in the parent context (a child
    /// context's view of its parent's insert, or an insert the child saved into its parent),
    /// so a fault of it loads values like any fault.
    @exclusivity(unchecked) var existsUpstream = false
    /// The object's slot in its context's registry (``ObjectRegistry``), kept by the
    /// registry; meaningful only while the object is registered.
    @exclusivity(unchecked) var registrySlot: Int32 = -1
    /// What few objects need (see ``Extras``), made when first set: a fetched object that
    /// never uses them stays small and has one field less to release.
    @exclusivity(unchecked) private var extras: Extras?

    /// The state most objects never have, kept apart from the object.
    private final class Extras {
        var transientValues: [Int: AttributeValue] = [:]
        var transientChanged = false
        weak var assignedStore: PersistentStore?
        var lastAccessError: ObjectGraphError?
    }

    /// The side storage, made on first use.
    private func ensureExtras() -> Extras {
        if let extras { return extras }
        let made = Extras()
        extras = made
        return made
    }

    /// A fault from a fetch with a batch size, past its first batch: its batch (its position
    /// there is the batch's to find). Firing it loads the rows of its batch. `nil` otherwise.
    ///
    /// A field of its own rather than in ``Extras``: a batched fetch sets it on every result past
    /// the first batch, and a side allocation per result cost more than the word (the object
    /// stays in the same allocation size class with it).
    @exclusivity(unchecked) var faultBatch: FaultBatch?
    /// The destinations a fetch prefetched through this object's relationships
    /// (``FetchRequest/relationshipKeyPathsForPrefetching``), held as Core Data's loaded
    /// relationships hold theirs: they live while this object does, until it turns into a
    /// fault, its context resets or its context goes. Objects that prefetched each other hold
    /// each other until then, as related objects do in Core Data.
    ///
    /// A field of its own rather than in ``Extras``: a prefetching fetch sets it on every
    /// source object, and a side allocation per source cost more than the empty array's word.
    @exclusivity(unchecked) var prefetchedDestinations: [ManagedObject] = []
    /// Whether the object holds destinations a fetch prefetched for it.
    var holdsPrefetchedDestinations: Bool { !prefetchedDestinations.isEmpty }
    /// Values of transient attributes, by ordinal; never given to a store.
    var transientValues: [Int: AttributeValue] {
        get { extras?.transientValues ?? [:] }
        _modify { yield &ensureExtras().transientValues }
        set { if !newValue.isEmpty || extras != nil { ensureExtras().transientValues = newValue } }
    }
    /// Whether a transient attribute was changed since the object was last saved or fetched:
    /// that makes the object updated (as in Core Data), though no stored value changed.
    var transientChanged: Bool {
        get { extras?.transientChanged ?? false }
        set { if newValue || extras != nil { ensureExtras().transientChanged = newValue } }
    }
    /// Whether the object has values of transient attributes (no empty table made to ask).
    var hasTransientValues: Bool { extras.map { !$0.transientValues.isEmpty } ?? false }
    /// The store an inserted object was assigned to with ``ManagedObjectContext/assign(_:to:)``.
    var assignedStore: PersistentStore? {
        get { extras?.assignedStore }
        set { if newValue != nil || extras != nil { ensureExtras().assignedStore = newValue } }
    }
    /// The last error a non-throwing accessor (``Managed``) met, if any.
    public internal(set) var lastAccessError: ObjectGraphError? {
        get { extras?.lastAccessError }
        set { if newValue != nil || extras != nil { ensureExtras().lastAccessError = newValue } }
    }

    /// Creates an object of `entity`, inserted into `context` if given.
    ///
    /// Subclasses that override this initializer must call it.
    public required init(entity: EntityDescription, insertInto context: ManagedObjectContext?) {
        self.entity = entity
        // Default values are not stored yet: a new object reads them from its entity, and
        // inserting it records them as changes (faults made by a context skip both).
        // A fresh object has no context and a temporary ID, so it can always be inserted.
        if let context { context.adopt(self) }
    }

    /// Creates an object of the entity whose class is this class, inserted into `context`.
    ///
    /// - Throws: ``ObjectGraphError/Code/unknownEntity`` if no entity of the context's
    ///   model uses this class, or ``ObjectGraphError/Code/noPersistentStore`` if the
    ///   context has no coordinator.
    public convenience init(context: ManagedObjectContext) throws {
        guard let entity = try context.requireCoordinator().managedObjectModel.entity(for: Self.self) else {
            throw ObjectGraphError(.unknownEntity, "No entity of the model uses class \(Self.self).")
        }
        self.init(entity: entity, insertInto: context)
    }

    deinit {
        if let assignedID { managedObjectContext?.objectDidDeallocate(assignedID, slot: Int(registrySlot), Unmanaged.passUnretained(self).toOpaque()) }
    }

    /// Identity: two managed objects are equal only if they are the same instance.
    public static func == (lhs: ManagedObject, rhs: ManagedObject) -> Bool { lhs === rhs }
    /// Hashes the instance's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    /// The hash sets of objects use (a context's changed objects, its events): the object's
    /// address mixed with the set's seed, not a full hasher run per object. Equal objects are
    /// the same instance, so they hash alike.
    public func _rawHashValue(seed: Int) -> Int {
        seededHash(Int(bitPattern: Unmanaged.passUnretained(self).toOpaque()), seed: seed)
    }

    /// The entity, the ID and the state.
    public var description: String {
        var flags: [String] = []
        if isFault { flags.append("fault") }
        if inserted { flags.append("inserted") }
        if deleted { flags.append("deleted") }
        if isUpdated { flags.append("updated") }
        return "<\(entity.name) \(objectID)\(flags.isEmpty ? "" : " " + flags.joined(separator: ","))>"
    }

    // MARK: State

    /// Whether the object's values are not loaded yet.
    public var isFault: Bool { !isLoaded && !isNew }

    /// Whether the object was created here and never saved: inserted, or not yet inserted.
    /// Its committed values are the empty defaults, so it never loads anything.
    var isNew: Bool { inserted || (!isLoaded && objectID.isTemporaryID && !existsUpstream) }
    /// Whether the object is inserted and not yet saved.
    public var isInserted: Bool { inserted }
    /// Whether the object has unsaved changes (and is neither inserted nor deleted).
    public var isUpdated: Bool { !inserted && !deleted && (!pending.isEmpty || transientChanged) }
    /// Whether the object is deleted and the delete is not yet saved.
    public var isDeleted: Bool { deleted }
    /// Whether the object is inserted, updated or deleted.
    public var hasChanges: Bool { inserted || deleted || !pending.isEmpty || transientChanged }

    /// The version of the row the committed values came from (the store's node version,
    /// counted up by each save of this object), or `nil` while the object is a fault. Stores
    /// compare it with the stored version to detect conflicting saves.
    public var committedVersion: UInt64? { snapshot?.version }

    /// The uncommitted values, by property name.
    public func changedValues() -> [String: PropertyValue] { changes.all(in: entity) }

    /// Whether the property at `ordinal` (``PropertyDescription/ordinal``) has an uncommitted
    /// value: a store saving the object can skip the properties that do not.
    public func hasChange(atOrdinal ordinal: Int) -> Bool { pending.contains(ordinal) }

    /// Whether the object has uncommitted stored values (transient ones aside); loads nothing.
    var hasPendingValues: Bool { !pending.isEmpty }

    /// The last committed values of the given properties (all stored properties for
    /// `nil`); loads the object's values if it is a fault.
    public func committedValues(forKeys keys: [String]?) throws -> [String: PropertyValue] {
        try fulfillFault()
        let properties = try keys.map { try $0.map { try entity.property(named: $0) } }
            ?? entity.properties.filter { !$0.isTransient }
        var result: [String: PropertyValue] = [:]
        for property in properties where !property.isTransient {
            result[property.name] = try committedValue(for: property)
        }
        return result
    }

    /// Whether the named relationship's destinations are not loaded yet.
    public func hasFault(forRelationshipNamed name: String) -> Bool {
        guard let relationship = entity.relationshipsByName[name] else { return false }
        return hasFault(forRelationship: relationship)
    }

    /// Whether a relationship's destinations are neither changed nor loaded.
    func hasFault(forRelationship relationship: RelationshipDescription) -> Bool {
        if pending.contains(relationship.ordinal) || isNew { return false }
        guard let snapshot else { return true }
        return !snapshot.isLoaded(relationship.ordinal)
    }

    // MARK: Lifecycle hooks

    /// Called once after the object is inserted into a context.
    open func awakeFromInsert() {}
    /// Called after the object's values are first loaded from its store.
    open func awakeFromFetch() {}
    /// Called before the object's changes are saved.
    open func willSave() {}
    /// Called after the object's changes are saved.
    open func didSave() {}
    /// Called when the object is deleted, before delete rules are applied.
    open func prepareForDeletion() {}
    /// Called before the object turns into a fault.
    open func willTurnIntoFault() {}
    /// Called after the object turned into a fault.
    open func didTurnIntoFault() {}

    // MARK: Validation

    /// Checks the object before its insert is saved; throws every failure at once.
    /// Overrides should call `super` and combine their own errors.
    open func validateForInsert() throws { try validateValues() }
    /// Checks the object before its update is saved; throws every failure at once.
    open func validateForUpdate() throws { try validateValues() }
    /// Checks the object may be deleted: no deny-rule relationship may have destinations left.
    open func validateForDelete() throws {
        var errors: [ObjectGraphError] = []
        for relationship in entity.denyRelationships {
            let ids = try currentValue(for: relationship).relationshipValue?.objectIDs ?? []
            let live = ids.filter { id in !(managedObjectContext?.registeredObject(for: id)?.isDeleted ?? false) }
            if !live.isEmpty {
                errors.append(ObjectGraphError(
                    .deleteDenied,
                    "Cannot delete \(entity.name) \(objectID): relationship \(relationship.name) (deny rule) still has \(live.count) object(s).",
                    entityName: entity.name, key: relationship.name, objectID: objectID))
            }
        }
        if let error = ObjectGraphError.combining(errors) { throw error }
    }

    /// The value and count checks of every property.
    func validateValues() throws {
        var errors: [ObjectGraphError] = []
        if entity.isAbstract {
            errors.append(ObjectGraphError(
                .invalidArgument, "Entity \(entity.name) is abstract and cannot have instances.",
                entityName: entity.name, objectID: objectID))
        }
        for property in entity.validatedProperties {
            let value = try currentValue(for: property)
            switch (property, value) {
            case (let attribute as AttributeDescription, .attribute(let v)):
                errors += attribute.validationErrors(for: v, entityName: entity.name, objectID: objectID)
            case (let relationship as RelationshipDescription, .relationship(let r)):
                errors += relationship.validationErrors(count: r.objectIDs.count, entityName: entity.name, objectID: objectID)
            default:
                break
            }
        }
        if let error = ObjectGraphError.combining(errors) { throw error }
    }

    // MARK: Faulting and stored values

    /// Loads the object's values from its store if it is a fault.
    func fulfillFault() throws {
        guard !isLoaded, !isNew else { return }
        guard let context = managedObjectContext else {
            throw ObjectGraphError(
                .objectInvalidated, "\(entity.name) \(objectID) is not in a context, so its values cannot be loaded.",
                entityName: entity.name, objectID: objectID)
        }
        if let batch = faultBatch.take(), let index = batch.index(of: objectID) {
            // The first of its batch to fire: the others' rows are read now, together.
            context.loadBatch(batch, around: index)
        }
        let generation = context.persistentStoreCoordinator?.saveGeneration.load(ordering: .acquiring) ?? 0
        // The fault's row, where it is: firing from it only marks the object loaded.
        if let readAt = Self.readAt(of: &committed) {
            if readAt.generation == generation, context.accepts(loadedAt: readAt.loadedAt) {
                isLoaded = true
                awakeFromFetch()
                return
            }
            committed = nil
        }
        let node: IncrementalStoreNode
        do {
            node = try context.fulfill(objectID)
        } catch let error as ObjectGraphError where error.code == .objectNotFound {
            context.objectWasInvalidated(self)
            throw error
        }
        fulfill(with: ObjectSnapshot(node: node, entity: entity, generation: generation, loadedAt: context.readTime))
    }

    /// When the row in `values` was read, looked at where it is (reading the field of a
    /// class's optional struct through a value copies the whole struct).
    private static func readAt(of values: inout ObjectSnapshot?) -> (generation: UInt64, loadedAt: Double)? {
        values?.readAt
    }

    /// Gives a fault the values of a row its store already read (the snapshot keeps when).
    func fulfill(with row: consuming ObjectSnapshot) {
        guard !isLoaded, !isNew else { return }
        committed = row
        isLoaded = true
        awakeFromFetch()
    }

    /// The committed value of a property, loading a relationship from the store if needed.
    func committedValue(for property: PropertyDescription) throws -> PropertyValue {
        try fulfillFault()
        // The loaded values, where they are (no accessor between).
        if isLoaded, let value = try committed?.value(for: property) { return value }
        guard let relationship = property as? RelationshipDescription else { return .attribute(.null) }
        if isNew { return .relationship(relationship.isToMany ? .toMany([]) : .toOne(nil)) }
        guard let context = managedObjectContext else {
            throw ObjectGraphError(.objectInvalidated, "\(objectID) is not in a context.", objectID: objectID)
        }
        let value = try context.fulfillRelationship(relationship, of: objectID)
        if isLoaded { committed?.set(.relationship(value), at: relationship.ordinal) }
        return .relationship(value)
    }

    /// The committed destinations of the to-many `relationship`, fired now with the rows their
    /// store reads along (``MemberRowsSource``), when they are the relationship's current value
    /// and nothing holds them yet: the object is not new, has no change of them (nor member
    /// changes recorded without loading), and has not loaded them. `nil` otherwise, and when
    /// the store does not read rows this way: ``currentValue(for:)`` answers then.
    func membersWithRows(
        of relationship: RelationshipDescription, in context: ManagedObjectContext
    ) throws -> (ids: [ManagedObjectID], rows: [ObjectSnapshot?])? {
        guard !relationship.isTransient, !pending.hasUnloadedMembers, !pending.contains(relationship.ordinal), !isNew else { return nil }
        try fulfillFault()
        guard isLoaded, committed?.isLoaded(relationship.ordinal) == false,
            let members = try context.fulfillToManyWithRows(relationship, of: objectID)
        else { return nil }
        committed?.set(.relationship(.toMany(members.ids)), at: relationship.ordinal)
        return members
    }

    /// The current value of an attribute: ``currentValue(for:)``'s attribute, read straight
    /// from the committed values (firing a fault first) when the attribute is stored and
    /// unchanged, as most reads are.
    func currentAttribute(for property: PropertyDescription) throws -> AttributeValue {
        if !property.isTransient, !inserted, !pending.contains(property.ordinal) {
            #if DEBUG
            managedObjectContext?.checkQueue("reading a value of a managed object")
            #endif
            if !isLoaded { try fulfillFault() }
            if isLoaded, let value = try Self.committedAttribute(in: &committed, at: property.ordinal) { return value }
        }
        return try currentValue(for: property).attributeValue ?? .null
    }

    /// The attribute at `ordinal` of `values`, read where they are (see ``readAt(of:)``).
    private static func committedAttribute(in values: inout ObjectSnapshot?, at ordinal: Int) throws -> AttributeValue? {
        try values?.attribute(at: ordinal)
    }

    /// The current value of a stored or transient property.
    func currentValue(for property: PropertyDescription) throws -> PropertyValue {
        #if DEBUG
        managedObjectContext?.checkQueue("reading a value of a managed object")
        #endif
        if property.isTransient, let attribute = property as? AttributeDescription {
            return .attribute(transientValues[property.ordinal] ?? attribute.defaultValue)
        }
        if let changed = changes[property.ordinal] { return changed }
        if isNew { return Self.initialValue(of: property) }
        return try committedValue(for: property)
    }

    /// Records a new value for a stored property, keeping ``changes`` minimal, and tells
    /// the context (unless `notify` is false, for primitive setters).
    func record(_ value: PropertyValue, for property: PropertyDescription, notify: Bool = true) throws {
        #if DEBUG
        managedObjectContext?.checkQueue("setting a value of a managed object")
        #endif
        if property.isTransient, case .attribute(let attribute) = value {
            let old = transientValues[property.ordinal] ?? .null
            transientValues[property.ordinal] = attribute
            if let context = managedObjectContext {
                if notify && context.recordsPropertyChanges { context.recordChange(of: self, property, .value(old: .attribute(old), new: value)) }
                context.objectDidChange(self, property: property, notify: notify)
            }
            return
        }
        let old = try currentValue(for: property)
        if sameValue(old, value, for: property) { return }
        // (A whole value replaces member changes recorded without loading; reading `old` loaded
        // them anyway.)
        if !isNew, let committed = try? committedValue(for: property), sameValue(committed, value, for: property) {
            pending.set(nil, for: property)
        } else {
            pending.reserve(entity.properties.count)
            pending.set(value, for: property)
        }
        if let context = managedObjectContext {
            if notify && context.recordsPropertyChanges { context.recordChange(of: self, property, .value(old: old, new: value)) }
            context.objectDidChange(self, property: property, notify: notify)
        }
    }

    /// Adds or removes one destination of a to-many relationship in place (constant time
    /// for unordered relationships) and tells the context. Returns whether it changed.
    ///
    /// With `deferringLoad` (inverse maintenance, where the other end says the member is there
    /// or not), a change to an unordered relationship whose committed members are not loaded
    /// is recorded without loading them (``UnloadedMembers``) and counts as a change.
    @discardableResult
    func changeMember(_ id: ManagedObjectID, of relationship: RelationshipDescription, adding: Bool, deferringLoad: Bool = false) throws -> Bool {
        let context = managedObjectContext
        if deferringLoad, let context, try recordWithoutLoading(id, of: relationship, adding: adding, in: context) {
            memberDidChange(id, of: relationship, adding: adding, orderedBefore: nil, in: context)
            return true
        }
        // Changed in place from here: member changes recorded without loading are applied to
        // the loaded members first.
        if pending.hasUnloadedMembers { loadUnloadedMembers() }
        if !pending.contains(relationship.ordinal) {
            if isNew {
                pending.set(Self.emptyValue(of: relationship), for: relationship)
            } else {
                let committed = try committedValue(for: relationship)
                // (Loaded now: the version is that of the row the members were read with.)
                if let version = snapshot?.version, case .relationship(.toMany(let ids)) = committed {
                    pending.setBase(ids, of: relationship, baseVersion: version)
                } else {
                    pending.set(committed, for: relationship)
                }
            }
        }
        // An ordered relationship's change is recorded (for undo) as its whole value: a member
        // removed from the middle must come back where it was.
        let orderedBefore = context?.recordsPropertyChanges == true && relationship.isOrdered ? pending[relationship.ordinal] : nil
        let changed = pending.updateMembers(of: relationship) { list in
            adding ? list.append(id) : list.remove(id)
        }
        if changed, let context { memberDidChange(id, of: relationship, adding: adding, orderedBefore: orderedBefore, in: context) }
        return changed
    }

    /// Records a member change for undo and tells the context.
    @inline(__always)
    private func memberDidChange(
        _ id: ManagedObjectID, of relationship: RelationshipDescription, adding: Bool, orderedBefore: PropertyValue?, in context: ManagedObjectContext
    ) {
        if context.recordsPropertyChanges {
            if let orderedBefore, let after = changes[relationship.ordinal] {
                context.recordChange(of: self, relationship, .value(old: orderedBefore, new: after))
            } else {
                context.recordChange(of: self, relationship, adding ? .members(added: [id], removed: []) : .members(added: [], removed: [id]))
            }
        }
        context.objectDidChange(self, property: relationship, notify: true)
    }

    /// Records a member change of an unordered relationship without loading its committed
    /// members, when they are not loaded and nothing else is pending for it (an object of a
    /// child context, a new object or one whose members are loaded or changed changes them
    /// in place). Fires the object's fault, for the row version the change is based on.
    /// Returns whether it recorded the change.
    private func recordWithoutLoading(
        _ id: ManagedObjectID, of relationship: RelationshipDescription, adding: Bool, in context: ManagedObjectContext
    ) throws -> Bool {
        let ordinal = relationship.ordinal
        guard !relationship.isOrdered, !isNew, context.parentContext == nil else { return false }
        if pending.recordIfUnloaded(id, at: ordinal, adding: adding) { return true }
        guard !pending.contains(ordinal) else { return false }
        if !isLoaded { try fulfillFault() }
        guard isLoaded, let version = Self.versionIfUnloaded(ordinal, in: &committed) else { return false }
        pending.reserve(entity.properties.count)
        pending.recordUnloaded(id, at: ordinal, adding: adding, baseVersion: version)
        return true
    }

    /// The version of `values` when the relationship at `ordinal` is not loaded in them, read
    /// where they are (no copy of the snapshot).
    private static func versionIfUnloaded(_ ordinal: Int, in values: inout ObjectSnapshot?) -> UInt64? {
        guard let loaded = values?.isLoaded(ordinal), !loaded else { return nil }
        return values?.version
    }

    /// Loads the committed members of each relationship whose changes were recorded without
    /// them and applies the changes, so that every slot holds a value. A relationship whose
    /// members cannot be read (the row is gone, the store fails) keeps the members added,
    /// without a base: a store saving the object then reads the row again and reports it.
    @inline(never)
    func loadUnloadedMembers() {
        // Taken out first: loading may read the object's changes again.
        for (ordinal, members) in pending.takeUnloaded() {
            let relationship = unsafeDowncast(entity.properties[ordinal], to: RelationshipDescription.self)
            var list: ObjectIDList
            if let value = try? committedValue(for: relationship), case .relationship(.toMany(let ids)) = value, let version = snapshot?.version {
                list = ObjectIDList(base: ids, ordered: false, baseVersion: version)
            } else {
                list = ObjectIDList([], ordered: false)
            }
            for member in members.removed.ids { list.remove(member) }
            for member in members.added.ids { list.append(member) }
            pending.setMembers(list, at: ordinal)
        }
    }

    /// Drops the pending values equal to the committed ones (to-many relationships stay
    /// pending when set back; an undo puts them back). Returns whether no change is left.
    func dropPendingValuesEqualToCommitted() -> Bool {
        guard !isNew, !pending.isEmpty else { return pending.isEmpty }
        var same: [PropertyDescription] = []
        // (Unloaded member changes stay, as a to-many change does.)
        pending.forEachChange({ ordinal, value in
            let property = entity.properties[ordinal]
            guard !property.isTransient, snapshot?.isLoaded(ordinal) == true || property.slotKind == .attribute,
                let committed = try? committedValue(for: property), sameValue(committed, value, for: property)
            else { return }
            same.append(property)
        }, unloaded: { _ in })
        for property in same { pending.set(nil, for: property) }
        return pending.isEmpty
    }

    /// Gives a new object its attributes' default values and empty relationships, as
    /// pending changes (a new object has nothing committed).
    func applyDefaultValues() {
        let entity = self.entity
        if pending.isEmpty {
            // A new object (the common case): the entity's initial values, copied whole.
            pending = entity.initialPendingChanges
            for attribute in entity.initialTransientAttributes where transientValues[attribute.ordinal] == nil {
                transientValues[attribute.ordinal] = attribute.defaultValue
            }
            return
        }
        pending.reserve(entity.properties.count)
        for property in entity.initialProperties {
            // The slot kind says which properties are attributes: no dynamic cast per property.
            if property.slotKind == .attribute {
                let attribute = unsafeDowncast(property, to: AttributeDescription.self)
                if attribute.isTransient {
                    if transientValues[attribute.ordinal] == nil { transientValues[attribute.ordinal] = attribute.defaultValue }
                } else if !pending.contains(attribute.ordinal) {
                    pending.set(.attribute(attribute.defaultValue), for: attribute)
                }
            } else if !pending.contains(property.ordinal) {
                pending.set(Self.emptyValue(of: property), for: property)
            }
        }
    }

    /// The value a property of a new object has before anything sets it: the attribute's
    /// default value, no destination, or no destinations.
    static func initialValue(of property: PropertyDescription) -> PropertyValue {
        if let attribute = property as? AttributeDescription { return .attribute(attribute.defaultValue) }
        return emptyValue(of: property)
    }

    static func emptyValue(of property: PropertyDescription) -> PropertyValue {
        switch property.slotKind {
        case .attribute: return .attribute(.null)
        case .toOne: return .relationship(.toOne(nil))
        case .toMany: return .relationship(.toMany([]))
        }
    }

    /// Makes the object a fault that keeps the row its values came from, if they came from a
    /// store's row (``ObjectSnapshot/asFaultRow(of:)``); its changes stay as they are.
    func keepRowAsFault() {
        guard isLoaded else { return }
        committed = committed?.asFaultRow(of: entity)
        isLoaded = false
    }

    /// Makes the object a fault again, dropping its values (and changes).
    func turnIntoFault() {
        willTurnIntoFault()
        // The row the values came from stays: firing the fault again reuses it while it is
        // fresh enough.
        keepRowAsFault()
        discardChanges()
        prefetchedDestinations = []
        transientValues = [:]
        transientChanged = false
        didTurnIntoFault()
    }

    /// Moves the current values into the snapshot after a successful save.
    func commitChanges() {
        if !isLoaded, !pending.hasUnloadedMembers {
            // Nothing committed before (a new object): the snapshot is made from the pending
            // values in one pass, not set slot by slot into an empty one.
            committed = ObjectSnapshot(entity: entity, slots: pending.committedSlots(count: entity.properties.count), version: 1)
            isLoaded = true
        } else {
            if !isLoaded {
                committed = ObjectSnapshot(entity: entity)
                isLoaded = true
            }
            Self.commit(pending, inserted: inserted, into: &committed)
        }
        pending.removeAll()
        inserted = false
        transientChanged = false
    }

    /// Drops every pending value without loading anything (rollback, refresh, reset).
    func discardChanges() {
        if !pending.isEmpty { pending.removeAll() }
    }

    /// Moves `changes` into `values`, where they are: a copy of the snapshot would copy its
    /// slots at the first change. A relationship changed without its members loaded is left
    /// unloaded, to be read from the store the save wrote.
    private static func commit(_ changes: PendingChanges, inserted: Bool, into values: inout ObjectSnapshot?) {
        // Never nil: a loaded object holds its values (``isLoaded``).
        changes.forEachChange({ ordinal, value in values!.set(value, at: ordinal) }, unloaded: { ordinal in values!.unload(at: ordinal) })
        values!.version = inserted ? 1 : values!.version + 1
        values!.readAt = nil
    }

    /// Replaces object IDs inside the snapshot and the changes (temporary to permanent).
    func replaceReferences(_ map: IDReplacements) {
        // Only relationships hold IDs: attribute slots are not looked at.
        let relationships = entity.relationships
        for relationship in relationships { pending.replaceReferences(map, atOrdinal: relationship.ordinal) }
        guard var committed = snapshot else { return }
        snapshot = nil
        for relationship in relationships where relationship.ordinal < committed.slots.count {
            let ordinal = relationship.ordinal
            switch committed.slots[ordinal] {
            case .relationship(.toOne(let id?))?:
                if let new = map[id] { committed.slots[ordinal] = .relationship(.toOne(new)) }
            case .relationship(.toMany(let ids))?:
                if map.replacesAny(of: ids) { committed.slots[ordinal] = .relationship(.toMany(ids.map { map.image(of: $0) })) }
            default:
                break
            }
        }
        snapshot = committed
    }
}

import Foundation

/// The persistent values of one object at one version, as a store returns them
/// from ``IncrementalStore/newValuesForObject(with:with:)`` (Core Data's
/// `NSIncrementalStoreNode`).
///
/// A node holds every stored attribute and may hold to-one relationships; a missing
/// to-one is fetched through ``IncrementalStore/newValue(forRelationship:forObjectWith:with:)``.
/// Versions start at 1 for a new row and grow by one per saved change.
///
/// Values are kept by property ordinal (``PropertyDescription/ordinal``) of the object's
/// entity; a store that builds its values in that order hands them over without a
/// dictionary with ``init(objectID:valuesByOrdinal:version:)``. The name-keyed
/// ``init(objectID:values:version:)`` and ``values`` remain for stores written against
/// Core Data's shape.
public struct IncrementalStoreNode: Sendable, Hashable {
    /// The object the values belong to.
    public let objectID: ManagedObjectID
    /// The row's version.
    public private(set) var version: UInt64
    /// Values by ordinal of `objectID.entity`; `nil` where the node holds nothing. Empty for
    /// a node whose values are all in ``lazyValues``.
    private(set) var slots: [PropertyValue?]
    /// Values decoded one property at a time on first read, for a node made from a row a
    /// store read (``init(objectID:lazyValues:version:)``); `nil` for a node of values.
    /// Exempt from the `Sendable` check: every ``LazyNodeValues`` is immutable (the row
    /// storage a store reads into cannot say so to the compiler).
    nonisolated(unsafe) package private(set) var lazyValues: (any LazyNodeValues)?

    /// Creates a node from values by property name; names the entity does not have are
    /// ignored.
    public init(objectID: ManagedObjectID, values: [String: PropertyValue], version: UInt64) {
        self.objectID = objectID
        self.version = version
        self.slots = Self.slots(from: values, entity: objectID.entity)
    }

    /// Creates a node whose values stay in `lazyValues` until read: an object that reads one
    /// property decodes one, not the whole row.
    package init(objectID: ManagedObjectID, lazyValues: any LazyNodeValues, version: UInt64) {
        self.objectID = objectID
        self.version = version
        self.slots = []
        self.lazyValues = lazyValues
    }

    /// Creates a node from values in the order of the entity's
    /// ``EntityDescription/properties`` (`nil` where the node holds nothing, such as a
    /// to-many relationship or a transient attribute). The array is kept as given: no
    /// dictionary is built.
    ///
    /// - Precondition: `valuesByOrdinal.count` is the entity's property count; a different
    ///   count is treated as holding nothing.
    public init(objectID: ManagedObjectID, valuesByOrdinal: [PropertyValue?], version: UInt64) {
        self.objectID = objectID
        self.version = version
        let count = objectID.entity.properties.count
        self.slots = valuesByOrdinal.count == count ? valuesByOrdinal : Array(filling: nil, count: count)
    }

    /// The values by property name.
    public var values: [String: PropertyValue] {
        var result: [String: PropertyValue] = [:]
        let properties = objectID.entity.properties
        for (ordinal, value) in decodedSlots.enumerated() where ordinal < properties.count {
            if let value { result[properties[ordinal].name] = value }
        }
        return result
    }

    /// Replaces the values and version.
    public mutating func update(withValues values: [String: PropertyValue], version: UInt64) {
        self.slots = Self.slots(from: values, entity: objectID.entity)
        self.lazyValues = nil
        self.version = version
    }

    /// The value for a property, if the node holds one.
    public func value(for property: PropertyDescription) -> PropertyValue? {
        let properties = objectID.entity.properties
        let ordinal = property.ordinal
        if ordinal >= 0, ordinal < properties.count, properties[ordinal] === property {
            return slot(ordinal)
        }
        guard let index = properties.firstIndex(where: { $0.name == property.name }) else { return nil }
        return slot(index)
    }

    /// The value at `ordinal`, decoded from ``lazyValues`` when it holds it; a value that does
    /// not decode reads as absent here (an object reading it gets the error).
    private func slot(_ ordinal: Int) -> PropertyValue? {
        if ordinal < slots.count, let value = slots[ordinal] { return value }
        return (try? lazyValues?.value(atOrdinal: ordinal)) ?? nil
    }

    /// Every slot, with lazily held values decoded.
    private var decodedSlots: [PropertyValue?] {
        guard lazyValues != nil else { return slots }
        return (0..<objectID.entity.properties.count).map(slot)
    }

    public static func == (a: IncrementalStoreNode, b: IncrementalStoreNode) -> Bool {
        a.objectID == b.objectID && a.version == b.version && a.decodedSlots == b.decodedSlots
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(objectID)
        hasher.combine(version)
    }

    /// The slots laid out for `entity` (shared when it is the node's own entity).
    func slots(in entity: EntityDescription) -> [PropertyValue?] {
        // Another entity object (another model's, say) may order its properties otherwise:
        // map by name then.
        if entity === objectID.entity { return decodedSlots }
        return Self.slots(from: values, entity: entity)
    }

    private static func slots(from values: [String: PropertyValue], entity: EntityDescription) -> [PropertyValue?] {
        var slots = [PropertyValue?](filling: nil, count: entity.properties.count)
        for (name, value) in values {
            guard let property = entity.propertiesByName[name] else { continue }
            // An attribute slot holds only an attribute value; a relationship slot its kind.
            switch (property.slotKind, value) {
            case (.attribute, .attribute), (.toOne, .relationship(.toOne)), (.toMany, .relationship(.toMany)):
                slots[property.ordinal] = value
            default:
                continue
            }
        }
        return slots
    }
}

/// Stored values a store decodes one property at a time, on first read (the bytes of a row it
/// read): a node made from them holds no decoded value until an object reads one. Values
/// hold no temporary ID (they come from the store).
///
/// A class, so that nodes and snapshots share it by reference (copying one is a retain).
///
/// Thread safety: a node is shared between contexts and threads, so an implementation is
/// immutable once made. (It is not declared `Sendable`, so that a store's row storage, a
/// `ManagedBuffer`, can be one.)
package protocol LazyNodeValues: AnyObject {
    /// The value of the property at `ordinal` of the node's entity; `nil` when the row does
    /// not hold it (a transient property, a to-many relationship stored outside the row).
    ///
    /// - Throws: the store's error when the stored value does not decode.
    func value(atOrdinal ordinal: Int) throws -> PropertyValue?
    /// The attribute at `ordinal` of the node's entity, `nil` when the row does not hold it:
    /// ``value(atOrdinal:)`` for a property known to be an attribute, without the property
    /// value around it (the read every attribute accessor makes).
    ///
    /// - Throws: the store's error when the stored value does not decode.
    func attribute(atOrdinal ordinal: Int) throws -> AttributeValue?
    /// Whether the row holds the property at `ordinal`, without decoding it.
    func holds(ordinal: Int) -> Bool
}

/// A store that reads the rows of a to-many relationship's destinations when the relationship
/// is fired to make its objects, as Core Data's SQLite store fetches the destination rows of a
/// to-many fault into its row cache: the destinations come back as faults holding their rows,
/// so firing each reads nothing.
package protocol MemberRowsSource: AnyObject {
    /// The stored destinations of the to-many `relationship` of `objectID` (what
    /// ``IncrementalStore/newValue(forRelationship:forObjectWith:with:)`` returns), with one entry
    /// per destination, in the same order: its row, or `nil` for one the store did not read (that
    /// fault reads its row when it fires, and reports any error then). `nil` when the store does
    /// not answer this way for `relationship` (the context then asks
    /// ``IncrementalStore/newValue(forRelationship:forObjectWith:with:)``).
    ///
    /// - Throws: what `newValue(forRelationship:forObjectWith:with:)` throws.
    func destinationsWithRows(
        of relationship: RelationshipDescription, for objectID: ManagedObjectID
    ) throws -> (ids: [ManagedObjectID], rows: [IncrementalStoreNode?])?

    /// The rows of the objects `ids` (permanent IDs of this store), read from one snapshot,
    /// with one entry per ID in the same order: its row, or `nil` for one the store did not
    /// read (missing, or a row that does not read: that fault reads its row when it fires, and
    /// reports any error then). `nil` when the store does not answer this way (the context
    /// then fetches the rows). What a fetch's prefetching reads for the destinations of a
    /// to-one relationship, and a batched fetch for a later batch, as Core Data's SQLite store
    /// reads them in one query.
    ///
    /// - Throws: the store's error when it cannot read at all (no engine, no snapshot).
    func rows(of ids: [ManagedObjectID]) throws -> [IncrementalStoreNode?]?
}

import Foundation

/// The persistent values of one object at one version, as a store returns them
/// from ``IncrementalStore/newValuesForObject(with:with:)`` (Core Data's
/// `NSIncrementalStoreNode`).
///
/// A node holds every stored attribute and may hold to-one relationships; a missing
/// to-one is fetched through ``IncrementalStore/newValue(forRelationship:forObjectWith:with:)``.
/// Versions start at 1 for a new row and grow by one per saved change.
public struct IncrementalStoreNode: Sendable, Hashable {
    /// The object the values belong to.
    public let objectID: ManagedObjectID
    /// The row's version.
    public private(set) var version: UInt64
    /// The values by property name.
    public private(set) var values: [String: PropertyValue]

    /// Creates a node.
    public init(objectID: ManagedObjectID, values: [String: PropertyValue], version: UInt64) {
        self.objectID = objectID
        self.values = values
        self.version = version
    }

    /// Replaces the values and version.
    public mutating func update(withValues values: [String: PropertyValue], version: UInt64) {
        self.values = values
        self.version = version
    }

    /// The value for a property, if the node holds one.
    public func value(for property: PropertyDescription) -> PropertyValue? {
        values[property.name]
    }
}

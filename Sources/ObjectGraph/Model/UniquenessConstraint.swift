/// One uniqueness constraint as the model resolved it: the attributes whose values, taken
/// together, no two objects may share, among the objects of the entity that declares it
/// (``EntityDescription/uniquenessConstraints``) and of its subentities.
package struct UniquenessConstraint: Sendable {
    /// The entity that declares the constraint: objects are held to it when they are of
    /// this entity or below it.
    package let scope: EntityDescription
    /// The constraint's position in the scope's ``EntityDescription/uniquenessConstraints``.
    package let index: Int
    /// The constrained attributes, in the declared order.
    package let attributes: [AttributeDescription]

    /// The attributes' names, as declared.
    package var names: [String] { attributes.map(\.name) }

    /// The value list an object's values give, or `nil` when one of them is null (a null
    /// is never a duplicate, as in SQL).
    package func values(_ value: (AttributeDescription) throws -> AttributeValue) rethrows -> [AttributeValue]? {
        var values: [AttributeValue] = []
        values.reserveCapacity(attributes.count)
        for attribute in attributes {
            let value = try value(attribute)
            if value.isNull { return nil }
            values.append(value)
        }
        return values
    }

    /// The constraint's identity: its scope and position there.
    package var key: Key { Key(scope: ObjectIdentifier(scope), index: index) }

    /// A constraint's identity, for dictionaries.
    package struct Key: Hashable, Sendable {
        let scope: ObjectIdentifier
        let index: Int
    }
}

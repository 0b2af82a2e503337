import Foundation

extension ManagedObject: FetchEvaluable {
    /// The value of an attribute; loads the object's values if it is a fault.
    ///
    /// - Throws: ``ObjectGraphError/Code/unknownKey`` for a key the entity does not have,
    ///   ``ObjectGraphError/Code/wrongValueType`` for a relationship (use ``object(forKey:)``
    ///   or ``objects(forKey:)``), and the store's error if the fault cannot be fulfilled.
    public func value(forKey key: String) throws -> AttributeValue {
        let property = try entity.property(named: key)
        guard property.slotKind == .attribute else {
            throw ObjectGraphError(
                .wrongValueType, "\(entity.name).\(key) is a relationship; use object(forKey:) or objects(forKey:).",
                entityName: entity.name, key: key, objectID: objectID)
        }
        return try currentAttribute(for: property)
    }

    /// The value of an attribute as a Swift type.
    ///
    /// For example: `let age = try person.value(forKey: "age", as: Int.self)`.
    ///
    /// - Throws: ``ObjectGraphError/Code/wrongValueType`` if the value does not convert.
    public func value<T: AttributeValueConvertible>(forKey key: String, as type: T.Type) throws -> T {
        let value = try value(forKey: key)
        guard let typed = T(attributeValue: value) else {
            throw ObjectGraphError(
                .wrongValueType, "\(entity.name).\(key) holds \(value.typeName), which is not \(T.self).",
                entityName: entity.name, key: key, objectID: objectID)
        }
        return typed
    }

    /// Sets an attribute, converting integers between widths when they fit.
    ///
    /// - Throws: ``ObjectGraphError/Code/unknownKey``, or
    ///   ``ObjectGraphError/Code/wrongValueType`` naming the entity, the key, the expected
    ///   and the actual type.
    public func setValue(_ value: AttributeValue, forKey key: String) throws {
        let property = try entity.property(named: key)
        guard let attribute = property as? AttributeDescription else {
            if value.isNull, let relationship = property as? RelationshipDescription, relationship.isToOne {
                return try setValue(nil as ManagedObject?, forKey: key)
            }
            throw ObjectGraphError(
                .wrongValueType, "\(entity.name).\(key) is a relationship, not an attribute; got \(value.typeName).",
                entityName: entity.name, key: key, objectID: objectID)
        }
        try checkWritable()
        try record(.attribute(try attribute.coerce(value, entityName: entity.name)), for: attribute)
    }

    /// Sets an attribute from a Swift value.
    public func setValue<T: AttributeValueConvertible>(_ value: T, forKey key: String) throws {
        try setValue(value.attributeValue, forKey: key)
    }

    /// Decodes a transformable attribute into a `Codable` type; `nil` when the value is null.
    public func value<T: Decodable>(forKey key: String, decoding type: T.Type) throws -> T? {
        try value(forKey: key).decoded(as: T.self)
    }

    /// Encodes a `Codable` value into a transformable attribute.
    public func setValue<T: Encodable>(encoding value: T, forKey key: String) throws {
        try setValue(try AttributeValue.transformable(encoding: value), forKey: key)
    }

    /// Checks a value against an attribute's type and rules without setting it.
    ///
    /// - Throws: ``ObjectGraphError/Code/unknownKey``, ``ObjectGraphError/Code/wrongValueType``,
    ///   or the rule's validation error (several combined into one).
    public func validateValue(_ value: AttributeValue, forKey key: String) throws {
        guard let attribute = entity.attributesByName[key] else {
            throw ObjectGraphError(.unknownKey, "Entity \(entity.name) has no attribute \"\(key)\".", entityName: entity.name, key: key)
        }
        let converted = try attribute.coerce(value, entityName: entity.name)
        let errors = attribute.validationErrors(for: converted, entityName: entity.name, objectID: objectID)
        if let error = ObjectGraphError.combining(errors) { throw error }
    }

    /// The destination of a to-one relationship.
    public func object(forKey key: String) throws -> ManagedObject? {
        let relationship = try relationship(named: key, toMany: false)
        guard case .relationship(.toOne(let id?)) = try currentValue(for: relationship) else { return nil }
        return try resolve(id)
    }

    /// The destination of a to-one relationship as a subclass.
    ///
    /// - Throws: ``ObjectGraphError/Code/wrongValueType`` if the destination is not a `T`.
    public func object<T: ManagedObject>(forKey key: String, as type: T.Type) throws -> T? {
        guard let object = try object(forKey: key) else { return nil }
        guard let typed = object as? T else {
            throw ObjectGraphError(
                .wrongValueType, "\(entity.name).\(key) holds a \(Swift.type(of: object)), not \(T.self).",
                entityName: entity.name, key: key, objectID: objectID)
        }
        return typed
    }

    /// The destinations of a to-many relationship as a subclass.
    ///
    /// - Throws: ``ObjectGraphError/Code/wrongValueType`` if a destination is not a `T`.
    public func objects<T: ManagedObject>(forKey key: String, as type: T.Type) throws -> [T] {
        try objects(forKey: key).map { object in
            guard let typed = object as? T else {
                throw ObjectGraphError(
                    .wrongValueType, "\(entity.name).\(key) holds a \(Swift.type(of: object)), not \(T.self).",
                    entityName: entity.name, key: key, objectID: objectID)
            }
            return typed
        }
    }

    /// The destinations of a to-many relationship, in order for ordered relationships.
    public func objects(forKey key: String) throws -> [ManagedObject] {
        let relationship = try relationship(named: key, toMany: true)
        if let context = managedObjectContext, let members = try membersWithRows(of: relationship, in: context) {
            // Fired now, with the destinations' rows read along: faults holding their rows.
            return context.objects(for: members.ids, rows: members.rows)
        }
        let ids = try currentValue(for: relationship).relationshipValue?.objectIDs ?? []
        guard let context = managedObjectContext, ids.count > 1 else { return try ids.map(resolve) }
        // The destinations' rows are registered with their store in one call, not one each.
        return context.withRegistrationBatch { ids.map { context.object(with: $0) } }
    }

    /// The destination IDs of any relationship, without creating the objects.
    public func objectIDs(forRelationshipNamed key: String) throws -> [ManagedObjectID] {
        guard let relationship = entity.relationshipsByName[key] else {
            throw ObjectGraphError(.unknownKey, "Entity \(entity.name) has no relationship \"\(key)\".", entityName: entity.name, key: key)
        }
        return try currentValue(for: relationship).relationshipValue?.objectIDs ?? []
    }

    /// Sets a to-one relationship (or an attribute to null when `object` is `nil`), and
    /// updates the inverse relationship on both the old and the new destination.
    ///
    /// - Throws: ``ObjectGraphError/Code/wrongValueType`` if the object's entity is not
    ///   the destination entity, ``ObjectGraphError/Code/wrongContext`` if it belongs to
    ///   another context.
    public func setValue(_ object: ManagedObject?, forKey key: String) throws {
        let property = try entity.property(named: key)
        if object == nil, property is AttributeDescription { return try setValue(AttributeValue.null, forKey: key) }
        let relationship = try relationship(named: key, toMany: false)
        try checkWritable()
        try checkDestination(object, of: relationship)
        try setToOne(object?.objectID, for: relationship, maintainInverse: true)
    }

    /// Replaces the destinations of a to-many relationship and updates inverses.
    public func setValue(_ objects: [ManagedObject], forKey key: String) throws {
        let relationship = try relationship(named: key, toMany: true)
        try checkWritable()
        for object in objects { try checkDestination(object, of: relationship) }
        let old = try currentValue(for: relationship).relationshipValue?.objectIDs ?? []
        let new = Self.distinct(objects.map(\.objectID))
        try record(.relationship(.toMany(new)), for: relationship)
        // A few IDs are searched, more are hashed: a set costs hundreds of instructions to
        // make, more than searching a short list (the usual to-many set at insert).
        let newSet = new.count > Self.searchedIDCount ? Set(new) : nil
        let oldSet = old.count > Self.searchedIDCount ? Set(old) : nil
        for id in old where !(newSet?.contains(id) ?? new.contains(id)) { try inverseRemove(id, relationship) }
        for id in new where !(oldSet?.contains(id) ?? old.contains(id)) { try inverseAdd(id, relationship) }
    }

    /// The most IDs searched one by one rather than hashed into a set.
    static let searchedIDCount = 16

    /// `ids` without repeats, in order (the first of each kept).
    static func distinct(_ ids: [ManagedObjectID]) -> [ManagedObjectID] {
        if ids.count <= searchedIDCount {
            var kept: [ManagedObjectID] = []
            kept.reserveCapacity(ids.count)
            for id in ids where !kept.contains(id) { kept.append(id) }
            return kept
        }
        var seen = Set<ManagedObjectID>(minimumCapacity: ids.count)
        return ids.filter { seen.insert($0).inserted }
    }

    /// Adds an object to a to-many relationship and updates the inverse.
    public func addObject(_ object: ManagedObject, toRelationship key: String) throws {
        let relationship = try relationship(named: key, toMany: true)
        try checkWritable()
        try checkDestination(object, of: relationship)
        guard try changeMember(object.objectID, of: relationship, adding: true) else { return }
        try inverseAdd(object.objectID, relationship)
    }

    /// Removes an object from a to-many relationship and updates the inverse.
    public func removeObject(_ object: ManagedObject, fromRelationship key: String) throws {
        let relationship = try relationship(named: key, toMany: true)
        try checkWritable()
        guard try changeMember(object.objectID, of: relationship, adding: false) else { return }
        try inverseRemove(object.objectID, relationship)
    }

    /// The value at a dotted key path (`department.name`), following relationships;
    /// `self` names the object itself.
    public func value(forKeyPath keyPath: String) throws -> FetchValue {
        try fetchValue(forKeyPath: keyPath)
    }

    /// The value at a dotted key path, for predicates and sort descriptors.
    public func fetchValue(forKeyPath keyPath: String) throws -> FetchValue {
        let (head, rest) = Self.split(keyPath)
        if head == "self" || head == "SELF" {
            return rest == nil ? .object(objectID) : try fetchValue(forKeyPath: rest ?? "")
        }
        let property = try entity.property(named: head)
        if rest == nil, property.slotKind == .attribute { return .attribute(try currentAttribute(for: property)) }
        let value = try currentValue(for: property)
        switch value {
        case .attribute(let attribute):
            if let rest {
                throw ObjectGraphError(
                    .unknownKey, "\(entity.name).\(head) is an attribute; key path continues with \"\(rest)\".",
                    entityName: entity.name, key: keyPath)
            }
            return .attribute(attribute)
        case .relationship(.toOne(let id)):
            guard let id else { return .null }
            guard let rest else { return .object(id) }
            return try resolve(id).fetchValue(forKeyPath: rest)
        case .relationship(.toMany(let ids)):
            guard let rest else { return .collection(ids.map(FetchValue.object)) }
            return .collection(try ids.map { try resolve($0).fetchValue(forKeyPath: rest) })
        }
    }

    /// The value at a key path of another object of this object's context (a
    /// relationship destination), for subqueries and variables such as `$x.name`.
    public func fetchValue(forKeyPath keyPath: String, ofObject objectID: ManagedObjectID) throws -> FetchValue {
        try resolve(objectID).fetchValue(forKeyPath: keyPath)
    }

    // MARK: Primitive accessors

    /// The current value of an attribute without change notification; `nil` for an
    /// unknown key or a relationship.
    public func primitiveValue(forKey key: String) -> AttributeValue? {
        guard let attribute = entity.attributesByName[key] else { return nil }
        return try? currentAttribute(for: attribute)
    }

    /// Sets an attribute without change tracking (Core Data's primitive setter): no change
    /// notification, no undo, and the context does not count the object as updated for it. The
    /// value is saved with the object's next tracked change; a primitive change alone is not.
    public func setPrimitiveValue(_ value: AttributeValue, forKey key: String) throws {
        guard let attribute = entity.attributesByName[key] else {
            throw ObjectGraphError(.unknownKey, "Entity \(entity.name) has no attribute \"\(key)\".", entityName: entity.name, key: key)
        }
        try record(.attribute(try attribute.coerce(value, entityName: entity.name)), for: attribute, notify: false)
    }

    // MARK: Helpers

    /// The first name of a dotted key path and the rest, if any.
    static func split(_ keyPath: String) -> (String, String?) {
        // On the UTF-8 bytes: a short key path's are on the stack, and each part is made from
        // its bytes without a substring (a dot is never part of a multi-byte character).
        var bytes = keyPath
        let parts = bytes.withUTF8 { bytes -> (String, String)? in
            guard let dot = bytes.firstIndex(of: UInt8(ascii: ".")) else { return nil }
            return (
                String(decoding: UnsafeBufferPointer(rebasing: bytes[..<dot]), as: UTF8.self),
                String(decoding: UnsafeBufferPointer(rebasing: bytes[(dot + 1)...]), as: UTF8.self)
            )
        }
        return parts ?? (keyPath, nil)
    }

    func relationship(named key: String, toMany: Bool) throws -> RelationshipDescription {
        let property = try entity.property(named: key)
        guard let relationship = property as? RelationshipDescription else {
            throw ObjectGraphError(
                .wrongValueType, "\(entity.name).\(key) is an attribute, not a relationship; use value(forKey:).",
                entityName: entity.name, key: key, objectID: objectID)
        }
        guard relationship.isToMany == toMany else {
            throw ObjectGraphError(
                .wrongValueType,
                "\(entity.name).\(key) is a \(relationship.isToMany ? "to-many" : "to-one") relationship; use \(relationship.isToMany ? "objects(forKey:)/setValue(_: [ManagedObject], forKey:)" : "object(forKey:)/setValue(_: ManagedObject?, forKey:)").",
                entityName: entity.name, key: key, objectID: objectID)
        }
        return relationship
    }

    func resolve(_ id: ManagedObjectID) throws -> ManagedObject {
        guard let context = managedObjectContext else {
            throw ObjectGraphError(
                .objectInvalidated, "\(entity.name) \(objectID) is not in a context, so its relationships cannot be followed.",
                entityName: entity.name, objectID: objectID)
        }
        return context.object(with: id)
    }

    func checkWritable() throws {
        if managedObjectContext == nil && !inserted && snapshot != nil {
            throw ObjectGraphError(
                .objectInvalidated, "\(entity.name) \(objectID) was removed from its context and cannot change.",
                entityName: entity.name, objectID: objectID)
        }
    }

    func checkDestination(_ object: ManagedObject?, of relationship: RelationshipDescription) throws {
        guard let object else { return }
        if let destination = relationship.destinationEntity, !object.entity.isKind(of: destination) {
            throw ObjectGraphError(
                .wrongValueType,
                "\(entity.name).\(relationship.name) expects \(destination.name), got \(object.entity.name).",
                entityName: entity.name, key: relationship.name, objectID: objectID)
        }
        guard let context = managedObjectContext, object.managedObjectContext === context else {
            throw ObjectGraphError(
                .wrongContext,
                "\(entity.name).\(relationship.name): both objects must be in the same context to be related.",
                entityName: entity.name, key: relationship.name, objectID: objectID)
        }
    }
}

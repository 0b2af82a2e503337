import Foundation

extension InMemoryStore {
    /// A stored row seen through ``FetchEvaluable``, following relationships to other
    /// rows of the same snapshot.
    struct RowView: FetchEvaluable {
        let reference: Int64
        let entity: EntityDescription
        let database: Database
        let store: InMemoryStore
        let model: ManagedObjectModel

        /// A view of the row `reference`, or `nil` if it does not exist or its entity is
        /// not in the model.
        init?(reference: Int64, database: Database, store: InMemoryStore, model: ManagedObjectModel) {
            guard let row = database.rows[reference], let entity = model.entitiesByName[row.entityName] else { return nil }
            self.row = row
            self.reference = reference
            self.entity = entity
            self.database = database
            self.store = store
            self.model = model
        }

        /// The row itself, looked up once.
        let row: Row

        var objectID: ManagedObjectID { store.newObjectID(for: entity, referenceObject: .int64(reference)) }

        func fetchValue(forKeyPath keyPath: String) throws -> FetchValue {
            let (head, rest) = ManagedObject.split(keyPath)
            if head == "self" || head == "SELF" {
                return rest == nil ? .object(objectID) : try fetchValue(forKeyPath: rest ?? "")
            }
            let property = try entity.property(named: head)
            let stored = property.ordinal < row.slots.count ? row.slots[property.ordinal] : nil
            switch stored {
            case .attribute(let value)?:
                if let rest {
                    throw ObjectGraphError(.unknownKey, "\(entity.name).\(head) is an attribute; key path continues with \"\(rest)\".", entityName: entity.name, key: keyPath)
                }
                return .attribute(value)
            case .relationship(.toOne(let id))?:
                guard let id else { return .null }
                guard let rest else { return .object(id) }
                return try view(of: id)?.fetchValue(forKeyPath: rest) ?? .null
            case .relationship(.toMany(let ids))?:
                guard let rest else { return .collection(ids.map(FetchValue.object)) }
                return .collection(try ids.compactMap { try view(of: $0)?.fetchValue(forKeyPath: rest) })
            case nil:
                if let relationship = property as? RelationshipDescription {
                    if rest != nil || relationship.isToOne { return relationship.isToMany ? .collection([]) : .null }
                    return .collection([])
                }
                if let attribute = property as? AttributeDescription, attribute.isTransient {
                    throw ObjectGraphError(.unknownKey, "Transient attribute \(entity.name).\(head) is not stored and cannot be fetched on.", entityName: entity.name, key: keyPath)
                }
                return .null
            }
        }

        func fetchValue(forKeyPath keyPath: String, ofObject objectID: ManagedObjectID) throws -> FetchValue {
            try view(of: objectID)?.fetchValue(forKeyPath: keyPath) ?? .null
        }

        private func view(of id: ManagedObjectID) -> RowView? {
            guard id.storeIdentifier == store.identifier, case .int64(let reference)? = id.referenceObject else { return nil }
            return RowView(reference: reference, database: database, store: store, model: model)
        }
    }
}

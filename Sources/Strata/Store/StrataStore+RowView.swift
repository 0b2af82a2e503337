import ObjectGraph
import StrataEngine

extension StrataStore {
    /// Rows read from one engine snapshot, decoded once each.
    final class RowSource {
        let snapshot: Snapshot
        let store: StrataStore
        let model: ManagedObjectModel
        private var decoded: [[UInt8]: StoredRow] = [:]

        init(snapshot: Snapshot, store: StrataStore, model: ManagedObjectModel) {
            self.snapshot = snapshot
            self.store = store
            self.model = model
        }

        /// The row of `reference` in the hierarchy rooted at `root`, or `nil`.
        func row(root: String, reference: Int64) throws -> StoredRow? {
            let key = KeyLayout.rowKey(root: root, reference: reference)
            if let row = decoded[key] { return row }
            guard let bytes = try mappingEngineErrors("read a row", { () throws(StoreError) in try snapshot.get(key) }) else { return nil }
            let row = try StoredRow.decode(bytes, context: "row \(root) #\(reference)")
            decoded[key] = row
            return row
        }

        func remember(_ row: StoredRow, key: [UInt8]) { decoded[key] = row }

        /// The object ID of a stored reference, or `nil` if its entity is not in the model.
        func objectID(entity: String, reference: Int64) -> ManagedObjectID? {
            guard let description = model.entitiesByName[entity] else { return nil }
            return store.newObjectID(for: description, referenceObject: .int64(reference))
        }

        func view(of id: ManagedObjectID) throws -> RowView? {
            guard id.storeIdentifier == store.identifier, case .int64(let reference)? = id.referenceObject else { return nil }
            let root = StrataStore.root(of: id.entity).name
            guard let row = try row(root: root, reference: reference), let entity = model.entitiesByName[row.entity] else { return nil }
            return RowView(reference: reference, row: row, entity: entity, source: self)
        }
    }

    /// A stored row seen through ``FetchEvaluable``, following relationships to other rows of
    /// the same snapshot: predicates and sorts are evaluated without making objects.
    struct RowView: FetchEvaluable {
        let reference: Int64
        let row: StoredRow
        let entity: EntityDescription
        let source: RowSource

        var objectID: ManagedObjectID { source.store.newObjectID(for: entity, referenceObject: .int64(reference)) }

        func fetchValue(forKeyPath keyPath: String) throws -> FetchValue {
            let head: String, rest: String?
            if let dot = keyPath.firstIndex(of: ".") {
                head = String(keyPath[..<dot])
                rest = String(keyPath[keyPath.index(after: dot)...])
            } else {
                head = keyPath
                rest = nil
            }
            if head == "self" || head == "SELF" {
                return rest == nil ? .object(objectID) : try fetchValue(forKeyPath: rest ?? "")
            }
            let property = try entity.property(named: head)
            if let attribute = property as? AttributeDescription {
                if let rest {
                    throw ObjectGraphError(.unknownKey, "\(entity.name).\(head) is an attribute; key path continues with \"\(rest)\".", entityName: entity.name, key: keyPath)
                }
                if attribute.isTransient {
                    throw ObjectGraphError(.unknownKey, "Transient attribute \(entity.name).\(head) is not stored and cannot be fetched on.", entityName: entity.name, key: keyPath)
                }
                return .attribute(row.attributes[head] ?? .null)
            }
            guard let relationship = property as? RelationshipDescription else { return .null }
            if relationship.isToOne {
                guard let target = row.toOne[head] ?? nil, let id = source.objectID(entity: target.entity, reference: target.reference) else { return .null }
                guard let rest else { return .object(id) }
                return try source.view(of: id)?.fetchValue(forKeyPath: rest) ?? .null
            }
            let ids = (row.toMany[head] ?? []).compactMap { source.objectID(entity: $0.entity, reference: $0.reference) }
            guard let rest else { return .collection(ids.map(FetchValue.object)) }
            return .collection(try ids.compactMap { try source.view(of: $0)?.fetchValue(forKeyPath: rest) })
        }

        /// A key path of another row of the same snapshot (subqueries, `$x.name`).
        func fetchValue(forKeyPath keyPath: String, ofObject objectID: ManagedObjectID) throws -> FetchValue {
            try source.view(of: objectID)?.fetchValue(forKeyPath: keyPath) ?? .null
        }
    }
}

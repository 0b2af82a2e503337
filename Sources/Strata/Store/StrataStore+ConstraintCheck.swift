import Foundation
import ObjectGraph
import StrataEngine

extension StrataStore {
    /// [MIG-1] Refuses the lightweight migration `plan` of the store in `snapshot`, whose model
    /// record is `record`, when a uniqueness constraint the new model declares and the store's
    /// model did not is broken by rows the store holds: two rows of the constraint's entity (or
    /// of entities below it) with the same values for its attributes, none of them null. As
    /// Core Data, which fails such a migration ("constraint violation during attempted
    /// migration", `NSMigrationError`) and leaves the store as it was.
    ///
    /// A constraint counts as declared before when the entity it maps from declared the same
    /// attributes (by the names they map from) in one constraint. Reads the rows of the key
    /// spaces of new constraints only, each row's constrained attributes decoded.
    ///
    /// - Throws: `ObjectGraphError/Code/migrationFailed` naming the entity, the constraint's
    ///   attributes and the values two rows share.
    static func refuseBrokenNewConstraints(of plan: LightweightMigration, from record: ModelRecord, to model: ManagedObjectModel, in snapshot: Snapshot, url: URL?) throws {
        let source = record.current.model
        let counts = ((try? recordIfReadable(in: snapshot)) ?? nil)?.rowCounts ?? [:]
        for entity in model.entities {
            for names in entity.uniquenessConstraints {
                guard let entityMapping = plan.mapping.mapping(ofDestinationEntity: entity.name),
                    let old = entityMapping.sourceEntityName.flatMap({ source.entitiesByName[$0] })
                else { continue }
                let sourceNames = names.map { entityMapping.propertyMapping(named: $0)?.sourcePropertyName }
                if old.uniquenessConstraints.contains(where: { $0.map(Optional.some) == sourceNames }) { continue }
                // The rows the set will hold, by the metadata's counts: reserved, not grown
                // (bounded: the counts are the file's word, not a promise).
                let rows = min(1 << 22, old.selfAndAllSubentities.reduce(0) { $0 + max(0, min(1 << 22, counts[$1.name] ?? 0)) })
                try refuseDuplicates(
                    of: names, on: entity, keySpace: record.keySpace(ofRoot: old.rootEntityName), rows: rows, layout: plan.layout, in: snapshot, url: url)
            }
        }
    }

    /// Throws when two rows of key space `root` whose entities are `entity` or below it hold
    /// equal, non-null values for every attribute of `names`, read through `layout`; `rows`
    /// is how many such rows the metadata counts.
    private static func refuseDuplicates(
        of names: [String], on entity: EntityDescription, keySpace root: String, rows: Int, layout: StoreLayout, in snapshot: Snapshot, url: URL?
    ) throws {
        // One attribute, the usual case, hashes its value alone.
        var seenSingle = Set<AttributeValue>(minimumCapacity: names.count == 1 ? rows : 0)
        var seenLists = Set<[AttributeValue]>(minimumCapacity: names.count == 1 ? 0 : rows)
        var duplicate: [AttributeValue]? = nil
        let scratch = layout.hasLegacy ? RowScratch() : nil
        // Per entity number: the ordinals of the constrained attributes, or nil when the
        // entity is not under the constraint's.
        var ordinalsOfNumber: [UInt16: [Int]?] = [:]
        try forEachView(in: snapshot, from: KeyLayout.rowPrefix(root: root), to: KeyLayout.rowPrefixEnd(root: root), reading: "scan \(root) rows") { key, value in
            guard let reference = KeyLayout.reference(fromKeyBytes: key), !layout.isRetiredRow(value) else { return true }
            let row = try RowFields(value, store: layout, context: .key(root: root, reference: reference), readByEngine: true, scratch: scratch)
            let ordinals: [Int]?
            if let known = ordinalsOfNumber[row.entityNumber] {
                ordinals = known
            } else {
                if let rowEntity = layout.entity(number: row.entityNumber), rowEntity.isKind(of: entity) {
                    ordinals = names.compactMap { rowEntity.attributesByName[$0]?.ordinal }
                } else {
                    ordinals = nil
                }
                ordinalsOfNumber[row.entityNumber] = .some(ordinals)
            }
            guard let ordinals, ordinals.count == names.count else { return true }
            if ordinals.count == 1 {
                guard let value = try row.attribute(atOrdinal: ordinals[0]), !value.isNull else { return true }
                if !seenSingle.insert(value).inserted {
                    duplicate = [value]
                    return false
                }
            } else {
                var values: [AttributeValue] = []
                values.reserveCapacity(ordinals.count)
                for ordinal in ordinals {
                    guard let value = try row.attribute(atOrdinal: ordinal), !value.isNull else { return true }
                    values.append(value)
                }
                if !seenLists.insert(values).inserted {
                    duplicate = values
                    return false
                }
            }
            return true
        }
        guard let duplicate else { return }
        let shared = zip(names, duplicate).map { "\($0) = \($1)" }.joined(separator: ", ")
        throw ObjectGraphError(
            .migrationFailed,
            "Cannot migrate the StrataStore at \(url?.path ?? "(no URL)"): constraint violation during attempted migration. The model adds the uniqueness constraint (\(names.joined(separator: ", "))) to \(entity.name), and objects of \(entity.name) in the store share \(shared). Nothing was written; remove or change the duplicates with the store's model first (or migrate with a custom stage that does).",
            entityName: entity.name, key: names.first)
    }
}

/// What one save means for uniqueness constraints (``EntityDescription/uniquenessConstraints``),
/// for the stores that enforce them: the value lists the save's objects will hold, and the
/// conflicts those make with each other and with the rows in the store.
///
/// A store makes it before taking its lock (reading objects' values may fire faults), looks
/// each ``Probe``'s values up in its rows under the lock, in the save's transaction
/// (``findings(holders:)``), and, if anything was found, writes nothing and throws
/// ``conflicts(_:)`` once the lock is let go.
package struct UniquenessCheck {
    /// One value list of one constraint that objects of the save will hold.
    package struct Probe {
        /// The constraint.
        package let constraint: UniquenessConstraint
        /// The values, in the order of the constraint's attributes (none is null).
        package let values: [AttributeValue]
        /// The objects of the save that will hold the values.
        package fileprivate(set) var objects: [ManagedObject]
    }

    /// A conflict found under the store's lock: a probe, and the stored row that holds its
    /// values already (`nil`: the conflict is between the save's objects).
    package struct Finding {
        let probe: Int
        let holder: IncrementalStoreNode?
    }

    /// Every value list the save's objects will hold, one probe each.
    package private(set) var probes: [Probe] = []
    /// Per constraint, the objects whose stored rows stop holding their values for it: the
    /// deleted ones, and the updated ones whose values for it change.
    private var leaving: [UniquenessConstraint.Key: Set<ManagedObjectID>] = [:]
    /// The deleted objects: their rows hold nothing after the save.
    private var deleted: Set<ManagedObjectID> = []

    /// Reads the values of the save's inserted and updated objects for their entities'
    /// constraints. An updated object counts for a constraint only when its values for it
    /// change. Cheap when no entity of the save is constrained.
    package init(_ request: SaveChangesRequest) throws {
        var positions: [ProbeKey: Int] = [:]
        func add(_ object: ManagedObject, _ constraint: UniquenessConstraint, _ values: [AttributeValue]) {
            let key = ProbeKey(constraint: constraint.key, values: values)
            if let position = positions[key] {
                probes[position].objects.append(object)
            } else {
                positions[key] = probes.count
                probes.append(Probe(constraint: constraint, values: values, objects: [object]))
            }
        }
        for object in request.insertedObjects ?? [] where !object.entity.constraints.isEmpty {
            for constraint in object.entity.constraints {
                if let values = try constraint.values({ try object.currentValue(for: $0).attributeValue ?? .null }) {
                    add(object, constraint, values)
                }
            }
        }
        for object in request.updatedObjects ?? [] where !object.entity.constraints.isEmpty {
            for constraint in object.entity.constraints where constraint.attributes.contains(where: { object.hasChange(atOrdinal: $0.ordinal) }) {
                let new = try constraint.values { try object.currentValue(for: $0).attributeValue ?? .null }
                let old = try constraint.values { try object.committedValue(for: $0).attributeValue ?? .null }
                guard new != old else { continue }
                leaving[constraint.key, default: []].insert(object.objectID)
                if let new { add(object, constraint, new) }
            }
        }
        guard !probes.isEmpty else { return }
        for object in request.deletedObjects ?? [] { deleted.insert(object.objectID) }
    }

    /// Whether the save gives no constrained values: nothing to look up.
    package var isEmpty: Bool { probes.isEmpty }

    /// Under the store's lock: the conflicts, given for each probe the rows of the store
    /// (their nodes) that hold its values now, of the constraint's scope or below it. Rows
    /// the save deletes, or whose values for the constraint it changes, do not count.
    package func findings(holders: (Probe) throws -> [IncrementalStoreNode]) rethrows -> [Finding] {
        var findings: [Finding] = []
        for (index, probe) in probes.enumerated() {
            let leavingRows = leaving[probe.constraint.key] ?? []
            let holder = try holders(probe).first { node in
                !deleted.contains(node.objectID) && !leavingRows.contains(node.objectID)
                    && !probe.objects.contains { $0.objectID == node.objectID }
            }
            if holder != nil || probe.objects.count > 1 { findings.append(Finding(probe: index, holder: holder)) }
        }
        return findings
    }

    /// The records of `findings`, made with no lock held (they read the objects' committed
    /// values): with a stored row, one conflict per object of the save that duplicates it;
    /// without, one conflict for the objects that share the values.
    package func conflicts(_ findings: [Finding]) -> [ConstraintConflict] {
        var conflicts: [ConstraintConflict] = []
        for finding in findings {
            let probe = probes[finding.probe]
            let names = probe.constraint.names
            let values = Dictionary(uniqueKeysWithValues: zip(names, probe.values))
            if let holder = finding.holder {
                let snapshot = MergeConflict.snapshot(of: holder, entity: holder.objectID.entity)
                for object in probe.objects {
                    conflicts.append(ConstraintConflict(
                        constraint: names, constraintValues: values, databaseObjectID: holder.objectID,
                        databaseSnapshot: snapshot, conflictingObjects: [object]))
                }
            } else {
                conflicts.append(ConstraintConflict(
                    constraint: names, constraintValues: values, databaseObjectID: nil, databaseSnapshot: nil,
                    conflictingObjects: probe.objects))
            }
        }
        return conflicts
    }

    /// A probe's identity: the constraint and the values.
    private struct ProbeKey: Hashable {
        let constraint: UniquenessConstraint.Key
        let values: [AttributeValue]
    }
}

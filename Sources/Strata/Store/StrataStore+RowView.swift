import ObjectGraph
import StrataEngine

extension StrataStore {
    /// Rows read from one engine snapshot, each checked once and read in place.
    ///
    /// Thread safety: one fetch, on one thread, owns a row source; its caches are read and
    /// written by that fetch only (so they skip dynamic exclusivity checks).
    final class RowSource {
        let snapshot: Snapshot
        let store: StrataStore
        let layout: StoreLayout
        /// Makes the object IDs of rows and destinations, with no lock per ID.
        let ids: ObjectIDMaker
        /// Rows read, by reference (references are unique in a store, [KEY-3]), with the
        /// hierarchy they were read from.
        @exclusivity(unchecked) private var rows: [Int64: (root: String, row: RowBytes)] = [:]
        /// Point reads of `snapshot`, sharing decompressed blocks and WAL windows.
        @exclusivity(unchecked) private var reader: Snapshot.Reader

        /// The store layout and ID maker every row read here keeps for its node.
        let values: RowStorage.Values
        /// The maker of the IDs of the entity whose ID was made last: a fetch's rows are
        /// mostly of one entity, whose home is then found once.
        @exclusivity(unchecked) private var lastIDs: EntityIDMaker?

        /// The node of a row this source read: ``StrataStore/node(from:objectID:layout:ids:)``
        /// with this source's layout and ID maker (a row read for a node is its values, so the
        /// node costs the ID and a retain of the row).
        func node(of view: RowView) -> IncrementalStoreNode {
            store.node(from: view.row, objectID: id(for: view.entity, reference: view.reference), layout: layout, ids: ids)
        }

        /// The node of the row of `reference` in the hierarchy of `entity`, whose ID is `id`,
        /// read once; `nil` when the row is missing, retired, of another entity, or does not read.
        func node(ofMember entity: EntityDescription, reference: Int64, id: ManagedObjectID) -> IncrementalStoreNode? {
            let hierarchy = self.hierarchy(of: entity)
            guard let row = try? readOnce(prefix: hierarchy.prefix, root: hierarchy.root, reference: reference),
                layout.entity(number: row.entityNumber) === entity
            else { return nil }
            return store.node(from: row, objectID: id, layout: layout, ids: ids)
        }

        /// The ID of the row `reference` of `entity`.
        func id(for entity: EntityDescription, reference: Int64) -> ManagedObjectID {
            // Read in place: binding the maker would copy it (two retains and two releases per ID).
            if lastIDs?.entity === entity, let id = lastIDs?.id(reference: reference) { return id }
            let maker = ids.maker(for: entity)
            lastIDs = maker
            return maker.id(reference: reference)
        }

        init(snapshot: Snapshot, store: StrataStore, layout: StoreLayout) {
            self.snapshot = snapshot
            self.reader = Snapshot.Reader(snapshot)
            self.store = store
            self.layout = layout
            self.ids = store.objectIDMaker
            self.values = RowStorage.Values(layout: layout, ids: ids)
        }

        /// The row of `reference` in the hierarchy rooted at `root`, or `nil`.
        func row(root: String, reference: Int64) throws -> RowBytes? {
            if let cached = rows[reference], cached.root == root { return cached.row }
            guard let row = try read(key: KeyLayout.rowKey(root: root, reference: reference), root: root, reference: reference) else { return nil }
            rows[reference] = (root, row)
            return row
        }

        /// [MIG-5] The list of the ordered `relationship` of the owner `reference` while its row
        /// is in an older layout whose list is still keys; `nil` otherwise (no read unless
        /// lists are pending).
        func pendingList(_ relationship: RelationshipDescription, of owner: EntityDescription, reference: Int64) throws -> [StoredObject]? {
            try layout.pendingList(of: relationship, owner: owner, reference: reference, in: snapshot)
        }

        /// Whether a member of a keyed to-many relationship of one owner passes `test`: its keys
        /// read in reference order until one does (as ``members(_:of:reference:)`` while keys are
        /// pending or rows retired).
        func containsMember(
            _ relationship: RelationshipDescription, of owner: EntityDescription, reference: Int64, where test: (StoredObject) -> Bool
        ) throws -> Bool {
            if layout.keysPending(relationship, in: snapshot) || layout.hasRetiredRows(in: snapshot) {
                return try members(relationship, of: owner, reference: reference).contains(where: test)
            }
            var found = false
            RelationshipKeys.forEachMember(store.ownerPrefix(relationship, owner: owner, reference: reference), in: snapshot) { member in
                found = test(member)
                return !found
            }
            return found
        }

        /// The members of a keyed to-many relationship ([REL-1]) of one owner, in reference order
        /// (with those its row holds in an older layout while the keys are pending, [MIG-5]).
        func members(_ relationship: RelationshipDescription, of owner: EntityDescription, reference: Int64) throws -> [StoredObject] {
            var keys = RelationshipKeys.members(store.ownerPrefix(relationship, owner: owner, reference: reference), in: snapshot)
            // [MIG-4] Not a member whose row is retired (of a removed entity).
            if layout.hasRetiredRows(in: snapshot) { keys.removeAll { layout.entity(number: $0.entity) == nil } }
            guard layout.keysPending(relationship, in: snapshot) else { return keys }
            return StrataStore.merging(keys, try layout.pendingMembers(of: relationship, owner: owner, reference: reference, in: snapshot))
        }

        /// The row at `key` (`prefix`, the hierarchy's row prefix, and `reference`), read without
        /// keeping it: for candidate rows a fetch reads once.
        func readOnce(prefix: [UInt8], root: String, reference: Int64, forNode: Bool = true) throws -> RowBytes? {
            // The last key, its reference rewritten in place while the hierarchy is the same
            // (a member or candidate read costs no key allocation).
            setOnceKey(prefix: prefix, root: root, reference: reference)
            return try read(key: onceKey, root: root, reference: reference, forNode: forNode)
        }

        /// Makes ``onceKey`` the row key of `reference` under `prefix`.
        private func setOnceKey(prefix: [UInt8], root: String, reference: Int64) {
            if onceRoot != root || onceKey.count != prefix.count + 8 {
                onceRoot = root
                onceKey = prefix
                KeyLayout.appendReference(reference, to: &onceKey)
            } else {
                KeyLayout.replaceReference(reference, in: &onceKey)
            }
        }
        /// Whether the row of `object` (an object of `entity`, the entity its ID names) is of that
        /// entity; `nil` when it is missing. From the index alone when every row of the entity's
        /// key space ([KEY-2]) is one of it (a hierarchy of that entity only, with no retired
        /// rows, [MIG-4]); otherwise the row is read.
        func rowIsOfItsEntity(_ object: StoredObject, entity: EntityDescription) throws -> Bool? {
            guard entity.superentity == nil, entity.subentities.isEmpty, !layout.hasRetiredRows(in: snapshot) else {
                return try withRowOnce(of: object) { fields, _ in fields.entityNumber == object.entity }
            }
            let hierarchy = self.hierarchy(of: entity)
            setOnceKey(prefix: hierarchy.prefix, root: hierarchy.root, reference: object.reference)
            return snapshot.contains(onceKey) ? true : nil
        }

        /// `body`'s answer on the row of `object` where the engine holds it (no copy), or `nil`
        /// if the row is missing. `body` must not read other rows through this source (the
        /// bytes belong to the read in progress).
        func withRowOnce<R>(of object: StoredObject, _ body: (RowFields, EntityDescription) throws -> R?) throws -> R? {
            guard let entity = layout.entity(number: object.entity) else { return nil }
            let hierarchy = self.hierarchy(of: entity)
            setOnceKey(prefix: hierarchy.prefix, root: hierarchy.root, reference: object.reference)
            let layout = self.layout
            var answer: R? = nil
            var failure: (any Error)? = nil
            _ = try mappingEngineErrors("read a row") { () throws(StoreError) in
                try reader.withValue(onceKey) { raw in
                    let origin = RowOrigin.key(root: hierarchy.root, reference: object.reference)
                    if layout.isRetiredRow(raw) { return }
                    do {
                        // The row's own checks name it; a field's error gets its origin here.
                        let fields = try RowFields(
                            raw, store: layout, context: origin, readByEngine: true, scratch: layout.hasLegacy ? onceScratch : nil)
                        guard let rowEntity = layout.unretainedEntity(number: fields.entityNumber) else { return }
                        do { answer = try body(fields, rowEntity.takeUnretainedValue()) } catch { failure = origin.locating(error) }
                    } catch {
                        failure = error
                    }
                }
            }
            if let failure { throw failure }
            return answer
        }

        /// The number of members of the keyed to-many `relationship` of the `owner` row of
        /// `reference`, counted in the index ([REL-3]): no member is decoded or kept, and the
        /// bounds are built in buffers reused from count to count.
        func memberCount(_ relationship: RelationshipDescription, of owner: EntityDescription, reference: Int64) throws -> Int {
            // [MIG-5] Keys still pending: the owner's members, its row's included.
            // [MIG-4] Keys may name retired rows: the members, read.
            if layout.keysPending(relationship, in: snapshot) || layout.hasRetiredRows(in: snapshot) {
                return try members(relationship, of: owner, reference: reference).count
            }
            // [FETCH-S10] Once counting keys owner by owner has cost a share of the
            // relationship's keys, every owner's count comes from one walk of them.
            if let count = groupedMemberCount(relationship, of: owner, reference: reference) { return count }
            // The same relationship as the last count (the usual case): only the references
            // of the bounds are rewritten in place.
            let ordered = KeyLayout.orderedReference(reference)
            if countRelationship == ObjectIdentifier(relationship), ordered != .max, countLower.count >= 8 {
                KeyLayout.replaceReference(reference, in: &countLower)
                // The owner's keys all come before the next reference's.
                countUpper.withUnsafeMutableBytes { $0.storeBytes(of: (ordered + 1).bigEndian, toByteOffset: $0.count - 8, as: UInt64.self) }
                return snapshot.countKeys(from: countLower, to: countUpper)
            }
            // (An owner with the largest reference has an upper bound past its prefix: the next
            // count builds its bounds again.)
            countRelationship = ordered != .max ? ObjectIdentifier(relationship) : nil
            countLower.removeAll(keepingCapacity: true)
            countLower.append(contentsOf: store.relationshipPrefix(relationship, owner: owner))
            KeyLayout.appendReference(reference, to: &countLower)
            // Everything under the owner's prefix: the prefix with its last byte raised (with
            // carry), as ``RelationshipKeys/end(of:)`` makes it.
            countUpper.removeAll(keepingCapacity: true)
            countUpper.append(contentsOf: countLower)
            if !KeyIndex.formPrefixEnd(&countUpper) {
                countUpper = RelationshipKeys.end(of: countLower)
                countRelationship = nil
            }
            return snapshot.countKeys(from: countLower, to: countUpper)
        }
        /// ``memberCount(_:of:reference:)``'s bounds: the owner's prefix ([REL-1]) and the
        /// first key after its keys, and the relationship they were made for (`nil` when the
        /// upper bound is not the next reference's prefix).
        @exclusivity(unchecked) private var countLower: [UInt8] = []
        @exclusivity(unchecked) private var countUpper: [UInt8] = []
        @exclusivity(unchecked) private var countRelationship: ObjectIdentifier?

        /// The key ``readOnce(prefix:root:reference:)`` read last, and its hierarchy's root.
        @exclusivity(unchecked) private var onceKey: [UInt8] = []
        @exclusivity(unchecked) private var onceRoot = ""
        /// Where ``withRowOnce(of:_:)`` keeps a row upgraded from an older layout ([MIG-2]).
        private lazy var onceScratch = RowScratch()

        /// The row at `key`, the row key of `reference` in the hierarchy rooted at `root`.
        private func read(key: [UInt8], root: String, reference: Int64, forNode: Bool = true) throws -> RowBytes? {
            // Checked where the engine holds the bytes, copied once into the row's storage
            // (with what a node needs, unless the row is only looked at). A row read for a node
            // is not put in the engine's row cache: the node's object holds it.
            let values: RowStorage.Values? = forNode ? self.values : nil
            let layout = self.layout
            var row: RowBytes? = nil
            var failure: (any Error)? = nil
            _ = try mappingEngineErrors("read a row") { () throws(StoreError) in
                try reader.withValue(key, caching: !forNode) { raw in
                    // [MIG-4] A retired row (of a removed entity) is no object.
                    if layout.isRetiredRow(raw) { return }
                    do {
                        row = try RowBytes(raw: raw, store: layout, context: .key(root: root, reference: reference), readByEngine: true, values: values)
                    } catch {
                        failure = error
                    }
                }
            }
            if let failure { throw failure }
            return row
        }

        /// A key path's value read from a destination row, by destination and key path.
        private struct DestinationPath: Hashable {
            let target: StoredObject
            let keyPath: String
        }
        /// Values read through to-one relationships, once per destination and key path: many
        /// rows share few destinations (`genre.name` over every track reads each genre once).
        @exclusivity(unchecked) private var destinationValues: [DestinationPath: FetchValue] = [:]

        /// The value of `keyPath` in the row of `target` (whose ID is `id`), read once per fetch.
        func value(ofDestination target: StoredObject, id: ManagedObjectID, keyPath: String) throws -> FetchValue {
            let key = DestinationPath(target: target, keyPath: keyPath)
            if let value = destinationValues[key] { return value }
            let value = try view(of: id)?.fetchValue(forKeyPath: keyPath) ?? .null
            if destinationValues.count < 65_536 { destinationValues[key] = value }
            return value
        }

        /// Object IDs made for destinations, shared by every row of the fetch that names them
        /// (many rows point at few destinations: one ID each, not one per row).
        @exclusivity(unchecked) private var destinationIDs: [StoredObject: ManagedObjectID] = [:]

        /// The object ID of a stored reference, or `nil` if its entity is not in the model.
        func objectID(_ object: StoredObject) -> ManagedObjectID? {
            if let id = destinationIDs[object] { return id }
            guard let entity = layout.entity(number: object.entity) else { return nil }
            let id = self.id(for: entity, reference: object.reference)
            if destinationIDs.count < 65_536 { destinationIDs[object] = id }
            return id
        }

        /// The view of a stored destination, read by reference, or `nil` if missing. With
        /// `keeping` false the row is not kept for later reads (a to-many's members, each read
        /// once).
        func view(of object: StoredObject, keeping: Bool = true) throws -> RowView? {
            guard let entity = layout.entity(number: object.entity) else { return nil }
            return try view(of: entity, reference: object.reference, keeping: keeping)
        }

        /// The view of an object ID of this store, or `nil` if missing.
        func view(of id: ManagedObjectID) throws -> RowView? {
            guard id.persistentStore === store || id.storeIdentifier == store.identifier, case .int64(let reference)? = id.referenceObject else { return nil }
            return try view(of: id.entity, reference: reference)
        }

        /// Key paths compiled for this fetch's rows, by entity and key path (`nil`: read the
        /// general way). A few key paths per fetch: a linear search finds them.
        @exclusivity(unchecked) private var readers: [(entity: ObjectIdentifier, keyPath: String, reader: KeyPathReader?)] = []

        /// The compiled reader of `keyPath` for rows of `entity`, if it compiles.
        func reader(of entity: EntityDescription, keyPath: String) -> KeyPathReader? {
            let id = ObjectIdentifier(entity)
            for entry in readers where entry.entity == id && entry.keyPath == keyPath { return entry.reader }
            let reader = KeyPathReader.make(keyPath, entity: entity)
            if readers.count < 32 { readers.append((id, keyPath, reader)) }
            return reader
        }

        /// The key space ([KEY-2]) and row prefix of `entity`'s hierarchy.
        private func hierarchy(of entity: EntityDescription) -> (root: String, prefix: [UInt8]) {
            if let known = hierarchies[ObjectIdentifier(entity)] { return known }
            let hierarchy = (layout.keySpace(of: entity), store.rowPrefix(of: entity))
            hierarchies[ObjectIdentifier(entity)] = hierarchy
            return hierarchy
        }

        /// The key space and row prefix ([KEY-1]) of each entity's hierarchy, by entity instance.
        @exclusivity(unchecked) private var hierarchies: [ObjectIdentifier: (root: String, prefix: [UInt8])] = [:]

        /// [FETCH-S10] What member reads of one-to-many relationships have cost so far, and the
        /// member values grouped by owner once a scan became cheaper: by relationship and key
        /// path. A fetch names a few; a linear search finds them.
        @exclusivity(unchecked) var memberGroups: [MemberGroups] = []
        /// [FETCH-S10] The same for member counts, by relationship.
        @exclusivity(unchecked) var memberCounts: [MemberCounts] = []
        /// The keyed to-many relationships `fetchCount(forKeyPath:)` was asked for, by entity
        /// and key path (`nil`: not a keyed relationship); a linear search finds them.
        @exclusivity(unchecked) private var countedRelationships: [(entity: ObjectIdentifier, keyPath: String, relationship: RelationshipDescription?)] = []

        /// The keyed to-many relationship ([REL-1]) at `ordinal` of `entity`, if it is one.
        func keyedRelationship(of entity: EntityDescription, atOrdinal ordinal: Int) -> RelationshipDescription? {
            guard ordinal >= 0, ordinal < entity.properties.count, let relationship = entity.properties[ordinal] as? RelationshipDescription,
                RelationshipKeys.isKeyed(relationship)
            else { return nil }
            return relationship
        }

        /// The keyed to-many of `entity` named `keyPath`, if it is one ([REL-3]).
        func keyedRelationship(of entity: EntityDescription, named keyPath: String) -> RelationshipDescription? {
            let id = ObjectIdentifier(entity)
            for entry in countedRelationships where entry.entity == id && entry.keyPath == keyPath { return entry.relationship }
            let relationship = entity.relationshipsByName[keyPath].flatMap { RelationshipKeys.isKeyed($0) ? $0 : nil }
            if countedRelationships.count < 16 { countedRelationships.append((id, keyPath, relationship)) }
            return relationship
        }

        /// The view of the row of `reference` in the hierarchy of `entity` (kept for later
        /// reads unless `keeping` is false).
        private func view(of entity: EntityDescription, reference: Int64, keeping: Bool = true) throws -> RowView? {
            let hierarchy = self.hierarchy(of: entity)
            let found = keeping
                ? try row(root: hierarchy.root, reference: reference)
                : try readOnce(prefix: hierarchy.prefix, root: hierarchy.root, reference: reference, forNode: false)
            guard let row = found, let rowEntity = layout.entity(number: row.entityNumber) else { return nil }
            return RowView(reference: reference, row: row, entity: rowEntity, source: self)
        }
    }

    /// A stored row seen through ``FetchEvaluable``, following relationships to other rows of
    /// the same snapshot: predicates and sorts are evaluated without making objects, and only
    /// the fields they name are decoded.
    ///
    /// Valid while its fetch runs: the entity (its store layout's) and the row source (the
    /// fetch's) are not retained, so copying a view, as sorts and pages do, counts one
    /// reference (the row's), not three. A view never outlives the fetch that made it: its
    /// results leave as nodes (``node()``), which hold the row and an ID.
    struct RowView: OrdinalFetchEvaluable, StoredRowAccess {
        let reference: Int64
        let row: RowBytes
        unowned(unsafe) let entity: EntityDescription
        unowned(unsafe) let source: RowSource

        var objectID: ManagedObjectID { source.id(for: entity, reference: reference) }

        var entityNumber: UInt16 { row.entityNumber }

        /// The node of the row: every stored attribute and to-one destination, by ordinal.
        func node() -> IncrementalStoreNode { source.node(of: self) }

        /// The attribute at `ordinal`, read in place.
        func attributeValue(atOrdinal ordinal: Int) throws -> AttributeValue? {
            try row.attribute(atOrdinal: ordinal)
        }

        /// Whether the attribute at `ordinal` is null, from the row's null bitmap ([ROW-1]).
        func attributeIsNull(atOrdinal ordinal: Int) throws -> Bool? {
            guard let field = row.field(ofOrdinal: ordinal) else { return nil }
            return row.isNull(field)
        }

        /// Tests the string at `ordinal` on the row's bytes: no `String` made.
        func testStringBytes(atOrdinal ordinal: Int, _ test: (UnsafeBufferPointer<UInt8>) -> Bool?) throws -> Bool? {
            row.testStringBytes(atOrdinal: ordinal, test)
        }

        func fixedWidthBits(atOrdinal ordinal: Int, as kind: FixedWidthKind) throws -> UInt64? {
            row.fixedWidthBits(atOrdinal: ordinal, as: kind)
        }

        /// The destination stored in the to-one relationship at `ordinal`, if any.
        func storedObject(atOrdinal ordinal: Int) throws -> StoredObject? {
            guard let object = try row.object(atOrdinal: ordinal) else { return nil }
            // [MIG-1] A destination of a removed entity is none.
            return source.layout.isRemovedEntity(object.entity) ? nil : object
        }

        /// The destinations stored in the to-many relationship at `ordinal`: its keys, or its
        /// list in the row (ordered).
        func storedObjects(atOrdinal ordinal: Int) throws -> [StoredObject] {
            guard let field = row.field(ofOrdinal: ordinal) else {
                guard let relationship = source.keyedRelationship(of: entity, atOrdinal: ordinal) else { return [] }
                return try source.members(relationship, of: entity, reference: reference)
            }
            if source.layout.hasPendingKeys(in: source.snapshot), let relationship = entity.properties[ordinal] as? RelationshipDescription,
                let list = try source.pendingList(relationship, of: entity, reference: reference)
            {
                return list
            }
            if case .objects(let targets) = try row.value(field) {
                // [MIG-1] Not a destination of a removed entity.
                return source.layout.hasRemovedEntities ? targets.filter { !source.layout.isRemovedEntity($0.entity) } : targets
            }
            return []
        }

        func containsStoredObject(atOrdinal ordinal: Int, where test: (StoredObject) -> Bool) throws -> Bool {
            if row.field(ofOrdinal: ordinal) == nil, let relationship = source.keyedRelationship(of: entity, atOrdinal: ordinal) {
                return try source.containsMember(relationship, of: entity, reference: reference, where: test)
            }
            return try storedObjects(atOrdinal: ordinal).contains(where: test)
        }

        func fetchValue(forKeyPath keyPath: String) throws -> FetchValue {
            if let reader = source.reader(of: entity, keyPath: keyPath) { return try reader.value(of: self) }
            let head: Substring, rest: Substring?
            if let dot = keyPath.utf8.firstIndex(of: UInt8(ascii: ".")) {
                head = keyPath[..<dot]
                rest = keyPath[keyPath.utf8.index(after: dot)...]
            } else {
                head = keyPath[...]
                rest = nil
            }
            if head == "self" || head == "SELF" {
                return rest == nil ? .object(objectID) : try fetchValue(forKeyPath: String(rest ?? ""))
            }
            let property = try entity.property(named: String(head))
            if property.isTransient {
                throw ObjectGraphError(.unknownKey, "Transient attribute \(entity.name).\(head) is not stored and cannot be fetched on.", entityName: entity.name, key: keyPath)
            }
            guard let field = row.field(ofOrdinal: property.ordinal) else {
                guard let relationship = property as? RelationshipDescription, RelationshipKeys.isKeyed(relationship) else { return .null }
                return try values(of: source.members(relationship, of: entity, reference: reference), rest)
            }
            if let relationship = property as? RelationshipDescription, relationship.isToMany,
                let list = try source.pendingList(relationship, of: entity, reference: reference)
            {
                // [MIG-5] A row of an older layout whose list is still its keys.
                return try values(of: list, rest)
            }
            switch try row.value(field) {
            case .attribute(let value):
                if let rest {
                    throw ObjectGraphError(.unknownKey, "\(entity.name).\(head) is an attribute; key path continues with \"\(rest)\".", entityName: entity.name, key: keyPath)
                }
                return .attribute(value)
            case .null:
                if let relationship = property as? RelationshipDescription, relationship.isToMany { return .collection([]) }
                if rest != nil, property is AttributeDescription {
                    throw ObjectGraphError(.unknownKey, "\(entity.name).\(head) is an attribute; key path continues with \"\(rest ?? "")\".", entityName: entity.name, key: keyPath)
                }
                return .null
            case .object(let target):
                guard let id = source.objectID(target) else { return .null }
                guard let rest else { return .object(id) }
                return try source.value(ofDestination: target, id: id, keyPath: String(rest))
            case .objects(let targets):
                return try values(of: targets, rest)
            }
        }

        /// The members of a to-many as a collection: their IDs, or the value of `rest` in each
        /// member's row (read by reference: no object ID is made for them).
        private func values(of members: [StoredObject], _ rest: Substring?) throws -> FetchValue {
            guard let rest else { return .collection(members.compactMap(source.objectID).map(FetchValue.object)) }
            var reader = MemberValueReader(path: String(rest))
            var values: [FetchValue] = []
            values.reserveCapacity(members.count)
            for member in members {
                if let value = try reader.value(of: member, in: source) { values.append(value) }
            }
            return .collection(values)
        }

        /// Reads one key path from members of a to-many: each member's row is read once and
        /// not kept; a stored attribute is read by ordinal (resolved once per member entity),
        /// anything else through its key path.
        private struct MemberValueReader {
            let path: String
            var resolved: (entity: EntityDescription, ordinal: Int?)? = nil

            /// Whether the path is one key (an attribute, perhaps): no `.`, `@` or `$`.
            let isOneKey: Bool

            init(path: String) {
                self.path = path
                isOneKey = !path.utf8.contains { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "@") || $0 == UInt8(ascii: "$") }
            }

            /// The value of the key path in `member`'s row; `nil` when the row is missing
            /// (a member without a row is left out of the collection).
            mutating func value(of member: StoredObject, in source: RowSource) throws -> FetchValue? {
                // An attribute of the member's own row: read where the engine holds it.
                if isOneKey, let value = try directValue(of: member, in: source) { return value }
                // Anything else (a key path through relationships, an aggregate): the row's view.
                guard let view = try source.view(of: member, keeping: false) else { return nil }
                if resolved?.entity !== view.entity {
                    let attribute = view.entity.attributesByName[path]
                    resolved = (view.entity, attribute.flatMap { !$0.isTransient && $0.ordinal >= 0 ? $0.ordinal : nil })
                }
                if let ordinal = resolved?.ordinal, let value = try view.attributeValue(atOrdinal: ordinal) { return .attribute(value) }
                return try view.fetchValue(forKeyPath: path)
            }

            /// The attribute `path` names in `member`'s row, read in place: `.some(nil)` for a
            /// missing row, `nil` when the path is not a stored attribute of the row's entity.
            private mutating func directValue(of member: StoredObject, in source: RowSource) throws -> FetchValue?? {
                let path = self.path
                var resolved = self.resolved
                let direct = try source.withRowOnce(of: member) { fields, entity -> FetchValue?? in
                    if resolved?.entity !== entity {
                        let attribute = entity.attributesByName[path]
                        resolved = (entity, attribute.flatMap { !$0.isTransient && $0.ordinal >= 0 ? $0.ordinal : nil })
                    }
                    guard let ordinal = resolved?.ordinal, let value = try fields.attribute(atOrdinal: ordinal) else { return .some(nil) }
                    return .some(.attribute(value))
                }
                self.resolved = resolved
                guard let direct else { return .some(nil) }
                return direct.map { .some($0) }
            }
        }

        /// Each member's value of `keyPath`, read one member at a time ([FETCH-S5]): the
        /// members `fetchValue(forKeyPath:)` lists for the relationship (its keys in
        /// reference order, or its list in the row), each read as that lists it.
        func forEachMemberValue(ofToMany name: String, keyPath: String, _ body: (FetchValue) throws -> Bool) throws -> Bool {
            guard let relationship = entity.relationshipsByName[name], relationship.isToMany, !relationship.isTransient,
                relationship.ordinal >= 0
            else { return false }
            var reader = MemberValueReader(path: keyPath)
            guard let field = row.field(ofOrdinal: relationship.ordinal) else {
                // No field: keyed members, or (not keyed) no value, which reads as null: no
                // member either way for ANY and ALL.
                guard RelationshipKeys.isKeyed(relationship) else { return true }
                if source.layout.keysPending(relationship, in: source.snapshot) {
                    // [MIG-5] Keys still pending: the owner's members, its row's included.
                    for member in try source.members(relationship, of: entity, reference: reference) {
                        guard let value = try reader.value(of: member, in: source) else { continue }
                        if try !body(value) { break }
                    }
                    return true
                }
                // [FETCH-S10] Once reading members one by one has cost a share of their rows,
                // every owner's members come from one scan of the members' rows.
                let group = source.memberGroup(relationship, keyPath: keyPath)
                if let group, let values = try source.groupedMemberValues(group) {
                    for value in values[reference] ?? [] where try !body(value) { break }
                    return true
                }
                let prefix = source.store.ownerPrefix(relationship, owner: entity, reference: reference)
                var read = 0
                try source.snapshot.forEachKeyBytes(from: prefix, to: RelationshipKeys.end(of: prefix)) { key in
                    guard key.count == prefix.count + 10, let member = RelationshipKeys.member(fromKeyBytes: key) else { return true }
                    read += 1
                    guard let value = try reader.value(of: member, in: source) else { return true }
                    return try body(value)
                }
                if let group { source.noteMemberReads(read, in: group) }
                return true
            }
            let targets: [StoredObject]
            if let list = try source.pendingList(relationship, of: entity, reference: reference) {
                targets = list
            } else if case .objects(let list) = try row.value(field) {
                targets = list
            } else {
                return true
            }
            for target in targets {
                guard let value = try reader.value(of: target, in: source) else { continue }
                if try !body(value) { break }
            }
            return true
        }

        /// The members of a keyed to-many relationship named by `keyPath`, counted from its
        /// keys ([REL-3]); `nil` for anything else.
        func fetchCount(forKeyPath keyPath: String) throws -> Int? {
            guard let relationship = source.keyedRelationship(of: entity, named: keyPath) else { return nil }
            return try source.memberCount(relationship, of: entity, reference: reference)
        }

        /// A key path of another row of the same snapshot (subqueries, `$x.name`).
        func fetchValue(forKeyPath keyPath: String, ofObject objectID: ManagedObjectID) throws -> FetchValue {
            try source.view(of: objectID)?.fetchValue(forKeyPath: keyPath) ?? .null
        }
    }
}

/// The destinations a row stores, as a semi-join's test reads them ([FETCH-S1]).
protocol StoredRowAccess {
    /// The row's reference ([KEY-2]).
    var reference: Int64 { get }
    /// The row's concrete entity number ([ROW-1]).
    var entityNumber: UInt16 { get }
    /// The destination stored in the to-one relationship at `ordinal`, if any.
    func storedObject(atOrdinal ordinal: Int) throws -> StoredObject?
    /// The destinations of the to-many relationship at `ordinal`.
    func storedObjects(atOrdinal ordinal: Int) throws -> [StoredObject]
    /// Whether a destination of the to-many relationship at `ordinal` passes `test`, read
    /// until one does.
    func containsStoredObject(atOrdinal ordinal: Int, where test: (StoredObject) -> Bool) throws -> Bool
}

extension StoredRowAccess {
    func containsStoredObject(atOrdinal ordinal: Int, where test: (StoredObject) -> Bool) throws -> Bool {
        try storedObjects(atOrdinal: ordinal).contains(where: test)
    }
}

extension StrataStore {
    /// The views of `snapshot`'s entries from `lower` up to `upper`, each handed to `body`
    /// until it returns `false` or throws; the first error stops the scan and is thrown (an
    /// engine error as reading `what`).
    static func forEachView(
        in snapshot: Snapshot, from lower: [UInt8], to upper: [UInt8], reading what: String,
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        var failure: (any Error)? = nil
        _ = try mappingEngineErrors(what) { () throws(StoreError) in
            try snapshot.forEachView(from: lower, to: upper) { key, value in
                do {
                    return try body(key, value)
                } catch {
                    failure = error
                    return false
                }
            }
        }
        if let failure { throw failure }
    }
}

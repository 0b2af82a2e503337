import ObjectGraph
import StrataEngine

extension StrataStore {
    /// [FETCH-S7] A scanned row tested where the engine holds it (a decompressed block or a
    /// WAL window), before and without a copy: attributes and to-ones are read from the
    /// borrowed bytes; anything else (key paths, to-manys, counts) from a ``RowView`` made
    /// for that question, which copies the row. Answers exactly as that ``RowView`` would.
    ///
    /// Valid only during the scan's call for the row: its bytes are the engine's, and its
    /// entity and row source are not retained (the fetch holds them), so testing a row costs
    /// no reference count.
    struct BorrowedRowView: OrdinalFetchEvaluable, StoredRowAccess {
        let fields: RowFields
        let reference: Int64
        unowned(unsafe) let entity: EntityDescription
        unowned(unsafe) let source: RowSource

        /// Where the row came from, for errors.
        private var origin: RowOrigin { .key(root: entity.name, reference: reference) }

        var entityNumber: UInt16 { fields.entityNumber }

        /// The row as a view that owns a copy of its bytes.
        func view() -> RowView {
            RowView(reference: reference, row: RowBytes(copying: fields, context: origin, values: source.values), entity: entity, source: source)
        }

        func attributeValue(atOrdinal ordinal: Int) throws -> AttributeValue? {
            do { return try fields.attribute(atOrdinal: ordinal) } catch { throw origin.locating(error) }
        }

        func attributeIsNull(atOrdinal ordinal: Int) throws -> Bool? {
            guard let field = fields.field(ofOrdinal: ordinal) else { return nil }
            return fields.isNull(field)
        }

        /// Tests the string at `ordinal` on the engine's bytes: no `String` made.
        func testStringBytes(atOrdinal ordinal: Int, _ test: (UnsafeBufferPointer<UInt8>) -> Bool?) throws -> Bool? {
            fields.testStringBytes(atOrdinal: ordinal, test)
        }

        /// Reads the number's bytes in place: no `AttributeValue` made.
        func fixedWidthBits(atOrdinal ordinal: Int, as kind: FixedWidthKind) throws -> UInt64? {
            fields.fixedWidthBits(atOrdinal: ordinal, as: kind)
        }

        func storedObject(atOrdinal ordinal: Int) throws -> StoredObject? {
            let object: StoredObject?
            do { object = try fields.object(atOrdinal: ordinal) } catch { throw origin.locating(error) }
            // [MIG-1] A destination of a removed entity is none.
            guard let object, !source.layout.isRemovedEntity(object.entity) else { return nil }
            return object
        }

        func storedObjects(atOrdinal ordinal: Int) throws -> [StoredObject] {
            try view().storedObjects(atOrdinal: ordinal)
        }

        func containsStoredObject(atOrdinal ordinal: Int, where test: (StoredObject) -> Bool) throws -> Bool {
            // A keyed to-many's members are read from its keys: the row is not copied.
            if fields.field(ofOrdinal: ordinal) == nil, let relationship = source.keyedRelationship(of: entity, atOrdinal: ordinal) {
                return try source.containsMember(relationship, of: entity, reference: reference, where: test)
            }
            return try view().containsStoredObject(atOrdinal: ordinal, where: test)
        }

        func fetchValue(forKeyPath keyPath: String) throws -> FetchValue {
            // A compiled key path (attributes, through to-ones, counts) reads the borrowed bytes
            // and the destinations' rows, as the row's view would: no copy of this row.
            if let reader = source.reader(of: entity, keyPath: keyPath) { return try reader.value(of: self) }
            return try view().fetchValue(forKeyPath: keyPath)
        }

        func fetchValue(forKeyPath keyPath: String, ofObject objectID: ManagedObjectID) throws -> FetchValue {
            try view().fetchValue(forKeyPath: keyPath, ofObject: objectID)
        }

        func fetchValueOfSelf() throws -> FetchValue {
            try view().fetchValueOfSelf()
        }

        func fetchCount(forKeyPath keyPath: String) throws -> Int? {
            // Counted from the keys alone, as the row's view counts them: the row is not copied.
            guard let relationship = source.keyedRelationship(of: entity, named: keyPath) else { return nil }
            return try source.memberCount(relationship, of: entity, reference: reference)
        }

        func forEachMemberValue(ofToMany name: String, keyPath: String, _ body: (FetchValue) throws -> Bool) throws -> Bool {
            try view().forEachMemberValue(ofToMany: name, keyPath: keyPath, body)
        }
    }
}

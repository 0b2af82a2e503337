import ObjectGraph
import StrataEngine

/// What an engine snapshot holds in StrataStore's key layout (SPEC.md [KEY-1], [KEY-2],
/// [IDX-S1], [REL-1]), read from keys and row headers only, so no model is needed: whether the
/// store is a StrataStore at all ([META-1]), how many rows each hierarchy holds per concrete
/// entity number and layout, and the largest reference any key names ([META-2]).
///
/// One pass over the row space reads every row's value (to check its header and checksum);
/// the index and relationship spaces are read from the engine's index only.
struct StoreSurvey {
    /// The rows of one concrete entity as their headers name it ([ROW-1]).
    struct RowKind: Hashable, Comparable, CustomStringConvertible {
        /// The hierarchy root in the row key ([KEY-2]).
        var root: String
        /// The entity number in the row header.
        var number: UInt16
        /// The layout in the row header: the first four bytes of the entity's version hash.
        var layoutID: UInt32

        static func < (a: RowKind, b: RowKind) -> Bool {
            (a.root, a.number, a.layoutID) < (b.root, b.number, b.layoutID)
        }

        var description: String { "entity #\(number) in \(root)'s key space (layout \(hexLayout(layoutID)))" }
    }

    /// Whether the metadata record ([ROW-4]) is present (it may still fail to decode).
    var hasMetadataRecord = false
    /// Whether the model record ([ROW-5]) is present.
    var hasModelRecord = false
    /// Row keys whose value is a format-3 row with a valid checksum, by the kind its header names.
    var rows: [RowKind: Int] = [:]
    /// Keys of the row space that are not such rows (a damaged or foreign value, a key of
    /// another shape).
    var otherRowSpaceKeys = 0
    /// Keys of the relationship space with [REL-1]'s shape.
    var relationshipKeys = 0
    /// Keys of the index space with [IDX-S1]'s shape.
    var indexEntries = 0
    /// Whether the first relationship key and the first index entry have empty values, as
    /// StrataStore's do (checked when there are any).
    var keysHaveEmptyValues = true
    /// The largest reference in any row key, relationship key (owner and member) and index
    /// entry; 0 when there are none.
    var maxReference: Int64 = 0

    /// Rows of every kind.
    var rowCount: Int { rows.values.reduce(0, +) }

    /// Whether the store holds anything of StrataStore's ([META-1]): a metadata or model record,
    /// a row, or relationship keys or index entries of StrataStore's shape with empty values.
    /// An engine store whose keys merely start with the same bytes is not one.
    var isStrataStore: Bool {
        hasMetadataRecord || hasModelRecord || !rows.isEmpty
            || ((relationshipKeys > 0 || indexEntries > 0) && keysHaveEmptyValues)
    }

    /// Whether the store has rows or keys but no metadata record: a damaged StrataStore.
    var lacksMetadataRecord: Bool { isStrataStore && !hasMetadataRecord }

    /// Rows per hierarchy root, then per entity number, for reports: `Book: 17 rows (entity #1)`.
    var rowSummary: String {
        guard !rows.isEmpty else { return "no rows" }
        var byRoot: [String: [UInt16: Int]] = [:]
        for (kind, count) in rows { byRoot[kind.root, default: [:]][kind.number, default: 0] += count }
        return byRoot.keys.sorted().map { root in
            let numbers = byRoot[root] ?? [:]
            let parts = numbers.keys.sorted().map { "\(numbers[$0] ?? 0) of entity #\($0)" }
            return "\(root): \(parts.joined(separator: ", "))"
        }.joined(separator: "; ")
    }

    /// What the keys hold, in a sentence: rows, relationship keys and index entries.
    var keySummary: String {
        "\(rowCount) row\(rowCount == 1 ? "" : "s") (\(rowSummary)), \(relationshipKeys) relationship key\(relationshipKeys == 1 ? "" : "s") and \(indexEntries) index entr\(indexEntries == 1 ? "y" : "ies")"
    }

    /// Surveys `snapshot`.
    ///
    /// - Throws: engine errors reading rows (as ``ObjectGraphError``).
    static func survey(_ snapshot: Snapshot) throws -> StoreSurvey {
        var survey = StoreSurvey()
        survey.hasMetadataRecord = snapshot.sequence(of: KeyLayout.metadataKey) != nil
        survey.hasModelRecord = snapshot.sequence(of: KeyLayout.modelKey) != nil
        try mappingEngineErrors("read the rows") { () throws(StoreError) in
            try snapshot.forEachView(from: [KeyLayout.rowTag], to: [KeyLayout.rowTag + 1]) { key, value in
                guard let reference = rowReference(key), let header = RowHeader(value) else {
                    survey.otherRowSpaceKeys += 1
                    return true
                }
                let root = String(decoding: UnsafeRawBufferPointer(rebasing: key[1..<(key.count - 9)]), as: UTF8.self)
                survey.rows[RowKind(root: root, number: header.entity, layoutID: header.layoutID), default: 0] += 1
                survey.maxReference = max(survey.maxReference, reference)
                return true
            }
        }
        let keys = surveyKeys(snapshot)
        survey.relationshipKeys = keys.relationshipKeys
        survey.indexEntries = keys.indexEntries
        survey.maxReference = max(survey.maxReference, keys.maxReference)
        for key in [keys.firstRelationshipKey, keys.firstIndexEntry].compactMap({ $0 }) {
            let value = try mappingEngineErrors("read key 0x\(hex(key))") { () throws(StoreError) in try snapshot.get(key) }
            if value?.isEmpty != true { survey.keysHaveEmptyValues = false }
        }
        return survey
    }

    /// The relationship keys and index entries of `snapshot` ([REL-1], [IDX-S1] shapes), the
    /// first of each, and the largest reference they name. Reads only the engine's index.
    static func surveyKeys(_ snapshot: Snapshot) -> (
        relationshipKeys: Int, indexEntries: Int, maxReference: Int64, firstRelationshipKey: [UInt8]?, firstIndexEntry: [UInt8]?
    ) {
        var relationshipKeys = 0, indexEntries = 0, maxReference: Int64 = 0
        var firstRelationshipKey: [UInt8]?, firstIndexEntry: [UInt8]?
        snapshot.forEachKey(from: [RelationshipKeys.tag], to: [RelationshipKeys.tag + 1]) { key in
            guard let parts = RelationshipKeys.parse(key) else { return true }
            if firstRelationshipKey == nil { firstRelationshipKey = key }
            relationshipKeys += 1
            maxReference = max(maxReference, parts.owner, parts.member.reference)
            return true
        }
        snapshot.forEachKey(from: [IndexKey.tag], to: [IndexKey.tag + 1]) { key in
            guard isIndexKey(key), let reference = IndexKey.reference(fromIndexKey: key) else { return true }
            if firstIndexEntry == nil { firstIndexEntry = key }
            indexEntries += 1
            maxReference = max(maxReference, reference)
            return true
        }
        return (relationshipKeys, indexEntries, maxReference, firstRelationshipKey, firstIndexEntry)
    }

    /// The references a key of StrataStore's layout names: a row key's, a relationship key's
    /// owner and member, an index entry's; none for any other key.
    static func references(inKey key: [UInt8]) -> [Int64] {
        switch key.first {
        case KeyLayout.rowTag:
            return key.withUnsafeBytes { rowReference($0) }.map { [$0] } ?? []
        case RelationshipKeys.tag:
            return RelationshipKeys.parse(key).map { [$0.owner, $0.member.reference] } ?? []
        case IndexKey.tag:
            return isIndexKey(key) ? IndexKey.reference(fromIndexKey: key).map { [$0] } ?? [] : []
        default:
            return []
        }
    }

    /// The reference of a key with [KEY-2]'s shape (`0x01 root 0x00 ref`, a root without a
    /// zero byte, valid UTF-8), or `nil`.
    static func rowReference(_ key: UnsafeRawBufferPointer) -> Int64? {
        guard key.count >= 11, key[0] == KeyLayout.rowTag, key[key.count - 9] == 0 else { return nil }
        let root = UnsafeRawBufferPointer(rebasing: key[1..<(key.count - 9)])
        guard !root.contains(0), String(validating: root, as: UTF8.self) != nil else { return nil }
        return KeyLayout.reference(fromKeyBytes: key)
    }

    /// Whether `key` has [IDX-S1]'s shape: `0x02 root 0x00 attribute 0x00`, a type byte and a
    /// reference.
    static func isIndexKey(_ key: [UInt8]) -> Bool {
        guard key.first == IndexKey.tag, key.count >= 1 + 1 + 1 + 1 + 1 + 1 + 8 else { return false }
        let body = key[1...]
        guard let firstZero = body.firstIndex(of: 0), firstZero > body.startIndex else { return false }
        guard let secondZero = body[(firstZero + 1)...].firstIndex(of: 0), secondZero > firstZero + 1 else { return false }
        return key.count - (secondZero + 1) >= 1 + 8
    }
}

/// A row's header ([ROW-1]) read without a model: format 3, flags 0, and a CRC-32C that holds.
struct RowHeader {
    /// The concrete entity's number.
    var entity: UInt16
    /// The layout: the first four bytes of the entity's version hash, as a number.
    var layoutID: UInt32
    /// The row's version.
    var version: UInt64

    /// The header of `bytes`, or `nil` when they are not a checked format-3 row.
    init?(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= RowLayout.headerSize + RowLayout.trailerSize, bytes[0] == RowEncoder.format, bytes[1] == 0 else { return nil }
        let body = bytes.count - RowLayout.trailerSize
        guard bytes.loadUnaligned(fromByteOffset: body, as: UInt32.self).littleEndian
            == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[..<body]))
        else { return nil }
        entity = bytes.loadUnaligned(fromByteOffset: 2, as: UInt16.self).littleEndian
        layoutID = bytes.loadUnaligned(fromByteOffset: 4, as: UInt32.self).littleEndian
        version = bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self).littleEndian
    }
}

/// A layout number as the hex of its four bytes, most significant first.
func hexLayout(_ layoutID: UInt32) -> String {
    let digits = String(layoutID, radix: 16)
    return String(repeating: "0", count: max(0, 8 - digits.count)) + digits
}

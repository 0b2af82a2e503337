import Logging
import Foundation
import ObjectGraph
import StrataEngine

/// A JSON value, for tool output that carries attribute values of every type.
public enum JSONValue: Sendable, Equatable, Codable {
    /// `null`.
    case null
    /// `true` / `false`.
    case bool(Bool)
    /// A number.
    case number(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object (keys sorted when encoded with `.sortedKeys`).
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// An attribute value as JSON: numbers as numbers (decimals as strings, to keep every
    /// digit), dates as ISO 8601 strings, data as base64, UUIDs and URIs as strings.
    public init(_ value: AttributeValue) {
        switch value {
        case .null: self = .null
        case .int16(let v): self = .number(Double(v))
        case .int32(let v): self = .number(Double(v))
        case .int64(let v): self = .number(Double(v))
        case .double(let v): self = v.isFinite ? .number(v) : .string("\(v)")
        case .float(let v): self = v.isFinite ? .number(Double(v)) : .string("\(v)")
        case .decimal(let v): self = .string("\(v)")
        case .bool(let v): self = .bool(v)
        case .string(let v): self = .string(v)
        case .date(let v): self = .string(v.formatted(.iso8601))
        case .data(let v), .transformable(let v): self = .string(v.base64EncodedString())
        case .uuid(let v): self = .string(v.uuidString)
        case .uri(let v): self = .string(v.absoluteString)
        }
    }

    /// Compact text for the human-readable output: strings quoted, others as JSON writes them.
    public var text: String {
        switch self {
        case .null: return "null"
        case .bool(let value): return "\(value)"
        case .number(let value):
            return value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
        case .string(let value): return "\"\(value)\""
        case .array(let values): return "[" + values.map(\.text).joined(separator: ", ") + "]"
        case .object(let fields): return "{" + fields.keys.sorted().map { "\($0): \(fields[$0]?.text ?? "null")" }.joined(separator: ", ") + "}"
        }
    }
}

/// One engine record decoded as far as the store's layout allows.
public struct DecodedRecord: Sendable, Equatable, Codable {
    /// The key in hex.
    public var key: String
    /// `metadata`, `model`, `row` (with its to-many relationships, keyed ones included),
    /// `index`, `relationship` (one [REL-1] key) or `raw` (a key outside StrataStore's
    /// layout, or a value that does not decode).
    public var kind: String
    /// For a row: the object's URI.
    public var object: String?
    /// For a row: its concrete entity.
    public var entity: String?
    /// For a row or index entry: the reference.
    public var reference: Int64?
    /// For a row: its version ([ROW-1]).
    public var version: UInt64?
    /// For a row: attributes and relationships (destinations as URIs); for metadata: its
    /// fields; for an index entry: the entity hierarchy and attribute.
    public var fields: [String: JSONValue]?
    /// The value in hex, for raw records (first 256 bytes).
    public var valueHex: String?
    /// The value's length in bytes.
    public var valueBytes: Int

    /// One line for `strata dump`'s text output.
    public var line: String {
        var text = "\(kind) 0x\(key)"
        if let object { text += " \(object)" }
        if let version { text += " v\(version)" }
        if let fields { text += " " + JSONValue.object(fields).text }
        if let valueHex { text += " value 0x\(valueHex)\(valueBytes > 256 ? "…" : "") (\(valueBytes) bytes)" }
        return text
    }
}

/// What `strata inspect` shows.
public struct InspectReport: Sendable, Equatable, Codable {
    /// One entity's rows.
    public struct EntitySummary: Sendable, Equatable, Codable {
        /// The entity.
        public var name: String
        /// Its superentity, if any.
        public var superentity: String?
        /// Rows of exactly this entity (from the metadata's counters).
        public var rows: Int
        /// Attributes as `name: type` (with `indexed`, `optional` marks).
        public var attributes: [String]
        /// Relationships as `name → Destination` (to-many with `*`).
        public var relationships: [String]
    }

    /// The store.
    public var path: String
    /// The manifest: next file number and live files.
    public var nextFileNumber: UInt32
    /// The newest sequence number.
    public var lastSequence: UInt64
    /// Keys with a value.
    public var keyCount: Int
    /// Every live file, WALs then segments, with live and dead bytes.
    public var files: [FileSummary]
    /// Whether the store is a StrataStore: a metadata or model record, or rows, relationship
    /// keys or index entries in StrataStore's layout (SPEC.md [META-1]).
    public var isObjectStore: Bool
    /// The store's UUID (`NSStoreUUID`), if a StrataStore.
    public var storeIdentifier: String?
    /// The next reference ([KEY-3]).
    public var nextReference: Int64?
    /// The stored model's entities with their row counts ([ROW-5]); empty without a model record.
    public var entities: [EntitySummary]
    /// Row counts per entity from the metadata (also for stores without a model record).
    public var rowCounts: [String: Int]
    /// The coordinator's metadata keys and values.
    public var metadata: [String: JSONValue]
    /// The row layouts present ([ROW-1]: each row's header names its entity number and layout),
    /// with their rows: what a migration of the store would have to read.
    public var layouts: [LayoutRows] = []

    /// The rows written in one layout of one entity.
    public struct LayoutRows: Sendable, Equatable, Codable {
        /// The entity the stored model numbers so (`#n in Root` when it has no such number).
        public var entity: String
        /// The layout ID in the row headers (the first four bytes of the entity's version hash
        /// when the rows were written), in hex.
        public var layout: String
        /// The rows in this layout.
        public var rows: Int
        /// Whether it is the stored model's layout of the entity.
        public var current: Bool
        /// Which version of the model record ([ROW-5]) names the layout: 0 the current one, 1
        /// the one before, and so on (rows of an older version are read upgraded, [MIG-2]);
        /// `nil` when none does.
        public var modelVersion: Int?
    }
    /// The model versions the model record keeps ([ROW-5]): the current one and those whose
    /// layouts rows may still have; 0 without a model record.
    public var modelVersions = 0
    /// The relationships whose keys or ordered lists a lightweight migration left for the
    /// background build to write ([MIG-5]), as `Entity.relationship (keys)` or `(list)`:
    /// readers take them from the rows' old fields or keys meanwhile; and the rows of removed
    /// entities it has yet to delete ([MIG-4]), as `#number in KeySpace (retired rows)`:
    /// readers skip them. Empty when none.
    public var pending: [String] = []
}

/// One live file as `inspect` shows it.
public struct FileSummary: Sendable, Equatable, Codable {
    /// `wal` or `segment`.
    public var kind: String
    /// The file name.
    public var name: String
    /// Bytes on disk.
    public var sizeBytes: UInt64
    /// Bytes of entries still holding a key's newest value.
    public var liveBytes: UInt64
    /// Bytes of overwritten or deleted entries (and tombstones).
    public var deadBytes: UInt64
    /// WAL records.
    public var records: Int
    /// Entries.
    public var entries: Int
    /// Data blocks (segments).
    public var dataBlocks: Int
    /// Raw bytes per stored byte of the data blocks.
    public var compressionRatio: Double
    /// Lowest and highest sequence numbers in the file.
    public var firstSequence: UInt64?
    /// See ``firstSequence``.
    public var lastSequence: UInt64?
}

/// What `strata stats` shows: the numbers an operator tracks.
public struct StatsReport: Sendable, Equatable, Codable {
    /// The store.
    public var path: String
    /// Keys with a value.
    public var keyCount: Int
    /// Bytes of every live file.
    public var diskBytes: UInt64
    /// Bytes of entries holding a key's newest value (before compression).
    public var liveBytes: UInt64
    /// Disk bytes per byte of live data as stored (1.0: no dead data on disk); see
    /// ``StoreInspector``'s computation: each file's size is split in proportion to its live and
    /// dead entry bytes.
    public var spaceAmplification: Double
    /// Bytes of overwritten, deleted and tombstone entries (before compression), reclaimable by
    /// `strata compact`.
    public var deadBytes: UInt64
    /// Live WAL files and their bytes.
    public var walFiles: Int
    /// See ``walFiles``.
    public var walBytes: UInt64
    /// Live segments and their bytes.
    public var segmentFiles: Int
    /// See ``segmentFiles``.
    public var segmentBytes: UInt64
    /// Estimated memory of the in-memory index once the store is open.
    public var indexMemoryBytes: Int
    /// The index's bytes per key, the keys themselves included.
    public var indexBytesPerKey: Double
    /// Memory the live WALs' bytes take once the store is open (WAL values are read there,
    /// SPEC [WAL-5]).
    public var walMemoryBytes: Int
    /// The newest sequence number.
    public var lastSequence: UInt64
    /// Seconds this process took to open the store (recovery and index build).
    public var openSeconds: Double
    /// The row cache of the engine this process opened: lookups, hits, entries, bytes,
    /// pinned keys (counters start at zero on open: another process's cache is not visible).
    public var cache: [String: Double]
    /// Rows per entity for a StrataStore.
    public var rowCounts: [String: Int]
}

/// The library behind `strata inspect`, `dump` and `stats`: opens a store read-only and
/// describes it, creating and changing no file. Every function shares the store's lock for as
/// long as it reads (SPEC.md [DIR-5]: on read-only media without a usable `LOCK`, it reads
/// without one), so a store open for writing in another process is refused with
/// `StoreError/Code/locked`.
///
/// For example:
///
/// ```swift
/// let report = try StoreInspector.inspect(at: "/var/lib/app/store")
/// for file in report.files { print(file.name, file.sizeBytes) }
/// ```
public enum StoreInspector {
    /// Opens the store read-only, runs `body` and closes it; `logger` (none by default) hears
    /// what the engine tells while it opens ([EngineOptions.logger]).
    public static func withEngine<T>(
        at path: String, fileSystem: any FileSystem = PosixFileSystem(), logger: Logger? = nil, _ body: (Engine) throws -> T
    ) throws -> T {
        var options = EngineOptions()
        if let logger { options.logger = logger }
        options.readOnly = true
        options.compaction.automatic = false
        options.backgroundFlush = false
        options.fileSystem = fileSystem
        let engine = try Engine.open(at: path, options: options)
        defer { try? engine.close() }
        return try body(engine)
    }

    /// The manifest, the files with their live and dead bytes, and for a StrataStore its model
    /// and per-entity row counts.
    public static func inspect(at path: String, fileSystem: any FileSystem = PosixFileSystem(), logger: Logger? = nil) throws -> InspectReport {
        try withEngine(at: path, fileSystem: fileSystem, logger: logger) { engine in
            let stats = try engine.stats()
            let layouts = try engine.fileLayout()
            let usage = Dictionary((stats.wals + stats.segments).map { ($0.fileNumber, $0) }, uniquingKeysWith: { a, _ in a })
            let files = layouts.map { layout in
                let file = usage[layout.fileNumber]
                return FileSummary(
                    kind: layout.kind.rawValue, name: (layout.path as NSString).lastPathComponent, sizeBytes: layout.sizeBytes,
                    liveBytes: file?.liveBytes ?? 0, deadBytes: (file?.deadBytes ?? 0) + (file?.tombstoneBytes ?? 0),
                    records: layout.records, entries: layout.entries, dataBlocks: layout.dataBlocks,
                    compressionRatio: layout.compressionRatio, firstSequence: layout.firstSequence, lastSequence: layout.lastSequence)
            }
            let snapshot = try engine.snapshot()
            let record = try snapshot.get(KeyLayout.metadataKey).map { try MetadataRecord.decode($0) }
            let modelRecord = try snapshot.get(KeyLayout.modelKey).map { try ModelRecord.decodeRecord($0) }
            let model = modelRecord?.current.model
            // [META-1] A store that lost both records is still a StrataStore by its rows and keys.
            let isObjectStore = try record != nil || model != nil || StoreSurvey.survey(snapshot).isStrataStore
            let counts = record?.rowCounts ?? [:]
            let entities = (model?.entities ?? []).sorted { $0.name < $1.name }.map { entity in
                InspectReport.EntitySummary(
                    name: entity.name, superentity: entity.superentityName, rows: counts[entity.name] ?? 0,
                    attributes: entity.ownProperties.compactMap { $0 as? AttributeDescription }.map { attribute in
                        "\(attribute.name): \(attribute.attributeType)" + (attribute.isIndexed ? " indexed" : "")
                            + (attribute.isOptional ? "" : " required") + (attribute.isTransient ? " transient" : "")
                    },
                    relationships: entity.ownProperties.compactMap { $0 as? RelationshipDescription }.map { relationship in
                        "\(relationship.name) → \(relationship.destinationEntityName)\(relationship.isToMany ? "*" : "")"
                            + (relationship.inverseName.map { " (inverse \($0))" } ?? "")
                    })
            }
            var report = InspectReport(
                path: path, nextFileNumber: stats.nextFileNumber, lastSequence: stats.lastSequence, keyCount: stats.keyCount,
                files: files, isObjectStore: isObjectStore, storeIdentifier: record?.metadata["NSStoreUUID"]?.stringValue,
                nextReference: record?.nextReference, entities: entities, rowCounts: counts,
                metadata: (record?.metadata ?? [:]).mapValues(JSONValue.init))
            if isObjectStore {
                // Every row's header, read once (a scan of the rows).
                let layout = try modelRecord.flatMap { try StoreLayout(record: $0) }
                report.modelVersions = modelRecord?.versions.count ?? 0
                report.pending = modelRecord.map(Self.pendingWork) ?? []
                report.layouts = try StoreSurvey.survey(snapshot).rows.sorted { $0.key < $1.key }.map { kind, rows in
                    let entity = layout?.entity(number: kind.number).flatMap { layout?.keySpace(of: $0) == kind.root ? $0 : nil }
                    let version = modelRecord?.versions.firstIndex { version in
                        version.numbers.contains { $0.value == kind.number && version.layoutIDs[$0.key] == kind.layoutID }
                    }
                    return InspectReport.LayoutRows(
                        entity: entity?.name ?? "#\(kind.number) in \(kind.root)", layout: hexLayout(kind.layoutID), rows: rows,
                        current: entity.flatMap { layout?.layout(of: $0)?.layoutID } == kind.layoutID, modelVersion: version)
                }
            }
            return report
        }
    }

    /// [MIG-5] The pending keys and lists `record` lists, by the relationship of the current
    /// model they belong to (its declaring entity), in name order; then [MIG-4] its retired
    /// rows, by entity number and key space.
    static func pendingWork(in record: ModelRecord) -> [String] {
        let model = record.current.model
        var entityOfNumber: [UInt16: EntityDescription] = [:]
        for (name, number) in record.current.numbers { entityOfNumber[number] = model.entitiesByName[name] }
        var found = Set<String>()
        for version in record.versions.dropFirst() {
            for (oldName, program) in version.upgrades {
                guard let number = version.numbers[oldName], let entity = entityOfNumber[number] else { continue }
                for (target, upgrade) in program {
                    let kind: String
                    switch upgrade {
                    case .pendingKeys: kind = "keys"
                    case .listFromKeys: kind = "list"
                    case .field, .listOfOne, .constant, .fieldOf, .listOf: continue
                    }
                    let owner = entity.relationshipsByName[target]?.entity?.name ?? entity.name
                    found.insert("\(owner).\(target) (\(kind))")
                }
            }
        }
        let rows = record.retiredRows.sorted { $0.key < $1.key }.flatMap { space, numbers in
            numbers.sorted().map { "#\($0) in \(space) (retired rows)" }
        }
        return found.sorted() + rows
    }

    /// The operator's numbers: space amplification, key count, index memory, cache counters.
    public static func stats(at path: String, fileSystem: any FileSystem = PosixFileSystem(), logger: Logger? = nil) throws -> StatsReport {
        let start = ContinuousClock.now
        return try withEngine(at: path, fileSystem: fileSystem, logger: logger) { engine in
            let opened = ContinuousClock.now - start
            let stats = try engine.stats()
            let record = try engine.get(KeyLayout.metadataKey).map { try MetadataRecord.decode($0) }
            let cache = stats.cache
            let (whole, fraction) = opened.components
            return StatsReport(
                path: path, keyCount: stats.keyCount, diskBytes: stats.diskBytes, liveBytes: stats.liveBytes,
                spaceAmplification: Self.spaceAmplification(stats),
                deadBytes: (stats.wals + stats.segments).reduce(0) { $0 + $1.deadBytes + $1.tombstoneBytes },
                walFiles: stats.wals.count, walBytes: stats.wals.reduce(0) { $0 + $1.sizeBytes },
                segmentFiles: stats.segments.count, segmentBytes: stats.segments.reduce(0) { $0 + $1.sizeBytes },
                indexMemoryBytes: stats.indexMemoryBytes,
                indexBytesPerKey: stats.keyCount == 0 ? 0 : Double(stats.indexMemoryBytes) / Double(stats.keyCount),
                walMemoryBytes: stats.walMemoryBytes,
                lastSequence: stats.lastSequence, openSeconds: Double(whole) + Double(fraction) / 1e18,
                cache: [
                    "hits": Double(cache.hits), "misses": Double(cache.misses), "entries": Double(cache.entries),
                    "evictions": Double(cache.evictions), "pinnedBytes": Double(cache.pinnedBytes),
                    "unpinnedBytes": Double(cache.unpinnedBytes), "budgetBytes": Double(cache.budgetBytes),
                    "pinnedKeys": Double(cache.pinnedKeys), "walReads": Double(cache.walReads),
                ],
                rowCounts: record?.rowCounts ?? [:])
        }
    }

    /// Disk bytes per byte of live data as stored: each file's size is split between live and
    /// dead in proportion to its entries' live and dead bytes, so compression cancels out and
    /// 1.0 means no dead data on disk (empty files count as dead).
    static func spaceAmplification(_ stats: EngineStats) -> Double {
        let live = (stats.wals + stats.segments).reduce(0.0) { total, file in
            file.entryBytes == 0 ? total : total + Double(file.sizeBytes) * Double(file.liveBytes) / Double(file.entryBytes)
        }
        return live == 0 ? 1 : Double(stats.diskBytes) / live
    }

    /// One record: by engine key (hex, or text when `key` is not hex) or by object URI.
    ///
    /// - Throws: `StoreError/Code/notFound` when no such record exists,
    ///   `StoreError/Code/invalidArgument` for a URI that names no entity of the stored model.
    public static func record(at path: String, key: [UInt8]? = nil, objectURI: String? = nil, fileSystem: any FileSystem = PosixFileSystem()) throws -> DecodedRecord {
        try withEngine(at: path, fileSystem: fileSystem) { engine in
            let snapshot = try engine.snapshot()
            let decoder = try RecordDecoder(snapshot: snapshot)
            var lookup: [UInt8]
            if let key {
                lookup = key
            } else if let objectURI {
                lookup = try decoder.rowKey(forURI: objectURI)
            } else {
                throw StoreError(.invalidArgument, "name a record with a key or an object URI", path: path)
            }
            guard let value = try snapshot.get(lookup) else {
                throw StoreError(.notFound, "no record with key 0x\(hex(lookup))\(objectURI.map { " (\($0))" } ?? "")", path: path)
            }
            return decoder.decode(key: lookup, value: value)
        }
    }

    /// Streams every record in key order to `body` (until it returns false), decoded as far
    /// as the layout allows; `progress` is called with records done and the total.
    public static func dump(
        at path: String, fileSystem: any FileSystem = PosixFileSystem(), logger: Logger? = nil,
        progress: ((Int, Int) -> Void)? = nil, _ body: (DecodedRecord) throws -> Bool
    ) throws {
        try withEngine(at: path, fileSystem: fileSystem, logger: logger) { engine in
            let snapshot = try engine.snapshot()
            let decoder = try RecordDecoder(snapshot: snapshot)
            let total = snapshot.count
            var done = 0
            var failure: (any Error)?
            try snapshot.forEach { key, value in
                done += 1
                if done % 4096 == 0 { progress?(done, total) }
                do {
                    return try body(decoder.decode(key: key, value: value))
                } catch {
                    failure = error
                    return false
                }
            }
            if let failure { throw failure }
            progress?(done, total)
        }
    }
}

/// Decodes engine records by StrataStore's layout ([KEY-*], [ROW-*], [IDX-S1]).
struct RecordDecoder {
    let model: ManagedObjectModel?
    /// The row layouts of the stored model; rows cannot be decoded without it.
    let layout: StoreLayout?
    let storeIdentifier: String
    /// The snapshot records are read from: a row's keyed to-many relationships ([REL-1]) are
    /// shown with it.
    let snapshot: Snapshot

    init(snapshot: Snapshot) throws {
        self.snapshot = snapshot
        let metadataBytes = try snapshot.get(KeyLayout.metadataKey)
        let record = metadataBytes.flatMap { try? MetadataRecord.decode($0) }
        storeIdentifier = record?.metadata["NSStoreUUID"]?.stringValue ?? ""
        let modelBytes = try snapshot.get(KeyLayout.modelKey)
        let modelRecord = modelBytes.flatMap { try? ModelRecord.decodeRecord($0) }
        model = modelRecord?.current.model
        layout = modelRecord.flatMap { try? StoreLayout(record: $0) }
    }

    func uri(_ entity: String, _ reference: Int64) -> String { "x-coredata://\(storeIdentifier)/\(entity)/p\(reference)" }

    /// The row key an object URI names: `x-coredata://<store>/<Entity>/p<reference>`.
    func rowKey(forURI text: String) throws -> [UInt8] {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard text.hasPrefix("x-coredata://"), parts.count == 5, parts[4].hasPrefix("p"),
            let reference = Int64(parts[4].dropFirst())
        else {
            throw StoreError(.invalidArgument, "\"\(text)\" is not an object URI of the form x-coredata://<store>/<Entity>/p<reference>")
        }
        let entityName = String(parts[3]).removingPercentEncoding ?? String(parts[3])
        guard let model else {
            throw StoreError(.invalidArgument, "the store has no model record ([ROW-5]) to map \(entityName) to its key space; look the row up with --key")
        }
        guard let entity = model.entitiesByName[entityName] else {
            throw StoreError(.invalidArgument, "the stored model has no entity \(entityName) (entities: \(model.entities.map(\.name).sorted().joined(separator: ", ")))")
        }
        return KeyLayout.rowKey(root: layout?.keySpace(of: entity) ?? entity.rootEntityName, reference: reference)
    }

    func decode(key: [UInt8], value: [UInt8]) -> DecodedRecord {
        var record = DecodedRecord(key: hex(key), kind: "raw", valueBytes: value.count)
        func raw() -> DecodedRecord {
            var copy = record
            copy.kind = "raw"
            copy.valueHex = hex(value.prefix(256))
            return copy
        }
        if key == KeyLayout.metadataKey {
            guard let metadata = try? MetadataRecord.decode(value) else { return raw() }
            record.kind = "metadata"
            record.fields = [
                "nextReference": .number(Double(metadata.nextReference)),
                "rowCounts": .object(metadata.rowCounts.mapValues { .number(Double($0)) }),
                "metadata": .object(metadata.metadata.mapValues(JSONValue.init)),
            ]
            return record
        }
        if key == KeyLayout.modelKey {
            guard let modelRecord = try? ModelRecord.decodeRecord(value) else { return raw() }
            record.kind = "model"
            record.fields = [
                "entities": .array(modelRecord.current.model.entities.map(\.name).sorted().map(JSONValue.string)),
                "versions": .number(Double(modelRecord.versions.count)),
            ]
            return record
        }
        if key.first == KeyLayout.rowTag, let (_, reference) = ObjectChecker.Run.parseRowKey(key) {
            guard let layout, var row = try? StoredRow.decode(value, store: layout, context: "row") else { return raw() }
            try? row.loadRelationshipKeys(reference: reference, store: layout, snapshot: snapshot)
            record.kind = "row"
            record.entity = row.entity
            record.reference = reference
            record.version = row.version
            record.object = uri(row.entity, reference)
            var fields: [String: JSONValue] = row.attributes.mapValues(JSONValue.init)
            for (name, target) in row.toOne { fields[name] = target.map { JSONValue.string(uri($0.entity, $0.reference)) } ?? .null }
            for (name, targets) in row.toMany { fields[name] = .array(targets.map { JSONValue.string(uri($0.entity, $0.reference)) }) }
            record.fields = fields
            return record
        }
        if key.first == RelationshipKeys.tag, value.isEmpty, let parts = RelationshipKeys.parse(key) {
            record.kind = "relationship"
            record.reference = parts.owner
            var fields: [String: JSONValue] = ["hierarchy": .string(parts.root), "relationship": .string(parts.relationship)]
            if let member = layout?.entity(number: parts.member.entity) {
                fields["member"] = .string(uri(member.name, parts.member.reference))
            } else {
                fields["memberEntityNumber"] = .number(Double(parts.member.entity))
                fields["memberReference"] = .number(Double(parts.member.reference))
            }
            record.fields = fields
            return record
        }
        if key.first == IndexKey.tag, value.isEmpty {
            let body = key.dropFirst()
            let parts = body.split(separator: 0, maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3, let root = String(validating: parts[0], as: UTF8.self),
                let attribute = String(validating: parts[1], as: UTF8.self), let reference = IndexKey.reference(fromIndexKey: key)
            else { return raw() }
            record.kind = "index"
            record.reference = reference
            record.fields = ["hierarchy": .string(root), "attribute": .string(attribute)]
            return record
        }
        return raw()
    }
}

extension StatsReport {
    /// The row cache's counters in words and units: hits and misses with the hit rate, the
    /// entries and their bytes against the budget, pinned keys, evictions, reads served by
    /// WAL images. For example: `3 hits, 1 misses (75 % hits); 2 entries, 2.0 KiB of 1.0 MiB;
    /// 5 pinned keys (512 B); 7 evictions; 9 reads from WAL images`.
    public var rowCacheDescription: String { Self.rowCacheDescription(cache) }

    /// ``rowCacheDescription`` of the counters `cache` (``cache``'s names).
    public static func rowCacheDescription(_ cache: [String: Double]) -> String {
        func count(_ key: String) -> Int { Int(cache[key] ?? 0) }
        func bytes(_ key: String) -> String { StoreInspector.bytes(UInt64(max(0, cache[key] ?? 0))) }
        let hits = count("hits"), misses = count("misses")
        let rate = hits + misses == 0 ? "no reads yet" : String(format: "%.0f %% hits", Double(hits) * 100 / Double(hits + misses))
        return "\(hits) hits, \(misses) misses (\(rate)); \(count("entries")) entries, \(bytes("unpinnedBytes")) of \(bytes("budgetBytes"))"
            + "; \(count("pinnedKeys")) pinned keys (\(bytes("pinnedBytes"))); \(count("evictions")) evictions; \(count("walReads")) reads from WAL images"
    }
}

extension StoreInspector {
    /// `bytes` in binary units (B, KiB, MiB, GiB, TiB), one decimal above bytes, as the tool
    /// prints sizes: `512 B`, `2.0 KiB`, `64.0 MiB`.
    public static func bytes(_ bytes: UInt64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes), unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(bytes) B" : String(format: "%.1f %@", value, units[unit])
    }
}

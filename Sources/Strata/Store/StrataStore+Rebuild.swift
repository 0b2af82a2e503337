import Foundation
import ObjectGraph
import StrataEngine

extension StrataStore {
    /// `true` lets loading (read-write) rebuild a lost metadata record ([ROW-4]) from the rows
    /// and the coordinator's model, as ``rebuildMetadata(at:model:storeIdentifier:)`` does,
    /// instead of refusing the store with `ObjectGraphError/Code/storeCorrupted`. The model
    /// must pass [OPEN-1] against the model record, or, without one, against every row's header
    /// ([META-3]); otherwise the load is refused with `incompatibleModel` and nothing is
    /// written. Default `false`. SPEC.md [META-2].
    public static let repairOption = "StrataRepair"

    /// What ``StrataStore/rebuildMetadata(at:model:storeIdentifier:)`` (or a load) rebuilt.
    public struct MetadataRebuild: Sendable, Equatable {
        /// Whether the metadata record was missing (or did not decode) and was written anew,
        /// with the store identifier, the store type and the model's version hashes.
        public var rebuiltMetadataRecord = false
        /// Whether the metadata record was written (rebuilt, or its row counts or next
        /// reference corrected).
        public var rewroteMetadataRecord = false
        /// Whether the model record ([ROW-5]) was missing or described another model and was
        /// written from the application's model.
        public var rebuiltModelRecord = false
        /// Rows per concrete entity, counted from the rows.
        public var rowCounts: [String: Int]
        /// The next reference now recorded: above every reference a row, a relationship key or
        /// an index entry names.
        public var nextReference: Int64
        /// Index entries added or deleted ([IDX-S6]).
        public var indexEntriesChanged = 0
        /// The store's identifier (`NSStoreUUID`) in the metadata record.
        public var storeIdentifier: String?

        /// Whether anything was written.
        public var changedStore: Bool { rewroteMetadataRecord || rebuiltModelRecord || indexEntriesChanged > 0 }

        init(rowCounts: [String: Int], nextReference: Int64) {
            self.rowCounts = rowCounts
            self.nextReference = nextReference
        }
    }

    /// Rebuilds the metadata record ([ROW-4]) and the model record ([ROW-5]) of the store at
    /// `url` from its rows and the application's `model`, with the index entries ([IDX-S6]),
    /// in one engine transaction (SPEC.md [META-2]).
    ///
    /// First, the model must be the store's ([OPEN-1]): compared with the model record when it
    /// survives, else with the metadata's version hashes, else with every row's header (entity
    /// number, hierarchy and layout, [META-3]). A model that differs is refused with
    /// `ObjectGraphError/Code/incompatibleModel` and nothing is written. Then every row is
    /// decoded with `model`: the row counts are recounted, the next reference is raised above
    /// every reference a row, a relationship key or an index entry names (it never falls), and
    /// a lost metadata record is written anew with `storeIdentifier` (a new UUID when `nil`:
    /// object URIs made before the loss do not resolve), the store type and `model`'s version
    /// hashes. A surviving record keeps its identifier and coordinator metadata.
    ///
    /// For example, after `strata fsck` reports a store whose metadata and model records were
    /// lost:
    ///
    /// ```swift
    /// let rebuilt = try StrataStore.rebuildMetadata(at: storeURL, model: model)
    /// print(rebuilt.rowCounts, rebuilt.nextReference)
    /// ```
    ///
    /// - Throws: `ObjectGraphError/Code/incompatibleModel` naming every difference;
    ///   `ObjectGraphError/Code/storeLocked` when another process has the store open;
    ///   `ObjectGraphError/Code/storeCorrupted` when a row does not decode with `model`
    ///   (run `strata fsck --repair` first); engine errors otherwise.
    @discardableResult
    public static func rebuildMetadata(at url: URL, model: ManagedObjectModel, storeIdentifier: String? = nil) throws -> MetadataRebuild {
        guard url.isFileURL else { throw ObjectGraphError(.storeOpenFailed, "StrataStore needs a file URL naming its directory.") }
        var options = EngineOptions()
        options.compaction.automatic = false
        let shared = try SharedEngine.acquire(path: url.path, options: options) { engine in
            (try recordIfReadable(in: try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try engine.snapshot() }))?.nextReference ?? 1
        }
        defer { shared.release() }
        let snapshot = try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try shared.engine.snapshot() }
        let differences = try modelDifferences(
            of: model, configuration: nil, record: try recordIfReadable(in: snapshot) ?? MetadataRecord(),
            modelRecord: try modelRecord(in: snapshot), in: snapshot)
        if !differences.isEmpty { throw ObjectGraphError.incompatibleModel(differences, storeURL: url) }
        return try reconcile(in: shared, model: model, storeIdentifier: storeIdentifier, force: true)
    }

    /// [META-1] The error for a store that has rows or keys but no metadata record: loading it
    /// as new would hand out references from 1 again and count nothing.
    static func lostMetadataError(_ survey: StoreSurvey, at url: URL, readOnly: Bool) -> ObjectGraphError {
        let model = survey.hasModelRecord
            ? "its model record survives, so `strata fsck --repair \(url.path)` rebuilds the metadata record"
            : "its model record is lost too, so the metadata record needs the application's model: run `strata fsck --repair \(url.path)` and open the store read-write with the model, or open it with StrataStore.repairOption, or call StrataStore.rebuildMetadata(at:model:)"
        return ObjectGraphError(
            .storeCorrupted,
            "The StrataStore at \(url.path) has lost its metadata record ([ROW-4]: row counts, next reference, store UUID, version hashes) but holds \(survey.keySummary); \(model)\(readOnly ? " (a read-only load cannot rebuild it)" : ""). Nothing was written.")
    }
}

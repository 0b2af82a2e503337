import Dispatch
import Foundation
import ObjectGraph
import StrataEngine
import Synchronization
import StrataSync

extension StrataStore {
    /// How a read-write load builds the index entries a model adds, deletes retired keys
    /// ([MIG-4]) and writes pending relationship keys ([MIG-5]) ([IDX-S9]): `"background"`
    /// (the default: the store is usable at once; no fetch uses the indexes being built until
    /// the build completes), `"synchronous"` (the load returns once the work is done, as
    /// before [IDX-S9]) or `"deferred"` (this load does none of it: the store is used as
    /// during a build that has not started, and a later read-write load without the option
    /// does the work; for short-lived processes).
    public static let indexBuildOption = "StrataIndexBuild"
    /// Rows a background index build reads per transaction ([IDX-S9]); an integer, default
    /// 2,000. Smaller batches hold up saves for less time each.
    public static let indexBuildBatchOption = "StrataIndexBuildBatch"

    /// The work of a background index build ([IDX-S9]).
    struct IndexBuild: Sendable {
        /// Per hierarchy key space ([KEY-2]), the attributes whose entries are built.
        let builds: [(root: String, attributes: [String])]
        /// [SAVE-4] Per key space, the uniqueness-constrained attributes whose entries are
        /// built: saves check constraints through them, so a deferred build has the load
        /// build them before it returns (``buildConstrainedEntries(_:shared:layout:batchRows:)``);
        /// a background one builds them with the rest (``constrainedInBackground()``) while
        /// saves that check a constraint wait for it.
        var constrained: [(root: String, attributes: [String])] = []
        /// The constrained attributes built, as `Entity.attribute`.
        var constrainedNames: Set<String> = []
        /// Index key prefixes ([IDX-S1]) of attributes no entity indexes any more, and the
        /// prefixes of keys a migration retired ([MIG-4]), deleted.
        let drops: [[UInt8]]
        /// The attributes whose entries the store holds before the build (`Entity.attribute`)
        /// and keeps through it (those of dropped prefixes left out): what a model record
        /// written meanwhile says ([ROW-5]).
        var existing: Set<String>
        /// Whether the record must stop claiming entries before they are dropped.
        let disclaims: Bool
        /// [MIG-5] The key spaces whose rows in older layouts hold members of relationships
        /// whose keys are pending, written first.
        var pendingKeySpaces: [String] = []
        /// [MIG-4] Whether the record lists retired rows, deleted first with their keys.
        var retiredRows = false

        /// Whether nothing is left for the background once the constrained entries are built.
        var isEmptyButConstrained: Bool { builds.isEmpty && drops.isEmpty && pendingKeySpaces.isEmpty && !retiredRows && !disclaims }

        /// This build with its constrained attributes built in the background with the others
        /// (each key space's attributes in one pass); ``constrainedNames`` still names them.
        func constrainedInBackground() -> IndexBuild {
            var attributes: [String: Set<String>] = [:]
            for (root, names) in builds + constrained { attributes[root, default: []].formUnion(names) }
            var merged = IndexBuild(
                builds: attributes.sorted { $0.key < $1.key }.map { ($0.key, $0.value.sorted()) },
                drops: drops, existing: existing, disclaims: disclaims, pendingKeySpaces: pendingKeySpaces, retiredRows: retiredRows)
            merged.constrainedNames = constrainedNames
            return merged
        }
    }

    /// A build in progress: its completion, its cancellation, its progress and its error.
    ///
    /// Thread safety: the group and atomics are thread-safe; `failure` is behind its lock.
    final class IndexBuildTask: Sendable {
        let done = DispatchGroup()
        let cancelled = Atomic<Bool>(false)
        let rowsDone = Atomic<Int>(0)
        let rowsTotal: Int
        let failure = Locked<(any Error)?>(nil)
        /// Whether the load deferred the build (``indexBuildOption`` `"deferred"`): it never runs.
        let deferred: Bool
        /// [SAVE-4] Whether it builds entries of uniqueness-constrained attributes: a save that
        /// checks a constraint waits for it (``waitForConstraintEntries()``).
        let checksConstraints: Bool

        init(rowsTotal: Int, deferred: Bool = false, checksConstraints: Bool = false) {
            self.rowsTotal = rowsTotal
            self.deferred = deferred
            self.checksConstraints = checksConstraints
        }
    }

    /// The background build `model` needs in the store of `snapshot`, whose model record is
    /// `record`, or `nil` when its index entries are current, or the store has no model record
    /// of `model`'s version. Entries of uniqueness-constrained attributes are its
    /// ``IndexBuild/constrained`` part, which the load builds before it returns (saves check
    /// constraints through the entries, [SAVE-4]).
    static func plannedIndexBuild(for model: ManagedObjectModel, record: ModelRecord?, in snapshot: Snapshot) throws -> IndexBuild? {
        guard let record, model.differences(fromStoreModel: record.current.model).isEmpty else { return nil }
        // [MIG-5] Relationship keys a migration left pending are written by the same build.
        let pendingSpaces = record.hasPendingKeys ? pendingKeySpaces(try StoreLayout(model: model, record: record)) : []
        let stored = indexSignature(of: record.current.model), wanted = indexSignature(of: model)
        // A prefix (root, attribute) holds the entries of every entity of the hierarchy with
        // that attribute; one the model does not ask for (an attribute no longer indexed, or
        // renamed) is dropped.
        var kept = Set<[UInt8]>()
        for entity in model.entities {
            for attribute in entity.attributesWithIndexEntries { kept.insert(IndexKey.prefix(root: record.keySpace(ofRoot: entity.rootEntityName), attribute: attribute.name)) }
        }
        // [MIG-4] Keys a migration retired go with them.
        let retired = record.retired.sorted().flatMap(\.prefixes)
        // An index prefix inside a retired key space goes with it, not on its own.
        let drops = presentIndexPrefixes(in: snapshot).filter { prefix in
            !kept.contains(prefix) && !retired.contains { prefix.starts(with: $0) }
        } + retired
        let retiredRows = !record.retiredRows.isEmpty
        guard stored != wanted || !drops.isEmpty || !pendingSpaces.isEmpty || retiredRows else { return nil }
        // Per key space, the attributes to build; an attribute some entity constrains there is
        // built by the load ([SAVE-4]), the others in the background.
        var builds: [String: Set<String>] = [:], constrained: [String: Set<String>] = [:]
        var built: [(name: String, space: String, attribute: String)] = []
        for name in wanted.subtracting(stored).sorted() {
            let parts = name.split(separator: ".", maxSplits: 1).map(String.init)
            guard parts.count == 2, let entity = model.entitiesByName[parts[0]], let attribute = entity.attributesByName[parts[1]] else { return nil }
            let space = record.keySpace(ofRoot: entity.rootEntityName)
            built.append((name, space, attribute.name))
            if attribute.isConstrained { constrained[space, default: []].insert(attribute.name) }
        }
        for (_, space, attribute) in built where constrained[space]?.contains(attribute) != true {
            builds[space, default: []].insert(attribute)
        }
        let constrainedNames = Set(built.filter { constrained[$0.space]?.contains($0.attribute) == true }.map(\.name))
        // The record must not claim entries the build deletes (a load with a model indexing
        // them again would trust a half-deleted index): claimed are those of kept prefixes.
        let dropped = Set(drops)
        let claimed = stored.filter { name in
            let parts = name.split(separator: ".", maxSplits: 1).map(String.init)
            guard parts.count == 2, let entity = record.current.model.entitiesByName[parts[0]] else { return false }
            return !dropped.contains(IndexKey.prefix(root: record.keySpace(ofRoot: entity.rootEntityName), attribute: parts[1]))
        }
        return IndexBuild(
            builds: builds.sorted { $0.key < $1.key }.map { ($0.key, $0.value.sorted()) },
            constrained: constrained.sorted { $0.key < $1.key }.map { ($0.key, $0.value.sorted()) }, constrainedNames: constrainedNames,
            drops: drops, existing: claimed, disclaims: claimed != stored, pendingKeySpaces: pendingSpaces, retiredRows: retiredRows)
    }

    /// The index prefixes ([IDX-S1]: `0x02 root 0x00 attribute 0x00`) that hold entries, in
    /// key order: one seek per prefix.
    static func presentIndexPrefixes(in snapshot: Snapshot) -> [[UInt8]] {
        var prefixes: [[UInt8]] = []
        var cursor: [UInt8] = [IndexKey.tag]
        while true {
            var first: [UInt8]? = nil
            snapshot.forEachKey(from: cursor, to: [IndexKey.tag + 1]) { key in
                first = key
                return false
            }
            guard let key = first, let rootEnd = key.dropFirst().firstIndex(of: 0),
                let attributeEnd = key[(rootEnd + 1)...].firstIndex(of: 0)
            else { break }
            let prefix = Array(key[...attributeEnd])
            prefixes.append(prefix)
            cursor = prefixEnd(prefix)
        }
        return prefixes
    }

    /// The rows `build` reads, by the metadata's row counts (`counts`, per entity): those of
    /// each key space it scans, once per pass (retired rows' headers first, then pending keys,
    /// then each hierarchy's entries); what ``indexBuildProgress`` is a share of.
    static func rowsRead(by build: IndexBuild, counts: [String: Int], layout: StoreLayout) -> Int {
        var rowsBySpace: [String: Int] = [:]
        for entity in layout.model.entities { rowsBySpace[layout.keySpace(of: entity), default: 0] += counts[entity.name] ?? 0 }
        let spaces = (build.retiredRows ? layout.record.retiredRows.keys.sorted() : []) + build.pendingKeySpaces + build.builds.map(\.root)
        return spaces.reduce(0) { $0 + (rowsBySpace[$1] ?? 0) }
    }

    /// Rows an index build reads per transaction: ``indexBuildBatchOption``, 2,000 by default.
    var indexBuildBatchRows: Int {
        if case .int64(let rows)? = options[Self.indexBuildBatchOption], rows > 0 { return Int(rows) }
        return 2_000
    }

    /// Starts `build` on a background queue ([IDX-S9]): no fetch uses the indexes it builds,
    /// and saves write the model record with the entries that exist, until it completes.
    /// With `deferred`, the store is left as during a build that has not started, and no
    /// build runs.
    func startIndexBuild(
        _ build: IndexBuild, shared: SharedEngine, layout: StoreLayout, rowsTotal: Int, checksConstraints: Bool = false, deferred: Bool = false
    ) {
        let task = IndexBuildTask(rowsTotal: rowsTotal, deferred: deferred, checksConstraints: checksConstraints)
        let batchRows = indexBuildBatchRows
        state.withLock {
            $0.indexBuild = task
            $0.indexEntriesOnDisk = build.existing
            $0.unbuiltIndexes = Set(build.builds.flatMap { root, attributes in attributes.map { root + "\u{0}" + $0 } })
        }
        indexBuildRunning.store(true, ordering: .relaxed)
        if deferred { return }
        task.done.enter()
        DispatchQueue.global(qos: .utility).async { [weak self] in
            defer { task.done.leave() }
            do {
                let finished = try Self.runIndexBuild(build, shared: shared, layout: layout, task: task, batchRows: batchRows)
                guard finished, let self else { return }
                // The record now says what the model asks for, in the transaction that ends
                // the build (no save in between: the saves are settled).
                try shared.withSavesSettled { _ in
                    var batch = WriteBatch()
                    batch.put(KeyLayout.modelKey, layout.record.retiring([]).withoutPendingKeys().encode())
                    let sequence = try mappingEngineErrors("finish the index build") { () throws(StoreError) in try shared.engine.commit(batch) }
                    layout.notePendingKeysWritten(at: sequence)
                    self.state.withLock {
                        $0.indexEntriesOnDisk = nil
                        $0.modelRecordCurrent = true
                        $0.unbuiltIndexes = []
                    }
                    self.indexBuildRunning.store(false, ordering: .relaxed)
                }
                shared.engine.logger.notice("built the model's index entries in the background", metadata: [
                    "path": "\(shared.engine.path)", "rows": "\(task.rowsDone.load(ordering: .relaxed))",
                ])
            } catch {
                task.failure.withLock { $0 = error }
                shared.engine.logger.error("the background index build failed; fetches scan until a load builds the entries", metadata: [
                    "path": "\(shared.engine.path)", "error": "\(error)",
                ])
            }
        }
    }

    /// Runs `build` batch by batch, each batch in one transaction with the saves settled, so
    /// a save changes a row's entries either before the batch reads the row or after it
    /// wrote them. `false` when cancelled.
    private static func runIndexBuild(
        _ build: IndexBuild, shared: SharedEngine, layout: StoreLayout, task: IndexBuildTask, batchRows: Int
    ) throws -> Bool {
        let engine = shared.engine
        if build.disclaims {
            // First the record stops claiming what will be deleted.
            try shared.withSavesSettled { _ in
                var record = layout.record
                record.versions[0].indexEntries = build.existing
                var batch = WriteBatch()
                batch.put(KeyLayout.modelKey, record.encode())
                _ = try mappingEngineErrors("write the model record") { () throws(StoreError) in try engine.commit(batch) }
            }
        }
        // [MIG-4] Retired rows and every key naming them, pass by pass, a batch of keys read
        // per transaction (saves never write such keys: no object of a removed entity exists).
        if build.retiredRows {
            let deletion = try shared.withSavesSettled { _ in
                let snapshot = try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try engine.snapshot() }
                return try retiredRowDeletion(of: layout.record, in: snapshot)
            }
            task.rowsDone.add(deletion.rowsScanned, ordering: .relaxed)
            for pass in deletion.passes() {
                var cursor = pass.from
                while true {
                    if task.cancelled.load(ordering: .relaxed) { return false }
                    let next = try shared.withSavesSettled { _ -> [UInt8]? in
                        let snapshot = try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try engine.snapshot() }
                        var batch = WriteBatch()
                        let next = deleteRetired(pass, from: cursor, limit: batchRows, in: snapshot, into: &batch)
                        if !batch.isEmpty {
                            _ = try mappingEngineErrors("delete retired rows") { () throws(StoreError) in try engine.commit(batch) }
                        }
                        return next
                    }
                    guard let next else { break }
                    cursor = next
                }
            }
        }
        // [MIG-5] Pending relationship keys, batch by batch like the entries below: a save
        // of a row in an older layout puts its pending keys itself, before or after a batch
        // reads the row.
        for root in build.pendingKeySpaces {
            var cursor = KeyLayout.rowPrefix(root: root)
            while true {
                if task.cancelled.load(ordering: .relaxed) { return false }
                let more = try shared.withSavesSettled { _ -> Bool in
                    let snapshot = try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try engine.snapshot() }
                    var batch = WriteBatch()
                    let (rows, next) = try writePendingKeys(layout: layout, root: root, in: snapshot, from: cursor, limit: batchRows, into: &batch)
                    if !batch.isEmpty {
                        _ = try mappingEngineErrors("write relationship keys") { () throws(StoreError) in try engine.commit(batch) }
                    }
                    task.rowsDone.add(rows, ordering: .relaxed)
                    guard let next else { return false }
                    cursor = next
                    return true
                }
                if !more { break }
            }
        }
        for (root, attributes) in build.builds {
            guard try buildEntries(of: attributes, in: root, shared: shared, layout: layout, batchRows: batchRows, task: task) else { return false }
        }
        for prefix in build.drops {
            while true {
                if task.cancelled.load(ordering: .relaxed) { return false }
                let more = try shared.withSavesSettled { _ -> Bool in
                    let snapshot = try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try engine.snapshot() }
                    var batch = WriteBatch()
                    snapshot.forEachKey(from: prefix, to: StrataStore.prefixEnd(prefix)) { key in
                        batch.delete(key)
                        return batch.count < batchRows
                    }
                    guard !batch.isEmpty else { return false }
                    _ = try mappingEngineErrors("delete index entries") { () throws(StoreError) in try engine.commit(batch) }
                    return true
                }
                if !more { break }
            }
        }
        return true
    }

    /// Builds the index entries of `attributes` for every row of key space `root`, batch by
    /// batch (each batch of `batchRows` rows a transaction with the saves settled, so a save
    /// changes a row's entries either before the batch reads the row or after it wrote them).
    /// `false` when `task` is cancelled.
    static func buildEntries(
        of attributes: [String], in root: String, shared: SharedEngine, layout: StoreLayout, batchRows: Int, task: IndexBuildTask?
    ) throws -> Bool {
        let engine = shared.engine
        var cursor = KeyLayout.rowPrefix(root: root)
        let end = KeyLayout.rowPrefixEnd(root: root)
        let prefixes = attributes.map { IndexKey.prefix(root: root, attribute: $0) }
        // [MIG-2] Rows in an older layout are read upgraded, one at a time, in this buffer.
        let scratch = layout.hasLegacy ? RowScratch() : nil
        while true {
            if task?.cancelled.load(ordering: .relaxed) == true { return false }
            let more = try shared.withSavesSettled { _ -> Bool in
                let snapshot = try mappingEngineErrors("take a snapshot") { () throws(StoreError) in try engine.snapshot() }
                var batch = WriteBatch()
                var rows = 0
                var last: [UInt8]? = nil
                try forEachView(in: snapshot, from: cursor, to: end, reading: "scan \(root) rows") { key, value in
                    guard let reference = KeyLayout.reference(fromKeyBytes: key) else { return true }
                    // Read where the engine holds it, only the attributes decoded; a
                    // retired row ([MIG-4]) has no entries.
                    if !layout.isRetiredRow(value),
                        case let row = try RowFields(
                            value, store: layout, context: .key(root: root, reference: reference), readByEngine: true, scratch: scratch),
                        let entity = layout.entity(number: row.entityNumber)
                    {
                        for (name, prefix) in zip(attributes, prefixes) {
                            guard let attribute = entity.attributesByName[name], attribute.hasIndexEntries else { continue }
                            var indexKey = prefix
                            IndexKey.encode(try row.attribute(atOrdinal: attribute.ordinal) ?? .null, into: &indexKey)
                            KeyLayout.appendReference(reference, to: &indexKey)
                            batch.put(indexKey, [])
                        }
                    }
                    rows += 1
                    if rows >= batchRows {
                        last = Array(key)
                        return false
                    }
                    return true
                }
                if !batch.isEmpty {
                    _ = try mappingEngineErrors("write index entries") { () throws(StoreError) in try engine.commit(batch) }
                }
                task?.rowsDone.add(rows, ordering: .relaxed)
                guard let last else { return false }
                cursor = last + [0x00]
                return true
            }
            if !more { break }
        }
        return true
    }

    /// [SAVE-4] Builds, before the load returns, the entries of the uniqueness-constrained
    /// attributes `build` names (saves check constraints through them), and leaves the rest of
    /// the build to the background: the model record it returns with claims them too; `nil`
    /// when nothing is left, the record then written as the model's.
    static func buildConstrainedEntries(_ build: IndexBuild, shared: SharedEngine, layout: StoreLayout, batchRows: Int) throws -> IndexBuild? {
        // No save runs yet: larger batches than the background's cost fewer commits.
        for (root, attributes) in build.constrained {
            _ = try buildEntries(of: attributes, in: root, shared: shared, layout: layout, batchRows: max(batchRows, 50_000), task: nil)
        }
        var rest = build
        rest.existing.formUnion(build.constrainedNames)
        rest.constrained = []
        rest.constrainedNames = []
        var record = layout.record
        if !rest.isEmptyButConstrained { record.versions[0].indexEntries = rest.existing }
        try shared.withSavesSettled { _ in
            var batch = WriteBatch()
            batch.put(KeyLayout.modelKey, record.encode())
            _ = try mappingEngineErrors("write the model record") { () throws(StoreError) in try shared.engine.commit(batch) }
        }
        return rest.isEmptyButConstrained ? nil : rest
    }

    /// How far a background index build is ([IDX-S9]): the share of rows read (0 to 1), or
    /// `nil` when none runs (fetches then use every index of the model).
    public var indexBuildProgress: Double? {
        guard let task = state.withLock({ $0.indexBuild }), !task.cancelled.load(ordering: .relaxed) else { return nil }
        if task.deferred { return 0 }
        if task.done.wait(timeout: .now()) == .success { return nil }
        return min(1, Double(task.rowsDone.load(ordering: .relaxed)) / Double(max(1, task.rowsTotal)))
    }

    /// Blocks until the background index build ([IDX-S9]) of this load completes; returns at
    /// once when none runs.
    ///
    /// - Throws: the build's error (fetches keep scanning; the next read-write load builds
    ///   the entries again); `ObjectGraphError/Code/invalidArgument` when the load deferred
    ///   its build (``indexBuildOption`` `"deferred"`), which would never complete.
    public func waitForIndexBuild() throws {
        guard let task = state.withLock({ $0.indexBuild }) else { return }
        if task.deferred {
            throw ObjectGraphError(
                .invalidArgument,
                "The StrataStore at \(url?.path ?? "?") was loaded with \(Self.indexBuildOption) \"deferred\": its build does not run; a read-write load without the option runs it.")
        }
        task.done.wait()
        if let failure = task.failure.withLock({ $0 }) { throw failure }
    }

    /// [SAVE-4] Before a save that checks uniqueness constraints: waits for a background build
    /// that writes entries of constrained attributes (the check looks values up in them), so
    /// the save is checked against every row. Returns at once when none runs.
    ///
    /// - Throws: `ObjectGraphError/Code/storeIOFailed` when the build failed, or was stopped
    ///   (the store removed or reopened meanwhile): the entries are incomplete and the save,
    ///   which could duplicate a row it cannot see, writes nothing.
    func waitForConstraintEntries() throws {
        guard indexBuildRunning.load(ordering: .relaxed), let task = state.withLock({ $0.indexBuild }), task.checksConstraints, !task.deferred else {
            return
        }
        task.done.wait()
        if let failure = task.failure.withLock({ $0 }) {
            throw ObjectGraphError(
                .storeIOFailed,
                "The StrataStore at \(url?.path ?? "?") could not build the index entries its uniqueness constraints are checked through (\(failure)), so the save was not checked and nothing was written. Add the store again to build them.")
        }
        if task.cancelled.load(ordering: .relaxed) {
            throw ObjectGraphError(
                .storeIOFailed,
                "The StrataStore at \(url?.path ?? "?") was removed or reopened while it built the index entries its uniqueness constraints are checked through, so the save was not checked and nothing was written. Save again once the store is added.")
        }
    }

    /// Stops a background build and waits for its batch in progress (before the engine closes).
    func cancelIndexBuild() {
        guard let task = state.withLock({ state -> IndexBuildTask? in
            defer { state.indexBuild = nil }
            return state.indexBuild
        }) else { return }
        task.cancelled.store(true, ordering: .relaxed)
        task.done.wait()
        state.withLock { $0.unbuiltIndexes = [] }
        indexBuildRunning.store(false, ordering: .relaxed)
    }
}

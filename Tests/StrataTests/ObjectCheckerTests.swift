import Foundation
import ObjectGraph
@testable import Strata
import StrataEngine
import Testing

/// What the object-level half of fsck counts as a StrataStore.
@Suite struct ObjectCheckerTests {
    // An engine store whose keys merely begin like StrataStore rows (0x01 …) has no metadata or
    // model record: it is not checked as a StrataStore, so none of its values is "undecodable".
    @Test func anEngineStoreWithRowLikeKeysIsNotCheckedAsAStrataStore() throws {
        let store = TemporaryStore()
        let engine = try Engine.open(at: store.url.path)
        var batch = WriteBatch()
        for reference in 1...50 {
            batch.put(KeyLayout.rowKey(root: "Customer", reference: Int64(reference)), Array("not a row".utf8))
        }
        _ = try engine.commit(batch)
        let report = try ObjectChecker.check(engine: engine, repair: false)
        #expect(!report.isObjectStore)
        #expect(report.problems.isEmpty)
        #expect(report.rows == 0)
        // With a metadata record the same keys are rows. Rows of format 3 decode only through
        // the model record ([ROW-1], [ROW-5]); without it the checker says so once and judges
        // no row, and a repair deletes nothing.
        var metadata = WriteBatch()
        metadata.put(KeyLayout.metadataKey, MetadataRecord(nextReference: 51, rowCounts: ["Customer": 50]).encode())
        _ = try engine.commit(metadata)
        let asStore = try ObjectChecker.check(engine: engine, repair: false)
        #expect(asStore.isObjectStore)
        #expect(asStore.problems.filter { $0.kind == .undecodableRow }.isEmpty)
        #expect(asStore.problems.filter { $0.kind == .model }.count == 1)
        let repaired = try ObjectChecker.check(engine: engine, repair: true)
        #expect(repaired.repairs.allSatisfy { !$0.contains("deleted undecodable row") })
        for reference in 1...50 {
            #expect(try engine.get(KeyLayout.rowKey(root: "Customer", reference: Int64(reference))) != nil)
        }
        // With a model record, the same bytes are rows of Customer that do not decode.
        let model = try ManagedObjectModel(entities: [EntityDescription(name: "Customer", properties: [.attribute("name", .string)])])
        var withModel = WriteBatch()
        withModel.put(KeyLayout.modelKey, ModelRecord.encode(model))
        _ = try engine.commit(withModel)
        let modelled = try ObjectChecker.check(engine: engine, repair: false)
        #expect(modelled.problems.filter { $0.kind == .undecodableRow }.count == 50)
        try engine.close()
    }
}

import Foundation
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
        // With a metadata record the same keys are rows, and none of them decodes.
        var metadata = WriteBatch()
        metadata.put(KeyLayout.metadataKey, MetadataRecord(nextReference: 51, rowCounts: ["Customer": 50]).encode())
        _ = try engine.commit(metadata)
        let asStore = try ObjectChecker.check(engine: engine, repair: false)
        #expect(asStore.isObjectStore)
        #expect(asStore.problems.filter { $0.kind == .undecodableRow }.count == 50)
        try engine.close()
    }
}

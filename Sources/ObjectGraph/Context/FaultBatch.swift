/// The results of one fetch with a ``FetchRequest/fetchBatchSize``, in order: the faults
/// past the first batch keep no row, and the first of a batch to fire loads the rows of
/// its whole batch (Core Data's batched fetch results).
///
/// Thread safety: made by a fetch and read when a fault fires, both on the context's
/// thread; immutable.
final class FaultBatch {
    /// The fetch's results, by position.
    let ids: [ManagedObjectID]
    /// The number of results in a batch.
    let size: Int

    init(ids: [ManagedObjectID], size: Int) {
        self.ids = ids
        self.size = size
    }

    /// The positions of the batch holding `index`.
    func range(around index: Int) -> Range<Int> {
        let start = index / size * size
        return start..<min(start + size, ids.count)
    }
}

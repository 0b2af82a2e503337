/// The results of one fetch with a ``FetchRequest/fetchBatchSize``, in order: the faults
/// past the first batch keep no row, and the first of a batch to fire loads the rows of
/// its whole batch (Core Data's batched fetch results).
///
/// Thread safety: made by a fetch and read when a fault fires, both on the context's
/// thread (the objects holding it are that context's); immutable but for ``positions``, made
/// there on first use.
final class FaultBatch {
    /// The fetch's results, by position.
    let ids: [ManagedObjectID]
    /// The number of results in a batch.
    let size: Int
    /// The position of each result, made when the first fault of a later batch fires (most
    /// batched fetches never reach one): a result's fault keeps only its batch.
    @exclusivity(unchecked) private var positions: [ManagedObjectID: Int]?

    init(ids: [ManagedObjectID], size: Int) {
        self.ids = ids
        self.size = size
    }

    /// The position of the result `id`, or `nil` if it is not one.
    func index(of id: ManagedObjectID) -> Int? {
        if let positions { return positions[id] }
        var made: [ManagedObjectID: Int] = [:]
        made.reserveCapacity(ids.count)
        // An ID given twice (a fetch gives each once) keeps its first position.
        for (index, id) in ids.enumerated() where made[id] == nil { made[id] = index }
        positions = made
        return made[id]
    }

    /// The positions of the batch holding `index`.
    func range(around index: Int) -> Range<Int> {
        let start = index / size * size
        return start..<min(start + size, ids.count)
    }
}

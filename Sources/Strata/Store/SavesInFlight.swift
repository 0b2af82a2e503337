import StrataEngine

/// The saves submitted to the engine and not yet known to be committed ([SAVE-3]): each
/// save builds on the ones before it without waiting for their sync, so concurrent saves share
/// one (the engine's group commit).
///
/// Protected by ``SharedEngine/saveLock``.
struct SavesInFlight {
    /// One submitted save: what it writes and the metadata record it wrote.
    struct Save {
        let number: UInt64
        let ticket: CommitTicket
        let batch: WriteBatch
        /// The batch's puts (the value) and deletes (`nil`) by key, made when a save is built
        /// while this one is in flight (most saves are not, and never pay for it).
        var writes: [[UInt8]: [UInt8]?]?
        let record: MetadataRecord
    }

    /// In submission order (the engine commits them in that order).
    var saves: [Save] = []
    /// Saves built so far.
    var count: UInt64 = 0

    /// Records a save submitted with `ticket`.
    mutating func submitted(_ batch: WriteBatch, ticket: CommitTicket, record: MetadataRecord) -> UInt64 {
        saves.append(Save(number: count, ticket: ticket, batch: batch, writes: nil, record: record))
        return count
    }

    /// What a save built now reads: `snapshot` through the saves in flight (whose writes are
    /// indexed by key now, if they are not yet).
    mutating func reads(over snapshot: Snapshot) -> SaveReads {
        for index in saves.indices where saves[index].writes == nil {
            var writes: [[UInt8]: [UInt8]?] = [:]
            writes.reserveCapacity(saves[index].batch.count)
            saves[index].batch.forEach { key, value in writes[key] = .some(value) }
            saves[index].writes = writes
        }
        return SaveReads(snapshot: snapshot, inFlight: saves.map { $0.writes ?? [:] })
    }

    /// Save `number` committed: it and every save before it are in the engine's snapshots now.
    mutating func committed(_ number: UInt64) {
        saves.removeAll { $0.number <= number }
    }

    /// Save `number` failed: the saves after it, built on it, fail in the engine too.
    mutating func failed(_ number: UInt64) {
        saves.removeAll { $0.number >= number }
    }
}

/// What a save reads: the engine's snapshot seen through the saves in flight, newest first.
struct SaveReads {
    let snapshot: Snapshot
    /// Each save in flight's writes by key, oldest first.
    let inFlight: [[[UInt8]: [UInt8]?]]

    /// The value of `key`: the last save in flight that writes it, else the snapshot's.
    func get(_ key: [UInt8]) throws(StoreError) -> [UInt8]? {
        for writes in inFlight.reversed() {
            if let written = writes[key] { return written }
        }
        return try snapshot.get(key)
    }

    /// The index entries ([IDX-S1]) the saves in flight write, each key's newest write
    /// (`true`: put, `false`: delete), in key order. A save that looks values up makes it once,
    /// so that each lookup is a binary search rather than a pass over every write in flight.
    func inFlightIndexWrites() -> [(key: [UInt8], put: Bool)] {
        guard !inFlight.isEmpty else { return [] }
        var newest: [[UInt8]: Bool] = [:]
        for writes in inFlight {
            for (key, value) in writes where key.first == IndexKey.tag { newest[key] = value != nil }
        }
        return newest.map { (key: $0.key, put: $0.value) }.sorted { $0.key.lexicographicallyPrecedes($1.key) }
    }

    /// The keys from `lowerBound` up to `upperBound`, sorted: the snapshot's, with `writes`
    /// (``inFlightIndexWrites()``, the saves in flight's) applied.
    func keys(from lowerBound: [UInt8], to upperBound: [UInt8], inFlight writes: [(key: [UInt8], put: Bool)]) -> [[UInt8]] {
        var keys: [[UInt8]] = []
        snapshot.forEachKey(from: lowerBound, to: upperBound) { key in
            keys.append(key)
            return true
        }
        var low = 0, high = writes.count
        while low < high {
            let middle = (low + high) / 2
            if writes[middle].key.lexicographicallyPrecedes(lowerBound) { low = middle + 1 } else { high = middle }
        }
        guard low < writes.count, writes[low].key.lexicographicallyPrecedes(upperBound) else { return keys }
        var present = Set(keys)
        while low < writes.count, writes[low].key.lexicographicallyPrecedes(upperBound) {
            if writes[low].put { present.insert(writes[low].key) } else { present.remove(writes[low].key) }
            low += 1
        }
        return present.sorted { $0.lexicographicallyPrecedes($1) }
    }

    /// The members of one owner's relationship keys ([REL-1]): the snapshot's, with the puts
    /// and deletes of the saves in flight applied in order.
    func members(_ ownerPrefix: [UInt8]) -> [StoredObject] {
        let stored = RelationshipKeys.members(ownerPrefix, in: snapshot)
        guard !inFlight.isEmpty else { return stored }
        var members = Set(stored)
        let end = RelationshipKeys.end(of: ownerPrefix)
        for writes in inFlight {
            for (key, value) in writes where key.count == ownerPrefix.count + 10 && key.lexicographicallyPrecedes(end) && !key.lexicographicallyPrecedes(ownerPrefix) {
                guard let member = key.withUnsafeBytes({ RelationshipKeys.member(fromKeyBytes: $0) }) else { continue }
                if value == nil { members.remove(member) } else { members.insert(member) }
            }
        }
        return members.sorted { ($0.entity, $0.reference) < ($1.entity, $1.reference) }
    }
}

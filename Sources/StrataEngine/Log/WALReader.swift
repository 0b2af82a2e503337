/// Reads a WAL file record by record and applies the recovery rules of SPEC.md [REC-2]…[REC-5].
///
/// The reader never trusts a byte it has not checked: every record's header and payload are
/// verified with their CRCs before an entry is handed out. It distinguishes a torn tail (the
/// last, unacknowledged record of the newest WAL, cut short by a crash) from corruption; in
/// repair mode it skips corrupt ranges, reports them, and carries on.
struct WALReader {
    /// One verified record.
    struct Record {
        /// Offset of the record header in the file.
        var offset: UInt64
        var sequence: UInt64
        /// The entries with their offsets in the file and encoded lengths.
        var entries: [(entry: LogEntry, offset: UInt64, length: UInt32)]
    }

    /// What reading the file found besides valid records.
    struct Outcome {
        /// The end of the last valid record: where the next append goes.
        var validEnd: UInt64
        /// A torn tail that was found (and should be cut off): offset and length.
        var tornTail: (offset: UInt64, length: UInt64)?
        /// Ranges dropped in repair mode.
        var dropped: [DroppedRange] = []
    }

    let path: String
    let bytes: [UInt8]
    /// Whether this is the newest WAL, the only one that may have a torn tail.
    let isNewest: Bool
    let repair: Bool
    /// One past the last non-zero byte: everything from here on is zeros (computed once, so
    /// "is the rest zero?" costs O(1) at every offset repair tries).
    let zeroTailStart: Int

    /// Whether records carry keys only (values checked but left empty): recovery's replay
    /// needs no value.
    let keysOnly: Bool

    /// The newest sequence number before this file's first record, if known: a damaged first
    /// record's sequences are reported as the gap between it and the next valid record.
    let previousSequence: UInt64?

    /// The durable bound ([DUR-1]), if known: every record up to this sequence was synced, so
    /// a record at or below it after damage is not in the window a crash may lose, and damage
    /// before it is not an unsynced gap ([REC-3]) but loss that repair salvages around.
    let durableSequence: UInt64?

    init(
        path: String, bytes: [UInt8], isNewest: Bool, repair: Bool, keysOnly: Bool = false, previousSequence: UInt64? = nil,
        durableSequence: UInt64? = nil
    ) {
        self.path = path
        self.bytes = bytes
        self.isNewest = isNewest
        self.repair = repair
        self.keysOnly = keysOnly
        self.previousSequence = previousSequence
        self.durableSequence = durableSequence
        self.zeroTailStart = (bytes.lastIndex { $0 != 0 } ?? -1) + 1
    }

    /// Checks the file header ([WAL-1]) and returns the file number it records.
    func checkHeader() throws(StoreError) -> UInt32 {
        try bytes.withBytes { (raw) throws(StoreError) -> UInt32 in
            var reader = ByteReader(raw)
            guard let magic = reader.bytes(8), Array(magic) == Format.walMagic else {
                throw StoreError.corruption("WAL file does not start with the Strata WAL magic", path: path, offset: 0)
            }
            guard let version = reader.u32(), let reserved = reader.u32(), let number = reader.u64(),
                let crc = reader.u32(), let reservedTail = reader.u32()
            else { throw StoreError.corruption("WAL header is truncated", path: path, offset: 0) }
            guard crc == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[0..<24])), reserved == 0, reservedTail == 0
            else {
                throw StoreError.corruption("WAL header checksum mismatch", path: path, offset: 0)
            }
            guard version <= Format.version else {
                throw StoreError(
                    .unsupportedVersion,
                    "WAL was written by format version \(version); this build reads up to \(Format.version). Open it with a newer Strata.",
                    path: path, offset: 8)
            }
            guard number <= UInt64(UInt32.max) else {
                throw StoreError.corruption("WAL header file number out of range", path: path, offset: 16)
            }
            return UInt32(number)
        }
    }

    /// Reads every record after the header, in order, calling `visit` for each valid one.
    func read(_ visit: (Record) throws(StoreError) -> Void) throws(StoreError) -> Outcome {
        var outcome = Outcome(validEnd: UInt64(Format.walHeaderSize))
        var position = Format.walHeaderSize
        var lastSequence: UInt64 = 0
        while position < bytes.count {
            switch parseRecord(at: position, after: lastSequence) {
            case .valid(let record, let end):
                try visit(record)
                lastSequence = record.sequence
                position = end
                outcome.validEnd = UInt64(end)
            case .torn:
                outcome.tornTail = (UInt64(position), UInt64(bytes.count - position))
                return outcome
            case .corrupt(let reason):
                // [REC-3] Unsynced appends reach the disk in any order: a crash can keep a later
                // record and lose or tear an earlier one. That shape ends the log here.
                if isUnwrittenSpace(at: position, lastSequence: lastSequence),
                    !(repair && holdsSyncedRecord(after: position, lastSequence: lastSequence))
                {
                    outcome.tornTail = (UInt64(position), UInt64(bytes.count - position))
                    return outcome
                }
                guard repair else {
                    throw StoreError.corruption(
                        "WAL record is corrupt (\(reason)); open with repair to salvage the records around it",
                        path: path, offset: UInt64(position))
                }
                let next = nextValidRecord(after: position, lastSequence: lastSequence) ?? bytes.count
                // Each record is one commit with one sequence number: the dropped bytes held the
                // commits between the last valid record and the next one, when both are known.
                var sequences: ClosedRange<UInt64>?
                let before = lastSequence > 0 ? lastSequence : previousSequence
                if let before, case .valid(let following, _) = parseRecord(at: next, after: lastSequence),
                    following.sequence > before + 1
                {
                    sequences = (before + 1)...(following.sequence - 1)
                }
                outcome.dropped.append(
                    DroppedRange(
                        path: path, offset: UInt64(position), length: UInt64(next - position), reason: reason,
                        sequences: sequences))
                position = next
            }
        }
        return outcome
    }

    private enum Parse {
        case valid(Record, end: Int)
        case torn
        case corrupt(String)
    }

    private func parseRecord(at position: Int, after lastSequence: UInt64) -> Parse {
        bytes.withUnsafeBytes { raw -> Parse in
            let remaining = raw.count - position
            let restIsZero = position >= zeroTailStart
            // [REC-3] A header cut short, or zero-filled space, at the end of the newest WAL is a torn tail.
            if remaining < Format.walRecordHeaderSize {
                return isNewest ? .torn : .corrupt("truncated record header")
            }
            if isNewest && restIsZero { return .torn }
            var reader = ByteReader(raw, position: position)
            // Reads cannot fail: at least a header's worth of bytes remains.
            let payloadCRC = reader.u32() ?? 0, length = Int(reader.u32() ?? 0), type = reader.u8() ?? 0
            _ = reader.skip(3)
            let headerCRC = reader.u32() ?? 0
            let header = UnsafeRawBufferPointer(rebasing: raw[position..<position + 12])
            guard headerCRC == CRC32C.checksum(header) else { return .corrupt("record header checksum mismatch") }
            guard type == Format.walRecordBatch else { return .corrupt("unknown record type \(type)") }
            guard length <= Format.maxRecordPayload else { return .corrupt("record length \(length) too large") }
            let payloadStart = position + Format.walRecordHeaderSize
            let end = payloadStart + length
            if end > raw.count { return isNewest ? .torn : .corrupt("record extends past the end of the file") }
            let payload = UnsafeRawBufferPointer(rebasing: raw[payloadStart..<end])
            guard payloadCRC == CRC32C.checksum(payload) else {
                // [REC-4] The last record of the newest WAL may be torn inside its payload.
                return isNewest && end == raw.count ? .torn : .corrupt("record payload checksum mismatch")
            }
            var payloadReader = ByteReader(raw, position: payloadStart)
            guard let count = payloadReader.varint(), count >= 1, count <= UInt64(length) else {
                return .corrupt("bad entry count")
            }
            var entries: [(entry: LogEntry, offset: UInt64, length: UInt32)] = []
            entries.reserveCapacity(Int(count))
            for _ in 0..<count {
                let entryStart = payloadReader.position
                guard entryStart < end, case .success(let entry) = LogEntry.decode(from: &payloadReader, keyOnly: keysOnly),
                    payloadReader.position <= end
                else { return .corrupt("entry at offset \(entryStart) does not decode") }
                entries.append((entry, UInt64(entryStart), UInt32(payloadReader.position - entryStart)))
            }
            guard payloadReader.position == end else { return .corrupt("bytes after the last entry") }
            let sequence = entries[0].entry.sequence
            guard entries.allSatisfy({ $0.entry.sequence == sequence }) else {
                return .corrupt("entries of one record carry different sequence numbers")
            }
            guard sequence > lastSequence else { return .corrupt("sequence \(sequence) does not increase") }
            return .valid(Record(offset: UInt64(position), sequence: sequence, entries: entries), end: end)
        }
    }

    /// [REC-3] Whether the record at `start` of the newest WAL, which fails its checks, is what
    /// a crash leaves of appends that were never synced, rather than damage. Unsynced appends
    /// reach the disk in any order and the last one may be torn, so from the first record not
    /// written on, the file holds records cut short by zeros (space allocated for writes that
    /// never reached the disk) and whole records, in any mix, to its end. Each record cut
    /// short is a plausible prefix of a record followed by zeros: a header cut short and zeros
    /// up to the next record; or a header whose CRC holds and zeros from some point of its
    /// payload to its end, every entry before them intact ([ENT-1]). A bit flip in a written
    /// record does not look like that (a damaged header fails its CRC; a damaged entry fails
    /// its own), so it stays corruption ([REC-4]). Under `full` durability no record after
    /// such a gap was acknowledged (each commit is synced before the next is written); under
    /// `normal` and `none` they are in the unsynced window a crash may lose ([WAL-4]).
    /// Whether a valid record that the durable bound names as synced follows `position`:
    /// then what lies before it is not unsynced space a crash left, and repair salvages
    /// around the damage instead of cutting the log there ([REC-7]).
    private func holdsSyncedRecord(after position: Int, lastSequence: UInt64) -> Bool {
        guard let durableSequence, durableSequence > lastSequence,
            let next = nextValidRecord(after: position, lastSequence: lastSequence),
            case .valid(let record, _) = parseRecord(at: next, after: lastSequence)
        else { return false }
        return record.sequence <= durableSequence
    }

    private func isUnwrittenSpace(at start: Int, lastSequence: UInt64) -> Bool {
        guard isNewest else { return false }
        // A depth-first search over where each record cut short may end (a cut header leaves
        // a few possible starts for the next record); each offset is tried once.
        var pending = [start]
        var tried: Set<Int> = [start]
        while let position = pending.popLast() {
            guard let candidates = cutRecord(at: position) else { continue }
            // The end of the file, a whole record or a torn last one ends the search; another
            // record cut short continues it.
            for candidate in candidates {
                if candidate >= bytes.count { return true }
                switch parseRecord(at: candidate, after: lastSequence) {
                case .valid, .torn: return true
                case .corrupt: if tried.insert(candidate).inserted { pending.append(candidate) }
                }
            }
        }
        return false
    }

    /// If the record at `position` is a prefix of a record followed by zeros (see
    /// ``isUnwrittenSpace(at:lastSequence:)``), the offsets where the record after it may
    /// start; `nil` if it is not.
    private func cutRecord(at position: Int) -> ClosedRange<Int>? {
        let headerEnd = position + Format.walRecordHeaderSize
        guard headerEnd <= bytes.count else { return bytes.count...bytes.count }
        return bytes.withUnsafeBytes { raw -> ClosedRange<Int>? in
            var reader = ByteReader(raw, position: position)
            let payloadCRC = reader.u32() ?? 0
            let length = Int(reader.u32() ?? 0), type = reader.u8() ?? 0
            _ = reader.skip(3)
            let headerCRC = reader.u32() ?? 0
            if headerCRC == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[position..<position + 12])),
                type == Format.walRecordBatch, length <= Format.maxRecordPayload
            {
                // A whole header: zeros from some point of the payload to the record's end.
                let end = headerEnd + length
                guard end <= raw.count else { return raw.count...raw.count }
                // A record whose payload checksum holds was written whole: its content is damage.
                guard payloadCRC != CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[headerEnd..<end])) else { return nil }
                var zeros = end
                while zeros > headerEnd && raw[zeros - 1] == 0 { zeros -= 1 }
                guard zeros < end else { return nil }
                // The entries written before the zeros are intact; the one the zeros cut is short.
                var entries = ByteReader(UnsafeRawBufferPointer(rebasing: raw[0..<zeros]), position: headerEnd)
                if let count = entries.varint() {
                    var cut = false
                    for _ in 0..<count {
                        switch LogEntry.decode(from: &entries, keyOnly: true) {
                        case .success: continue
                        case .failure(.truncated): cut = true
                        case .failure: return nil
                        }
                        break
                    }
                    guard cut else { return nil }  // every entry whole, yet the record failed: damage
                }
                return end...end
            }
            // A header cut short: zeros to its end, and on to the next record.
            guard raw[headerEnd - 1] == 0 else { return nil }
            var nonZero = headerEnd
            while nonZero < raw.count && raw[nonZero] == 0 { nonZero += 1 }
            // A header's first non-zero byte is at most its 9th (the type); its CRC may start with zeros.
            return max(headerEnd, nonZero - 8)...nonZero
        }
    }

    /// Repair: the first offset after `position` where a fully valid record starts.
    private func nextValidRecord(after position: Int, lastSequence: UInt64) -> Int? {
        var candidate = position + 1
        while candidate + Format.walRecordHeaderSize <= bytes.count {
            if case .valid = parseRecord(at: candidate, after: lastSequence) { return candidate }
            candidate += 1
        }
        return nil
    }
}

/// A range of bytes that recovery in repair mode could not use and dropped.
public struct DroppedRange: Sendable, Equatable, CustomStringConvertible {
    /// The file the bytes were in.
    public var path: String
    /// Where the dropped range starts.
    public var offset: UInt64
    /// How many bytes were dropped.
    public var length: UInt64
    /// Why they were dropped.
    public var reason: String
    /// The sequence numbers (commits, [WAL-2]) of the entries the bytes held, when known: a
    /// data block's from its hints, a WAL record's from the valid records around it. `nil`
    /// when unknown.
    public var sequences: ClosedRange<UInt64>? = nil
    /// Whether the bytes held entries: a data block, WAL records, a file lost whole. `false`
    /// for bytes that describe entries kept elsewhere — a file header, a segment's footer,
    /// block table or hint blocks (rebuilt from its data blocks), `SYNC` — whose loss loses
    /// no acknowledged write (SPEC.md [REC-7]).
    public var heldEntries = true

    public var description: String {
        var text = "\(path) [\(offset), +\(length)): \(reason)"
        if let sequences {
            text += sequences.count == 1 ? " (sequence \(sequences.lowerBound))" : " (sequences \(sequences.lowerBound)…\(sequences.upperBound))"
        }
        return text
    }
}

/// An entry a repair dropped whose key and sequence number are known: one that the hints of a
/// dropped data block describe ([REC-7]).
public struct LostEntry: Sendable, Equatable {
    /// The entry's key.
    public var key: [UInt8]
    /// Its sequence number: the commit that wrote it.
    public var sequence: UInt64
    /// Whether it was a tombstone (a deletion).
    public var isDelete: Bool
    /// The file that held it.
    public var path: String

    /// Creates a description of a lost entry.
    public init(key: [UInt8], sequence: UInt64, isDelete: Bool, path: String) {
        self.key = key
        self.sequence = sequence
        self.isDelete = isDelete
        self.path = path
    }
}

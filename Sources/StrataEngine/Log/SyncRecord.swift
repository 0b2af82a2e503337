/// The durable bound (SPEC.md [DUR-1]…[DUR-4]): the `SYNC` file, two 32-byte record slots
/// rewritten in turn after every WAL sync, that says up to which sequence number every
/// transaction was on stable storage. It lets recovery and `strata fsck` tell a torn tail
/// (never synced, so never acknowledged under `full`) from acknowledged transactions lost to a
/// truncated or damaged WAL. Two slots, because the file is not synced after each write: a
/// crash may tear the slot being written, never the other one.
///
/// ```
/// record := magic "STRATSYN" | version u32 | walNumber u32 | sequence u64 | walEnd u32 | crc u32 (of bytes 0..<28)
/// file   := record (slot 0) | record (slot 1)
/// ```
struct SyncRecord: Equatable, Sendable {
    /// The active WAL when the record was written.
    var walNumber: UInt32
    /// Every transaction up to this sequence number was durable when the record was written.
    var sequence: UInt64
    /// At least this many bytes of WAL `walNumber` were durable when the record was written.
    var walEnd: UInt32

    /// The record's bytes ([DUR-1]), written into `buffer` (at least ``Format/syncRecordSize`` bytes).
    func encode(into buffer: UnsafeMutableRawBufferPointer) {
        Format.syncMagic.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: buffer[0..<8]).copyMemory(from: $0) }
        buffer.storeBytes(of: Format.syncRecordVersion.littleEndian, toByteOffset: 8, as: UInt32.self)
        buffer.storeBytes(of: walNumber.littleEndian, toByteOffset: 12, as: UInt32.self)
        buffer.storeBytes(of: sequence.littleEndian, toByteOffset: 16, as: UInt64.self)
        buffer.storeBytes(of: walEnd.littleEndian, toByteOffset: 24, as: UInt32.self)
        let crc = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: buffer[0..<28]))
        buffer.storeBytes(of: crc.littleEndian, toByteOffset: 28, as: UInt32.self)
    }

    /// The record's bytes ([DUR-1]).
    func encode() -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: Format.syncRecordSize) { buffer, initialized in
            encode(into: UnsafeMutableRawBufferPointer(buffer))
            initialized = Format.syncRecordSize
        }
    }

    /// The file's bytes with this record in both slots, as an open writes it anew.
    func encodeFile() -> [UInt8] {
        let record = encode()
        return record + record
    }

    /// Decodes a `SYNC` file's bytes: the valid slot with the larger sequence. `nil` for an
    /// empty or all-zero file, which carries no bound ([DUR-1]).
    ///
    /// - Throws: ``StoreError/Code/corruption`` at offset 0 of `path` for a file that is not
    ///   two slots or has no valid one; ``StoreError/Code/unsupportedVersion`` for a slot of a
    ///   newer version whose checksum holds.
    static func decode(_ bytes: [UInt8], path: String) throws(StoreError) -> SyncRecord? {
        try decodeFile(bytes, path: path)?.record
    }

    /// ``decode(_:path:)`` with the slot the record came from.
    static func decodeFile(_ bytes: [UInt8], path: String) throws(StoreError) -> (record: SyncRecord, slot: Int)? {
        if bytes.allSatisfy({ $0 == 0 }) { return nil }
        guard bytes.count == Format.syncFileSize else {
            throw StoreError.corruption(
                "SYNC is \(bytes.count) bytes; it is two sync records of \(Format.syncRecordSize)", path: path, offset: 0)
        }
        var best: (record: SyncRecord, slot: Int)?
        for slot in 0..<2 {
            let start = slot * Format.syncRecordSize
            guard let record = try decodeSlot(Array(bytes[start..<start + Format.syncRecordSize]), path: path, offset: start)
            else { continue }
            if best.map({ record.sequence > $0.record.sequence }) ?? true { best = (record, slot) }
        }
        guard let best else {
            throw StoreError.corruption("SYNC holds no valid sync record (both slots fail their checks)", path: path, offset: 0)
        }
        return best
    }

    /// One slot: the record, or `nil` when it is all zeros or fails its magic or checksum (a
    /// write a crash tore, or damage).
    private static func decodeSlot(_ bytes: [UInt8], path: String, offset: Int) throws(StoreError) -> SyncRecord? {
        try bytes.withBytes { (raw) throws(StoreError) -> SyncRecord? in
            var reader = ByteReader(raw)
            guard let magic = reader.bytes(8), Array(magic) == Format.syncMagic, let version = reader.u32(),
                let walNumber = reader.u32(), let sequence = reader.u64(), let walEnd = reader.u32(), let crc = reader.u32(),
                crc == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[0..<28]))
            else { return nil }
            guard version <= Format.syncRecordVersion else {
                throw StoreError(
                    .unsupportedVersion,
                    "SYNC was written by sync record version \(version); this build reads up to \(Format.syncRecordVersion). Open the store with a newer Strata.",
                    path: path, offset: UInt64(offset + 8))
            }
            return SyncRecord(walNumber: walNumber, sequence: sequence, walEnd: walEnd)
        }
    }

    /// The store's `SYNC` record: `nil` when there is no `SYNC` file or it carries no bound.
    static func load(fileSystem: any FileSystem, directory: String) throws(StoreError) -> SyncRecord? {
        try loadFile(fileSystem: fileSystem, directory: directory)?.record
    }

    /// ``load(fileSystem:directory:)`` with the slot the record came from.
    static func loadFile(fileSystem: any FileSystem, directory: String) throws(StoreError) -> (record: SyncRecord, slot: Int)? {
        let path = directory + "/" + Format.syncFileName
        guard case .file? = try fileSystem.kind(of: path) else { return nil }
        let handle = try fileSystem.open(path, mode: .readOnly)
        defer { handle.close() }
        // A SYNC file is 64 bytes; a longer one is damage, and reading it whole would let a
        // damaged store make open read an arbitrarily large file.
        let bytes = try handle.read(upTo: Format.syncFileSize + 1, at: 0)
        return try decodeFile(bytes, path: path)
    }
}

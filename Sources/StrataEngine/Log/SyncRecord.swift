/// The durable bound (SPEC.md [DUR-1]…[DUR-4]): the `SYNC` file, 32 bytes rewritten in place
/// after every WAL sync, that says up to which sequence number every transaction was on stable
/// storage. It lets recovery and `strata fsck` tell a torn tail (never synced, so never
/// acknowledged under `full`) from acknowledged transactions lost to a truncated or damaged WAL.
///
/// ```
/// magic "STRATSYN" | version u32 | walNumber u32 | sequence u64 | walEnd u32 | crc u32 (of bytes 0..<28)
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

    /// Decodes a `SYNC` file's bytes. `nil` for an empty or all-zero file: a creation cut short
    /// by a crash, which carries no bound ([DUR-2]).
    ///
    /// - Throws: ``StoreError/Code/corruption`` at offset 0 of `path` for any other content
    ///   that is not exactly one valid record; ``StoreError/Code/unsupportedVersion`` for a
    ///   valid record of a newer version.
    static func decode(_ bytes: [UInt8], path: String) throws(StoreError) -> SyncRecord? {
        if bytes.allSatisfy({ $0 == 0 }) { return nil }
        return try bytes.withBytes { (raw) throws(StoreError) -> SyncRecord in
            guard raw.count == Format.syncRecordSize else {
                throw StoreError.corruption(
                    "SYNC is \(raw.count) bytes; a sync record is \(Format.syncRecordSize)", path: path, offset: 0)
            }
            var reader = ByteReader(raw)
            guard let magic = reader.bytes(8), Array(magic) == Format.syncMagic, let version = reader.u32(),
                let walNumber = reader.u32(), let sequence = reader.u64(), let walEnd = reader.u32(), let crc = reader.u32()
            else {
                throw StoreError.corruption("SYNC does not start with the Strata sync record magic", path: path, offset: 0)
            }
            guard crc == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[0..<28])) else {
                throw StoreError.corruption("SYNC record checksum mismatch", path: path, offset: 0)
            }
            guard version <= Format.syncRecordVersion else {
                throw StoreError(
                    .unsupportedVersion,
                    "SYNC was written by sync record version \(version); this build reads up to \(Format.syncRecordVersion). Open the store with a newer Strata.",
                    path: path, offset: 8)
            }
            return SyncRecord(walNumber: walNumber, sequence: sequence, walEnd: walEnd)
        }
    }

    /// The store's `SYNC` record: `nil` when there is no `SYNC` file or it carries no bound.
    static func load(fileSystem: any FileSystem, directory: String) throws(StoreError) -> SyncRecord? {
        let path = directory + "/" + Format.syncFileName
        guard case .file? = try fileSystem.kind(of: path) else { return nil }
        let handle = try fileSystem.open(path, mode: .readOnly)
        defer { handle.close() }
        // A SYNC file is 32 bytes; a longer one is damage, and reading it whole would let a
        // damaged store make open read an arbitrarily large file.
        let bytes = try handle.read(upTo: Format.syncRecordSize + 1, at: 0)
        return try decode(bytes, path: path)
    }
}

/// Which files make up the store (SPEC.md [MAN-1]…[MAN-5]).
///
/// ```
/// magic "STRATMAN" | version u32 | bodyLength u32 | body | crc32c u32 (of everything before)
/// body = nextFileNumber u32 | lastSequence u64 | walCount u32 | wal u32… |
///        segmentCount u32 | (segment u32 | size u64)…
/// ```
///
/// The manifest is replaced as a whole: written to `MANIFEST.tmp`, synced, renamed over
/// `MANIFEST`, and the directory synced ([MAN-4]). A reader sees the old or the new one.
struct Manifest: Equatable, Sendable {
    /// A live segment and its size when written.
    struct Segment: Equatable, Sendable {
        var fileNumber: UInt32
        var size: UInt64
    }

    /// The next unused file number.
    var nextFileNumber: UInt32
    /// The highest sequence number stored in the segments.
    var lastSequence: UInt64
    /// Live WAL files, oldest first; the last one is the one appended to.
    var wals: [UInt32]
    /// Live segments, in the order they were created.
    var segments: [Segment]

    /// Takes the next file number.
    mutating func allocateFileNumber() -> UInt32 {
        defer { nextFileNumber += 1 }
        return nextFileNumber
    }

    func encode() -> [UInt8] {
        var body = ByteWriter()
        body.u32(nextFileNumber)
        body.u64(lastSequence)
        body.u32(UInt32(wals.count))
        for wal in wals { body.u32(wal) }
        body.u32(UInt32(segments.count))
        for segment in segments {
            body.u32(segment.fileNumber)
            body.u64(segment.size)
        }
        var writer = ByteWriter(capacity: Format.manifestHeaderSize + body.count + 4)
        writer.append(Format.manifestMagic)
        writer.u32(Format.version)
        writer.u32(UInt32(body.count))
        writer.append(body.bytes)
        writer.u32(CRC32C.checksum(writer.bytes))
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8], path: String) throws(StoreError) -> Manifest {
        try bytes.withBytes { (raw) throws(StoreError) -> Manifest in
            var reader = ByteReader(raw)
            guard let magic = reader.bytes(8), Array(magic) == Format.manifestMagic else {
                throw StoreError(
                    .notAStore, "MANIFEST does not start with the Strata manifest magic; this is not a Strata store",
                    path: path, offset: 0)
            }
            guard let version = reader.u32(), let length = reader.u32() else {
                throw StoreError.corruption("manifest header is truncated", path: path, offset: 8)
            }
            guard version <= Format.version else {
                // [MAN-3] Newer only when the checksum holds: a damaged version field is damage.
                let end = Format.manifestHeaderSize + Int(length)
                guard raw.count == end + 4,
                    UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: end, as: UInt32.self))
                        == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[0..<end]))
                else {
                    throw StoreError.corruption(
                        "manifest says format version \(version) but its checksum fails: the header is damaged",
                        path: path, offset: UInt64(max(Format.manifestHeaderSize, min(end, raw.count - 4))))
                }
                throw StoreError(
                    .unsupportedVersion,
                    "store has format version \(version); this build reads up to \(Format.version). Open it with a newer Strata.",
                    path: path, offset: 8)
            }
            let end = Format.manifestHeaderSize + Int(length)
            guard raw.count == end + 4 else {
                throw StoreError.corruption(
                    "manifest is \(raw.count) bytes but its header says \(end + 4)", path: path, offset: 12)
            }
            let stored = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: end, as: UInt32.self))
            guard stored == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[0..<end])) else {
                throw StoreError.corruption("manifest checksum mismatch", path: path, offset: UInt64(end))
            }
            func bad(_ what: String) -> StoreError {
                StoreError.corruption("manifest body is malformed: \(what)", path: path, offset: UInt64(reader.position))
            }
            guard let next = reader.u32(), let last = reader.u64(), let walCount = reader.u32(),
                Int(walCount) <= reader.remaining / 4
            else { throw bad("header fields") }
            var wals: [UInt32] = []
            for _ in 0..<walCount { wals.append(reader.u32() ?? 0) }
            guard let segmentCount = reader.u32(), Int(segmentCount) <= reader.remaining / 12 else {
                throw bad("segment count")
            }
            var segments: [Segment] = []
            for _ in 0..<segmentCount {
                segments.append(Segment(fileNumber: reader.u32() ?? 0, size: reader.u64() ?? 0))
            }
            guard reader.position == end else { throw bad("trailing bytes") }
            let manifest = Manifest(nextFileNumber: next, lastSequence: last, wals: wals, segments: segments)
            let numbers = wals + segments.map(\.fileNumber)
            guard !wals.isEmpty, Set(numbers).count == numbers.count, numbers.allSatisfy({ $0 < next }) else {
                throw bad("file numbers are duplicated, missing or not below nextFileNumber")
            }
            return manifest
        }
    }

    /// Reads `MANIFEST` from `directory`; `nil` if there is none.
    static func load(fileSystem: any FileSystem, directory: String) throws(StoreError) -> Manifest? {
        let path = directory + "/" + Format.manifestFileName
        guard case .file(let size)? = try fileSystem.kind(of: path) else { return nil }
        let handle = try fileSystem.open(path, mode: .readOnly)
        defer { handle.close() }
        guard size <= 64 << 20 else {
            throw StoreError.corruption("manifest is implausibly large (\(size) bytes)", path: path, offset: 0)
        }
        return try decode(handle.read(exactly: Int(size), at: 0), path: path)
    }

    /// Atomically replaces `MANIFEST` in `directory` with this manifest ([MAN-4]).
    ///
    /// A failed sync (of `MANIFEST.tmp` or of the directory) is passed through `syncFailed`,
    /// which gives the error to throw (an open engine is poisoned there, [WAL-4]). After a
    /// failed directory sync the rename has happened but may not be durable: `MANIFEST` may be
    /// the old or the new manifest, so no file either one names may be deleted.
    func install(
        fileSystem: any FileSystem, directory: String, syncFailed: (StoreError) -> StoreError = { $0 }
    ) throws(StoreError) {
        let temp = directory + "/" + Format.manifestTempFileName
        if try fileSystem.exists(temp) { try fileSystem.remove(temp) }
        let handle = try fileSystem.open(temp, mode: .createNew)
        do throws(StoreError) {
            try handle.write(encode(), at: 0)
            do throws(StoreError) { try handle.sync() } catch { throw syncFailed(error) }
        } catch {
            handle.close()
            throw error
        }
        handle.close()
        try fileSystem.rename(temp, to: directory + "/" + Format.manifestFileName)
        do throws(StoreError) { try fileSystem.syncDirectory(directory) } catch { throw syncFailed(error) }
    }
}

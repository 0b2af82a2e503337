/// What replication (module `StrataReplication`) reads and writes of a store's files without
/// opening the store: the manifest ([MAN-1]), the durable bound ([DUR-1]), the boundaries of
/// the WAL's records ([WAL-2]), and the files' names ([DIR-1]). Package-internal: the formats
/// stay the engine's.
package enum StoreFiles {
    /// A manifest's content ([MAN-1]).
    package struct ManifestContent: Equatable, Sendable {
        /// The next unused file number.
        package var nextFileNumber: UInt32
        /// The highest sequence number stored in the segments.
        package var lastSequence: UInt64
        /// Live WALs, oldest first.
        package var wals: [UInt32]
        /// Live segments (file number, size), in creation order.
        package var segments: [(number: UInt32, size: UInt64)]

        package init(nextFileNumber: UInt32, lastSequence: UInt64, wals: [UInt32], segments: [(number: UInt32, size: UInt64)]) {
            self.nextFileNumber = nextFileNumber
            self.lastSequence = lastSequence
            self.wals = wals
            self.segments = segments
        }

        package static func == (a: ManifestContent, b: ManifestContent) -> Bool {
            a.nextFileNumber == b.nextFileNumber && a.lastSequence == b.lastSequence && a.wals == b.wals
                && a.segments.map(\.number) == b.segments.map(\.number) && a.segments.map(\.size) == b.segments.map(\.size)
        }
    }

    /// The manifest `bytes` hold (read from `path`, for errors).
    ///
    /// - Throws: as an open reading `MANIFEST` does ([MAN-2], [MAN-3]).
    package static func decodeManifest(_ bytes: [UInt8], path: String) throws(StoreError) -> ManifestContent {
        let manifest = try Manifest.decode(bytes, path: path)
        return ManifestContent(
            nextFileNumber: manifest.nextFileNumber, lastSequence: manifest.lastSequence, wals: manifest.wals,
            segments: manifest.segments.map { ($0.fileNumber, $0.size) })
    }

    /// The bytes of `MANIFEST` naming `content`.
    package static func encodeManifest(_ content: ManifestContent) -> [UInt8] {
        Manifest(
            nextFileNumber: content.nextFileNumber, lastSequence: content.lastSequence, wals: content.wals,
            segments: content.segments.map { Manifest.Segment(fileNumber: $0.number, size: $0.size) }
        ).encode()
    }

    /// The durable bound a `SYNC` file's bytes hold: the WAL active when it was written, the
    /// sequence every transaction up to was synced, and how many bytes of that WAL were synced;
    /// `nil` for a file that carries none.
    ///
    /// - Throws: as an open reading `SYNC` does ([DUR-1]).
    package static func decodeDurableBound(_ bytes: [UInt8], path: String) throws(StoreError) -> (walNumber: UInt32, sequence: UInt64, walEnd: UInt64)? {
        guard let record = try SyncRecord.decode(bytes, path: path) else { return nil }
        return (record.walNumber, record.sequence, UInt64(record.walEnd))
    }

    /// One WAL record's extent and transaction.
    package struct WALRecordExtent: Equatable, Sendable {
        /// Where the record starts in its file.
        package var start: Int
        /// One past its last byte.
        package var end: Int
        /// Its transaction's sequence number.
        package var sequence: UInt64
    }

    /// The whole, valid records of a WAL's `bytes` (the file from its start) that begin at or
    /// after `from` (a record boundary, or 0 for the header) and end by `limit`: each record's
    /// header and payload checksums hold ([WAL-2]). Stops at the first record that is cut short
    /// or fails a check; a header that is not a WAL's gives none.
    package static func walRecords(in bytes: [UInt8], from: Int, limit: Int) -> [WALRecordExtent] {
        guard bytes.count >= Format.walHeaderSize, Array(bytes[0..<8]) == Format.walMagic else { return [] }
        return walRecords(inTail: bytes, at: 0, from: max(from, Format.walHeaderSize), limit: limit)
    }

    /// ``walRecords(in:from:limit:)`` over `tail`, the bytes of a WAL from file offset `at` on
    /// (past its header, which the caller read before): extents are file offsets, from `from`
    /// (a record boundary at or after `at`) up to the file offset `limit`.
    package static func walRecords(inTail tail: [UInt8], at base: Int, from: Int, limit: Int) -> [WALRecordExtent] {
        let limit = min(limit, base + tail.count)
        var offset = max(from, base, Format.walHeaderSize)
        var records: [WALRecordExtent] = []
        tail.withUnsafeBytes { whole in
            let raw = UnsafeRawBufferPointer(rebasing: whole[0...])
            // Offsets below are file offsets; `raw` starts at `base`.
            func slice(_ range: Range<Int>) -> UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: raw[(range.lowerBound - base)..<(range.upperBound - base)]) }
            while offset + Format.walRecordHeaderSize <= limit {
                let header = slice(offset..<offset + Format.walRecordHeaderSize)
                let payloadCRC = header.loadUnaligned(fromByteOffset: 0, as: UInt32.self).littleEndian
                let length = Int(header.loadUnaligned(fromByteOffset: 4, as: UInt32.self).littleEndian)
                let headerCRC = header.loadUnaligned(fromByteOffset: 12, as: UInt32.self).littleEndian
                guard headerCRC == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: header[0..<12])),
                    offset + Format.walRecordHeaderSize + length <= limit
                else { return }
                let payload = slice(offset + Format.walRecordHeaderSize..<offset + Format.walRecordHeaderSize + length)
                guard payloadCRC == CRC32C.checksum(payload) else { return }
                // batch := entryCount varint, then entries, each kind u8 then sequence varint ([WAL-3]).
                var reader = ByteReader(payload)
                guard reader.varint() != nil, reader.u8() != nil, let sequence = reader.varint() else { return }
                records.append(WALRecordExtent(start: offset, end: offset + Format.walRecordHeaderSize + length, sequence: sequence))
                offset += Format.walRecordHeaderSize + length
            }
        }
        return records
    }

    /// The size of a WAL's header ([WAL-1]).
    package static var walHeaderSize: Int { Format.walHeaderSize }
    /// `MANIFEST`.
    package static var manifestName: String { Format.manifestFileName }
    /// `SYNC`.
    package static var durableBoundName: String { Format.syncFileName }
    /// `NNNNNNNN.wal`.
    package static func walName(_ number: UInt32) -> String { Format.walFileName(number) }
    /// `NNNNNNNN.seg`.
    package static func segmentName(_ number: UInt32) -> String { Format.segmentFileName(number) }
}

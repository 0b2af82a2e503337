/// Every constant of Strata's on-disk format, in one place. See SPEC.md.
///
/// These values are written to disk. Changing any of them changes the format: it needs a new
/// ``version``, a SPEC.md change in the same commit, and a reader for the old version.
enum Format {
    /// The format version this build writes and the newest it reads ([MAN-3], [WAL-1], [SEG-1]).
    static let version: UInt32 = 1

    // MARK: File names ([DIR-1])

    static let lockFileName = "LOCK"
    static let manifestFileName = "MANIFEST"
    static let manifestTempFileName = "MANIFEST.tmp"
    /// The durable bound ([DUR-1]).
    static let syncFileName = "SYNC"
    /// The new `SYNC` an open writes before renaming it over the old one ([DUR-2]).
    static let syncTempFileName = "SYNC.tmp"
    static let walExtension = "wal"
    static let segmentExtension = "seg"
    /// Digits in a numbered file's name (zero-padded decimal file number).
    static let fileNumberDigits = 8

    static func walFileName(_ number: UInt32) -> String { numbered(number, walExtension) }
    static func segmentFileName(_ number: UInt32) -> String { numbered(number, segmentExtension) }

    private static func numbered(_ number: UInt32, _ ext: String) -> String {
        let digits = String(number)
        return String(repeating: "0", count: max(0, fileNumberDigits - digits.count)) + digits + "." + ext
    }

    /// Where an open keeps the bytes it cut off WAL `number` as a torn tail at `offset` ([DUR-3]).
    static func tornTailFileName(_ number: UInt32, offset: UInt64) -> String {
        walFileName(number) + ".torn-" + String(offset)
    }

    /// Where repair keeps WAL `number` as it found it, before cutting lost acknowledged data ([DUR-4]).
    static func damagedWALFileName(_ number: UInt32) -> String { walFileName(number) + ".damaged" }

    /// Whether `name` is a copy an open or a repair kept beside a WAL (`NNNNNNNN.wal.torn-…`,
    /// `NNNNNNNN.wal.damaged…`): evidence for the operator, never part of the store.
    static func isKeptCopy(_ name: String) -> Bool {
        guard let dot = name.firstIndex(of: "."), case let stem = String(name[..<dot]) + ".wal",
            name.hasPrefix(stem), parseNumberedFileName(stem) != nil
        else { return false }
        let rest = name.dropFirst(stem.count)
        return rest.hasPrefix(".torn-") || rest.hasPrefix(".damaged")
    }

    /// Parses `NNNNNNNN.wal` or `NNNNNNNN.seg`; `nil` for any other name.
    static func parseNumberedFileName(_ name: String) -> (number: UInt32, ext: String)? {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count == fileNumberDigits,
            parts[0].allSatisfy({ $0.isASCII && $0.isNumber }),
            let number = UInt32(parts[0]),
            parts[1] == walExtension || parts[1] == segmentExtension
        else { return nil }
        return (number, String(parts[1]))
    }

    // MARK: Magic numbers (8 ASCII bytes each)

    static let walMagic: [UInt8] = Array("STRATWAL".utf8)
    static let segmentMagic: [UInt8] = Array("STRATSEG".utf8)
    static let manifestMagic: [UInt8] = Array("STRATMAN".utf8)
    static let syncMagic: [UInt8] = Array("STRATSYN".utf8)

    /// The 32-byte header shared by WAL and segment files ([WAL-1], [SEG-2]): magic, version,
    /// reserved, file number (u64), CRC-32C of bytes 0..<24, reserved.
    static func fileHeader(magic: [UInt8], fileNumber: UInt32) -> [UInt8] {
        var writer = ByteWriter(capacity: walHeaderSize)
        writer.append(magic)
        writer.u32(version)
        writer.u32(0)
        writer.u64(UInt64(fileNumber))
        writer.u32(CRC32C.checksum(writer.bytes))
        writer.u32(0)
        return writer.bytes
    }

    // MARK: Write-ahead log ([WAL-*])

    /// Bytes of the WAL file header.
    static let walHeaderSize = 32
    /// Bytes of a WAL record header.
    static let walRecordHeaderSize = 16
    /// Record type: one committed transaction.
    static let walRecordBatch: UInt8 = 1
    /// The largest record payload accepted (1 GiB).
    static let maxRecordPayload = 1 << 30

    // MARK: Durable bound ([DUR-*])

    /// Bytes of one `SYNC` record.
    static let syncRecordSize = 32
    /// Bytes of the `SYNC` file: two record slots, written in turn ([DUR-1]).
    static let syncFileSize = 64
    /// The version of the `SYNC` record this build writes and the newest it reads. The record
    /// is versioned on its own: a store without `SYNC` is read as before it existed.
    static let syncRecordVersion: UInt32 = 1

    // MARK: Entries ([ENT-*])

    static let entryPut: UInt8 = 1
    static let entryDelete: UInt8 = 2
    /// The longest key accepted (64 KiB).
    static let maxKeyLength = 1 << 16
    /// The longest value accepted (256 MiB).
    static let maxValueLength = 1 << 28

    // MARK: Segments ([SEG-*])

    static let segmentHeaderSize = 32
    static let blockHeaderSize = 16
    static let blockTableEntrySize = 16
    static let segmentFooterSize = 64
    static let compressionNone: UInt8 = 0
    static let compressionLZ4: UInt8 = 1

    // MARK: Manifest ([MAN-*])

    static let manifestHeaderSize = 16
}

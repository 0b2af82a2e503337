@testable import StrataEngine

/// A store directory carried in one fuzz input (the engine target), as a list of files:
///
/// ```
/// file := kind u8 | number u8 | length u16 | bytes[length]   // repeated to the end of the input
/// kind % 4: 0 = MANIFEST, 1 = NNNNNNNN.wal, 2 = NNNNNNNN.seg, 3 = MANIFEST.tmp
/// ```
///
/// A length that runs past the end of the input takes what is left; fewer than four bytes
/// left end the list. A later file of the same name replaces an earlier one.
struct StoreImage: Sendable {
    /// One file of the store.
    struct File: Sendable, Equatable {
        /// Its name in the store directory.
        var name: String
        /// Its contents.
        var bytes: [UInt8]
    }

    /// Kinds of file, as the `kind` byte encodes them.
    enum Kind: UInt8, Sendable {
        case manifest = 0, wal = 1, segment = 2, manifestTemp = 3
    }

    /// The files, in input order.
    var files: [File]

    /// The directory the store is put in on the in-memory file system.
    static let directory = "/fuzz/store"

    /// Parses `bytes`; with `fixChecksums`, recomputes each file's checksums for its kind.
    init(parsing bytes: [UInt8], fixChecksums: Bool) {
        files = []
        var position = 0
        while bytes.count - position >= 4 {
            let kind = Kind(rawValue: bytes[position] % 4) ?? .manifest
            let number = UInt32(bytes[position + 1])
            let length = Int(bytes[position + 2]) | Int(bytes[position + 3]) << 8
            let start = position + 4
            let end = min(bytes.count, start + length)
            var contents = Array(bytes[start..<end])
            let name: String
            switch kind {
            case .manifest:
                name = Format.manifestFileName
                if fixChecksums { contents = FuzzChecksums.fixManifest(contents) }
            case .wal:
                name = Format.walFileName(number)
                if fixChecksums { contents = FuzzChecksums.fixWAL(contents) }
            case .segment:
                name = Format.segmentFileName(number)
                if fixChecksums { contents = FuzzChecksums.fixSegment(contents) }
            case .manifestTemp:
                name = Format.manifestTempFileName
            }
            files.append(File(name: name, bytes: contents))
            position = end
        }
    }

    /// An image of `files` as given.
    init(files: [File]) { self.files = files }

    /// The encoding ``init(parsing:fixChecksums:)`` reads. Files whose name is not one of the
    /// four kinds, or whose number does not fit a byte, are left out; contents are cut to
    /// 65,535 bytes.
    func encoded() -> [UInt8] {
        var bytes: [UInt8] = []
        for file in files {
            let kind: Kind, number: UInt32
            if file.name == Format.manifestFileName {
                (kind, number) = (.manifest, 0)
            } else if file.name == Format.manifestTempFileName {
                (kind, number) = (.manifestTemp, 0)
            } else if let parsed = Format.parseNumberedFileName(file.name), parsed.number <= UInt32(UInt8.max) {
                (kind, number) = (parsed.ext == Format.walExtension ? .wal : .segment, parsed.number)
            } else {
                continue
            }
            let contents = file.bytes.prefix(Int(UInt16.max))
            bytes += [kind.rawValue, UInt8(number), UInt8(contents.count & 0xFF), UInt8(contents.count >> 8)]
            bytes += contents
        }
        return bytes
    }

    /// A fresh in-memory file system holding the store directory with these files.
    func fileSystem() -> FaultInjectingFileSystem {
        let fs = FaultInjectingFileSystem()
        for file in files { fs.setContents(file.bytes, of: Self.directory + "/" + file.name) }
        if files.isEmpty {
            // An empty directory is a new store ([DIR-4]); make it exist like the others.
            fs.setContents([], of: Self.directory + "/" + Format.lockFileName)
        }
        return fs
    }
}

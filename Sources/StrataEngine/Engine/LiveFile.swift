import Synchronization

/// A WAL or segment file that is part of the store, shared by the engine and its snapshots.
///
/// Reference-counted by Swift: a snapshot that can still read a file keeps its `LiveFile`
/// alive. When the engine retires a file (a flushed WAL, a compacted segment) it marks it
/// obsolete; the file is closed and deleted when the last holder lets go ([DIR-3]).
final class LiveFile: Sendable {
    enum Content: Sendable {
        /// A WAL: its handle, and its bytes in memory, where its values are read ([WAL-5]).
        case wal(any FileHandle, WALImage)
        case segment(SegmentReader)
    }

    let number: UInt32
    let path: String
    let content: Content
    let fileSystem: any FileSystem
    /// Set once, by the engine, when the manifest no longer names this file.
    private let obsolete = Atomic<Bool>(false)

    init(number: UInt32, path: String, content: Content, fileSystem: any FileSystem) {
        self.number = number
        self.path = path
        self.content = content
        self.fileSystem = fileSystem
    }

    func markObsolete() { obsolete.store(true, ordering: .releasing) }

    deinit {
        if case .wal(let handle, _) = content { handle.close() }
        if obsolete.load(ordering: .acquiring) {
            // A failure leaves an orphan that the next open removes ([REC-1]).
            try? fileSystem.remove(path)
        }
    }
}

/// Bytes of entries per file, for stats and the compactor: how much is still live.
struct FileUsage: Sendable, Equatable {
    /// Bytes of every entry written to the file.
    var entryBytes: UInt64 = 0
    /// Bytes of entries overwritten or deleted since.
    var deadBytes: UInt64 = 0
    /// Bytes of delete entries (tombstones).
    var tombstoneBytes: UInt64 = 0

    /// Adds `other`'s bytes to these.
    mutating func add(_ other: FileUsage) {
        entryBytes += other.entryBytes
        deadBytes += other.deadBytes
        tombstoneBytes += other.tombstoneBytes
    }
}

/// The one seam through which StrataEngine touches files.
///
/// Nothing else in the engine calls `open`, `pread`, `pwrite`, `fsync` or `rename`.
/// ``PosixFileSystem`` is the real implementation; ``FaultInjectingFileSystem`` keeps files in
/// memory, remembers what was synced, and can drop unsynced data, tear writes, fail
/// operations and run out of space, for crash and I/O-error tests.
///
/// Paths are plain strings; the engine joins them with `/`.
public protocol FileSystem: Sendable {
    /// Opens (or creates) the file at `path`.
    func open(_ path: String, mode: FileOpenMode) throws(StoreError) -> any FileHandle
    /// What is at `path`, or `nil` if nothing is.
    func kind(of path: String) throws(StoreError) -> FileKind?
    /// The names (not paths) of the entries of a directory, in no particular order.
    func contentsOfDirectory(_ path: String) throws(StoreError) -> [String]
    /// Creates a directory (its parent must exist). Not durable until the parent is synced.
    func createDirectory(_ path: String) throws(StoreError)
    /// Removes a file or an empty directory. Not durable until the directory is synced.
    func remove(_ path: String) throws(StoreError)
    /// Renames `from` to `to` atomically, replacing `to`. Not durable until the directory is synced.
    func rename(_ from: String, to: String) throws(StoreError)
    /// Makes the directory's entries (creations, renames, removals) durable: `fsync` on the directory.
    func syncDirectory(_ path: String) throws(StoreError)
    /// Takes an exclusive, non-blocking lock on the file at `path` (created if missing, opened
    /// for writing): a writer's lock. Throws ``StoreError/Code/locked`` when another holder, shared
    /// or exclusive, has it.
    func lock(_ path: String) throws(StoreError) -> any FileLock
    /// Takes a shared, non-blocking lock on the existing file at `path`, opened for reading only,
    /// and creates nothing: a reader's lock, which other shared holders may hold at the same time.
    /// Returns `nil` when no file is at `path` or it may not be opened for reading (`ENOENT`,
    /// `EACCES`, `EPERM`), so a read-only store without a usable lock file can still be read.
    /// Throws ``StoreError/Code/locked`` when an exclusive holder has it.
    func sharedLock(_ path: String) throws(StoreError) -> (any FileLock)?
}

/// How ``FileSystem/open(_:mode:)`` opens a file.
public enum FileOpenMode: Sendable, Equatable {
    /// Existing file, reads only.
    case readOnly
    /// Existing file, reads and writes.
    case readWrite
    /// A new file for reads and writes; fails if it exists.
    case createNew
}

/// What a path names.
public enum FileKind: Sendable, Equatable {
    /// A regular file of the given size in bytes.
    case file(size: UInt64)
    /// A directory.
    case directory
    /// Anything else (a socket, a device, …).
    case other
}

/// An open file. Reads and writes are positional, so one handle serves many threads.
public protocol FileHandle: AnyObject, Sendable {
    /// The path the file was opened at.
    var path: String { get }
    /// Reads up to `buffer.count` bytes at `offset`; returns how many were read (fewer only at end of file).
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(StoreError) -> Int
    /// Writes all of `bytes` at `offset`, or throws.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StoreError)
    /// The file's current size in bytes.
    func size() throws(StoreError) -> UInt64
    /// Cuts or extends the file to `size` bytes.
    func truncate(to size: UInt64) throws(StoreError)
    /// Makes the file's data durable (`fdatasync`). A failure is final for the engine.
    func sync() throws(StoreError)
    /// Closes the handle. Further calls throw ``StoreError/Code/closed``.
    func close()
}

/// A held lock, exclusive or shared; released by ``unlock()`` or when the holder goes away.
public protocol FileLock: AnyObject, Sendable {
    /// Releases the lock. Calling it twice is harmless.
    func unlock()
}

extension FileHandle {
    /// Reads exactly `count` bytes at `offset`, or throws ``StoreError/Code/corruption`` naming the
    /// file and offset when the file ends first.
    public func read(exactly count: Int, at offset: UInt64) throws(StoreError) -> [UInt8] {
        // No zero-fill: the read overwrites the buffer, and a short read is an error.
        var failure: StoreError? = nil
        var got = 0
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            do throws(StoreError) {
                got = try read(into: UnsafeMutableRawBufferPointer(buffer), at: offset)
            } catch {
                failure = error
            }
            // Bytes past a short read are zeroed so the array never exposes uninitialized memory.
            if got < count, let base = buffer.baseAddress { (base + got).initialize(repeating: 0, count: count - got) }
            initialized = count
        }
        if let failure { throw failure }
        guard got == count else {
            throw StoreError.corruption(
                "expected \(count) bytes but the file ends after \(got)", path: path, offset: offset)
        }
        return bytes
    }

    /// Reads up to `count` bytes at `offset` (fewer at end of file).
    public func read(upTo count: Int, at offset: UInt64) throws(StoreError) -> [UInt8] {
        // Not zeroed first: exactly the bytes read are kept (reads of large windows were
        // spending as long clearing the buffer as filling it).
        let count = max(count, 0)
        return try typed {
            try [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
                initialized = 0
                initialized = try read(into: UnsafeMutableRawBufferPointer(buffer), at: offset)
            }
        }
    }

    /// Writes all of `bytes` at `offset`.
    public func write(_ bytes: [UInt8], at offset: UInt64) throws(StoreError) {
        try typed { try bytes.withUnsafeBytes { try write($0, at: offset) } }
    }
}

extension FileSystem {
    /// Whether anything exists at `path`.
    public func exists(_ path: String) throws(StoreError) -> Bool { try kind(of: path) != nil }
}

import Glibc
import Synchronization
import StrataSync

/// The real ``FileSystem``: POSIX system calls through Glibc.
///
/// Files are opened with `O_CLOEXEC`; new files get mode `0644`, new directories `0755`.
/// Reads and writes are positional (`pread`/`pwrite`) and retried on short transfers and
/// `EINTR`. ``FileHandle/sync()`` is `fdatasync`; ``syncDirectory(_:)`` is `fsync` on the
/// directory. Locks are `flock(LOCK_EX | LOCK_NB)` on a lock file (readers' locks
/// `flock(LOCK_SH | LOCK_NB)`), so a conflicting lock on the same file fails even from the same
/// process.
public struct PosixFileSystem: FileSystem {
    /// Creates the file system. It has no state of its own.
    public init() {}

    /// Opens with `open(2)` (`O_CLOEXEC`; `O_CREAT|O_EXCL` for ``FileOpenMode/createNew``).
    public func open(_ path: String, mode: FileOpenMode) throws(StoreError) -> any FileHandle {
        let flags: Int32
        switch mode {
        case .readOnly: flags = O_RDONLY
        case .readWrite: flags = O_RDWR
        case .createNew: flags = O_RDWR | O_CREAT | O_EXCL
        }
        let fd = try openDescriptor(path, flags: flags | O_CLOEXEC, advice: advice(for: mode))
        var info = stat()
        if fstat(fd, &info) != 0 {
            let code = errno
            _ = Glibc.close(fd)
            throw posixError("fstat", "check that the file is still accessible", path: path, errno: code)
        }
        if info.st_mode & S_IFMT == S_IFDIR {
            _ = Glibc.close(fd)
            throw posixError("open", "the path names a directory, not a file", path: path, errno: EISDIR)
        }
        return PosixFileHandle(fd: fd, path: path)
    }

    /// Classifies the path with `stat(2)`; `nil` on `ENOENT`.
    public func kind(of path: String) throws(StoreError) -> FileKind? {
        var info = stat()
        guard stat(path, &info) == 0 else {
            let code = errno
            if code == ENOENT { return nil }
            throw posixError("stat", "check the path and its permissions", path: path, errno: code)
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG: return .file(size: UInt64(info.st_size))
        case S_IFDIR: return .directory
        default: return .other
        }
    }

    /// Lists entries with `opendir(3)`/`readdir(3)`, without `.` and `..`.
    public func contentsOfDirectory(_ path: String) throws(StoreError) -> [String] {
        guard let dir = opendir(path) else {
            throw posixError("opendir", "check that the directory exists and is readable", path: path, errno: errno)
        }
        defer { closedir(dir) }
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = readdir(dir) else {
                let code = errno
                if code != 0 {
                    throw posixError("readdir", "check the directory and the disk", path: path, errno: code)
                }
                return names
            }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
    }

    /// Creates the directory with `mkdir(2)`, mode 0755.
    public func createDirectory(_ path: String) throws(StoreError) {
        guard mkdir(path, 0o755) == 0 else {
            throw posixError("mkdir", "check that the parent exists, is writable and the path is free", path: path, errno: errno)
        }
    }

    /// Removes a file with `unlink(2)` or an empty directory with `rmdir(2)`.
    public func remove(_ path: String) throws(StoreError) {
        if unlink(path) == 0 { return }
        let code = errno
        // Linux reports EISDIR (POSIX allows EPERM) when unlink is given a directory.
        guard code == EISDIR || code == EPERM else {
            throw posixError("unlink", "check that the file exists and its directory is writable", path: path, errno: code)
        }
        guard rmdir(path) == 0 else {
            throw posixError("rmdir", "check that the directory is empty and its parent is writable", path: path, errno: errno)
        }
    }

    /// Renames atomically with `rename(2)`.
    public func rename(_ from: String, to: String) throws(StoreError) {
        guard Glibc.rename(from, to) == 0 else {
            throw posixError(
                "rename", "check that \(from) exists and \(to) is on the same file system", path: from, errno: errno)
        }
    }

    /// Opens the directory `O_RDONLY|O_DIRECTORY` and calls `fsync(2)` on it.
    public func syncDirectory(_ path: String) throws(StoreError) {
        let fd = try openDescriptor(
            path, flags: O_RDONLY | O_DIRECTORY | O_CLOEXEC, advice: "check that the directory exists and is readable")
        defer { _ = Glibc.close(fd) }
        try retrying("fsync", "the directory's entries may not be durable; treat the store as failed", path: path) {
            fsync(fd)
        }
    }

    /// Takes `flock(2)` with `LOCK_EX|LOCK_NB` on the file (created if missing).
    public func lock(_ path: String) throws(StoreError) -> any FileLock {
        let fd = try openDescriptor(
            path, flags: O_RDWR | O_CREAT | O_CLOEXEC, advice: "check that the lock file's directory exists and is writable")
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            if code == EINTR { continue }
            _ = Glibc.close(fd)
            if code == EWOULDBLOCK || code == EAGAIN {
                throw StoreError(
                    .locked, "another process or engine holds the store open (lock file is taken); close it first",
                    path: path, errno: code)
            }
            throw posixError("flock", "check that the file system supports flock", path: path, errno: code)
        }
        return PosixFileLock(fd: fd)
    }

    /// Opens the file `O_RDONLY` (never creating it) and takes `flock(2)` with `LOCK_SH|LOCK_NB`;
    /// `nil` when `open` fails with `ENOENT`, `EACCES` or `EPERM`.
    public func sharedLock(_ path: String) throws(StoreError) -> (any FileLock)? {
        var fd: Int32
        while true {
            fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
            if fd >= 0 { break }
            let code = errno
            if code == EINTR { continue }
            if code == ENOENT || code == EACCES || code == EPERM { return nil }
            throw posixError("open", "check that the lock file's directory is readable", path: path, errno: code)
        }
        while flock(fd, LOCK_SH | LOCK_NB) != 0 {
            let code = errno
            if code == EINTR { continue }
            _ = Glibc.close(fd)
            if code == EWOULDBLOCK || code == EAGAIN {
                throw StoreError(
                    .locked, "another process or engine holds the store open for writing (lock file is taken); close it first",
                    path: path, errno: code)
            }
            throw posixError("flock", "check that the file system supports flock", path: path, errno: code)
        }
        return PosixFileLock(fd: fd)
    }

    private func openDescriptor(_ path: String, flags: Int32, advice: String) throws(StoreError) -> Int32 {
        while true {
            let fd = Glibc.open(path, flags, 0o644)
            if fd >= 0 { return fd }
            let code = errno
            if code != EINTR { throw posixError("open", advice, path: path, errno: code) }
        }
    }

    private func advice(for mode: FileOpenMode) -> String {
        switch mode {
        case .readOnly: "check that the file exists and is readable"
        case .readWrite: "check that the file exists and is writable"
        case .createNew: "check that the directory exists, is writable and the file does not exist yet"
        }
    }
}

/// An open POSIX file descriptor.
///
/// Thread safety: `state` (a `Mutex`) protects the descriptor, the count of calls using it and
/// the closing flag. Calls take the descriptor under the lock and run the system call outside it,
/// so reads and writes on one handle run in parallel. `close()` marks the handle closed; the
/// descriptor is closed by `close()` itself or by the last call still using it, so it is never
/// reused under a running call. `path` is immutable.
final class PosixFileHandle: FileHandle {
    private struct State {
        var fd: Int32
        var inFlight = 0
        var closing = false
    }

    let path: String
    private let state: Locked<State>

    init(fd: Int32, path: String) {
        self.path = path
        self.state = Locked(State(fd: fd))
    }

    deinit { close() }

    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(StoreError) -> Int {
        let start = try fileOffset(offset, buffer.count)
        guard let base = buffer.baseAddress, buffer.count > 0 else { return 0 }
        return try withDescriptor("pread") { fd throws(StoreError) -> Int in
            var done = 0
            while done < buffer.count {
                let n = pread(fd, base + done, buffer.count - done, start + off_t(done))
                if n > 0 {
                    done += n
                } else if n == 0 {
                    break  // End of file.
                } else if case let code = errno, code != EINTR {
                    throw posixError(
                        "pread", "check the disk; the file may be damaged", path: path, errno: code,
                        offset: offset + UInt64(done))
                }
            }
            return done
        }
    }

    func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StoreError) {
        let start = try fileOffset(offset, bytes.count)
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        try withDescriptor("pwrite") { fd throws(StoreError) in
            var done = 0
            while done < bytes.count {
                let n = pwrite(fd, base + done, bytes.count - done, start + off_t(done))
                if n > 0 {
                    done += n
                    continue
                }
                // pwrite returning 0 for a non-empty buffer would loop forever; report it as EIO.
                let code = n == 0 ? EIO : errno
                if code == EINTR { continue }
                throw posixError(
                    "pwrite", "check free space and the disk", path: path, errno: code,
                    offset: offset + UInt64(done))
            }
        }
    }

    func size() throws(StoreError) -> UInt64 {
        try withDescriptor("fstat") { fd throws(StoreError) -> UInt64 in
            var info = stat()
            guard fstat(fd, &info) == 0 else {
                throw posixError("fstat", "check that the file is still accessible", path: path, errno: errno)
            }
            return UInt64(info.st_size)
        }
    }

    func truncate(to size: UInt64) throws(StoreError) {
        let length = try fileOffset(size, 0)
        try withDescriptor("ftruncate") { fd throws(StoreError) in
            try retrying("ftruncate", "check free space and that the file is writable", path: path) {
                ftruncate(fd, length)
            }
        }
    }

    func sync() throws(StoreError) {
        try withDescriptor("fdatasync") { fd throws(StoreError) in
            try retrying("fdatasync", "the data may not be durable; treat the store as failed", path: path) {
                fdatasync(fd)
            }
        }
    }

    func close() {
        let toClose = state.withLock { state -> Int32? in
            guard !state.closing else { return nil }
            state.closing = true
            return state.inFlight == 0 ? state.fd : nil
        }
        if let toClose { _ = Glibc.close(toClose) }
    }

    /// Runs `body` with the descriptor, keeping it open until `body` returns.
    private func withDescriptor<R>(
        _ call: String, _ body: (Int32) throws(StoreError) -> R
    ) throws(StoreError) -> R {
        let fd = try state.withLock { (state: inout State) throws(StoreError) -> Int32 in
            guard !state.closing else {
                throw StoreError(.closed, "\(call) on a closed file handle; open the file again", path: path)
            }
            state.inFlight += 1
            return state.fd
        }
        defer {
            let toClose = state.withLock { state -> Int32? in
                state.inFlight -= 1
                return state.closing && state.inFlight == 0 ? state.fd : nil
            }
            if let toClose { _ = Glibc.close(toClose) }
        }
        return try body(fd)
    }

    /// Converts an offset plus a length to `off_t`, rejecting values past the largest file offset.
    private func fileOffset(_ offset: UInt64, _ count: Int) throws(StoreError) -> off_t {
        guard let start = off_t(exactly: offset), off_t.max - start >= off_t(count) else {
            throw StoreError(
                .invalidArgument, "offset \(offset) + \(count) bytes is beyond the largest file offset",
                path: path, offset: offset)
        }
        return start
    }
}

/// A held `flock` (exclusive or shared) on an open lock file.
///
/// Thread safety: `fd` (a `Mutex`) holds the descriptor until `unlock()` takes and closes it,
/// which releases the lock; a second `unlock()` finds `nil` and does nothing.
final class PosixFileLock: FileLock {
    private let fd: Locked<Int32?>

    init(fd: Int32) { self.fd = Locked(fd) }

    deinit { unlock() }

    func unlock() {
        let taken = fd.withLock { fd -> Int32? in
            defer { fd = nil }
            return fd
        }
        if let taken { _ = flock(taken, LOCK_UN); _ = Glibc.close(taken) }
    }
}

/// Runs a system call that returns 0 or -1, retrying on `EINTR`; any other failure throws.
private func retrying(
    _ call: String, _ advice: String, path: String, _ body: () -> Int32
) throws(StoreError) {
    while body() != 0 {
        let code = errno
        if code != EINTR { throw posixError(call, advice, path: path, errno: code) }
    }
}

/// The ``StoreError`` for a failed system call: names the call, the reason and what to do.
private func posixError(
    _ call: String, _ advice: String, path: String, errno code: Int32, offset: UInt64? = nil,
    fileID: StaticString = #fileID, line: UInt = #line
) -> StoreError {
    let reason = String(cString: strerror(code))
    return StoreError(
        .io, "\(call) failed: \(reason); \(advice)", path: path, offset: offset, errno: code,
        fileID: fileID, line: line)
}

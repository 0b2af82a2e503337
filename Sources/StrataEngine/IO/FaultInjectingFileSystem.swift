import Glibc
import Synchronization
import StrataSync

/// An in-memory ``FileSystem`` for crash and I/O-error tests that keeps only what was synced.
///
/// Every file has *current* bytes (what reads see) and *durable* bytes (what survives a crash);
/// ``FileHandle/sync()`` makes the current bytes durable. Every directory likewise has current
/// and durable entries; ``syncDirectory(_:)`` makes the current entries of that one directory
/// durable. ``crash()`` simulates power loss and reboot: everything not durable is lost.
///
/// Tests can also fail chosen operations (``failNext(_:matching:skipping:errno:times:)``),
/// halt the file system at a chosen sync point (``crash(atSyncPoint:timing:)``), tear a write
/// (``tearNextWrite(matching:keeping:)``), run out of space (``spaceLimit``) and be mounted
/// read-only (``isReadOnlyMount``). The richer crash model
/// (FaultInjectingFileSystem+CrashModel.swift) keeps a chosen part of what was not synced
/// (``crash(keeping:)``) and halts at any I/O operation (``crash(atOperation:timing:)``).
///
/// ```swift
/// let fs = FaultInjectingFileSystem()
/// let file = try fs.open("/data", mode: .createNew)
/// try file.write([1, 2, 3], at: 0)
/// try file.sync()
/// fs.crash()
/// fs.contents(of: "/data")  // nil: the directory "/" was never synced
/// ```
///
/// Thread safety: all state (inodes, namespace, handles, locks, faults, counters) lives in one
/// `Mutex`, and every operation, on the file system or on a handle, runs under it.
public final class FaultInjectingFileSystem: FileSystem {
    /// When an armed crash halts the file system relative to its sync point.
    public enum CrashTiming: Sendable {
        /// The sync is not performed; the file system halts and the call throws.
        case beforeSync
        /// The sync is performed, then the file system halts and the call throws.
        case afterSync
    }

    /// An operation that ``failNext(_:matching:skipping:errno:times:)`` can fail.
    public enum Operation: Sendable {
        /// ``FileSystem/open(_:mode:)``.
        case open
        /// ``FileHandle/read(into:at:)``.
        case read
        /// ``FileHandle/write(_:at:)``.
        case write
        /// ``FileHandle/sync()``.
        case sync
        /// ``FileSystem/syncDirectory(_:)``.
        case syncDirectory
        /// ``FileSystem/rename(_:to:)``.
        case rename
        /// ``FileSystem/remove(_:)``.
        case remove
        /// ``FileSystem/createDirectory(_:)``.
        case createDirectory
        /// ``FileHandle/truncate(to:)``.
        case truncate
        /// ``FileSystem/lock(_:)`` and ``FileSystem/sharedLock(_:)``.
        case lock
    }

    /// How many operations reached the file system: calls made while it was not halted, on a
    /// valid handle, including calls that then failed by an injected fault.
    public struct OperationCounts: Sendable, Equatable {
        /// Calls of ``FileHandle/read(into:at:)``.
        public var reads = 0
        /// Calls of ``FileHandle/write(_:at:)``.
        public var writes = 0
        /// Calls of ``FileHandle/sync()``.
        public var syncs = 0
        /// Calls of ``FileSystem/syncDirectory(_:)``.
        public var directorySyncs = 0
    }

    /// All mutable state. Only ever touched under this lock (internal, not private, for the
    /// crash model in FaultInjectingFileSystem+CrashModel.swift).
    let state = Locked(FaultState())

    /// Creates an empty file system holding only the durable directory "/".
    public init(spaceLimit: UInt64? = nil) {
        state.withLock { $0.spaceLimit = spaceLimit }
    }

    // MARK: FileSystem

    public func open(_ path: String, mode: FileOpenMode) throws(StoreError) -> any FileHandle {
        try state.withLock { (s: inout FaultState) throws(StoreError) -> any FileHandle in
            try s.checkRunning(path)
            let haltAfter: Bool
            if mode == .createNew { haltAfter = try s.operationPoint(.open, path) } else { haltAfter = false }
            defer { if haltAfter { s.haltAfterOperation() } }
            if let fault = s.takeFault(.open, "open", path) { throw fault }
            if mode != .readOnly { try s.checkWritableMount("open", path) }
            let parts = try FaultState.components(path)
            let inode: Int
            if mode == .createNew {
                let (dir, name) = try s.parent(of: parts, path, "open")
                guard s.inodes[dir].entries[name] == nil else { throw FaultState.error("open", EEXIST, path) }
                inode = s.newInode(directory: false)
                s.inodes[dir].entries[name] = inode
                s.recordEntries(dir, [(name, inode)])
            } else {
                guard let found = s.lookup(parts) else { throw FaultState.error("open", ENOENT, path) }
                guard !s.inodes[found].isDirectory else { throw FaultState.error("open", EISDIR, path) }
                inode = found
            }
            let id = s.nextID()
            s.openHandles[id] = inode
            try s.haltIfOperationArmed(haltAfter, path)
            return FaultFileHandle(
                fs: self, id: id, inode: inode, generation: s.generation, path: path, writable: mode != .readOnly)
        }
    }

    public func kind(of path: String) throws(StoreError) -> FileKind? {
        try state.withLock { (s: inout FaultState) throws(StoreError) -> FileKind? in
            try s.checkRunning(path)
            guard let inode = s.lookup(try FaultState.components(path)) else { return nil }
            let node = s.inodes[inode]
            return node.isDirectory ? .directory : .file(size: UInt64(node.current.count))
        }
    }

    public func contentsOfDirectory(_ path: String) throws(StoreError) -> [String] {
        try state.withLock { (s: inout FaultState) throws(StoreError) -> [String] in
            try s.checkRunning(path)
            guard let inode = s.lookup(try FaultState.components(path)) else {
                throw FaultState.error("opendir", ENOENT, path)
            }
            guard s.inodes[inode].isDirectory else { throw FaultState.error("opendir", ENOTDIR, path) }
            return s.inodes[inode].entries.keys.sorted()  // sorted: runs repeat exactly (crash enumeration)
        }
    }

    public func createDirectory(_ path: String) throws(StoreError) {
        try state.withLock { (s: inout FaultState) throws(StoreError) in
            try s.checkRunning(path)
            let haltAfter = try s.operationPoint(.createDirectory, path)
            defer { if haltAfter { s.haltAfterOperation() } }
            if let fault = s.takeFault(.createDirectory, "mkdir", path) { throw fault }
            try s.checkWritableMount("mkdir", path)
            let (dir, name) = try s.parent(of: try FaultState.components(path), path, "mkdir")
            guard s.inodes[dir].entries[name] == nil else { throw FaultState.error("mkdir", EEXIST, path) }
            let inode = s.newInode(directory: true)
            s.inodes[dir].entries[name] = inode
            s.recordEntries(dir, [(name, inode)])
            try s.haltIfOperationArmed(haltAfter, path)
        }
    }

    public func remove(_ path: String) throws(StoreError) {
        try state.withLock { (s: inout FaultState) throws(StoreError) in
            try s.checkRunning(path)
            let haltAfter = try s.operationPoint(.remove, path)
            defer { if haltAfter { s.haltAfterOperation() } }
            if let fault = s.takeFault(.remove, "unlink", path) { throw fault }
            try s.checkWritableMount("unlink", path)
            let (dir, name) = try s.parent(of: try FaultState.components(path), path, "unlink")
            guard let inode = s.inodes[dir].entries[name] else { throw FaultState.error("unlink", ENOENT, path) }
            guard s.inodes[inode].entries.isEmpty else { throw FaultState.error("rmdir", ENOTEMPTY, path) }
            s.inodes[dir].entries[name] = nil
            s.recordEntries(dir, [(name, nil)])
            s.collectGarbage()
            try s.haltIfOperationArmed(haltAfter, path)
        }
    }

    public func rename(_ from: String, to: String) throws(StoreError) {
        try state.withLock { (s: inout FaultState) throws(StoreError) in
            try s.checkRunning(from)
            let haltAfter = try s.operationPoint(.rename, from)
            defer { if haltAfter { s.haltAfterOperation() } }
            if let fault = s.takeFault(.rename, "rename", from, to) { throw fault }
            try s.checkWritableMount("rename", from)
            let source = try FaultState.components(from)
            let target = try FaultState.components(to)
            let (fromDir, fromName) = try s.parent(of: source, from, "rename")
            let (toDir, toName) = try s.parent(of: target, to, "rename")
            guard let inode = s.inodes[fromDir].entries[fromName] else {
                throw FaultState.error("rename", ENOENT, from)
            }
            if source == target { return }
            if target.count > source.count && Array(target.prefix(source.count)) == source {
                throw FaultState.error("rename", EINVAL, to)  // Into its own subtree.
            }
            if let existing = s.inodes[toDir].entries[toName] {
                if existing == inode { return }  // Two names of one file: POSIX does nothing.
                let isDirectory = s.inodes[inode].isDirectory
                if s.inodes[existing].isDirectory {
                    guard isDirectory else { throw FaultState.error("rename", EISDIR, to) }
                    guard s.inodes[existing].entries.isEmpty else { throw FaultState.error("rename", ENOTEMPTY, to) }
                } else if isDirectory {
                    throw FaultState.error("rename", ENOTDIR, to)
                }
            }
            s.inodes[fromDir].entries[fromName] = nil
            s.inodes[toDir].entries[toName] = inode
            if fromDir == toDir {
                s.recordEntries(fromDir, [(fromName, nil), (toName, inode)])
            } else {
                s.recordEntries(fromDir, [(fromName, nil)])
                s.recordEntries(toDir, [(toName, inode)])
            }
            s.collectGarbage()
            try s.haltIfOperationArmed(haltAfter, from)
        }
    }

    public func syncDirectory(_ path: String) throws(StoreError) {
        try state.withLock { (s: inout FaultState) throws(StoreError) in
            try s.checkRunning(path)
            s.counts.directorySyncs += 1
            s.syncsByPath[path, default: 0] += 1
            let haltAfterOperation = try s.operationPoint(.syncDirectory, path)
            defer { if haltAfterOperation { s.haltAfterOperation() } }
            let haltAfter = try s.syncPoint(path)
            if let fault = s.takeFault(.syncDirectory, "fsync", path) {
                if haltAfter { s.halted = "crash armed after sync point \(s.syncPoints)" }
                throw fault
            }
            guard let inode = s.lookup(try FaultState.components(path)) else {
                throw FaultState.error("open", ENOENT, path)
            }
            guard s.inodes[inode].isDirectory else { throw FaultState.error("open", ENOTDIR, path) }
            s.makeEntriesDurable(inode)
            s.collectGarbage()
            try s.haltIfArmed(haltAfter, path)
            try s.haltIfOperationArmed(haltAfterOperation, path)
        }
    }

    public func lock(_ path: String) throws(StoreError) -> any FileLock {
        try state.withLock { (s: inout FaultState) throws(StoreError) -> any FileLock in
            try s.checkRunning(path)
            if let fault = s.takeFault(.lock, "flock", path) { throw fault }
            // The lock file is opened for writing (O_RDWR|O_CREAT), which a read-only mount refuses.
            try s.checkWritableMount("open", path)
            let parts = try FaultState.components(path)
            let key = FaultState.join(parts)
            guard s.locks[key] == nil else {
                throw StoreError(
                    .locked, "another process or engine holds the store open (lock file is taken); close it first",
                    path: path, errno: EWOULDBLOCK)
            }
            if let inode = s.lookup(parts) {
                guard !s.inodes[inode].isDirectory else { throw FaultState.error("open", EISDIR, path) }
            } else {
                let haltAfter = try s.operationPoint(.lock, path)
                defer { if haltAfter { s.haltAfterOperation() } }
                let (dir, name) = try s.parent(of: parts, path, "open")
                let inode = s.newInode(directory: false)
                s.inodes[dir].entries[name] = inode
                s.recordEntries(dir, [(name, inode)])
                try s.haltIfOperationArmed(haltAfter, path)
            }
            let id = s.nextID()
            s.locks[key] = .exclusive(id)
            return FaultLock(fs: self, key: key, id: id)
        }
    }

    /// A shared lock on an existing file, as ``PosixFileSystem`` takes it: creates nothing and
    /// works on a read-only mount; `nil` when no file is at `path`. Fails (``FaultInjectingFileSystem/Operation/lock``)
    /// like ``lock(_:)``.
    public func sharedLock(_ path: String) throws(StoreError) -> (any FileLock)? {
        try state.withLock { (s: inout FaultState) throws(StoreError) -> (any FileLock)? in
            try s.checkRunning(path)
            if let fault = s.takeFault(.lock, "flock", path) { throw fault }
            let parts = try FaultState.components(path)
            let key = FaultState.join(parts)
            guard let inode = s.lookup(parts) else { return nil }
            guard !s.inodes[inode].isDirectory else { throw FaultState.error("open", EISDIR, path) }
            let id = s.nextID()
            switch s.locks[key] {
            case .exclusive?:
                throw StoreError(
                    .locked, "another process or engine holds the store open for writing (lock file is taken); close it first",
                    path: path, errno: EWOULDBLOCK)
            case .shared(var holders)?:
                holders.insert(id)
                s.locks[key] = .shared(holders)
            case nil:
                s.locks[key] = .shared([id])
            }
            return FaultLock(fs: self, key: key, id: id)
        }
    }

    // MARK: Crashes and faults

    /// Simulates power loss and reboot: only durable entries and durable bytes remain, open
    /// handles become invalid, locks are released, and a halted file system runs again.
    ///
    /// A pending ``crash(atSyncPoint:timing:)``, ``crash(atOperation:timing:)``,
    /// ``tearNextWrite(matching:keeping:)`` or ``failNextWrite(matching:afterWriting:errno:)`` is
    /// dropped; ``failNext(_:matching:skipping:errno:times:)`` faults, ``spaceLimit`` and
    /// ``isReadOnlyMount`` stay. ``crash(keeping:)`` keeps some of what was not synced.
    public func crash() {
        state.withLock { s in
            s.keepUnsynced(.none)  // empties the journal of unsynced writes
            s.generation += 1
            s.openHandles = [:]
            s.locks = [:]
            s.halted = nil
            s.trigger = nil
            s.tear = nil
            var stack = [0]
            var seen: Set<Int> = []
            while let inode = stack.popLast() {
                guard seen.insert(inode).inserted else { continue }
                if s.inodes[inode].isDirectory {
                    s.inodes[inode].entries = s.inodes[inode].durableEntries
                    stack.append(contentsOf: s.inodes[inode].entries.values)
                } else {
                    s.inodes[inode].current = s.inodes[inode].durable
                }
            }
            s.collectGarbage()
        }
    }

    /// Halts the file system: every later operation throws an ``StoreError/Code/io`` error
    /// ("simulated crash", `EIO`) until ``crash()`` is called.
    public func halt() {
        state.withLock { s in
            if s.halted == nil { s.halted = "halt() was called" }
        }
    }

    /// Whether the file system is mounted read-only. While it is, every call that would change
    /// it fails with ``StoreError/Code/io`` and `EROFS`, changing nothing: ``FileSystem/open(_:mode:)``
    /// other than ``FileOpenMode/readOnly``, ``FileSystem/createDirectory(_:)``,
    /// ``FileSystem/remove(_:)``, ``FileSystem/rename(_:to:)``, ``FileSystem/lock(_:)`` (which
    /// opens the lock file for writing) and, on any handle, ``FileHandle/write(_:at:)`` and
    /// ``FileHandle/truncate(to:)``. Reads, listings, ``FileSystem/sharedLock(_:)`` and syncs
    /// (which have nothing to write) work. Injected faults are checked first. The inspection and
    /// corruption helpers (``setContents(_:of:)`` and friends) bypass it, as they bypass faults.
    public var isReadOnlyMount: Bool {
        get { state.withLock { $0.readOnlyMount } }
        set { state.withLock { $0.readOnlyMount = newValue } }
    }

    /// Whether the file system is halted (by ``halt()``, an armed crash or a torn write).
    public var isHalted: Bool { state.withLock { $0.halted != nil } }

    /// How many sync points (calls of ``FileHandle/sync()`` and ``syncDirectory(_:)`` made while
    /// not halted) have been reached since the file system was created.
    public var syncPointCount: Int { state.withLock { $0.syncPoints } }

    /// Arms a crash at the `n`-th sync point from now (1-based): with `.beforeSync` that sync
    /// is not performed, with `.afterSync` it is; either way the file system halts and the call
    /// throws. Replaces any crash armed before.
    public func crash(atSyncPoint n: Int, timing: CrashTiming) {
        state.withLock { s in s.trigger = (s.syncPoints + max(n, 1), timing) }
    }

    /// Makes the next matching call of `op` throw ``StoreError/Code/io`` with `errno`, without
    /// effect. A call matches when its path (either path, for rename) contains `pathFragment`;
    /// the first `skipping` matching calls run normally; then `times` calls fail.
    public func failNext(
        _ op: Operation, matching pathFragment: String? = nil, skipping: Int = 0, errno: Int32 = EIO,
        times: Int = 1
    ) {
        guard times > 0 else { return }
        state.withLock { s in
            s.faults.append(
                FaultState.Fault(op: op, fragment: pathFragment, skipping: max(skipping, 0), errno: errno, times: times))
        }
    }

    /// Drops every pending fault, armed crash and torn write. Does not change ``spaceLimit``.
    public func clearFaults() {
        state.withLock { s in
            s.faults = []
            s.trigger = nil
            s.tear = nil
            s.journal.trigger = nil
            s.journal.partialWrite = nil
        }
    }

    /// Makes the next write whose path contains `pathFragment` store only its first `keeping`
    /// bytes, then halts the file system (the write throws).
    public func tearNextWrite(matching pathFragment: String? = nil, keeping: Int) {
        state.withLock { s in s.tear = (pathFragment, max(keeping, 0)) }
    }

    /// The most bytes all files together may hold (counting files reachable by a name or an
    /// open handle); a write or extending truncate past it throws `ENOSPC` and changes nothing.
    public var spaceLimit: UInt64? {
        get { state.withLock { $0.spaceLimit } }
        set { state.withLock { $0.spaceLimit = newValue } }
    }

    /// How many reads, writes and syncs reached the file system so far.
    public var operationCounts: OperationCounts { state.withLock { $0.counts } }

    /// How many calls of ``FileHandle/sync()`` and ``syncDirectory(_:)`` whose path contains
    /// `pathFragment` (every call when `nil`) reached the file system so far, counted as
    /// ``operationCounts`` counts them (a call that then failed by an injected fault included).
    /// Lets a test check that a file whose sync failed is never synced again.
    public func syncCount(matching pathFragment: String? = nil) -> Int {
        state.withLock { s in
            s.syncsByPath.reduce(0) { $0 + (FaultState.matches(pathFragment, $1.key) ? $1.value : 0) }
        }
    }

    // MARK: Inspection and corruption (these bypass faults and halting)

    /// The current bytes of the file at `path`, or `nil` if no file is there.
    public func contents(of path: String) -> [UInt8]? {
        state.withLock { s in
            guard let parts = try? FaultState.components(path), let inode = s.lookup(parts),
                !s.inodes[inode].isDirectory
            else { return nil }
            return s.inodes[inode].current
        }
    }

    /// The bytes `path` would hold after a ``crash()`` now: the durable bytes of the file that
    /// the durable namespace names `path`, or `nil` if a crash would leave no file there.
    public func durableContents(of path: String) -> [UInt8]? {
        state.withLock { s in
            guard let parts = try? FaultState.components(path), let inode = s.lookup(parts, durable: true),
                !s.inodes[inode].isDirectory
            else { return nil }
            return s.inodes[inode].durable
        }
    }

    /// Sets the current and durable bytes of the file at `path`, creating it (and missing parent
    /// directories) in both the current and the durable namespace. Does nothing if a parent
    /// is a file or `path` is a directory.
    public func setContents(_ bytes: [UInt8], of path: String) {
        state.withLock { s in
            guard let parts = try? FaultState.components(path), !parts.isEmpty else { return }
            var dir = 0
            for (index, name) in parts.enumerated() {
                let last = index == parts.count - 1
                let inode = s.inodes[dir].entries[name] ?? s.newInode(directory: !last)
                guard s.inodes[inode].isDirectory != last else { return }
                s.inodes[dir].entries[name] = inode
                s.inodes[dir].durableEntries[name] = inode
                dir = inode
            }
            s.inodes[dir].current = bytes
            s.inodes[dir].durable = bytes
            s.forgetJournal(of: dir)
            s.collectGarbage()
        }
    }

    /// XORs the byte at `offset` of the file at `path` with `mask`, in its current and its
    /// durable bytes (where the offset is inside them).
    public func flipBits(in path: String, at offset: Int, mask: UInt8 = 0xFF) {
        state.withLock { s in
            guard offset >= 0, let parts = try? FaultState.components(path), let inode = s.lookup(parts),
                !s.inodes[inode].isDirectory
            else { return }
            if offset < s.inodes[inode].current.count { s.inodes[inode].current[offset] ^= mask }
            if offset < s.inodes[inode].durable.count { s.inodes[inode].durable[offset] ^= mask }
            s.flipUnsynced(inode, at: offset, mask: mask)
        }
    }

    /// Cuts or zero-extends both the current and the durable bytes of the file at `path` to `size`.
    public func truncateFile(_ path: String, to size: Int) {
        state.withLock { s in
            guard size >= 0, let parts = try? FaultState.components(path), let inode = s.lookup(parts),
                !s.inodes[inode].isDirectory
            else { return }
            FaultState.resize(&s.inodes[inode].current, to: size)
            FaultState.resize(&s.inodes[inode].durable, to: size)
            if s.journal.files[inode] != nil { s.recordTruncate(inode, to: size) }
        }
    }

    /// The full paths of all regular files under `directory` (recursively) in the current
    /// namespace, sorted.
    public func listFiles(under directory: String) -> [String] {
        state.withLock { s in
            guard let parts = try? FaultState.components(directory), let root = s.lookup(parts) else { return [] }
            var files: [String] = []
            var stack = [(root, FaultState.join(parts))]
            var seen: Set<Int> = []
            while let (inode, path) = stack.popLast() {
                guard seen.insert(inode).inserted else { continue }
                guard s.inodes[inode].isDirectory else {
                    files.append(path)
                    continue
                }
                for (name, child) in s.inodes[inode].entries {
                    stack.append((child, path == "/" ? "/" + name : path + "/" + name))
                }
            }
            return files.sorted()
        }
    }

    // MARK: Handle and lock operations

    fileprivate func read(
        _ handle: FaultFileHandle, into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64
    ) throws(StoreError) -> Int {
        try state.withLock { (s: inout FaultState) throws(StoreError) -> Int in
            let inode = try s.validate(handle)
            s.counts.reads += 1
            if let fault = s.takeFault(.read, "pread", handle.path) { throw fault }
            let count = s.inodes[inode].current.count
            guard let start = Int(exactly: offset), start < count, buffer.count > 0 else { return 0 }
            let n = min(buffer.count, count - start)
            s.inodes[inode].current.withUnsafeBytes { source in
                UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n])
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: source[start..<start + n]))
            }
            return n
        }
    }

    fileprivate func write(
        _ handle: FaultFileHandle, _ bytes: UnsafeRawBufferPointer, at offset: UInt64
    ) throws(StoreError) {
        try state.withLock { (s: inout FaultState) throws(StoreError) in
            let inode = try s.validate(handle)
            s.counts.writes += 1
            guard handle.writable else { throw FaultState.error("pwrite", EBADF, handle.path) }
            let haltAfter = try s.operationPoint(.write, handle.path)
            defer { if haltAfter { s.haltAfterOperation() } }
            if let fault = s.takeFault(.write, "pwrite", handle.path) { throw fault }
            try s.checkWritableMount("pwrite", handle.path)
            let start = try FaultState.checkedEnd(offset, bytes.count, handle.path) - bytes.count
            if let tear = s.tear, FaultState.matches(tear.fragment, handle.path) {
                let kept = min(tear.keeping, bytes.count)
                let prefix = UnsafeRawBufferPointer(rebasing: bytes[0..<kept])
                try s.store(prefix, at: start, in: inode, handle.path)
                s.recordWrite(inode, at: start, prefix)
                s.tear = nil
                s.halted = "torn write to \(handle.path) kept \(kept) of \(bytes.count) bytes"
                throw s.haltedError(handle.path)
            }
            if let partial = s.takePartialWrite(handle.path) {
                let prefix = UnsafeRawBufferPointer(rebasing: bytes[0..<min(partial.kept, bytes.count)])
                try s.store(prefix, at: start, in: inode, handle.path)
                s.recordWrite(inode, at: start, prefix)
                throw StoreError(
                    .io, "pwrite failed after writing \(prefix.count) of \(bytes.count) bytes: \(FaultState.reason(partial.errno)) (injected by failNextWrite)",
                    path: handle.path, offset: offset, errno: partial.errno)
            }
            try s.store(bytes, at: start, in: inode, handle.path)
            s.recordWrite(inode, at: start, bytes)
            try s.haltIfOperationArmed(haltAfter, handle.path)
        }
    }

    fileprivate func size(_ handle: FaultFileHandle) throws(StoreError) -> UInt64 {
        try state.withLock { (s: inout FaultState) throws(StoreError) -> UInt64 in
            UInt64(s.inodes[try s.validate(handle)].current.count)
        }
    }

    fileprivate func truncate(_ handle: FaultFileHandle, to size: UInt64) throws(StoreError) {
        try state.withLock { (s: inout FaultState) throws(StoreError) in
            let inode = try s.validate(handle)
            guard handle.writable else { throw FaultState.error("ftruncate", EINVAL, handle.path) }
            let haltAfter = try s.operationPoint(.truncate, handle.path)
            defer { if haltAfter { s.haltAfterOperation() } }
            if let fault = s.takeFault(.truncate, "ftruncate", handle.path) { throw fault }
            try s.checkWritableMount("ftruncate", handle.path)
            let newSize = try FaultState.checkedEnd(size, 0, handle.path)
            let oldSize = s.inodes[inode].current.count
            if newSize > oldSize { try s.reserve(newSize - oldSize, handle.path) }
            FaultState.resize(&s.inodes[inode].current, to: newSize)
            s.recordTruncate(inode, to: newSize)
            try s.haltIfOperationArmed(haltAfter, handle.path)
        }
    }

    fileprivate func sync(_ handle: FaultFileHandle) throws(StoreError) {
        try state.withLock { (s: inout FaultState) throws(StoreError) in
            let inode = try s.validate(handle)
            s.counts.syncs += 1
            s.syncsByPath[handle.path, default: 0] += 1
            let haltAfterOperation = try s.operationPoint(.sync, handle.path)
            defer { if haltAfterOperation { s.haltAfterOperation() } }
            let haltAfter = try s.syncPoint(handle.path)
            if let fault = s.takeFault(.sync, "fdatasync", handle.path) {
                if haltAfter { s.halted = "crash armed after sync point \(s.syncPoints)" }
                s.syncFailed(inode)
                throw fault
            }
            s.makeDurable(inode)
            try s.haltIfArmed(haltAfter, handle.path)
            try s.haltIfOperationArmed(haltAfterOperation, handle.path)
        }
    }

    fileprivate func close(_ handle: FaultFileHandle) {
        state.withLock { s in
            guard s.generation == handle.generation, s.openHandles.removeValue(forKey: handle.id) != nil else { return }
            s.collectGarbage()
        }
    }

    fileprivate func unlock(key: String, id: Int) {
        state.withLock { s in
            switch s.locks[key] {
            case .exclusive(let holder)? where holder == id:
                s.locks[key] = nil
            case .shared(var holders)? where holders.contains(id):
                holders.remove(id)
                s.locks[key] = holders.isEmpty ? nil : .shared(holders)
            default:
                break
            }
        }
    }
}

/// A handle of a ``FaultInjectingFileSystem``; every call runs under the file system's lock.
/// All stored properties are immutable; whether the handle is open lives in the file system.
final class FaultFileHandle: FileHandle {
    let path: String
    let fs: FaultInjectingFileSystem
    let id: Int
    let inode: Int
    let generation: Int
    let writable: Bool

    fileprivate init(fs: FaultInjectingFileSystem, id: Int, inode: Int, generation: Int, path: String, writable: Bool) {
        self.fs = fs
        self.id = id
        self.inode = inode
        self.generation = generation
        self.path = path
        self.writable = writable
    }

    deinit { fs.close(self) }

    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(StoreError) -> Int {
        try fs.read(self, into: buffer, at: offset)
    }

    func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StoreError) {
        try fs.write(self, bytes, at: offset)
    }

    func size() throws(StoreError) -> UInt64 { try fs.size(self) }
    func truncate(to size: UInt64) throws(StoreError) { try fs.truncate(self, to: size) }
    func sync() throws(StoreError) { try fs.sync(self) }
    func close() { fs.close(self) }
}

/// A lock of a ``FaultInjectingFileSystem``'s lock table. Immutable; the table holds the state.
final class FaultLock: FileLock {
    private let fs: FaultInjectingFileSystem
    private let key: String
    private let id: Int

    fileprivate init(fs: FaultInjectingFileSystem, key: String, id: Int) {
        self.fs = fs
        self.key = key
        self.id = id
    }

    deinit { unlock() }

    func unlock() { fs.unlock(key: key, id: id) }
}

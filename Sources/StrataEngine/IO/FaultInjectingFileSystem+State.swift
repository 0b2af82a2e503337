import Glibc

/// The state of a ``FaultInjectingFileSystem``: inodes, the current and durable namespace,
/// open handles, locks, armed faults and counters.
///
/// Not thread-safe by itself: the file system keeps it in a `Mutex` and touches it only under
/// that lock.
struct FaultState {
    /// A file or a directory, each with a current and a durable version.
    struct Inode {
        var isDirectory: Bool
        /// A file's bytes as reads see them.
        var current: [UInt8] = []
        /// A file's bytes as of its last sync: what a crash leaves.
        var durable: [UInt8] = []
        /// A directory's entries (name -> inode) as lookups see them.
        var entries: [String: Int] = [:]
        /// A directory's entries as of its last sync: what a crash leaves.
        var durableEntries: [String: Int] = [:]
        /// False once nothing (no entry, current or durable, and no handle) refers to it.
        var alive = true
    }

    /// A pending ``FaultInjectingFileSystem/failNext(_:matching:skipping:errno:times:)``.
    struct Fault {
        var op: FaultInjectingFileSystem.Operation
        var fragment: String?
        var skipping: Int
        var errno: Int32
        var times: Int
    }

    /// Files may not grow past this, so a stray huge offset fails instead of exhausting memory.
    static let maxFileSize = 1 << 32

    /// Inodes by number; inode 0 is "/". Numbers are never reused.
    var inodes = [Inode(isDirectory: true)]
    /// Increases with every crash; handles from an older generation are invalid.
    var generation = 0
    /// The last id given to a handle or lock.
    var lastID = 0
    /// Open handles of the current generation: handle id -> inode.
    var openHandles: [Int: Int] = [:]
    /// Who holds a lock file: one exclusive holder or any number of shared ones (by lock id).
    enum LockHolders: Equatable {
        case exclusive(Int)
        case shared(Set<Int>)
    }

    /// Held locks: normalized path -> holders. No entry when nobody holds the file.
    var locks: [String: LockHolders] = [:]
    /// Whether the file system is mounted read-only: every call that would create, write, cut,
    /// rename or remove a file or directory, or open one for writing, fails with `EROFS`.
    var readOnlyMount = false
    /// Why the file system is halted, or nil when it runs.
    var halted: String?
    var syncPoints = 0
    var trigger: (point: Int, timing: FaultInjectingFileSystem.CrashTiming)?
    var faults: [Fault] = []
    var tear: (fragment: String?, keeping: Int)?
    var spaceLimit: UInt64?
    var counts = FaultInjectingFileSystem.OperationCounts()
    /// Calls of sync and syncDirectory that reached the file system, by the path they named.
    var syncsByPath: [String: Int] = [:]
    /// Unsynced writes and directory changes, and the operation counter (the crash model,
    /// FaultInjectingFileSystem+CrashModel.swift).
    var journal = CrashJournal()

    mutating func nextID() -> Int {
        lastID += 1
        return lastID
    }

    mutating func newInode(directory: Bool) -> Int {
        inodes.append(Inode(isDirectory: directory))
        return inodes.count - 1
    }

    // MARK: Paths

    /// The names along `path`, without empty and "." components. Relative paths start at "/".
    static func components(_ path: String) throws(StoreError) -> [String] {
        var parts: [String] = []
        for part in path.split(separator: "/") where part != "." {
            guard part != ".." else {
                throw StoreError(
                    .invalidArgument, "the fault-injecting file system does not support \"..\" in paths; use a plain path",
                    path: path)
            }
            parts.append(String(part))
        }
        return parts
    }

    static func join(_ parts: [String]) -> String { "/" + parts.joined(separator: "/") }

    /// The inode the current (or durable) namespace names by `parts`, if any.
    func lookup(_ parts: [String], durable: Bool = false) -> Int? {
        var inode = 0
        for name in parts {
            let node = inodes[inode]
            guard node.isDirectory, let child = (durable ? node.durableEntries : node.entries)[name] else { return nil }
            inode = child
        }
        return inode
    }

    /// The existing parent directory of `parts` and the last name, for creating or removing it.
    func parent(of parts: [String], _ path: String, _ call: String) throws(StoreError) -> (Int, String) {
        guard let name = parts.last else { throw Self.error(call, EBUSY, path) }
        var inode = 0
        for part in parts.dropLast() {
            guard let child = inodes[inode].entries[part] else { throw Self.error(call, ENOENT, path) }
            guard inodes[child].isDirectory else { throw Self.error(call, ENOTDIR, path) }
            inode = child
        }
        return (inode, name)
    }

    static func matches(_ fragment: String?, _ path: String) -> Bool {
        guard let fragment else { return true }
        return path.contains(fragment)
    }

    // MARK: Halting, faults and sync points

    func checkRunning(_ path: String) throws(StoreError) {
        if halted != nil { throw haltedError(path) }
    }

    /// Throws `EROFS` for `call` on `path` when the file system is mounted read-only.
    func checkWritableMount(_ call: String, _ path: String) throws(StoreError) {
        if readOnlyMount { throw Self.error(call, EROFS, path) }
    }

    func haltedError(_ path: String) -> StoreError {
        StoreError(
            .io, "simulated crash: \(halted ?? "halted"); the file system stays halted until crash() reboots it",
            path: path, errno: EIO)
    }

    /// The handle's inode, or throws if the file system is halted or the handle is stale or closed.
    func validate(_ handle: FaultFileHandle) throws(StoreError) -> Int {
        try checkRunning(handle.path)
        guard handle.generation == generation else {
            throw StoreError(
                .io, "handle from before the simulated crash is invalid; open the file again",
                path: handle.path, errno: EBADF)
        }
        guard openHandles[handle.id] != nil else {
            throw StoreError(.closed, "the file handle was closed; open the file again", path: handle.path)
        }
        return handle.inode
    }

    /// The injected error for this call, if a fault matches it (consuming one use of the fault).
    mutating func takeFault(
        _ op: FaultInjectingFileSystem.Operation, _ call: String, _ path: String, _ other: String? = nil
    ) -> StoreError? {
        let index = faults.firstIndex { fault in
            fault.op == op && (Self.matches(fault.fragment, path) || other.map { Self.matches(fault.fragment, $0) } == true)
        }
        guard let index else { return nil }
        if faults[index].skipping > 0 {
            faults[index].skipping -= 1
            return nil
        }
        let code = faults[index].errno
        faults[index].times -= 1
        if faults[index].times == 0 { faults.remove(at: index) }
        return StoreError(
            .io, "\(call) failed: \(Self.reason(code)) (injected by failNext); the call had no effect",
            path: path, errno: code)
    }

    /// Counts a sync point and fires an armed crash: throws for `.beforeSync`, returns true
    /// for `.afterSync` (the caller syncs, then calls ``haltIfArmed(_:_:)``).
    mutating func syncPoint(_ path: String) throws(StoreError) -> Bool {
        syncPoints += 1
        guard let trigger, trigger.point == syncPoints else { return false }
        self.trigger = nil
        if trigger.timing == .afterSync { return true }
        halted = "crash armed before sync point \(syncPoints)"
        throw haltedError(path)
    }

    mutating func haltIfArmed(_ armed: Bool, _ path: String) throws(StoreError) {
        guard armed else { return }
        halted = "crash armed after sync point \(syncPoints)"
        throw haltedError(path)
    }

    // MARK: Data and space

    /// Writes `bytes` at `start` of the inode's current bytes, zero-filling a gap.
    mutating func store(_ bytes: UnsafeRawBufferPointer, at start: Int, in inode: Int, _ path: String) throws(StoreError) {
        guard bytes.count > 0 else { return }
        let end = start + bytes.count
        let oldSize = inodes[inode].current.count
        if end > oldSize {
            try reserve(end - oldSize, path)
            inodes[inode].current.append(contentsOf: repeatElement(0, count: end - oldSize))
        }
        inodes[inode].current.withUnsafeMutableBytes { target in
            UnsafeMutableRawBufferPointer(rebasing: target[start..<end]).copyMemory(from: bytes)
        }
    }

    /// Throws `ENOSPC` if growing the files by `extra` bytes would pass the space limit.
    func reserve(_ extra: Int, _ path: String) throws(StoreError) {
        guard let spaceLimit, UInt64(usedSpace()) + UInt64(extra) > spaceLimit else { return }
        throw StoreError(
            .io, "write failed: no space left on device (the simulated limit is \(spaceLimit) bytes); free space",
            path: path, errno: ENOSPC)
    }

    /// The current bytes of all files that have a current name or an open handle.
    func usedSpace() -> Int {
        var files = Set(openHandles.values)
        var stack = [0]
        var seen: Set<Int> = []
        while let inode = stack.popLast() {
            guard seen.insert(inode).inserted else { continue }
            if inodes[inode].isDirectory {
                stack.append(contentsOf: inodes[inode].entries.values)
            } else {
                files.insert(inode)
            }
        }
        return files.reduce(0) { $0 + inodes[$1].current.count }
    }

    /// `offset + count` as an `Int`, or throws `EFBIG` past ``maxFileSize``.
    static func checkedEnd(_ offset: UInt64, _ count: Int, _ path: String) throws(StoreError) -> Int {
        guard let start = Int(exactly: offset), start <= maxFileSize - count else {
            throw StoreError(
                .io, "file too large: the fault-injecting file system keeps files under \(maxFileSize) bytes",
                path: path, offset: offset, errno: EFBIG)
        }
        return start + count
    }

    static func resize(_ bytes: inout [UInt8], to size: Int) {
        if size < bytes.count {
            bytes.removeLast(bytes.count - size)
        } else {
            bytes.append(contentsOf: repeatElement(0, count: size - bytes.count))
        }
    }

    /// Frees inodes that no current or durable entry, no unsynced directory change and no open
    /// handle refers to.
    mutating func collectGarbage() {
        var marked: Set<Int> = []
        var stack = [0] + openHandles.values
        while let inode = stack.popLast() {
            guard marked.insert(inode).inserted else { continue }
            stack.append(contentsOf: inodes[inode].entries.values)
            stack.append(contentsOf: inodes[inode].durableEntries.values)
            stack.append(contentsOf: journalReferences(of: inode))  // a crash may keep these entries
        }
        for index in inodes.indices where inodes[index].alive && !marked.contains(index) {
            inodes[index] = Inode(isDirectory: inodes[index].isDirectory, alive: false)
            forgetJournal(of: index)
        }
    }

    static func error(_ call: String, _ code: Int32, _ path: String) -> StoreError {
        let advice: String
        switch code {
        case ENOENT: advice = "check that the path and its parent directory exist"
        case EEXIST: advice = "the path is taken; remove it or choose another"
        case ENOTDIR: advice = "a component of the path is a file, not a directory"
        case EISDIR: advice = "the path names a directory, not a file"
        case ENOTEMPTY: advice = "remove the directory's entries first"
        case EROFS: advice = "the file system is mounted read-only (simulated); open the store read-only"
        default: advice = "check the call's arguments"
        }
        return StoreError(.io, "\(call) failed: \(reason(code)); \(advice)", path: path, errno: code)
    }

    static func reason(_ code: Int32) -> String { String(cString: strerror(code)) }
}

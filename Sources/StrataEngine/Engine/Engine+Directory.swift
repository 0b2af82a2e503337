import Glibc

/// The store directory ([DIR-*]): where a store may be opened or created, the writer's lock,
/// and the creation of a new store, before recovery reads anything.
extension Engine {
    /// [DIR-5] The writer's exclusive lock. A file system or directory that refuses to create or
    /// open `LOCK` for writing (`EROFS`, `EACCES`, `EPERM`) fails the open before anything is
    /// written, with an error that says to open the store read-only.
    static func writerLock(_ lockPath: String, fileSystem fs: any FileSystem) throws(StoreError) -> any FileLock {
        do throws(StoreError) {
            return try fs.lock(lockPath)
        } catch let error where error.code == .io && [EROFS, EACCES, EPERM].contains(error.errno ?? 0) {
            throw StoreError(
                .io,
                "cannot open the store for writing: its LOCK file cannot be created or opened for writing (\(error.message)); open it read-only (EngineOptions.readOnly) to read it",
                path: lockPath, errno: error.errno)
        }
    }

    /// [DIR-2] A missing path or a zero-length file becomes a new store directory. Its entry
    /// in the parent is made durable when the store is created in it ([DIR-4]), so an open
    /// that fails before (a failed sync included) leaves the next open to do it.
    static func prepareLocation(_ path: String, fileSystem fs: any FileSystem, readOnly: Bool) throws(StoreError) {
        switch try fs.kind(of: path) {
        case .directory:
            return
        case nil where !readOnly:
            try fs.createDirectory(path)
        case .file(size: 0) where !readOnly:
            try fs.remove(path)
            try fs.createDirectory(path)
        case nil:
            throw StoreError(.notFound, "no store at this path (opened read-only, so none was created)", path: path)
        case .file:
            throw StoreError(.notAStore, "path is a file, not a Strata store directory", path: path)
        case .other:
            throw StoreError(.notAStore, "path is neither a file nor a directory", path: path)
        }
    }

    static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// [DIR-4] Before the lock file is created: a directory without a MANIFEST must hold only a
    /// creation's leftovers (and a read-only open needs a MANIFEST), so a foreign directory is
    /// never written. `newStoreManifest` checks again under the lock. Repair rebuilds a missing
    /// manifest from Strata's numbered files, so it skips the check when there are some.
    static func refuseForeignDirectory(_ path: String, options: EngineOptions) throws(StoreError) {
        let fs = options.fileSystem
        guard case .directory? = try fs.kind(of: path) else { return }
        let names = try fs.contentsOfDirectory(path)
        guard !names.contains(Format.manifestFileName) else { return }
        if options.repair && names.contains(where: { Format.parseNumberedFileName($0) != nil }) { return }
        try checkOnlyCreationLeftovers(path, names: names, fileSystem: fs)
        if options.readOnly {
            throw StoreError(.notFound, "no store here yet (opened read-only, so none was created)", path: path)
        }
    }

    /// [DIR-4] Throws `notAStore` unless `names` are only a lock file, a temporary manifest and
    /// WALs no longer than a header: the leftovers of a creation that crashed.
    static func checkOnlyCreationLeftovers(_ path: String, names: [String], fileSystem fs: any FileSystem) throws(StoreError) {
        for name in names where name != Format.lockFileName && name != Format.manifestTempFileName && name != Format.syncTempFileName {
            guard let parsed = Format.parseNumberedFileName(name), parsed.ext == Format.walExtension,
                case .file(let size)? = try fs.kind(of: path + "/" + name), size <= UInt64(Format.walHeaderSize)
            else {
                throw StoreError(
                    .notAStore,
                    "directory is not empty and has no MANIFEST (found \(name)); it is not a Strata store. Use an empty or new directory, or open with repair if this is a damaged store.",
                    path: path)
            }
        }
    }

    /// [DIR-4] A directory without a MANIFEST is a new store when it holds nothing but Strata's
    /// own leftovers of an interrupted creation (a lock file, a temporary manifest, WALs with no
    /// record). Anything else is not a Strata store.
    static func newStoreManifest(
        path: String, names: [String], numbered: [(number: UInt32, ext: String)], options: EngineOptions
    ) throws(StoreError) -> Manifest {
        let fs = options.fileSystem
        try checkOnlyCreationLeftovers(path, names: names, fileSystem: fs)
        guard !options.readOnly else {
            throw StoreError(.notFound, "no store here yet (opened read-only, so none was created)", path: path)
        }
        for name in names where name != Format.lockFileName { try fs.remove(path + "/" + name) }
        // The store directory's own entry first: it may be new, or left by an open that failed
        // before it was synced ([DIR-2]).
        try fs.syncDirectory(parentDirectory(of: path))
        let manifest = Manifest(nextFileNumber: 2, lastSequence: 0, wals: [1], segments: [])
        let handle = try fs.open(path + "/" + Format.walFileName(1), mode: .createNew)
        defer { handle.close() }
        try handle.write(WALRecord.fileHeader(fileNumber: 1), at: 0)
        try handle.sync()
        try fs.syncDirectory(path)
        try manifest.install(fileSystem: fs, directory: path)
        return manifest
    }
}

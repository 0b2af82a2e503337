import Glibc

/// A file or directory the replay runner or the corpus writer could not use.
struct FuzzFileError: Error, CustomStringConvertible {
    /// The path concerned.
    let path: String
    /// What failed, with the system's reason.
    let what: String

    var description: String { "\(path): \(what)" }

    /// An error for the failed call `call`, with `errno`'s text.
    static func system(_ call: String, _ path: String) -> FuzzFileError {
        FuzzFileError(path: path, what: "\(call) failed: \(String(cString: strerror(errno)))")
    }
}

/// Plain POSIX file access for the runner, so the target does not depend on Foundation.
enum FuzzFiles {
    /// `path` itself if it is a file; if it is a directory, its regular files (not recursive,
    /// hidden files skipped), sorted by name.
    static func inputPaths(_ path: String) throws(FuzzFileError) -> [String] {
        var info = stat()
        guard stat(path, &info) == 0 else { throw .system("stat", path) }
        guard info.st_mode & S_IFMT == S_IFDIR else { return [path] }
        guard let directory = opendir(path) else { throw .system("opendir", path) }
        defer { closedir(directory) }
        var paths: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            guard !name.hasPrefix(".") else { continue }
            let child = path.hasSuffix("/") ? path + name : path + "/" + name
            var childInfo = stat()
            if stat(child, &childInfo) == 0, childInfo.st_mode & S_IFMT == S_IFREG { paths.append(child) }
        }
        return paths.sorted()
    }

    /// The whole contents of the file at `path`.
    static func read(_ path: String) throws(FuzzFileError) -> [UInt8] {
        guard let file = fopen(path, "rb") else { throw .system("fopen", path) }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let got = chunk.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, file) }
            bytes += chunk[0..<got]
            if got < chunk.count { break }
        }
        guard ferror(file) == 0 else { throw .system("fread", path) }
        return bytes
    }

    /// Creates (or replaces) the file at `path` holding `bytes`.
    static func write(_ bytes: [UInt8], to path: String) throws(FuzzFileError) {
        guard let file = fopen(path, "wb") else { throw .system("fopen", path) }
        let written = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
        let closed = fclose(file)
        guard written == bytes.count, closed == 0 else { throw .system("fwrite", path) }
    }

    /// Creates the directory at `path` unless it already exists.
    static func makeDirectory(_ path: String) throws(FuzzFileError) {
        guard mkdir(path, 0o755) == 0 || errno == EEXIST else { throw .system("mkdir", path) }
    }

    /// Writes `message` and a newline to standard error.
    static func printError(_ message: String) {
        let line = Array((message + "\n").utf8)
        _ = line.withUnsafeBytes { Glibc.write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }

    /// Ends the process with `status`.
    static func exit(_ status: Int32) -> Never {
        Glibc.exit(status)
    }
}

import Foundation
import Glibc

/// A fresh directory (`mkdtemp`) that ``remove()`` deletes with everything in it.
public struct TemporaryDirectory: Sendable {
    /// The directory's absolute path.
    public let path: String

    /// Creates `<parent>/<prefix>XXXXXX`.
    ///
    /// - Throws: ``BenchmarkError`` when `mkdtemp` fails (for example, `parent` is missing).
    public init(in parent: String = "/tmp", prefix: String = "strata-bench-") throws {
        var template = Array("\(parent)/\(prefix)XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer -> Bool in
            guard let base = buffer.baseAddress else { return false }
            return mkdtemp(base) != nil
        }
        guard made else { throw BenchmarkError("mkdtemp in \(parent) failed: \(String(cString: strerror(errno)))") }
        path = template.withUnsafeBufferPointer { buffer in
            buffer.baseAddress.map { String(cString: $0) } ?? ""
        }
    }

    /// The path of `name` inside the directory.
    public func appending(_ name: String) -> String { path + "/" + name }

    /// Deletes the directory and its contents; errors are ignored (it is scratch space).
    public func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// A failure of the benchmark harness itself (not of the engine).
public struct BenchmarkError: Error, CustomStringConvertible {
    /// What went wrong.
    public let description: String

    /// An error that says `description`.
    public init(_ description: String) { self.description = description }
}

import Foundation

/// An executable product of this package, built next to the test bundle (or at the path in the
/// environment variable `override`), for the tests that run the package's tools as processes.
///
/// - Throws: a description of where it looked and how to build it.
func siblingExecutable(_ name: String, override: String) throws -> String {
    if let path = ProcessInfo.processInfo.environment[override] { return path }
    var directories: [String] = []
    if let bundle = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
        directories.append((bundle as NSString).deletingLastPathComponent)
    }
    directories.append((CommandLine.arguments[0] as NSString).deletingLastPathComponent)
    let candidates = directories.map { ($0 as NSString).appendingPathComponent(name) }
    guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
        throw SiblingExecutableMissing(description: """
            \(name) is not built next to the test bundle (looked for \(candidates)). It is the \
            package's executable product \(name): build it with `swift build --build-tests` (or \
            `swift build --product \(name)`) with the same scratch path and configuration, or set \
            \(override) to its path.
            """)
    }
    return found
}

/// ``siblingExecutable(_:override:)`` found nothing.
struct SiblingExecutableMissing: Error, CustomStringConvertible {
    var description: String
}

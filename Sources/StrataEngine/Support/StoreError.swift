/// The one error type of StrataEngine.
///
/// Every failure the engine reports is a `StoreError`: a ``Code`` that says what kind of
/// failure it is, a message that says what happened and what to do, and, where it applies,
/// the file and byte offset it concerns and the `errno` of the system call that failed.
///
/// For example:
///
/// ```swift
/// do {
///     let engine = try Engine.open(at: "/var/lib/app/store")
/// } catch let error where error.code == .locked {
///     print("another process has the store open: \(error.message)")
/// }
/// ```
public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure a ``StoreError`` is. Extensible: new codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's stable name.
        public let name: String
        /// Creates a code with a stable name.
        public init(_ name: String) { self.name = name }
        public var description: String { name }

        /// Bytes on disk failed a checksum or do not decode: the file and offset say where.
        public static let corruption = Code("corruption")
        /// A system call failed; ``StoreError/errno`` holds its error number.
        public static let io = Code("io")
        /// The caller passed a value the engine cannot accept.
        public static let invalidArgument = Code("invalidArgument")
        /// A file or record that must exist does not.
        public static let notFound = Code("notFound")
        /// The store was written by a newer format version than this build reads.
        public static let unsupportedVersion = Code("unsupportedVersion")
        /// Another process (or another engine in this process) holds the store's lock.
        public static let locked = Code("locked")
        /// The engine was closed.
        public static let closed = Code("closed")
        /// The engine turned read-only after a failed sync, or was opened read-only.
        public static let readOnly = Code("readOnly")
        /// The path holds something that is not a Strata store.
        public static let notAStore = Code("notAStore")
    }

    /// What kind of failure this is.
    public var code: Code
    /// What happened and what to do about it.
    public var message: String
    /// The file concerned, if any.
    public var path: String?
    /// The byte offset in ``path`` where the problem was found, if any.
    public var offset: UInt64?
    /// The `errno` of the failed system call, for ``Code/io`` errors.
    public var errno: Int32?
    /// For ``Code/corruption`` found by the durable bound (SPEC.md [DUR-3]): the sequence
    /// numbers of acknowledged (synced) transactions that the store no longer holds.
    public var lostSequences: ClosedRange<UInt64>?
    /// Where in the engine's source the error was raised (`file:line`).
    public var raisedAt: String

    /// Creates an error. Prefer the static helpers, which fill in the source location.
    public init(
        _ code: Code, _ message: String, path: String? = nil, offset: UInt64? = nil,
        errno: Int32? = nil, lostSequences: ClosedRange<UInt64>? = nil, fileID: StaticString = #fileID, line: UInt = #line
    ) {
        self.code = code
        self.message = message
        self.path = path
        self.offset = offset
        self.errno = errno
        self.lostSequences = lostSequences
        self.raisedAt = "\(fileID):\(line)"
    }

    /// Corruption found at `offset` of `path`. The only way the engine makes corruption errors.
    public static func corruption(
        _ message: String, path: String, offset: UInt64,
        fileID: StaticString = #fileID, line: UInt = #line
    ) -> StoreError {
        StoreError(.corruption, message, path: path, offset: offset, fileID: fileID, line: line)
    }

    public var description: String {
        var text = "\(code): \(message)"
        if let path { text += " [file \(path)" + (offset.map { " at offset \($0)" } ?? "") + "]" }
        if let errno { text += " [errno \(errno)]" }
        if let lostSequences { text += " [lost sequences \(lostSequences.lowerBound)…\(lostSequences.upperBound)]" }
        return text
    }

    /// Two errors are equal when code, message, path, offset, errno and lost sequences agree.
    public static func == (lhs: StoreError, rhs: StoreError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.path == rhs.path
            && lhs.offset == rhs.offset && lhs.errno == rhs.errno && lhs.lostSequences == rhs.lostSequences
    }
}

/// Runs `body`, which may only throw ``StoreError`` but is typed `throws` because it is called
/// through a `rethrows` standard-library function (`withUnsafeBytes` and friends), and
/// rethrows its error with its type restored.
@inline(__always)
func typed<T>(_ body: () throws -> T) throws(StoreError) -> T {
    do {
        return try body()
    } catch let error as StoreError {
        throw error
    } catch {
        // Impossible: every throwing call inside `body` throws StoreError.
        throw StoreError(.io, "unexpected error \(error)")
    }
}

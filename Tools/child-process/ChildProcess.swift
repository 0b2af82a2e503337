#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Foundation

/// A child process started with `posix_spawn`, its standard output read line by line through
/// a pipe and its standard error written to a file. Foundation's `Process` is not used: its
/// `waitUntilExit` polls, and the kill must be a plain `SIGKILL` at a moment we choose.
///
/// Not thread-safe: one thread starts, reads, kills and waits.
public final class ChildProcess {
    /// The child's process id.
    public let pid: pid_t
    /// The read end of the child's standard output.
    private var output: Int32
    /// Bytes read but not yet returned as a line.
    private var pending: [UInt8] = []
    /// The raw `waitpid` status, once the child has been waited for.
    private(set) var waitStatus: Int32?

    /// Starts `executable` with `arguments`; its standard error goes to the file at
    /// `standardErrorPath` (truncated).
    public init(executable: String, arguments: [String], standardErrorPath: String) throws {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw ChildProcessError("pipe failed: errno \(errno)") }
        // Neither end may leak into other children; dup2 clears the flag on the child's stdout.
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, ends[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, standardErrorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var child: pid_t = 0
        let result = posix_spawn(&child, executable, &actions, nil, argv, envp)
        close(ends[1])
        guard result == 0 else {
            close(ends[0])
            throw ChildProcessError("cannot start \(executable): posix_spawn error \(result)")
        }
        pid = child
        output = ends[0]
    }

    deinit {
        if waitStatus == nil {
            kill(pid, SIGKILL)
            _ = waitForExit()
        }
        if output >= 0 { close(output) }
    }

    /// The next line of standard output without its newline, or nil at its end.
    ///
    /// - Throws: if no complete line arrives within `timeout`.
    public func readLine(timeout: Duration) throws -> String? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let line = takeLine() { return line }
            guard output >= 0 else {
                defer { pending.removeAll() }
                return pending.isEmpty ? nil : String(decoding: pending, as: UTF8.self)
            }
            guard try fill(until: deadline) else { throw ChildProcessError("process \(pid) wrote no line within \(timeout)") }
        }
    }

    /// The complete lines standard output brings for `duration` (less if it ends sooner).
    public func readLines(for duration: Duration) throws -> [String] {
        let deadline = ContinuousClock.now + duration
        while output >= 0, try fill(until: deadline) {}
        var lines: [String] = []
        while let line = takeLine() { lines.append(line) }
        return lines
    }

    /// Removes and returns the first complete line of `pending`.
    private func takeLine() -> String? {
        guard let newline = pending.firstIndex(of: UInt8(ascii: "\n")) else { return nil }
        defer { pending.removeSubrange(...newline) }
        return String(decoding: pending[..<newline], as: UTF8.self)
    }

    /// Reads what standard output has into `pending`, waiting until `deadline` at most; false if
    /// the deadline came first. At the end of output, closes it and returns true.
    private func fill(until deadline: ContinuousClock.Instant) throws -> Bool {
        while true {
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero else { return false }
            let (seconds, attoseconds) = remaining.components
            let milliseconds = Int32(clamping: seconds * 1_000 + attoseconds / 1_000_000_000_000_000 + 1)
            var descriptor = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, milliseconds)
            if ready < 0 && errno != EINTR { throw ChildProcessError("poll failed: errno \(errno)") }
            guard ready > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = chunk.withUnsafeMutableBytes { read(output, $0.baseAddress, $0.count) }
            if count > 0 {
                pending.append(contentsOf: chunk[..<count])
                return true
            } else if count == 0 || errno != EINTR {
                close(output)
                output = -1
                return true
            }
        }
    }

    /// Every remaining line of standard output, up to its end.
    public func readRemainingLines(timeout: Duration) throws -> [String] {
        var lines: [String] = []
        while let line = try readLine(timeout: timeout) { lines.append(line) }
        return lines
    }

    /// Sends `SIGKILL`.
    public func killNow() { kill(pid, SIGKILL) }

    /// Waits for the child to end and returns how it ended.
    @discardableResult
    public func waitForExit() -> ChildExit {
        if let waitStatus { return ChildExit(waitStatus) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        waitStatus = status
        return ChildExit(status)
    }
}

/// How a child process ended.
public enum ChildExit: Equatable, CustomStringConvertible {
    /// It called `exit` with this status.
    case exited(Int32)
    /// A signal ended it.
    case signaled(Int32)

    /// Decodes a `waitpid` status.
    public init(_ status: Int32) {
        let signal = status & 0x7F
        self = signal == 0 ? .exited((status >> 8) & 0xFF) : .signaled(signal)
    }

    /// For example "exit status 3" or "signal 9".
    public var description: String {
        switch self {
        case .exited(let code): "exit status \(code)"
        case .signaled(let signal): "signal \(signal)"
        }
    }
}

/// Why a child process could not be started or read.
public struct ChildProcessError: Error, CustomStringConvertible {
    /// What went wrong.
    public var description: String
    /// Creates an error.
    public init(_ description: String) { self.description = description }
}

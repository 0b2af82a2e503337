#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Dispatch
import Foundation
import StrataEngine
import StrataSync
import Testing

/// The store's lock is released when the engine closes, even while another thread of the
/// process is starting a child process. (A child between `posix_spawn`'s clone and its
/// `exec` holds copies of every descriptor; a lock released only by `close` stayed held
/// through that copy, so an immediate reopen failed with `locked`: the tool tests, which
/// start `strata` processes from parallel tests, saw it now and then.)
@Suite struct StoreLockWhileSpawningTests {
    /// Opens and closes the store; false if the open found the store locked.
    static func reopens(_ path: String) throws -> Bool {
        do {
            try Engine.open(at: path).close()
            return true
        } catch where error.code == .locked {
            return false
        }
    }

    @Test func aClosedStoreReopensAtOnceWhileAnotherThreadStartsProcesses() throws {
        let scratch = try ToolScratch()
        let path = scratch.path + "/store"
        try Engine.open(at: path).close()
        let stop = Locked(false)
        let spawner = DispatchGroup()
        DispatchQueue.global().async(group: spawner) {
            while !stop.withLock({ $0 }) {
                var pid: pid_t = 0
                let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
                defer { free(argv[0]) }
                guard posix_spawn(&pid, "/bin/true", nil, nil, argv, nil) == 0 else { continue }
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            }
        }
        defer {
            stop.withLock { $0 = true }
            spawner.wait()
        }
        var refused = 0
        for _ in 0..<500 where try !Self.reopens(path) { refused += 1 }
        #expect(refused == 0, "\(refused) of 500 reopens found the store still locked")
    }
}

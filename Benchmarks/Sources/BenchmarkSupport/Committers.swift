import Foundation
import StrataEngine
import Synchronization

/// Committer threads that each commit single small puts, to measure group commit.
public enum Committers {
    /// Runs `threads` OS threads (not tasks: the cooperative pool has one thread per core), each
    /// committing one put per transaction until it has made `commitsPerThread` commits or
    /// `deadline` has passed, whichever comes first. Returns the number of commits made.
    ///
    /// Thread `t` writes keys `t * 10^9 + n`, so threads never touch the same key.
    ///
    /// - Throws: The first ``StoreError`` a committer met.
    public static func run(
        _ engine: Engine, threads: Int, commitsPerThread: Int = .max, until deadline: ContinuousClock.Instant? = nil,
        value: [UInt8]
    ) throws -> Int {
        try run(threads: threads, commitsPerThread: commitsPerThread, until: deadline, value: value) { key, value in
            _ = try engine.put(key, value)
        }
    }

    /// The same for any store: `put` commits one key and value (durably, as the caller set it
    /// up) and may be called from several threads at once.
    ///
    /// - Throws: The first error a committer met.
    public static func run(
        threads: Int, commitsPerThread: Int = .max, until deadline: ContinuousClock.Instant? = nil, value: [UInt8],
        put: @escaping @Sendable ([UInt8], [UInt8]) throws -> Void
    ) throws -> Int {
        let results = Mutex<(commits: Int, error: (any Error)?)>((0, nil))
        let done = DispatchGroup()
        for thread in 0..<threads {
            done.enter()
            let worker = Thread {
                var commits = 0
                var failure: (any Error)? = nil
                while commits < commitsPerThread {
                    if let deadline, ContinuousClock.now >= deadline { break }
                    do {
                        try put(Workload.key(thread * 1_000_000_000 + commits), value)
                    } catch {
                        failure = error
                        break
                    }
                    commits += 1
                }
                results.withLock { [commits, failure] in
                    $0.commits += commits
                    if $0.error == nil { $0.error = failure }
                }
                done.leave()
            }
            worker.start()
        }
        done.wait()
        let (commits, error) = results.withLock { ($0.commits, $0.error) }
        if let error { throw error }
        return commits
    }
}

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
        let results = Mutex<(commits: Int, error: StoreError?)>((0, nil))
        let done = DispatchGroup()
        for thread in 0..<threads {
            done.enter()
            let worker = Thread {
                var commits = 0
                var failure: StoreError? = nil
                while commits < commitsPerThread {
                    if let deadline, ContinuousClock.now >= deadline { break }
                    do throws(StoreError) {
                        try engine.put(Workload.key(thread * 1_000_000_000 + commits), value)
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
        let (commits, error) = results.withLock { $0 }
        if let error { throw error }
        return commits
    }
}

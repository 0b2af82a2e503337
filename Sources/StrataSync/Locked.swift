#if STRATA_TSAN
import Glibc

/// A value behind a lock: `Synchronization.Mutex` in every normal build.
///
/// Builds made for ThreadSanitizer pass `-Xswiftc -DSTRATA_TSAN` and get this pthread-backed
/// lock instead. Reason: under contention, `Mutex` on Linux hands ownership over inside the
/// kernel (a priority-inheritance futex), which ThreadSanitizer cannot observe, so it reports
/// races on data that is in fact protected (reproduced with a two-line probe). pthread
/// mutexes are intercepted by ThreadSanitizer, so its reports stay meaningful.
package final class Locked<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched between pthread_mutex_lock and unlock below.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    package init(_ value: sending Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    package func withLock<Result, E: Error>(_ body: (inout sending Value) throws(E) -> sending Result) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
#else
import Synchronization

/// A value behind a lock: `Synchronization.Mutex` (see the `STRATA_TSAN` variant for why
/// ThreadSanitizer builds use a pthread mutex instead). `package`: Strata's modules share it.
package typealias Locked<Value> = Mutex<Value>
#endif

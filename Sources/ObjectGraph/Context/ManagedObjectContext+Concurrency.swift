import Dispatch
import Foundation
import StrataSync
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

extension ManagedObjectContext {
    /// How a context is confined to threads (Core Data's `NSManagedObjectContextConcurrencyType`).
    ///
    /// A queue context (``privateQueue``, ``mainQueue``) is used only from blocks it runs:
    /// ``ManagedObjectContext/perform(_:)``, ``ManagedObjectContext/performAndWait(_:)`` and
    /// `await context.perform { … }`; a main-queue context also directly on the main thread.
    /// A ``confinement`` context has no queue: whoever uses it makes sure one thread at a time
    /// does (the context's ``ManagedObjectContext/lock()`` is there for it).
    public enum ConcurrencyType: Sendable, Hashable, CustomStringConvertible {
        /// No queue: the caller confines the context to one thread at a time (what
        /// ``ManagedObjectContext/init(persistentStoreCoordinator:)`` makes).
        case confinement
        /// The context owns a private serial queue and runs its blocks there.
        case privateQueue
        /// The context runs its blocks on the main queue.
        case mainQueue

        /// Core Data's name for ``confinement``.
        public static let confinementConcurrencyType = ConcurrencyType.confinement
        /// Core Data's name for ``privateQueue``.
        public static let privateQueueConcurrencyType = ConcurrencyType.privateQueue
        /// Core Data's name for ``mainQueue``.
        public static let mainQueueConcurrencyType = ConcurrencyType.mainQueue

        /// `confinement`, `privateQueue` or `mainQueue`.
        public var description: String {
            switch self {
            case .confinement: "confinement"
            case .privateQueue: "privateQueue"
            case .mainQueue: "mainQueue"
            }
        }
    }

    /// When `await context.perform(schedule:_:)` runs its block (Core Data's `ScheduledTaskType`).
    public enum ScheduledTaskType: Sendable, Hashable {
        /// At once on the calling thread when it already runs a block of the context (or, for
        /// a main-queue context, runs on the main queue); else enqueued.
        case immediate
        /// Always after the blocks already on the context's queue.
        case enqueued
    }

    // MARK: Performing blocks

    /// Runs `block` asynchronously on the context's queue (a confinement context: on a
    /// serial queue of its own, holding its ``lock()``). Blocks run one at a time, in the
    /// order they were given.
    public func perform(_ block: sending @escaping () -> Void) {
        let run = Runner(block)
        executionQueue.async { [self] in
            withHold { run.body() }
        }
    }

    /// Runs `body` on the context's queue and waits for it, returning its value or
    /// rethrowing its error.
    ///
    /// Re-entrant: called from a block of this context (or from a block that one of its
    /// blocks waits for, such as a parent's block called from a child's), it runs `body` at
    /// once. A main-queue context called on the main queue (or on the main thread of a
    /// program that is not draining the main queue) also runs `body` at once.
    public func performAndWait<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        if isHeldHere || (concurrencyType == .mainQueue && MainQueue.isCurrent) {
            return try withHold(body)
        }
        if concurrencyType == .confinement { return try withHold(body) }
        // The contexts this thread holds are lent to the block: it runs for them, and may
        // use them (they wait for it), even on another thread (the main queue's).
        let lent = HeldContexts.current.contexts
        let result = executionQueue.sync { () -> Result<T, E> in
            let held = HeldContexts.current
            let saved = held.contexts
            held.contexts = lent
            defer { held.contexts = saved }
            return withHold { Result { () throws(E) -> T in try body() } }
        }
        return try result.get()
    }

    /// Runs `body` on the context's queue and returns its value (or rethrows its error)
    /// without blocking the caller (Core Data's `perform(schedule:_:)`).
    public func perform<T, E: Error>(
        schedule: ScheduledTaskType = .immediate, _ body: sending @escaping () throws(E) -> T
    ) async throws(E) -> sending T {
        if schedule == .immediate, isHeldHere || (concurrencyType == .mainQueue && MainQueue.isCurrent) {
            return try withHold(body)
        }
        let run = ThrowingRunner(body)
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, E>, Never>) in
            executionQueue.async { [self] in
                let outcome = withHold { Result { () throws(E) -> T in try run.body() } }
                continuation.resume(returning: outcome)
            }
        }
        return try result.get()
    }

    // MARK: Holding

    /// Whether the current thread runs a block of this context now.
    var isHeldHere: Bool { HeldContexts.current.contexts.contains(ObjectIdentifier(self)) }

    /// Runs `body` as a block of this context on the current thread.
    func withHold<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        let held = HeldContexts.current
        held.contexts.append(ObjectIdentifier(self))
        defer { held.contexts.removeLast() }
        if concurrencyType == .confinement {
            lock()
            defer { unlock() }
            return try body()
        }
        return try body()
    }

    /// Reports a use of a queue context from outside its blocks, when checks are on.
    @inline(__always)
    func checkQueue(_ operation: StaticString) {
        guard concurrencyType != .confinement, Self.concurrencyChecks.load(ordering: .relaxed) else { return }
        if isHeldHere || (concurrencyType == .mainQueue && MainQueue.isCurrent) { return }
        let violation = ConcurrencyViolation(
            contextName: name, concurrencyType: concurrencyType, operation: String(describing: operation),
            thread: Thread.isMainThread ? "main" : String(describing: pthread_self()))
        Self.violationHandler.withLock { $0 }(violation)
    }

    // MARK: Checking

    /// Whether uses of queue contexts outside their blocks are reported (Core Data's
    /// `com.apple.CoreData.ConcurrencyDebug`). On by default in debug builds, and in any
    /// build whose environment sets `STRATA_CONCURRENCY_DEBUG=1`.
    ///
    /// The context's operations are checked (fetches, counts, saves, inserts, deletes,
    /// refreshes, merges); in debug builds every value read and write of a managed object is too.
    public static var checksConcurrency: Bool {
        get { concurrencyChecks.load(ordering: .relaxed) }
        set { concurrencyChecks.store(newValue, ordering: .relaxed) }
    }

    /// Called with each use of a queue context outside its blocks while
    /// ``checksConcurrency`` is on; by default writes the violation to standard error.
    /// Replace it to collect violations (in tests) or to stop the process.
    public static var concurrencyViolationHandler: @Sendable (ConcurrencyViolation) -> Void {
        get { violationHandler.withLock { $0 } }
        set { violationHandler.withLock { $0 = newValue } }
    }

    static let concurrencyChecks: Atomic<Bool> = {
        #if DEBUG
        Atomic(true)
        #else
        Atomic(ProcessInfo.processInfo.environment["STRATA_CONCURRENCY_DEBUG"] == "1")
        #endif
    }()

    static let violationHandler = Locked<@Sendable (ConcurrencyViolation) -> Void> { violation in
        FileHandle.standardError.write(Data("ObjectGraph concurrency violation: \(violation)\n".utf8))
    }
}

/// A use of a queue context outside its blocks, found while
/// ``ManagedObjectContext/checksConcurrency`` is on.
public struct ConcurrencyViolation: Sendable, CustomStringConvertible {
    /// The context's ``ManagedObjectContext/name``.
    public let contextName: String?
    /// The context's concurrency type.
    public let concurrencyType: ManagedObjectContext.ConcurrencyType
    /// The operation, such as `fetch(_:)` or `value(forKey:)`.
    public let operation: String
    /// The thread it was called on.
    public let thread: String

    /// What was used where.
    public var description: String {
        "\(operation) on \(concurrencyType) context \(contextName.map { "\"\($0)\"" } ?? "(unnamed)") from thread \(thread), outside perform/performAndWait"
    }
}

/// A block handed to a queue: `sending` made it the queue's alone.
private final class Runner: @unchecked Sendable {
    // @unchecked: the block was passed as `sending` and is called once, on the queue.
    let body: () -> Void
    init(_ body: sending @escaping () -> Void) { self.body = body }
}

/// A throwing block with a result, handed to a queue (see ``Runner``).
private final class ThrowingRunner<T, E: Error>: @unchecked Sendable {
    // @unchecked: as Runner's.
    let body: () throws(E) -> T
    init(_ body: sending @escaping () throws(E) -> T) { self.body = body }
}

/// Whether code runs on the main queue, or on the main thread outside it (which then does
/// not drain the main queue). On Linux a program with an asynchronous `main` drains the main
/// queue on another thread, so the main thread alone does not say it.
enum MainQueue {
    private static let key: DispatchSpecificKey<Bool> = {
        let key = DispatchSpecificKey<Bool>()
        DispatchQueue.main.setSpecific(key: key, value: true)
        return key
    }()

    static var isCurrent: Bool { DispatchQueue.getSpecific(key: key) == true || Thread.isMainThread }
}

/// The contexts the current thread may use now: those it runs a block of, and those whose
/// blocks wait for the block it runs (a child's `performAndWait` calling its parent's).
/// Kept per thread.
enum HeldContexts {
    /// One thread's list; only that thread touches it.
    final class List {
        var contexts: [ObjectIdentifier] = []
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key) { pointer in
            if let pointer { Unmanaged<List>.fromOpaque(pointer).release() }
        }
        if status != 0 { fatalError("pthread_key_create failed (\(status)): the process is out of thread-local keys") }
        return key
    }()

    /// The current thread's list, made on first use.
    static var current: List {
        if let pointer = pthread_getspecific(key) { return Unmanaged<List>.fromOpaque(pointer).takeUnretainedValue() }
        let list = List()
        pthread_setspecific(key, Unmanaged.passRetained(list).toOpaque())
        return list
    }
}

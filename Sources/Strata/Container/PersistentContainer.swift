import Foundation
import StrataSync

/// A model, a coordinator, its stores and the contexts to use them (Core Data's
/// `NSPersistentContainer`): the usual start of an application.
///
/// For example:
///
/// ```swift
/// let container = PersistentContainer(name: "Library", managedObjectModel: model)
/// try await container.loadPersistentStores()
/// try await container.performBackgroundTask { context in
///     let book = try context.insertNewObject(forEntityName: "Book")
///     try book.setValue("Dune", forKey: "title")
///     try context.save()
/// }
/// container.viewContext.automaticallyMergesChangesFromParent = true
/// ```
///
/// By default the container adds one ``StrataStore`` at
/// `defaultDirectoryURL()/<name>.strata`; replace ``persistentStoreDescriptions`` before
/// loading to put it elsewhere, use another store type or pass options.
///
/// Thread safety: `Sendable`; its descriptions are behind a lock, and its contexts are
/// queue contexts (``viewContext`` on the main queue, the others on private queues).
open class PersistentContainer: @unchecked Sendable {
    // @unchecked: `open` classes cannot be checked; every stored property is a constant of a
    // Sendable type, or behind `descriptions`' lock.

    /// The container's name: the default store's file name.
    public let name: String
    /// The model of every store and context of the container.
    public let managedObjectModel: ManagedObjectModel
    /// The coordinator of the container's stores.
    public let persistentStoreCoordinator: PersistentStoreCoordinator
    /// The main-queue context on the coordinator, for the application's user-facing work.
    public let viewContext: ManagedObjectContext

    private let descriptions: Locked<[PersistentStoreDescription]>

    /// Creates a container for a model; nothing is opened until
    /// ``loadPersistentStores(completionHandler:)``. Registers ``StrataStore`` and ``BinaryStore``.
    public init(name: String, managedObjectModel: ManagedObjectModel) {
        StrataStore.register()
        BinaryStore.register()
        self.name = name
        self.managedObjectModel = managedObjectModel
        persistentStoreCoordinator = PersistentStoreCoordinator(managedObjectModel: managedObjectModel)
        viewContext = ManagedObjectContext(concurrencyType: .mainQueue)
        viewContext.name = "viewContext"
        viewContext.persistentStoreCoordinator = persistentStoreCoordinator
        descriptions = Locked([PersistentStoreDescription(url: Self.defaultDirectoryURL().appending(path: "\(name).strata"))])
    }

    /// The directory of the default store: `$STRATA_DATA_DIR` if set; else
    /// `$XDG_DATA_HOME/<process name>`, or `~/.local/share/<process name>` without it (the XDG
    /// base directories, Linux's counterpart of the Application Support directory Core Data
    /// uses). Override it in a subclass to put every container's store elsewhere.
    open class func defaultDirectoryURL() -> URL {
        let environment = ProcessInfo.processInfo.environment
        if let directory = environment["STRATA_DATA_DIR"], !directory.isEmpty {
            return URL(filePath: directory, directoryHint: .isDirectory)
        }
        let base: URL
        if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") {
            base = URL(filePath: data, directoryHint: .isDirectory)
        } else {
            base = FileManager.default.homeDirectoryForCurrentUser.appending(path: ".local/share", directoryHint: .isDirectory)
        }
        return base.appending(path: ProcessInfo.processInfo.processName, directoryHint: .isDirectory)
    }

    /// How the stores are added: one ``StrataStore`` at
    /// `defaultDirectoryURL()/<name>.strata` until replaced.
    public var persistentStoreDescriptions: [PersistentStoreDescription] {
        get { descriptions.withLock { $0 } }
        set { descriptions.withLock { $0 = newValue } }
    }

    // MARK: Loading

    /// Adds a store for each description, calling `completionHandler` once per description
    /// with the error that stopped it, if any. A description with
    /// `PersistentStoreDescription/shouldAddStoreAsynchronously` is added on a background
    /// queue and its handler is called there; the others are added, and their handlers called,
    /// before this returns.
    ///
    /// A store's directory is created if missing. A description already added (same URL) is
    /// reported with `ObjectGraphError/Code/storeMismatch`.
    ///
    /// The handler is not `Sendable`, as in Core Data, so the usual
    /// `container.loadPersistentStores { _, error in loadError = error }` compiles; a handler
    /// of an asynchronous description runs on a background queue, so it must only touch
    /// what is safe there.
    public func loadPersistentStores(completionHandler: @escaping (PersistentStoreDescription, (any Error)?) -> Void) {
        let all = persistentStoreDescriptions
        let handler = Handler(unchecked: completionHandler)
        var later: [PersistentStoreDescription] = []
        for description in all {
            if description.shouldAddStoreAsynchronously {
                later.append(description)
            } else {
                handler.call(description, loadError(description))
            }
        }
        guard !later.isEmpty else { return }
        let deferred = later
        DispatchQueue.global().async { [self] in
            for description in deferred { handler.call(description, loadError(description)) }
        }
    }

    /// Adds a store for each description, in order, off the caller's thread.
    ///
    /// - Throws: the first store's error (the stores before it stay added).
    public func loadPersistentStores() async throws {
        for description in persistentStoreDescriptions {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                DispatchQueue.global().async { [self] in
                    if let error = loadError(description) {
                        continuation.resume(throwing: error)
                    } else {
                        continuation.resume()
                    }
                }
            }
        }
    }

    /// Adds the store a description describes; the error, if it failed.
    private func loadError(_ description: PersistentStoreDescription) -> (any Error)? {
        do {
            if let url = description.url, url.isFileURL {
                try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
                try description.migrationPlan?.migrateStore(at: url, type: description.type, options: description.options)
            }
            try persistentStoreCoordinator.addPersistentStore(
                type: description.type, configuration: description.configuration, at: description.url, options: description.options)
            return nil
        } catch {
            return error
        }
    }

    // MARK: Contexts

    /// A new private-queue context on the coordinator, for work off the main queue.
    public func newBackgroundContext() -> ManagedObjectContext {
        let context = ManagedObjectContext(concurrencyType: .privateQueue)
        context.persistentStoreCoordinator = persistentStoreCoordinator
        return context
    }

    /// Runs `block` on a new private-queue context, asynchronously.
    public func performBackgroundTask(_ block: sending @escaping (ManagedObjectContext) -> Void) {
        let context = newBackgroundContext()
        let task = Handler(block)
        context.perform { task.body(context) }
    }

    /// Runs `block` on a new private-queue context and returns its value (or rethrows its
    /// error) without blocking the caller.
    public func performBackgroundTask<T, E: Error>(
        _ block: sending @escaping (ManagedObjectContext) throws(E) -> T
    ) async throws(E) -> sending T {
        let context = newBackgroundContext()
        let task = ThrowingTask(block)
        return try await context.perform { () throws(E) -> T in try task.body(context) }
    }
}

/// A closure handed to a queue, called from one queue at a time (the caller's, then one
/// background queue, in turn).
private final class Handler<Arguments>: @unchecked Sendable {
    // @unchecked: a background task's closure was passed as `sending`, so it is the
    // container's alone. A load's completion handler is not (Core Data's signature): that it
    // touches only what is safe on a background queue is its caller's part of the contract,
    // documented on loadPersistentStores(completionHandler:).
    let body: (Arguments) -> Void
    init(_ body: sending @escaping (Arguments) -> Void) { self.body = body }
    init(unchecked body: @escaping (Arguments) -> Void) { self.body = body }
}

extension Handler where Arguments == (PersistentStoreDescription, (any Error)?) {
    func call(_ description: PersistentStoreDescription, _ error: (any Error)?) { body((description, error)) }
}

/// A background task handed to a context's queue (see ``Handler``).
private final class ThrowingTask<T, E: Error>: @unchecked Sendable {
    // @unchecked: as Handler's; called once, on the context's queue.
    let body: (ManagedObjectContext) throws(E) -> T
    init(_ body: sending @escaping (ManagedObjectContext) throws(E) -> T) { self.body = body }
}

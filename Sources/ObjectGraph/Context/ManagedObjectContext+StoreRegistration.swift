import Foundation

// MARK: - Store registrations

// How a context tells its stores which rows it uses (``IncrementalStore/managedObjectContextDidRegisterObjects(with:)``
// and its counterpart): one call per batch of a fetch's results, deferred batches of the rows
// of deallocated objects, and single IDs in a buffer kept between calls. Every function here
// runs on the context's queue; these and `register(_:probe:)` are what touch
// ``ManagedObjectContext/pendingStoreRegistrations``, ``ManagedObjectContext/pendingStoreUnregistrations``
// and their spare buffers.
extension ManagedObjectContext {
    /// `body` with a one-ID array in a buffer kept for the next call: one object's
    /// registration (a fault made outside a fetch) allocates no array. Taken out while in
    /// use, so a store that registers again from `body` gets a buffer of its own.
    func withSingleID(_ id: ManagedObjectID, _ body: ([ManagedObjectID]) -> Void) {
        var ids = singleIDBuffer
        singleIDBuffer = []
        ids.append(id)
        body(ids)
        ids.removeAll(keepingCapacity: true)
        singleIDBuffer = ids
    }

    /// Registers the rows of registered objects with their stores, once per ID.
    func storeRegister(_ ids: [ManagedObjectID]) {
        guard !isChild else { return }
        var fresh: [ManagedObjectID] = []
        fresh.reserveCapacity(ids.count)
        for id in ids {
            guard let index = registry.slot(of: id), registry.registration(at: index)?.inStore == false else { continue }
            registry.setInStore(at: index)
            fresh.append(id)
        }
        guard !fresh.isEmpty else { return }
        if registrationBatchDepth > 0 {
            pendingStoreRegistrations += fresh
        } else {
            registrar?.contextDidRegister(fresh)
        }
    }

    /// Unregisters one row whose registry entry is gone; a registration still waiting in a
    /// batch is withdrawn instead.
    func storeUnregister(_ id: ManagedObjectID, deferred: Bool = false) {
        if registrationBatchDepth > 0, let index = pendingStoreRegistrations.lastIndex(of: id) {
            pendingStoreRegistrations.remove(at: index)
        } else if deferred {
            pendingStoreUnregistrations.append(id)
            if pendingStoreUnregistrations.count >= Self.unregistrationBatch { flushStoreUnregistrations() }
        } else {
            withSingleID(id) { registrar?.contextDidUnregister($0) }
        }
    }

    /// Makes room for `count` more registered objects (a fetch's results), so the registry
    /// grows once instead of rehashing as they arrive. For a store that makes many objects
    /// itself (``object(with:)`` for each result past a fetch's first batch, say).
    package func reserveRegistrations(_ count: Int) {
        registry.reserveCapacity(registry.count + count)
        pendingStoreRegistrations.reserveCapacity(pendingStoreRegistrations.count + count)
    }

    /// Runs `body` with store registrations collected into one call per store.
    func withRegistrationBatch<T>(_ body: () throws -> T) rethrows -> T {
        if registrationBatchDepth == 0 { flushStoreUnregistrations() }
        registrationBatchDepth += 1
        defer {
            registrationBatchDepth -= 1
            if registrationBatchDepth == 0 { flushStoreRegistrations() }
        }
        return try body()
    }

    /// Sends the registrations collected by an enclosing batch now, in one call per store,
    /// then the unregistrations waiting (registrations first: a row waiting for both never
    /// reaches a count below zero). `keepingCapacity` as for ``flushStoreUnregistrations(keepingCapacity:)``.
    func flushStoreRegistrations(keepingCapacity: Bool = true) {
        if !pendingStoreRegistrations.isEmpty {
            let ids = pendingStoreRegistrations
            pendingStoreRegistrations = []
            registrar?.contextDidRegister(ids)
        }
        flushStoreUnregistrations(keepingCapacity: keepingCapacity)
    }

    /// Sends the unregistrations waiting, in one call per store. The batch goes out in its own
    /// buffer while the spare one (emptied, its capacity kept from an earlier batch) takes the
    /// next, and the sent one becomes the spare: batches allocate nothing once the first has
    /// grown. A batch sent while another is out (a store's call releasing objects) takes the
    /// spare's place, so no ID is sent twice. `keepingCapacity` false (the context going) keeps
    /// no buffer.
    func flushStoreUnregistrations(keepingCapacity: Bool = true) {
        guard !pendingStoreUnregistrations.isEmpty else { return }
        var ids = spareStoreUnregistrations
        spareStoreUnregistrations = []
        swap(&ids, &pendingStoreUnregistrations)
        registrar?.contextDidUnregister(ids)
        guard keepingCapacity else { return }
        ids.removeAll(keepingCapacity: true)
        spareStoreUnregistrations = ids
    }

    /// Called from a managed object's `deinit`: the object is gone, so its entry goes and
    /// its row is unregistered. Touches only the registry, never the collections holding
    /// objects (they hold none that is being deallocated).
    func objectDidDeallocate(_ id: ManagedObjectID, slot: Int, _ object: UnsafeMutableRawPointer) {
        // The object's own slot: no ID is hashed, no probe made.
        guard let registration = registry.registration(at: slot), registration.pointer == object else { return }
        registry.remove(at: slot)
        if registration.inStore { storeUnregister(id, deferred: true) }
    }
}

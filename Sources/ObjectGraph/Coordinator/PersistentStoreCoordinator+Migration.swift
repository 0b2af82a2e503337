import Foundation

extension PersistentStoreCoordinator {
    /// Copies every object of `store` into a new store of `type` at `url`, then puts the new
    /// store in the old one's place: the old store is removed from the coordinator (its files
    /// are left as they are) and the new one added with `options` (Core Data's
    /// `migratePersistentStore(_:to:options:type:)`). Use it to move data between store types,
    /// a StrataStore and a binary store for instance.
    ///
    /// Every attribute and relationship is copied, ordered relationships in order, in batches
    /// saved as they go (as ``MigrationManager`` copies: memory holds one batch, not the
    /// store); objects get new IDs in the new store. The metadata keys of your own (not the store's UUID, type or
    /// model version hashes) are copied too. The new store must be empty; if anything fails,
    /// the coordinator keeps the old store, and what was written at `url` is left there.
    ///
    /// - Returns: The new store, added to this coordinator.
    /// - Throws: ``ObjectGraphError/Code/storeMismatch`` if `store` is not this coordinator's,
    ///   ``ObjectGraphError/Code/invalidArgument`` if `url` already holds objects, or what
    ///   adding the new store, reading the old one or saving the copy throws.
    @discardableResult
    public func migratePersistentStore(
        _ store: PersistentStore, to url: URL, options: [String: AttributeValue] = [:], type: PersistentStore.StoreType
    ) throws -> PersistentStore {
        guard persistentStores.contains(where: { $0 === store }) else {
            throw ObjectGraphError(.storeMismatch, "Store \(store.identifier) is not part of this coordinator.")
        }
        let target = PersistentStoreCoordinator(managedObjectModel: managedObjectModel)
        let copy = try target.addPersistentStore(type: type, configuration: store.configurationName, at: url, options: options)
        let source = ManagedObjectContext(persistentStoreCoordinator: self)
        let destination = ManagedObjectContext(persistentStoreCoordinator: target)
        let entities = managedObjectModel.entities(forConfigurationName: store.configurationName).filter { !$0.isAbstract }
        for entity in entities {
            var request = FetchRequest(entityName: entity.name)
            request.includesSubentities = false
            if try destination.count(for: request) > 0 {
                throw ObjectGraphError(.invalidArgument, "The store at \(url.absoluteString) already holds \(entity.name) objects; migrate into a new store.", entityName: entity.name)
            }
        }
        // Every object with its attributes, then the relationships (their destinations all
        // exist by then), in batches saved as they go: memory stays that of a batch.
        try MigrationManager(sourceModel: managedObjectModel, destinationModel: managedObjectModel)
            .copyObjects(from: source, of: [store], to: destination, mapping: MappingModel.inferred(from: managedObjectModel, to: managedObjectModel))
        try MigrationManager.copyApplicationMetadata(from: store, to: copy, in: target)
        try target.remove(copy)
        try remove(store)
        do {
            return try addPersistentStore(type: type, configuration: store.configurationName, at: url, options: options)
        } catch {
            // The old store goes back, so the coordinator is never left without it.
            _ = try? addPersistentStore(type: store.type, configuration: store.configurationName, at: store.url, options: store.options)
            throw error
        }
    }
}

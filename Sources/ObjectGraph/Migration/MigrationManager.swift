import Foundation

/// Copies a store written with one model into a new store of another, object by object, as a
/// ``MappingModel`` says (Core Data's `NSMigrationManager`).
///
/// The source store is opened read-only; the destination must be new (or empty). Objects are
/// copied in two passes, each in batches saved as it goes: first every object with its
/// attributes, then every relationship (its destinations all exist by then). A destination
/// object's property takes the source property its mapping names, its default value, or the
/// value of a fetch-language expression evaluated on the source object (`$source` is the
/// object itself: a key path names a source property). The coordinator metadata the
/// application set on the source store travels with it.
///
/// For example, migrating a store to a model that splits one attribute in two:
///
/// ```swift
/// var mapping = try MappingModel.inferred(from: old, to: new)   // or built by hand
/// let manager = MigrationManager(sourceModel: old, destinationModel: new)
/// manager.progressHandler = { print("\(Int($0 * 100)) %") }
/// try manager.migrateStore(
///     from: storeURL, type: .strata, mapping: mapping, to: newURL, type: .strata)
/// ```
///
/// Thread safety: not `Sendable`; use one manager on one thread.
public final class MigrationManager {
    /// The model the source store was written with.
    public let sourceModel: ManagedObjectModel
    /// The model of the destination store.
    public let destinationModel: ManagedObjectModel
    /// Objects copied before each save (and context reset), in both passes. Default 5,000.
    public var batchSize = 5_000
    /// Called with the fraction of the work done (0 to 1), after each batch (Core Data's
    /// `migrationProgress`).
    public var progressHandler: ((Double) -> Void)?
    /// A closure that fills a destination object's properties from its source object after the
    /// mapping has (a custom entity migration policy, Core Data's
    /// `NSEntityMigrationPolicy.createDestinationInstances`): `(source, destination)`.
    public var customizeObject: ((ManagedObject, ManagedObject) throws -> Void)?

    /// The fraction of the work done (0 to 1).
    public private(set) var migrationProgress = 0.0

    /// Creates a manager from `sourceModel` to `destinationModel`.
    public init(sourceModel: ManagedObjectModel, destinationModel: ManagedObjectModel) {
        self.sourceModel = sourceModel
        self.destinationModel = destinationModel
    }

    /// Copies the store of `sourceType` at `sourceURL` into a new store of `destinationType`
    /// at `destinationURL`, by `mapping`. The source store is not changed.
    ///
    /// - Throws: ``ObjectGraphError/Code/migrationFailed`` naming the entity and property
    ///   whose value does not fit the destination (a mapping that names a property the source
    ///   entity lacks, an expression whose value has another type), when copies break a
    ///   uniqueness constraint of the destination model (the conflict in its
    ///   ``ObjectGraphError/detailedErrors``), or when the destination already holds objects;
    ///   the stores' own errors. The destination is then left as far as
    ///   it got: destroy it (``PersistentStoreCoordinator/destroyPersistentStore(at:type:options:)``).
    public func migrateStore(
        from sourceURL: URL, type sourceType: PersistentStore.StoreType, options sourceOptions: [String: AttributeValue] = [:],
        mapping: MappingModel,
        to destinationURL: URL, type destinationType: PersistentStore.StoreType, options destinationOptions: [String: AttributeValue] = [:]
    ) throws {
        let sourceCoordinator = PersistentStoreCoordinator(managedObjectModel: sourceModel)
        var readOnly = sourceOptions
        readOnly[PersistentStore.readOnlyOption] = .bool(true)
        readOnly[PersistentStore.migratePersistentStoresAutomaticallyOption] = nil
        let sourceStore = try sourceCoordinator.addPersistentStore(type: sourceType, at: sourceURL, options: readOnly)
        defer { try? sourceCoordinator.remove(sourceStore) }
        let destinationCoordinator = PersistentStoreCoordinator(managedObjectModel: destinationModel)
        let destinationStore = try destinationCoordinator.addPersistentStore(type: destinationType, at: destinationURL, options: destinationOptions)
        defer { try? destinationCoordinator.remove(destinationStore) }
        let source = ManagedObjectContext(persistentStoreCoordinator: sourceCoordinator)
        let destination = ManagedObjectContext(persistentStoreCoordinator: destinationCoordinator)
        for entity in destinationModel.entities where !entity.isAbstract {
            var request = FetchRequest(entityName: entity.name)
            request.includesSubentities = false
            if try destination.count(for: request) > 0 {
                throw ObjectGraphError(
                    .migrationFailed, "The store at \(destinationURL.path) already holds \(entity.name) objects; migrate into a new store.",
                    entityName: entity.name)
            }
        }

        try copyObjects(from: source, of: nil, to: destination, mapping: mapping)
        // The application's metadata travels; the store's own keys do not.
        try Self.copyApplicationMetadata(from: sourceStore, to: destinationStore, in: destinationCoordinator)
        migrationProgress = 1
        progressHandler?(1)
    }

    /// Copies the objects `source` reads (those of `stores`, or of every store of its
    /// coordinator) into `destination` by `mapping`, in two passes of batches of
    /// ``batchSize`` objects, each batch saved and both contexts reset after it: first every
    /// object with its attributes, then the relationships. Reports progress up to just below 1.
    func copyObjects(
        from source: ManagedObjectContext, of stores: [PersistentStore]?, to destination: ManagedObjectContext, mapping: MappingModel
    ) throws {
        // The entity mappings that copy objects, with the source IDs of each.
        var work: [(mapping: EntityMapping, source: EntityDescription, destination: EntityDescription, ids: [ManagedObjectID])] = []
        for entityMapping in mapping.entityMappings {
            guard let sourceName = entityMapping.sourceEntityName, let destinationName = entityMapping.destinationEntityName else { continue }
            guard let sourceEntity = sourceModel.entitiesByName[sourceName], let destinationEntity = destinationModel.entitiesByName[destinationName] else {
                throw ObjectGraphError(
                    .migrationFailed, "The mapping \(entityMapping.name) names an entity the models lack (\(sourceName) to \(destinationName)).",
                    entityName: destinationName)
            }
            guard !sourceEntity.isAbstract else { continue }
            var request = FetchRequest(entityName: sourceName)
            request.includesSubentities = false
            request.resultType = .managedObjectID
            request.affectedStores = stores
            let ids = try source.fetch(request).map(\.objectID)
            if !ids.isEmpty && destinationEntity.isAbstract {
                throw ObjectGraphError(
                    .migrationFailed, "\(ids.count) \(sourceName) objects would become instances of \(destinationName), which is abstract.",
                    entityName: destinationName)
            }
            work.append((entityMapping, sourceEntity, destinationEntity, ids))
        }
        let total = Double(max(1, 2 * work.reduce(0) { $0 + $1.ids.count }))
        var done = 0
        func advance(_ count: Int) {
            done += count
            migrationProgress = min(1, Double(done) / total)
            progressHandler?(migrationProgress)
        }

        // Pass 1: objects and attributes. Each copy's permanent ID, by its source's.
        var copies: [ManagedObjectID: ManagedObjectID] = [:]
        for item in work {
            for chunk in Self.chunks(item.ids, batchSize) {
                let objects = try Self.objects(Array(chunk), of: item.source.name, in: source, stores: stores)
                var made: [(ManagedObjectID, ManagedObject)] = []
                for object in objects {
                    let copy = try destination.insertNewObject(forEntityName: item.destination.name)
                    for propertyMapping in item.mapping.attributeMappings {
                        guard let value = try attributeValue(propertyMapping, of: object, entity: item.destination) else { continue }
                        try copy.setValue(value, forKey: propertyMapping.name)
                    }
                    made.append((object.objectID, copy))
                }
                try destination.obtainPermanentIDs(for: made.map(\.1))
                for (id, copy) in made { copies[id] = copy.objectID }
                if let customizeObject {
                    for (object, (_, copy)) in zip(objects, made) { try customizeObject(object, copy) }
                }
                try Self.save(destination)
                destination.reset()
                source.reset()
                advance(chunk.count)
            }
        }
        // Pass 2: relationships, through the copies.
        for item in work where !item.mapping.relationshipMappings.isEmpty {
            for chunk in Self.chunks(item.ids, batchSize) {
                let objects = try Self.objects(Array(chunk), of: item.source.name, in: source, stores: stores)
                for object in objects {
                    guard let copyID = copies[object.objectID] else { continue }
                    let copy = destination.object(with: copyID)
                    for propertyMapping in item.mapping.relationshipMappings {
                        guard let relationship = item.destination.relationshipsByName[propertyMapping.name] else { continue }
                        let targets: [ManagedObjectID]
                        switch propertyMapping.value {
                        case .source(let name):
                            guard item.source.relationshipsByName[name] != nil else {
                                throw ObjectGraphError(
                                    .migrationFailed, "\(item.mapping.name): \(item.source.name) has no relationship \(name) for \(relationship.name).",
                                    entityName: item.destination.name, key: relationship.name)
                            }
                            // A destination the mapping does not copy (a removed entity) is left out,
                            // and so is one copied to an entity the relationship no longer reaches
                            // (moved out of the destination's hierarchy): Core Data's inferred
                            // mappings take a relationship's destination instances from the
                            // destination entity's own mappings. The moved object keeps its side,
                            // and the inverse it has now comes with it.
                            targets = try object.objectIDs(forRelationshipNamed: name).compactMap { copies[$0] }.filter { target in
                                relationship.destinationEntity.map { target.entity.isKind(of: $0) } ?? true
                            }
                        case .expression(let expression):
                            targets = Self.objectIDs(in: try expression.evaluate(with: object)).compactMap { copies[$0] }
                        case .defaultValue:
                            continue
                        }
                        if relationship.isToMany {
                            try copy.setValue(targets.map { destination.object(with: $0) }, forKey: relationship.name)
                        } else {
                            try copy.setValue(targets.first.map { destination.object(with: $0) }, forKey: relationship.name)
                        }
                    }
                }
                try Self.save(destination)
                destination.reset()
                source.reset()
                advance(chunk.count)
            }
        }
    }

    /// Gives `destinationStore` (of `coordinator`) the metadata keys of `sourceStore` that are
    /// the application's (not the store's UUID, type or model version hashes), and writes them.
    static func copyApplicationMetadata(from sourceStore: PersistentStore, to destinationStore: PersistentStore, in coordinator: PersistentStoreCoordinator) throws {
        var metadata = destinationStore.metadata
        for (key, value) in sourceStore.metadata
        where key != PersistentStore.storeUUIDKey && key != PersistentStore.storeTypeKey && !key.hasPrefix(PersistentStore.modelVersionHashKeyPrefix) {
            metadata[key] = value
        }
        if metadata != destinationStore.metadata {
            coordinator.setMetadata(metadata, for: destinationStore)
            // An atomic store writes its metadata with its file only: written again whole.
            if let atomic = destinationStore as? AtomicStore {
                try atomic.save()
            } else if let incremental = destinationStore as? IncrementalStore {
                _ = try incremental.execute(SaveChangesRequest(), with: nil)
            }
        }
    }

    /// Replaces the store of `type` at `url` with its copy by `mapping`: the copy is built at
    /// ``PersistentStore/migratingURL(for:)`` and swapped in
    /// (``PersistentStore/swapInMigratedStore(at:)``: a crash at any point leaves the old store
    /// or the new one). A failure before the swap destroys the copy and leaves the store
    /// untouched. The copy's objects have new IDs (and the store a new identifier).
    ///
    /// - Throws: as ``migrateStore(from:type:options:mapping:to:type:options:)``.
    public func migrateStore(at url: URL, type: PersistentStore.StoreType, options: [String: AttributeValue] = [:], mapping: MappingModel) throws {
        let storeClass = try PersistentStoreCoordinator.storeClass(for: type)
        let migrating = PersistentStore.migratingURL(for: url)
        try storeClass.destroyPersistentStore(at: migrating)
        var destinationOptions = options
        destinationOptions[PersistentStore.readOnlyOption] = nil
        destinationOptions[PersistentStore.migratePersistentStoresAutomaticallyOption] = nil
        do {
            try migrateStore(from: url, type: type, options: options, mapping: mapping, to: migrating, type: type, options: destinationOptions)
        } catch {
            try? storeClass.destroyPersistentStore(at: migrating)
            throw error
        }
        try storeClass.swapInMigratedStore(at: url)
    }

    /// The value a destination attribute takes, or `nil` to keep its default.
    private func attributeValue(_ mapping: PropertyMapping, of object: ManagedObject, entity: EntityDescription) throws -> AttributeValue? {
        guard let attribute = entity.attributesByName[mapping.name] else {
            throw ObjectGraphError(
                .migrationFailed, "\(entity.name) has no attribute \(mapping.name) for the mapping to set.", entityName: entity.name, key: mapping.name)
        }
        let value: AttributeValue
        switch mapping.value {
        case .defaultValue:
            return nil
        case .source(let name):
            guard object.entity.attributesByName[name] != nil else {
                throw ObjectGraphError(
                    .migrationFailed, "\(object.entity.name) has no attribute \(name) for \(entity.name).\(mapping.name).",
                    entityName: entity.name, key: mapping.name)
            }
            value = try object.value(forKey: name)
        case .expression(let expression):
            guard let computed = try expression.evaluate(with: object).attributeValue else {
                throw ObjectGraphError(
                    .migrationFailed, "\(entity.name).\(mapping.name): the expression \(expression) does not give an attribute value for \(object.objectID).",
                    entityName: entity.name, key: mapping.name, objectID: object.objectID)
            }
            value = computed
        }
        // A null keeps the default of a required attribute (a lightweight change to required).
        if value.isNull && !attribute.isOptional { return nil }
        guard let converted = value.converted(to: attribute.attributeType) else {
            throw ObjectGraphError(
                .migrationFailed, "\(entity.name).\(mapping.name) expects \(attribute.attributeType); the mapping gives \(value.typeName) (\(value)) for \(object.objectID).",
                entityName: entity.name, key: mapping.name, objectID: object.objectID)
        }
        return converted
    }

    /// Saves a batch of copies. A uniqueness constraint the copies break (a constraint the
    /// destination model adds over values the source store holds twice) fails the migration
    /// as Core Data's does ("constraint violation during attempted migration").
    private static func save(_ destination: ManagedObjectContext) throws {
        do {
            try destination.save()
        } catch let error as ObjectGraphError where error.code == .constraintConflict {
            let conflict = error.constraintConflicts.first
            let entity = conflict?.databaseObjectID?.entity.name ?? conflict?.conflictingObjects.first?.entity.name ?? error.entityName
            let names = conflict?.constraint ?? []
            throw ObjectGraphError(
                .migrationFailed,
                "Constraint violation during attempted migration: the destination model's uniqueness constraint (\(names.joined(separator: ", "))) is broken by objects the source store holds (\(error.message)). The source store is unchanged; remove or change the duplicates with its model first (or migrate with a custom stage that does).",
                entityName: entity, key: names.first, detailedErrors: [error])
        }
    }

    /// The objects of `ids` (all of `entity`), fetched together.
    private static func objects(_ ids: [ManagedObjectID], of entity: String, in context: ManagedObjectContext, stores: [PersistentStore]?) throws -> [ManagedObject] {
        var request = FetchRequest(entityName: entity)
        request.includesSubentities = false
        request.affectedStores = stores
        request.predicate = try FetchPredicate(format: "SELF IN %@", ids)
        request.returnsObjectsAsFaults = false
        let byID = Dictionary(try context.fetch(request).map { ($0.objectID, $0) }, uniquingKeysWith: { first, _ in first })
        return ids.compactMap { byID[$0] }
    }

    private static func objectIDs(in value: FetchValue) -> [ManagedObjectID] {
        switch value {
        case .object(let id): return [id]
        case .collection(let values): return values.flatMap(objectIDs(in:))
        case .attribute: return []
        }
    }

    private static func chunks<T>(_ items: [T], _ size: Int) -> [ArraySlice<T>] {
        stride(from: 0, to: items.count, by: max(1, size)).map { items[$0..<min($0 + max(1, size), items.count)] }
    }
}

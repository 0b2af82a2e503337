import Foundation

/// The single error type thrown by the ObjectGraph module.
///
/// Every error carries a ``Code`` that says what went wrong, a message that
/// says where and what to do, and, where relevant, the entity, key and object
/// involved. Validation failures found during one save are collected into one
/// error whose ``detailedErrors`` lists each failure.
///
/// For example:
///
/// ```swift
/// do {
///     try context.save()
/// } catch let error as ObjectGraphError where error.code == .multipleValidationErrors {
///     for failure in error.detailedErrors { print(failure) }
/// }
/// ```
public struct ObjectGraphError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, as a stable, switchable code.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The code's stable name.
        public let rawValue: String
        /// Creates a code from its stable name.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The code's stable name.
        public var description: String { rawValue }

        /// The model is inconsistent (duplicate names, unknown destination, bad inverse, …).
        public static let invalidModel = Code(rawValue: "invalidModel")
        /// No entity of the given name exists in the model.
        public static let unknownEntity = Code(rawValue: "unknownEntity")
        /// The entity has no property of the given name.
        public static let unknownKey = Code(rawValue: "unknownKey")
        /// A value's type does not match the property's declared type.
        public static let wrongValueType = Code(rawValue: "wrongValueType")
        /// The coordinator has no store that can serve the request.
        public static let noPersistentStore = Code(rawValue: "noPersistentStore")
        /// No store type is registered under the given name.
        public static let unknownStoreType = Code(rawValue: "unknownStoreType")
        /// The store could not be opened or its metadata could not be read.
        public static let storeOpenFailed = Code(rawValue: "storeOpenFailed")
        /// The store was saved with a model its entity version hashes say is not this one
        /// (Core Data's `NSPersistentStoreIncompatibleVersionHashError`, 134100): an entity is
        /// missing, added or changed. The message and ``ObjectGraphError/detailedErrors`` name
        /// each difference; nothing was written to the store.
        public static let incompatibleModel = Code(rawValue: "incompatibleModel")
        /// The store is already added to a coordinator, or is not part of this one.
        public static let storeMismatch = Code(rawValue: "storeMismatch")
        /// The object does not exist in its persistent store.
        public static let objectNotFound = Code(rawValue: "objectNotFound")
        /// The object is not (or no longer) usable in this context.
        public static let objectInvalidated = Code(rawValue: "objectInvalidated")
        /// The object belongs to a different context.
        public static let wrongContext = Code(rawValue: "wrongContext")
        /// The store received a request type it does not handle.
        public static let unsupportedRequest = Code(rawValue: "unsupportedRequest")
        /// A fetch request or predicate is malformed.
        public static let invalidFetchRequest = Code(rawValue: "invalidFetchRequest")
        /// A predicate format string does not parse; ``ObjectGraphError/offset`` says where.
        public static let malformedPredicate = Code(rawValue: "malformedPredicate")
        /// A URI is not an object URI of a store known to the coordinator.
        public static let invalidURI = Code(rawValue: "invalidURI")
        /// A mandatory property has no value.
        public static let missingMandatoryProperty = Code(rawValue: "missingMandatoryProperty")
        /// A value is below its attribute's minimum.
        public static let valueTooSmall = Code(rawValue: "valueTooSmall")
        /// A value is above its attribute's maximum.
        public static let valueTooLarge = Code(rawValue: "valueTooLarge")
        /// A string is shorter than its attribute's minimum length.
        public static let stringTooShort = Code(rawValue: "stringTooShort")
        /// A string is longer than its attribute's maximum length.
        public static let stringTooLong = Code(rawValue: "stringTooLong")
        /// A string does not match its attribute's pattern.
        public static let patternMismatch = Code(rawValue: "patternMismatch")
        /// A to-many relationship holds fewer objects than its minimum count.
        public static let tooFewObjects = Code(rawValue: "tooFewObjects")
        /// A to-many relationship holds more objects than its maximum count.
        public static let tooManyObjects = Code(rawValue: "tooManyObjects")
        /// A relationship with the deny rule still has destinations, so the delete is refused.
        public static let deleteDenied = Code(rawValue: "deleteDenied")
        /// Several validation errors; see ``ObjectGraphError/detailedErrors``.
        public static let multipleValidationErrors = Code(rawValue: "multipleValidationErrors")
        /// A store saw an unregister with no matching register.
        public static let unbalancedUnregister = Code(rawValue: "unbalancedUnregister")
        /// An argument is outside what the operation accepts.
        public static let invalidArgument = Code(rawValue: "invalidArgument")
        /// A Codable value could not be encoded or decoded.
        public static let transformFailed = Code(rawValue: "transformFailed")
        /// A saved object would refer to an object the same save deletes (Core Data's
        /// "dangling reference to an invalid object").
        public static let danglingReference = Code(rawValue: "danglingReference")
        /// The store at the URL was made by another store type than the one it is added as
        /// (Core Data's `NSPersistentStoreTypeMismatchError`, 134010); nothing was written.
        public static let storeTypeMismatch = Code(rawValue: "storeTypeMismatch")
        /// A save found objects whose rows changed or went since the context read them
        /// (optimistic locking), and the merge policy did not resolve them: Core Data's
        /// `NSManagedObjectMergeError`. ``ObjectGraphError/conflicts`` holds one
        /// ``MergeConflict`` per object; nothing was written.
        public static let mergeConflict = Code(rawValue: "mergeConflict")
        /// A save would give two objects the same values for a uniqueness constraint
        /// (``EntityDescription/uniquenessConstraints``), and the merge policy did not
        /// resolve it: Core Data's `NSManagedObjectConstraintMergeError`.
        /// ``ObjectGraphError/constraintConflicts`` holds one ``ConstraintConflict`` per
        /// duplicate; nothing was written.
        public static let constraintConflict = Code(rawValue: "constraintConflict")
        /// Lightweight migration cannot infer how the store's model maps to the opening one
        /// (``MappingModel/inferred(from:to:)``): Core Data's `NSInferredMappingModelError`.
        /// ``ObjectGraphError/detailedErrors`` names each change, with its entity and
        /// property; nothing was written.
        public static let inferredMappingFailed = Code(rawValue: "inferredMappingFailed")
        /// A migration failed (Core Data's `NSMigrationError`); the message says where, and
        /// the store is as it was before the migration.
        public static let migrationFailed = Code(rawValue: "migrationFailed")

        /// The number Core Data (or Cocoa) gives the same error, for code ported from Core
        /// Data that switches on `NSError.code`: 133020 for ``mergeConflict``
        /// (`NSManagedObjectMergeError`), 1570 for ``missingMandatoryProperty``, 134100 for
        /// ``incompatibleModel``, and so on; `nil` for codes Core Data has no number for.
        public var cocoaErrorCode: Int? { Code.cocoaErrorCodes[rawValue] }

        /// Core Data's numbers (CoreDataErrors.h, FoundationErrors.h), by code name. The
        /// codes of other modules of this package are listed too.
        private static let cocoaErrorCodes: [String: Int] = [
            "wrongValueType": 1550,            // NSManagedObjectValidationError
            "danglingReference": 1550,         // NSManagedObjectValidationError ("dangling reference")
            "invalidArgument": 1550,
            "multipleValidationErrors": 1560,  // NSValidationMultipleErrorsError
            "missingMandatoryProperty": 1570,  // NSValidationMissingMandatoryPropertyError
            "tooFewObjects": 1580,             // NSValidationRelationshipLacksMinimumCountError
            "tooManyObjects": 1590,            // NSValidationRelationshipExceedsMaximumCountError
            "deleteDenied": 1600,              // NSValidationRelationshipDeniedDeleteError
            "valueTooLarge": 1610,             // NSValidationNumberTooLargeError
            "valueTooSmall": 1620,             // NSValidationNumberTooSmallError
            "stringTooLong": 1660,             // NSValidationStringTooLongError
            "stringTooShort": 1670,            // NSValidationStringTooShortError
            "patternMismatch": 1680,           // NSValidationStringPatternMatchingError
            "invalidURI": 1690,                // NSValidationInvalidURIError
            "objectNotFound": 133000,          // NSManagedObjectReferentialIntegrityError
            "objectInvalidated": 133000,
            "wrongContext": 133010,            // NSManagedObjectExternalRelationshipError
            "mergeConflict": 133020,           // NSManagedObjectMergeError
            "constraintConflict": 133021,      // NSManagedObjectConstraintMergeError
            "unknownStoreType": 134000,        // NSPersistentStoreInvalidTypeError
            "storeTypeMismatch": 134010,       // NSPersistentStoreTypeMismatchError
            "noPersistentStore": 134060,       // NSCoreDataError
            "storeMismatch": 134060,
            "invalidFetchRequest": 134060,
            "malformedPredicate": 134060,
            "unknownEntity": 134060,
            "unknownKey": 134060,
            "invalidModel": 134060,
            "transformFailed": 134060,
            "unbalancedUnregister": 134060,
            "storeIOFailed": 134070,           // NSPersistentStoreOperationError
            "storeOpenFailed": 134080,         // NSPersistentStoreOpenError
            "storeLocked": 134090,             // NSPersistentStoreTimeoutError
            "unsupportedRequest": 134091,      // NSPersistentStoreUnsupportedRequestTypeError
            "incompatibleModel": 134100,       // NSPersistentStoreIncompatibleVersionHashError
            "migrationFailed": 134110,         // NSMigrationError
            "inferredMappingFailed": 134190,   // NSInferredMappingModelError
            "storeCorrupted": 259,             // NSFileReadCorruptFileError
        ]
    }

    /// What went wrong.
    public var code: Code
    /// A sentence that says what went wrong, where, and what to do.
    public var message: String
    /// The entity involved, if any.
    public var entityName: String?
    /// The property involved, if any.
    public var key: String?
    /// The object involved, if any.
    public var objectID: ManagedObjectID?
    /// The individual errors when ``code`` is ``Code/multipleValidationErrors``.
    public var detailedErrors: [ObjectGraphError]
    /// For ``Code/mergeConflict``, one record per object in conflict.
    public var conflicts: [MergeConflict] = []
    /// For ``Code/constraintConflict``, one record per duplicate.
    public var constraintConflicts: [ConstraintConflict] = []
    /// For ``Code/malformedPredicate``, the zero-based offset, in characters, of the
    /// offending position in the format string.
    public var offset: Int?

    /// Creates an error.
    public init(
        _ code: Code,
        _ message: String,
        entityName: String? = nil,
        key: String? = nil,
        objectID: ManagedObjectID? = nil,
        detailedErrors: [ObjectGraphError] = [],
        offset: Int? = nil
    ) {
        self.offset = offset
        self.code = code
        self.message = message
        self.entityName = entityName
        self.key = key
        self.objectID = objectID
        self.detailedErrors = detailedErrors
    }

    /// The code, the message and the details, on one line each.
    public var description: String {
        var text = "ObjectGraphError.\(code): \(message)"
        for detail in detailedErrors { text += "\n  - \(detail.code): \(detail.message)" }
        return text
    }

    /// The error a store throws for objects whose rows changed or went since their context
    /// read them: ``Code/mergeConflict``, with the records in ``conflicts``.
    ///
    /// A store calls it after releasing its locks (the records read the objects' values).
    public static func mergeConflicts(_ conflicts: [MergeConflict]) -> ObjectGraphError {
        var error = ObjectGraphError(
            .mergeConflict,
            "The save conflicts with changes saved since the objects were read (optimistic locking): "
                + conflicts.map(\.description).joined(separator: "; ")
                + ". Set the context's mergePolicy to resolve such conflicts, or refresh the objects and save again.",
            entityName: conflicts.count == 1 ? conflicts[0].objectID.entityName : nil,
            objectID: conflicts.count == 1 ? conflicts[0].objectID : nil)
        error.conflicts = conflicts
        return error
    }

    /// The error a store throws for a save that would break uniqueness constraints:
    /// ``Code/constraintConflict``, with the records in ``constraintConflicts``.
    ///
    /// A store calls it after releasing its locks (the records read the objects' values).
    public static func constraintConflicts(_ conflicts: [ConstraintConflict]) -> ObjectGraphError {
        var error = ObjectGraphError(
            .constraintConflict,
            "The save would break uniqueness constraints: "
                + conflicts.map(\.description).joined(separator: "; ")
                + ". Set the context's mergePolicy to resolve such conflicts, or change the values and save again.",
            entityName: conflicts.first?.conflictingObjects.first?.entity.name,
            objectID: conflicts.count == 1 ? conflicts[0].conflictingObjects.first?.objectID : nil)
        error.constraintConflicts = conflicts
        return error
    }

    /// Whether this error is a validation failure (one or several).
    public var isValidationError: Bool {
        [.missingMandatoryProperty, .valueTooSmall, .valueTooLarge, .stringTooShort, .stringTooLong,
         .patternMismatch, .tooFewObjects, .tooManyObjects, .deleteDenied, .multipleValidationErrors,
         .wrongValueType, .danglingReference].contains(code)
    }

    /// Combines validation errors into one: the error itself when there is one, a
    /// ``Code/multipleValidationErrors`` error carrying all of them otherwise.
    static func combining(_ errors: [ObjectGraphError]) -> ObjectGraphError? {
        if errors.count <= 1 { return errors.first }
        return ObjectGraphError(
            .multipleValidationErrors,
            "\(errors.count) validation errors; see detailedErrors.",
            detailedErrors: errors)
    }
}

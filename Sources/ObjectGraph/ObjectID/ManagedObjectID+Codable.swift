import Foundation

extension CodingUserInfoKey {
    /// The coordinator that resolves decoded ``ManagedObjectID``s: set it in a decoder's
    /// `userInfo` to decode IDs.
    public static let persistentStoreCoordinator = CodingUserInfoKey(rawValue: "ObjectGraph.persistentStoreCoordinator")!
}

/// An ID encodes as its URI (``uriRepresentation()``), as SwiftData's persistent identifiers
/// encode. That also makes IDs capturable in Foundation's `#Predicate`, which takes `Codable`
/// values only: `#Predicate<Book> { $0.author?.objectID == id }` fetches the books of one
/// author, as `author == %@` does.
///
/// Decoding resolves the URI through the coordinator in the decoder's `userInfo` under
/// ``Foundation/CodingUserInfoKey/persistentStoreCoordinator``, as
/// ``PersistentStoreCoordinator/managedObjectID(forURIRepresentation:)`` does; without one, or
/// for a URI it does not resolve (another store, a temporary ID), it throws a
/// `DecodingError.dataCorrupted` that says so.
extension ManagedObjectID: Codable {
    /// Encodes the ID's URI as a single string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(uriRepresentation().absoluteString)
    }

    /// Decodes an ID from its URI, resolved by the decoder's coordinator.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let coordinator = decoder.userInfo[.persistentStoreCoordinator] as? PersistentStoreCoordinator else {
            throw DecodingError.dataCorrupted(DecodingError.Context(
                codingPath: decoder.codingPath,
                debugDescription: "Decoding the object ID \(text) needs the coordinator in userInfo[.persistentStoreCoordinator]."))
        }
        guard let uri = URL(string: text), let id = coordinator.managedObjectID(forURIRepresentation: uri) else {
            throw DecodingError.dataCorrupted(DecodingError.Context(
                codingPath: decoder.codingPath, debugDescription: "\(text) names no object ID of the coordinator's stores and model."))
        }
        self = id
    }
}

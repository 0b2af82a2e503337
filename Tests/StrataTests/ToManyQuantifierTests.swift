import Foundation
import ObjectGraph
import Strata
import Testing

/// `ANY`, `ALL` and `NONE` (and `@sum`, `@avg`, `@min`, `@max`) through to-many
/// relationships, which a StrataStore answers either from the destination's matches (a
/// semi-join, [FETCH-S1]) or row by row, reading members until one decides ([FETCH-S5]); and a limit without a sort, which stops reading once the
/// page is full ([FETCH-S6]). An InMemoryStore holding the same objects is the oracle: keyed
/// many-to-many and one-to-many relationships, an ordered to-many kept in the row, to-one
/// chains with missing destinations, null values and empty collections.
@Suite struct ToManyQuantifierTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Genre", properties: [
                .attribute("name", .string, indexed: true),
                .toMany("tracks", "Track", inverse: "genre"),
            ]),
            EntityDescription(name: "Album", properties: [
                .attribute("title", .string),
                .toMany("tracks", "Track", inverse: "album"),
                .toMany("highlights", "Track", ordered: true),
            ]),
            EntityDescription(name: "Playlist", properties: [
                .attribute("name", .string),
                .toMany("tracks", "Track", inverse: "playlists"),
            ]),
            EntityDescription(name: "Track", properties: [
                .attribute("name", .string),
                .attribute("length", .integer32),
                .toOne("genre", "Genre", inverse: "tracks"),
                .toOne("album", "Album", inverse: "tracks"),
                .toMany("playlists", "Playlist", inverse: "tracks"),
            ]),
        ])
    }

    /// The same objects in each store: few playlists with many members (Rock is most of
    /// them), albums with a few tracks each.
    static func populate(_ coordinator: PersistentStoreCoordinator) throws {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        var genres: [ManagedObject] = []
        for name in ["Rock", "Jazz", "Blues", nil] as [String?] {
            let genre = try context.insertNewObject(forEntityName: "Genre")
            if let name { try genre.setValue(.string(name), forKey: "name") }
            genres.append(genre)
        }
        var albums: [ManagedObject] = []
        for index in 0..<40 {
            let album = try context.insertNewObject(forEntityName: "Album")
            try album.setValue(.string("album \(index)"), forKey: "title")
            albums.append(album)
        }
        var playlists: [ManagedObject] = []
        for index in 0..<5 {
            let playlist = try context.insertNewObject(forEntityName: "Playlist")
            try playlist.setValue(.string("list \(index)"), forKey: "name")
            playlists.append(playlist)
        }
        var tracks: [ManagedObject] = []
        for index in 0..<300 {
            let track = try context.insertNewObject(forEntityName: "Track")
            if index % 17 != 4 { try track.setValue(.string(["Angel", "blue", "Alone", "Zed", "echo"][index % 5] + " \(index)"), forKey: "name") }
            if index % 13 != 6 { try track.setValue(.int32(Int32(60 + (index * 37) % 300)), forKey: "length") }
            // Mostly Rock; Blues for a few; some without a genre, some on the unnamed one.
            let genre = index % 29 == 0 ? nil : index % 41 == 3 ? genres[2] : index % 7 == 0 ? genres[1] : index % 23 == 5 ? genres[3] : genres[0]
            if let genre { try track.setValue(genre, forKey: "genre") }
            // Albums 0..<36 get tracks; the last four stay empty.
            try track.setValue(albums[index % 36], forKey: "album")
            for (position, playlist) in playlists.enumerated() where position < 4 && (index + position) % (position + 2) == 0 {
                try playlist.addObject(track, toRelationship: "tracks")
            }
            tracks.append(track)
        }
        for (index, album) in albums.enumerated() where index % 3 != 2 {
            let picks = (0..<(index % 4)).map { tracks[(index * 11 + $0 * 7) % tracks.count] }
            try album.setValue(picks, forKey: "highlights")
        }
        try context.save()
    }

    static let cases: [(entity: String, format: String)] = [
        ("Playlist", "ANY tracks.genre.name == 'Rock'"),
        ("Playlist", "ANY tracks.genre.name == 'Blues'"),
        ("Playlist", "ALL tracks.length > 61"),
        ("Playlist", "NONE tracks.genre.name == 'Jazz'"),
        ("Playlist", "ANY tracks.genre.name == nil"),
        ("Playlist", "ALL tracks.genre.name != nil"),
        ("Album", "ALL tracks.length > 100"),
        ("Album", "ANY tracks.genre.name == 'Jazz' AND title ENDSWITH '1'"),
        ("Album", "NONE tracks.name BEGINSWITH[c] 'a'"),
        ("Album", "ALL tracks.genre.name == 'Rock'"),
        ("Album", "ANY highlights.name CONTAINS[c] 'e'"),
        ("Album", "ALL highlights.length < 300"),
        ("Album", "NONE highlights.genre.name == 'Rock'"),
        ("Track", "ANY playlists.name == 'list 2'"),
        ("Track", "ALL playlists.name != 'list 0' AND length > 200"),
        ("Genre", "ANY tracks.album.title == 'album 7'"),
        ("Album", "tracks.@avg.length > 200"),
        ("Album", "tracks.@sum.length >= 1500"),
        ("Album", "tracks.@min.length < 80 OR tracks.@max.length > 350"),
        ("Album", "tracks.@max.genre.name == 'Rock'"),
        ("Album", "highlights.@avg.length > 150"),
        ("Playlist", "tracks.@min.name BEGINSWITH 'A'"),
    ]

    static func names(_ request: FetchRequest, _ coordinator: PersistentStoreCoordinator) throws -> [String] {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let key = ["Album": "title"][request.entityName] ?? "name"
        return try context.fetch(request).map { object in
            if case .string(let text) = try object.value(forKey: key) { return text }
            return "-"
        }
    }

    @Test(arguments: 0..<22)
    func quantifiersThroughToManysMatchTheInMemoryStore(case index: Int) throws {
        let model = try Self.model()
        let reference = PersistentStoreCoordinator(managedObjectModel: model)
        try reference.addPersistentStore(type: .inMemory, configuration: nil, at: nil, options: [:])
        let store = TemporaryStore()
        let strata = try store.coordinator(model: model)
        try Self.populate(reference)
        try Self.populate(strata)
        let (entity, format) = Self.cases[index]
        var request = FetchRequest(entityName: entity)
        request.predicate = try FetchPredicate(format: format)
        let expected = try Self.names(request, reference).sorted()
        #expect(try Self.names(request, strata).sorted() == expected, "\(entity) \(format)")
        let context = ManagedObjectContext(persistentStoreCoordinator: strata)
        #expect(try context.count(for: request) == expected.count, "count of \(entity) \(format)")
        // A limit without a sort: a prefix of the unlimited result, as long as it can be.
        let all = try Self.names(request, strata)
        for (limit, offset) in [(1, 0), (3, 2)] {
            request.fetchLimit = limit
            request.fetchOffset = offset
            #expect(try Self.names(request, strata) == Array(all.dropFirst(offset).prefix(limit)), "\(format) limit \(limit) offset \(offset)")
        }
    }
}

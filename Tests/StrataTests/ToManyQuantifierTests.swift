import Foundation
import ObjectGraph
import Strata
import Testing

/// `ANY`, `ALL` and `NONE` (and `@sum`, `@avg`, `@min`, `@max`) through to-many
/// relationships, which a StrataStore answers either from the destination's matches (a
/// semi-join, [FETCH-S1], its matches read from a to-one's keys where the rest of the path
/// starts with one, [FETCH-S17]) or row by row, reading members until one decides
/// ([FETCH-S5]); and a limit without a sort, which stops reading once the
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
                .toMany("lines", "Line", inverse: "track"),
            ]),
            EntityDescription(name: "Line", properties: [
                .attribute("name", .string),
                .toOne("track", "Track", inverse: "lines"),
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
        // Lines naming a track (some none): to-one chains two deep ([FETCH-S17]).
        for index in 0..<120 {
            let line = try context.insertNewObject(forEntityName: "Line")
            try line.setValue(.string("line \(index)"), forKey: "name")
            if index % 11 != 3 { try line.setValue(tracks[(index * 7) % tracks.count], forKey: "track") }
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
        ("Track", "playlists.@count == 0"),
        ("Track", "playlists.@count >= 2 AND length > 100"),
        ("Album", "tracks.@count >= 9"),
        ("Album", "SUBQUERY(tracks, $t, $t.length > 150).@count >= 6"),
        ("Album", "SUBQUERY(tracks, $t, $t.length > 240 AND $t.genre.name == 'Rock').@count == 1"),
        ("Album", "SUBQUERY(tracks, $t, $t.name BEGINSWITH 'A' OR $t.length == nil).@count == 3 OR title ENDSWITH '3'"),
        ("Genre", "SUBQUERY(tracks, $t, $t.album.title == 'album 7').@count == 1"),
        ("Playlist", "SUBQUERY(tracks, $t, $t.length > 200).@count > 20"),
        ("Album", "SUBQUERY(tracks, $t, length > 150 AND $t.name BEGINSWITH 'A').@count == 1"),
        ("Track", "genre == nil"),
        ("Track", "genre != nil AND length < 100"),
        ("Track", "NOT (genre == nil) AND name BEGINSWITH 'e'"),
        ("Line", "track.genre.name == 'Jazz'"),
        ("Line", "track.album.title BEGINSWITH 'album 1' AND name ENDSWITH '5'"),
        ("Line", "track.genre.name IN {'Blues', 'Jazz'}"),
        ("Genre", "ANY tracks.album.title BEGINSWITH 'album 2'"),
        ("Playlist", "ANY tracks.album.title == 'album 3' OR ANY tracks.genre.name == 'Blues'"),
        ("Album", "ANY tracks.genre.name == 'Blues'"),
    ]

    static func names(_ request: FetchRequest, _ coordinator: PersistentStoreCoordinator) throws -> [String] {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let key = ["Album": "title"][request.entityName] ?? "name"
        return try context.fetch(request).map { object in
            if case .string(let text) = try object.value(forKey: key) { return text }
            return "-"
        }
    }

    @Test(arguments: 0..<40)
    func quantifiersThroughToManysMatchTheInMemoryStore(case index: Int) throws {
        let store = TemporaryStore()
        let (reference, strata) = try store.referenceAndStrata(model: try Self.model(), populate: Self.populate)
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

    /// The IDs of the objects of `entity` whose `key` is each of `values`, in their order.
    static func ids(_ entity: String, _ key: String, _ values: [String], _ coordinator: PersistentStoreCoordinator) throws -> [ManagedObjectID] {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        return try values.map { value in
            var request = FetchRequest(entityName: entity)
            request.predicate = try FetchPredicate(format: "\(key) == %@", value)
            guard let object = try context.fetch(request).first else { throw ObjectGraphError(.objectNotFound, "no \(entity) \(value)") }
            return object.objectID
        }
    }

    // [FETCH-S17] A to-one chain compared with objects (`track.album == %@`, `track.album IN
    // %@`, `ANY tracks.album == %@`): the members under the objects' keys, as the InMemoryStore
    // answers, with an album without tracks, a duplicate, an object of another entity, and an
    // album deleted since (its tracks' to-one nullified).
    @Test func toOneChainsComparedWithObjectsMatchTheInMemoryStore() throws {
        let store = TemporaryStore()
        let (reference, strata) = try store.referenceAndStrata(model: try Self.model(), populate: Self.populate)
        var deletedIDs: [ObjectIdentifier: ManagedObjectID] = [:]
        for coordinator in [reference, strata] {
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            let id = try Self.ids("Album", "title", ["album 9"], coordinator)[0]
            context.delete(try context.existingObject(with: id))
            try context.save()
            deletedIDs[ObjectIdentifier(coordinator)] = id
        }
        func deleted(_ coordinator: PersistentStoreCoordinator) throws -> ManagedObjectID {
            guard let id = deletedIDs[ObjectIdentifier(coordinator)] else { throw ObjectGraphError(.objectNotFound, "no deleted album") }
            return id
        }
        typealias Case = (entity: String, format: String, argument: (PersistentStoreCoordinator) throws -> any FetchArgument)
        let cases: [Case] = [
            ("Line", "track.album == %@", { try Self.ids("Album", "title", ["album 7"], $0)[0] }),
            ("Line", "track.album IN %@", { try Self.ids("Album", "title", ["album 3", "album 38", "album 3"], $0) }),
            ("Line", "track.album IN %@", { try Self.ids("Album", "title", ["album 5"], $0) + Self.ids("Genre", "name", ["Rock"], $0) }),
            ("Line", "track.album == %@", { try Self.ids("Genre", "name", ["Jazz"], $0)[0] }),
            ("Line", "track.genre == %@ AND name ENDSWITH '5'", { try Self.ids("Genre", "name", ["Rock"], $0)[0] }),
            ("Line", "track.genre IN %@", { try Self.ids("Genre", "name", ["Jazz", "Blues"], $0) }),
            ("Genre", "ANY tracks.album == %@", { try Self.ids("Album", "title", ["album 7"], $0)[0] }),
            ("Playlist", "ANY tracks.album IN %@", { try Self.ids("Album", "title", ["album 1", "album 2"], $0) }),
            ("Track", "album == %@", { try Self.ids("Album", "title", ["album 11"], $0)[0] }),
            ("Line", "track.album == %@", { try deleted($0) }),
            ("Line", "track.album IN %@", { try [deleted($0)] + Self.ids("Album", "title", ["album 4"], $0) }),
        ]
        for (entity, format, argument) in cases {
            var expected = FetchRequest(entityName: entity)
            expected.predicate = try FetchPredicate(format: format, try argument(reference))
            var got = FetchRequest(entityName: entity)
            got.predicate = try FetchPredicate(format: format, try argument(strata))
            let names = try Self.names(expected, reference).sorted()
            #expect(try Self.names(got, strata).sorted() == names, "\(entity) \(format)")
            #expect(try ManagedObjectContext(persistentStoreCoordinator: strata).count(for: got) == names.count, "count of \(entity) \(format)")
        }
    }
}

/// [FETCH-S10] Member values grouped by owner from one scan of the members' hierarchy, and
/// [FETCH-S1]'s owners of a one-to-many's matches: the answers are those of reading each
/// owner's members by key, whatever the hierarchy around the members holds. Owners have
/// enough members that a fetch over all of them passes the point where it scans, and the
/// members' hierarchy holds rows of a sibling entity (which has a property at the to-one's
/// ordinal, but is no member) and of a subentity (which is).
@Suite struct GroupedMemberTests {
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Shelf", properties: [
                .attribute("label", .string),
                .toMany("tapes", "Tape", inverse: "shelf"),
            ]),
            EntityDescription(name: "Medium", isAbstract: true, properties: [
                .attribute("title", .string),
            ]),
            EntityDescription(name: "Poster", superentity: "Medium", properties: [
                .attribute("width", .integer32),
                .toOne("wall", "Shelf"),
            ]),
            EntityDescription(name: "Tape", superentity: "Medium", properties: [
                .attribute("minutes", .integer32),
                .toOne("shelf", "Shelf", inverse: "tapes"),
                .toMany("notes", "Note", inverse: "tape"),
            ]),
            EntityDescription(name: "Reel", superentity: "Tape", properties: [
                .attribute("gauge", .integer16),
            ]),
            EntityDescription(name: "Note", properties: [
                .attribute("text", .string),
                .toOne("tape", "Tape", inverse: "notes"),
            ]),
        ])
    }

    /// 30 shelves; 600 tapes and reels spread over the first 27 (the last three stay empty),
    /// some without minutes or a title, a few without a shelf; 200 posters whose `wall`
    /// names shelves too.
    static func populate(_ coordinator: PersistentStoreCoordinator) throws {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        let shelves = try (0..<30).map { index in
            let shelf = try context.insertNewObject(forEntityName: "Shelf")
            try shelf.setValue(.string("shelf \(index)"), forKey: "label")
            return shelf
        }
        var tapes: [ManagedObject] = []
        for index in 0..<800 {
            if index % 4 == 3 {
                let poster = try context.insertNewObject(forEntityName: "Poster")
                try poster.setValue(.string("poster \(index)"), forKey: "title")
                try poster.setValue(.int32(Int32(index % 90)), forKey: "width")
                try poster.setValue(shelves[index % 30], forKey: "wall")
                continue
            }
            let tape = try context.insertNewObject(forEntityName: index % 5 == 0 ? "Reel" : "Tape")
            if index % 19 != 7 { try tape.setValue(.string(["Alpha", "beta", "Gamma"][index % 3] + " \(index)"), forKey: "title") }
            if index % 11 != 4 { try tape.setValue(.int32(Int32(10 + (index * 53) % 170)), forKey: "minutes") }
            if index % 5 == 0 { try tape.setValue(.int16(Int16(index % 3)), forKey: "gauge") }
            if index % 97 != 13 { try tape.setValue(shelves[(index * 7) % 27], forKey: "shelf") }
            tapes.append(tape)
        }
        // Notes on most tapes (many tapes, each named by a note or two; some notes on none).
        for index in 0..<700 {
            let note = try context.insertNewObject(forEntityName: "Note")
            try note.setValue(.string("note \(index)"), forKey: "text")
            if index % 31 != 9 { try note.setValue(tapes[(index * 13) % tapes.count], forKey: "tape") }
        }
        try context.save()
    }

    static let cases: [String] = [
        "ALL tapes.minutes > 20",
        "ANY tapes.minutes > 170",
        "NONE tapes.minutes < 15",
        "tapes.@avg.minutes > 95",
        "tapes.@sum.minutes >= 2000",
        "tapes.@min.minutes < 12 OR tapes.@max.minutes > 175",
        "tapes.@min.title BEGINSWITH 'A'",
        "ALL tapes.title != nil",
        "ANY tapes.title BEGINSWITH 'Gamma 1'",
        "NONE tapes.title ENDSWITH '5'",
        "ANY tapes.minutes == nil",
        "label ENDSWITH '1' OR ALL tapes.minutes > 40",
    ]

    static func labels(_ request: FetchRequest, _ coordinator: PersistentStoreCoordinator) throws -> [String] {
        let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
        return try context.fetch(request).map { object in
            if case .string(let text) = try object.value(forKey: "label") { return text }
            return "-"
        }
    }

    @Test(arguments: 0..<12)
    func memberComparisonsOverAWholeEntityMatchTheInMemoryStore(case index: Int) throws {
        let store = TemporaryStore()
        let (reference, strata) = try store.referenceAndStrata(model: try Self.model(), populate: Self.populate)
        var request = FetchRequest(entityName: "Shelf")
        request.predicate = try FetchPredicate(format: Self.cases[index])
        let expected = try Self.labels(request, reference).sorted()
        #expect(!expected.isEmpty && expected.count < 30, "the case decides between shelves: \(Self.cases[index])")
        #expect(try Self.labels(request, strata).sorted() == expected, "\(Self.cases[index])")
        #expect(try ManagedObjectContext(persistentStoreCoordinator: strata).count(for: request) == expected.count)
        // Sorted with a limit: the same rows in the fetch language's order.
        request.sortDescriptors = [FetchSortDescriptor(keyPath: "label", ascending: false)]
        request.fetchLimit = 5
        #expect(try Self.labels(request, strata) == Array(expected.sorted(by: >).prefix(5)))
    }

    /// [FETCH-S11] Key paths through a to-one whose destinations are many (each note names
    /// its own tape): sorts, dictionary columns and grouping read every tape's value once,
    /// from one scan of the tapes' hierarchy once enough were read by key, and answer as the
    /// InMemoryStore does (reels among the tapes, notes without a tape, tapes without a shelf).
    @Test func keyPathsThroughToOnesWithManyDestinationsMatchTheInMemoryStore() throws {
        let store = TemporaryStore()
        let (reference, strata) = try store.referenceAndStrata(model: try Self.model(), populate: Self.populate)
        func texts(_ request: FetchRequest, _ coordinator: PersistentStoreCoordinator) throws -> [String] {
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            return try context.fetch(request).map { note in
                if case .string(let text) = try note.value(forKey: "text") { return text }
                return "-"
            }
        }
        var sorted = FetchRequest(entityName: "Note")
        sorted.sortDescriptors = [
            FetchSortDescriptor(keyPath: "tape.minutes"), FetchSortDescriptor(keyPath: "tape.shelf.label", ascending: false),
            FetchSortDescriptor(keyPath: "text"),
        ]
        #expect(try texts(sorted, strata) == texts(sorted, reference))
        sorted.fetchLimit = 25
        #expect(try texts(sorted, strata) == texts(sorted, reference))
        var grouped = FetchRequest(entityName: "Note")
        grouped.resultType = .dictionary
        grouped.propertiesToFetch = ["tape.shelf.label", .aggregate(.count, of: "text", as: "notes", type: .integer64)]
        grouped.propertiesToGroupBy = ["tape.shelf.label"]
        func rows(_ coordinator: PersistentStoreCoordinator) throws -> [String] {
            try ManagedObjectContext(persistentStoreCoordinator: coordinator).fetchDictionaries(grouped).map { row in
                "\(String(describing: row["tape.shelf.label"]?.attributeValue)) \(String(describing: row["notes"]?.attributeValue))"
            }.sorted()
        }
        let expected = try rows(reference)
        #expect(expected.count > 20)
        #expect(try rows(strata) == expected)
    }

    /// [FETCH-S10] Counts of a one-to-many with about one member per owner (notes of
    /// tapes): once enough owners were counted from their keys, the rest come from one scan
    /// of the notes, and predicates, sorts and counts answer as the InMemoryStore does.
    @Test func memberCountsOverManyOwnersMatchTheInMemoryStore() throws {
        let store = TemporaryStore()
        let (reference, strata) = try store.referenceAndStrata(model: try Self.model(), populate: Self.populate)
        func titles(_ request: FetchRequest, _ coordinator: PersistentStoreCoordinator) throws -> [String] {
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            return try context.fetch(request).map { tape in
                if case .string(let text) = try tape.value(forKey: "title") { return text }
                return "-"
            }
        }
        for format in ["notes.@count >= 2", "notes.@count == 0", "notes.@count == 1 AND minutes > 90"] {
            var request = FetchRequest(entityName: "Tape")
            request.predicate = try FetchPredicate(format: format)
            let expected = try titles(request, reference).sorted()
            #expect(!expected.isEmpty, "\(format) decides between tapes")
            #expect(try titles(request, strata).sorted() == expected, "\(format)")
            #expect(try ManagedObjectContext(persistentStoreCoordinator: strata).count(for: request) == expected.count, "\(format)")
        }
        var sorted = FetchRequest(entityName: "Tape")
        sorted.sortDescriptors = [FetchSortDescriptor(keyPath: "notes.@count", ascending: false), FetchSortDescriptor(keyPath: "title")]
        sorted.fetchLimit = 40
        #expect(try titles(sorted, strata) == titles(sorted, reference))
    }

    /// A member that moves to another owner, or leaves, in a later save is grouped under its
    /// new owner: the scan reads the snapshot the fetch reads.
    @Test func groupedMembersFollowSavedMoves() throws {
        let store = TemporaryStore()
        let (reference, strata) = try store.referenceAndStrata(model: try Self.model(), populate: Self.populate)
        for coordinator in [reference, strata] {
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            var tapes = FetchRequest(entityName: "Tape")
            tapes.predicate = try FetchPredicate(format: "minutes < 30")
            let short = try context.fetch(tapes)
            let shelves = try context.fetch(FetchRequest(entityName: "Shelf"))
            let last = try #require(shelves.first { (try? $0.value(forKey: "label")) == .string("shelf 29") })
            for (position, tape) in short.enumerated() {
                if position % 2 == 0 { try tape.setValue(last, forKey: "shelf") } else { try tape.setValue(.null, forKey: "shelf") }
            }
            try context.save()
        }
        for format in ["ALL tapes.minutes >= 30", "ANY tapes.minutes < 30", "tapes.@min.minutes < 30", "NONE tapes.minutes < 30"] {
            var request = FetchRequest(entityName: "Shelf")
            request.predicate = try FetchPredicate(format: format)
            #expect(try Self.labels(request, strata).sorted() == Self.labels(request, reference).sorted(), "\(format)")
        }
    }
}

/// [FETCH-S12] Comparisons of a relationship with objects (`album == %@`, `album IN %@`,
/// `ANY playlists == %@`, `playlists CONTAINS %@`, `%@ IN playlists`), answered from the
/// objects' relationship keys: every result type, with other conjuncts, sorts and limits, and
/// objects that match nothing (a temporary ID, a deleted object, an object of another entity
/// or store), as the InMemoryStore answers them.
@Suite struct ObjectComparisonTests {
    /// The object of `entity` whose `key` is `value` in `context`.
    static func object(_ entity: String, _ key: String, _ value: String, in context: ManagedObjectContext) throws -> ManagedObject {
        var request = FetchRequest(entityName: entity)
        request.predicate = try FetchPredicate(format: "%K == %@", key, value)
        return try #require(try context.fetch(request).first)
    }

    /// The cases, as a format and the objects filling it, found in each store's context.
    static let cases: [(entity: String, format: String, arguments: [(entity: String, key: String, value: String)])] = [
        ("Track", "album == %@", [("Album", "title", "album 7")]),
        ("Track", "album IN %@", [("Album", "title", "album 7"), ("Album", "title", "album 30"), ("Album", "title", "album 39")]),
        ("Track", "album == %@ AND length > 150", [("Album", "title", "album 12")]),
        ("Track", "genre == %@ OR album == %@", [("Genre", "name", "Blues"), ("Album", "title", "album 3")]),
        ("Track", "ANY playlists == %@", [("Playlist", "name", "list 2")]),
        ("Track", "playlists CONTAINS %@", [("Playlist", "name", "list 1")]),
        ("Track", "%@ IN playlists", [("Playlist", "name", "list 3")]),
        ("Track", "ANY playlists IN %@", [("Playlist", "name", "list 0"), ("Playlist", "name", "list 3")]),
        ("Track", "NOT (ANY playlists == %@)", [("Playlist", "name", "list 0")]),
        ("Album", "ANY tracks == %@", [("Track", "name", "Angel 10")]),
        ("Playlist", "ANY tracks == %@", [("Track", "name", "blue 26")]),
        ("Track", "album == %@", [("Album", "title", "album 38")]),
        ("Track", "genre != %@", [("Genre", "name", "Rock")]),
        ("Track", "genre != %@ AND album == %@", [("Genre", "name", "Jazz"), ("Album", "title", "album 4")]),
    ]

    static func names(_ request: FetchRequest, _ context: ManagedObjectContext) throws -> [String] {
        let key = ["Album": "title"][request.entityName] ?? "name"
        return try context.fetch(request).map { object in
            if case .string(let text) = try object.value(forKey: key) { return text }
            return "-"
        }
    }

    @Test(arguments: 0..<14)
    func objectComparisonsMatchTheInMemoryStore(case index: Int) throws {
        let store = TemporaryStore()
        let (reference, strata) = try store.referenceAndStrata(model: try ToManyQuantifierTests.model(), populate: ToManyQuantifierTests.populate)
        let (entity, format, arguments) = Self.cases[index]
        func request(in context: ManagedObjectContext) throws -> FetchRequest {
            let objects = try arguments.map { try Self.object($0.entity, $0.key, $0.value, in: context) }
            var request = FetchRequest(entityName: entity)
            // `IN` takes the objects as one list; every other format one object per `%@`.
            if format.contains("IN %@") {
                request.predicate = try FetchPredicate(format: format, argumentArray: [objects.map(\.objectID)])
            } else {
                request.predicate = try FetchPredicate(format: format, argumentArray: objects.map(\.objectID))
            }
            return request
        }
        let expectedContext = ManagedObjectContext(persistentStoreCoordinator: reference)
        let strataContext = ManagedObjectContext(persistentStoreCoordinator: strata)
        var expectedRequest = try request(in: expectedContext)
        var strataRequest = try request(in: strataContext)
        let expected = try Self.names(expectedRequest, expectedContext).sorted()
        #expect(try Self.names(strataRequest, strataContext).sorted() == expected, "\(entity) \(format)")
        #expect(try strataContext.count(for: strataRequest) == expected.count, "count of \(entity) \(format)")
        #expect(try strataContext.fetchObjectIDs(strataRequest).count == expected.count, "IDs of \(entity) \(format)")
        let key = entity == "Album" ? "title" : "name"
        expectedRequest.sortDescriptors = [FetchSortDescriptor(keyPath: key, ascending: false)]
        strataRequest.sortDescriptors = expectedRequest.sortDescriptors
        expectedRequest.fetchLimit = 4
        strataRequest.fetchLimit = 4
        #expect(try Self.names(strataRequest, strataContext) == Self.names(expectedRequest, expectedContext), "\(format) sorted, limit 4")
    }

    /// Objects that no stored row points at: a temporary ID (the object is not saved), a
    /// deleted object (its row is gone; rows whose to-one it was were nullified), an object
    /// of another store; and an object of another entity than the relationship's destination.
    @Test func objectsNoRowPointsAtMatchNothing() throws {
        let model = try ToManyQuantifierTests.model()
        let store = TemporaryStore()
        let strata = try store.coordinator(model: model)
        try ToManyQuantifierTests.populate(strata)
        let other = TemporaryStore()
        let otherCoordinator = try other.coordinator(model: model)
        try ToManyQuantifierTests.populate(otherCoordinator)
        let context = ManagedObjectContext(persistentStoreCoordinator: strata)
        let unsaved = try context.insertNewObject(forEntityName: "Album")
        let foreign = try Self.object("Album", "title", "album 7", in: ManagedObjectContext(persistentStoreCoordinator: otherCoordinator))
        let genre = try Self.object("Genre", "name", "Jazz", in: context)
        var tracks = FetchRequest(entityName: "Track")
        for id in [foreign.objectID, genre.objectID] {
            tracks.predicate = try FetchPredicate(format: "album == %@", id)
            #expect(try context.fetch(tracks).isEmpty, "album == \(id)")
            #expect(try context.count(for: tracks) == 0)
        }
        // An unsaved album: the context's own evaluation sees its pending tracks (none).
        tracks.predicate = try FetchPredicate(format: "album == %@", unsaved.objectID)
        #expect(try context.fetch(tracks).isEmpty)
        // A deleted album, saved: its tracks no longer point at it (nullify), so nothing matches.
        let doomed = try Self.object("Album", "title", "album 5", in: context)
        let doomedID = doomed.objectID
        context.delete(doomed)
        context.delete(unsaved)
        try context.save()
        let fresh = ManagedObjectContext(persistentStoreCoordinator: strata)
        tracks.predicate = try FetchPredicate(format: "album == %@", doomedID)
        #expect(try fresh.fetch(tracks).isEmpty)
        #expect(try fresh.count(for: tracks) == 0)
        tracks.predicate = try FetchPredicate(format: "album IN %@", [doomedID, try Self.object("Album", "title", "album 6", in: fresh).objectID])
        #expect(try fresh.count(for: tracks) == 300 / 36 + (6 < 300 % 36 ? 1 : 0))
    }
}

/// [FETCH-S13] `SELF IN %@` and `SELF == %@`: the objects' rows are read by reference, and
/// the answers are the InMemoryStore's, with objects of other entities, other stores,
/// temporary and deleted ones among them, other conjuncts, sorts, limits and counts.
@Suite struct SelfComparisonTests {
    @Test func selfComparisonsMatchTheInMemoryStore() throws {
        let model = try ToManyQuantifierTests.model()
        let store = TemporaryStore()
        let (reference, strata) = try store.referenceAndStrata(model: model, populate: ToManyQuantifierTests.populate)
        let other = TemporaryStore()
        let otherCoordinator = try other.coordinator(model: model)
        try ToManyQuantifierTests.populate(otherCoordinator)
        let foreign = try ObjectComparisonTests.object("Track", "name", "echo 9", in: ManagedObjectContext(persistentStoreCoordinator: otherCoordinator))
        var deleted: [ObjectIdentifier: ManagedObjectID] = [:]
        for coordinator in [reference, strata] {
            // One saved delete in each store: its ID goes in the list.
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            let doomed = try ObjectComparisonTests.object("Track", "name", "Alone 12", in: context)
            deleted[ObjectIdentifier(coordinator)] = doomed.objectID
            context.delete(doomed)
            try context.save()
        }
        func answers(_ coordinator: PersistentStoreCoordinator) throws -> [[String]] {
            let context = ManagedObjectContext(persistentStoreCoordinator: coordinator)
            let all = try context.fetch(FetchRequest(entityName: "Track"))
            let picks = stride(from: 3, to: all.count, by: 17).map { all[$0].objectID }
            let album = try ObjectComparisonTests.object("Album", "title", "album 9", in: context).objectID
            let unsaved = try context.insertNewObject(forEntityName: "Track").objectID
            let gone = try #require(deleted[ObjectIdentifier(coordinator)])
            let list = picks + picks.prefix(3) + [album, unsaved, foreign.objectID, gone]
            var results: [[String]] = []
            for (format, arguments) in [
                ("SELF IN %@", [list] as [any FetchArgument]),
                ("SELF IN %@ AND length > 150", [list]),
                ("SELF == %@", [picks[4]]),
                ("SELF IN %@ OR name BEGINSWITH 'Z'", [list]),
            ] {
                var request = FetchRequest(entityName: "Track")
                request.predicate = try FetchPredicate(format: format, argumentArray: arguments)
                results.append(try ObjectComparisonTests.names(request, context).sorted())
                results.append([String(try context.count(for: request))])
                request.sortDescriptors = [FetchSortDescriptor(keyPath: "length", ascending: false), FetchSortDescriptor(keyPath: "name")]
                request.fetchLimit = 5
                results.append(try ObjectComparisonTests.names(request, context))
            }
            return results
        }
        let expected = try answers(reference)
        #expect(expected[0].count > 10)
        #expect(try answers(strata) == expected)
    }
}

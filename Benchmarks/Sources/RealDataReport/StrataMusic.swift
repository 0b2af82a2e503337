import BenchmarkSupport
import Foundation
import Strata

/// The music store in a StrataStore, used the way an app uses Core Data: one coordinator,
/// a context per unit of work, fetch requests with format-string predicates.
///
/// Not `Sendable`: it stays on the thread that made it.
final class StrataMusic {
    /// The Core Data model of ``MusicData``: 11 entities, with inverses on every relationship.
    static func model() throws -> ManagedObjectModel {
        try ManagedObjectModel(entities: [
            EntityDescription(name: "Artist", properties: [
                .attribute("name", .string, indexed: true),
                .toMany("albums", "Album", inverse: "artist"),
            ]),
            EntityDescription(name: "Album", properties: [
                .attribute("title", .string),
                .toOne("artist", "Artist", inverse: "albums"),
                .toMany("tracks", "Track", inverse: "album"),
            ]),
            EntityDescription(name: "Track", properties: [
                .attribute("name", .string),
                .attribute("milliseconds", .integer64),
                .attribute("bytes", .integer64),
                .attribute("unitPrice", .double),
                .attribute("composer", .string),
                .toOne("album", "Album", inverse: "tracks"),
                .toOne("genre", "Genre", inverse: "tracks"),
                .toOne("mediaType", "MediaType", inverse: "tracks"),
                .toMany("playlists", "Playlist", inverse: "tracks"),
                .toMany("invoiceLines", "InvoiceLine", inverse: "track"),
            ]),
            EntityDescription(name: "Genre", properties: [
                .attribute("name", .string, indexed: true),
                .toMany("tracks", "Track", inverse: "genre"),
            ]),
            EntityDescription(name: "MediaType", properties: [
                .attribute("name", .string),
                .toMany("tracks", "Track", inverse: "mediaType"),
            ]),
            EntityDescription(name: "Playlist", properties: [
                .attribute("name", .string),
                .toMany("tracks", "Track", inverse: "playlists"),
            ]),
            EntityDescription(name: "Employee", properties: [
                .attribute("firstName", .string),
                .attribute("lastName", .string),
                .attribute("title", .string),
                .attribute("city", .string),
                .toOne("reportsTo", "Employee", inverse: "reports"),
                .toMany("reports", "Employee", inverse: "reportsTo"),
                .toMany("customers", "Customer", inverse: "supportRep"),
            ]),
            EntityDescription(name: "Customer", properties: [
                .attribute("firstName", .string),
                .attribute("lastName", .string),
                .attribute("country", .string, indexed: true),
                .attribute("city", .string),
                .attribute("email", .string),
                .toOne("supportRep", "Employee", inverse: "customers"),
                .toMany("invoices", "Invoice", inverse: "customer"),
            ]),
            EntityDescription(name: "Invoice", properties: [
                .attribute("invoiceDate", .date),
                .attribute("total", .double),
                .attribute("billingCountry", .string),
                .toOne("customer", "Customer", inverse: "invoices"),
                .toMany("lines", "InvoiceLine", inverse: "invoice"),
            ]),
            EntityDescription(name: "InvoiceLine", properties: [
                .attribute("unitPrice", .double),
                .attribute("quantity", .integer16),
                .toOne("invoice", "Invoice", inverse: "lines"),
                .toOne("track", "Track", inverse: "invoiceLines"),
            ]),
        ])
    }

    private let coordinator: PersistentStoreCoordinator
    private let store: PersistentStore
    /// The IDs of ``Query/album`` and ``Query/genre``, kept from the insert (an app holds the
    /// parent object whose children it fetches).
    private var albumID: ManagedObjectID?
    private var genreID: ManagedObjectID?
    private var albumIDs: [ManagedObjectID] = []
    private var artistID: ManagedObjectID?
    private var playlistID: ManagedObjectID?
    private var trackIDs: [ManagedObjectID] = []
    private var employeeID: ManagedObjectID?

    /// Creates a StrataStore at `path` (durability normal).
    init(path: String) throws {
        StrataStore.register()
        coordinator = PersistentStoreCoordinator(managedObjectModel: try Self.model())
        store = try coordinator.addPersistentStore(
            type: .strata, at: URL(fileURLWithPath: path), options: [StrataStore.durabilityOption: .string("normal")])
    }

    /// A new context: nothing registered, so every fetch goes to the store.
    func freshContext() -> ManagedObjectContext { ManagedObjectContext(persistentStoreCoordinator: coordinator) }

    /// Writes the engine's log out as compressed segments and compacts them, so that fetches
    /// read segment blocks as in a store that has been open a while.
    func flushToSegments() throws {
        guard let engine = (store as? StrataStore)?.storageEngine else { throw BenchmarkError("the store has no engine") }
        try engine.flush()
        try engine.compact()
    }

    /// Closes the store.
    func close() throws { try coordinator.remove(store) }

    /// Inserts every record of `data` with its relationships and saves once.
    func insert(_ data: MusicData) throws {
        let context = freshContext()
        func make(_ entity: String, _ values: [String: AttributeValue]) throws -> ManagedObject {
            let object = try context.insertNewObject(forEntityName: entity)
            for (key, value) in values { try object.setValue(value, forKey: key) }
            return object
        }
        let genres = try data.genres.map { try make("Genre", ["name": .string($0)]) }
        let mediaTypes = try data.mediaTypes.map { try make("MediaType", ["name": .string($0)]) }
        let artists = try data.artists.map { try make("Artist", ["name": .string($0.name)]) }
        let albums = try data.albums.map { album in
            let object = try make("Album", ["title": .string(album.title)])
            try object.setValue(artists[album.artist], forKey: "artist")
            return object
        }
        let tracks = try data.tracks.map { track in
            let object = try make("Track", [
                "name": .string(track.name), "milliseconds": .int64(track.milliseconds), "bytes": .int64(track.bytes),
                "unitPrice": .double(track.unitPrice), "composer": track.composer.map(AttributeValue.string) ?? .null,
            ])
            try object.setValue(albums[track.album], forKey: "album")
            try object.setValue(genres[track.genre], forKey: "genre")
            try object.setValue(mediaTypes[track.mediaType], forKey: "mediaType")
            return object
        }
        var playlists: [ManagedObject] = []
        for playlist in data.playlists {
            let object = try make("Playlist", ["name": .string(playlist.name)])
            try object.setValue(playlist.tracks.map { tracks[$0] }, forKey: "tracks")
            playlists.append(object)
        }
        let employees = try data.employees.map { employee in
            try make("Employee", [
                "firstName": .string(employee.firstName), "lastName": .string(employee.lastName),
                "title": .string(employee.title), "city": .string(employee.city),
            ])
        }
        for (index, employee) in data.employees.enumerated() {
            if let boss = employee.reportsTo { try employees[index].setValue(employees[boss], forKey: "reportsTo") }
        }
        let customers = try data.customers.map { customer in
            let object = try make("Customer", [
                "firstName": .string(customer.firstName), "lastName": .string(customer.lastName),
                "country": .string(customer.country), "city": .string(customer.city), "email": .string(customer.email),
            ])
            try object.setValue(employees[customer.supportRep], forKey: "supportRep")
            return object
        }
        let invoices = try data.invoices.map { invoice in
            let object = try make("Invoice", [
                "invoiceDate": .date(invoice.date), "total": .double(invoice.total),
                "billingCountry": .string(invoice.billingCountry),
            ])
            try object.setValue(customers[invoice.customer], forKey: "customer")
            return object
        }
        for line in data.invoiceLines {
            let object = try make("InvoiceLine", ["unitPrice": .double(line.unitPrice), "quantity": .int16(line.quantity)])
            try object.setValue(invoices[line.invoice], forKey: "invoice")
            try object.setValue(tracks[line.track], forKey: "track")
        }
        try context.save()
        albumID = albums[Query.album].objectID
        genreID = genres[Query.genre].objectID
        albumIDs = Query.albums.map { albums[$0].objectID }
        artistID = artists[data.albums[Query.album].artist].objectID
        playlistID = playlists[Query.playlist].objectID
        trackIDs = Query.trackIDs.map { tracks[$0].objectID }
        employeeID = employees[3].objectID
    }

    // MARK: Fetches

    /// `query`'s answer, fetched through a new context.
    func answer(_ query: Query) throws -> [String] {
        let context = freshContext()
        switch query {
        case .countTracks:
            return [String(try context.count(for: FetchRequest(entityName: "Track")))]
        case .artistByName:
            return try strings(context, "Artist", "name", "name == %@", Query.artist)
        case .tracksOfArtist:
            return try strings(context, "Track", "name", "album.artist.name == %@", Query.artist).sorted()
        case .tracksOfGenre:
            return try strings(context, "Track", "name", "genre.name == %@", "Jazz").sorted()
        case .sortByGenreLimit:
            var request = FetchRequest(entityName: "Track")
            request.sortDescriptors = [
                FetchSortDescriptor(keyPath: "genre.name"), FetchSortDescriptor(keyPath: "name", ascending: false),
            ]
            request.fetchLimit = 50
            return try context.fetch(request).map { track in
                "\(try string(track.value(forKeyPath: "genre.name").attributeValue)) | \(try string(track.value(forKey: "name")))"
            }
        case .countComposerNil:
            var request = FetchRequest(entityName: "Track")
            request.predicate = try FetchPredicate(format: "composer == nil")
            return [String(try context.count(for: request))]
        case .fetchComposerNil:
            return try strings(context, "Track", "name", "composer == nil").sorted()
        case .distinctCountries:
            var request = FetchRequest(entityName: "Customer")
            request.resultType = .dictionary
            request.propertiesToFetch = ["country"]
            request.returnsDistinctResults = true
            return try context.fetchDictionaries(request).map { try string($0["country"]?.attributeValue) }.sorted()
        case .totalsPerCountry:
            var request = FetchRequest(entityName: "Invoice")
            request.resultType = .dictionary
            request.propertiesToFetch = ["customer.country", .aggregate(.sum, of: "total", as: "sum", type: .double)]
            request.propertiesToGroupBy = ["customer.country"]
            return try context.fetchDictionaries(request).map { row in
                "\(try string(row["customer.country"]?.attributeValue)) \(cents(row["sum"]?.attributeValue?.doubleValue))"
            }.sorted()
        case .quantityPerGenre:
            var request = FetchRequest(entityName: "InvoiceLine")
            request.resultType = .dictionary
            request.propertiesToFetch = ["track.genre.name", .aggregate(.sum, of: "quantity", as: "sum", type: .integer64)]
            request.propertiesToGroupBy = ["track.genre.name"]
            return try context.fetchDictionaries(request).map { row in
                "\(try string(row["track.genre.name"]?.attributeValue)) \(Int(row["sum"]?.attributeValue?.doubleValue ?? -1))"
            }.sorted()
        case .playlistsAnyRock:
            return try strings(context, "Playlist", "name", "ANY tracks.genre.name == %@", "Rock").sorted()
        case .tracksInPlaylist:
            var request = FetchRequest(entityName: "Track")
            request.predicate = try FetchPredicate(format: "ANY playlists.name == %@", "Grunge")
            return [String(try context.count(for: request))]
        case .albumsAllLong:
            return try strings(context, "Album", "title", "ALL tracks.milliseconds > 60000").sorted()
        case .artistsNoneA:
            return try strings(context, "Artist", "name", "NONE albums.title BEGINSWITH %@", "A").sorted()
        case .albumsManyTracks:
            return try strings(context, "Album", "title", "tracks.@count > 15").sorted()
        case .artistsManyAlbums:
            return try strings(context, "Artist", "name", "albums.@count >= 4").sorted()
        case .artistsByAlbumCount:
            var request = FetchRequest(entityName: "Artist")
            request.sortDescriptors = [
                FetchSortDescriptor(keyPath: "albums.@count", ascending: false), FetchSortDescriptor(keyPath: "name"),
            ]
            request.fetchLimit = 10
            return try context.fetch(request).map { try string($0.value(forKey: "name")) }
        case .albumsLongAverage:
            return try strings(context, "Album", "title", "tracks.@avg.milliseconds > 300000").sorted()
        case .likeLove:
            return try strings(context, "Track", "name", "name LIKE %@", "*love*").sorted()
        case .likeLoveCaseInsensitive:
            return try strings(context, "Track", "name", "name LIKE[c] %@", "*love*").sorted()
        case .gmailMatches:
            return try strings(context, "Customer", "email", "email MATCHES %@", ".*@gmail\\.com").sorted()
        case .customersOfCountry:
            var request = FetchRequest(entityName: "Customer")
            request.predicate = try FetchPredicate(format: "country == %@", "Brazil")
            request.sortDescriptors = [FetchSortDescriptor(keyPath: "email")]
            return try context.fetch(request).map { try string($0.value(forKey: "email")) }
        case .priceSortedLimit:
            var request = FetchRequest(entityName: "Track")
            request.predicate = try FetchPredicate(format: "unitPrice > 0.99")
            request.sortDescriptors = [FetchSortDescriptor(keyPath: "name")]
            request.fetchLimit = 100
            return try context.fetch(request).map { try string($0.value(forKey: "name")) }
        case .invoicesInYear:
            var request = FetchRequest(entityName: "Invoice")
            request.predicate = try FetchPredicate(
                format: "invoiceDate >= %@ AND invoiceDate < %@", Query.yearStart, Query.yearEnd)
            request.sortDescriptors = [FetchSortDescriptor(keyPath: "total", ascending: false)]
            request.fetchLimit = 10
            return try context.fetch(request).map { cents(try $0.value(forKey: "total").doubleValue) }
        case .tracksOfAlbumObject:
            guard let albumID else { throw BenchmarkError("no album inserted") }
            return try strings(context, "Track", "name", "album == %@", albumID).sorted()
        case .countTracksOfGenreObject:
            guard let genreID else { throw BenchmarkError("no genre inserted") }
            var request = FetchRequest(entityName: "Track")
            request.predicate = try FetchPredicate(format: "genre == %@", genreID)
            return [String(try context.count(for: request))]
        case .tracksOfAlbumsIn:
            return try strings(context, "Track", "name", "album IN %@", albumIDs).sorted()
        case .tracksOfArtistObject:
            guard let artistID else { throw BenchmarkError("no artist inserted") }
            return try strings(context, "Track", "name", "album.artist == %@", artistID).sorted()
        case .tracksOfPlaylistObject:
            guard let playlistID else { throw BenchmarkError("no playlist inserted") }
            return try strings(context, "Track", "name", "ANY playlists == %@", playlistID).sorted()
        case .albumTracksByName:
            guard let albumID else { throw BenchmarkError("no album inserted") }
            var request = FetchRequest(entityName: "Track")
            request.predicate = try FetchPredicate(format: "album == %@", albumID)
            request.sortDescriptors = [FetchSortDescriptor(keyPath: "name")]
            return try context.fetch(request).map { try string($0.value(forKey: "name")) }
        case .tracksPageByName:
            var request = FetchRequest(entityName: "Track")
            request.sortDescriptors = [FetchSortDescriptor(keyPath: "name")]
            request.fetchOffset = 100
            request.fetchLimit = 25
            return try context.fetch(request).map { try string($0.value(forKey: "name")) }
        case .genresByName:
            var request = FetchRequest(entityName: "Genre")
            request.sortDescriptors = [FetchSortDescriptor(keyPath: "name")]
            return try context.fetch(request).map { try string($0.value(forKey: "name")) }
        case .tracksBetween:
            return try strings(context, "Track", "name", "milliseconds BETWEEN %@", [200_000, 210_000]).sorted()
        case .tracksByIDs:
            return try strings(context, "Track", "name", "SELF IN %@", trackIDs).sorted()
        case .tracksWithoutPlaylist:
            return try strings(context, "Track", "name", "playlists.@count == 0").sorted()
        case .tracksOfGenresIn:
            return try strings(context, "Track", "name", "genre.name IN %@", ["Rock", "Jazz"]).sorted()
        case .trackColumns:
            var request = FetchRequest(entityName: "Track")
            request.resultType = .dictionary
            request.propertiesToFetch = ["name", "milliseconds"]
            return try context.fetchDictionaries(request).map { row in
                "\(try string(row["name"]?.attributeValue)) \(row["milliseconds"]?.attributeValue?.doubleValue.map { String(Int($0)) } ?? "nil")"
            }.sorted()
        case .tracksWithAlbumsPrefetched:
            var request = FetchRequest(entityName: "Track")
            request.predicate = try FetchPredicate(format: "genre.name == %@", "Jazz")
            request.relationshipKeyPathsForPrefetching = ["album"]
            return try context.fetch(request).map { track in
                "\(try string(track.value(forKey: "name"))) | \(try string(track.value(forKeyPath: "album.title").attributeValue))"
            }.sorted()
        case .distinctComposers:
            var request = FetchRequest(entityName: "Track")
            request.resultType = .dictionary
            request.propertiesToFetch = ["composer"]
            request.returnsDistinctResults = true
            request.predicate = try FetchPredicate(format: "composer != nil")
            return try context.fetchDictionaries(request).map { try string($0["composer"]?.attributeValue) }.sorted()
        case .totalOfInvoices:
            var request = FetchRequest(entityName: "Invoice")
            request.resultType = .dictionary
            request.propertiesToFetch = [.aggregate(.sum, of: "total", as: "sum", type: .double)]
            return try context.fetchDictionaries(request).map { cents($0["sum"]?.attributeValue?.doubleValue) }
        case .firstTrackNamed:
            var request = FetchRequest(entityName: "Track")
            request.predicate = try FetchPredicate(format: "name BEGINSWITH %@", "Heart")
            request.fetchLimit = 1
            return try context.fetch(request).map { try string($0.value(forKey: "name")) }
        case .tracksByAlbumTitle:
            var request = FetchRequest(entityName: "Track")
            request.sortDescriptors = [FetchSortDescriptor(keyPath: "album.title"), FetchSortDescriptor(keyPath: "name")]
            request.fetchLimit = 20
            return try context.fetch(request).map { try string($0.value(forKey: "name")) }
        case .recentInvoices:
            var request = FetchRequest(entityName: "Invoice")
            request.sortDescriptors = [FetchSortDescriptor(keyPath: "invoiceDate", ascending: false)]
            request.fetchLimit = 20
            return try context.fetch(request).map { cents(try $0.value(forKey: "total").doubleValue) }
        case .tracksNotOfGenre:
            guard let genreID else { throw BenchmarkError("no genre inserted") }
            var request = FetchRequest(entityName: "Track")
            request.predicate = try FetchPredicate(format: "genre != %@", genreID)
            return [String(try context.count(for: request))]
        case .tracksWithoutAlbumCount:
            var request = FetchRequest(entityName: "Track")
            request.predicate = try FetchPredicate(format: "album == nil")
            return [String(try context.count(for: request))]
        case .albumsSubquery:
            return try strings(context, "Album", "title", "SUBQUERY(tracks, $t, $t.milliseconds > 300000).@count >= 3").sorted()
        case .customersInvoiceSum:
            return try strings(context, "Customer", "email", "invoices.@sum.total > 40").sorted()
        case .invoicesOfRep:
            guard let employeeID else { throw BenchmarkError("no employee inserted") }
            var request = FetchRequest(entityName: "Invoice")
            request.predicate = try FetchPredicate(format: "customer.supportRep == %@", employeeID)
            return try context.fetch(request).map { cents(try $0.value(forKey: "total").doubleValue) }.sorted()
        case .containsLove:
            return try strings(context, "Track", "name", "name CONTAINS[cd] %@", "love").sorted()
        case .beginsWithA:
            return try strings(context, "Track", "name", "name BEGINSWITH[c] %@", "a").sorted()
        case .countContainsLove:
            var request = FetchRequest(entityName: "Track")
            request.predicate = try FetchPredicate(format: "name CONTAINS[c] %@", "love")
            return [String(try context.count(for: request))]
        case .tracksFirstBatch:
            // A table of tracks by name: the fetch materialises the first batch, the screen
            // shows it.
            var request = FetchRequest(entityName: "Track")
            request.sortDescriptors = [FetchSortDescriptor(keyPath: "name")]
            request.fetchBatchSize = 20
            return try context.fetch(request).prefix(20).map { try string($0.value(forKey: "name")) }
        case .artistAlbumTitles:
            var request = FetchRequest(entityName: "Artist")
            request.predicate = try FetchPredicate(format: "name == %@", Query.artist)
            return try context.fetch(request).flatMap { artist in
                try artist.objects(forKey: "albums").map { try string($0.value(forKey: "title")) }
            }.sorted()
        case .rockLongTracks:
            return try strings(context, "Track", "name", "genre.name == %@ AND milliseconds > %@", "Rock", 300_000).sorted()
        case .albumsLoaded:
            var request = FetchRequest(entityName: "Album")
            request.sortDescriptors = [FetchSortDescriptor(keyPath: "title")]
            request.returnsObjectsAsFaults = false
            return try context.fetch(request).map { try string($0.value(forKey: "title")) }
        case .usaInvoicesByDate:
            var request = FetchRequest(entityName: "Invoice")
            request.predicate = try FetchPredicate(format: "billingCountry == %@ AND total > %@", "USA", 5.0)
            request.sortDescriptors = [FetchSortDescriptor(keyPath: "invoiceDate")]
            return try context.fetch(request).map { cents(try $0.value(forKey: "total").doubleValue) }.sorted()
        case .reportsTo:
            var request = FetchRequest(entityName: "Employee")
            request.predicate = try FetchPredicate(format: "reportsTo.lastName == %@", "Edwards")
            return try context.fetch(request).map { employee in
                "\(try string(employee.value(forKey: "firstName"))) \(try string(employee.value(forKey: "lastName")))"
            }.sorted()
        }
    }

    /// The `key` of each `entity` object matching `format`, in the store's order.
    private func strings(
        _ context: ManagedObjectContext, _ entity: String, _ key: String, _ format: String, _ arguments: any FetchArgument...
    ) throws -> [String] {
        var request = FetchRequest(entityName: entity)
        request.predicate = try FetchPredicate(format: format, argumentArray: arguments)
        return try context.fetch(request).map { try string($0.value(forKey: key)) }
    }

    /// `value` as a string; throws when it is not one.
    private func string(_ value: AttributeValue?) throws -> String {
        guard case .string(let text)? = value else { throw BenchmarkError("expected a string, found \(String(describing: value))") }
        return text
    }
}

/// `value` rounded to cents, as text (`"nil"` for no value): sums of doubles added in
/// different orders agree to the cent. The text SQLite's `printf('%.2f', …)` gives for these
/// amounts, made with integer arithmetic: Foundation's `String(format:)` costs ~11k
/// instructions a call on Linux, which would be timed as Strata's (SQLite formats in C).
func cents(_ value: Double?) -> String {
    guard let value else { return "nil" }
    guard value.isFinite, abs(value) < 1e15 else { return String(format: "%.2f", value) }
    let hundredths = Int((abs(value) * 100).rounded())
    let fraction = hundredths % 100
    return (value < 0 && hundredths != 0 ? "-" : "") + String(hundredths / 100) + (fraction < 10 ? ".0" : ".") + String(fraction)
}

import Foundation
import GRDB

/// The music store in SQLite through GRDB, set up as a careful SQLite user would: WAL,
/// synchronous NORMAL, `INTEGER PRIMARY KEY` ids, an index on every foreign key and on the
/// attributes StrataStore indexes (artist.name, genre.name, customer.country), a
/// `WITHOUT ROWID` join table for playlists and tracks, cached statements and `ANALYZE`.
final class SQLiteMusic {
    /// The schema. Row ids are the data set's array indexes plus one.
    static let schema = """
        CREATE TABLE artist (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
        CREATE INDEX artist_name ON artist(name);
        CREATE TABLE album (id INTEGER PRIMARY KEY, title TEXT NOT NULL, artist_id INTEGER REFERENCES artist(id));
        CREATE INDEX album_artist ON album(artist_id);
        CREATE TABLE genre (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
        CREATE INDEX genre_name ON genre(name);
        CREATE TABLE media_type (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
        CREATE TABLE track (
            id INTEGER PRIMARY KEY, name TEXT NOT NULL, milliseconds INTEGER NOT NULL, bytes INTEGER NOT NULL,
            unit_price REAL NOT NULL, composer TEXT,
            album_id INTEGER REFERENCES album(id), genre_id INTEGER REFERENCES genre(id),
            media_type_id INTEGER REFERENCES media_type(id));
        CREATE INDEX track_album ON track(album_id);
        CREATE INDEX track_genre ON track(genre_id);
        CREATE INDEX track_media_type ON track(media_type_id);
        CREATE TABLE playlist (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
        CREATE TABLE playlist_track (
            playlist_id INTEGER NOT NULL REFERENCES playlist(id), track_id INTEGER NOT NULL REFERENCES track(id),
            PRIMARY KEY (playlist_id, track_id)) WITHOUT ROWID;
        CREATE INDEX playlist_track_track ON playlist_track(track_id);
        CREATE TABLE employee (
            id INTEGER PRIMARY KEY, first_name TEXT NOT NULL, last_name TEXT NOT NULL, title TEXT NOT NULL,
            city TEXT NOT NULL, reports_to INTEGER REFERENCES employee(id));
        CREATE INDEX employee_reports_to ON employee(reports_to);
        CREATE TABLE customer (
            id INTEGER PRIMARY KEY, first_name TEXT NOT NULL, last_name TEXT NOT NULL, country TEXT NOT NULL,
            city TEXT NOT NULL, email TEXT NOT NULL, support_rep_id INTEGER REFERENCES employee(id));
        CREATE INDEX customer_country ON customer(country);
        CREATE INDEX customer_support_rep ON customer(support_rep_id);
        CREATE TABLE invoice (
            id INTEGER PRIMARY KEY, invoice_date REAL NOT NULL, total REAL NOT NULL, billing_country TEXT NOT NULL,
            customer_id INTEGER REFERENCES customer(id));
        CREATE INDEX invoice_customer ON invoice(customer_id);
        CREATE TABLE invoice_line (
            id INTEGER PRIMARY KEY, unit_price REAL NOT NULL, quantity INTEGER NOT NULL,
            invoice_id INTEGER REFERENCES invoice(id), track_id INTEGER REFERENCES track(id));
        CREATE INDEX invoice_line_invoice ON invoice_line(invoice_id);
        CREATE INDEX invoice_line_track ON invoice_line(track_id);
        """

    private let queue: DatabaseQueue

    /// Creates the database at `path` with the schema.
    init(path: String) throws {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        queue = try DatabaseQueue(path: path, configuration: configuration)
        try queue.inDatabase { db in
            _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            try db.execute(sql: Self.schema)
        }
    }

    /// Closes the connection.
    func close() throws { try queue.close() }

    /// Inserts every record of `data` in one transaction, then runs `ANALYZE`.
    func insert(_ data: MusicData) throws {
        try queue.inDatabase { db in
            try db.inTransaction {
                func rows(_ sql: String, _ arguments: [StatementArguments]) throws {
                    let statement = try db.makeStatement(sql: sql)
                    for (index, values) in arguments.enumerated() {
                        try statement.execute(arguments: [index + 1] + values)
                    }
                }
                try rows("INSERT INTO genre VALUES (?, ?)", data.genres.map { [$0] })
                try rows("INSERT INTO media_type VALUES (?, ?)", data.mediaTypes.map { [$0] })
                try rows("INSERT INTO artist VALUES (?, ?)", data.artists.map { [$0.name] })
                try rows("INSERT INTO album VALUES (?, ?, ?)", data.albums.map { [$0.title, $0.artist + 1] })
                try rows("INSERT INTO track VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", data.tracks.map {
                    [$0.name, $0.milliseconds, $0.bytes, $0.unitPrice, $0.composer, $0.album + 1, $0.genre + 1, $0.mediaType + 1]
                })
                try rows("INSERT INTO playlist VALUES (?, ?)", data.playlists.map { [$0.name] })
                let member = try db.makeStatement(sql: "INSERT INTO playlist_track VALUES (?, ?)")
                for (index, playlist) in data.playlists.enumerated() {
                    for track in playlist.tracks { try member.execute(arguments: [index + 1, track + 1]) }
                }
                try rows("INSERT INTO employee VALUES (?, ?, ?, ?, ?, ?)", data.employees.map {
                    [$0.firstName, $0.lastName, $0.title, $0.city, $0.reportsTo.map { $0 + 1 }]
                })
                try rows("INSERT INTO customer VALUES (?, ?, ?, ?, ?, ?, ?)", data.customers.map {
                    [$0.firstName, $0.lastName, $0.country, $0.city, $0.email, $0.supportRep + 1]
                })
                try rows("INSERT INTO invoice VALUES (?, ?, ?, ?, ?)", data.invoices.map {
                    [$0.date.timeIntervalSince1970, $0.total, $0.billingCountry, $0.customer + 1]
                })
                try rows("INSERT INTO invoice_line VALUES (?, ?, ?, ?, ?)", data.invoiceLines.map {
                    [$0.unitPrice, $0.quantity, $0.invoice + 1, $0.track + 1]
                })
                return .commit
            }
            try db.execute(sql: "ANALYZE")
        }
    }

    // MARK: Fetches

    /// The SQL of each query; every statement returns one text column, in the answer's order
    /// (the caller sorts the ones whose order is not part of the answer, like Strata's side).
    static func sql(_ query: Query) -> String {
        switch query {
        case .countTracks: return "SELECT COUNT(*) FROM track"
        case .artistByName: return "SELECT name FROM artist WHERE name = '\(Query.artist)'"
        case .tracksOfArtist:
            return """
                SELECT t.name FROM track t JOIN album al ON al.id = t.album_id JOIN artist ar ON ar.id = al.artist_id
                WHERE ar.name = '\(Query.artist)'
                """
        case .tracksOfGenre:
            return "SELECT t.name FROM track t JOIN genre g ON g.id = t.genre_id WHERE g.name = 'Jazz'"
        case .sortByGenreLimit:
            return """
                SELECT g.name || ' | ' || t.name FROM track t LEFT JOIN genre g ON g.id = t.genre_id
                ORDER BY g.name ASC, t.name DESC LIMIT 50
                """
        case .countComposerNil: return "SELECT COUNT(*) FROM track WHERE composer IS NULL"
        case .fetchComposerNil: return "SELECT name FROM track WHERE composer IS NULL"
        case .distinctCountries: return "SELECT DISTINCT country FROM customer"
        case .totalsPerCountry:
            return """
                SELECT c.country || ' ' || printf('%.2f', SUM(i.total)) FROM invoice i
                LEFT JOIN customer c ON c.id = i.customer_id GROUP BY c.country
                """
        case .quantityPerGenre:
            return """
                SELECT g.name || ' ' || SUM(l.quantity) FROM invoice_line l
                LEFT JOIN track t ON t.id = l.track_id LEFT JOIN genre g ON g.id = t.genre_id GROUP BY g.name
                """
        case .playlistsAnyRock:
            return """
                SELECT p.name FROM playlist p WHERE EXISTS (
                    SELECT 1 FROM playlist_track pt JOIN track t ON t.id = pt.track_id JOIN genre g ON g.id = t.genre_id
                    WHERE pt.playlist_id = p.id AND g.name = 'Rock')
                """
        case .tracksInPlaylist:
            // Playlist names are unique, so each track of the playlist counts once.
            return """
                SELECT COUNT(*) FROM playlist_track pt JOIN playlist p ON p.id = pt.playlist_id
                WHERE p.name = 'Grunge'
                """
        case .albumsAllLong:
            return """
                SELECT a.title FROM album a
                WHERE NOT EXISTS (SELECT 1 FROM track t WHERE t.album_id = a.id AND NOT (t.milliseconds > 60000))
                """
        case .artistsNoneA:
            return """
                SELECT ar.name FROM artist ar
                WHERE NOT EXISTS (SELECT 1 FROM album al WHERE al.artist_id = ar.id AND al.title GLOB 'A*')
                """
        case .albumsManyTracks:
            return "SELECT a.title FROM album a WHERE (SELECT COUNT(*) FROM track t WHERE t.album_id = a.id) > 15"
        case .artistsManyAlbums:
            return "SELECT ar.name FROM artist ar WHERE (SELECT COUNT(*) FROM album al WHERE al.artist_id = ar.id) >= 4"
        case .artistsByAlbumCount:
            return """
                SELECT ar.name FROM artist ar
                ORDER BY (SELECT COUNT(*) FROM album al WHERE al.artist_id = ar.id) DESC, ar.name ASC LIMIT 10
                """
        case .albumsLongAverage:
            return """
                SELECT a.title FROM album a
                WHERE (SELECT AVG(t.milliseconds) FROM track t WHERE t.album_id = a.id) > 300000
                """
        case .likeLove: return "SELECT name FROM track WHERE name GLOB '*love*'"
        case .likeLoveCaseInsensitive: return "SELECT name FROM track WHERE name LIKE '%love%'"
        case .gmailMatches: return "SELECT email FROM customer WHERE email GLOB '*@gmail.com'"
        case .customersOfCountry: return "SELECT email FROM customer WHERE country = 'Brazil' ORDER BY email"
        case .priceSortedLimit: return "SELECT name FROM track WHERE unit_price > 0.99 ORDER BY name LIMIT 100"
        case .invoicesInYear:
            return """
                SELECT printf('%.2f', total) FROM invoice
                WHERE invoice_date >= \(Query.yearStart.timeIntervalSince1970) AND invoice_date < \(Query.yearEnd.timeIntervalSince1970)
                ORDER BY total DESC LIMIT 10
                """
        case .tracksOfAlbumObject: return "SELECT name FROM track WHERE album_id = \(Query.album + 1)"
        case .countTracksOfGenreObject: return "SELECT COUNT(*) FROM track WHERE genre_id = \(Query.genre + 1)"
        case .tracksOfAlbumsIn:
            return "SELECT name FROM track WHERE album_id IN (\(Query.albums.map { String($0 + 1) }.joined(separator: ", ")))"
        case .tracksOfArtistObject:
            return """
                SELECT t.name FROM track t JOIN album al ON al.id = t.album_id
                WHERE al.artist_id = (SELECT artist_id FROM album WHERE id = \(Query.album + 1))
                """
        case .tracksOfPlaylistObject:
            return "SELECT t.name FROM playlist_track pt JOIN track t ON t.id = pt.track_id WHERE pt.playlist_id = \(Query.playlist + 1)"
        case .albumTracksByName: return "SELECT name FROM track WHERE album_id = \(Query.album + 1) ORDER BY name"
        case .tracksPageByName: return "SELECT name FROM track ORDER BY name LIMIT 25 OFFSET 100"
        case .genresByName: return "SELECT name FROM genre ORDER BY name"
        case .tracksBetween: return "SELECT name FROM track WHERE milliseconds BETWEEN 200000 AND 210000"
        case .tracksByIDs: return "SELECT name FROM track WHERE id IN (\(Query.trackIDs.map { String($0 + 1) }.joined(separator: ", ")))"
        case .tracksWithoutPlaylist:
            return "SELECT name FROM track t WHERE NOT EXISTS (SELECT 1 FROM playlist_track pt WHERE pt.track_id = t.id)"
        case .tracksOfGenresIn:
            return "SELECT t.name FROM track t JOIN genre g ON g.id = t.genre_id WHERE g.name IN ('Rock', 'Jazz')"
        case .trackColumns: return "SELECT name || ' ' || milliseconds FROM track"
        case .tracksWithAlbumsPrefetched:
            return """
                SELECT t.name || ' | ' || al.title FROM track t JOIN genre g ON g.id = t.genre_id
                JOIN album al ON al.id = t.album_id WHERE g.name = 'Jazz'
                """
        case .distinctComposers: return "SELECT DISTINCT composer FROM track WHERE composer IS NOT NULL"
        case .totalOfInvoices: return "SELECT printf('%.2f', SUM(total)) FROM invoice"
        case .firstTrackNamed: return "SELECT name FROM track WHERE name GLOB 'Heart*' ORDER BY id LIMIT 1"
        case .tracksByAlbumTitle:
            return "SELECT t.name FROM track t LEFT JOIN album al ON al.id = t.album_id ORDER BY al.title, t.name LIMIT 20"
        case .recentInvoices: return "SELECT printf('%.2f', total) FROM invoice ORDER BY invoice_date DESC LIMIT 20"
        case .albumsSubquery:
            return "SELECT a.title FROM album a WHERE (SELECT COUNT(*) FROM track t WHERE t.album_id = a.id AND t.milliseconds > 300000) >= 3"
        case .customersInvoiceSum:
            return "SELECT c.email FROM customer c WHERE (SELECT SUM(i.total) FROM invoice i WHERE i.customer_id = c.id) > 40"
        case .tracksNotOfGenre: return "SELECT COUNT(*) FROM track WHERE genre_id IS NOT \(Query.genre + 1)"
        case .tracksWithoutAlbumCount: return "SELECT COUNT(*) FROM track WHERE album_id IS NULL"
        case .invoicesOfRep:
            return "SELECT printf('%.2f', i.total) FROM invoice i JOIN customer c ON c.id = i.customer_id WHERE c.support_rep_id = 4"
        case .containsLove: return "SELECT name FROM track WHERE name LIKE '%love%'"
        case .beginsWithA: return "SELECT name FROM track WHERE name LIKE 'a%'"
        case .countContainsLove: return "SELECT COUNT(*) FROM track WHERE name LIKE '%love%'"
        case .tracksFirstBatch: return "SELECT name FROM track ORDER BY name LIMIT 20"
        case .artistAlbumTitles:
            return "SELECT al.title FROM album al JOIN artist ar ON ar.id = al.artist_id WHERE ar.name = '\(Query.artist)'"
        case .rockLongTracks:
            return "SELECT t.name FROM track t JOIN genre g ON g.id = t.genre_id WHERE g.name = 'Rock' AND t.milliseconds > 300000"
        case .albumsLoaded: return "SELECT title FROM album ORDER BY title"
        case .usaInvoicesByDate:
            return "SELECT printf('%.2f', total) FROM invoice WHERE billing_country = 'USA' AND total > 5 ORDER BY invoice_date"
        case .reportsTo:
            return """
                SELECT e.first_name || ' ' || e.last_name FROM employee e JOIN employee m ON m.id = e.reports_to
                WHERE m.last_name = 'Edwards'
                """
        }
    }

    /// `query`'s answer (a cached statement; one text column per row).
    func answer(_ query: Query) throws -> [String] {
        let rows = try queue.inDatabase { db in try String.fetchAll(db.cachedStatement(sql: Self.sql(query))) }
        return query.ordered ? rows : rows.sorted()
    }
}

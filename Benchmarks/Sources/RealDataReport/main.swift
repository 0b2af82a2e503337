// realdata-report: everyday Core Data fetches on a realistic relational data set (a music
// store shaped like the Chinook sample, about 15k records), StrataStore beside SQLite
// through GRDB, with every answer cross-checked. See Benchmarks/README.md.

import BenchmarkSupport
import Foundation
import Glibc

/// One fetch of the report: a predicate (or sort, or aggregate) as an app writes it. Both
/// systems answer it as an array of strings, which must be equal.
enum Query: String, CaseIterable {
    case countTracks, artistByName, tracksOfArtist, tracksOfGenre, sortByGenreLimit
    case countComposerNil, fetchComposerNil, distinctCountries, totalsPerCountry, quantityPerGenre
    case playlistsAnyRock, tracksInPlaylist, albumsAllLong, artistsNoneA
    case albumsManyTracks, artistsManyAlbums, artistsByAlbumCount, albumsLongAverage
    case likeLove, likeLoveCaseInsensitive, gmailMatches
    case customersOfCountry, priceSortedLimit, invoicesInYear, reportsTo
    case tracksOfAlbumObject, countTracksOfGenreObject, tracksOfAlbumsIn, tracksOfArtistObject, tracksOfPlaylistObject
    case albumTracksByName, tracksPageByName, genresByName, tracksBetween
    case tracksByIDs, tracksWithoutPlaylist, tracksOfGenresIn, trackColumns
    case tracksWithAlbumsPrefetched, distinctComposers, totalOfInvoices, firstTrackNamed, tracksByAlbumTitle, recentInvoices
    case albumsSubquery, customersInvoiceSum, invoicesOfRep
    case tracksNotOfGenre, tracksWithoutAlbumCount
    case containsLove, beginsWithA, countContainsLove, tracksFirstBatch, artistAlbumTitles, rockLongTracks
    case albumsLoaded, usaInvoicesByDate

    /// An artist that exists and has albums.
    static let artist = "Black Sabbath"
    /// The album (by position in ``MusicData/albums``) of ``tracksOfAlbumObject``.
    static let album = 42
    /// The genre (by position in ``MusicData/genres``) of ``countTracksOfGenreObject``.
    static let genre = 1
    /// The albums of ``tracksOfAlbumsIn`` and the playlist of ``tracksOfPlaylistObject`` (by
    /// position); ``tracksOfArtistObject`` reads the artist of ``album``.
    static let albums = [40, 41, 42]
    static let playlist = 3
    /// The tracks (by position) of ``tracksByIDs``.
    static let trackIDs = stride(from: 5, to: 3500, by: 175).map { $0 }
    /// The year of ``invoicesInYear``: 2012.
    static let yearStart = Date(timeIntervalSince1970: 1_325_376_000)
    static let yearEnd = Date(timeIntervalSince1970: 1_356_998_400)

    /// The fetch in Core Data's words.
    var label: String {
        switch self {
        case .countTracks: return "count Track"
        case .artistByName: return "Artist name == '\(Self.artist)' (indexed)"
        case .tracksOfArtist: return "Track album.artist.name == '\(Self.artist)'"
        case .tracksOfGenre: return "Track genre.name == 'Jazz'"
        case .sortByGenreLimit: return "Track by genre.name, name desc; limit 50"
        case .countComposerNil: return "count Track composer == nil"
        case .fetchComposerNil: return "Track composer == nil"
        case .distinctCountries: return "distinct Customer.country (dictionary)"
        case .totalsPerCountry: return "sum Invoice.total by customer.country"
        case .quantityPerGenre: return "sum InvoiceLine.quantity by track.genre.name"
        case .playlistsAnyRock: return "Playlist ANY tracks.genre.name == 'Rock'"
        case .tracksInPlaylist: return "count Track ANY playlists.name == 'Grunge'"
        case .albumsAllLong: return "Album ALL tracks.milliseconds > 60000"
        case .artistsNoneA: return "Artist NONE albums.title BEGINSWITH 'A'"
        case .albumsManyTracks: return "Album tracks.@count > 15"
        case .artistsManyAlbums: return "Artist albums.@count >= 4"
        case .artistsByAlbumCount: return "Artist by albums.@count desc, name; limit 10"
        case .albumsLongAverage: return "Album tracks.@avg.milliseconds > 300000"
        case .likeLove: return "Track name LIKE '*love*'"
        case .likeLoveCaseInsensitive: return "Track name LIKE[c] '*love*'"
        case .gmailMatches: return "Customer email MATCHES '.*@gmail\\.com'"
        case .customersOfCountry: return "Customer country == 'Brazil' by email"
        case .priceSortedLimit: return "Track unitPrice > 0.99 by name; limit 100"
        case .invoicesInYear: return "Invoice in 2012 by total desc; limit 10"
        case .reportsTo: return "Employee reportsTo.lastName == 'Edwards'"
        case .tracksOfAlbumObject: return "Track album == <album \(Self.album)>"
        case .countTracksOfGenreObject: return "count Track genre == <genre \(Self.genre)>"
        case .tracksOfAlbumsIn: return "Track album IN <albums \(Self.albums.map(String.init).joined(separator: ","))>"
        case .tracksOfArtistObject: return "Track album.artist == <artist of album \(Self.album)>"
        case .tracksOfPlaylistObject: return "Track ANY playlists == <playlist \(Self.playlist)>"
        case .albumTracksByName: return "Track album == <album \(Self.album)> by name"
        case .tracksPageByName: return "Track by name; offset 100, limit 25"
        case .genresByName: return "Genre by name"
        case .tracksBetween: return "Track milliseconds BETWEEN {200000, 210000}"
        case .tracksByIDs: return "Track SELF IN <\(Self.trackIDs.count) tracks>"
        case .tracksWithoutPlaylist: return "Track playlists.@count == 0"
        case .tracksOfGenresIn: return "Track genre.name IN {'Rock', 'Jazz'}"
        case .trackColumns: return "Track name, milliseconds (dictionary)"
        case .tracksWithAlbumsPrefetched: return "Track genre.name == 'Jazz', album prefetched, album.title read"
        case .distinctComposers: return "distinct Track.composer (dictionary)"
        case .totalOfInvoices: return "sum Invoice.total (dictionary)"
        case .firstTrackNamed: return "Track name BEGINSWITH 'Heart' limit 1"
        case .tracksByAlbumTitle: return "Track by album.title, name; limit 20"
        case .recentInvoices: return "Invoice by invoiceDate desc; limit 20"
        case .albumsSubquery: return "Album SUBQUERY(tracks, $t, $t.milliseconds > 300000).@count >= 3"
        case .customersInvoiceSum: return "Customer invoices.@sum.total > 40"
        case .invoicesOfRep: return "Invoice customer.supportRep == <employee 3>"
        case .tracksNotOfGenre: return "count Track genre != <genre \(Self.genre)>"
        case .tracksWithoutAlbumCount: return "count Track album == nil"
        case .containsLove: return "Track name CONTAINS[cd] 'love'"
        case .beginsWithA: return "Track name BEGINSWITH[c] 'a'"
        case .countContainsLove: return "count Track name CONTAINS[c] 'love'"
        case .tracksFirstBatch: return "Track by name, batch size 20, first batch read"
        case .artistAlbumTitles: return "Artist '\(Self.artist)', its albums fired, titles read"
        case .rockLongTracks: return "Track genre.name == 'Rock' AND milliseconds > 300000"
        case .albumsLoaded: return "Album by title, not faults"
        case .usaInvoicesByDate: return "Invoice billingCountry == 'USA' AND total > 5 by invoiceDate"
        }
    }

    /// Whether the answer's order is part of it (sorted fetches); the others are compared sorted.
    var ordered: Bool {
        switch self {
        case .sortByGenreLimit, .artistsByAlbumCount, .customersOfCountry, .priceSortedLimit, .invoicesInYear,
            .albumTracksByName, .tracksPageByName, .genresByName, .tracksByAlbumTitle, .recentInvoices, .tracksFirstBatch,
            .albumsLoaded:
            return true
        default: return false
        }
    }
}

/// Options from the command line (see `usage`).
struct Settings {
    /// Run each fetch once instead of for ``minimumSeconds``.
    var quick = false
    /// Write Strata's rows out as LZ4 segments after the load (`--segments`), as in a store
    /// that has run a while, instead of fetching them from the write-ahead log's image.
    var segments = false
    /// Where the markdown table goes, if anywhere.
    var results: String?
    var parent = "/tmp"
    var seed: UInt64 = 0xC41_800C
    /// `--profile QUERY N`: run only QUERY, N times on Strata inside ``profiledRuns``, for callgrind.
    var profile: (Query, Int)?
    /// `--profile-sqlite QUERY N`: the same on SQLite (the peer's instructions).
    var profileSQLite: (Query, Int)?
    /// Seconds each fetch repeats on each system.
    let minimumSeconds = 0.2

    static let usage = """
        usage: realdata-report [--quick] [--segments] [--results FILE] [--dir PATH] [--seed N] [--profile QUERY N]
                             [--profile-sqlite QUERY N]

          --quick          run each fetch once on each system (default: repeat for at least 0.2 s)
          --segments       after the load, flush Strata's log into compressed segments (a store
                           that has run a while) so fetches read segment blocks
          --results FILE   also write the table as markdown to FILE
          --dir PATH       where the temporary directory goes (default /tmp)
          --seed N         the data set's seed
          --profile QUERY N  load, then run only QUERY (a case name, such as fetchComposerNil) N times
                           on Strata inside profiledRuns, for valgrind --tool=callgrind
                           --collect-atstart=no --toggle-collect='*profiledRuns*'
          --profile-sqlite QUERY N  the same on SQLite: the peer's instructions
        """

    init(arguments: [String]) throws {
        var reader = ArgumentReader(arguments, usage: Self.usage)
        while let flag = reader.nextFlag() {
            switch flag {
            case "--quick": quick = true
            case "--segments": segments = true
            case "--results": results = try reader.value(for: flag)
            case "--dir": parent = try reader.value(for: flag)
            case "--seed":
                let text = try reader.value(for: flag)
                guard let value = UInt64(text) else { throw BenchmarkError("--seed \(text): expected an integer\n\(Self.usage)") }
                seed = value
            case "--profile": profile = try Self.profiled(&reader, flag)
            case "--profile-sqlite": profileSQLite = try Self.profiled(&reader, flag)
            case "--help", "-h":
                print(Self.usage)
                exit(0)
            default: throw BenchmarkError("unknown flag \(flag)\n\(Self.usage)")
            }
        }
    }

    /// The QUERY and N of a profiling flag.
    private static func profiled(_ reader: inout ArgumentReader, _ flag: String) throws -> (Query, Int) {
        let name = try reader.value(for: flag)
        guard let query = Query(rawValue: name) else {
            throw BenchmarkError("\(flag) \(name): not a query; one of \(Query.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        let text = try reader.value(for: flag)
        guard let count = Int(text), count > 0 else { throw BenchmarkError("\(flag): expected a positive count, found \(text)") }
        return (query, count)
    }
}

/// One measured fetch.
struct Row {
    var query: Query
    var strataMicros: Double
    var sqliteMicros: Double
    var answers: Int
    /// SQLite's time over Strata's: above 1, Strata is faster.
    var ratio: Double { sqliteMicros / strataMicros }
}

/// Runs `body` once (quick) or until `minimum` seconds have passed; returns its answer and
/// the mean microseconds of one run.
func measure(quick: Bool, minimum: Double, _ body: () throws -> [String]) throws -> ([String], Double) {
    var answer = try body()  // a warm-up run, also the answer
    if quick {
        let (again, elapsed) = try timed(body)
        return (again, elapsed * 1e6)
    }
    var runs = 0
    let start = ContinuousClock.now
    var elapsed = 0.0
    while elapsed < minimum {
        answer = try body()
        runs += 1
        elapsed = seconds(ContinuousClock.now - start)
    }
    return (answer, elapsed / Double(runs) * 1e6)
}

/// One of the two systems the fetches run on.
protocol MusicSystem {
    /// The answer to `query`, as sorted text both systems agree on.
    func answer(_ query: Query) throws -> [String]
}

extension StrataMusic: MusicSystem {}
extension SQLiteMusic: MusicSystem {}

/// Runs `query` `count` times on `system`: the only code callgrind counts in `--profile` and
/// `--profile-sqlite` mode (each system gets its own specialisation, named for this function).
@inline(never)
func profiledRuns<System: MusicSystem>(_ system: System, _ query: Query, _ count: Int) throws -> Int {
    var answers = 0
    for _ in 0..<count { answers += try system.answer(query).count }
    return answers
}

func pad(_ text: String, _ width: Int) -> String { text.count >= width ? text : text + String(repeating: " ", count: width - text.count) }
func padLeft(_ text: String, _ width: Int) -> String { text.count >= width ? text : String(repeating: " ", count: width - text.count) + text }

func run() throws -> Int32 {
    let settings = try Settings(arguments: Array(CommandLine.arguments.dropFirst()))
    print("realdata-report: \(CommandLine.arguments.joined(separator: " "))")
    let data = MusicData(seed: settings.seed)
    print("data: \(data.sizes)")
    let directory = try TemporaryDirectory(in: settings.parent, prefix: "realdata-")
    defer { directory.remove() }

    let strata = try StrataMusic(path: directory.appending("music.strata"))
    if let (query, count) = settings.profile {
        try strata.insert(data)
        if settings.segments { try strata.flushToSegments() }
        _ = try strata.answer(query)  // warm-up: model layouts, compiled plans
        let answers = try profiledRuns(strata, query, count)
        print("\(query.rawValue): \(count) runs, \(answers / count) answers each")
        try strata.close()
        return 0
    }
    let sqlite = try SQLiteMusic(path: directory.appending("music.sqlite"))
    if let (query, count) = settings.profileSQLite {
        try sqlite.insert(data)
        _ = try sqlite.answer(query)  // warm-up: prepared statements, page cache
        let answers = try profiledRuns(sqlite, query, count)
        print("\(query.rawValue) on SQLite: \(count) runs, \(answers / count) answers each")
        try sqlite.close()
        return 0
    }
    let (_, strataLoad) = try timed { try strata.insert(data) }
    let (_, sqliteLoad) = try timed { try sqlite.insert(data) }
    if settings.segments { try strata.flushToSegments() }
    print("load (one save / one transaction): Strata \(fixed(strataLoad * 1e3, 1)) ms, SQLite \(fixed(sqliteLoad * 1e3, 1)) ms")
    print(settings.quick ? "each fetch run once (--quick)" : "each fetch repeated for at least \(settings.minimumSeconds) s; a new context per Strata run")
    print()

    var rows: [Row] = []
    var leftOut: [(Query, String)] = []
    var mismatches = 0
    for query in Query.allCases {
        let strataResult: ([String], Double)
        do {
            strataResult = try measure(quick: settings.quick, minimum: settings.minimumSeconds) { try strata.answer(query) }
        } catch {
            leftOut.append((query, "\(error)"))
            continue
        }
        let sqliteResult = try measure(quick: settings.quick, minimum: settings.minimumSeconds) { try sqlite.answer(query) }
        if strataResult.0 != sqliteResult.0 {
            mismatches += 1
            print("MISMATCH \(query.rawValue): \(query.label)")
            print("  Strata (\(strataResult.0.count)): \(strataResult.0)")
            print("  SQLite (\(sqliteResult.0.count)): \(sqliteResult.0)")
        }
        rows.append(Row(query: query, strataMicros: strataResult.1, sqliteMicros: sqliteResult.1, answers: strataResult.0.count))
    }

    let geometricMean = exp(rows.map { log($0.ratio) }.reduce(0, +) / Double(max(rows.count, 1)))
    let width = max(5, rows.map(\.query.label.count).max() ?? 5)
    print("\(pad("fetch", width))  rows   Strata µs   SQLite µs  SQLite/Strata")
    for row in rows {
        print("\(pad(row.query.label, width))  \(padLeft(String(row.answers), 4))  \(padLeft(fixed(row.strataMicros, 1), 10))  \(padLeft(fixed(row.sqliteMicros, 1), 10))  \(padLeft(fixed(row.ratio, 2), 13))")
    }
    print("geometric mean of SQLite/Strata over \(rows.count) fetches: \(fixed(geometricMean, 2)) (above 1: Strata faster)")
    for (query, message) in leftOut { print("left out \(query.rawValue) (\(query.label)): \(message)") }
    print(mismatches == 0 ? "every answer matched" : "\(mismatches) answers differ")

    if let path = settings.results {
        var markdown = "`\(CommandLine.arguments.joined(separator: " "))`\n\nData: \(data.sizes)\n\n"
        markdown += "| fetch | rows | Strata µs | SQLite µs | SQLite/Strata |\n|---|---:|---:|---:|---:|\n"
        for row in rows {
            markdown += "| `\(row.query.label.replacingOccurrences(of: "|", with: "\\|"))` | \(row.answers) | \(fixed(row.strataMicros, 1)) | \(fixed(row.sqliteMicros, 1)) | \(fixed(row.ratio, 2)) |\n"
        }
        markdown += "\nGeometric mean of SQLite/Strata: \(fixed(geometricMean, 2)) (above 1: Strata faster).\n"
        for (query, message) in leftOut { markdown += "\nLeft out `\(query.label)`: \(message)\n" }
        try markdown.write(toFile: path, atomically: true, encoding: .utf8)
    }
    try strata.close()
    try sqlite.close()
    return mismatches == 0 ? 0 : 1
}

do {
    exit(try run())
} catch {
    FileHandle.standardError.write("realdata-report: \(error)\n".data(using: .utf8)!)
    exit(1)
}

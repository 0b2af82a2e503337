import BenchmarkSupport
import Foundation

/// A music store shaped like the Chinook sample database (11 tables, about 15k rows),
/// generated as plain Swift values from one seed with ``SplitMix64`` so that both systems
/// store exactly the same data. Relationships are indexes into the arrays.
struct MusicData {
    struct Artist { var name: String }
    struct Album { var title: String; var artist: Int }
    struct Track {
        var name: String
        var album: Int
        var genre: Int
        var mediaType: Int
        var milliseconds: Int64
        var bytes: Int64
        var unitPrice: Double
        /// `nil` for about 30 % of the tracks.
        var composer: String?
    }
    struct Playlist { var name: String; var tracks: [Int] }
    struct Employee { var firstName, lastName, title, city: String; var reportsTo: Int? }
    struct Customer { var firstName, lastName, country, city, email: String; var supportRep: Int }
    struct Invoice { var date: Date; var total: Double; var billingCountry: String; var customer: Int }
    struct InvoiceLine { var unitPrice: Double; var quantity: Int16; var invoice: Int; var track: Int }

    var genres: [String]
    var mediaTypes: [String]
    var artists: [Artist] = []
    var albums: [Album] = []
    var tracks: [Track] = []
    var playlists: [Playlist] = []
    var employees: [Employee] = []
    var customers: [Customer] = []
    var invoices: [Invoice] = []
    var invoiceLines: [InvoiceLine] = []

    /// Every record of the data set.
    var recordCount: Int {
        genres.count + mediaTypes.count + artists.count + albums.count + tracks.count + playlists.count
            + playlists.reduce(0) { $0 + $1.tracks.count } + employees.count + customers.count
            + invoices.count + invoiceLines.count
    }

    /// A one-line summary of the sizes.
    var sizes: String {
        "\(artists.count) artists, \(albums.count) albums, \(tracks.count) tracks, \(genres.count) genres, "
            + "\(mediaTypes.count) media types, \(playlists.count) playlists "
            + "(\(playlists.reduce(0) { $0 + $1.tracks.count }) playlist entries), \(employees.count) employees, "
            + "\(customers.count) customers, \(invoices.count) invoices, \(invoiceLines.count) invoice lines "
            + "(\(recordCount) records)"
    }

    static let genreNames = [
        "Rock", "Jazz", "Metal", "Alternative & Punk", "Rock And Roll", "Blues", "Latin", "Reggae", "Pop",
        "Soundtrack", "Bossa Nova", "Easy Listening", "Heavy Metal", "R&B/Soul", "Electronica/Dance",
        "World", "Hip Hop/Rap", "Science Fiction", "TV Shows", "Sci Fi & Fantasy", "Drama", "Comedy",
        "Alternative", "Classical", "Opera",
    ]
    static let mediaTypeNames = [
        "MPEG audio file", "Protected AAC audio file", "Protected MPEG-4 video file",
        "Purchased AAC audio file", "AAC audio file",
    ]
    /// 25 × 11 = 275 distinct artist names.
    static let artistFirst = [
        "Black", "Red", "Silver", "Iron", "Velvet", "Electric", "Golden", "Midnight", "Crimson", "Broken",
        "Wild", "Quiet", "Lonely", "Atomic", "Blue", "Neon", "Stone", "Paper", "Crystal", "Savage",
        "Holy", "Mystic", "Rolling", "Arctic", "Amber",
    ]
    static let artistSecond = [
        "Sabbath", "Hearts", "Wolves", "Machine", "Orchestra", "Trio", "Quartet", "Brothers", "Kings",
        "Echoes", "Ensemble",
    ]
    static let words = [
        "Love", "Night", "Road", "Fire", "Dream", "Heart", "Rain", "Angel", "Blues", "Sun", "Time", "Home",
        "love", "Summer", "Lady", "Baby", "Money", "River", "Light", "Dance", "After", "All", "Around",
        "Under", "Glove", "Lover", "Highway", "Star", "Shadow", "Train",
    ]
    static let composers = [
        "Angus Young", "Jimmy Page", "Robert Plant", "Steve Harris", "Billy Corgan", "Miles Davis",
        "John Coltrane", "Chico Buarque", "Tom Jobim", "Bono", "The Edge", "Lennon/McCartney",
        "Jagger/Richards", "Kurt Cobain", "Eddie Vedder", "Ludwig van Beethoven", "Johann Sebastian Bach",
        "Ira Gershwin", "Cole Porter", "Bob Marley",
    ]
    static let countries = [
        "USA", "Canada", "Brazil", "France", "Germany", "United Kingdom", "Portugal", "India", "Czech Republic",
        "Chile", "Ireland", "Hungary", "Austria", "Finland", "Netherlands", "Norway", "Sweden", "Spain",
        "Poland", "Italy", "Denmark", "Belgium", "Australia", "Argentina",
    ]
    static let firstNames = [
        "Luis", "Leonie", "Francois", "Bjorn", "Frantisek", "Helena", "Astrid", "Daan", "Kara", "Eduardo",
        "Alexandre", "Roberto", "Fernanda", "Mark", "Jennifer", "Frank", "Jack", "Michelle", "Tim", "Dan",
    ]
    static let lastNames = [
        "Goncalves", "Kohler", "Tremblay", "Hansen", "Wichterlova", "Holy", "Gruber", "Peeters", "Nielsen",
        "Martins", "Rocha", "Almeida", "Ramos", "Philips", "Peterson", "Harris", "Smith", "Brooks", "Goyer",
        "Miller",
    ]
    static let emailDomains = ["gmail.com", "yahoo.com", "apple.com", "hotmail.com", "gmail.org", "gmailxcom.net"]
    /// The eight employees (Chinook's): first, last, title, city, index of the manager.
    static let staff: [(String, String, String, String, Int?)] = [
        ("Andrew", "Adams", "General Manager", "Edmonton", nil),
        ("Nancy", "Edwards", "Sales Manager", "Calgary", 0),
        ("Jane", "Peacock", "Sales Support Agent", "Calgary", 1),
        ("Margaret", "Park", "Sales Support Agent", "Calgary", 1),
        ("Steve", "Johnson", "Sales Support Agent", "Calgary", 1),
        ("Michael", "Mitchell", "IT Manager", "Calgary", 0),
        ("Robert", "King", "IT Staff", "Lethbridge", 5),
        ("Laura", "Callahan", "IT Staff", "Lethbridge", 5),
    ]

    /// The data set of `seed`.
    init(seed: UInt64 = 0xC41_800C) {
        var random = SplitMix64(seed: seed)
        func pick(_ n: Int) -> Int { Int(random.next() % UInt64(n)) }
        func chance(_ percent: Int) -> Bool { pick(100) < percent }
        func phrase(_ count: Int) -> String { (0..<count).map { _ in Self.words[pick(Self.words.count)] }.joined(separator: " ") }

        genres = Self.genreNames
        mediaTypes = Self.mediaTypeNames
        for second in Self.artistSecond {
            for first in Self.artistFirst { artists.append(Artist(name: "\(first) \(second)")) }
        }
        // About a quarter of the artists have no album (as in Chinook).
        // The first three albums are the first artist's (Black Sabbath, the fetches' artist).
        for index in 0..<350 {
            albums.append(Album(title: phrase(1 + pick(3)), artist: index < 3 ? 0 : pick(210)))
        }
        for _ in 0..<3500 {
            // Genres skewed toward the first (Rock), then Jazz, Metal, ….
            let genre = min(pick(Self.genreNames.count), pick(Self.genreNames.count), pick(Self.genreNames.count))
            let milliseconds = Int64(20_000 + pick(560_000))
            tracks.append(Track(
                name: phrase(1 + pick(4)), album: pick(albums.count), genre: genre, mediaType: pick(100) < 80 ? 0 : 1 + pick(4),
                milliseconds: milliseconds, bytes: milliseconds * 32 + Int64(pick(100_000)),
                unitPrice: chance(15) ? 1.99 : 0.99,
                composer: chance(30) ? nil : Self.composers[pick(Self.composers.count)]))
        }
        let playlistNames = [
            "Music", "Movies", "TV Shows", "Audiobooks", "90's Music", "Audiobooks 2", "Movies 2", "Music 2",
            "Music Videos", "TV Shows 2", "Brazilian Music", "Classical", "Classical 101", "Classical 102",
            "Classical 103", "Grunge", "Heavy Metal", "On-The-Go",
        ]
        for name in playlistNames {
            let count = 50 + pick(751)
            var members = Set<Int>()
            while members.count < count { members.insert(pick(tracks.count)) }
            playlists.append(Playlist(name: name, tracks: members.sorted()))
        }
        employees = Self.staff.map { Employee(firstName: $0.0, lastName: $0.1, title: $0.2, city: $0.3, reportsTo: $0.4) }
        for index in 0..<60 {
            let first = Self.firstNames[pick(Self.firstNames.count)]
            let last = Self.lastNames[pick(Self.lastNames.count)]
            // Countries skewed toward the first (USA, Canada, Brazil, …), as in Chinook.
            let country = Self.countries[min(pick(Self.countries.count), pick(Self.countries.count))]
            let domain = Self.emailDomains[pick(Self.emailDomains.count)]
            customers.append(Customer(
                firstName: first, lastName: last, country: country, city: "City \(pick(40))",
                email: "\(first.lowercased()).\(last.lowercased())\(index)@\(domain)", supportRep: 2 + pick(3)))
        }
        let start = Date(timeIntervalSince1970: 1_262_304_000)  // 2010-01-01
        for _ in 0..<410 {
            let customer = pick(customers.count)
            invoices.append(Invoice(
                date: start.addingTimeInterval(Double(pick(5 * 365)) * 86_400), total: 0,
                billingCountry: customers[customer].country, customer: customer))
        }
        for index in 0..<2240 {
            let invoice = index < invoices.count ? index : pick(invoices.count)
            let track = pick(tracks.count)
            let quantity = Int16(1 + pick(3))
            invoiceLines.append(InvoiceLine(unitPrice: tracks[track].unitPrice, quantity: quantity, invoice: invoice, track: track))
        }
        // Totals in whole cents, like Chinook's NUMERIC(10,2).
        var cents = [Int](repeating: 0, count: invoices.count)
        for line in invoiceLines { cents[line.invoice] += Int((line.unitPrice * 100).rounded()) * Int(line.quantity) }
        for index in invoices.indices { invoices[index].total = Double(cents[index]) / 100 }
    }
}

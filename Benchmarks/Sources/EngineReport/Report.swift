import BenchmarkSupport
import Foundation

/// One line of the report's table.
struct Row {
    /// What was measured.
    var operation: String
    /// Operations done (keys, reads, commits, 1 MiB writes).
    var ops: Int
    /// Wall-clock seconds.
    var seconds: Double
    /// Bytes moved, for the MB/s column; `nil` leaves it blank.
    var bytes: Int?
    /// Whether to print the ratio of this row's MB/s to the raw write bandwidth.
    var comparesToRaw = false

    var opsPerSecond: Double { Double(ops) / seconds }
    var megabytesPerSecond: Double? { bytes.map { Double($0) / 1e6 / seconds } }
}

/// Collects rows and prints them as a table.
struct Report {
    private(set) var rows: [Row] = []
    /// The raw sequential write bandwidth (MB/s) that fill rows are compared with.
    var rawMegabytesPerSecond: Double?

    mutating func add(_ row: Row) {
        rows.append(row)
        print("  " + format(row))
    }

    /// The table, with a header.
    func table() -> String {
        var lines = [header(), String(repeating: "-", count: header().count)]
        lines += rows.map(format)
        return lines.joined(separator: "\n")
    }

    private func header() -> String {
        pad("operation", 46) + lpad("ops", 10) + lpad("time s", 9) + lpad("ops/s", 12) + lpad("MB/s", 9)
            + lpad("vs raw", 8)
    }

    private func format(_ row: Row) -> String {
        var line = pad(row.operation, 46) + lpad("\(row.ops)", 10) + lpad(fixed(row.seconds, 3), 9)
        line += lpad(fixed(row.opsPerSecond, 0), 12)
        line += lpad(row.megabytesPerSecond.map { fixed($0, 1) } ?? "", 9)
        if row.comparesToRaw, let raw = rawMegabytesPerSecond, let mbps = row.megabytesPerSecond {
            line += lpad(fixed(100 * mbps / raw, 0) + "%", 8)
        }
        return line
    }
}

private func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
}

private func lpad(_ text: String, _ width: Int) -> String {
    text.count >= width ? " " + text : String(repeating: " ", count: width - text.count) + text
}

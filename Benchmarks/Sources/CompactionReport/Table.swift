import BenchmarkSupport

/// A plain text table: the first column left-aligned, the others right-aligned, each as wide
/// as its widest cell.
struct Table {
    /// The column titles.
    let header: [String]
    /// The rows added so far; each has one cell per column (missing cells print blank).
    private(set) var rows: [[String]] = []

    /// A table with these column titles.
    init(_ header: [String]) { self.header = header }

    /// Adds a row.
    mutating func add(_ cells: [String]) { rows.append(cells) }

    /// The table with its header and a rule under it, indented by `indent` spaces.
    func rendered(indent: Int = 2) -> String {
        let all = [header] + rows
        let widths = header.indices.map { column in
            all.map { column < $0.count ? $0[column].count : 0 }.max() ?? 0
        }
        func line(_ cells: [String]) -> String {
            let padded = header.indices.map { column -> String in
                let cell = column < cells.count ? cells[column] : ""
                let fill = String(repeating: " ", count: widths[column] - cell.count)
                return column == 0 ? cell + fill : fill + cell
            }
            return String(repeating: " ", count: indent) + padded.joined(separator: "  ")
        }
        let rule = String(repeating: " ", count: indent)
            + String(repeating: "-", count: widths.reduce(0, +) + 2 * (widths.count - 1))
        return ([line(header), rule] + rows.map(line)).joined(separator: "\n")
    }
}

/// `bytes` in MB (10^6 bytes) with `digits` decimals.
func megabytes(_ bytes: some BinaryInteger, _ digits: Int = 2) -> String { fixed(Double(bytes) / 1e6, digits) }

/// `bytes` in KB (10^3 bytes), no decimals.
func kilobytes(_ bytes: some BinaryInteger) -> String { fixed(Double(bytes) / 1e3, 0) }

/// `ratio` as a percentage with `digits` decimals.
func percent(_ ratio: Double, _ digits: Int = 1) -> String { fixed(100 * ratio, digits) + "%" }

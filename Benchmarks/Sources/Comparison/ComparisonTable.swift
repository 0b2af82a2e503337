import Foundation

/// Text and markdown tables of ``ComparisonRow``s: one table per level with a column per system
/// and a column per peer with Strata's ratio to it (above 1: Strata better).
public enum ComparisonTable {
    /// The system every ratio is taken for.
    public static let strata = "Strata"

    /// Systems in the order columns show them when present; others follow alphabetically.
    public static let preferredOrder = ["Strata", "LevelDB", "RocksDB", "SQLite", "InMemoryStore", "raw disk", "LZ4"]

    /// The levels of `rows`, in the order they first appear.
    public static func levels(of rows: [ComparisonRow]) -> [String] {
        var seen: [String] = []
        for row in rows where !seen.contains(row.level) { seen.append(row.level) }
        return seen
    }

    /// Every system with a figure in `rows`: Strata first, then ``preferredOrder``, then the rest
    /// alphabetically.
    public static func systems(in rows: [ComparisonRow]) -> [String] {
        let names = Set(rows.flatMap { $0.results.keys })
        let known = preferredOrder.filter(names.contains)
        return known + names.subtracting(known).sorted()
    }

    /// The systems Strata has a ratio to in at least one row of `rows`.
    public static func peers(in rows: [ComparisonRow]) -> [String] {
        systems(in: rows).filter { peer in
            peer != strata && rows.contains { $0.strataRatio(to: peer) != nil }
        }
    }

    /// A figure with about three significant digits; thousands are grouped with commas.
    ///
    /// For example, 1234567 → "1,234,567", 123.4 → "123", 12.34 → "12.3", 0.01234 → "0.0123".
    public static func format(_ value: Double) -> String {
        guard value.isFinite else { return "–" }
        let magnitude = abs(value)
        if magnitude >= 1000 {
            let formatter = NumberFormatter()
            formatter.numberStyle = .decimal
            formatter.usesGroupingSeparator = true
            formatter.groupingSeparator = ","
            formatter.groupingSize = 3
            formatter.maximumFractionDigits = 0
            return formatter.string(from: NSNumber(value: value.rounded())) ?? String(Int(value.rounded()))
        }
        if magnitude >= 100 || magnitude == 0 { return String(format: "%.0f", value) }
        if magnitude >= 10 { return String(format: "%.1f", value) }
        if magnitude >= 1 { return String(format: "%.2f", value) }
        let digits = min(6, 2 - Int(floor(log10(magnitude))))
        return String(format: "%.\(digits)f", value)
    }

    /// Strata's ratio as "2.31x", or "–".
    public static func formatRatio(_ ratio: Double?) -> String {
        guard let ratio else { return "–" }
        if ratio >= 100 { return String(format: "%.0fx", ratio) }
        if ratio >= 10 { return String(format: "%.1fx", ratio) }
        if ratio >= 0.1 { return String(format: "%.2fx", ratio) }
        return String(format: "%.2gx", ratio)  // two significant digits: 0.0035x
    }

    /// The header and cells of `level`'s table (rows of other levels are ignored), and its
    /// numbered footnotes (row notes, then `notes`).
    public static func cells(_ rows: [ComparisonRow], level: String) -> (header: [String], body: [[String]], footnotes: [String]) {
        let rows = rows.filter { $0.level == level }
        let systems = systems(in: rows)
        let peers = peers(in: rows)
        var footnotes: [String] = []
        var body: [[String]] = []
        for row in rows {
            var operation = row.operation
            if let note = row.note, !note.isEmpty {
                footnotes.append(note)
                operation += " [\(footnotes.count)]"
            }
            let unit = row.unit + (row.higherIsBetter ? " ↑" : " ↓")
            let figures = systems.map { row.results[$0].map(format) ?? "–" }
            let ratios = peers.map { formatRatio(row.strataRatio(to: $0)) }
            body.append([operation, unit] + figures + ratios)
        }
        let header = ["operation", "unit"] + systems + peers.map { "Strata vs \($0)" }
        return (header, body, footnotes)
    }

    /// `level`'s rows as a plain-text table, followed by footnotes and `notes`.
    public static func text(_ rows: [ComparisonRow], level: String, notes: [String] = []) -> String {
        let (header, body, footnotes) = cells(rows, level: level)
        let all = [header] + body
        let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { column, cell in
                let padding = String(repeating: " ", count: widths[column] - cell.count)
                return column < 2 ? cell + padding : padding + cell
            }.joined(separator: "  ").replacingOccurrences(of: "\\s+$", with: "", options: .regularExpression)
        }
        var lines = [line(header), widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")]
        lines += body.map(line)
        lines.append("(↑ higher is better, ↓ lower is better; \"Strata vs X\" above 1 means Strata did better)")
        for (number, note) in footnotes.enumerated() { lines.append("[\(number + 1)] \(note)") }
        for note in notes { lines.append("- \(note)") }
        return lines.joined(separator: "\n")
    }

    /// `level`'s rows as a GitHub markdown table, followed by footnotes and `notes` as a list.
    public static func markdown(_ rows: [ComparisonRow], level: String, notes: [String] = []) -> String {
        let (header, body, footnotes) = cells(rows, level: level)
        func escape(_ cell: String) -> String { cell.replacingOccurrences(of: "|", with: "\\|") }
        func line(_ cells: [String]) -> String { "| " + cells.map(escape).joined(separator: " | ") + " |" }
        var lines = [line(header), "|" + header.indices.map { $0 < 2 ? "---|" : "---:|" }.joined()]
        lines += body.map(line)
        lines.append("")
        lines.append("↑ higher is better, ↓ lower is better; \"Strata vs X\" above 1 means Strata did better.")
        if !footnotes.isEmpty || !notes.isEmpty { lines.append("") }
        for (number, note) in footnotes.enumerated() { lines.append("\(number + 1). \(escape(note))") }
        if !footnotes.isEmpty && !notes.isEmpty { lines.append("") }
        for note in notes { lines.append("- \(note)") }
        return lines.joined(separator: "\n")
    }

    /// The whole report as a markdown document: machine facts, then one section per level.
    public static func markdownDocument(_ report: ComparisonReport) -> String {
        var parts = [
            "# compare: Strata side by side (\(report.startedAt))",
            "",
            "`compare \(report.arguments.joined(separator: " "))`, \(format(report.seconds)) s in all.",
            "",
        ]
        parts += report.machine.lines.map { "- " + $0 }
        for failure in report.failures { parts += ["", "**Failed:** \(failure)"] }
        for level in report.levels {
            parts.append("")
            let seconds = report.levelSeconds[level].map { " (\(format($0)) s)" } ?? ""
            parts.append("## \(level)\(seconds)")
            parts.append("")
            parts.append(markdown(report.rows, level: level, notes: report.levelNotes[level] ?? []))
        }
        return parts.joined(separator: "\n") + "\n"
    }
}

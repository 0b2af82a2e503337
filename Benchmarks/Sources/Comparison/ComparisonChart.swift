import Foundation

/// A horizontal bar chart, as hand-written SVG, of Strata's ratio to each peer for every
/// operation: a log scale with a line at 1 (bars to the right: Strata better).
public enum ComparisonChart {
    /// Colors of the peers' bars, in ``ComparisonTable/peers(in:)`` order.
    static let palette = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759", "#76b7b2", "#edc948", "#9c755f"]

    /// The SVG document for `rows` (rows without any ratio are left out), titled `title`, with
    /// `subtitle` lines under the title.
    public static func svg(_ rows: [ComparisonRow], title: String, subtitle: [String] = []) -> String {
        let peers = ComparisonTable.peers(in: rows)
        let ratios = rows.flatMap { row in peers.compactMap { row.strataRatio(to: $0) } }
        // The scale: whole powers of ten around every ratio, at least 0.1 to 10, with a decade
        // to spare on the left so the label of the smallest bar clears the peer's name.
        let smallest = floor(log10(ratios.min() ?? 1))
        let low = min(-1, smallest < -1 ? smallest - 1 : smallest)
        let high = max(1, ceil(log10(ratios.max() ?? 1)))
        let width = 1000.0, labelWidth = 400.0, right = 70.0
        let plotLeft = labelWidth, plotRight = width - right
        func x(_ ratio: Double) -> Double {
            let clamped = min(max(log10(ratio), low), high)
            return plotLeft + (clamped - low) / (high - low) * (plotRight - plotLeft)
        }
        let barHeight = 13.0, barStep = 17.0, groupGap = 8.0, levelGap = 30.0
        var body: [String] = []
        var y = 30.0
        body.append(text(12, y, title, size: 17, weight: "bold"))
        for line in subtitle {
            y += 17
            body.append(text(12, y, line, size: 11.5, fill: "#444"))
        }
        // Legend.
        y += 22
        var legendX = 12.0
        for (index, peer) in peers.enumerated() {
            body.append(
                "<rect x=\"\(fmt(legendX))\" y=\"\(fmt(y - 10))\" width=\"12\" height=\"12\" fill=\"\(color(index))\"/>")
            body.append(text(legendX + 16, y, "Strata vs \(peer)", size: 12))
            legendX += 30 + Double("Strata vs \(peer)".count) * 7
        }
        body.append(
            text(legendX + 10, y, "bar to the right of 1×: Strata better; log scale", size: 12, fill: "#444"))
        let plotTop = y + 24
        y = plotTop + 14
        var levelBodies: [String] = []
        for level in ComparisonTable.levels(of: rows) {
            let levelRows = rows.filter { row in row.level == level && peers.contains { row.strataRatio(to: $0) != nil } }
            guard !levelRows.isEmpty else { continue }
            y += levelGap - 10
            levelBodies.append(text(12, y, "level: \(level)", size: 14, weight: "bold"))
            y += 10
            for row in levelRows {
                let present = peers.enumerated().filter { row.strataRatio(to: $0.element) != nil }
                let label = wrap(row.operation, width: 46)
                for (line, text) in label.enumerated() {
                    levelBodies.append(Self.text(12, y + Double(line) * barStep + barHeight - 2, text, size: 12))
                }
                for (position, (index, peer)) in present.enumerated() {
                    guard let ratio = row.strataRatio(to: peer) else { continue }
                    let barY = y + Double(position) * barStep
                    let start = x(1), end = x(ratio)
                    let left = min(start, end), barWidth = max(1, abs(end - start))
                    levelBodies.append(
                        text(plotLeft - 8, barY + barHeight - 2, peer, size: 11, fill: "#555", anchor: "end"))
                    levelBodies.append(
                        "<rect x=\"\(fmt(left))\" y=\"\(fmt(barY))\" width=\"\(fmt(barWidth))\" height=\"\(fmt(barHeight))\" "
                            + "fill=\"\(color(index))\"><title>\(escape(row.operation)): Strata vs \(escape(peer)) "
                            + "\(ComparisonTable.formatRatio(ratio))</title></rect>")
                    let labelX = ratio >= 1 ? end + 4 : end - 4
                    levelBodies.append(
                        text(
                            labelX, barY + barHeight - 2, ComparisonTable.formatRatio(ratio), size: 10.5,
                            anchor: ratio >= 1 ? "start" : "end"))
                }
                y += Double(max(1, present.count, label.count)) * barStep + groupGap
            }
        }
        let plotBottom = y
        // Grid: every power of ten, and 2× and 5× between them, then the line at 1.
        var grid: [String] = []
        var exponent = low
        while exponent <= high {
            for multiple in [1.0, 2.0, 5.0] {
                let ratio = multiple * pow(10, exponent)
                guard log10(ratio) <= high + 1e-9 else { continue }
                let gx = x(ratio)
                let major = multiple == 1
                grid.append(
                    "<line x1=\"\(fmt(gx))\" y1=\"\(fmt(plotTop))\" x2=\"\(fmt(gx))\" y2=\"\(fmt(plotBottom))\" "
                        + "stroke=\"\(major ? "#bbb" : "#e6e6e6")\" stroke-width=\"1\"/>")
                if major || high - low <= 2 {
                    let label = String(format: "%g×", ratio)
                    grid.append(text(gx, plotTop - 2, label, size: 10.5, fill: "#666", anchor: "middle"))
                    grid.append(text(gx, plotBottom + 12, label, size: 10.5, fill: "#666", anchor: "middle"))
                }
            }
            exponent += 1
        }
        grid.append(
            "<line x1=\"\(fmt(x(1)))\" y1=\"\(fmt(plotTop))\" x2=\"\(fmt(x(1)))\" y2=\"\(fmt(plotBottom))\" "
                + "stroke=\"#222\" stroke-width=\"2\"/>")
        let height = plotBottom + 26
        return """
            <?xml version="1.0" encoding="UTF-8"?>
            <svg xmlns="http://www.w3.org/2000/svg" width="\(fmt(width))" height="\(fmt(height))" \
            viewBox="0 0 \(fmt(width)) \(fmt(height))" font-family="Helvetica, Arial, sans-serif">
            <rect width="100%" height="100%" fill="white"/>
            \((body + grid + levelBodies).joined(separator: "\n"))
            </svg>

            """
    }

    /// `text` in lines of at most `width` characters, broken at spaces where possible.
    static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var current = ""
        for word in text.split(separator: " ") {
            if current.isEmpty {
                current = String(word)
            } else if current.count + 1 + word.count <= width {
                current += " " + word
            } else {
                lines.append(current)
                current = String(word)
            }
            while current.count > width {
                lines.append(String(current.prefix(width)))
                current = String(current.dropFirst(width))
            }
        }
        if !current.isEmpty || lines.isEmpty { lines.append(current) }
        return lines
    }

    private static func color(_ index: Int) -> String { palette[index % palette.count] }

    private static func fmt(_ value: Double) -> String { String(format: "%.1f", value) }

    private static func text(
        _ x: Double, _ y: Double, _ content: String, size: Double, weight: String = "normal", fill: String = "#111",
        anchor: String = "start"
    ) -> String {
        "<text x=\"\(fmt(x))\" y=\"\(fmt(y))\" font-size=\"\(fmt(size))\" font-weight=\"\(weight)\" fill=\"\(fill)\" "
            + "text-anchor=\"\(anchor)\">\(escape(content))</text>"
    }

    /// `text` with the five XML special characters escaped.
    static func escape(_ text: String) -> String {
        var result = ""
        for character in text {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&apos;"
            default: result.append(character)
            }
        }
        return result
    }
}

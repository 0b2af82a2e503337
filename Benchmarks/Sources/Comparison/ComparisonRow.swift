/// One operation measured on several systems in the same run.
///
/// `results` maps a system name ("Strata", "SQLite", "LevelDB", "RocksDB", "raw disk", ...)
/// to its figure in `unit`. When `higherIsBetter` is true (throughputs) Strata's ratio to a peer
/// is Strata / peer; when false (times, bytes) it is peer / Strata, so a ratio above 1 always
/// means Strata did better.
public struct ComparisonRow: Codable, Sendable, Equatable {
    /// "object graph", "engine" or "physical".
    public var level: String
    /// What was measured, e.g. "insert 100k objects in one save".
    public var operation: String
    /// The unit of every figure in `results`, e.g. "objects/s", "ops/s", "MB/s", "s", "MB".
    public var unit: String
    /// Whether a larger figure is better.
    public var higherIsBetter: Bool
    /// Figure per system.
    public var results: [String: Double]
    /// Anything a reader needs to interpret the row (settings, sizes).
    public var note: String?

    /// Creates a row.
    public init(
        level: String, operation: String, unit: String, higherIsBetter: Bool,
        results: [String: Double], note: String? = nil
    ) {
        self.level = level
        self.operation = operation
        self.unit = unit
        self.higherIsBetter = higherIsBetter
        self.results = results
        self.note = note
    }

    /// Strata's ratio to `peer` (above 1: Strata better), or nil when either figure is missing
    /// or zero.
    public func strataRatio(to peer: String, strata: String = "Strata") -> Double? {
        guard let mine = results[strata], let theirs = results[peer], mine > 0, theirs > 0 else { return nil }
        return higherIsBetter ? mine / theirs : theirs / mine
    }
}

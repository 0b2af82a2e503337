import StrataEngine

/// This build of Strata: its release and the on-disk formats it writes and reads (SPEC.md).
/// `strata --version` prints ``description``.
///
/// For example:
///
/// ```swift
/// print(StrataBuild.description)   // Strata 0.1.0 (files: format 1; rows: format 3)
/// ```
public enum StrataBuild {
    /// The release, as `major.minor.patch`. No release has been tagged yet: 0.1.0 until one is.
    public static let version = "0.1.0"
    /// The format of the engine's files (manifest, WAL, segments) this build writes and the
    /// newest it reads ([MAN-3], [WAL-1], [SEG-1]).
    public static var fileFormat: UInt32 { Engine.formatVersion }
    /// The format of StrataStore's rows and metadata record ([ROW-1], [ROW-4]) this build writes
    /// and reads.
    public static var rowFormat: UInt8 { StoredRow.formatVersion }
    /// The release and the formats, on one line.
    public static var description: String { "Strata \(version) (files: format \(fileFormat); rows: format \(rowFormat))" }
}

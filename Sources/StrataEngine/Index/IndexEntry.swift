/// Where a value lives: (file, position, offset, length), interpreted by the file's kind.
public struct ValueLocation: Hashable, Sendable {
    /// The number of the segment or WAL file that holds the value.
    public var fileNumber: UInt32
    /// Segment: block index; WAL: 0.
    public var position: UInt32
    /// Segment: offset in the decompressed block; WAL: byte offset in the file.
    public var offset: UInt32
    /// Bytes of the encoded entry.
    public var length: UInt32

    /// Creates a location from its four parts.
    public init(fileNumber: UInt32, position: UInt32, offset: UInt32, length: UInt32) {
        self.fileNumber = fileNumber
        self.position = position
        self.offset = offset
        self.length = length
    }
}

/// One key's state in the index: its sequence number and where its value lives.
///
/// A plain 24-byte value (one `UInt64` and four `UInt32`s), so leaves store entries in a
/// flat array with no per-key allocation.
public struct IndexEntry: Hashable, Sendable {
    /// The sequence number of the write that produced this state.
    public var sequence: UInt64
    /// Where the value lives on disk.
    public var location: ValueLocation

    /// Creates an entry.
    public init(sequence: UInt64, location: ValueLocation) {
        self.sequence = sequence
        self.location = location
    }
}

import Testing
@testable import StrataEngine

@Suite struct WALFormatTests {
    // [WAL-2] [WAL-3] [ENT-1] The worked example of SPEC.md, byte for byte.
    @Test func aBatchRecordMatchesTheSpecsWorkedExample() {
        var writer = ByteWriter()
        var entries: [WALRecord.EncodedEntry] = []
        WALRecord.appendBatch(
            sequence: 7, operations: [.init(isDelete: false, key: Array("k".utf8), value: Array("v".utf8))],
            to: &writer, entries: &entries)
        let expected: [UInt8] = [
            0x95, 0xfa, 0x1a, 0x96, 0x0b, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x19, 0x8c, 0xea, 0x06,
            0x01, 0x01, 0x07, 0x01, 0x01, 0x6b, 0x76, 0xd3, 0xdc, 0x3e, 0x16,
        ]
        #expect(writer.bytes == expected)
        #expect(entries.count == 1)
        #expect(entries[0].offset == 17)  // 32 + 17 = 49 in the file
        #expect(entries[0].length == 10)
    }

    // [WAL-1]
    @Test func theWALHeaderCarriesMagicVersionAndFileNumber() {
        let header = WALRecord.fileHeader(fileNumber: 3)
        #expect(header.count == Format.walHeaderSize)
        #expect(Array(header[0..<8]) == Array("STRATWAL".utf8))
        #expect(header[8] == 1 && header[16] == 3)
        #expect(CRC32C.checksum(Array(header[0..<24])) == UInt32(header[24]) | UInt32(header[25]) << 8 | UInt32(header[26]) << 16 | UInt32(header[27]) << 24)
    }

    @Test func varintsRoundTripAndRejectOverlongEncodings() {
        for value: UInt64 in [0, 1, 127, 128, 300, 1 << 35, .max] {
            var writer = ByteWriter()
            writer.varint(value)
            #expect(writer.count == LogEntry.varintLength(value))
            writer.bytes.withUnsafeBytes { raw in
                var reader = ByteReader(raw)
                #expect(reader.varint() == value)
                #expect(reader.isAtEnd)
            }
        }
        let overlong: [UInt8] = Array(repeating: 0xFF, count: 10) + [0x01]
        overlong.withUnsafeBytes { raw in
            var reader = ByteReader(raw)
            #expect(reader.varint() == nil)
        }
    }
}

import Testing
@testable import StrataEngine

@Suite struct ChecksumTests {
    // [CRC-1] The checksum is standard CRC-32C.
    @Test func crc32cMatchesTheStandardCheckValue() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([]) == 0)
    }

    @Test func crc32cExtendEqualsOneShot() {
        let a = Array("hello, ".utf8), b = Array("world".utf8)
        let whole = CRC32C.checksum(a + b)
        let partial = b.withUnsafeBytes { CRC32C.extend(CRC32C.checksum(a), $0) }
        #expect(whole == partial)
    }

    @Test func lz4RoundTripsAndRejectsGarbage() {
        let input = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 % 97) }
        let packed = input.withUnsafeBytes { LZ4.compress($0) }
        #expect(packed.count < input.count)
        #expect(packed.withUnsafeBytes { LZ4.decompress($0, rawCount: input.count) } == input)
        #expect(packed.withUnsafeBytes { LZ4.decompress($0, rawCount: input.count + 1) } == nil)
        let garbage: [UInt8] = [0xFF, 0xFF, 0xFF, 0x00, 0x12]
        #expect(garbage.withUnsafeBytes { LZ4.decompress($0, rawCount: 100) } == nil)
    }
}

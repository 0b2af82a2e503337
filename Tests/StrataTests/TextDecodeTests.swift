@testable import Strata
import Testing

/// ``Text/decode(_:)`` against the standard library's validating decoder: every length up to
/// 40 bytes (small and large strings, whole and partial eight-byte words), ASCII, a two-byte
/// character and an invalid byte at each position.
@Suite struct TextDecodeTests {
    static func decoded(_ bytes: [UInt8]) -> String? { bytes.withUnsafeBytes { Text.decode($0) } }
    static func expected(_ bytes: [UInt8]) -> String? { String(validating: bytes, as: UTF8.self) }

    @Test func everyLengthAndPositionDecodesAsTheValidatingDecoder() {
        for length in 0...40 {
            let ascii = (0..<length).map { UInt8(0x21 + $0 % 90) }
            #expect(Self.decoded(ascii) == Self.expected(ascii), "ASCII of \(length) bytes")
            #expect(Self.decoded(ascii)?.utf8.count == length)
            for position in 0..<length {
                var accented = ascii
                accented.replaceSubrange(position..<position + 1, with: [0xC3, 0xA9])  // é
                #expect(Self.decoded(accented) == Self.expected(accented), "é at \(position) of \(length)")
                var invalid = ascii
                invalid[position] = 0xFF
                #expect(Self.decoded(invalid) == nil, "0xFF at \(position) of \(length)")
                var truncated = ascii
                truncated[position] = 0xC3  // a lead byte without its continuation (or before ASCII)
                #expect(Self.decoded(truncated) == Self.expected(truncated), "a lone lead byte at \(position) of \(length)")
            }
        }
    }
}

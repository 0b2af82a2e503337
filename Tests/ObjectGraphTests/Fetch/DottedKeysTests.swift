@testable import ObjectGraph
import Testing

/// `dottedKeys` splits on the UTF-8 bytes as `split(separator: ".",
/// omittingEmptySubsequences: false)` splits on characters: empty keys, dots at either end,
/// runs of dots, and keys with multi-byte and combining characters.
@Suite struct DottedKeysTests {
    @Test(arguments: [
        "", ".", "..", "name", "album.title", "album.artist.name", ".name", "name.", "a..b", "...a...",
        "caf\u{E9}.ti\u{301}tle", "\u{1F600}.x", "tracks.@avg.milliseconds", "$t.genre.name",
    ])
    func dottedKeysAreTheCharacterSplit(path: String) {
        let expected = path.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        #expect(path.dottedKeys == expected, "\(path)")
        // The components without empty keys, as `split(separator: ".")` gives them.
        #expect(path.keyPathComponents == path.split(separator: ".").map(String.init), "\(path) without empty keys")
    }

    /// A dot always separates keys, even one a combining mark follows (where a split on
    /// `Character`s sees one character, `.` with its mark): no key starts with a combining mark.
    @Test func aDotBeforeACombiningMarkStillSeparatesKeys() {
        let path = "e\u{301}.\u{301}"
        #expect(path.dottedKeys == ["e\u{301}", "\u{301}"])
        #expect(path.keyPathComponents == ["e\u{301}", "\u{301}"])
    }

    /// `containsByte` answers as `utf8.contains` does, for every byte of paths with and
    /// without multi-byte characters (native strings and a bridged-like one made from a
    /// substring).
    @Test(arguments: ["", "a", "album.title", "caf\u{E9}.ti\u{301}tle", "tracks.@avg.x", "$t.name", "\u{1F600}"])
    func containsByteIsTheUTF8Search(path: String) {
        for byte in [UInt8(ascii: "."), UInt8(ascii: "@"), UInt8(ascii: "$"), UInt8(ascii: "a"), 0xCC, 0x81, 0x00, 0xF0] {
            #expect(path.containsByte(byte) == path.utf8.contains(byte), "\(path) byte \(byte)")
            let rebuilt = String(path[...])
            #expect(rebuilt.containsByte(byte) == path.utf8.contains(byte))
        }
    }
}

import Foundation

/// A small, deterministic 32-byte digest for model version hashes.
///
/// Not cryptographic: it only has to change when a model's stored shape changes and
/// stay the same across processes (Swift's `Hasher` is seeded per process, so it cannot
/// be used). Four FNV-1a 64-bit lanes with different offsets.
enum VersionHash {
    static func digest(of text: String) -> Data {
        var out = Data(capacity: 32)
        for lane in 0..<4 {
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325 &+ UInt64(lane) &* 0x9e37_79b9_7f4a_7c15
            for byte in text.utf8 {
                hash ^= UInt64(byte)
                hash = hash &* 0x0000_0100_0000_01b3
            }
            withUnsafeBytes(of: hash.bigEndian) { out.append(contentsOf: $0) }
        }
        return out
    }
}

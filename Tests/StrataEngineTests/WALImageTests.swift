import Testing

@testable import StrataEngine

/// [WAL-5] Each live WAL's bytes in memory: appended records are found whole, in the chunk
/// they went to; the engine reads WAL values there and never from the file again.
@Suite struct WALImageTests {
    /// Random appends (some larger than a chunk) after a header: every appended range is found
    /// with its bytes, and no range is found past the end or across two chunks.
    @Test func everyAppendedRecordIsFoundWholeInOneChunk() {
        var random = SeededRandom(seed: 5)
        let header = random.bytes(32)
        let image = WALImage(header, count: header.count, headroom: 100)
        var appended: [(offset: UInt64, bytes: [UInt8])] = [(0, header)]
        var end = UInt64(header.count)
        for round in 0..<40 {
            let size = round == 0 ? 1_000 : round == 17 ? WALImage.chunkBytes + 3 : Int.random(in: 1...300_000, using: &random)
            let bytes = random.bytes(size)
            image.append(bytes, at: end)
            appended.append((end, bytes))
            end += UInt64(size)
        }
        #expect(image.byteCount == Int(end))
        for (offset, bytes) in appended {
            let chunk = image.chunk(holding: offset, length: bytes.count)
            #expect(chunk.map { Array($0.bytes(at: offset, count: bytes.count)) } == bytes, "record at \(offset)")
            // A part of a record too.
            let middle = offset + UInt64(bytes.count / 2)
            #expect(chunk?.holds(middle, 1) == true)
        }
        #expect(image.chunk(holding: end, length: 1) == nil)
        #expect(image.chunk(holding: end - 1, length: 2) == nil)
        // A record that did not fit the first chunk's room started a new chunk: the range
        // across the boundary is in neither.
        #expect(image.chunk(holding: UInt64(header.count) - 1, length: 2) == nil)
    }

    /// After open, the engine reads WAL values from the image: the file may change under it
    /// (here: every record byte overwritten) without changing an answer. The next open reads
    /// the file again and reports the damage.
    @Test func walValuesAreReadFromMemoryAfterOpen() throws {
        let fs = FaultInjectingFileSystem()
        let options = testOptions(fs, rollover: 1 << 20)
        var model: [[UInt8]: [UInt8]] = [:]
        do {
            let engine = try Engine.open(at: "/store", options: options)
            var random = SeededRandom(seed: 9)
            for round in 0..<20 {
                var batch = WriteBatch()
                for n in 0..<25 {
                    let key = testKey(round * 25 + n), value = random.bytes(Int.random(in: 0...200, using: &random))
                    batch.put(key, value)
                    model[key] = value
                }
                try engine.commit(batch)
            }
            try engine.close()
        }
        let engine = try Engine.open(at: "/store", options: options)
        let walPath = try #require(fs.listFiles(under: "/store").first { $0.hasSuffix(Format.walExtension) })
        let size = try #require(fs.contents(of: walPath)).count
        fs.setContents(Array(fs.contents(of: walPath)!.prefix(Format.walHeaderSize)) + [UInt8](repeating: 0xA5, count: size - Format.walHeaderSize), of: walPath)
        #expect(try contents(of: engine) == model)
        for (key, value) in model { #expect(try engine.get(key) == value) }
        try engine.close()
        #expect(throws: StoreError.self) { _ = try Engine.open(at: "/store", options: options) }
    }
}

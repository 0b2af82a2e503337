@testable import StrataEngine

/// The seed corpus: valid encodings of every structure, each prefixed with the selector byte
/// of its target, taken from a small store that the engine itself writes on an in-memory
/// ``FaultInjectingFileSystem``. Starting from valid files lets libFuzzer mutate its way into
/// the parsers at once instead of rediscovering magic numbers and checksums.
enum FuzzCorpus {
    /// One seed input: a file name and its bytes.
    typealias Seed = (name: String, bytes: [UInt8])

    /// Writes the seeds into `directory` (created if missing); returns how many.
    static func write(into directory: String) throws -> Int {
        try FuzzFiles.makeDirectory(directory)
        let seeds = try makeSeeds()
        for seed in seeds { try FuzzFiles.write(seed.bytes, to: directory + "/" + seed.name) }
        return seeds.count
    }

    /// Every seed, for every target.
    static func makeSeeds() throws(StoreError) -> [Seed] {
        var seeds: [Seed] = []
        for (label, files) in try storeCaptures() {
            seeds += seedsFor(store: files, label: label)
        }
        seeds += entrySeeds()
        for (index, row) in FuzzRows.seeds().enumerated() {
            seeds.append(("row-\(index)", [FuzzSelector.byte(.row)] + row))
        }
        for (index, format) in FuzzPredicates.seeds().enumerated() {
            seeds.append(("predicate-\(index)", [FuzzSelector.byte(.predicate, index % 2 == 0 ? 0 : FuzzFlag.predicateArguments)] + format))
        }
        if let file = FuzzBinary.seed() {
            seeds.append(("binary-0", [FuzzSelector.byte(.binary)] + file))
            seeds.append(("binary-0-fix", [FuzzSelector.byte(.binary, FuzzFlag.fixChecksums)] + file))
        }
        // A new store ([DIR-4]) and tiny inputs for every target.
        seeds.append(("engine-new", [FuzzSelector.byte(.engine, FuzzFlag.engineCommitAndReopen)]))
        for target in FuzzTarget.allCases {
            seeds.append(("\(target)-tiny", [FuzzSelector.byte(target), 0]))
        }
        return seeds
    }

    /// A small store written through the engine, captured (every file of its directory) while
    /// it has several WALs and segments, after a flush, and after a full compaction.
    static func storeCaptures() throws(StoreError) -> [(label: String, files: [StoreImage.File])] {
        let fs = FaultInjectingFileSystem()
        let directory = "/seed/store"
        try fs.createDirectory("/seed")
        var options = FuzzTargets.options(fs, repair: false, readOnly: false)
        options.walRolloverBytes = 1024
        options.blockSize = 256
        // The crash model's SplitMix64: the corpus is the same on every run.
        var random = CrashRandom(seed: 0x5354_5241_5441)
        func capture() -> [StoreImage.File] {
            fs.listFiles(under: directory).sorted().compactMap { path in
                guard let name = path.split(separator: "/").last.map(String.init), name != Format.lockFileName,
                    let bytes = fs.contents(of: path)
                else { return nil }
                return StoreImage.File(name: name, bytes: bytes)
            }
        }
        let engine = try Engine.open(at: directory, options: options)
        var captures: [(label: String, files: [StoreImage.File])] = []
        for round in 0..<60 {
            var batch = WriteBatch()
            for _ in 0...random.below(3) {
                let key = Array("key-\(100 + random.below(40))".utf8)
                switch random.below(6) {
                case 0: batch.delete(key)
                case 1, 2: batch.put(key, Array(repeating: UInt8(ascii: "a") + UInt8(round % 26), count: 20 + random.below(60)))
                default: batch.put(key, (0..<random.below(24)).map { _ in UInt8(truncatingIfNeeded: random.next()) })
                }
            }
            _ = try engine.commit(batch)
            if round == 30 { captures.append(("live", capture())) }
        }
        captures.append(("late", capture()))
        try engine.flush()
        captures.append(("flushed", capture()))
        try engine.compact(.full)
        try engine.close()
        captures.append(("compacted", capture()))
        return captures
    }

    /// Seeds for every target from one captured store.
    static func seedsFor(store files: [StoreImage.File], label: String) -> [Seed] {
        var seeds: [Seed] = []
        func add(_ name: String, _ target: FuzzTarget, _ flags: UInt8, _ body: [UInt8]) {
            seeds.append(("\(target)-\(label)-\(name)-\(String(flags, radix: 16))", [FuzzSelector.byte(target, flags)] + body))
        }
        for file in files {
            if file.name == Format.manifestFileName {
                add(file.name, .manifest, 0, file.bytes)
                add(file.name, .manifest, FuzzFlag.fixChecksums, file.bytes)
            } else if let parsed = Format.parseNumberedFileName(file.name), parsed.ext == Format.walExtension {
                for flags in [0, FuzzFlag.walNewest, FuzzFlag.walRepair, FuzzFlag.walNewest | FuzzFlag.walRepair] {
                    add(file.name, .wal, flags, file.bytes)
                }
                add(file.name, .wal, FuzzFlag.walNewest | FuzzFlag.fixChecksums, file.bytes)
                let entries = walEntries(file.bytes)
                if !entries.isEmpty {
                    add(file.name, .entries, 0, entries)
                    add(file.name, .entries, FuzzFlag.fixChecksums, entries)
                }
            } else if Format.parseNumberedFileName(file.name) != nil {
                add(file.name, .segment, FuzzFlag.segmentNumberFromHeader, file.bytes)
                add(file.name, .segment, FuzzFlag.segmentNumberFromHeader | FuzzFlag.fixChecksums, file.bytes)
            }
        }
        let image = StoreImage(files: files).encoded()
        for flags in [
            0, FuzzFlag.engineCommitAndReopen, FuzzFlag.engineRepair, FuzzFlag.engineReadOnly,
            FuzzFlag.engineRepair | FuzzFlag.engineCommitAndReopen, FuzzFlag.fixChecksums | FuzzFlag.engineCommitAndReopen,
        ] {
            add("store", .engine, flags, image)
        }
        return seeds
    }

    /// The entries of every valid record of a WAL, back to back.
    static func walEntries(_ wal: [UInt8]) -> [UInt8] {
        var entries: [UInt8] = []
        let reader = WALReader(path: "/seed/wal", bytes: wal, isNewest: true, repair: false)
        _ = try? reader.read { record in
            for item in record.entries {
                entries += wal[Int(item.offset)..<Int(item.offset) + Int(item.length)]
            }
        }
        return entries
    }

    /// Entries with edge values: empty key and value, a delete, long varints, a larger value.
    static func entrySeeds() -> [Seed] {
        var writer = ByteWriter()
        let cases: [(isDelete: Bool, sequence: UInt64, key: [UInt8], value: [UInt8])] = [
            (false, 0, [], []),
            (true, 1, Array("gone".utf8), []),
            (false, UInt64.max, Array("max".utf8), Array("sequence".utf8)),
            (false, 1 << 35, [0xFF, 0x00, 0x80], Array(repeating: 0x61, count: 300)),
        ]
        for item in cases {
            item.key.withUnsafeBytes { key in
                item.value.withUnsafeBytes { value in
                    _ = LogEntry.encode(
                        isDelete: item.isDelete, sequence: item.sequence, key: key, value: value, into: &writer)
                }
            }
        }
        return [
            ("entries-edge-0", [FuzzSelector.byte(.entries)] + writer.bytes),
            ("entries-edge-8", [FuzzSelector.byte(.entries, FuzzFlag.fixChecksums)] + writer.bytes),
        ]
    }
}

// StrataFuzz: one libFuzzer target for every on-disk decoder of StrataEngine and for
// StrataStore's rows (SPEC.md).
//
// Built with `-Xswiftc -DSTRATA_FUZZ --sanitize=fuzzer` it exports `LLVMFuzzerTestOneInput`
// and libFuzzer supplies `main`. Built normally (as `swift build` does for the whole package)
// it is a regression runner: `strata-fuzz FILE|DIR…` replays saved inputs through the same
// `fuzzOne`, and `strata-fuzz --make-corpus DIR` writes a seed corpus. See README.md.

@testable import StrataEngine

/// The decoder an input exercises, chosen by the low three bits of its first byte.
enum FuzzTarget: UInt8, CaseIterable, Sendable {
    /// `Manifest.decode` ([MAN-1]…[MAN-3]).
    case manifest = 0
    /// `WALReader.checkHeader` and `WALReader.read` ([WAL-1]…[WAL-3], [REC-3], [REC-4], [REC-7]).
    case wal = 1
    /// `SegmentReader` salvage, open, data blocks, hints, entries ([SEG-1]…[SEG-8]).
    case segment = 2
    /// `LogEntry.decode` / `decodeExactly` in a loop over back-to-back entries ([ENT-1]).
    case entries = 3
    /// `Engine.open` of a whole store directory built from the input ([REC-1]…[REC-7]).
    case engine = 4
    /// StrataStore's row decoder, `RowBytes` and `StoredRow.decode` ([ROW-1]).
    case row = 5
    /// The predicate format parser, and the checks and evaluation of what it parses.
    case predicate = 6
    /// The binary store's file ([BIN-1]…[BIN-3]): `BinaryStoreFile.decode`, its records and
    /// objects.
    case binary = 7
}

/// The flag bits (bits 3…7) of an input's first byte. Bit 3 means the same for every target;
/// the others depend on the target.
enum FuzzFlag {
    /// Recompute every checksum the (possibly damaged) layout lets us find before decoding, so
    /// mutations reach the parsers behind the CRCs. Applies to every target.
    static let fixChecksums: UInt8 = 0x08
    /// WAL: read it as the newest WAL (the only one allowed a torn tail).
    static let walNewest: UInt8 = 0x10
    /// WAL: read in repair mode.
    static let walRepair: UInt8 = 0x20
    /// Segment: expect the file number the segment header records (otherwise expect 5).
    static let segmentNumberFromHeader: UInt8 = 0x10
    /// Engine: open with `EngineOptions.repair`.
    static let engineRepair: UInt8 = 0x10
    /// Engine: open with `EngineOptions.readOnly`.
    static let engineReadOnly: UInt8 = 0x20
    /// Engine: after a successful open, commit one put, close, reopen and check the store.
    static let engineCommitAndReopen: UInt8 = 0x40
    /// Predicate: parse with format arguments and substitution variables.
    static let predicateArguments: UInt8 = 0x10
}

/// The decoded first byte of an input.
struct FuzzSelector: Sendable {
    /// Which decoder runs.
    let target: FuzzTarget
    /// The raw byte, for flag tests.
    let byte: UInt8

    init(_ byte: UInt8) {
        self.byte = byte
        target = FuzzTarget(rawValue: (byte & 0x07) % UInt8(FuzzTarget.allCases.count)) ?? .manifest
    }

    /// The selector byte for `target` with `flags`.
    static func byte(_ target: FuzzTarget, _ flags: UInt8 = 0) -> UInt8 { target.rawValue | (flags & 0xF8) }

    /// Whether `flag` is set.
    func has(_ flag: UInt8) -> Bool { byte & flag != 0 }
}

/// Runs one fuzz input: the first byte selects the decoder and its options, the rest is the
/// file (or, for the engine target, the store) to decode.
///
/// Every decoder may only return or throw ``StoreError``. A trap anywhere (an overflow, an
/// out-of-bounds index, a failed precondition) is a bug in the engine; a failed
/// ``fuzzCheck(_:_:)`` is a decoder handing out something SPEC.md says it must not.
func fuzzOne(_ bytes: [UInt8]) {
    guard let first = bytes.first else { return }
    let selector = FuzzSelector(first)
    let fix = selector.has(FuzzFlag.fixChecksums)
    let body = Array(bytes.dropFirst())
    switch selector.target {
    case .manifest:
        FuzzTargets.manifest(fix ? FuzzChecksums.fixManifest(body) : body)
    case .wal:
        FuzzTargets.wal(
            fix ? FuzzChecksums.fixWAL(body) : body, isNewest: selector.has(FuzzFlag.walNewest),
            repair: selector.has(FuzzFlag.walRepair))
    case .segment:
        FuzzTargets.segment(
            fix ? FuzzChecksums.fixSegment(body) : body,
            numberFromHeader: selector.has(FuzzFlag.segmentNumberFromHeader))
    case .entries:
        var fixed = body
        if fix { _ = FuzzChecksums.fixEntries(in: &fixed, from: 0, to: fixed.count) }
        FuzzTargets.entries(fixed)
    case .row:
        FuzzRows.row(fix ? FuzzRows.fixChecksum(body) : body)
    case .predicate:
        FuzzPredicates.predicate(body, withArguments: selector.has(FuzzFlag.predicateArguments))
    case .binary:
        FuzzBinary.binary(fix ? FuzzBinary.fix(body) : body)
    case .engine:
        FuzzTargets.engine(
            StoreImage(parsing: body, fixChecksums: fix), repair: selector.has(FuzzFlag.engineRepair),
            readOnly: selector.has(FuzzFlag.engineReadOnly),
            commitAndReopen: selector.has(FuzzFlag.engineCommitAndReopen))
    }
}

/// Stops the process with a message when an invariant that SPEC.md promises does not hold.
/// libFuzzer reports the stop as a crash and saves the input, like any trap in the engine.
func fuzzCheck(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() { fatalError("StrataFuzz check failed: \(message())") }
}

#if STRATA_FUZZ

/// libFuzzer's entry point: runs one input through ``fuzzOne(_:)``. Always returns 0.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzerEntry(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    fuzzOne(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

#else

/// The regression runner of a normal build: replays saved fuzz inputs, or writes a seed corpus.
///
/// ```
/// strata-fuzz FILE|DIR…            run every file (directories: every file inside) once
/// strata-fuzz --make-corpus DIR    write seed inputs for every target into DIR
/// ```
@main
struct FuzzReplay {
    /// Parses the arguments and runs; exits with status 2 on a usage or I/O error.
    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.first == "--make-corpus" {
            guard arguments.count == 2 else { usage() }
            do {
                let count = try FuzzCorpus.write(into: arguments[1])
                print("wrote \(count) seed inputs to \(arguments[1])")
            } catch {
                fail("making the corpus failed: \(error)")
            }
            return
        }
        guard !arguments.isEmpty, !arguments.contains(where: { $0.hasPrefix("-") }) else { usage() }
        var ran = 0
        for argument in arguments {
            let paths: [String]
            do {
                paths = try FuzzFiles.inputPaths(argument)
            } catch {
                fail("\(error)")
            }
            for path in paths {
                do {
                    fuzzOne(try FuzzFiles.read(path))
                } catch {
                    fail("\(error)")
                }
                ran += 1
            }
        }
        print("ran \(ran) input\(ran == 1 ? "" : "s") without a crash")
    }

    private static func usage() -> Never {
        fail("usage: strata-fuzz FILE|DIR…  |  strata-fuzz --make-corpus DIR")
    }

    private static func fail(_ message: String) -> Never {
        FuzzFiles.printError(message)
        FuzzFiles.exit(2)
    }
}

#endif

// compare: Strata side by side with its peers on the same work in the same run (issue 8).
// The engine level (StrataEngine, LevelDB, RocksDB, SQLite as a key/value table) with the
// machine's physical limits, and the object-graph level (ObjectGraph + StrataStore, SQLite via
// GRDB). Prints one table per level and writes JSON, markdown and an SVG chart of Strata's
// ratios under the results directory. See Benchmarks/README.md.

import BenchmarkSupport
import CompareEngine
import CompareObjectGraph
import Comparison
import Foundation
import Glibc

/// Which levels to run.
enum Level: String {
    case engine, objectgraph, all
}

/// The command line.
struct Settings {
    var level = Level.all
    var quick = false
    var engine = EngineComparisonSettings.standard
    var objectGraph = ObjectGraphComparisonSettings.standard
    var results = Settings.defaultResultsDirectory()
    var parent = "/tmp"

    static let usage = """
        usage: compare [--quick] [--level engine|objectgraph|all] [--results DIR] [--dir PATH]
                       [--keys N] [--reads N] [--commit-seconds S] [--raw-mib N] [--systems LIST] [--objects N]
                       [--workloads LIST]

          --quick             small sizes for CI: both levels in under a minute
          --level L           engine (with the physical limits), objectgraph, or all (default)
          --results DIR       where compare-<time>.{json,md,svg} and latest.{json,md,svg} go
                              (default: results/ at the repository root)
          --dir PATH          where the temporary stores go (default /tmp)
          --keys N            engine: keys per fill (default 1000000; --quick 100000)
          --reads N           engine: random gets per read pass (default 500000; --quick 100000)
          --commit-seconds S  engine: seconds per fsync-per-commit round (default 1.5; --quick 0.25)
          --raw-mib N         engine: MiB of the raw sequential write (default 256; --quick 32)
          --systems LIST      engine: comma-separated subset of strata,leveldb,rocksdb,sqlite
          --objects N         object graph: objects of the bulk insert (default 100000; --quick 10000)
          --workloads LIST    object graph: comma-separated subset of graph,saves,concurrent,reopen,binary,migration
                              (default all; graph is the bulk insert and the rows on what it saved)
        """

    init(arguments: [String]) throws {
        var reader = ArgumentReader(arguments, usage: Self.usage)
        // Sizes are applied after --quick, wherever it comes.
        var keys: Int?, reads: Int?, commitSeconds: Double?, rawMebibytes: Int?, systems: [String]?, objects: Int?
        var workloads: [String]?
        while let flag = reader.nextFlag() {
            switch flag {
            case "--quick": quick = true
            case "--level":
                let text = try reader.value(for: flag)
                guard let level = Level(rawValue: text.lowercased().replacingOccurrences(of: "-", with: "")) else {
                    throw BenchmarkError("--level \(text): expected engine, objectgraph or all\n\(Self.usage)")
                }
                self.level = level
            case "--results": results = try reader.value(for: flag)
            case "--dir": parent = try reader.value(for: flag)
            case "--keys": keys = try reader.positiveInteger(for: flag)
            case "--reads": reads = try reader.positiveInteger(for: flag)
            case "--commit-seconds": commitSeconds = try reader.positiveNumber(for: flag)
            case "--raw-mib": rawMebibytes = try reader.positiveInteger(for: flag)
            case "--systems": systems = try reader.value(for: flag).split(separator: ",").map(String.init)
            case "--objects": objects = try reader.positiveInteger(for: flag)
            case "--workloads":
                let list = try reader.value(for: flag).split(separator: ",").map(String.init)
                let known = ObjectGraphComparisonSettings.allWorkloads
                guard !list.isEmpty, list.allSatisfy(known.contains) else {
                    throw BenchmarkError("--workloads: expected a subset of \(known.joined(separator: ","))\n\(Self.usage)")
                }
                workloads = list
            case "-h", "--help":
                print(Self.usage)
                exit(0)
            default: throw BenchmarkError("unknown argument \(flag)\n\(Self.usage)")
            }
        }
        if quick {
            engine = .quick
            objectGraph = .quick
        }
        if let keys { engine.keys = keys }
        if let reads { engine.reads = reads }
        if let commitSeconds { engine.commitSeconds = commitSeconds }
        if let rawMebibytes { engine.rawMebibytes = rawMebibytes }
        if let systems { engine.systems = systems }
        if let objects { objectGraph.objects = objects }
        if let workloads { objectGraph.workloads = workloads }
    }

    /// `results` at the root of the repository this file is in, or in the current directory
    /// when the sources are not where they were built from.
    static func defaultResultsDirectory(source: String = #filePath) -> String {
        // <root>/Benchmarks/Sources/Compare/main.swift
        var root = URL(fileURLWithPath: source)
        for _ in 0..<4 { root.deleteLastPathComponent() }
        if FileManager.default.fileExists(atPath: root.appendingPathComponent("Benchmarks/Package.swift").path) {
            return root.appendingPathComponent("results").path
        }
        return FileManager.default.currentDirectoryPath + "/results"
    }
}

/// Prints `line` and flushes standard output at once, so that progress shows when it is piped.
func out(_ line: String) {
    print(line)
    fflush(nil)
}

/// Writes `contents` to `path`, replacing it.
func write(_ contents: Data, to path: String) throws {
    do {
        try contents.write(to: URL(fileURLWithPath: path), options: .atomic)
    } catch {
        throw BenchmarkError("could not write \(path): \(error)")
    }
}

func runCompare(_ settings: Settings, arguments: [String]) throws {
    let start = ContinuousClock.now
    let startDate = Date()
    do {
        try FileManager.default.createDirectory(atPath: settings.results, withIntermediateDirectories: true)
    } catch {
        throw BenchmarkError("could not create the results directory \(settings.results): \(error)")
    }
    let work = try TemporaryDirectory(in: settings.parent, prefix: "strata-compare-")
    defer { work.remove() }
    var machine = MachineFacts.current(workDirectory: work.path, resultsDirectory: settings.results)
    out("compare \(arguments.joined(separator: " ")): stores in \(work.path), results in \(settings.results)")
    for line in machine.lines.dropLast() { out(line) }
    out("load average at start: \(machine.loadAverageAtStart)\n")

    var rows: [ComparisonRow] = []
    var levelNotes: [String: [String]] = [:]
    var levelSeconds: [String: Double] = [:]
    let log: (String) -> Void = out

    // A level that fails is reported and the other still runs; the run then exits with status 2.
    var failures: [String] = []
    if settings.level != .objectgraph {
        out("== engine level (and physical limits) ==")
        levelNotes["engine"] = engineComparisonSetup(settings.engine)
        do {
            let directory = work.appending("engine")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let (engineRows, seconds) = try timed {
                try runEngineComparison(settings.engine, directory: directory, log: log)
            }
            rows += engineRows
            levelSeconds["engine"] = seconds
            out("engine level: \(fixed(seconds, 1)) s\n")
        } catch {
            failures.append("engine level: \(error)")
            out("compare: the engine level failed: \(error)\n")
        }
    }
    if settings.level != .engine {
        out("== object-graph level ==")
        do {
            let directory = work.appending("objectgraph")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let (graphRows, seconds) = try timed {
                try runObjectGraphComparison(settings.objectGraph, directory: directory, log: log)
            }
            rows += graphRows
            for level in ComparisonTable.levels(of: graphRows) { levelSeconds[level] = seconds }
            out("object-graph level: \(fixed(seconds, 1)) s\n")
        } catch {
            failures.append("object-graph level: \(error)")
            out("compare: the object-graph level failed: \(error)\n")
        }
    }
    machine.loadAverageAtEnd = MachineFacts.currentLoadAverage()

    let report = ComparisonReport(
        startedAt: ISO8601DateFormatter().string(from: startDate), seconds: seconds(ContinuousClock.now - start),
        arguments: arguments, machine: machine, levelNotes: levelNotes, levelSeconds: levelSeconds, rows: rows,
        failures: failures)
    for level in report.levels {
        out("== \(level) ==")
        out(ComparisonTable.text(rows, level: level, notes: levelNotes[level] ?? []))
        out("")
    }
    for line in machine.lines { out(line) }

    let stamp = DateFormatter()
    stamp.dateFormat = "yyyyMMdd-HHmmss"
    stamp.timeZone = TimeZone(identifier: "UTC")
    stamp.locale = Locale(identifier: "en_US_POSIX")
    let base = "\(settings.results)/compare-\(stamp.string(from: startDate))"
    let json = try report.json()
    let markdown = Data(ComparisonTable.markdownDocument(report).utf8)
    let subtitle = [
        "\(machine.cpuModel), \(machine.cores) cores, kernel \(machine.kernel); \(report.startedAt); "
            + "load \(machine.loadAverageAtStart) → \(machine.loadAverageAtEnd)",
        "compare \(arguments.joined(separator: " "))",
    ]
    let svg = Data(
        ComparisonChart.svg(rows, title: "Strata's ratio to each peer (above 1×: Strata better)", subtitle: subtitle).utf8)
    // latest.* only ever holds a complete run.
    for (suffix, data) in [("json", json), ("md", markdown), ("svg", svg)] {
        try write(data, to: "\(base).\(suffix)")
        if failures.isEmpty { try write(data, to: "\(settings.results)/latest.\(suffix)") }
    }
    out("wrote \(base).{json,md,svg}" + (failures.isEmpty ? " and \(settings.results)/latest.{json,md,svg}" : ""))
    out("total: \(fixed(report.seconds, 1)) s")
    if !failures.isEmpty {
        throw BenchmarkError(failures.joined(separator: "\n"))
    }
}

let arguments = Array(CommandLine.arguments.dropFirst())
do {
    try runCompare(try Settings(arguments: arguments), arguments: arguments)
} catch {
    FileHandle.standardError.write(Data("compare: \(error)\n".utf8))
    exit(2)
}

// objectgraph-probe: one phase of the object-graph comparison, alone, for instruction counts.
//
//     swift build -c release --package-path Benchmarks --product objectgraph-probe
//     valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*probePhase*' \
//         Benchmarks/.build/release/objectgraph-probe insert
//
// See Benchmarks/README.md, "Instructions per object".

import CompareObjectGraph
import Foundation
import Glibc

let usage = """
    usage: objectgraph-probe PHASE [--system strata|sqlite] [--objects N] [--count N] [--dir PATH]

      PHASE        insert | fault | fetch-indexed | fetch-unindexed | memory | delete | traverse
                   | saves | open | reopen | split | constraint (delete, traverse, open, reopen,
                   split and constraint: Strata only; reopen opens the store an open phase left in --dir, --count
                   times)
      --system     strata (default) or sqlite, the peer through GRDB
      --objects N  objects of the shop graph (default 20000)
      --count N    faults (default 2000), fetches (default 20) or parents traversed (default
                   1000) of a read phase; saves (default 200)
      --dir PATH   where the store goes (default /tmp/objectgraph-probe)
      --per-save N open, split, constraint: build the store in saves of N rows (customers with their orders), as the
                   comparison's 1M-row reopen and migration stores are, not in one save
    """

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data((message + "\n" + usage + "\n").utf8))
    exit(2)
}

var arguments = Array(CommandLine.arguments.dropFirst())
guard let first = arguments.first, let phase = ObjectGraphProbe.Phase(rawValue: first) else { fail("expected a phase") }
arguments.removeFirst()
var system = ObjectGraphProbe.System.strata
var objects = 20_000
var count: Int?
var directory = "/tmp/objectgraph-probe"
var perSave: Int?
while !arguments.isEmpty {
    let flag = arguments.removeFirst()
    guard !arguments.isEmpty else { fail("\(flag) needs a value") }
    let value = arguments.removeFirst()
    func positive() -> Int {
        guard let number = Int(value), number > 0 else { fail("\(flag) \(value): expected a positive integer") }
        return number
    }
    switch flag {
    case "--system":
        guard let chosen = ObjectGraphProbe.System(rawValue: value) else { fail("unknown system \(value)") }
        system = chosen
    case "--objects": objects = positive()
    case "--count": count = positive()
    case "--dir": directory = value
    case "--per-save": perSave = positive()
    default: fail("unknown argument \(flag)")
    }
}
let probe = ObjectGraphProbe(
    phase: phase, system: system, objects: objects, count: count ?? (phase == .fault ? 2000 : phase == .traverse ? 1000 : phase == .saves ? 200 : phase == .reopen ? 3 : 20), directory: directory, perSave: perSave)
do {
    let work = try probe.run()
    print("\(phase.rawValue) \(system.rawValue): \(work.operations) operations, \(work.rows) rows")
} catch {
    FileHandle.standardError.write(Data("objectgraph-probe: \(error)\n".utf8))
    exit(1)
}

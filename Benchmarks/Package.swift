// swift-tools-version: 6.1
import PackageDescription

// Benchmarks live in their own package so that the library never depends on a benchmark
// harness. Run from the repository root:
//
//     swift run -c release --package-path Benchmarks engine-report
//     swift run -c release --package-path Benchmarks compaction-report
//     swift run -c release --package-path Benchmarks objectgraph-report
//     swift run -c release --package-path Benchmarks compare
//     swift run -c release --package-path Benchmarks realdata-report
//     swift package --package-path Benchmarks benchmark
let package = Package(
    name: "StrataBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Strata", path: ".."),
        // `MallocInterposer` only: malloc statistics without jemalloc.
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        // The peers of `compare`: SQLite through GRDB.
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
    ],
    targets: [
        // Workloads shared by the package-benchmark suite and engine-report.
        .target(
            name: "BenchmarkSupport",
            dependencies: [.product(name: "StrataEngine", package: "Strata")]),
        .executableTarget(
            name: "EngineBenchmarks",
            dependencies: [
                "BenchmarkSupport",
                .product(name: "StrataEngine", package: "Strata"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/EngineBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]),
        .executableTarget(
            name: "engine-report",
            dependencies: ["BenchmarkSupport", .product(name: "StrataEngine", package: "Strata")],
            path: "Sources/EngineReport"),
        // Continuous backup to S3 measured (issue 20); needs an S3 server (Scripts/s3-server).
        .executableTarget(
            name: "replication-report",
            dependencies: [
                .product(name: "StrataEngine", package: "Strata"), .product(name: "StrataReplication", package: "Strata"),
                .product(name: "Strata", package: "Strata"), .product(name: "ObjectGraph", package: "Strata"),
            ],
            path: "Sources/ReplicationReport"),
        .executableTarget(
            name: "compaction-report",
            dependencies: ["BenchmarkSupport", .product(name: "StrataEngine", package: "Strata")],
            path: "Sources/CompactionReport"),
        .executableTarget(
            name: "objectgraph-report",
            dependencies: ["BenchmarkSupport", "CompareObjectGraph", .product(name: "Strata", package: "Strata")],
            path: "Sources/ObjectGraphReport"),
        // `compare`: Strata side by side with SQLite, LevelDB and RocksDB (issue 8).
        .systemLibrary(name: "CLevelDB", path: "Sources/CLevelDB", providers: [.apt(["libleveldb-dev"])]),
        .systemLibrary(name: "CRocksDB", path: "Sources/CRocksDB", providers: [.apt(["librocksdb-dev"])]),
        .target(name: "Comparison", path: "Sources/Comparison"),
        .target(
            name: "CompareEngine",
            dependencies: [
                "BenchmarkSupport", "Comparison", "CLevelDB", "CRocksDB",
                .product(name: "StrataEngine", package: "Strata"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Sources/CompareEngine"),
        // The malloc heap in use, for the probe's memory figures (glibc's mallinfo2).
        // DWARF 4: valgrind 3.19 (Debian 12) cannot read clang's default DWARF 5 for C.
        .target(name: "CHeapStats", path: "Sources/CHeapStats", cSettings: [.unsafeFlags(["-gdwarf-4"])]),
        .target(
            name: "CompareObjectGraph",
            dependencies: [
                "BenchmarkSupport", "Comparison", "CHeapStats",
                .product(name: "Strata", package: "Strata"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Sources/CompareObjectGraph"),
        // One phase of the object-graph comparison alone, for callgrind (issue 12).
        .executableTarget(
            name: "objectgraph-probe", dependencies: ["CompareObjectGraph"], path: "Sources/ObjectGraphProbe"),
        // Everyday fetches on a Chinook-like music store, Strata beside SQLite.
        .executableTarget(
            name: "realdata-report",
            dependencies: [
                "BenchmarkSupport",
                .product(name: "Strata", package: "Strata"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Sources/RealDataReport"),
        .executableTarget(
            name: "compare",
            dependencies: ["BenchmarkSupport", "Comparison", "CompareEngine", "CompareObjectGraph"],
            path: "Sources/Compare"),
    ],
    swiftLanguageModes: [.v6]
)

// swift-tools-version: 6.1
import CompilerPluginSupport
import PackageDescription

/// The macro tests build swift-syntax for the target. CI's ThreadSanitizer build, which runs
/// only the concurrency suites, sets `STRATA_CONCURRENCY_SUITES_ONLY` and leaves them out (the
/// sanitized swift-syntax was a third of that build); every other build has them.
let macroTests: [Target] = Context.environment["STRATA_CONCURRENCY_SUITES_ONLY"] != nil ? [] : [
    .testTarget(
        name: "StrataMacrosTests",
        dependencies: [
            "StrataMacros", "Strata", "StrataMacrosPlugin",
            .product(name: "SwiftSyntaxMacrosGenericTestSupport", package: "swift-syntax"),
            .product(name: "SwiftSyntaxMacroExpansion", package: "swift-syntax"),
        ]),
]

let package = Package(
    name: "Strata",
    products: [
        .library(name: "Strata", targets: ["Strata"]),
        .library(name: "StrataEngine", targets: ["StrataEngine"]),
        .library(name: "ObjectGraph", targets: ["ObjectGraph"]),
        .library(name: "StrataMacros", targets: ["StrataMacros"]),
        .library(name: "StrataReplication", targets: ["StrataReplication"]),
        .executable(name: "strata", targets: ["StrataTool"]),
        .executable(name: "strata-fuzz", targets: ["StrataFuzz"]),
        .executable(name: "strata-crash-worker", targets: ["StrataCrashWorker"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        .package(url: "https://github.com/swiftlang/swift-syntax", from: "603.0.1"),
    ],
    targets: [
        .systemLibrary(
            name: "CLZ4", path: "Sources/CLZ4", pkgConfig: "liblz4",
            providers: [.apt(["liblz4-dev"])]),
        .systemLibrary(
            name: "CISAL", path: "Sources/CISAL", pkgConfig: "libisal",
            providers: [.apt(["libisal-dev"])]),
        .systemLibrary(
            name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]),
        // One lock type for every module (Mutex, or a pthread mutex under -DSTRATA_TSAN).
        .target(name: "StrataSync"),
        .target(
            name: "StrataEngine",
            dependencies: [
                "CLZ4", "CISAL", "StrataSync", .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]),
        .target(name: "ObjectGraph", dependencies: ["StrataSync"]),
        // `@Entity` and its annotations: typed models declared once in Swift (issue 18). A
        // module of its own, so that only code that declares typed models builds swift-syntax.
        .macro(
            name: "StrataMacrosPlugin",
            dependencies: [
                .product(name: "SwiftSyntax", package: "swift-syntax"),
                .product(name: "SwiftSyntaxBuilder", package: "swift-syntax"),
                .product(name: "SwiftDiagnostics", package: "swift-syntax"),
                .product(name: "SwiftSyntaxMacros", package: "swift-syntax"),
                .product(name: "SwiftCompilerPlugin", package: "swift-syntax"),
            ]),
        .target(name: "StrataMacros", dependencies: ["ObjectGraph", "StrataMacrosPlugin"]),
        // The `strata demo` job, written with typed entities.
        .target(name: "StrataDemo", dependencies: ["Strata", "StrataMacros"]),
        .target(
            name: "Strata",
            dependencies: ["StrataEngine", "ObjectGraph", "StrataSync", .product(name: "Logging", package: "swift-log")]),
        // Backup, restore and replicas on S3-compatible object storage (issue 20), through libcurl.
        .target(name: "StrataReplication", dependencies: ["CCurl", "StrataEngine", "StrataSync"]),
        .executableTarget(
            name: "StrataTool",
            dependencies: [
                "Strata", "StrataDemo", "StrataSync", "StrataReplication",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tools/strata"),
        .executableTarget(
            name: "StrataFuzz", dependencies: ["StrataEngine", "Strata", "ObjectGraph"], path: "Tools/fuzz",
            exclude: ["README.md", "regressions"]),
        .executableTarget(name: "fetch-bench", dependencies: ["ObjectGraph"], path: "Tools/fetch-bench"),
        .target(name: "StrataChildProcess", path: "Tools/child-process"),
        .executableTarget(
            name: "StrataCrashWorker", dependencies: ["Strata", "StrataChildProcess"], path: "Tools/crash-worker",
            exclude: ["README.md"]),
        .testTarget(
            name: "StrataEngineTests",
            dependencies: [
                "StrataEngine", "StrataSync", .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"), .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]),
        .testTarget(name: "ObjectGraphTests", dependencies: ["ObjectGraph", "Strata", "StrataSync"]),
        .testTarget(name: "StrataReplicationTests", dependencies: ["StrataReplication", "Strata", "ObjectGraph", "StrataEngine"]),
        .testTarget(
            name: "StrataTests",
            dependencies: ["Strata", "StrataDemo", "StrataChildProcess", "StrataSync", .product(name: "Logging", package: "swift-log")]),
    ] + macroTests,
    swiftLanguageModes: [.v6]
)

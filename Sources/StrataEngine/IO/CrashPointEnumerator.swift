/// Crashes a scripted workload at every I/O operation it makes and checks what recovery finds.
///
/// The workload runs once on a fresh ``FaultInjectingFileSystem`` to count its operations
/// (``FaultInjectingFileSystem/operationCount``). Then, for each chosen operation index and
/// timing, it runs again from scratch with a crash armed there
/// (``FaultInjectingFileSystem/crash(atOperation:timing:)``); the halted file system is
/// copied once per ``FaultInjectingFileSystem/CrashPolicy``, each copy is crashed with its
/// policy, and `check` inspects it (typically: open the store, compare with a model of what
/// was acknowledged before the crash). A crash point is the triple (operation index, timing,
/// policy).
///
/// ```swift
/// let enumerator = CrashPointEnumerator(
///     name: "commits",
///     makeFileSystem: { FaultInjectingFileSystem() },
///     run: { fs in runCommits(on: fs) },           // returns what was acknowledged
///     check: { fs, acknowledged in problems(fs, acknowledged) })
/// let report = enumerator.enumerate(
///     operations: Array(1...enumerator.countOperations()), timings: [.before, .after],
///     policies: CrashPointEnumerator<Int>.standardPolicies(random: 3))
/// assert(report.violations.isEmpty)
/// ```
///
/// Deterministic: the workload must make the same operations on every run up to the crash
/// (no timers, background queues or clocks); the enumerator reports a violation when the
/// operation at the crash point differs from the clean run's.
public struct CrashPointEnumerator<Progress> {
    /// One crash point: where the crash was armed and what it kept.
    public struct Point: Hashable, Sendable, CustomStringConvertible {
        /// The 1-based index of the operation, counted from the start of the workload.
        public var operation: Int
        /// Whether the operation was performed before the halt.
        public var timing: FaultInjectingFileSystem.OperationTiming
        /// What the crash kept of the unsynced writes and directory changes.
        public var policy: FaultInjectingFileSystem.CrashPolicy

        /// Creates a point.
        public init(operation: Int, timing: FaultInjectingFileSystem.OperationTiming, policy: FaultInjectingFileSystem.CrashPolicy) {
            self.operation = operation
            self.timing = timing
            self.policy = policy
        }

        public var description: String { "crash \(timing) operation \(operation), keeping \(policy)" }
    }

    /// A crash point whose check found problems.
    public struct Violation: Sendable, CustomStringConvertible {
        /// Where the crash was.
        public var point: Point
        /// The operation the crash interrupted, as the clean run made it.
        public var record: FaultInjectingFileSystem.OperationRecord?
        /// What the check found.
        public var problems: [String]

        public var description: String {
            "\(point) (\(record.map(\.description) ?? "?")): " + problems.joined(separator: "; ")
        }
    }

    /// What one enumeration did and found.
    public struct Report: Sendable, CustomStringConvertible {
        /// The workload's name.
        public var workload: String
        /// Operations in one run of the workload without a crash.
        public var operations: Int
        /// Runs of the workload with a crash armed (one per operation index and timing).
        public var runs = 0
        /// Distinct crash points (operation index, timing, policy) checked.
        public var points = 0
        /// Distinct file-system states (file paths and bytes) the checks saw after a crash.
        public var distinctStates = 0
        /// Crash points whose check failed (at most the `maxViolations` given).
        public var violations: [Violation] = []
        /// Wall-clock time of the enumeration.
        public var elapsed: Duration = .zero

        public var description: String {
            "\(workload): \(operations) operations, \(runs) crashed runs, \(points) crash points, \(distinctStates) distinct states, \(violations.count) violations, \(elapsed)"
        }
    }

    /// The workload's name, for reports.
    public let name: String
    private let makeFileSystem: () -> FaultInjectingFileSystem
    private let run: (FaultInjectingFileSystem) -> Progress
    private let check: (FaultInjectingFileSystem, Progress) -> [String]

    /// Creates an enumerator.
    ///
    /// - Parameters:
    ///   - name: the workload's name, in the reports.
    ///   - makeFileSystem: a fresh file system in the workload's starting state (operations
    ///     made here are not crash points).
    ///   - run: runs the workload until it finishes or an operation fails, and returns what
    ///     was acknowledged so far. It must release everything that touches the file system
    ///     before returning.
    ///   - check: inspects a crashed file system given what was acknowledged before the
    ///     crash; returns the problems found (empty when recovery is right).
    public init(
        name: String, makeFileSystem: @escaping () -> FaultInjectingFileSystem,
        run: @escaping (FaultInjectingFileSystem) -> Progress,
        check: @escaping (FaultInjectingFileSystem, Progress) -> [String]
    ) {
        self.name = name
        self.makeFileSystem = makeFileSystem
        self.run = run
        self.check = check
    }

    /// The operations of one run of the workload without a crash, in order.
    public func cleanRun() -> (progress: Progress, operations: [FaultInjectingFileSystem.OperationRecord]) {
        let fs = makeFileSystem()
        let start = fs.operationCount
        let progress = run(fs)
        return (progress, Array(fs.operationLog.dropFirst(start)))
    }

    /// Crashes the workload at each of `operations` (1-based indices into a clean run) with
    /// each of `timings`, keeping what each of `policies(operation, timing)` chooses, and
    /// checks every crashed state. Stops collecting violations after `maxViolations`.
    public func enumerate(
        operations: [Int], timings: [FaultInjectingFileSystem.OperationTiming] = [.before, .after],
        policies: (Int, FaultInjectingFileSystem.OperationTiming) -> [FaultInjectingFileSystem.CrashPolicy],
        maxViolations: Int = 20
    ) -> Report {
        let clock = ContinuousClock()
        let started = clock.now
        let clean = cleanRun().operations
        var report = Report(workload: name, operations: clean.count)
        var points: Set<Point> = []
        var states: Set<Int> = []
        for operation in operations where operation >= 1 && operation <= clean.count {
            for timing in timings {
                let fs = makeFileSystem()
                let base = fs.operationCount
                fs.crash(atOperation: operation, timing: timing)
                let progress = run(fs)
                report.runs += 1
                let record = clean[operation - 1]
                var setupProblems: [String] = []
                let log = fs.operationLog
                if log.count < base + operation || log[base + operation - 1] != record {
                    let made = log.count >= base + operation ? log[base + operation - 1].description : "none"
                    setupProblems.append("the workload is not deterministic: operation \(operation) was \(made), in the clean run \(record)")
                } else if !fs.isHalted {
                    setupProblems.append("the file system did not halt at the armed crash")
                }
                for policy in policies(operation, timing) {
                    let point = Point(operation: operation, timing: timing, policy: policy)
                    guard points.insert(point).inserted else { continue }
                    let crashed = fs.copy()
                    crashed.crash(keeping: policy)
                    states.insert(Self.fingerprint(crashed))
                    let problems = setupProblems + check(crashed, progress)
                    if !problems.isEmpty && report.violations.count < maxViolations {
                        report.violations.append(Violation(point: point, record: record, problems: problems))
                    }
                }
            }
        }
        report.points = points.count
        report.distinctStates = states.count
        report.elapsed = clock.now - started
        return report
    }

    /// Every `stride`-th operation index of `1...count`, starting at a seeded offset in
    /// `1...stride`: a sample that still reaches every part of the workload.
    public static func sample(_ count: Int, every stride: Int, seed: UInt64) -> [Int] {
        guard stride > 1 else { return Array(1...max(count, 1)) }
        var random = CrashRandom(seed: seed)
        let first = 1 + random.below(stride)
        return Array(Swift.stride(from: first, through: count, by: stride))
    }

    /// Policies for one crash point: none, all, the first unsynced write of each file, the
    /// first write torn at a sector boundary, and `random` seeded random subsets (reordered,
    /// last write torn, alternately at sectors and at bytes) whose seeds depend on the point
    /// and `seed`.
    public static func standardPolicies(random: Int, seed: UInt64 = 0)
        -> (Int, FaultInjectingFileSystem.OperationTiming) -> [FaultInjectingFileSystem.CrashPolicy]
    {
        { operation, timing in
            var policies: [FaultInjectingFileSystem.CrashPolicy] = [.none, .all, .prefix(1), .tornPrefix(0, .sector(512))]
            for index in 0..<max(random, 0) {
                var mix = CrashRandom(seed: seed ^ UInt64(operation) << 20 ^ UInt64(index) << 4 ^ (timing == .after ? 1 : 0))
                policies.append(.random(seed: mix.next(), tearing: index % 2 == 0 ? .sector(512) : .byte))
            }
            return policies
        }
    }

    /// A hash of every file's path and bytes (within this process).
    static func fingerprint(_ fs: FaultInjectingFileSystem) -> Int {
        var hasher = Hasher()
        for path in fs.listFiles(under: "/") {
            hasher.combine(path)
            hasher.combine(fs.contents(of: path))
        }
        return hasher.finalize()
    }
}

import Foundation
import Glibc

/// Runs `body` and returns its result with the wall-clock seconds it took.
public func timed<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> (T, Double) {
    let start = ContinuousClock.now
    let result = try body()
    return (result, seconds(ContinuousClock.now - start))
}

/// `duration` in seconds.
public func seconds(_ duration: Duration) -> Double {
    let (whole, attoseconds) = duration.components
    return Double(whole) + Double(attoseconds) / 1e18
}

/// `duration` in whole nanoseconds (rounded down).
public func nanoseconds(_ duration: Duration) -> Int64 {
    let (whole, attoseconds) = duration.components
    return whole * 1_000_000_000 + attoseconds / 1_000_000_000
}

/// `value` with `digits` decimals.
public func fixed(_ value: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", value) }

/// The 1, 5 and 15 minute load averages from /proc/loadavg, or "unknown".
public func loadAverage() -> String {
    guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return "unknown" }
    return text.split(separator: " ").prefix(3).joined(separator: " ")
}

/// CPU seconds (user plus system) this process has used so far, over all its threads.
public func processCPUSeconds() -> Double {
    var usage = rusage()
    guard getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage) == 0 else { return 0 }
    func value(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return value(usage.ru_utime) + value(usage.ru_stime)
}

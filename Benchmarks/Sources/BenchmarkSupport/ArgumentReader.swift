/// Reads a report's command-line flags one at a time; errors carry the report's usage text.
///
/// For example:
///
/// ```swift
/// var reader = ArgumentReader(CommandLine.arguments.dropFirst(), usage: usage)
/// while let flag = reader.nextFlag() {
///     switch flag {
///     case "--keys": keys = try reader.positiveInteger(for: flag)
///     default: throw reader.unknown(flag)
///     }
/// }
/// ```
public struct ArgumentReader {
    private var rest: ArraySlice<String>
    /// The report's usage text, appended to every error.
    public let usage: String

    /// Reads `arguments` (without the program name).
    public init<S: Sequence<String>>(_ arguments: S, usage: String) {
        rest = ArraySlice(arguments)
        self.usage = usage
    }

    /// The next flag, or `nil` when all are read.
    public mutating func nextFlag() -> String? { rest.popFirst() }

    /// The value that follows `flag`.
    public mutating func value(for flag: String) throws -> String {
        guard let next = rest.popFirst() else { throw BenchmarkError("\(flag) needs a value\n\(usage)") }
        return next
    }

    /// The positive number that follows `flag`.
    public mutating func positiveNumber(for flag: String) throws -> Double {
        let text = try value(for: flag)
        guard let number = Double(text), number > 0 else {
            throw BenchmarkError("\(flag) \(text): expected a positive number\n\(usage)")
        }
        return number
    }

    /// The positive integer that follows `flag`.
    public mutating func positiveInteger(for flag: String) throws -> Int {
        let text = try value(for: flag)
        guard let number = Int(text), number > 0 else {
            throw BenchmarkError("\(flag) \(text): expected a positive integer\n\(usage)")
        }
        return number
    }
}

import Foundation

/// A function a ``FetchExpression/function(_:_:)`` applies to the values of its argument
/// (Core Data's `NSExpression(forFunction:arguments:)` names, such as `sum:`).
public enum FetchFunction: String, Sendable, Hashable, CaseIterable {
    /// The number of non-null values.
    case count = "count:"
    /// The sum of the numbers (0 when there are none).
    case sum = "sum:"
    /// The smallest value (null when there is none).
    case min = "min:"
    /// The largest value (null when there is none).
    case max = "max:"
    /// The arithmetic mean of the numbers (null when there are none).
    case average = "average:"
    /// The median of the numbers (the mean of the middle two for an even count).
    case median = "median:"
    /// The population standard deviation of the numbers.
    case stddev = "stddev:"
}

/// A collection operator in a key path (`employees.@count`, `employees.@avg.salary`).
public enum FetchCollectionOperator: String, Sendable, Hashable, CaseIterable {
    /// `@count`: the number of elements.
    case count = "@count"
    /// `@sum`: the sum of the numbers.
    case sum = "@sum"
    /// `@avg`: the mean of the numbers.
    case avg = "@avg"
    /// `@min`: the smallest value.
    case min = "@min"
    /// `@max`: the largest value.
    case max = "@max"
    /// `@distinctUnionOfObjects`: the distinct values, in first-seen order.
    case distinctUnionOfObjects = "@distinctUnionOfObjects"
}

/// An index applied to a collection: `[2]`, `[FIRST]`, `[LAST]` or `[SIZE]`.
public enum FetchIndex: Sendable, Hashable {
    /// The element at a zero-based position (null when out of range).
    case position(Int)
    /// The first element (null when empty).
    case first
    /// The last element (null when empty).
    case last
    /// The number of elements.
    case size
}

/// An expression of the fetch language (Core Data's `NSExpression`, as an inspectable tree).
///
/// For example:
///
/// ```swift
/// let total = FetchExpression.function(.sum, [.keyPath("employees.salary")])
/// let named = FetchExpression.keyPath("department.name")
/// let jane = FetchExpression.subquery(.keyPath("employees"), variable: "e",
///     .comparison(.variable("e", "name"), .equal, .constant(.attribute("Jane"))))
/// ```
///
/// Key paths may contain collection operators (`@count`, `@sum`, `@avg`, `@min`, `@max`,
/// `@distinctUnionOfObjects`); a key path through a to-many relationship yields a
/// ``FetchValue/collection(_:)`` of the values reached.
public indirect enum FetchExpression: Sendable, Hashable {
    /// A constant value.
    case constant(FetchValue)
    /// The object being evaluated (`SELF`).
    case evaluatedObject
    /// A key path read from the object being evaluated.
    case keyPath(String)
    /// A variable (`$name`), bound by ``FetchPredicate/substituting(_:)``, by the
    /// evaluation's variables or by a subquery.
    case variable(String)
    /// A key path read from the value of another expression (`$x.name`, `SUBQUERY(...).@count`).
    case member(FetchExpression, String)
    /// An element of a collection, or its size.
    case index(FetchExpression, FetchIndex)
    /// A list of expressions (`{1, 2, 3}`), as used by `IN` and `BETWEEN`.
    case aggregate([FetchExpression])
    /// A function of the values of its arguments.
    case function(FetchFunction, [FetchExpression])
    /// The elements of a collection for which a predicate holds, each bound to a variable
    /// (and also the evaluated object of the inner predicate).
    case subquery(FetchExpression, variable: String, FetchPredicate)

    /// A variable followed by a key path (`$x.name`), or the bare variable for `nil`.
    public static func variable(_ name: String, _ keyPath: String?) -> FetchExpression {
        guard let keyPath else { return .variable(name) }
        return .member(.variable(name), keyPath)
    }

    /// The key paths the expression reads from the evaluated object, with collection
    /// operators removed (`employees.@avg.age` reads `employees.age`).
    public var keyPaths: Set<String> {
        switch self {
        case .constant, .evaluatedObject, .variable: return []
        case .keyPath(let path): return [Self.strippingOperators(path)]
        case .member(let base, _), .index(let base, _): return base.keyPaths
        case .aggregate(let parts), .function(_, let parts): return parts.reduce(into: []) { $0.formUnion($1.keyPaths) }
        case .subquery(let collection, _, _): return collection.keyPaths
        }
    }

    /// Calls `body` with each key path of ``keyPaths``, without building the set.
    func forEachKeyPath(_ body: (String) throws -> Void) rethrows {
        switch self {
        case .constant, .evaluatedObject, .variable: return
        case .keyPath(let path): try body(Self.strippingOperators(path))
        case .member(let base, _), .index(let base, _): try base.forEachKeyPath(body)
        case .aggregate(let parts), .function(_, let parts): for part in parts { try part.forEachKeyPath(body) }
        case .subquery(let collection, _, _): try collection.forEachKeyPath(body)
        }
    }

    /// The variables the expression reads that no subquery inside it binds.
    public var freeVariables: Set<String> {
        switch self {
        case .constant, .evaluatedObject, .keyPath: return []
        case .variable(let name): return [name]
        case .member(let base, _), .index(let base, _): return base.freeVariables
        case .aggregate(let parts), .function(_, let parts): return parts.reduce(into: []) { $0.formUnion($1.freeVariables) }
        case .subquery(let collection, let variable, let predicate):
            return collection.freeVariables.union(predicate.freeVariables.subtracting([variable]))
        }
    }

    /// The expression with variables replaced by values; variables without a value stay.
    public func substituting(_ variables: [String: FetchValue]) -> FetchExpression {
        substituting { variables[$0] }
    }

    /// The expression with each variable replaced by `value(name)`, where that is not `nil`;
    /// a subquery's own variable is left to it inside the subquery.
    func substituting(_ value: (String) -> FetchValue?) -> FetchExpression {
        switch self {
        case .constant, .evaluatedObject, .keyPath: return self
        case .variable(let name): return value(name).map(FetchExpression.constant) ?? self
        case .member(let base, let path): return .member(base.substituting(value), path)
        case .index(let base, let index): return .index(base.substituting(value), index)
        case .aggregate(let parts): return .aggregate(parts.map { $0.substituting(value) })
        case .function(let function, let parts): return .function(function, parts.map { $0.substituting(value) })
        case .subquery(let collection, let variable, let predicate):
            return .subquery(collection.substituting(value), variable: variable, predicate.substituting { $0 == variable ? nil : value($0) })
        }
    }

    /// `employees.@avg.age` → `employees.age`; `employees.@count` → `employees`.
    static func strippingOperators(_ path: String) -> String {
        guard path.containsByte(UInt8(ascii: "@")) else { return path }
        return path.split(separator: ".").filter { !$0.hasPrefix("@") }.joined(separator: ".")
    }
}

extension String {
    /// The dot-separated components of a key path (`album.artist.name` → `album`, `artist`,
    /// `name`), empty ones skipped as `split(separator:)` skips them, cut from the path's UTF-8
    /// bytes in one pass: a split through `String.UTF8View` indices or by `Character` costs
    /// more than the model lookups the components feed (a name of up to 15 bytes is made
    /// without an allocation).
    var keyPathComponents: [String] { keys(keepingEmpty: false) }

    /// The components of a dotted key path, cut at each `.` of the UTF-8 bytes (a dot is never
    /// part of a longer character, and always separates keys); empty ones kept or skipped.
    private func keys(keepingEmpty: Bool) -> [String] {
        var path = self
        return path.withUTF8 { bytes -> [String] in
            var keys: [String] = []
            var start = 0
            for index in 0...bytes.count where index == bytes.count || bytes[index] == UInt8(ascii: ".") {
                if keepingEmpty || index > start {
                    keys.append(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
                }
                start = index + 1
            }
            return keys
        }
    }
}

extension String {
    /// The keys of a dotted key path (`"album.artist.name"`: `album`, `artist`, `name`), every
    /// one kept, empty ones included: the split of `split(separator: ".",
    /// omittingEmptySubsequences: false)`, cut from the UTF-8 bytes in one pass (a dot is
    /// never part of a longer character, and always separates keys), where a split on
    /// `Character`s breaks graphemes and costs thousands of instructions for a short path.
    package var dottedKeys: [String] { keys(keepingEmpty: true) }
}

extension String {
    /// Whether the UTF-8 bytes hold `byte` (`"album.title".containsByte(UInt8(ascii: "."))`),
    /// searched in the string's own storage: a search through `utf8.contains`, one iterator
    /// step per byte, costs some 30 instructions a byte, and key paths are tested so once or
    /// twice per fetch (and per row where a predicate is interpreted).
    @inline(__always)
    package func containsByte(_ byte: UInt8) -> Bool {
        utf8.withContiguousStorageIfAvailable { $0.contains(byte) } ?? utf8.contains(byte)
    }
}

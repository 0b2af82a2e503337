import Foundation

/// A named, typed expression in a dictionary fetch's ``FetchRequest/propertiesToFetch``
/// (Core Data's `NSExpressionDescription`).
///
/// For example:
///
/// ```swift
/// var request = FetchRequest(entityName: "Person")
/// request.resultType = .dictionary
/// request.propertiesToFetch = ["department.name", .aggregate(.sum, of: "salary", as: "payroll", type: .double)]
/// request.propertiesToGroupBy = ["department.name"]
/// request.havingPredicate = try FetchPredicate(format: "payroll > 100")
/// ```
public struct FetchExpressionDescription: Sendable, Hashable, CustomStringConvertible {
    /// The key of the value in each result dictionary.
    public var name: String
    /// The expression evaluated for each result.
    public var expression: FetchExpression
    /// The type results are converted to (Core Data's `expressionResultType`); `nil`
    /// keeps the computed type (sums of integers are 64-bit integers, means doubles or
    /// decimals).
    public var resultType: AttributeType?

    /// Creates a description.
    public init(name: String, expression: FetchExpression, resultType: AttributeType? = nil) {
        self.name = name
        self.expression = expression
        self.resultType = resultType
    }

    /// Whether the expression aggregates over the rows of a group: a function
    /// (`sum:`, `count:`, …) at its top.
    public var isAggregate: Bool {
        if case .function = expression { return true }
        return false
    }

    /// The name, the expression and the type.
    public var description: String { "\(name) = \(expression)\(resultType.map { " as \($0)" } ?? "")" }

    /// Converts a computed value to ``resultType``.
    func converted(_ value: FetchValue) -> FetchValue {
        guard let resultType, case .attribute(let attribute) = value, !attribute.isNull else { return value }
        if let direct = attribute.converted(to: resultType) { return .attribute(direct) }
        guard let number = attribute.doubleValue else { return value }
        switch resultType {
        case .integer16: return Int16(exactly: number.rounded(.towardZero)).map { .attribute(.int16($0)) } ?? value
        case .integer32: return Int32(exactly: number.rounded(.towardZero)).map { .attribute(.int32($0)) } ?? value
        case .integer64: return Int64(exactly: number.rounded(.towardZero)).map { .attribute(.int64($0)) } ?? value
        case .double: return .attribute(.double(number))
        case .float: return .attribute(.float(Float(number)))
        case .decimal:
            if case .decimal = attribute { return value }
            return .attribute(.decimal(Decimal(number)))
        default: return value
        }
    }
}

/// One entry of ``FetchRequest/propertiesToFetch`` or ``FetchRequest/propertiesToGroupBy``:
/// a key path (written as a string literal) or a named expression.
public enum FetchProperty: Sendable, Hashable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// An attribute, or a key path through to-one relationships; a relationship yields
    /// the destination's object ID. The result key is the key path itself.
    case keyPath(String)
    /// A named expression.
    case expression(FetchExpressionDescription)

    /// A string literal is a key path.
    public init(stringLiteral value: String) { self = .keyPath(value) }

    /// `function(keyPath)` under `name`, such as the sum of salaries.
    public static func aggregate(_ function: FetchFunction, of keyPath: String, as name: String, type: AttributeType? = nil) -> FetchProperty {
        .expression(FetchExpressionDescription(name: name, expression: .function(function, [.keyPath(keyPath)]), resultType: type))
    }

    /// The key of the property's value in a result dictionary.
    public var name: String {
        switch self {
        case .keyPath(let path): return path
        case .expression(let description): return description.name
        }
    }

    /// The property as an expression.
    public var expression: FetchExpression {
        switch self {
        case .keyPath(let path): return .keyPath(path)
        case .expression(let description): return description.expression
        }
    }

    /// Whether the property aggregates over a group's rows.
    public var isAggregate: Bool {
        if case .expression(let description) = self { return description.isAggregate }
        return false
    }

    /// The key paths the property reads from each row.
    public var keyPaths: Set<String> { expression.keyPaths }

    /// The name.
    public var description: String { name }
}

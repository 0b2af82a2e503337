import Foundation
import StrataSync

/// A recursive-descent parser for Core Data's predicate format syntax.
///
/// Precedence, loosest first: `OR`/`||`, `AND`/`&&`, `NOT`/`!`, comparisons. `AND` and
/// `OR` chains are left-associative and become one ``FetchPredicate/and(_:)`` or
/// ``FetchPredicate/or(_:)`` node; parentheses always make a node of their own.
struct FetchPredicateParser {
    private let source: String
    private let tokens: [FetchPredicateToken]
    private var index = 0
    private let arguments: [FetchValue]
    private var nextArgument = 0
    /// Values for `$variables`, substituted while parsing; `nil` keeps variables in the tree.
    private let variables: [String: FetchValue]?
    /// Variables bound by enclosing subqueries.
    private var bound: [String] = []
    /// Whether format arguments become placeholders (``FormatTemplates``) instead of values.
    private let templating: Bool
    /// The specifiers of the format arguments met while templating, in order.
    private(set) var specifiers: [Character] = []
    /// The format arguments met while templating that are the right side of an `IN`,
    /// which must be collections or strings.
    private(set) var collectionArguments: [Int] = []
    /// How many nested constructs (parentheses, `NOT`s, braces, subqueries, functions,
    /// casts, indexes, members) enclose the current position: bounded by
    /// ``FetchPredicate/maximumDepth`` so that the recursive descent cannot overflow.
    private var depth = 0

    init(_ source: String, arguments: [FetchValue], variables: [String: FetchValue]?, templating: Bool = false) throws {
        self.source = source
        self.tokens = try FetchPredicateLexer.tokenize(source)
        self.arguments = arguments
        self.variables = variables
        self.templating = templating
    }

    /// Parses the whole string as a predicate.
    mutating func parsePredicate() throws -> FetchPredicate {
        let predicate = try parseOr()
        try expectEnd()
        try checkDepth(of: .predicate(predicate))
        return predicate
    }

    /// Parses the whole string as an expression.
    mutating func parseExpression() throws -> FetchExpression {
        let expression = try parseExpressionTerm()
        try expectEnd()
        try checkDepth(of: .expression(expression))
        return expression
    }

    /// The tree's own nesting must be within the bound too: an index or a member chain
    /// nests without recursion in the parser.
    private func checkDepth(of root: FetchPredicate.DepthNode) throws {
        do {
            try FetchPredicate.checkDepth(from: root)
        } catch {
            throw Self.syntaxError(
                "The predicate nests deeper than \(FetchPredicate.maximumDepth) levels.", at: 0, in: source)
        }
    }

    /// Enters one nested construct at `token`; the caller leaves it (`depth -= 1`).
    private mutating func enter(_ token: FetchPredicateToken) throws {
        depth += 1
        guard depth <= FetchPredicate.maximumDepth else {
            throw error(
                "The predicate nests deeper than \(FetchPredicate.maximumDepth) levels (parentheses, NOT, braces, subqueries, functions, indexes).",
                at: token)
        }
    }

    private mutating func expectEnd() throws {
        guard current.kind == .end else { throw error("Unexpected \(describe(current)) after a complete predicate.", at: current) }
        if !templating, nextArgument < arguments.count {
            throw Self.syntaxError(
                "\(arguments.count) arguments were given but the format uses \(nextArgument).", at: current.offset, in: source)
        }
    }

    // MARK: Errors

    /// A ``ObjectGraphError/Code/malformedPredicate`` error whose message shows the format
    /// string with a caret under the offending character.
    static func syntaxError(_ message: String, at offset: Int, in source: String) -> ObjectGraphError {
        // A long format is quoted around the offending position only.
        let characters = Array(source.replacingOccurrences(of: "\n", with: " "))
        let window = 60
        let start = min(characters.count, offset > window ? offset - window : 0)
        let end = min(characters.count, offset + window)
        let head = start > 0 ? "…" : ""
        let line = head + String(characters[start..<max(start, end)]) + (end < characters.count ? "…" : "")
        let caret = String(repeating: " ", count: offset - start + head.count) + "^"
        return ObjectGraphError(.malformedPredicate, "\(message) (at offset \(offset))\n  \(line)\n  \(caret)", offset: offset)
    }

    private func error(_ message: String, at token: FetchPredicateToken) -> ObjectGraphError {
        Self.syntaxError(message, at: token.offset, in: source)
    }

    private func describe(_ token: FetchPredicateToken) -> String {
        switch token.kind {
        case .identifier(let name, let escaped): return "\"\(escaped ? "#" : "")\(name)\""
        case .collectionOperator(let name): return "\"\(name)\""
        case .string(let text): return "string \(FetchExpression.quoted(text))"
        case .integer(let value): return "number \(value)"
        case .float(let value): return "number \(value)"
        case .variable(let name): return "\"$\(name)\""
        case .format(let c): return "\"%\(c)\""
        case .symbol(let s): return "\"\(s)\""
        case .end: return "end of input"
        }
    }

    // MARK: Tokens

    private var current: FetchPredicateToken { tokens[index] }
    private func peek(_ ahead: Int) -> FetchPredicateToken { tokens[min(index + ahead, tokens.count - 1)] }
    private mutating func advance() -> FetchPredicateToken {
        let token = tokens[index]
        if index < tokens.count - 1 { index += 1 }
        return token
    }

    private mutating func expect(_ symbol: String, _ context: String) throws {
        guard current.isSymbol(symbol) else { throw error("Expected \"\(symbol)\" \(context), found \(describe(current)).", at: current) }
        index += 1
    }

    // MARK: Predicates

    private mutating func parseOr() throws -> FetchPredicate {
        var parts = [try parseAnd()]
        while current.keyword == "OR" || current.isSymbol("||") {
            let op = advance()
            guard current.kind != .end else { throw error("Expected a predicate after \(describe(op)).", at: current) }
            parts.append(try parseAnd())
        }
        return parts.count == 1 ? parts[0] : .or(parts)
    }

    private mutating func parseAnd() throws -> FetchPredicate {
        var parts = [try parseNot()]
        while current.keyword == "AND" || current.isSymbol("&&") {
            let op = advance()
            guard current.kind != .end else { throw error("Expected a predicate after \(describe(op)).", at: current) }
            parts.append(try parseNot())
        }
        return parts.count == 1 ? parts[0] : .and(parts)
    }

    private mutating func parseNot() throws -> FetchPredicate {
        if current.keyword == "NOT" || current.isSymbol("!") {
            try enter(current)
            defer { depth -= 1 }
            index += 1
            return .not(try parseNot())
        }
        return try parsePrimaryPredicate()
    }

    private mutating func parsePrimaryPredicate() throws -> FetchPredicate {
        if current.isSymbol("(") {
            try enter(current)
            defer { depth -= 1 }
            let open = advance()
            let inner = try parseOr()
            guard current.isSymbol(")") else {
                throw error(current.kind == .end
                    ? "Unbalanced parentheses: the \"(\" at offset \(open.offset) is never closed."
                    : "Expected \")\" or an operator, found \(describe(current)).", at: current)
            }
            index += 1
            return inner
        }
        switch current.keyword {
        case "TRUEPREDICATE": index += 1; return .value(true)
        case "FALSEPREDICATE": index += 1; return .value(false)
        default: break
        }
        if current.isSymbol(")") { throw error("Unbalanced parentheses: \")\" without a matching \"(\".", at: current) }
        return try parseComparison()
    }

    private mutating func parseComparison() throws -> FetchPredicate {
        var modifier = FetchComparisonModifier.direct
        var negate = false
        switch current.keyword {
        case "ANY", "SOME": modifier = .any; index += 1
        case "ALL": modifier = .all; index += 1
        case "NONE": modifier = .any; negate = true; index += 1
        default: break
        }
        let lhs = try parseExpressionTerm()
        let opToken = current
        guard let op = try parseOperator() else {
            if current.kind == .end { throw error("Expected a comparison operator after \(lhs), found end of input.", at: current) }
            throw error("Unknown operator \(describe(opToken)); expected ==, !=, <, <=, >, >=, IN, BETWEEN, BEGINSWITH, ENDSWITH, CONTAINS, LIKE or MATCHES.", at: opToken)
        }
        let options = try parseOptions()
        guard current.kind != .end else { throw error("Expected an expression after \(describe(opToken)).", at: current) }
        let rhsToken = current
        let rhs = try parseExpressionTerm()
        if op == .in, templating, case .variable = rhs, case .format = rhsToken.kind {
            collectionArguments.append(specifiers.count - 1)
        }
        if op == .in, case .constant(.attribute(let value)) = rhs, !value.isNull, value.stringValue == nil {
            throw error("IN needs a collection on its right, such as {1, 2} or an array argument; found the single value \(value).", at: rhsToken)
        }
        if op == .between, case .aggregate(let bounds) = rhs, bounds.count != 2 {
            throw error("BETWEEN needs exactly two bounds, as in {1, 10}; found \(bounds.count).", at: rhsToken)
        }
        let comparison = FetchPredicate.comparison(lhs, op, rhs, modifier: modifier, options: options)
        return negate ? .not(comparison) : comparison
    }

    private mutating func parseOperator() throws -> FetchComparisonOperator? {
        let token = current
        let op: FetchComparisonOperator?
        switch token.kind {
        case .symbol("="), .symbol("=="): op = .equal
        case .symbol("!="), .symbol("<>"): op = .notEqual
        case .symbol("<"): op = .lessThan
        case .symbol("<="), .symbol("=<"): op = .lessThanOrEqual
        case .symbol(">"): op = .greaterThan
        case .symbol(">="), .symbol("=>"): op = .greaterThanOrEqual
        default:
            switch token.keyword {
            case "IN": op = .in
            case "BEGINSWITH": op = .beginsWith
            case "ENDSWITH": op = .endsWith
            case "CONTAINS": op = .contains
            case "LIKE": op = .like
            case "MATCHES": op = .matches
            case "BETWEEN": op = .between
            default: op = nil
            }
        }
        if op != nil { index += 1 }
        return op
    }

    /// `[c]`, `[d]`, `[cd]` (and `[n]`, accepted and ignored) right after an operator.
    private mutating func parseOptions() throws -> ComparisonOptions {
        guard current.isSymbol("[") else { return [] }
        let open = advance()
        guard case .identifier(let letters, false) = current.kind else {
            throw error("Expected comparison options such as [c], [d] or [cd] after the operator.", at: current)
        }
        var options: ComparisonOptions = []
        for letter in letters.lowercased() {
            switch letter {
            case "c": options.insert(.caseInsensitive)
            case "d": options.insert(.diacriticInsensitive)
            case "n", "l": break
            default: throw error("Unknown comparison option \"\(letter)\"; use c, d or cd.", at: current)
            }
        }
        index += 1
        guard current.isSymbol("]") else { throw error("Expected \"]\" to close the options opened at offset \(open.offset).", at: current) }
        index += 1
        return options
    }

    // MARK: Expressions

    private mutating func parseExpressionTerm() throws -> FetchExpression {
        try enter(current)
        var levels = 1
        defer { depth -= levels }
        var expression = try parsePrimaryExpression()
        while true {
            if current.isSymbol("[") {
                try enter(current)
                levels += 1
                let open = advance()
                let position: FetchIndex
                switch current.kind {
                case .integer(let n) where n >= 0 && n <= Int64(Int.max): position = .position(Int(n))
                case .format:
                    guard case .attribute(let value) = try takeArgument(current), let n = value.integerValue, n >= 0 else {
                        throw error("An index argument must be a non-negative integer.", at: current)
                    }
                    position = .position(Int(n))
                default:
                    switch current.keyword {
                    case "FIRST": position = .first
                    case "LAST": position = .last
                    case "SIZE": position = .size
                    default: throw error("Expected an index, FIRST, LAST or SIZE inside \"[\", found \(describe(current)).", at: current)
                    }
                }
                index += 1
                guard current.isSymbol("]") else { throw error("Expected \"]\" to close the index opened at offset \(open.offset).", at: current) }
                index += 1
                expression = .index(expression, position)
            } else if current.isSymbol(".") {
                index += 1
                let path = try parseKeyPathTail(first: try keyPathComponent())
                if case .keyPath(let base) = expression {
                    expression = .keyPath(base + "." + path)
                } else if expression == .evaluatedObject {
                    // `SELF.name` is the key path `name` of the evaluated object.
                    expression = .keyPath(path)
                } else {
                    try enter(current)
                    levels += 1
                    expression = .member(expression, path)
                }
            } else {
                return expression
            }
        }
    }

    /// One component of a key path: a name (escaped or not) or a collection operator.
    private mutating func keyPathComponent() throws -> String {
        switch current.kind {
        case .identifier(let name, let escaped):
            if !escaped, let keyword = current.keyword, FetchPredicateLexer.reservedWords.contains(keyword), keyword != "SELF" {
                throw error("\"\(name)\" is a reserved word; write #\(name) to use it as a key.", at: current)
            }
            index += 1
            return name
        case .collectionOperator(let name):
            guard FetchCollectionOperator(rawValue: name) != nil else {
                throw error("Unknown collection operator \"\(name)\"; use @count, @sum, @avg, @min, @max or @distinctUnionOfObjects.", at: current)
            }
            index += 1
            return name
        default:
            throw error("Expected a key after \".\", found \(describe(current)).", at: current)
        }
    }

    /// The rest of a dotted key path after its first component.
    private mutating func parseKeyPathTail(first: String) throws -> String {
        var path = first
        while current.isSymbol("."), peek(1).kind != .end, !peek(1).isSymbol("[") {
            if case .identifier = peek(1).kind {} else if case .collectionOperator = peek(1).kind {} else { break }
            index += 1
            path += "." + (try keyPathComponent())
        }
        return path
    }

    private mutating func parsePrimaryExpression() throws -> FetchExpression {
        let token = current
        switch token.kind {
        case .end:
            throw error("Expected an expression, found end of input.", at: token)
        case .string(let text):
            index += 1
            return .constant(.attribute(.string(text)))
        case .integer(let value):
            index += 1
            return .constant(.attribute(.int64(value)))
        case .float(let value):
            index += 1
            return .constant(.attribute(.double(value)))
        case .symbol("-"):
            index += 1
            switch current.kind {
            case .integer(let value): index += 1; return .constant(.attribute(.int64(-value)))
            case .float(let value): index += 1; return .constant(.attribute(.double(-value)))
            default: throw error("Expected a number after \"-\"; arithmetic is not supported.", at: current)
            }
        case .symbol("{"):
            return try parseAggregate()
        case .variable(let name):
            index += 1
            if bound.contains(name) { return .variable(name) }
            guard let variables else { return .variable(name) }
            guard let value = variables[name] else {
                throw error("Unknown variable $\(name); the substitution variables are \(variables.keys.sorted().map { "$" + $0 }.joined(separator: ", ")).", at: token)
            }
            return .constant(value)
        case .format(let specifier):
            if templating {
                // A key path argument shapes the tree; only values become placeholders.
                guard specifier != "K" else { throw FormatTemplates.Unavailable() }
                index += 1
                specifiers.append(specifier)
                return .variable(FormatTemplates.placeholder(specifiers.count - 1))
            }
            let value = try takeArgument(token)
            index += 1
            if specifier == "K" {
                guard case .attribute(.string(let path)) = value, !path.isEmpty else {
                    throw error("%K needs a key path string argument, got \(value).", at: token)
                }
                return .keyPath(path)
            }
            return .constant(value)
        case .collectionOperator:
            throw error("A collection operator must follow a key path, as in employees.@count.", at: token)
        case .identifier(let name, let escaped):
            if escaped { index += 1; return .keyPath(try parseKeyPathTail(first: name)) }
            switch name.uppercased() {
            case "NIL", "NULL": index += 1; return .constant(FetchValue.null)
            case "TRUE", "YES": index += 1; return .constant(.attribute(.bool(true)))
            case "FALSE", "NO": index += 1; return .constant(.attribute(.bool(false)))
            case "SELF": index += 1; return .evaluatedObject
            case "SUBQUERY": return try parseSubquery()
            case "CAST": return try parseCast()
            default: break
            }
            if peek(1).isSymbol(":"), peek(2).isSymbol("(") { return try parseFunction() }
            return .keyPath(try parseKeyPathTail(first: try keyPathComponent()))
        default:
            throw error("Expected an expression, found \(describe(token)).", at: token)
        }
    }

    private mutating func takeArgument(_ token: FetchPredicateToken) throws -> FetchValue {
        guard case .format(let specifier) = token.kind else { return .null }
        guard nextArgument < arguments.count else {
            throw error("Missing argument for \"%\(specifier)\": only \(arguments.count) argument\(arguments.count == 1 ? " was" : "s were") given.", at: token)
        }
        let value = arguments[nextArgument]
        nextArgument += 1
        if let problem = Self.problem(with: value, for: specifier) { throw error(problem, at: token) }
        return value
    }

    /// What is wrong with `value` as the argument of `%specifier`, or `nil` if nothing is.
    static func problem(with value: FetchValue, for specifier: Character) -> String? {
        let attribute = value.attributeValue
        switch specifier {
        case "d", "i":
            guard attribute?.integerValue != nil || attribute?.boolValue != nil else {
                return "%\(specifier) needs an integer argument, got \(value)."
            }
        case "f":
            guard attribute?.doubleValue != nil else { return "%f needs a number argument, got \(value)." }
        case "s", "K":
            guard attribute?.stringValue != nil else { return "%\(specifier) needs a string argument, got \(value)." }
        default:
            break
        }
        return nil
    }

    private mutating func parseAggregate() throws -> FetchExpression {
        let open = advance()
        var parts: [FetchExpression] = []
        if current.isSymbol("}") { index += 1; return .aggregate([]) }
        while true {
            parts.append(try parseExpressionTerm())
            if current.isSymbol(",") { index += 1; continue }
            if current.isSymbol("}") { index += 1; return .aggregate(parts) }
            if current.kind == .end { throw error("Unbalanced braces: the \"{\" at offset \(open.offset) is never closed.", at: current) }
            throw error("Expected \",\" or \"}\" in the list opened at offset \(open.offset), found \(describe(current)).", at: current)
        }
    }

    private mutating func parseSubquery() throws -> FetchExpression {
        let keyword = advance()
        try expect("(", "after SUBQUERY")
        let collection = try parseExpressionTerm()
        try expect(",", "after the SUBQUERY collection")
        guard case .variable(let variable) = current.kind else {
            throw error("SUBQUERY needs a variable such as $x as its second argument, found \(describe(current)).", at: current)
        }
        index += 1
        try expect(",", "after the SUBQUERY variable")
        bound.append(variable)
        let predicate = try parseOr()
        bound.removeLast()
        guard current.isSymbol(")") else {
            throw error(current.kind == .end
                ? "Unbalanced parentheses: the SUBQUERY at offset \(keyword.offset) is never closed."
                : "SUBQUERY takes three arguments; expected \")\", found \(describe(current)).", at: current)
        }
        index += 1
        return .subquery(collection, variable: variable, predicate)
    }

    private mutating func parseFunction() throws -> FetchExpression {
        let nameToken = advance()
        guard case .identifier(let name, _) = nameToken.kind, let function = FetchFunction(rawValue: name + ":") else {
            throw error("Unknown function \(describe(nameToken)); use \(FetchFunction.allCases.map(\.rawValue).joined(separator: ", ")).", at: nameToken)
        }
        index += 2  // ":" "("
        var arguments: [FetchExpression] = []
        if !current.isSymbol(")") {
            while true {
                arguments.append(try parseExpressionTerm())
                if current.isSymbol(",") { index += 1; continue }
                break
            }
        }
        guard current.isSymbol(")") else {
            throw error("Expected \")\" to close \(function.rawValue)(, found \(describe(current)).", at: current)
        }
        index += 1
        guard arguments.count == 1 else {
            throw error("\(function.rawValue) takes one argument, got \(arguments.count).", at: nameToken)
        }
        return .function(function, arguments)
    }

    /// `CAST(value, "Type")` for constants without a literal form.
    private mutating func parseCast() throws -> FetchExpression {
        let keyword = advance()
        try expect("(", "after CAST")
        let valueToken = current
        let value = try parseExpressionTerm()
        try expect(",", "after the CAST value")
        guard case .string(let typeName) = current.kind else { throw error("CAST needs a type name string such as \"NSDate\".", at: current) }
        let typeToken = advance()
        guard current.isSymbol(")") else { throw error("CAST takes two arguments; expected \")\", found \(describe(current)).", at: current) }
        index += 1
        guard case .constant(.attribute(let constant)) = value else {
            throw error("CAST needs a constant value.", at: valueToken)
        }
        let text = constant.stringValue
        let result: AttributeValue?
        switch typeName {
        case "NSDate": result = constant.doubleValue.map { .date(Date(timeIntervalSinceReferenceDate: $0)) }
        case "NSUUID": result = text.flatMap(UUID.init(uuidString:)).map { .uuid($0) }
        case "NSDecimalNumber": result = text.flatMap { Decimal(string: $0) }.map { .decimal($0) } ?? constant.integerValue.map { .decimal(Decimal($0)) }
        case "NSData": result = text.flatMap { Data(base64Encoded: $0) }.map { .data($0) }
        case "NSURL": result = text.flatMap(URL.init(string:)).map { .uri($0) }
        case "NSString": result = .string(text ?? constant.description)
        case "NSNumber": result = text.flatMap(Double.init).map { .double($0) } ?? (constant.doubleValue != nil ? constant : nil)
        default:
            throw error("CAST to \"\(typeName)\" is not supported; use NSDate, NSUUID, NSDecimalNumber, NSData, NSURL, NSString or NSNumber.", at: typeToken)
        }
        guard let result else { throw error("Cannot CAST \(constant) to \(typeName).", at: keyword) }
        return .constant(.attribute(result))
    }
}

extension FetchPredicate {
    /// Parses Core Data's predicate format syntax, filling format specifiers from typed
    /// arguments.
    ///
    /// For example:
    ///
    /// ```swift
    /// let p = try FetchPredicate(format: "%K BEGINSWITH[cd] %@ AND age BETWEEN {%d, %d}", "name", "a", 18, 65)
    /// ```
    ///
    /// - Throws: ``ObjectGraphError/Code/malformedPredicate`` with the ``ObjectGraphError/offset``
    ///   of the offending character and a caret under it in the message.
    public init(format: String, _ arguments: any FetchArgument...) throws {
        try self.init(format: format, argumentArray: arguments)
    }

    /// Parses a format string with arguments from an array and, optionally, values for its
    /// `$variables` (an unknown variable is then a syntax error).
    public init(format: String, argumentArray: [any FetchArgument], substitutionVariables: [String: FetchValue]? = nil) throws {
        let arguments = argumentArray.map { $0.fetchArgumentValue }
        if substitutionVariables == nil, let predicate = FormatTemplates.predicate(format, arguments) {
            self = predicate
            return
        }
        var parser = try FetchPredicateParser(format, arguments: arguments, variables: substitutionVariables)
        self = try parser.parsePredicate()
    }
}

/// Formats parsed once, with placeholders where their value arguments go: a format parsed
/// again (an app fetching with the same format and other values, as SQLite reuses a prepared
/// statement) costs a lookup and a substitution, not a parse. Formats with a `%K` (a key
/// path shapes the tree) or whose placeholder parse fails are parsed every time, as is any
/// call whose arguments do not suit the format (the parse then reports the error).
///
/// Thread safety: the table is in a lock; templates are immutable values.
enum FormatTemplates {
    /// A parsed format: the predicate with placeholder variables, and the specifier of each.
    struct Template {
        let predicate: FetchPredicate
        let specifiers: [Character]
        /// The arguments on the right of an `IN`: a single value there is an error the
        /// full parse reports.
        let collectionArguments: [Int]
    }

    /// Thrown by a templating parse that meets a format it cannot template.
    struct Unavailable: Error {}

    /// Templates by format string; `nil` for a format that has none. Cleared when full.
    private static let templates = Locked<[String: Template?]>([:])
    private static let capacity = 512

    /// The name of the placeholder of argument `index`: no format can spell it (a variable
    /// name is letters, digits and underscores).
    static func placeholder(_ index: Int) -> String { "\u{1}\(index)" }

    /// `format` parsed with `arguments`, from its template; `nil` when it has none or the
    /// arguments do not suit it (the caller then parses, and reports what is wrong).
    static func predicate(_ format: String, _ arguments: [FetchValue]) -> FetchPredicate? {
        let known = templates.withLock { $0[format] }
        let template: Template?
        if let known {
            template = known
        } else {
            template = make(format)
            templates.withLock { table in
                if table.count >= capacity { table.removeAll(keepingCapacity: true) }
                table[format] = .some(template)
            }
        }
        guard let template, template.specifiers.count == arguments.count else { return nil }
        for (index, value) in arguments.enumerated() {
            guard FetchPredicateParser.problem(with: value, for: template.specifiers[index]) == nil else { return nil }
        }
        for index in template.collectionArguments {
            if case .attribute(let value) = arguments[index], !value.isNull, value.stringValue == nil { return nil }
        }
        return arguments.isEmpty ? template.predicate : template.predicate.substituting { argument($0, arguments) }
    }

    /// The argument a placeholder name stands for.
    private static func argument(_ name: String, _ arguments: [FetchValue]) -> FetchValue? {
        var utf8 = name.utf8.makeIterator()
        guard utf8.next() == 1 else { return nil }
        var index = 0
        while let digit = utf8.next() { index = index * 10 + Int(digit &- UInt8(ascii: "0")) }
        return index < arguments.count ? arguments[index] : nil
    }

    /// The template of `format`, if it has one.
    private static func make(_ format: String) -> Template? {
        guard var parser = try? FetchPredicateParser(format, arguments: [], variables: nil, templating: true),
            let predicate = try? parser.parsePredicate()
        else { return nil }
        return Template(predicate: predicate, specifiers: parser.specifiers, collectionArguments: parser.collectionArguments)
    }
}

extension FetchExpression {
    /// Parses one expression of the format syntax, such as `employees.@avg.salary`.
    ///
    /// - Throws: ``ObjectGraphError/Code/malformedPredicate`` with the offset of the error.
    public init(format: String, _ arguments: any FetchArgument...) throws {
        var parser = try FetchPredicateParser(format, arguments: arguments.map { $0.fetchArgumentValue }, variables: nil)
        self = try parser.parseExpression()
    }
}

import Foundation

/// What a node of a Foundation predicate's expression tree means in the fetch language.
enum PredicateTerm {
    /// A Boolean condition.
    case predicate(FetchPredicate)
    /// A value read from the evaluated object: a key path, a member of a subquery variable, a
    /// subquery; `type` is its Swift type (a collection for a to-many relationship).
    case expression(FetchExpression, type: Any.Type)
    /// A captured value.
    case constant(FetchValue, type: Any.Type)
    /// `value ?? fallback`, with a captured fallback.
    case coalesce(FetchExpression, fallback: FetchValue)
    /// A range of captured values, closed or half-open.
    case range(lower: FetchValue, upper: FetchValue, closed: Bool)
}

/// A node of a Foundation predicate that has a fetch-language form.
protocol TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm
}

/// Translates a Foundation `Predicate`'s expression tree ([FetchPredicate/init(_:)]) node by
/// node: each `PredicateExpressions` type it knows conforms to
/// ``TranslatablePredicateExpression``; any other node is refused, named.
struct PredicateTranslator {
    /// What each variable stands for: the evaluated object, a subquery's variable (by its
    /// fetch-language name), or the value an optional was unwrapped from.
    private var bindings: [PredicateExpressions.VariableID: FetchExpression]
    /// Subquery variables named so far.
    private var variables = 0

    init(root: PredicateExpressions.VariableID) {
        bindings = [root: .evaluatedObject]
    }

    // MARK: Nodes

    /// The term of any node.
    mutating func term(of node: Any) throws -> PredicateTerm {
        guard let translatable = node as? any TranslatablePredicateExpression else {
            throw Self.unsupported(node)
        }
        return try translatable.term(&self)
    }

    /// The condition a node stands for: a Boolean key path is compared with `true`, a
    /// captured Boolean is a constant predicate.
    mutating func predicate(of node: Any) throws -> FetchPredicate {
        switch try term(of: node) {
        case .predicate(let predicate): return predicate
        case .expression(let expression, let type) where type == Bool.self || type == Bool?.self:
            return .comparison(expression, .equal, .constant(.attribute(.bool(true))))
        case .constant(.attribute(.bool(let value)), _): return .value(value)
        default: throw Self.unsupported(node, "it is not a condition")
        }
    }

    /// The value a node reads (a key path or a subquery), or `nil` for a captured value.
    mutating func expression(of node: Any) throws -> (FetchExpression, type: Any.Type) {
        guard case .expression(let expression, let type) = try term(of: node) else { throw Self.unsupported(node, "it reads no property") }
        return (expression, type)
    }

    /// Binds a variable for the duration of `body`.
    mutating func binding<R>(_ variable: PredicateExpressions.VariableID, to value: FetchExpression, _ body: (inout PredicateTranslator) throws -> R) rethrows -> R {
        let previous = bindings[variable]
        bindings[variable] = value
        defer { bindings[variable] = previous }
        return try body(&self)
    }

    /// A new subquery variable name.
    mutating func newVariable() -> String {
        variables += 1
        return "v\(variables)"
    }

    /// What a variable stands for.
    func bound(_ variable: PredicateExpressions.VariableID) throws -> FetchExpression {
        guard let value = bindings[variable] else {
            throw ObjectGraphError(.invalidFetchRequest, "#Predicate: a variable is used outside the closure that binds it.")
        }
        return value
    }

    // MARK: Comparisons

    /// `lhs op rhs` over two terms.
    mutating func compare(_ lhs: PredicateTerm, _ op: FetchComparisonOperator, _ rhs: PredicateTerm, node: Any) throws -> FetchPredicate {
        switch (lhs, rhs) {
        case (.coalesce(let value, let fallback), .constant(let constant, _)):
            return Self.coalesced(value, fallback: fallback, op, constant, valueFirst: true)
        case (.constant(let constant, _), .coalesce(let value, let fallback)):
            return Self.coalesced(value, fallback: fallback, op, constant, valueFirst: false)
        case (.predicate(let condition), .constant(.attribute(.bool(let value)), _)) where op == .equal || op == .notEqual,
            (.constant(.attribute(.bool(let value)), _), .predicate(let condition)) where op == .equal || op == .notEqual:
            // A condition compared with a Boolean (`$0.author?.books.contains { … } == true`).
            return (op == .equal) == value ? condition : .not(condition)
        default:
            return .comparison(try operand(lhs, node: node), op, try operand(rhs, node: node))
        }
    }

    /// A term as a comparison operand.
    func operand(_ term: PredicateTerm, node: Any) throws -> FetchExpression {
        switch term {
        case .expression(let expression, _): return expression
        case .constant(let value, _): return .constant(value)
        case .predicate, .coalesce, .range: throw Self.unsupported(node, "an operand is not a value")
        }
    }

    /// `(value ?? fallback) op constant`: the value's comparison where it has one, the
    /// fallback's (decided now) where it is null.
    static func coalesced(_ value: FetchExpression, fallback: FetchValue, _ op: FetchComparisonOperator, _ constant: FetchValue, valueFirst: Bool) -> FetchPredicate {
        coalesced(value, fallback: fallback) { valueFirst ? .comparison($0, op, .constant(constant)) : .comparison(.constant(constant), op, $0) }
    }

    /// A test of `value ?? fallback`: `test` of the value where it has one, of the fallback
    /// (decided now) where it is null.
    static func coalesced(_ value: FetchExpression, fallback: FetchValue, _ test: (FetchExpression) -> FetchPredicate) -> FetchPredicate {
        let fallbackHolds = (try? test(.constant(fallback)).evaluate(with: NoSubject())) ?? false
        let isNull = FetchPredicate.comparison(value, .equal, .constant(.attribute(.null)))
        let hasValue = FetchPredicate.comparison(value, .notEqual, .constant(.attribute(.null)))
        return fallbackHolds ? .or([.and([hasValue, test(value)]), isNull]) : .and([hasValue, test(value)])
    }

    // MARK: Values

    /// A captured value in the fetch language: an attribute value, a managed object (its
    /// ID), `nil`, or a collection of them.
    static func fetchValue(_ value: Any, node: Any) throws -> FetchValue {
        if let convertible = value as? any AttributeValueConvertible {
            // Numbers as the format parser writes them: integers 64-bit, floating point double.
            switch convertible.attributeValue {
            case .int16(let number): return .attribute(.int64(Int64(number)))
            case .int32(let number): return .attribute(.int64(Int64(number)))
            case .float(let number): return .attribute(.double(Double(number)))
            case let attribute: return .attribute(attribute)
            }
        }
        if let object = value as? ManagedObject { return .object(object.objectID) }
        if let id = value as? ManagedObjectID { return .object(id) }
        let mirror = Mirror(reflecting: value)
        if mirror.displayStyle == .optional {
            guard let wrapped = mirror.children.first?.value else { return .attribute(.null) }
            return try fetchValue(wrapped, node: node)
        }
        if let sequence = value as? any Sequence {
            return .collection(try sequence.map { try fetchValue($0, node: node) })
        }
        throw unsupported(node, "the captured \(type(of: value)) has no fetch-language value")
    }

    /// Whether a Swift type is a collection of objects (a to-many relationship's value).
    static func isCollection(_ type: Any.Type) -> Bool {
        type != String.self && type != Data.self && (type as? any Sequence.Type) != nil
    }

    // MARK: Errors

    /// The error for a node the fetch language has no form for.
    static func unsupported(_ node: Any, _ why: String? = nil) -> ObjectGraphError {
        var name = String(describing: type(of: node))
        if let generic = name.firstIndex(of: "<") { name = String(name[..<generic]) }
        return ObjectGraphError(
            .invalidFetchRequest,
            "#Predicate: \(name) cannot be translated into the fetch language\(why.map { " (\($0))" } ?? ""); evaluate such a predicate in memory with Predicate.evaluate(_:).")
    }
}

/// A subject with no values, for comparisons of two captured values.
private struct NoSubject: FetchEvaluable {
    func fetchValue(forKeyPath keyPath: String) throws -> FetchValue {
        throw ObjectGraphError(.unknownKey, "No subject to read \(keyPath) from.", key: keyPath)
    }
    func fetchCount(forKeyPath keyPath: String) throws -> Int? { nil }
}

// MARK: - Nodes

extension PredicateExpressions.Variable: TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm {
        .expression(try translator.bound(key), type: Output.self)
    }
}

extension PredicateExpressions.Value: TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm {
        .constant(try PredicateTranslator.fetchValue(value, node: self), type: Output.self)
    }
}

extension PredicateExpressions.NilLiteral: TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm {
        .constant(.attribute(.null), type: Output.self)
    }
}

extension PredicateExpressions.UnaryMinus: TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm {
        // A negative literal (`-1`) is a negated captured number; negating a property is
        // arithmetic, which the fetch language has not.
        guard case .constant(.attribute(let value), let type) = try translator.term(of: wrapped) else {
            throw PredicateTranslator.unsupported(self, "only a captured number can be negated")
        }
        switch value {
        case .int64(let number) where number != .min: return .constant(.attribute(.int64(-number)), type: type)
        case .double(let number): return .constant(.attribute(.double(-number)), type: type)
        case .decimal(let number): return .constant(.attribute(.decimal(-number)), type: type)
        default: throw PredicateTranslator.unsupported(self, "\(value) cannot be negated")
        }
    }
}

extension PredicateExpressions.KeyPath: TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm {
        let base = try translator.term(of: root)
        // A to-many relationship's (or a subquery's) count or emptiness.
        if case .expression(let expression, _) = base, let collection = Root.Output.self as? any CollectionKeyPaths.Type {
            if keyPath == collection.countKeyPath { return .expression(PredicateTranslator.appending("@count", to: expression), type: Int.self) }
            if keyPath == collection.isEmptyKeyPath {
                return .predicate(.comparison(PredicateTranslator.appending("@count", to: expression), .equal, .constant(.attribute(.int64(0)))))
            }
        }
        guard case .expression(let expression, _) = base else { throw PredicateTranslator.unsupported(self, "its root is not an object") }
        let rootType = Root.Output.self
        guard let entity = rootType as? any FetchableEntity.Type else {
            throw PredicateTranslator.unsupported(self, "\(keyPath) reads a \(rootType), which is no FetchableEntity")
        }
        guard let name = entity.fetchKey(for: keyPath) else {
            // An object's ID stands for the object: `$0.author?.objectID == id` is `author == id`.
            if Output.self == ManagedObjectID.self && rootType is ManagedObject.Type { return .expression(expression, type: Output.self) }
            throw ObjectGraphError(
                .invalidFetchRequest, "#Predicate: \(rootType) names no stored property for \(keyPath).", entityName: entity.entityName)
        }
        if PredicateTranslator.isStoredEncoded(Output.self) {
            throw PredicateTranslator.unsupported(
                self, "\(rootType).\(name) is a \(Output.self), stored encoded (a transformable attribute): the fetch language reads no part of it; fetch by other properties and filter the objects in memory")
        }
        return .expression(PredicateTranslator.appending(name, to: expression), type: Output.self)
    }
}

extension PredicateTranslator {
    /// Whether a property of Swift type `type` is a transformable attribute (any `Codable`
    /// type but an attribute type's), not an attribute type, an object or a to-many
    /// relationship's collection of objects.
    static func isStoredEncoded(_ type: Any.Type) -> Bool {
        if type is any TypedAttributeValue.Type || type is ManagedObject.Type { return false }
        if let optional = type as? any NullableValue.Type { return isStoredEncoded(optional.wrappedType) }
        if let collection = type as? any CollectionKeyPaths.Type { return !(collection.elementType is ManagedObject.Type) }
        return true
    }
}

/// The collections a to-many relationship reads as, with the key paths of their `count` and
/// `isEmpty` (translated to `@count`).
protocol CollectionKeyPaths {
    static var countKeyPath: AnyKeyPath { get }
    static var isEmptyKeyPath: AnyKeyPath { get }
    /// The type of the elements.
    static var elementType: Any.Type { get }
}

extension Array: CollectionKeyPaths {
    static var countKeyPath: AnyKeyPath { \Self.count }
    static var isEmptyKeyPath: AnyKeyPath { \Self.isEmpty }
    static var elementType: Any.Type { Element.self }
}

extension Set: CollectionKeyPaths {
    static var countKeyPath: AnyKeyPath { \Self.count }
    static var isEmptyKeyPath: AnyKeyPath { \Self.isEmpty }
    static var elementType: Any.Type { Element.self }
}

extension Optional: CollectionKeyPaths where Wrapped: CollectionKeyPaths {
    static var countKeyPath: AnyKeyPath { Wrapped.countKeyPath }
    static var isEmptyKeyPath: AnyKeyPath { Wrapped.isEmptyKeyPath }
    static var elementType: Any.Type { Wrapped.elementType }
}

extension PredicateTranslator {
    /// `name` read from `base` as the format parser builds it: a key path grows, the
    /// evaluated object starts one, anything else gets a member.
    static func appending(_ name: String, to base: FetchExpression) -> FetchExpression {
        switch base {
        case .keyPath(let path): return .keyPath(path + "." + name)
        case .evaluatedObject: return .keyPath(name)
        default: return .member(base, name)
        }
    }
}

extension PredicateExpressions.Equal: TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm {
        .predicate(try translator.compare(try translator.term(of: lhs), .equal, try translator.term(of: rhs), node: self))
    }
}

extension PredicateExpressions.NotEqual: TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm {
        .predicate(try translator.compare(try translator.term(of: lhs), .notEqual, try translator.term(of: rhs), node: self))
    }
}

extension PredicateExpressions.Comparison: TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm {
        let fetchOperator: FetchComparisonOperator
        switch op {
        case .lessThan: fetchOperator = .lessThan
        case .lessThanOrEqual: fetchOperator = .lessThanOrEqual
        case .greaterThan: fetchOperator = .greaterThan
        case .greaterThanOrEqual: fetchOperator = .greaterThanOrEqual
        @unknown default: throw PredicateTranslator.unsupported(self, "operator \(op)")
        }
        return .predicate(try translator.compare(try translator.term(of: lhs), fetchOperator, try translator.term(of: rhs), node: self))
    }
}

extension PredicateExpressions.Conjunction: TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm {
        .predicate(try translator.predicate(of: lhs) && translator.predicate(of: rhs))
    }
}

extension PredicateExpressions.Disjunction: TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm {
        .predicate(try translator.predicate(of: lhs) || translator.predicate(of: rhs))
    }
}

extension PredicateExpressions.Negation: TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm {
        .predicate(.not(try translator.predicate(of: wrapped)))
    }
}

extension PredicateExpressions.OptionalFlatMap: TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm {
        // `wrapped.flatMap { transform }`: the transform reads from what the optional holds,
        // and a null stays null along a key path.
        let (base, _) = try translator.expression(of: wrapped)
        return try translator.binding(variable.key, to: base) { try $0.term(of: transform) }
    }
}

extension PredicateExpressions.ForcedUnwrap: TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm {
        try translator.term(of: inner)
    }
}

extension PredicateExpressions.NilCoalesce: TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm {
        let (value, _) = try translator.expression(of: lhs)
        guard case .constant(let fallback, _) = try translator.term(of: rhs) else {
            throw PredicateTranslator.unsupported(self, "the value after ?? must be captured, not read")
        }
        return .coalesce(value, fallback: fallback)
    }
}

extension PredicateExpressions.SequenceContains: TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm {
        // `captured.contains($0.x)` is `x IN captured`; `$0.tags.contains(tag)` is `tag IN tags`.
        let element = try translator.term(of: element), sequence = try translator.term(of: sequence)
        return .predicate(try translator.compare(element, .in, sequence, node: self))
    }
}

extension PredicateExpressions.SequenceContainsWhere: TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm {
        .predicate(try translator.quantified(sequence, test, variable.key, modifier: .any))
    }
}

extension PredicateExpressions.SequenceAllSatisfy: TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm {
        .predicate(try translator.quantified(sequence, test, variable.key, modifier: .all))
    }
}

extension PredicateTranslator {
    /// `sequence.contains(where: test)` (`.any`) or `sequence.allSatisfy(test)` (`.all`) over a
    /// to-many relationship: `ANY`/`ALL` when the test is one comparison, else a `SUBQUERY`
    /// counting the members that pass (`> 0`) or fail (`== 0`).
    mutating func quantified(
        _ sequence: Any, _ test: Any, _ variable: PredicateExpressions.VariableID, modifier: FetchComparisonModifier
    ) throws -> FetchPredicate {
        let (collection, _) = try expression(of: sequence)
        let name = newVariable()
        let condition = try binding(variable, to: .variable(name)) { try $0.predicate(of: test) }
        if let quantified = Self.quantified(condition, variable: name, collection: collection, modifier: modifier) { return quantified }
        let all = modifier == .all
        return .comparison(
            .member(.subquery(collection, variable: name, all ? .not(condition) : condition), "@count"), all ? .equal : .greaterThan,
            .constant(.attribute(.int64(0))))
    }

    /// `ANY`/`ALL collection.path op constant` for a test that is one comparison of a key
    /// path of the variable with a captured value, as the format string says it; `nil`
    /// otherwise (a `SUBQUERY` then).
    static func quantified(_ test: FetchPredicate, variable: String, collection: FetchExpression, modifier: FetchComparisonModifier) -> FetchPredicate? {
        guard case .comparison(.member(.variable(let name), let path), let op, .constant(let value), .direct, let options) = test,
            name == variable, op != .between
        else { return nil }
        return .comparison(appending(path, to: collection), op, .constant(value), modifier: modifier, options: options)
    }
}

extension PredicateExpressions.Filter: TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm {
        let (collection, type) = try translator.expression(of: sequence)
        let name = translator.newVariable()
        let test = try translator.binding(variable.key, to: .variable(name)) { try $0.predicate(of: self.filter) }
        return .expression(.subquery(collection, variable: name, test), type: type)
    }
}

extension PredicateExpressions.SequenceStartsWith: TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm {
        .predicate(try translator.compare(try translator.term(of: base), .beginsWith, try translator.term(of: prefix), node: self))
    }
}

extension PredicateExpressions.CollectionContainsCollection: TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm {
        guard Base.Output.self == String.self || Base.Output.self == Substring.self else {
            throw PredicateTranslator.unsupported(self, "only a string's contains(_:) is")
        }
        return .predicate(try translator.compare(try translator.term(of: base), .contains, try translator.term(of: other), node: self))
    }
}

extension PredicateExpressions.ClosedRange: TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm {
        try translator.range(lower, upper, closed: true, node: self)
    }
}

extension PredicateExpressions.Range: TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm {
        try translator.range(lower, upper, closed: false, node: self)
    }
}

extension PredicateTranslator {
    /// A range between two captured bounds.
    mutating func range(_ lower: Any, _ upper: Any, closed: Bool, node: Any) throws -> PredicateTerm {
        guard case .constant(let low, _) = try term(of: lower), case .constant(let high, _) = try term(of: upper) else {
            throw Self.unsupported(node, "its bounds must be captured")
        }
        return .range(lower: low, upper: high, closed: closed)
    }
}

extension PredicateExpressions.RangeExpressionContains: TranslatablePredicateExpression {
    func term(_ translator: inout PredicateTranslator) throws -> PredicateTerm {
        guard case .range(let lower, let upper, let closed) = try translator.term(of: range) else {
            throw PredicateTranslator.unsupported(self, "only a range of captured bounds is")
        }
        func contains(_ value: FetchExpression) -> FetchPredicate {
            if closed { return .comparison(value, .between, .aggregate([.constant(lower), .constant(upper)])) }
            return .and([.comparison(value, .greaterThanOrEqual, .constant(lower)), .comparison(value, .lessThan, .constant(upper))])
        }
        switch try translator.term(of: element) {
        case .expression(let value, _):
            return .predicate(contains(value))
        case .coalesce(let value, let fallback):
            // `(a...b).contains(x ?? c)`: x's test where it has a value, c's (decided now) where not.
            return .predicate(PredicateTranslator.coalesced(value, fallback: fallback) { contains($0) })
        default:
            throw PredicateTranslator.unsupported(self, "it tests no property")
        }
    }
}

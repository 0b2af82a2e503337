import Foundation

extension FetchExpression {
    /// Evaluates the expression against a managed object, a store row or a dictionary.
    ///
    /// - Parameters:
    ///   - subject: the evaluated object (`SELF`); key paths are read from it.
    ///   - variables: values for `$variables` not already substituted.
    /// - Throws: ``ObjectGraphError/Code/unknownKey`` for a key path the subject does not
    ///   have, ``ObjectGraphError/Code/invalidFetchRequest`` for an unbound variable or an
    ///   unknown collection operator.
    ///   ``ObjectGraphError/Code/invalidFetchRequest`` too for an expression nested deeper than
    ///   ``FetchPredicate/maximumDepth`` (built in code: the parser refuses one).
    public func evaluate<S: FetchEvaluable>(with subject: S, variables: [String: FetchValue] = [:]) throws -> FetchValue {
        try evaluate(with: subject, variables: variables, depth: 1)
    }

    /// ``evaluate(with:variables:)`` at nesting `depth`, which bounds the recursion.
    func evaluate<S: FetchEvaluable>(with subject: S, variables: [String: FetchValue], depth: Int) throws -> FetchValue {
        guard depth <= FetchPredicate.maximumDepth else { throw FetchPredicate.tooDeep() }
        switch self {
        case .constant(let value):
            return value
        case .evaluatedObject:
            return try subject.fetchValueOfSelf()
        case .keyPath(let path):
            return try Self.read(path, from: nil, subject: subject)
        case .variable(let name):
            guard let value = variables[name] else {
                throw ObjectGraphError(.invalidFetchRequest, "Variable $\(name) has no value; substitute it before evaluating.", key: name)
            }
            return value
        case .member(let base, let path):
            return try Self.read(path, from: try base.evaluate(with: subject, variables: variables, depth: depth + 1), subject: subject)
        case .index(let base, let index):
            let elements = try base.evaluate(with: subject, variables: variables, depth: depth + 1).indexableElements
            switch index {
            case .size: return .attribute(.int64(Int64(elements.count)))
            case .first: return elements.first ?? .null
            case .last: return elements.last ?? .null
            case .position(let position): return elements.indices.contains(position) ? elements[position] : .null
            }
        case .aggregate(let parts):
            return .collection(try parts.map { try $0.evaluate(with: subject, variables: variables, depth: depth + 1) })
        case .function(let function, let arguments):
            var values: [FetchValue] = []
            for argument in arguments { values += try argument.evaluate(with: subject, variables: variables, depth: depth + 1).elements }
            return FetchAggregation.apply(function, to: values)
        case .subquery(let collection, let variable, let predicate):
            let candidates = try collection.evaluate(with: subject, variables: variables, depth: depth + 1)
            if candidates.isNull { return .collection([]) }
            var inner = variables
            var kept: [FetchValue] = []
            for element in candidates.elements {
                inner[variable] = element
                if try predicate.evaluate(with: ElementSubject(base: subject, element: element), variables: inner, depth: depth + 1) {
                    kept.append(element)
                }
            }
            return .collection(kept)
        }
    }

    /// Reads a key path, with collection operators, from the subject (`start == nil`) or
    /// from a value reached by another expression.
    static func read<S: FetchEvaluable>(_ path: String, from start: FetchValue?, subject: S) throws -> FetchValue {
        guard path.containsByte(UInt8(ascii: "@")) else { return try navigate(path, from: start, subject: subject) }
        let components = path.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard let at = components.firstIndex(where: { $0.hasPrefix("@") }) else {
            return try navigate(path, from: start, subject: subject)
        }
        guard let op = FetchCollectionOperator(rawValue: components[at]) else {
            throw ObjectGraphError(
                .invalidFetchRequest,
                "Unknown collection operator \(components[at]) in key path \"\(path)\"; use one of \(FetchCollectionOperator.allCases.map(\.rawValue).joined(separator: ", ")).",
                key: path)
        }
        let prefix = components[..<at]
        let rest = components[(at + 1)...]
        if op == .count && !rest.isEmpty {
            throw ObjectGraphError(.invalidFetchRequest, "@count ends a key path; \"\(path)\" continues after it.", key: path)
        }
        // The operator consumes the plain keys after it (`@avg.age`); a later operator
        // applies to its result (`@distinctUnionOfObjects.department.@count`).
        let next = rest.firstIndex(where: { $0.hasPrefix("@") }) ?? rest.endIndex
        let remaining = rest[next...]
        let source = (prefix + rest[..<next]).joined(separator: ".")
        if op == .count, start == nil, remaining.isEmpty, !source.isEmpty, let count = try subject.fetchCount(forKeyPath: source) {
            return .attribute(.int64(Int64(count)))
        }
        let values: FetchValue
        if source.isEmpty {
            values = try start ?? subject.fetchValueOfSelf()
        } else {
            values = try navigate(source, from: start, subject: subject)
        }
        let result = FetchAggregation.apply(op, to: values.isNull ? [] : values.elements)
        if remaining.isEmpty { return result }
        return try read(remaining.joined(separator: "."), from: result, subject: subject)
    }

    /// Follows a plain key path (no operators).
    private static func navigate<S: FetchEvaluable>(_ path: String, from start: FetchValue?, subject: S) throws -> FetchValue {
        guard let start else {
            if path == "self" || path == "SELF" { return try subject.fetchValueOfSelf() }
            return try subject.fetchValue(forKeyPath: path).flattened
        }
        if path.isEmpty { return start }
        switch start {
        case .object(let id):
            return try subject.fetchValue(forKeyPath: path, ofObject: id).flattened
        case .collection(let members):
            return FetchValue.collection(try members.map { try navigate(path, from: $0, subject: subject) }).flattened
        case .attribute(let value):
            if value.isNull { return .null }
            if path == "self" || path == "SELF" { return start }
            throw ObjectGraphError(.unknownKey, "Cannot read key path \"\(path)\" of the value \(value).", key: path)
        }
    }
}

extension FetchValue {
    /// The elements an index applies to: a collection's members, nothing for null, or the value alone.
    var indexableElements: [FetchValue] {
        if isNull { return [] }
        return elements
    }
}

/// The evaluated object inside a subquery: one element of the collection, read through
/// the outer subject (which knows how to follow object IDs).
struct ElementSubject: FetchEvaluable {
    let base: any FetchEvaluable
    let element: FetchValue

    func fetchValue(forKeyPath keyPath: String) throws -> FetchValue {
        if keyPath == "self" || keyPath == "SELF" { return element }
        switch element {
        case .object(let id): return try base.fetchValue(forKeyPath: keyPath, ofObject: id)
        case .attribute(let value) where value.isNull: return .null
        default: throw ObjectGraphError(.unknownKey, "Cannot read key path \"\(keyPath)\" of the value \(element).", key: keyPath)
        }
    }

    func fetchValue(forKeyPath keyPath: String, ofObject objectID: ManagedObjectID) throws -> FetchValue {
        try base.fetchValue(forKeyPath: keyPath, ofObject: objectID)
    }

    func fetchValueOfSelf() throws -> FetchValue { element }
}

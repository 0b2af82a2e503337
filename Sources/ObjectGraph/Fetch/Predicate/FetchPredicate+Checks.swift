import Foundation

/// The checks a predicate passes before a fetch runs it: a bound on its nesting, so that no
/// predicate can overflow the stack of the recursive walks that parse, compile, evaluate
/// and print it, and the model's view of its comparisons, so that a comparison that could
/// never hold (a number against a string, `ANY` over an attribute, `@avg` of strings) is an
/// error that names it instead of a fetch that silently matches nothing.
extension FetchPredicate {
    /// How deeply a predicate may nest, counting every predicate and expression node on
    /// the longest path from the root (`NOT`, `AND`, `OR`, comparisons, subqueries,
    /// aggregates, functions, indexes and members). The parser refuses formats that nest
    /// deeper (counting parentheses as well), and a fetch refuses a predicate built in code
    /// that does, with ``ObjectGraphError/Code/invalidFetchRequest``. Everyday predicates
    /// nest a few levels; `AND` and `OR` chains are one level however long they are.
    ///
    /// The bound keeps the recursive walks within about 1 MB of stack even in a debug
    /// build (a release build needs a fraction of that); a thread on Linux has 8 MB unless
    /// it asks for less.
    public static let maximumDepth = 100

    /// Throws ``ObjectGraphError/Code/invalidFetchRequest`` when the predicate nests deeper
    /// than ``maximumDepth``. The walk is iterative, so it is safe on any tree.
    public func checkDepth() throws {
        // The everyday shape, a comparison of a key path with a constant, needs no walk.
        if case .comparison(.keyPath, _, .constant, _, _) = self { return }
        try Self.checkDepth(from: .predicate(self))
    }

    /// The walk of ``checkDepth()`` from `root`.
    static func checkDepth(from root: DepthNode) throws {
        var stack: [(node: DepthNode, depth: Int)] = [(root, 1)]
        while let (node, depth) = stack.popLast() {
            guard depth <= Self.maximumDepth else { throw tooDeep() }
            switch node {
            case .predicate(.value): break
            case .predicate(.comparison(let lhs, _, let rhs, _, _)):
                stack.append((.expression(lhs), depth + 1))
                stack.append((.expression(rhs), depth + 1))
            case .predicate(.and(let parts)), .predicate(.or(let parts)):
                for part in parts { stack.append((.predicate(part), depth + 1)) }
            case .predicate(.not(let inner)):
                stack.append((.predicate(inner), depth + 1))
            case .expression(.constant), .expression(.evaluatedObject), .expression(.keyPath), .expression(.variable):
                break
            case .expression(.member(let base, _)), .expression(.index(let base, _)):
                stack.append((.expression(base), depth + 1))
            case .expression(.aggregate(let parts)), .expression(.function(_, let parts)):
                for part in parts { stack.append((.expression(part), depth + 1)) }
            case .expression(.subquery(let collection, _, let predicate)):
                stack.append((.expression(collection), depth + 1))
                stack.append((.predicate(predicate), depth + 1))
            }
        }
    }

    /// The error of a predicate nested deeper than ``maximumDepth``.
    static func tooDeep() -> ObjectGraphError {
        ObjectGraphError(
            .invalidFetchRequest,
            "The predicate nests deeper than \(maximumDepth) levels; build it as flat AND/OR lists or split the fetch.")
    }

    /// A node of the depth walk.
    enum DepthNode {
        case predicate(FetchPredicate)
        case expression(FetchExpression)
    }

    /// Checks the predicate's comparisons against `entity`'s model (the key paths must
    /// already be known to exist): throws ``ObjectGraphError/Code/invalidFetchRequest``
    /// for a comparison that can never hold, naming it:
    /// - `ANY`, `ALL` or `NONE` over a key path that reaches no to-many relationship;
    /// - `IN` with a single value on its right that is neither a collection nor a string;
    /// - `@sum` or `@avg` of anything but numbers, `@min` or `@max` of a relationship;
    /// - an attribute (or a collection operator's result) compared with a constant of a
    ///   kind it never compares with, such as an integer with a string or a string with a
    ///   date (`nil` compares with everything).
    public func checkComparisons(against entity: EntityDescription) throws {
        if case .comparison = self { return try checkComparison(against: entity) }
        // Iterative, like the depth check: no stack grows with the predicate.
        var pending = [self]
        while let predicate = pending.popLast() {
            switch predicate {
            case .value: break
            case .and(let parts), .or(let parts): pending.append(contentsOf: parts)
            case .not(let inner): pending.append(inner)
            case .comparison: try predicate.checkComparison(against: entity)
            }
        }
    }

    /// ``checkComparisons(against:)`` for a comparison.
    private func checkComparison(against entity: EntityDescription) throws {
        switch self {
        case .value, .and, .or, .not: return
        case .comparison(let lhs, let op, let rhs, let modifier, _):
            let left = try Self.resolve(lhs, from: entity)
            let right = try Self.resolve(rhs, from: entity)
            if modifier != .direct, let left, !left.reachesToMany {
                throw invalid(
                    "\(modifier == .all ? "ALL" : "ANY or NONE") needs a to-many relationship on its left, but \(left.keyPath) of \(entity.name) reaches none",
                    entity: entity, key: left.keyPath)
            }
            if op == .in, case .constant(.attribute(let value)) = rhs, !value.isNull, value.stringValue == nil {
                throw invalid(
                    "IN needs a collection on its right (a list such as {1, 2}, an array argument or a to-many key path), found the single value \(value)",
                    entity: entity, key: left?.keyPath)
            }
            // A key path against constants: the constants must be of a kind the key path's
            // values compare with. (With a modifier the values are the members' values.)
            if let left, let constant = Self.constantValue(rhs) {
                try check(left, op, constant, entity: entity)
            } else if let right, let constant = Self.constantValue(lhs), op.isOrdering {
                try check(right, op, constant, entity: entity)
            }
        }
    }

    /// Throws when `constant` can never compare with the values of `path` under `op`.
    private func check(_ path: ResolvedKeyPath, _ op: FetchComparisonOperator, _ constant: FetchValue, entity: EntityDescription) throws {
        guard let kind = path.kind else { return }
        func checkOne(_ value: FetchValue) throws {
            switch value {
            case .attribute(let attribute):
                // `nil` compares with everything.
                if let other = attribute.comparisonKind, other != kind { throw mismatch(path, op, value, entity: entity) }
            case .object: throw mismatch(path, op, value, entity: entity)
            case .collection: return
            }
        }
        switch (op, constant) {
        case (.in, .collection(let members)), (.between, .collection(let members)):
            for member in members { try checkOne(member) }
        case (.in, _), (.between, _), (_, .collection):
            return
        case (.beginsWith, _), (.endsWith, _), (.contains, _), (.like, _), (.matches, _):
            // A string operator on a string attribute needs a string; on other values it
            // is left to the evaluator (CONTAINS also tests membership).
            guard kind == .string else { return }
            try checkOne(constant)
        default:
            try checkOne(constant)
        }
    }

    private func mismatch(_ path: ResolvedKeyPath, _ op: FetchComparisonOperator, _ value: FetchValue, entity: EntityDescription) -> ObjectGraphError {
        invalid(
            "\(path.keyPath) of \(entity.name) holds \(path.typeName) values, which never compare with \(value) (\(op.rawValue))",
            entity: entity, key: path.keyPath)
    }

    private func invalid(_ reason: String, entity: EntityDescription, key: String?) -> ObjectGraphError {
        ObjectGraphError(
            .invalidFetchRequest, "\(reason): the comparison can never hold, in predicate \(self).",
            entityName: entity.name, key: key)
    }

    /// What a key path expression reads, as far as the model tells: `nil` for anything
    /// but a key path (a constant, a variable, a subquery…) and for `self`.
    private struct ResolvedKeyPath {
        var keyPath: String
        /// Whether the path passes through (or ends at) a to-many relationship.
        var reachesToMany: Bool
        /// The kind of the path's values, or `nil` when that is not known (a relationship,
        /// a transformable attribute, `@distinctUnionOfObjects`).
        var kind: ComparisonKind?
        /// The kind of the values, for messages.
        var typeName: String
    }

    private static func resolve(_ expression: FetchExpression, from entity: EntityDescription) throws -> ResolvedKeyPath? {
        guard case .keyPath(let keyPath) = expression, keyPath != "self", keyPath != "SELF" else { return nil }
        if !keyPath.utf8.contains(where: { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "@") }) {
            // One key, the common case: no splitting, no dynamic cast.
            let property = try entity.property(named: keyPath)
            guard property.slotKind == .attribute else {
                return ResolvedKeyPath(keyPath: keyPath, reachesToMany: property.slotKind == .toMany, kind: nil, typeName: "object")
            }
            let type = unsafeDowncast(property, to: AttributeDescription.self).attributeType
            return ResolvedKeyPath(keyPath: keyPath, reachesToMany: false, kind: type.comparisonKind, typeName: type.rawValue)
        }
        var current: EntityDescription? = entity
        var reachesToMany = false
        var pendingOperator: FetchCollectionOperator?
        var last: PropertyDescription?
        for component in keyPath.keyPathComponents {
            if component.utf8.first == UInt8(ascii: "@") {
                guard let op = FetchCollectionOperator(rawValue: component) else { return nil }
                pendingOperator = op
                continue
            }
            if component == "self" || component == "SELF" { continue }
            guard let here = current else { return nil }
            let property = try here.property(named: component)
            last = property
            if property.slotKind == .attribute {
                current = nil
            } else {
                if property.slotKind == .toMany { reachesToMany = true }
                current = unsafeDowncast(property, to: RelationshipDescription.self).destinationEntity
            }
        }
        let attribute = last.flatMap { $0.slotKind == .attribute ? unsafeDowncast($0, to: AttributeDescription.self) : nil }
        var kind = attribute?.attributeType.comparisonKind
        var typeName = attribute?.attributeType.rawValue ?? "object"
        if let op = pendingOperator {
            switch op {
            case .count:
                return ResolvedKeyPath(keyPath: keyPath, reachesToMany: false, kind: .number, typeName: "integer64")
            case .sum, .avg:
                guard let attribute, attribute.attributeType.isNumeric else {
                    throw ObjectGraphError(
                        .invalidFetchRequest,
                        "\(op.rawValue) needs numbers, but \(keyPath) of \(entity.name) reads \(attribute.map { "\($0.attributeType) values" } ?? "objects").",
                        entityName: entity.name, key: keyPath)
                }
                if op == .avg { kind = .number; typeName = "double" }
                return ResolvedKeyPath(keyPath: keyPath, reachesToMany: false, kind: kind, typeName: typeName)
            case .min, .max:
                guard attribute != nil else {
                    throw ObjectGraphError(
                        .invalidFetchRequest,
                        "\(op.rawValue) needs an attribute after it, but \(keyPath) of \(entity.name) reads objects.",
                        entityName: entity.name, key: keyPath)
                }
                return ResolvedKeyPath(keyPath: keyPath, reachesToMany: false, kind: kind, typeName: typeName)
            case .distinctUnionOfObjects:
                return ResolvedKeyPath(keyPath: keyPath, reachesToMany: true, kind: nil, typeName: typeName)
            }
        }
        return ResolvedKeyPath(keyPath: keyPath, reachesToMany: reachesToMany, kind: kind, typeName: typeName)
    }
}

extension FetchComparisonOperator {
    /// Whether the operator orders or equates its operands, so that it reads the same with
    /// its operands swapped around (up to direction).
    var isOrdering: Bool {
        switch self {
        case .equal, .notEqual, .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual: return true
        default: return false
        }
    }
}

/// The kinds of values that compare with each other (``AttributeValue/compare(_:_:options:)``
/// orders two values exactly when their kinds are the same): numbers (Booleans among them),
/// strings, dates, bytes, transformed values, UUIDs and URIs.
enum ComparisonKind: Sendable {
    case number, string, date, data, transformable, uuid, uri
}

extension AttributeType {
    /// The kind of the type's values; `nil` for a transformable, whose values a fetch
    /// cannot tell apart from bytes before it reads them.
    var comparisonKind: ComparisonKind? {
        switch self {
        case .integer16, .integer32, .integer64, .double, .float, .decimal, .boolean: return .number
        case .string: return .string
        case .date: return .date
        case .binaryData: return .data
        case .uuid: return .uuid
        case .uri: return .uri
        case .transformable: return nil
        }
    }
}

extension AttributeValue {
    /// The value's kind; `nil` for null, which compares with everything.
    var comparisonKind: ComparisonKind? {
        switch self {
        case .null: return nil
        case .int16, .int32, .int64, .double, .float, .decimal, .bool: return .number
        case .string: return .string
        case .date: return .date
        case .data: return .data
        case .transformable: return .transformable
        case .uuid: return .uuid
        case .uri: return .uri
        }
    }
}

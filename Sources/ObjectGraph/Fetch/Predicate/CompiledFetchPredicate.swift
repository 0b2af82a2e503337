import Foundation

/// A subject that reads a stored attribute by its ordinal (``PropertyDescription/ordinal``)
/// without resolving a key path: a store's row view. Compiled predicates
/// (`FetchPredicate/compiled(for:as:)`) read such subjects by ordinal.
public protocol OrdinalFetchEvaluable: FetchEvaluable {
    /// The stored value of the attribute at `ordinal` of the subject's entity (the request's
    /// entity or a subentity: inherited properties keep their ordinals), or `nil` when the
    /// subject cannot read it that way (the compiled predicate then reads the key path).
    func attributeValue(atOrdinal ordinal: Int) throws -> AttributeValue?
    /// Whether the stored attribute at `ordinal` is null, or `nil` when the subject cannot
    /// tell without reading it (the default: the compiled predicate then reads the value).
    /// A store whose rows mark nulls answers `== nil` tests without decoding the value.
    func attributeIsNull(atOrdinal ordinal: Int) throws -> Bool?
    /// Calls `body` with the value of `keyPath` in each member of the subject's to-many
    /// relationship `relationship`, in the order and with the values that
    /// `fetchValue(forKeyPath: "relationship.keyPath")` lists them, until `body` returns
    /// `false`. Returns `false` when the subject cannot (the default: the compiled predicate
    /// then reads the whole key path); `true` once it has called `body` for every member or
    /// been stopped. `keyPath` is an attribute, or to-ones ending in one.
    ///
    /// A store that reads members one at a time lets `ANY` stop at the first member that
    /// matches and `ALL` at the first that does not, without reading the others.
    func forEachMemberValue(ofToMany relationship: String, keyPath: String, _ body: (FetchValue) throws -> Bool) throws -> Bool
    /// Runs `test` on the UTF-8 bytes of the stored string attribute at `ordinal`, where the
    /// subject holds them, and returns its answer; `nil` when the subject cannot (the
    /// default), the value is null or not a string, or `test` cannot decide (it answers `nil`):
    /// the compiled predicate then reads the value as a `String`.
    ///
    /// A store that reads rows in place lets string tests against an ASCII constant decide
    /// ASCII texts without making a `String` per row.
    func testStringBytes(atOrdinal ordinal: Int, _ test: (UnsafeBufferPointer<UInt8>) -> Bool?) throws -> Bool?
    /// The stored number at `ordinal` read as `kind` without an ``AttributeValue``: an
    /// integer attribute (16, 32 or 64 bits) widened to `Int64` bits for
    /// ``FixedWidthKind/integer``, a double's bits for ``FixedWidthKind/double``, a date's
    /// seconds since the reference date as bits for ``FixedWidthKind/date``. `nil` when the
    /// subject cannot read it so (the default), the value is null, or the attribute is not
    /// of that kind: the compiled predicate then reads the value.
    ///
    /// A store that reads rows in place lets number and date comparisons against a constant
    /// read eight bytes per row.
    func fixedWidthBits(atOrdinal ordinal: Int, as kind: FixedWidthKind) throws -> UInt64?
}

/// The kinds of stored value ``OrdinalFetchEvaluable/fixedWidthBits(atOrdinal:as:)`` reads.
public enum FixedWidthKind: Sendable {
    /// An integer attribute of any width, as `Int64` bits.
    case integer
    /// A double attribute, as its IEEE-754 bits.
    case double
    /// A date attribute, as the IEEE-754 bits of its seconds since 2001-01-01 UTC.
    case date
}

extension OrdinalFetchEvaluable {
    /// Reads nothing: the value is read and compared instead.
    public func attributeIsNull(atOrdinal ordinal: Int) throws -> Bool? { nil }

    /// Reads nothing: the value is read as a `String` instead.
    public func testStringBytes(atOrdinal ordinal: Int, _ test: (UnsafeBufferPointer<UInt8>) -> Bool?) throws -> Bool? { nil }

    /// Reads nothing: the value is read as an ``AttributeValue`` instead.
    public func fixedWidthBits(atOrdinal ordinal: Int, as kind: FixedWidthKind) throws -> UInt64? { nil }

    /// Reads nothing: the whole key path is read instead.
    public func forEachMemberValue(ofToMany relationship: String, keyPath: String, _ body: (FetchValue) throws -> Bool) throws -> Bool {
        false
    }
}

/// A predicate compiled once for an entity into closures: key paths that name a stored
/// attribute are resolved to ordinals when compiled, not for every subject.
///
/// For example, inside a store's fetch:
///
/// ```swift
/// let matches = try request.predicate.map { $0.compiled(for: entity, as: RowView.self) }
/// for row in rows where try matches?.evaluate(row) ?? true { … }
/// ```
///
/// It answers exactly as ``FetchPredicate/evaluate(with:variables:)`` does; shapes it does
/// not specialise are evaluated that way.
public struct CompiledFetchPredicate<Subject: OrdinalFetchEvaluable> {
    let body: (Subject) throws -> Bool

    /// Whether `subject` matches.
    public func evaluate(_ subject: Subject) throws -> Bool { try body(subject) }
}

extension FetchPredicate {
    /// A store's own compilation of one comparison leaf, or `nil` to use the default.
    public typealias Specializer<Subject> = (FetchPredicate, EntityDescription) throws -> ((Subject) throws -> Bool)?

    /// This predicate compiled for subjects of `entity` (and its subentities).
    ///
    /// - Parameters:
    ///   - entity: the entity of the subjects (each key path is resolved from it, once).
    ///   - type: the subjects' type (a store's row view).
    ///   - specializing: asked first for every comparison; a store returns a closure for the
    ///     shapes it answers better itself (a key path through a relationship answered from
    ///     the destination's matches, for example), `nil` for the others. It must answer
    ///     exactly as ``evaluate(with:variables:)`` does.
    public func compiled<Subject: OrdinalFetchEvaluable>(
        for entity: EntityDescription, as type: Subject.Type, specializing: Specializer<Subject>? = nil
    ) throws -> CompiledFetchPredicate<Subject> {
        CompiledFetchPredicate(body: try compiledBody(for: entity, specializing))
    }

    /// Whether `value op constant` holds, as a comparison without modifier evaluates it: for a
    /// store's specialized comparisons (a count it computed itself, for example).
    ///
    /// - Throws: ``ObjectGraphError/Code/invalidFetchRequest`` when the operator does not apply
    ///   to the values, as evaluation throws.
    public static func compareValues(
        _ value: FetchValue, _ op: FetchComparisonOperator, _ constant: FetchValue, options: ComparisonOptions = []
    ) throws -> Bool {
        try compare(value, op, constant, modifier: .direct, options: options)
    }

    /// The predicate `SUBQUERY(collection, $variable, inner)` tests its elements with, rewritten
    /// to be evaluated on each element itself (`$t.milliseconds` becomes `milliseconds`, `$t`
    /// becomes `SELF`; a bare key path and `SELF` already read the element); `nil` when it
    /// reads other variables or holds a nested subquery.
    public static func elementPredicate(_ inner: FetchPredicate, variable: String) -> FetchPredicate? {
        func rewrite(_ expression: FetchExpression) -> FetchExpression? {
            switch expression {
            case .constant: return expression
            case .variable(let name): return name == variable ? .evaluatedObject : nil
            case .member(.variable(let name), let path): return name == variable ? .keyPath(path) : nil
            case .member(let base, let path):
                switch rewrite(base) {
                case .keyPath(let head)?: return .keyPath(head + "." + path)
                case .evaluatedObject?: return .keyPath(path)
                case let other?: return .member(other, path)
                case nil: return nil
                }
            case .index(let base, let index): return rewrite(base).map { .index($0, index) }
            case .aggregate(let parts):
                let rewritten = parts.compactMap(rewrite)
                return rewritten.count == parts.count ? .aggregate(rewritten) : nil
            case .function(let function, let parts):
                let rewritten = parts.compactMap(rewrite)
                return rewritten.count == parts.count ? .function(function, rewritten) : nil
            case .evaluatedObject, .keyPath: return expression
            case .subquery: return nil
            }
        }
        switch inner {
        case .value: return inner
        case .comparison(let left, let op, let right, let modifier, let options):
            guard let left = rewrite(left), let right = rewrite(right) else { return nil }
            return .comparison(left, op, right, modifier: modifier, options: options)
        case .and(let parts):
            let rewritten = parts.compactMap { elementPredicate($0, variable: variable) }
            return rewritten.count == parts.count ? .and(rewritten) : nil
        case .or(let parts):
            let rewritten = parts.compactMap { elementPredicate($0, variable: variable) }
            return rewritten.count == parts.count ? .or(rewritten) : nil
        case .not(let part):
            return elementPredicate(part, variable: variable).map { .not($0) }
        }
    }

    /// Whether a comparison `null op constant` holds: a relationship without destination (or a
    /// destination whose value is null) satisfies the comparison exactly when this is true.
    public static func comparisonHoldsForNull(
        _ op: FetchComparisonOperator, _ constant: FetchValue, options: ComparisonOptions
    ) -> Bool {
        (try? compare(.null, op, constant, modifier: .direct, options: options)) ?? true
    }

    private func compiledBody<Subject: OrdinalFetchEvaluable>(
        for entity: EntityDescription, _ specializing: Specializer<Subject>?
    ) throws -> (Subject) throws -> Bool {
        if case .comparison = self, let specializing, let special = try specializing(self, entity) { return special }
        switch self {
        case .value(let constant):
            return { _ in constant }
        case .and(let parts):
            // Chained closures, not a loop over an array of them: the compiled body is generic
            // and unspecialized here, and walking an array of `(Subject) throws -> Bool` asks
            // the runtime for that function type's metadata at every evaluation.
            let bodies = try parts.map { try $0.compiledBody(for: entity, specializing) }
            guard var compiled = bodies.last else { return { _ in true } }
            for part in bodies.dropLast().reversed() {
                let rest = compiled
                compiled = { subject in try part(subject) ? try rest(subject) : false }
            }
            return compiled
        case .or(let parts):
            let bodies = try parts.map { try $0.compiledBody(for: entity, specializing) }
            guard var compiled = bodies.last else { return { _ in false } }
            for part in bodies.dropLast().reversed() {
                let rest = compiled
                compiled = { subject in try part(subject) ? true : try rest(subject) }
            }
            return compiled
        case .not(let inner):
            let compiled: (Subject) throws -> Bool = try inner.compiledBody(for: entity, specializing)
            return { try !compiled($0) }
        case .comparison(.keyPath(let path), let op, .constant(let right), .direct, let options)
        where path.hasSuffix(".@count") && entity.relationshipsByName[String(path.dropLast(7))]?.isToMany == true:
            // `tracks.@count > 15`: the subject's count of the relationship when it can count
            // without reading the members (the key path is not taken apart per subject).
            let name = String(path.dropLast(7))
            let predicate = self
            return { subject in
                guard let count = try subject.fetchCount(forKeyPath: name) else { return try predicate.evaluate(with: subject) }
                return try Self.compare(.attribute(.int64(Int64(count))), op, right, modifier: .direct, options: options)
            }
        case .comparison(.keyPath(let path), let op, .constant(let right), .direct, let options)
        where path.containsByte(UInt8(ascii: "@")):
            // `tracks.@avg.length > 300`: the members' values read one at a time, then
            // aggregated (what reading the key path gives, without the collection of rows).
            guard let (relationship, aggregate, rest) = Self.toManyAggregate(of: path, in: entity) else { break }
            let predicate = self
            return { subject in
                var values: [FetchValue] = []
                let ran = try subject.forEachMemberValue(ofToMany: relationship, keyPath: rest) { value in
                    values.append(value)
                    return true
                }
                guard ran else { return try predicate.evaluate(with: subject) }
                return try Self.compare(FetchAggregation.apply(aggregate, to: values), op, right, modifier: .direct, options: options)
            }
        case .comparison(.keyPath(let path), let op, .constant(let right), let modifier, let options)
        where modifier != .direct:
            // `ANY tracks.genre.name == "Rock"`, `ALL tracks.length > 60`: member by member,
            // stopping at the first that decides (the same answer as comparing the collection
            // of every member's value).
            guard let (relationship, rest) = Self.toManyHead(of: path, in: entity) else { break }
            let predicate = self
            let any = modifier == .any
            return { subject in
                var answer = !any
                let ran = try subject.forEachMemberValue(ofToMany: relationship, keyPath: rest) { value in
                    let holds = try Self.scalar(value, op, right, options)
                    guard holds == any else { return true }
                    answer = any
                    return false
                }
                return ran ? answer : try predicate.evaluate(with: subject)
            }
        case .comparison(.keyPath(let path), .between, let bounds, .direct, let options)
        where options.isEmpty && Self.constantBounds(bounds) != nil:
            // `length BETWEEN {a, b}` on a stored number or date: both bounds tested on the
            // stored bits (as `>= a` and `<= b`), the general way where they cannot be.
            guard let attribute = entity.attributesByName[path], !attribute.isTransient, attribute.ordinal >= 0,
                let (low, high) = Self.constantBounds(bounds),
                let (kind, atLeastLow) = Self.bitsTest(.greaterThanOrEqual, low),
                let (highKind, atMostHigh) = Self.bitsTest(.lessThanOrEqual, high), kind == highKind
            else { break }
            let ordinal = attribute.ordinal
            let predicate = self
            return { subject in
                if let bits = try subject.fixedWidthBits(atOrdinal: ordinal, as: kind), let above = atLeastLow(bits), let below = atMostHigh(bits) {
                    return above && below
                }
                return try predicate.evaluate(with: subject)
            }
        case .comparison(.keyPath(let path), let op, .constant(let right), .direct, let options):
            guard let attribute = entity.attributesByName[path], !attribute.isTransient, attribute.ordinal >= 0 else {
                // A key path through relationships (`reportsTo.lastName`): read as the subject
                // reads it and compared as the general evaluation compares it, without taking
                // the predicate apart again for every subject.
                guard path.containsByte(UInt8(ascii: ".")), !path.containsByte(UInt8(ascii: "@")), path.utf8.first != UInt8(ascii: "$") else { break }
                return { subject in try Self.compare(try subject.fetchValue(forKeyPath: path).flattened, op, right, modifier: .direct, options: options) }
            }
            let ordinal = attribute.ordinal
            /// The attribute's value, by ordinal where the subject can.
            func value(_ subject: Subject) throws -> FetchValue {
                if let value = try subject.attributeValue(atOrdinal: ordinal) { return .attribute(value) }
                return try subject.fetchValue(forKeyPath: path).flattened
            }
            if op == .equal || op == .notEqual, right.isNull {
                // `== nil` / `!= nil`: the subject's null mark when it has one.
                let wantsNull = op == .equal
                return { subject in
                    if let isNull = try subject.attributeIsNull(atOrdinal: ordinal) { return isNull == wantsNull }
                    return try Self.compare(try value(subject), op, right, modifier: .direct, options: options)
                }
            }
            if case .attribute(.string(let constant)) = right, options.subtracting([.caseInsensitive, .diacriticInsensitive]).isEmpty,
                let (test, bytesTest) = Self.stringTest(op, constant, options: options)
            {
                // A string test against a constant: the constant is parsed and folded once,
                // not per row; an ASCII text the subject holds as bytes is tested on them.
                return { subject in
                    if let bytesTest, let answer = try subject.testStringBytes(atOrdinal: ordinal, bytesTest) { return answer }
                    let left = try value(subject)
                    if case .attribute(.string(let text)) = left { return test(text) }
                    // A null, another kind or a collection: the general comparison (`!=`
                    // holds for a null, the string operators do not).
                    return try Self.compare(left, op, right, modifier: .direct, options: options)
                }
            }
            if options.isEmpty, let test = Self.typedTest(op, right) {
                // A number or a date against a constant of its kind: compared as the plain
                // value (no `FetchValue` per subject), read as bits where the subject can;
                // anything else the general way.
                if let (kind, bitsTest) = Self.bitsTest(op, right) {
                    return { subject in
                        if let bits = try subject.fixedWidthBits(atOrdinal: ordinal, as: kind), let answer = bitsTest(bits) { return answer }
                        if let stored = try subject.attributeValue(atOrdinal: ordinal), let answer = test(stored) { return answer }
                        return try Self.compare(try value(subject), op, right, modifier: .direct, options: options)
                    }
                }
                return { subject in
                    if let stored = try subject.attributeValue(atOrdinal: ordinal), let answer = test(stored) { return answer }
                    return try Self.compare(try value(subject), op, right, modifier: .direct, options: options)
                }
            }
            return { subject in try Self.compare(try value(subject), op, right, modifier: .direct, options: options) }
        case .comparison:
            break
        }
        let predicate = self
        return { try predicate.evaluate(with: $0) }
    }

    /// The test of an ordering or equality operator against an integer, double or date
    /// constant, for a stored value of the same kind: `nil` for other operators and
    /// constants; the test answers `nil` (ask the general comparison) for a value of another
    /// kind, a null, or a NaN. Where it answers, it answers as
    /// ``compare(_:_:_:modifier:options:)`` does: integers exactly, non-NaN doubles and
    /// dates by their order.
    static func typedTest(_ op: FetchComparisonOperator, _ constant: FetchValue) -> ((AttributeValue) -> Bool?)? {
        guard let value = orderingConstant(op, constant) else { return nil }
        switch value {
        case .double(let c) where !c.isNaN:
            return { stored in
                guard case .double(let a) = stored, !a.isNaN else { return nil }
                return holds(op, a, c)
            }
        case .int16, .int32, .int64:
            guard let c = value.integerValue else { return nil }
            return { stored in
                switch stored {
                case .int16(let a): return holds(op, Int64(a), c)
                case .int32(let a): return holds(op, Int64(a), c)
                case .int64(let a): return holds(op, a, c)
                default: return nil
                }
            }
        case .date(let c) where !c.timeIntervalSinceReferenceDate.isNaN:
            return { stored in
                guard case .date(let a) = stored, !a.timeIntervalSinceReferenceDate.isNaN else { return nil }
                return holds(op, a, c)
            }
        default:
            return nil
        }
    }

    /// The two constant bounds of a `BETWEEN`: a constant collection of two values or an
    /// aggregate of two constants (`{a, b}`); `nil` otherwise.
    static func constantBounds(_ bounds: FetchExpression) -> (FetchValue, FetchValue)? {
        switch bounds {
        case .constant(.collection(let values)) where values.count == 2:
            return (values[0], values[1])
        case .aggregate(let parts) where parts.count == 2:
            guard case .constant(let low) = parts[0], case .constant(let high) = parts[1] else { return nil }
            return (low, high)
        default:
            return nil
        }
    }

    /// The attribute value of `constant` when `op` is an ordering or equality operator (the
    /// only ones the typed tests answer), else `nil`.
    private static func orderingConstant(_ op: FetchComparisonOperator, _ constant: FetchValue) -> AttributeValue? {
        switch op {
        case .equal, .notEqual, .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual: break
        default: return nil
        }
        guard case .attribute(let value) = constant else { return nil }
        return value
    }

    /// ``typedTest(_:_:)`` on a stored value's bits (``OrdinalFetchEvaluable/fixedWidthBits(atOrdinal:as:)``):
    /// the kind to read and the test, which answers `nil` for a NaN (the general comparison
    /// decides). `nil` where `typedTest` has no test.
    static func bitsTest(_ op: FetchComparisonOperator, _ constant: FetchValue) -> (FixedWidthKind, (UInt64) -> Bool?)? {
        guard let value = orderingConstant(op, constant) else { return nil }
        switch value {
        case .double(let c) where !c.isNaN:
            return (.double, { bits in
                let a = Double(bitPattern: bits)
                return a.isNaN ? nil : holds(op, a, c)
            })
        case .int16, .int32, .int64:
            guard let c = value.integerValue else { return nil }
            return (.integer, { bits in holds(op, Int64(bitPattern: bits), c) })
        case .date(let date) where !date.timeIntervalSinceReferenceDate.isNaN:
            let c = date.timeIntervalSinceReferenceDate
            return (.date, { bits in
                let a = Double(bitPattern: bits)
                return a.isNaN ? nil : holds(op, a, c)
            })
        default:
            return nil
        }
    }

    /// Whether `a op c` holds, for an ordering or equality operator.
    @inline(__always)
    private static func holds<T: Comparable>(_ op: FetchComparisonOperator, _ a: T, _ c: T) -> Bool {
        switch op {
        case .equal: return a == c
        case .notEqual: return a != c
        case .lessThan: return a < c
        case .lessThanOrEqual: return a <= c
        case .greaterThan: return a > c
        case .greaterThanOrEqual: return a >= c
        default: return false
        }
    }

    /// `path` split at its first key when that key is a stored to-many relationship of
    /// `entity` and the rest names, through stored to-ones, a stored attribute of its
    /// destination: the key paths whose members' values are single values, one per member.
    static func toManyHead(of path: String, in entity: EntityDescription) -> (relationship: String, rest: String)? {
        let parts = path.dottedKeys
        guard parts.count >= 2, let head = entity.relationshipsByName[String(parts[0])], head.isToMany, !head.isTransient,
            var current = head.destinationEntity
        else { return nil }
        for (index, part) in parts.enumerated().dropFirst() {
            guard let property = current.propertiesByName[String(part)], !property.isTransient, property.ordinal >= 0 else { return nil }
            if index == parts.count - 1 { return property is AttributeDescription ? (head.name, parts.dropFirst().joined(separator: ".")) : nil }
            guard let relationship = property as? RelationshipDescription, relationship.isToOne,
                let destination = relationship.destinationEntity
            else { return nil }
            current = destination
        }
        return nil
    }

    /// `relationship.@op.rest` taken apart when `relationship` is a stored to-many of
    /// `entity`, `op` is `@sum`, `@avg`, `@min` or `@max`, and `rest` names a stored
    /// attribute of the destination, directly or through to-ones.
    static func toManyAggregate(
        of path: String, in entity: EntityDescription
    ) -> (relationship: String, aggregate: FetchCollectionOperator, rest: String)? {
        let parts = path.split(separator: ".", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, let aggregate = FetchCollectionOperator(rawValue: String(parts[1])),
            [.sum, .avg, .min, .max].contains(aggregate), !parts[2].utf8.contains(UInt8(ascii: "@")),
            let (relationship, rest) = toManyHead(of: "\(parts[0]).\(parts[2])", in: entity)
        else { return nil }
        return (relationship, aggregate, rest)
    }

    /// The test of a string operator against a constant string, prepared once, and its test
    /// on an ASCII text's UTF-8 bytes where the constant allows one (answering `nil` for other
    /// texts); `nil` for operators that are not string tests. Both answer as
    /// ``compare(_:_:_:modifier:options:)`` does for a string on the left.
    private static func stringTest(
        _ op: FetchComparisonOperator, _ constant: String, options: ComparisonOptions
    ) -> (text: (String) -> Bool, bytes: ((UnsafeBufferPointer<UInt8>) -> Bool?)?)? {
        switch op {
        case .like:
            let like = StringMatching.LikePattern(constant, options: options)
            return ({ like.matches($0) }, { like.matchesASCII($0) })
        case .contains, .beginsWith, .endsWith:
            let kind: StringMatching.FixedPattern.Kind = op == .contains ? .contains : op == .beginsWith ? .beginsWith : .endsWith
            let fixed = StringMatching.FixedPattern(kind, constant, options: options)
            return ({ fixed.matches($0) }, { fixed.matchesASCII($0) })
        case .equal, .notEqual, .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual:
            // `name == "Grunge"` on an unindexed attribute, the everyday scan: an ASCII text
            // is compared by its bytes, in the row.
            let pattern = StringMatching.OrderPattern(constant, options: options)
            let holds: (ComparisonResult) -> Bool
            switch op {
            case .equal: holds = { $0 == .orderedSame }
            case .notEqual: holds = { $0 != .orderedSame }
            case .lessThan: holds = { $0 == .orderedAscending }
            case .lessThanOrEqual: holds = { $0 != .orderedDescending }
            case .greaterThan: holds = { $0 == .orderedDescending }
            default: holds = { $0 != .orderedAscending }
            }
            // Strings always have an order: `nil` only for kinds the text test never sees.
            return ({ text in pattern.order(text).map(holds) ?? (op == .notEqual) }, { bytes in pattern.orderASCII(bytes).map(holds) })
        case .matches:
            if options.isEmpty, let literal = StringMatching.LiteralPattern(constant) {
                // A literal pattern (a valid expression) tests a stored text's bytes in place (no
                // string made per row); the expression, looked up at the first text the literal
                // does not decide (once per compiled predicate, which one thread evaluates),
                // answers for those.
                var regex: NSRegularExpression? = nil
                return ({ text in
                    if let answer = literal.matches(text) { return answer }
                    if regex == nil { regex = try? StringMatching.regex(constant, caseInsensitive: false) }
                    guard let regex else { return false }
                    return StringMatching.matches(text, regex)
                }, { literal.matches(utf8: $0) })
            }
            // A pattern that does not compile is left to the general path, which throws.
            guard let regex = try? StringMatching.regex(constant, caseInsensitive: options.contains(.caseInsensitive)) else { return nil }
            let folds = options.contains(.diacriticInsensitive)
            return ({ text in
                StringMatching.matches(folds ? text.folding(options: .diacriticInsensitive, locale: nil) : text, regex)
            }, nil)
        default:
            return nil
        }
    }
}

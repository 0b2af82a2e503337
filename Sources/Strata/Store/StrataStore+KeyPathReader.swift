import Glibc
import ObjectGraph

extension StrataStore {
    /// A key path compiled for the rows of one fetch: an attribute, or a chain of to-one
    /// relationships ending in an attribute, followed by ordinal. Each destination's value is
    /// read once per fetch (many tracks, few genres), kept by destination reference; no key
    /// path is parsed and no name is hashed per row. Sorts ([FETCH-S4]) and every key path a
    /// row view is asked for (dictionary results, grouping, aggregates) read through these.
    ///
    /// A keyed to-many's `@count` (`albums.@count`) is counted from its keys. Any other key
    /// path (to-many values, other aggregates, `self`, transient or unknown keys) is not
    /// compiled: ``make(_:entity:)`` returns `nil` and the key path is read the general way.
    ///
    /// Thread safety: a reader belongs to one fetch's ``RowSource`` and is used by that
    /// fetch only.
    final class KeyPathReader {
        private enum Step {
            /// The attribute at an ordinal of the row.
            case attribute(Int)
            /// The to-one at an ordinal, then `next` in the destination's row.
            case toOne(Int, next: KeyPathReader)
            /// The number of members of a keyed to-many (`albums.@count`), counted from its keys.
            case count(String, ordinal: Int)
            /// The destination of the to-one stored at an ordinal of the row, as an object
            /// (`album` in a dictionary fetch's columns or a group key).
            case object(Int)
        }

        private let step: Step
        /// Values of `next` by destination, for a to-one step.
        @exclusivity(unchecked) private var destinations: [StoredObject: FetchValue] = [:]
        /// For a to-one step: destination rows read one by one so far, and how many make one
        /// scan of the destination's hierarchy cheaper ([FETCH-S11]); `nil` until the first
        /// read, and once the scan ran (or cannot run).
        @exclusivity(unchecked) private var pointReads: (count: Int, threshold: Int)?
        /// Whether the scan ran: ``destinations`` holds every destination row of the snapshot.
        @exclusivity(unchecked) private var scanned = false
        /// The rows of the destination's hierarchy, known once ``pointReads`` is.
        @exclusivity(unchecked) private var destinationRows = 0
        /// The destination entity of a to-one step.
        private let destination: EntityDescription?

        private init(_ step: Step, destination: EntityDescription? = nil) {
            self.step = step
            self.destination = destination
        }

        /// The reader of `keyPath` for rows of `entity` (and its subentities: inherited
        /// properties keep their ordinals), or `nil` when the key path is not one it reads.
        static func make(_ keyPath: String, entity: EntityDescription) -> KeyPathReader? {
            let parts = keyPath.dottedKeys
            guard !parts.isEmpty, parts.count <= 8 else { return nil }
            return make(parts[...], entity: entity)
        }

        private static func make(_ parts: ArraySlice<String>, entity: EntityDescription) -> KeyPathReader? {
            guard let head = parts.first, let property = entity.propertiesByName[head],
                !property.isTransient, property.ordinal >= 0
            else { return nil }
            if parts.count == 2, parts.last == "@count", let relationship = property as? RelationshipDescription,
                RelationshipKeys.isKeyed(relationship)
            {
                return KeyPathReader(.count(relationship.name, ordinal: relationship.ordinal))
            }
            if parts.count == 1 {
                if let relationship = property as? RelationshipDescription {
                    // A to-one stored in the row ([ROW-1]); a keyed one is read as its keys say.
                    guard relationship.isToOne, !RelationshipKeys.isKeyed(relationship) else { return nil }
                    return KeyPathReader(.object(property.ordinal))
                }
                return KeyPathReader(.attribute(property.ordinal))
            }
            guard let relationship = property as? RelationshipDescription, relationship.isToOne,
                let destination = relationship.destinationEntity,
                let next = make(parts.dropFirst(), entity: destination)
            else { return nil }
            return KeyPathReader(.toOne(property.ordinal, next: next), destination: destination)
        }

        /// The key path's value in `view`'s row: an attribute's value, or `.null` when a
        /// destination on the way is missing (the value the general reading gives).
        func value<Row: ReadableRow>(of view: Row) throws -> FetchValue {
            switch step {
            case .attribute(let ordinal):
                guard let value = try view.attributeValue(atOrdinal: ordinal), !value.isNull else { return .null }
                return .attribute(value)
            case .count(let name, let ordinal):
                let count = try view.fetchCount(forKeyPath: name) ?? view.storedObjects(atOrdinal: ordinal).count
                return .attribute(.int64(Int64(count)))
            case .object(let ordinal):
                // As the general reading gives it: no destination, or one of an entity the
                // layout does not know, is null; the destination's row is not read.
                guard let target = try view.storedObject(atOrdinal: ordinal), let id = view.source.objectID(target) else { return .null }
                return .object(id)
            case .toOne(let ordinal, let next):
                guard let target = try view.storedObject(atOrdinal: ordinal) else { return .null }
                if let known = destinations[target] { return known }
                if try scanDestinations(next, source: view.source), let known = destinations[target] { return known }
                // The value is kept here, so the destination's row is not kept by the source.
                let value = try view.source.view(of: target, keeping: false).map { try next.value(of: $0) } ?? .null
                destinations[target] = value
                return value
            }
        }

        /// [FETCH-S11] Counts a destination about to be read by key; once such reads reach a
        /// sixteenth of the destination hierarchy's rows (at least 64), reads `next` from every
        /// row of the destination (or a subentity) in one scan of that hierarchy and keeps the
        /// values, and answers true. Hierarchies above ``RowSource/memberGroupRowCap`` rows are
        /// read by key throughout.
        private func scanDestinations(_ next: KeyPathReader, source: RowSource) throws -> Bool {
            guard !scanned, let destination else { return false }
            if pointReads == nil {
                let root = (try? source.store.model().entity(named: destination.rootEntityName)) ?? destination
                let rows = (try? source.store.cachedRecord(in: source.snapshot).rowCount(of: root.selfAndAllSubentities.map(\.name))) ?? 0
                pointReads = (0, rows <= RowSource.memberGroupRowCap ? max(64, rows / 16) : .max)
                destinationRows = rows
            }
            guard var reads = pointReads else { return false }
            reads.count += 1
            pointReads = reads
            guard reads.count >= reads.threshold else { return false }
            scanned = true
            pointReads = nil
            destinations.reserveCapacity(destinationRows)
            var kinds = [Bool](repeating: false, count: source.layout.numberCount)
            for entity in destination.selfAndAllSubentities {
                if let number = source.layout.number(of: entity) { kinds[Int(number)] = true }
            }
            try source.forEachRow(inKeySpace: source.layout.keySpace(of: destination)) { row in
                guard Int(row.fields.entityNumber) < kinds.count, kinds[Int(row.fields.entityNumber)] else { return }
                // The same snapshot as the values read by key: the scan's value is theirs.
                destinations[StoredObject(entity: row.fields.entityNumber, reference: row.reference)] = try next.value(of: row)
            }
            return true
        }
    }

    /// `rows` in the order of `descriptors`, keeping the first `keeping` (offset plus limit)
    /// when given: each row's sort keys read once, through compiled readers where the key
    /// path allows ([FETCH-S4]).
    static func sorted(
        _ rows: [RowView], by descriptors: [FetchSortDescriptor], entity: EntityDescription?, keeping: Int?
    ) throws -> [RowView] {
        guard !descriptors.isEmpty, rows.count > 1 else { return keeping.map { Array(rows.prefix($0)) } ?? rows }
        // The fetch's row source compiles them: sorts and later reads share the readers and
        // the destination values they keep.
        let source = rows[0].source
        let readers = descriptors.map { descriptor in entity.flatMap { source.reader(of: $0, keyPath: descriptor.keyPath) } }
        // A first key that is a stored string compared without options, ASCII in every row,
        // orders by the bytes in the rows: no `String` is made for it.
        let firstKeyBytes = entity.flatMap { Self.asciiFirstKeys(of: rows, by: descriptors[0], entity: $0) }
        var keys: [FetchValue] = []
        keys.reserveCapacity(rows.count * descriptors.count)
        for row in rows {
            for (index, (descriptor, reader)) in zip(descriptors, readers).enumerated() {
                if index == 0, firstKeyBytes != nil {
                    keys.append(.attribute(.null))  // not read: the bytes order the rows
                    continue
                }
                keys.append(try reader?.value(of: row) ?? descriptor.sortValue(of: row))
            }
        }
        // The order as positions, then the rows: no generic sort of row views across modules.
        return FetchSortDescriptor.sortedIndices(
            keys: keys, count: rows.count, by: descriptors, keeping: keeping, firstKeyBytes: firstKeyBytes
        ).map { rows[$0] }
    }

    /// The row ordinal of the stored string attribute of `entity` that `descriptor` sorts by
    /// without options, or `nil` when it sorts otherwise: the one case where rows whose values
    /// are ASCII can be ordered by their bytes (byte order is `String` order there).
    static func byteOrderedStringOrdinal(of descriptor: FetchSortDescriptor, entity: EntityDescription) -> Int? {
        guard descriptor.options.isEmpty, let attribute = entity.attributesByName[descriptor.keyPath],
            attribute.attributeType == .string, !attribute.isTransient, attribute.ordinal >= 0
        else { return nil }
        return attribute.ordinal
    }

    /// The bytes of each row's value for `descriptor`, one after another, with where each
    /// ends, when the descriptor sorts by a stored string attribute of `entity` without
    /// options and every row holds an ASCII string there; `nil` otherwise.
    private static func asciiFirstKeys(
        of rows: [RowView], by descriptor: FetchSortDescriptor, entity: EntityDescription
    ) -> (bytes: [UInt8], ends: [Int])? {
        guard let ordinal = byteOrderedStringOrdinal(of: descriptor, entity: entity) else { return nil }
        var bytes: [UInt8] = []
        var ends: [Int] = []
        ends.reserveCapacity(rows.count)
        // Room for names of a few words each: most sorts never grow the buffer.
        bytes.reserveCapacity(rows.count * 24)
        for index in rows.indices {
            // Rows of a subentity lay the attribute out at the same ordinal ([ROW-1]).
            let ascii = try? rows[index].testStringBytes(atOrdinal: ordinal) { text -> Bool? in
                guard Text.isASCII(UnsafeRawBufferPointer(text)) else { return false }
                bytes.append(contentsOf: text)
                return true
            }
            guard ascii == true else { return nil }
            ends.append(bytes.count)
        }
        return (bytes, ends)
    }
}

/// A stored row a ``StrataStore/KeyPathReader`` reads: a row view, or a scanned row tested in
/// the engine's buffer.
protocol ReadableRow: StoredRowAccess {
    /// The fetch's row source, for destinations and relationship keys.
    var source: StrataStore.RowSource { get }
    /// The attribute at `ordinal`, read in place; `nil` when no field holds it.
    func attributeValue(atOrdinal ordinal: Int) throws -> AttributeValue?
    /// The members of a keyed to-many named `keyPath`, counted from its keys; `nil` otherwise.
    func fetchCount(forKeyPath keyPath: String) throws -> Int?
}

extension StrataStore.RowView: ReadableRow {}
extension StrataStore.BorrowedRowView: ReadableRow {}

extension StrataStore {
    /// [FETCH-S9] The first `count` rows of a scan in the order of sort descriptors whose key
    /// paths compile to readers, kept as the scan goes: a row's keys are read one descriptor
    /// at a time while it is compared with the last row kept, so most rows are ruled out
    /// after their first key and none of them is copied. Ties keep scan (reference) order,
    /// so the rows are the first `count` of the full sort.
    ///
    /// Thread safety: one fetch's, on its thread.
    final class TopRows {
        let count: Int
        let descriptors: [FetchSortDescriptor]
        let readers: [KeyPathReader]
        /// The best rows so far, in order, and their keys (`descriptors.count` per row, in
        /// the same order): kept apart so that comparing with the last row copies nothing.
        @exclusivity(unchecked) private(set) var views: [RowView] = []
        @exclusivity(unchecked) private var keys: [FetchValue] = []
        /// The ordinal of the first sort key when it is a stored string attribute compared
        /// without options: rows are then ordered by that string's bytes where it is ASCII
        /// (byte order is `String` order there), decoding and comparing no `String`.
        private let firstStringOrdinal: Int?
        /// With ``firstStringOrdinal``, each kept row's first key as bytes (`nil` where it is
        /// not an ASCII string), in the order of ``views``.
        @exclusivity(unchecked) private var firstKeyBytes: [[UInt8]?] = []
        /// Once the page is full, the last kept row's first key as bytes when it is an ASCII
        /// string (what most rows of a large scan are compared with), kept apart so that the
        /// comparison retains nothing; `nil` otherwise.
        @exclusivity(unchecked) private var lastKeptBytes: [UInt8]?
        /// Whether the first descriptor sorts ascending.
        private let firstAscending: Bool

        /// Top rows for `descriptors`, or `nil` when a key path does not compile.
        init?(count: Int, descriptors: [FetchSortDescriptor], entity: EntityDescription, source: RowSource) {
            var readers: [KeyPathReader] = []
            for descriptor in descriptors {
                guard let reader = source.reader(of: entity, keyPath: descriptor.keyPath) else { return nil }
                readers.append(reader)
            }
            guard count > 0, !descriptors.isEmpty else { return nil }
            self.count = count
            self.descriptors = descriptors
            self.readers = readers
            firstStringOrdinal = StrataStore.byteOrderedStringOrdinal(of: descriptors[0], entity: entity)
            firstAscending = descriptors[0].ascending
            views.reserveCapacity(count + 1)
            keys.reserveCapacity((count + 1) * descriptors.count)
        }

        /// Considers a row that matched the fetch, read after every row offered before it.
        func offer(_ row: BorrowedRowView) throws {
            let width = descriptors.count
            var rowBytes: [UInt8]? = nil
            if let ordinal = firstStringOrdinal {
                // Once the page is full, a row whose first key's bytes come after the last kept
                // row's is turned away on the engine's bytes: most rows of a large scan, each
                // then costing no copy of its key.
                let ascending = firstAscending
                var after = false
                _ = row.fields.testStringBytes(atOrdinal: ordinal) { bytes -> Bool? in
                    guard Text.isASCII(UnsafeRawBufferPointer(bytes)) else { return nil }
                    if let order = lastKeptBytes?.withUnsafeBufferPointer({ Self.byteOrder(bytes, $0) }), ascending ? order > 0 : order < 0 {
                        after = true
                        return nil
                    }
                    rowBytes = Array(bytes)
                    return nil
                }
                if after { return }
            }
            // (Reserved only for a row that is kept or compared further: most are turned away
            // before, with nothing allocated.)
            var rowKeys: [FetchValue] = []
            if views.count == count {
                // Compared with the last row kept: most rows are decided by their first key,
                // on its bytes or with nothing allocated; a tie goes to the earlier row.
                if let order = firstKeyOrder(rowBytes, keptAt: views.count - 1) {
                    guard order < 0 else { return }
                } else {
                    let first = try readers[0].value(of: row)
                    let last = views.count - 1
                    // (The kept key read in place unless it may be held as bytes.)
                    let order = firstStringOrdinal == nil
                        ? descriptors[0].order(first, keys[last * width]) : descriptors[0].order(first, firstKey(keptAt: last))
                    switch order {
                    case .orderedDescending: return
                    case .orderedAscending:
                        rowKeys.reserveCapacity(width)
                        rowKeys.append(first)
                    case .orderedSame:
                        rowKeys.reserveCapacity(width)
                        rowKeys.append(first)
                        for index in 1..<width { rowKeys.append(try readers[index].value(of: row)) }
                        guard precedes(rowKeys, rowBytes, keptAt: views.count - 1) else { return }
                    }
                }
            }
            // A first key held as ASCII bytes is not made a `String`: a placeholder stands for
            // it among the keys (``firstKey(keptAt:)`` makes it from the bytes when a
            // comparison needs it).
            if rowKeys.isEmpty {
                rowKeys.reserveCapacity(width)
                if rowBytes != nil { rowKeys.append(.null) }
            }
            for index in rowKeys.count..<width { rowKeys.append(try readers[index].value(of: row)) }
            // After every kept row it does not precede (ties: after the earlier rows).
            var low = 0, high = views.count
            while low < high {
                let middle = (low + high) / 2
                if precedes(rowKeys, rowBytes, keptAt: middle) { high = middle } else { low = middle + 1 }
            }
            views.insert(row.view(), at: low)
            keys.insert(contentsOf: rowKeys, at: low * width)
            if firstStringOrdinal != nil { firstKeyBytes.insert(rowBytes, at: low) }
            if views.count > count {
                views.removeLast()
                keys.removeLast(width)
                if firstStringOrdinal != nil { firstKeyBytes.removeLast() }
            }
            if firstStringOrdinal != nil, views.count == count { lastKeptBytes = firstKeyBytes[count - 1] }
        }

        /// The order of a row's first key (its ASCII bytes) against the kept row at
        /// `position`'s, in the first descriptor's direction (negative: the row comes first);
        /// `nil` when either is not an ASCII string or they are equal.
        private func firstKeyOrder(_ rowBytes: [UInt8]?, keptAt position: Int) -> Int? {
            guard let rowBytes, firstStringOrdinal != nil, let kept = firstKeyBytes[position] else { return nil }
            let order = rowBytes.withUnsafeBufferPointer { Self.byteOrder($0, kept) }
            guard order != 0 else { return nil }
            return firstAscending ? order : -order
        }

        /// The byte order of two byte strings: negative, zero or positive.
        private static func byteOrder(_ bytes: UnsafeBufferPointer<UInt8>, _ other: [UInt8]) -> Int {
            other.withUnsafeBufferPointer { byteOrder(bytes, $0) }
        }

        private static func byteOrder(_ bytes: UnsafeBufferPointer<UInt8>, _ other: UnsafeBufferPointer<UInt8>) -> Int {
            let common = min(bytes.count, other.count)
            if common > 0, let a = bytes.baseAddress, let b = other.baseAddress {
                let order = memcmp(a, b, common)
                if order != 0 { return Int(order) }
            }
            return bytes.count - other.count
        }

        /// The first key of the kept row at `position`: its text from its bytes when it is
        /// held as ASCII bytes (its place among ``keys`` holds a placeholder then).
        private func firstKey(keptAt position: Int) -> FetchValue {
            if let bytes = firstKeyBytes.isEmpty ? nil : firstKeyBytes[position] {
                return .attribute(.string(String(decoding: bytes, as: UTF8.self)))
            }
            return keys[position * descriptors.count]
        }

        /// Whether `rowKeys` (whose first is `rowBytes` as ASCII, if it is, and then a
        /// placeholder) come strictly before the keys of the kept row at `position`.
        private func precedes(_ rowKeys: [FetchValue], _ rowBytes: [UInt8]?, keptAt position: Int) -> Bool {
            let start = position * descriptors.count
            if let order = firstKeyOrder(rowBytes, keptAt: position) { return order < 0 }
            for (index, descriptor) in descriptors.enumerated() {
                if index == 0, firstStringOrdinal != nil {
                    let mine = rowBytes.map { FetchValue.attribute(.string(String(decoding: $0, as: UTF8.self))) } ?? rowKeys[0]
                    switch descriptor.order(mine, firstKey(keptAt: position)) {
                    case .orderedAscending: return true
                    case .orderedDescending: return false
                    case .orderedSame: continue
                    }
                }
                switch descriptor.order(rowKeys[index], keys[start + index]) {
                case .orderedAscending: return true
                case .orderedDescending: return false
                case .orderedSame: continue
                }
            }
            return false
        }
    }
}

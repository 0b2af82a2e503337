import Foundation
import ObjectGraph
import StrataEngine
import StrataSync

/// A row read in place ([ROW-1], format 3): the header, checksum and offsets are checked
/// once, then each field is decoded only when asked for, by field index.
///
/// A row that fails a check throws ``ObjectGraphError/Code/storeCorrupted`` naming what and
/// where; a field that cannot be decoded throws when it is read. Nothing traps and nothing
/// decodes to a wrong value: the checksum covers every byte.
///
/// The bytes are kept in one allocation with the row's layout, version and origin
/// (``RowStorage``); ``RowFields`` does the checking and decoding over them, and over bytes
/// a scan only borrows.
struct RowBytes {
    /// The bytes and what reading them needs.
    let storage: RowStorage
    /// The row's layout.
    var layout: RowLayout { storage.layout }
    /// The version the row was saved at.
    var version: UInt64 { storage.withUnsafeMutablePointerToHeader { $0.pointee.version } }
    /// The row's entity number.
    var entityNumber: UInt16 { layout.number }
    /// Where the bytes came from, for errors (rendered only when one is thrown).
    var context: RowOrigin { storage.withUnsafeMutablePointerToHeader { $0.pointee.context } }

    /// Checks `bytes` as a row of some entity of `store`. `readByEngine`: the bytes are a
    /// value the engine handed out, whose entry checksum covers them ([ENT-1]), so the row's
    /// own checksum is not computed again ([ROW-1]); every other check runs. `values`: the
    /// store layout and ID maker a node reading the row lazily needs (``RowStorage``).
    ///
    /// - Throws: `storeCorrupted` for a short row, a wrong checksum, an unknown format or
    ///   entity, a layout other than the entity's in `store`, or offsets out of order.
    init(_ bytes: [UInt8], store: StoreLayout, context: RowOrigin, readByEngine: Bool = false, values: RowStorage.Values? = nil) throws {
        self = try bytes.withUnsafeBytes { raw in
            try RowBytes(raw: raw, store: store, context: context, readByEngine: readByEngine, values: values)
        }
    }

    /// Checks `raw` as ``init(_:store:context:readByEngine:values:)`` does and copies it.
    init(raw: UnsafeRawBufferPointer, store: StoreLayout, context: RowOrigin, readByEngine: Bool, values: RowStorage.Values? = nil) throws {
        // [MIG-2] A row in an older layout is kept in its entity's current one.
        if store.hasLegacy, let upgraded = try RowFields.upgradedIfLegacy(raw, store: store, context: context, readByEngine: readByEngine) {
            self = try upgraded.withUnsafeBytes { try RowBytes(raw: $0, store: store, context: context, readByEngine: true, values: values) }
            return
        }
        let reader = try RowFields(raw, store: store, context: context, readByEngine: readByEngine)
        self.init(copying: reader, context: context, values: values)
    }

    /// A row already checked into `storage`.
    init(storage: RowStorage) { self.storage = storage }

    /// The row a reader checked, its bytes copied; `context` names it in errors.
    init(copying reader: RowFields, context: RowOrigin, values: RowStorage.Values? = nil) {
        storage = RowStorage.make(
            copying: reader.bytes, header: RowStorage.Header(
                count: reader.bytes.count, layout: reader.layout, version: reader.version, context: context, values: values))
    }

    /// `body` with a reader of these bytes (checked already); a field's error is prefixed
    /// with where the row came from.
    @inline(__always)
    private func withReader<R>(_ body: (RowFields) throws -> R) rethrows -> R {
        try storage.withUnsafeMutablePointers { header, elements in
            let raw = UnsafeRawBufferPointer(start: elements, count: header.pointee.count)
            do {
                return try body(RowFields(checked: raw, layout: header.pointee.layout, version: header.pointee.version))
            } catch {
                throw header.pointee.context.locating(error)
            }
        }
    }

    /// The little-endian integer at `offset` (see ``RowFields/load(_:_:_:)``).
    @inline(__always)
    static func load<T: FixedWidthInteger>(_ type: T.Type, _ bytes: [UInt8], _ offset: Int) -> T {
        bytes.withUnsafeBytes { RowFields.load(type, $0, offset) }
    }

    /// Whether field `index` is null (no value, no destination, no destinations stored).
    func isNull(_ index: Int) -> Bool { withReader { $0.isNull(index) } }

    /// The value of field `index`.
    func value(_ index: Int) throws -> FieldValue { try withReader { try $0.value(index) } }

    /// The attribute value of field `index` (null for a relationship).
    func attribute(_ index: Int) throws -> AttributeValue { try withReader { try $0.attribute(index) } }

    /// The field holding the property at `ordinal` of the row's entity, or `nil` when no
    /// field does (a transient property, a keyed to-many, an ordinal out of range).
    func field(ofOrdinal ordinal: Int) -> Int? { RowFields.field(ofOrdinal: ordinal, in: layout) }

    /// The attribute at `ordinal`, read in place; `nil` when no field holds it.
    func attribute(atOrdinal ordinal: Int) throws -> AttributeValue? { try withReader { try $0.attribute(atOrdinal: ordinal) } }

    /// The destination of the to-one at `ordinal`, if the row holds one.
    func object(atOrdinal ordinal: Int) throws -> StoredObject? { try withReader { try $0.object(atOrdinal: ordinal) } }

    /// `test`'s answer on the bytes of the string at `ordinal` (``RowFields/testStringBytes(atOrdinal:_:)``).
    func testStringBytes(atOrdinal ordinal: Int, _ test: (UnsafeBufferPointer<UInt8>) -> Bool?) -> Bool? {
        withReader { $0.testStringBytes(atOrdinal: ordinal, test) }
    }

    /// The number at `ordinal` as bits (``RowFields/fixedWidthBits(atOrdinal:as:)``).
    func fixedWidthBits(atOrdinal ordinal: Int, as kind: FixedWidthKind) -> UInt64? {
        withReader { $0.fixedWidthBits(atOrdinal: ordinal, as: kind) }
    }
}

/// A checked row's bytes in one allocation with its layout, version and origin, and, for a
/// row a fetch or fault read, the store layout and ID maker its node's values need: then it
/// is the node's lazy values itself (``LazyNodeValues``), so a fetched row costs one
/// allocation, not an array and a reader. Immutable after ``make(copying:header:)``, so
/// nodes holding it are shared between contexts and threads.
final class RowStorage: ManagedBuffer<RowStorage.Header, UInt8>, LazyNodeValues {
    /// What reading a row's destinations needs: the store's layouts (destination entity
    /// numbers) and its ID maker (its identity, not the store: no retain of the store per row).
    struct Values {
        let layout: StoreLayout
        let ids: ObjectIDMaker
    }

    /// Everything but the bytes.
    struct Header {
        /// The number of bytes.
        let count: Int
        let layout: RowLayout
        let version: UInt64
        /// Where the bytes came from, for errors.
        let context: RowOrigin
        /// Set when the row serves as a node's values.
        let values: Values?
    }

    /// A storage holding a copy of `bytes` (`header.count` of them).
    static func make(copying bytes: UnsafeRawBufferPointer, header: Header) -> RowStorage {
        let buffer = create(minimumCapacity: max(bytes.count, 1)) { _ in header }
        // `create` called on this class makes an instance of it.
        let storage = unsafeDowncast(buffer, to: RowStorage.self)
        storage.withUnsafeMutablePointerToElements { elements in
            if let base = bytes.baseAddress { elements.initialize(from: base.assumingMemoryBound(to: UInt8.self), count: bytes.count) }
        }
        return storage
    }

    /// `body` with the bytes and the header (read in place: the header's fields are counted
    /// references, which a copy would retain and release).
    @inline(__always)
    func withBytes<R>(_ body: (UnsafeRawBufferPointer, UnsafePointer<Header>) throws -> R) rethrows -> R {
        try withUnsafeMutablePointers { header, elements in
            try body(UnsafeRawBufferPointer(start: elements, count: header.pointee.count), UnsafePointer(header))
        }
    }

    /// The row's layout.
    var layout: RowLayout { withUnsafeMutablePointerToHeader { $0.pointee.layout } }
    /// The store layout and ID maker, when the row was read for a node.
    var values: Values? { withUnsafeMutablePointerToHeader { $0.pointee.values } }
    /// Whether the row was read for a node of `layout` (``values`` compared in place, with
    /// no copy of them retained and released).
    func keepsValues(of layout: StoreLayout) -> Bool {
        withUnsafeMutablePointerToHeader { $0.pointee.values?.layout === layout }
    }

    // MARK: LazyNodeValues ([ROW-1]: one property decoded at a time)

    func value(atOrdinal ordinal: Int) throws -> PropertyValue? {
        // The header read in place (its layout, store layout and ID maker are counted
        // references, which copies of them would retain and release at each read).
        try withBytes { bytes, header in
            let fields = RowFields(checked: bytes, layout: header.pointee.layout, version: header.pointee.version)
            guard let index = fields.field(ofOrdinal: ordinal) else { return nil }
            do {
                switch fields.layout.fields[index].kind {
                case .toMany:
                    return nil
                case .toOne:
                    guard header.pointee.values != nil else { return nil }
                    guard case .object(let target) = try fields.value(index),
                        let entity = header.pointee.values?.layout.entity(number: target.entity),
                        let id = header.pointee.values?.ids.id(for: entity, reference: target.reference)
                    else { return .relationship(.toOne(nil)) }
                    return .relationship(.toOne(id))
                default:
                    return .attribute(try fields.attribute(index))
                }
            } catch {
                throw header.pointee.context.locating(error)
            }
        }
    }

    func attribute(atOrdinal ordinal: Int) throws -> AttributeValue? {
        // The reader over the bytes in place: no row value, no switch on the field's kind.
        try RowBytes(storage: self).attribute(atOrdinal: ordinal)
    }

    func holds(ordinal: Int) -> Bool {
        let layout = self.layout
        guard let index = RowFields.field(ofOrdinal: ordinal, in: layout) else { return false }
        if case .toMany = layout.fields[index].kind { return false }
        return true
    }
}

/// Bytes a reader of borrowed rows holds for a row it upgraded from an older layout ([MIG-2]):
/// one buffer, reused row after row, so a scan of a migrated store allocates per upgraded row
/// only what the encoder does. Not shared: each scan or row source has its own.
final class RowScratch {
    private var buffer = UnsafeMutableRawBufferPointer(start: nil, count: 0)

    /// `bytes` copied into the buffer; valid until the next call or the scratch's end.
    func hold(_ bytes: [UInt8]) -> UnsafeRawBufferPointer {
        if buffer.count < bytes.count {
            buffer.deallocate()
            buffer = .allocate(byteCount: max(bytes.count, 2 * buffer.count), alignment: 8)
        }
        bytes.withUnsafeBytes { source in
            if let base = source.baseAddress, let target = buffer.baseAddress { target.copyMemory(from: base, byteCount: source.count) }
        }
        return UnsafeRawBufferPointer(start: buffer.baseAddress, count: bytes.count)
    }

    deinit { buffer.deallocate() }
}

/// The checks and the field decoding of a row ([ROW-1], format 3) over bytes it does not own:
/// a row's array (``RowBytes``), or a value a scan sees in the engine's decompressed block or
/// WAL window, tested before (and without) being copied.
///
/// Valid only while its bytes are. Its layout is not retained and it holds nothing else that
/// is counted (a row read per scanned row costs no reference count, and copies of the reader
/// are plain copies): whoever makes a reader keeps the layout alive, as a ``RowBytes`` (which
/// holds it) or a fetch's row source (which holds the store layout) do. A field's error names
/// the field; the owner of the bytes adds where the row came from (``RowOrigin/locating(_:)``).
struct RowFields {
    let bytes: UnsafeRawBufferPointer
    unowned(unsafe) let layout: RowLayout
    /// The version the row was saved at.
    let version: UInt64
    /// The row's entity number.
    var entityNumber: UInt16 { layout.number }

    /// Checks `bytes` as a row of some entity of `store` (see
    /// ``RowBytes/init(_:store:context:readByEngine:)``); `context`, where the bytes came from,
    /// is made only for an error.
    ///
    /// A row in an older layout of its entity that `store` keeps ([MIG-2]) is upgraded to the
    /// current layout into `scratch`, whose bytes the reader then reads (valid until the
    /// scratch holds another row); without a scratch it is refused as a layout mismatch.
    @inline(__always)
    init(
        _ bytes: UnsafeRawBufferPointer, store: StoreLayout, context: @autoclosure () -> RowOrigin, readByEngine: Bool,
        scratch: RowScratch? = nil
    ) throws {
        // The checks build no message and capture nothing counted: a row read per scanned row
        // costs no reference count. The error is made out of line, only on failure.
        switch Self.check(bytes, store: store, readByEngine: readByEngine) {
        case .success(let layout):
            self.bytes = bytes
            self.layout = layout.takeUnretainedValue()
            self.version = Self.load(UInt64.self, bytes, 8)
        case .failure(let problem):
            if case .layout(let number, let layoutID) = problem, let scratch,
                let legacy = store.legacyLayout(number: number, layoutID: layoutID)
            {
                let upgraded = try Self.upgrade(bytes, legacy: legacy, store: store, context: context(), readByEngine: readByEngine)
                self.bytes = scratch.hold(upgraded)
                self.layout = legacy.current
                self.version = Self.load(UInt64.self, self.bytes, 8)
                return
            }
            throw problem.error(bytes, store: store, context: context())
        }
    }

    /// Checks `bytes` as ``init(_:store:context:readByEngine:scratch:)`` does, reading a row in
    /// an older layout of its entity that `store` keeps ([MIG-2]) through that layout's field
    /// sources, field by field, instead of upgrading the whole row: for scans that read a
    /// field or two of each row.
    @inline(__always)
    static func current(
        _ bytes: UnsafeRawBufferPointer, store: StoreLayout, context: @autoclosure () -> RowOrigin, readByEngine: Bool
    ) throws -> CurrentRowFields {
        switch Self.check(bytes, store: store, readByEngine: readByEngine) {
        case .success(let layout):
            return CurrentRowFields(
                fields: RowFields(checked: bytes, layout: layout.takeUnretainedValue(), version: Self.load(UInt64.self, bytes, 8)), legacy: nil)
        case .failure(let problem):
            if case .layout(let number, let layoutID) = problem, let legacy = store.legacyLayout(number: number, layoutID: layoutID) {
                if let problem = check(bytes, row: legacy.old, number: legacy.old.number, readByEngine: true) {
                    throw problem.error(bytes, store: store, context: context())
                }
                return CurrentRowFields(fields: RowFields(checked: bytes, layout: legacy.old, version: load(UInt64.self, bytes, 8)), legacy: legacy)
            }
            throw problem.error(bytes, store: store, context: context())
        }
    }

    /// The bytes of a row in an older layout ([MIG-2]) in its entity's current one, or `nil`
    /// when `bytes` is not such a row (it is then checked as usual).
    ///
    /// - Throws: `storeCorrupted` when the old row fails its old layout's checks or a field
    ///   does not decode.
    static func upgradedIfLegacy(
        _ bytes: UnsafeRawBufferPointer, store: StoreLayout, context: @autoclosure () -> RowOrigin, readByEngine: Bool
    ) throws -> [UInt8]? {
        guard store.hasLegacy, case .failure(.layout(let number, let layoutID)) = check(bytes, store: store, readByEngine: readByEngine),
            let legacy = store.legacyLayout(number: number, layoutID: layoutID)
        else { return nil }
        return try upgrade(bytes, legacy: legacy, store: store, context: context(), readByEngine: readByEngine)
    }

    /// `bytes`, checked against `legacy`'s old layout, in the current one.
    @inline(never)
    private static func upgrade(
        _ bytes: UnsafeRawBufferPointer, legacy: LegacyLayout, store: StoreLayout, context: RowOrigin, readByEngine: Bool
    ) throws -> [UInt8] {
        if let problem = check(bytes, row: legacy.old, number: legacy.old.number, readByEngine: true) {
            throw problem.error(bytes, store: store, context: context)
        }
        do {
            return try legacy.upgrade(RowFields(checked: bytes, layout: legacy.old, version: load(UInt64.self, bytes, 8)))
        } catch {
            throw context.locating(error)
        }
    }

    /// What is wrong with a row's bytes, found by ``check(_:store:readByEngine:)``.
    private enum Problem: Error {
        case short, checksum(stored: UInt32, computed: UInt32), format, flags, entity(UInt16)
        case layout(UInt16, UInt32), shortForLayout(UInt16), endsMismatch(UInt32, Int)

        /// The error naming `context` and what is wrong.
        @inline(never)
        func error(_ bytes: UnsafeRawBufferPointer, store: StoreLayout, context: RowOrigin) -> ObjectGraphError {
            func fail(_ what: String) -> ObjectGraphError { ObjectGraphError(.storeCorrupted, "\(context): \(what)") }
            switch self {
            case .short:
                if bytes.first == 1 { return RowFields.earlierFormat(1, context) }
                return fail("row of \(bytes.count) bytes is shorter than a header")
            case .checksum(let stored, let computed):
                if bytes[0] == 1 { return RowFields.earlierFormat(1, context) }
                return fail("row checksum \(hex(stored)) does not match its bytes (\(hex(computed)))")
            case .format:
                if bytes[0] == 2 { return RowFields.earlierFormat(2, context) }
                return fail("row format \(bytes[0]) is not supported (this build reads format \(RowEncoder.format))")
            case .flags:
                return fail("row flags \(bytes[1]) are not 0")
            case .entity(let number):
                return fail("entity number \(number) is not in the model (its entities are numbered below \(store.numberCount))")
            case .layout(let number, let layoutID):
                let name = store.entity(number: number)?.name ?? "#\(number)"
                return ObjectGraphError(
                    .storeCorrupted,
                    "\(context): the row of \(name) was written with layout \(hex(layoutID)), not this model's \(hex(store.layoutsByNumber[Int(number)]?.layoutID ?? 0)) nor an older one the store's model record keeps; open the store with the model it was saved with",
                    entityName: name)
            case .shortForLayout(let number):
                return fail("row of \(bytes.count) bytes is shorter than the layout of \(store.entity(number: number)?.name ?? "#\(number)")")
            case .endsMismatch(let previous, let area):
                return fail("variable fields end at \(previous), the row's variable area holds \(area) bytes")
            }
        }
    }

    /// The checks of ``init(_:store:context:readByEngine:)``: the layout of the row's entity
    /// (not retained: `store` holds it), or what is wrong.
    private static func check(
        _ bytes: UnsafeRawBufferPointer, store: StoreLayout, readByEngine: Bool
    ) -> Result<Unmanaged<RowLayout>, Problem> {
        guard bytes.count >= RowLayout.headerSize + RowLayout.trailerSize else { return .failure(.short) }
        let body = bytes.count - RowLayout.trailerSize
        if !readByEngine {
            let stored = Self.load(UInt32.self, bytes, body)
            let computed = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[..<body]))
            guard stored == computed else { return .failure(.checksum(stored: stored, computed: computed)) }
        }
        guard bytes[0] == RowEncoder.format else { return .failure(.format) }
        guard bytes[1] == 0 else { return .failure(.flags) }
        let number = Self.load(UInt16.self, bytes, 2)
        // By number: no lookup by entity, and the entity itself only for an error.
        guard let layout = store.unretainedLayout(number: number) else { return .failure(.entity(number)) }
        return layout._withUnsafeGuaranteedRef { (row) -> Result<Unmanaged<RowLayout>, Problem> in
            if let problem = check(bytes, row: row, number: number, readByEngine: true) { return .failure(problem) }
            return .success(layout)
        }
    }

    /// The checks of the bytes after the entity number against `row`, the layout of entity
    /// `number` (the checksum, the format and flags too when `readByEngine` is `false`).
    @inline(__always)
    private static func check(_ bytes: UnsafeRawBufferPointer, row: RowLayout, number: UInt16, readByEngine: Bool) -> Problem? {
        guard bytes.count >= RowLayout.headerSize + RowLayout.trailerSize else { return .short }
        let body = bytes.count - RowLayout.trailerSize
        if !readByEngine {
            let stored = Self.load(UInt32.self, bytes, body)
            let computed = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[..<body]))
            guard stored == computed else { return .checksum(stored: stored, computed: computed) }
        }
        guard Self.load(UInt32.self, bytes, 4) == row.layoutID else { return .layout(number, Self.load(UInt32.self, bytes, 4)) }
        guard body >= row.variableStart else { return .shortForLayout(number) }
        // The last end must close the variable area; each field's own ends are checked when
        // it is read (``variableRange(_:_:in:)``), so a scan testing one field reads two.
        let last: UInt32 = row.variableCount == 0 ? 0 : Self.load(UInt32.self, bytes, row.endsStart + 4 * (row.variableCount - 1))
        guard Int(last) == body - row.variableStart else { return .endsMismatch(last, body - row.variableStart) }
        return nil
    }

    /// A reader of bytes checked already against `layout`.
    @inline(__always)
    init(checked bytes: UnsafeRawBufferPointer, layout: RowLayout, version: UInt64) {
        self.bytes = bytes
        self.layout = layout
        self.version = version
    }

    private static func earlierFormat(_ format: UInt8, _ context: RowOrigin) -> ObjectGraphError {
        ObjectGraphError(
            .storeCorrupted,
            "\(context): the row is in format \(format), written by an earlier Strata; this build reads format \(RowEncoder.format). Copy the objects out with the earlier build (`strata dump` shows them; a fetch of each entity reads them) and insert them into a new store made by this build: model migration, lightweight or staged, converts stores of this format only.")
    }

    /// The little-endian integer at `offset`: one unaligned load after one bounds check.
    ///
    /// - Precondition: the integer lies inside `bytes` (every caller has checked the row's
    ///   size against its layout first: a violation is a bug, and traps as an array index
    ///   would).
    @inline(__always)
    static func load<T: FixedWidthInteger>(_ type: T.Type, _ bytes: UnsafeRawBufferPointer, _ offset: Int) -> T {
        precondition(offset >= 0 && offset <= bytes.count - MemoryLayout<T>.size, "row field read out of bounds")
        return T(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: T.self))
    }

    /// Whether field `index` is null (no value, no destination, no destinations stored).
    func isNull(_ index: Int) -> Bool {
        bytes[RowLayout.headerSize + index / 8] & (1 << UInt8(index % 8)) != 0
    }

    /// The byte range of variable field `position` in the ends table.
    /// The byte range of variable field `position` (field `index`) in the ends table, or a
    /// corruption error when its ends are out of order or past the variable area.
    private func variableRange(_ index: Int, _ position: Int, in layout: RowLayout) throws -> Range<Int> {
        guard let range = checkedVariableRange(position, in: layout) else {
            throw fail(index, "variable field \(position)'s ends are out of order or past the row's variable area")
        }
        return range
    }

    /// The byte range of variable field `position`, or `nil` when its ends are out of order or
    /// past the variable area. Init checked that the last end closes the area.
    @inline(__always)
    private func checkedVariableRange(_ position: Int, in layout: RowLayout) -> Range<Int>? {
        let start = position == 0 ? 0 : Int(Self.load(UInt32.self, bytes, layout.endsStart + 4 * (position - 1)))
        let end = Int(Self.load(UInt32.self, bytes, layout.endsStart + 4 * position))
        guard start <= end, layout.variableStart + end <= bytes.count - RowLayout.trailerSize else { return nil }
        return layout.variableStart + start..<layout.variableStart + end
    }

    /// A field's error; its reader's owner prefixes where the row came from.
    private func fail(_ index: Int, _ what: String) -> ObjectGraphError {
        let name = layout.fields[index].name
        return ObjectGraphError(.storeCorrupted, "field \(name): \(what)", key: name)
    }

    /// The value of field `index`.
    func value(_ index: Int) throws -> FieldValue {
        // The layout read without a retain (it outlives the reader), the field's kind and
        // position without a copy of its name.
        try Unmanaged.passUnretained(layout)._withUnsafeGuaranteedRef { layout in
            try value(index, kind: layout.fields[index].kind, position: layout.fields[index].position, in: layout)
        }
    }

    private func value(_ index: Int, kind: RowLayout.Kind, position: Int, in layout: RowLayout) throws -> FieldValue {
        if isNull(index) {
            // A null fixed-width field is zeros: nothing else may hide in its bytes.
            let width = kind.width
            if width > 0, bytes[layout.fixedStart + position..<layout.fixedStart + position + width].contains(where: { $0 != 0 }) {
                throw fail(index, "null field with non-zero bytes")
            }
            switch kind {
            case .toOne: return .null
            case .toMany: return .objects([])
            default: return .attribute(.null)
            }
        }
        let at = layout.fixedStart + position
        switch kind {
        case .int16: return .attribute(.int16(Int16(bitPattern: Self.load(UInt16.self, bytes, at))))
        case .int32: return .attribute(.int32(Int32(bitPattern: Self.load(UInt32.self, bytes, at))))
        case .int64: return .attribute(.int64(Int64(bitPattern: Self.load(UInt64.self, bytes, at))))
        case .bool:
            guard bytes[at] <= 1 else { throw fail(index, "boolean byte \(bytes[at])") }
            return .attribute(.bool(bytes[at] == 1))
        case .double: return .attribute(.double(Double(bitPattern: Self.load(UInt64.self, bytes, at))))
        case .float: return .attribute(.float(Float(bitPattern: Self.load(UInt32.self, bytes, at))))
        case .date: return .attribute(.date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: Self.load(UInt64.self, bytes, at)))))
        case .uuid:
            let b = bytes
            return .attribute(.uuid(UUID(uuid: (
                b[at], b[at + 1], b[at + 2], b[at + 3], b[at + 4], b[at + 5], b[at + 6], b[at + 7],
                b[at + 8], b[at + 9], b[at + 10], b[at + 11], b[at + 12], b[at + 13], b[at + 14], b[at + 15]))))
        case .toOne:
            return .object(StoredObject(entity: Self.load(UInt16.self, bytes, at), reference: Int64(bitPattern: Self.load(UInt64.self, bytes, at + 2))))
        case .string:
            return .attribute(.string(try text(index, position, in: layout)))
        case .decimal:
            let text = try text(index, position, in: layout)
            guard let decimal = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) else { throw fail(index, "decimal \"\(text)\"") }
            return .attribute(.decimal(decimal))
        case .uri:
            let text = try text(index, position, in: layout)
            guard let url = URL(string: text) else { throw fail(index, "URI \"\(text)\"") }
            return .attribute(.uri(url))
        case .data:
            return .attribute(.data(Data(bytes[try variableRange(index, position, in: layout)])))
        case .transformable:
            return .attribute(.transformable(Data(bytes[try variableRange(index, position, in: layout)])))
        case .toMany:
            let range = try variableRange(index, position, in: layout)
            guard range.count % RowLayout.objectWidth == 0 else { throw fail(index, "\(range.count) bytes of destinations") }
            var objects: [StoredObject] = []
            objects.reserveCapacity(range.count / RowLayout.objectWidth)
            var at = range.lowerBound
            while at < range.upperBound {
                objects.append(StoredObject(entity: Self.load(UInt16.self, bytes, at), reference: Int64(bitPattern: Self.load(UInt64.self, bytes, at + 2))))
                at += RowLayout.objectWidth
            }
            return .objects(objects)
        }
    }

    /// The attribute value of field `index` (null for a relationship).
    func attribute(_ index: Int) throws -> AttributeValue {
        if case .attribute(let value) = try value(index) { return value }
        return .null
    }

    /// The field holding the property at `ordinal` of an entity laid out as `layout`, or
    /// `nil` when no field does (a transient property, a keyed to-many, an ordinal out of range).
    @inline(__always)
    static func field(ofOrdinal ordinal: Int, in layout: RowLayout) -> Int? {
        guard ordinal >= 0, ordinal < layout.fieldOfOrdinal.count else { return nil }
        let field = layout.fieldOfOrdinal[ordinal]
        return field >= 0 ? field : nil
    }

    /// The field holding the property at `ordinal` of the row's entity, if any (the layout
    /// read without a retain: it outlives the reader).
    func field(ofOrdinal ordinal: Int) -> Int? {
        Unmanaged.passUnretained(layout)._withUnsafeGuaranteedRef { Self.field(ofOrdinal: ordinal, in: $0) }
    }

    /// The attribute at `ordinal`, read in place; `nil` when no field holds it.
    func attribute(atOrdinal ordinal: Int) throws -> AttributeValue? {
        guard let field = field(ofOrdinal: ordinal) else { return nil }
        return try attribute(field)
    }

    /// The destination of the to-one at `ordinal`, if the row holds one.
    func object(atOrdinal ordinal: Int) throws -> StoredObject? {
        guard let field = field(ofOrdinal: ordinal), case .object(let target) = try value(field) else { return nil }
        return target
    }

    /// `test`'s answer on the UTF-8 bytes of the string attribute at `ordinal`, in place;
    /// `nil` when no string field holds it or it is null. Invalid UTF-8 is never passed as
    /// ASCII: a test decides on one-byte characters only, and answers `nil` otherwise (the
    /// value is then decoded, and checked, as a `String`).
    func testStringBytes(atOrdinal ordinal: Int, _ test: (UnsafeBufferPointer<UInt8>) -> Bool?) -> Bool? {
        Unmanaged.passUnretained(layout)._withUnsafeGuaranteedRef { layout in
            // Ends out of order: `nil`, and the decoding of the `String` reports them.
            guard let index = Self.field(ofOrdinal: ordinal, in: layout), layout.fields[index].kind == .string, !isNull(index),
                let range = checkedVariableRange(layout.fields[index].position, in: layout)
            else { return nil }
            let slice = UnsafeRawBufferPointer(rebasing: bytes[range])
            return test(slice.assumingMemoryBound(to: UInt8.self))
        }
    }

    /// The bits of the number at `ordinal` read as `kind`
    /// (``OrdinalFetchEvaluable/fixedWidthBits(atOrdinal:as:)``), in place; `nil` when no
    /// field of that kind holds it or it is null.
    func fixedWidthBits(atOrdinal ordinal: Int, as kind: FixedWidthKind) -> UInt64? {
        Unmanaged.passUnretained(layout)._withUnsafeGuaranteedRef { layout in
            guard let index = Self.field(ofOrdinal: ordinal, in: layout), !isNull(index) else { return nil }
            let at = layout.fixedStart + layout.fields[index].position
            switch (kind, layout.fields[index].kind) {
            case (.integer, .int64), (.double, .double), (.date, .date): return Self.load(UInt64.self, bytes, at)
            case (.integer, .int32): return UInt64(bitPattern: Int64(Int32(bitPattern: Self.load(UInt32.self, bytes, at))))
            case (.integer, .int16): return UInt64(bitPattern: Int64(Int16(bitPattern: Self.load(UInt16.self, bytes, at))))
            default: return nil
            }
        }
    }

    /// The text of a string-like variable field; ASCII needs no validation.
    private func text(_ index: Int, _ position: Int, in layout: RowLayout) throws -> String {
        guard let text = Text.decode(UnsafeRawBufferPointer(rebasing: bytes[try variableRange(index, position, in: layout)])) else {
            throw fail(index, "invalid UTF-8")
        }
        return text
    }
}

/// A row read as its entity's current layout ([MIG-2]): its own fields, and for a row in an
/// older layout the legacy layout whose sources give each current field
/// (``RowFields/current(_:store:context:readByEngine:)``). Valid only while its bytes are;
/// the store layout that made it keeps the legacy layout alive.
struct CurrentRowFields {
    /// The row's fields, in the layout it was written in.
    let fields: RowFields
    /// The older layout the row was written in, or `nil` for a row in the current one.
    unowned(unsafe) let legacy: LegacyLayout?

    /// The current layout of the row's entity.
    var layout: RowLayout { legacy?.current ?? fields.layout }
    /// The row's entity number.
    var entityNumber: UInt16 { fields.entityNumber }

    /// The field of the current layout holding the property at `ordinal`, if any.
    func field(ofOrdinal ordinal: Int) -> Int? { RowFields.field(ofOrdinal: ordinal, in: layout) }

    /// The value of field `index` of the current layout.
    func value(_ index: Int) throws -> FieldValue {
        if let legacy { return try legacy.value(index, of: fields) }
        return try fields.value(index)
    }

    /// The destination of the to-one at `ordinal`, if the row holds one.
    func object(atOrdinal ordinal: Int) throws -> StoredObject? {
        guard let field = field(ofOrdinal: ordinal), case .object(let target) = try value(field) else { return nil }
        return target
    }
}

/// Where a row came from, for error messages; made per row read, so it renders nothing until
/// an error needs it.
struct RowOrigin: CustomStringConvertible, ExpressibleByStringLiteral, Sendable {
    private enum Kind: Sendable {
        case key(root: String, reference: Int64)
        case object(ManagedObjectID)
        case text(String)
    }
    private let kind: Kind

    /// The row at a key: `row <root> #<reference>`.
    static func key(root: String, reference: Int64) -> RowOrigin { RowOrigin(kind: .key(root: root, reference: reference)) }
    /// The row of an object: `row of <URI>`.
    static func object(_ id: ManagedObjectID) -> RowOrigin { RowOrigin(kind: .object(id)) }

    private init(kind: Kind) { self.kind = kind }
    init(stringLiteral value: String) { kind = .text(value) }

    /// `error` with this origin before its message, if it is a corruption a row reader
    /// found (``RowFields`` names only the field); any other error as it is.
    func locating(_ error: any Error) -> any Error {
        guard var error = error as? ObjectGraphError, error.code == .storeCorrupted else { return error }
        error.message = "\(self): \(error.message)"
        return error
    }

    var description: String {
        switch kind {
        case .key(let root, let reference): return "row \(root) #\(reference)"
        case .object(let id): return "row of \(id)"
        case .text(let text): return text
        }
    }
}

private func hex(_ value: UInt32) -> String {
    "0x" + String(value, radix: 16, uppercase: true)
}

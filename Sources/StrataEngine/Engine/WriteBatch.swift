/// A transaction: puts and deletes applied atomically by ``Engine/commit(_:)``.
///
/// For example:
///
/// ```swift
/// var batch = WriteBatch()
/// batch.put(Array("user/1".utf8), Array("Ada".utf8))
/// batch.delete(Array("user/2".utf8))
/// let sequence = try engine.commit(batch)
/// ```
///
/// Within one batch, a later operation on a key replaces an earlier one.
public struct WriteBatch: Sendable {
    var operations: [WALRecord.Operation] = []

    /// An empty batch.
    public init() {}

    /// Sets `key` to `value`.
    public mutating func put(_ key: [UInt8], _ value: [UInt8]) {
        operations.append(.init(isDelete: false, key: key, value: value))
    }

    /// Removes `key` (a no-op if absent).
    public mutating func delete(_ key: [UInt8]) {
        operations.append(.init(isDelete: true, key: key, value: []))
    }

    /// Appends `other`'s operations after this batch's, in their order.
    public mutating func append(contentsOf other: WriteBatch) {
        operations.append(contentsOf: other.operations)
    }

    /// Calls `body` with each operation in order: the key and the value put, or `nil` for a
    /// delete.
    public func forEach(_ body: (_ key: [UInt8], _ value: [UInt8]?) throws -> Void) rethrows {
        for operation in operations { try body(operation.key, operation.isDelete ? nil : operation.value) }
    }

    /// The number of operations.
    public var count: Int { operations.count }
    /// Whether the batch has no operations.
    public var isEmpty: Bool { operations.isEmpty }

    /// Checks sizes against the format's limits.
    func validate() throws(StoreError) {
        var total = 0
        for operation in operations {
            guard operation.key.count <= Format.maxKeyLength else {
                throw StoreError(
                    .invalidArgument, "key of \(operation.key.count) bytes exceeds the limit of \(Format.maxKeyLength)")
            }
            guard operation.value.count <= Format.maxValueLength else {
                throw StoreError(
                    .invalidArgument,
                    "value of \(operation.value.count) bytes exceeds the limit of \(Format.maxValueLength)")
            }
            total += operation.key.count + operation.value.count + 32
        }
        guard total <= Format.maxRecordPayload else {
            throw StoreError(
                .invalidArgument, "batch of about \(total) bytes exceeds the limit of \(Format.maxRecordPayload); split it")
        }
    }
}

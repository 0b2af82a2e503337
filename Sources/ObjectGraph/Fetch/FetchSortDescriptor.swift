import Foundation

/// One sort key of a fetch: a key path and a direction (Core Data's `NSSortDescriptor`).
///
/// `null` sorts before every other value in ascending order.
///
/// For example:
///
/// ```swift
/// request.sortDescriptors = [FetchSortDescriptor(keyPath: "name"),
///                            FetchSortDescriptor(keyPath: "age", ascending: false)]
/// ```
public struct FetchSortDescriptor: Sendable, Hashable, CustomStringConvertible {
    /// The key path whose values are compared.
    public var keyPath: String
    /// Whether smaller values come first.
    public var ascending: Bool
    /// String comparison options.
    public var options: ComparisonOptions

    /// Creates a sort descriptor.
    public init(keyPath: String, ascending: Bool = true, options: ComparisonOptions = []) {
        self.keyPath = keyPath
        self.ascending = ascending
        self.options = options
    }

    /// The key path and direction.
    public var description: String { "\(keyPath) \(ascending ? "ASC" : "DESC")" }

    /// Compares two subjects by this descriptor.
    public func compare(_ lhs: some FetchEvaluable, _ rhs: some FetchEvaluable) throws -> ComparisonResult {
        order(try lhs.fetchValue(forKeyPath: keyPath), try rhs.fetchValue(forKeyPath: keyPath))
    }

    func order(_ lhs: FetchValue, _ rhs: FetchValue) -> ComparisonResult {
        let result = FetchValue.sortOrder(lhs, rhs, options: options)
        guard !ascending else { return result }
        switch result {
        case .orderedAscending: return .orderedDescending
        case .orderedDescending: return .orderedAscending
        case .orderedSame: return .orderedSame
        }
    }

    /// Sorts subjects by several descriptors; ties keep their original order.
    ///
    /// Each subject's key-path values are read once.
    public static func sort<T: FetchEvaluable>(_ items: [T], by descriptors: [FetchSortDescriptor]) throws -> [T] {
        guard !descriptors.isEmpty, items.count > 1 else { return items }
        let keys = try items.map { item in try descriptors.map { try item.fetchValue(forKeyPath: $0.keyPath) } }
        let order = items.indices.sorted { a, b in
            for (index, descriptor) in descriptors.enumerated() {
                switch descriptor.order(keys[a][index], keys[b][index]) {
                case .orderedAscending: return true
                case .orderedDescending: return false
                case .orderedSame: continue
                }
            }
            return a < b
        }
        return order.map { items[$0] }
    }
}

import Foundation

/// A store that loads and saves all its data at once (Core Data's `NSAtomicStore`).
///
/// Not implemented yet: this base class is a placeholder so the store hierarchy has its
/// final shape. Cache nodes, `load()`, `save()` and reference objects come in a later
/// issue; a coordinator refuses to add an `AtomicStore` until then.
open class AtomicStore: PersistentStore, @unchecked Sendable {}

import ObjectGraph
import StrataEngine

extension ObjectGraphError.Code {
    /// The store is open in another process (or another coordinator in this one).
    public static let storeLocked = ObjectGraphError.Code(rawValue: "storeLocked")
    /// Bytes of the store failed a check; the message names the file and offset or key.
    public static let storeCorrupted = ObjectGraphError.Code(rawValue: "storeCorrupted")
    /// Reading or writing the store's files failed.
    public static let storeIOFailed = ObjectGraphError.Code(rawValue: "storeIOFailed")
}

extension ObjectGraphError {
    /// An engine error as the contract reports it: the engine's code picks ours, and the
    /// message keeps the engine's file, offset and advice.
    init(_ error: StoreError, while doing: String) {
        let code: ObjectGraphError.Code
        switch error.code {
        case .locked: code = .storeLocked
        case .corruption: code = .storeCorrupted
        case .notAStore, .unsupportedVersion, .notFound: code = .storeOpenFailed
        case .invalidArgument: code = .invalidArgument
        default: code = .storeIOFailed
        }
        self.init(code, "StrataStore could not \(doing): \(error)")
    }
}

/// Runs `body` and turns an engine error into an ``ObjectGraphError``.
func mappingEngineErrors<T>(_ doing: @autoclosure () -> String, _ body: () throws(StoreError) -> T) throws(ObjectGraphError) -> T {
    do {
        return try body()
    } catch {
        throw ObjectGraphError(error, while: doing())
    }
}

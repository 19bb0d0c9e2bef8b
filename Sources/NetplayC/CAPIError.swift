import CNetplayAPI
import Foundation
import NetplayKit
import NetplayWire

// The C API's results and its per-thread last error (np_last_error, np_last_error_code).

/// An ``np_result`` with its reason: what every entry point returns on failure.
struct CAPIFailure: Error {
    /// The NP_ERR_* code.
    let result: np_result
    /// The reason, for np_last_error.
    let message: String
    /// The wire error code of a refusal (NP_ERR_REFUSED) or a service's NOT_FOUND, 0 otherwise.
    var wireCode: Int32 = 0

    init(_ result: np_result, _ message: String, wireCode: Int32 = 0) {
        self.result = result
        self.message = message
        self.wireCode = wireCode
    }

    /// The failure an error from NetplayKit (or anything else) stands for.
    init(_ error: any Error) {
        if let failure = error as? CAPIFailure {
            self = failure
        } else if let error = error as? NetplayError {
            switch error.code {
            case .unavailable, .noRelay, .timeout, .shuttingDown, .overloaded:
                self.init(NP_ERR_UNAVAILABLE, error.description, wireCode: error.code.rawValue)
            case .internal, .unspecified:
                self.init(NP_ERR_INTERNAL, error.description)
            case .notFound:  // no such room or session (any more): what netplay.h names NP_ERR_NOT_FOUND for
                self.init(NP_ERR_NOT_FOUND, error.description, wireCode: error.code.rawValue)
            default:
                self.init(NP_ERR_REFUSED, error.description, wireCode: error.code.rawValue)
            }
        } else {
            self.init(NP_ERR_INTERNAL, "\(error)")
        }
    }

    static func invalid(_ message: String) -> CAPIFailure { CAPIFailure(NP_ERR_INVALID_ARGUMENT, message) }
}

/// The calling thread's last error: a C string owned here, valid until the next error on the thread.
final class LastError {
    private(set) var text: UnsafeMutablePointer<CChar>
    private(set) var code: Int32 = 0

    init() { text = strdup("")! }
    deinit { free(text) }

    func set(_ message: String, code: Int32) {
        free(text)
        text = strdup(message)!
        self.code = code
    }

    private static let key = "np.last-error"

    /// This thread's slot, made on first use.
    static var current: LastError {
        let dictionary = Thread.current.threadDictionary
        if let slot = dictionary[key] as? LastError { return slot }
        let slot = LastError()
        dictionary[key] = slot
        return slot
    }
}

/// Records `failure` as this thread's last error and returns its code.
func report(_ failure: CAPIFailure) -> np_result {
    LastError.current.set(failure.message, code: failure.result == NP_ERR_REFUSED || failure.result == NP_ERR_NOT_FOUND ? failure.wireCode : 0)
    return failure.result
}

/// Runs an entry point's body: NP_OK, or the failure it threw recorded as the last error.
func entry(_ body: () throws -> Void) -> np_result {
    do {
        try body()
        return NP_OK
    } catch {
        return report(CAPIFailure(error))
    }
}

@_cdecl("np_last_error")
public func np_last_error() -> UnsafePointer<CChar> {
    UnsafePointer(LastError.current.text)
}

@_cdecl("np_last_error_code")
public func np_last_error_code() -> Int32 {
    LastError.current.code
}

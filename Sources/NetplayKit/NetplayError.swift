import NetplayWire

/// Something NetplayKit could not do, with the wire error code when a service refused.
public struct NetplayError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The service's error code (`.unspecified` for local failures).
    public var code: ErrorCode
    /// One sentence.
    public var message: String

    /// Creates an error.
    public init(_ code: ErrorCode = .unspecified, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { code == .unspecified ? message : "\(code.protoName): \(message)" }
}

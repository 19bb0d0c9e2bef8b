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

extension NetplayError {
    /// Throws `BAD_REQUEST` naming the field when `message` breaks the wire's limits (a game name
    /// over 128 bytes, a password over 128, a region over 32), before anything is sent: such a
    /// request failed to encode at the send and was reported as the service not answering, which
    /// no retry could change (and a LAN room's beacons and the host's own attach failed the same
    /// way, silently, until the match gave up on its relay).
    static func requireWireFit(_ message: some WireMessage, _ what: String) throws(NetplayError) {
        if let problem = message.wireProblem { throw NetplayError(.badRequest, "The \(what) does not fit the wire: \(problem.description)") }
    }
}

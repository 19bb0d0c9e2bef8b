import NetplayService
import NetplayWire

/// Where a ``RelayCore`` sends what it produces. The relay service implements it over its
/// ROUTER, PUB and telemetry sockets; tests implement it with arrays.
public protocol RelayTransport: AnyObject {
    /// Sends `body` to an attached peer (request id 0: pushes, forwards and broadcasts).
    func send(_ body: Envelope.Body, to peer: PeerAddress)
    /// Sends an Envelope the relay encoded itself (the per-frame hot path).
    func sendEncoded(_ envelope: UnsafeRawBufferPointer, to peer: PeerAddress)
    /// Publishes an event on the relay's PUB socket and records it with telemetry at `severity`
    /// (info: the normal course; notice: a substituted or dropped peer; warning: a desync;
    /// error: a failed transfer or replay).
    func publish(topic: String, _ body: Envelope.Body, severity: Severity, message: String, sessionId: String)
    /// Pushes a session's HUD statistics to telemetry.
    func pushStats(_ stats: SessionStats)
    /// Bytes sent to `peer` that its end has not acknowledged yet, as far as the transport can
    /// tell (nil: it cannot). State transfers wait while it is high: a target's own
    /// acknowledgements of what it read can be forged.
    func unacknowledgedBytes(to peer: PeerAddress) -> Int?
}

extension RelayTransport {
    /// A transport that cannot tell (in-process ones, tests).
    public func unacknowledgedBytes(to peer: PeerAddress) -> Int? { nil }
}

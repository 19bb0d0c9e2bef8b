import Rollback

/// A rollback session driven by hand in a test: what ``completeHandshake(_:with:)`` needs.
public protocol HandDrivenSession: AnyObject {
    /// The session's state.
    var state: SessionState { get }
    /// Runs its timers.
    func poll(now: UInt64)
    /// Takes what it would send.
    func drainOutgoing() -> [OutgoingMessage]
    /// Hands it a message.
    func handle(_ message: RollbackMessage, from peer: PeerID, now: UInt64)
}

extension P2PSession: HandDrivenSession {}
extension SpectatorSession: HandDrivenSession {}

/// Runs `session`'s handshake with `peer` (a relay or a host that answers every sync request at
/// once) in 10 ms steps from time 0; returns the time it reached running.
@discardableResult
public func completeHandshake(_ session: some HandDrivenSession, with peer: PeerID) -> UInt64 {
    var now: UInt64 = 0
    while session.state != .running && now < 60_000 {
        session.poll(now: now)
        for out in session.drainOutgoing() {
            if case .syncRequest(let request) = out.message {
                session.handle(.syncReply(SyncReply(nonce: request.nonce)), from: peer, now: now)
            }
        }
        now += 10
    }
    return now
}

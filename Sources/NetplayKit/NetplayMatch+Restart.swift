import NetplayWire
import Rollback

// NetplayMatch: the host restarts the match from its state (its current one, or one it loads).
extension NetplayMatch {
    /// Host only: restarts the match for everyone from the host's state: `state` when given (a
    /// save the host loads, "load state" from its pause menu), else its game as the match
    /// confirmed it. The host's state replaces its own at its newest confirmed frame; the relay
    /// then sends it to every other player and spectator, who load it there (players re-simulate
    /// from it, spectators start over from it), and from then on the host's state wins the
    /// relay's checksum votes. Frames keep their numbers. Before the match runs, `state` (when
    /// given) replaces the host's game and the match starts now from it, as with
    /// ``NetplayMatchOptions/startFromHostState``.
    ///
    /// Throws (changing nothing) for anyone but the host, before the relay knows this peer,
    /// or when the state cannot be placed in the engine.
    public func restart(from state: G.State? = nil) throws {
        guard isHost else { throw NetplayError(.permissionDenied, "Only the host restarts the match.") }
        guard relayKnowsUs else { throw NetplayError(.invalidState, "Not attached to the relay yet.") }
        var frame = 0
        switch engine {
        case .none:
            if let state { initialGame.loadState(state) }
        case .player(let session):
            guard let confirmed = session.latestConfirmedState() else {
                throw NetplayError(.invalidState, "No confirmed frame to restart at yet.")
            }
            if let state {
                do {
                    try session.loadState(state, frame: confirmed.frame)
                } catch {
                    throw NetplayError(.invalidState, "Cannot place the state at frame \(confirmed.frame + offset): \(error)")
                }
            }
            // A state captured before the restart must never be served for it.
            alignedState = nil
            frame = confirmed.frame + offset
        case .spectator:
            throw NetplayError(.permissionDenied, "Only the host restarts the match.")
        }
        link.send(.startSessionRequest(StartSessionRequest(sessionId: admission.sessionId,
                                                           participantId: admission.ticket.participantId,
                                                           restart: true, restartFrame: UInt32(frame))),
                  requestId: takeRequestId(), now: nowMs)
        note(.restarted(frame: frame))
    }
}

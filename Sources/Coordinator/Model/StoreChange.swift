import NetplayWire

/// One write to the coordinator's store; a request's writes are applied in one transaction.
public enum StoreChange: Sendable, Equatable {
    /// Insert or replace the session row (not its participants).
    case saveSession(SessionRecord)
    /// Update what changes after creation: state, relay, times, version (settings and password
    /// hashes never change, so they are not rewritten).
    case updateSession(SessionRecord)
    /// Insert or replace one participant.
    case saveParticipant(sessionId: String, ParticipantRecord)
    /// Remove one participant.
    case deleteParticipant(sessionId: String, participantId: String)
    /// Ban a kicked participant from a session: their name, source address ("" = unknown) and id.
    case addBan(sessionId: String, name: String, source: String, participantId: String)
    /// Remove a session with its participants, bans and tickets.
    case deleteSession(String)
    /// Record an issued ticket.
    case saveTicket(JoinTicket)
    /// Forget the tickets issued to a participant (kicked or banned: revoked).
    case deleteParticipantTickets(sessionId: String, participantId: String)
    /// Forget tickets that expired before this time.
    case deleteTickets(expiredBeforeUnixMs: UInt64)
    /// Insert or replace a relay.
    case saveRelay(RelayInfo)
    /// Remove a relay.
    case deleteRelay(String)
}

import NetplayWire

/// A seat in a session: the signed ticket the relay admits, and the credentials to renew it.
public struct Admission: Sendable, Hashable {
    /// The join ticket (names session, participant, role, slot, relay and sync parameters).
    public var ticket: JoinTicket
    /// Where to attach.
    public var relayEndpoint: String
    /// The participant's secret for later coordinator requests (empty for LAN rooms).
    public var participantToken: [UInt8]
    /// The coordinator that issued the ticket (nil for LAN rooms).
    public var coordinatorEndpoint: String?

    /// Creates an admission.
    public init(ticket: JoinTicket, relayEndpoint: String, participantToken: [UInt8] = [], coordinatorEndpoint: String? = nil) {
        self.ticket = ticket
        self.relayEndpoint = relayEndpoint.isEmpty ? ticket.relayEndpoint : relayEndpoint
        self.participantToken = participantToken
        self.coordinatorEndpoint = coordinatorEndpoint
    }

    /// The session id.
    public var sessionId: String { ticket.sessionId }
    /// 1-based slot; 0 for spectators.
    public var slot: Int { Int(ticket.slot) }
    /// Player or spectator.
    public var role: Role { ticket.role }
}

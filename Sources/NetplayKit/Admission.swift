import Foundation
import NetplayService
import NetplayWire

/// A seat in a session: the signed ticket the relay admits, and the credentials to renew it.
public struct Admission: Sendable, Hashable {
    /// The join ticket (names session, participant, role, slot, relay and sync parameters).
    public var ticket: JoinTicket
    /// Where to attach.
    public var relayEndpoint: String
    /// The participant's secret for later requests about its seat: at the coordinator (ticket
    /// renewal, leave, host controls), or for a LAN room at the host's relay (ticket renewal).
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
    /// Where the ticket is renewed: the coordinator that issued it, or for a LAN seat (a token and
    /// no coordinator) the LAN host's relay, which admits and renews itself; nil: nowhere.
    var renewalEndpoint: String? { coordinatorEndpoint ?? (participantToken.isEmpty ? nil : relayEndpoint) }

    /// 1-based slot; 0 for spectators.
    public var slot: Int { Int(ticket.slot) }
    /// Player or spectator.
    public var role: Role { ticket.role }
}

extension Admission {
    /// Sends the request `body` makes of this participant's session id, participant id and token
    /// to `endpoint` (the coordinator, or where the ticket is renewed) on a thread of its own (the client's socket lives and dies there), after
    /// `delay` seconds, so the game loop never waits for the round trip; `done` gets the reply body,
    /// an Error reply included (nil: no connection, no answer within
    /// ``NetplayLobby/defaultTries`` times `timeoutSeconds`). As the lobby does, the reply is waited for over several timeouts, because on a lossy path a
    /// fresh connection's handshakes alone can outlast one; with `resending` (a request that does
    /// the same when it arrives twice) it goes out again after each timeout that passed without an
    /// answer. False, and nothing sent, when there is nobody to ask (no endpoint, or no
    /// participant token). What ``CoordinatorLeave`` and ``TicketRenewal`` send.
    func request(at endpoint: String?, serverKey: [UInt8]?, timeoutSeconds: Double, resending: Bool, delay: Double = 0,
                              _ body: (_ sessionId: String, _ participantId: String, _ token: [UInt8]) -> Envelope.Body,
                              done: @escaping @Sendable (Envelope.Body?) -> Void) -> Bool {
        guard let coordinator = endpoint, !participantToken.isEmpty else { return false }
        let request = body(sessionId, ticket.participantId, participantToken)
        Thread.detachNewThread {
            if delay > 0 { Thread.sleep(forTimeInterval: delay) }
            let client = try? BlockingClient(endpoint: coordinator, timeout: timeoutSeconds, serverKey: serverKey)
            done((try? client?.requestEnvelope(request, tries: NetplayLobby.defaultTries, resending: resending))?.body)
        }
        return true
    }
}

import Foundation
import NetplayService
import NetplayWire
import Synchronization

/// One ticket renewal at the coordinator (the relay said the ticket expired), run on a thread of
/// its own: the coordinator may take up to a second to answer, and the game loop keeps ticking
/// meanwhile. The match polls ``outcome`` on each tick and picks the new ticket up from there.
final class TicketRenewal: Sendable {
    /// What the renewal came to.
    enum Outcome: Sendable, Equatable {
        /// The coordinator issued this ticket.
        case renewed(JoinTicket)
        /// No ticket (no answer within the timeout, an error reply, no connection).
        case failed
    }

    private let result = Mutex<Outcome?>(nil)

    /// Starts renewing `admission`'s ticket, or returns nil when it cannot be renewed (no
    /// coordinator, or no participant token: a LAN room).
    static func start(for admission: Admission, serverKey: [UInt8]?, timeoutSeconds: Double = 1) -> TicketRenewal? {
        let renewal = TicketRenewal()
        let sent = admission.requestAtCoordinator(serverKey: serverKey, timeoutSeconds: timeoutSeconds, {
            .renewTicketRequest(RenewTicketRequest(sessionId: $0, participantId: $1, participantToken: $2))
        }, done: { reply in
            guard case .sessionResponse(let response)? = reply, let ticket = response.ticket else { return renewal.finish(.failed) }
            renewal.finish(.renewed(ticket))
        })
        return sent ? renewal : nil
    }

    /// The outcome, once the renewal finished; nil while it is in flight.
    var outcome: Outcome? { result.withLock { $0 } }

    private func finish(_ outcome: Outcome) {
        result.withLock { $0 = outcome }
    }
}

import Foundation
import NetplayService
import NetplayWire
import Synchronization

/// One ticket renewal at the coordinator (for a LAN room, at its host's relay), run on a thread
/// of its own: the relay said the ticket expired, or the match asks where its session runs now
/// (its relay went silent, or told it the session moved; the fresh ticket names the session's
/// relay). The renewal waits up to three seconds for an answer, asking again after each one that passes without an answer (a
/// renewal asked twice only issues two tickets), and the game loop keeps ticking meanwhile. The
/// match polls ``outcome`` on each tick and picks the new ticket up from there.
final class TicketRenewal: Sendable {
    /// What the renewal came to.
    enum Outcome: Sendable, Equatable {
        /// The coordinator issued this ticket.
        case renewed(JoinTicket)
        /// The coordinator refused (session ended, participant unknown or banned, no live relay...).
        case refused(ErrorCode, String)
        /// No answer within the tries' timeouts, or no connection.
        case failed
    }

    private let result = Mutex<Outcome?>(nil)

    /// Starts renewing `admission`'s ticket after `delaySeconds` where it is renewed (the
    /// coordinator, or a LAN host's relay), or returns nil when it cannot be renewed (no token).
    static func start(for admission: Admission, serverKey: [UInt8]?, timeoutSeconds: Double = 1,
                      delaySeconds: Double = 0) -> TicketRenewal? {
        let renewal = TicketRenewal()
        let sent = admission.request(at: admission.renewalEndpoint, serverKey: serverKey, timeoutSeconds: timeoutSeconds, resending: true,
                                                  delay: delaySeconds, {
            .renewTicketRequest(RenewTicketRequest(sessionId: $0, participantId: $1, participantToken: $2))
        }, done: { reply in
            switch reply {
            case .sessionResponse(let response)?: renewal.finish(response.ticket.map(Outcome.renewed) ?? .failed)
            case .error(let error)?: renewal.finish(.refused(error.code, error.message))
            default: renewal.finish(.failed)
            }
        })
        return sent ? renewal : nil
    }

    /// The outcome, once the renewal finished; nil while it is in flight.
    var outcome: Outcome? { result.withLock { $0 } }

    private func finish(_ outcome: Outcome) {
        result.withLock { $0 = outcome }
    }
}

import Foundation
import NetplayService
import NetplayWire
import Synchronization

/// A participant's leave at the coordinator (``NetplayMatch/leave()``), sent on a thread of its
/// own as ``TicketRenewal`` is: the game loop that leaves never waits for the round trip. The
/// coordinator frees the participant's place (the host leaving ends the session, its room and
/// its relay's load); the relay reports the departure too, so a leave lost on the way is still
/// known there, only later.
final class CoordinatorLeave: Sendable {
    private let done = Mutex<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    /// How long the leave waits before it goes: the participant's Detach and last inputs, sent on
    /// its relay link just before, must reach the relay before the coordinator's notice of the
    /// leave does, or the relay frees the slot from an earlier frame than the participant played
    /// (and its partners roll back further).
    static let headStartSeconds = 0.3

    /// Starts leaving `admission`'s session, or returns nil when there is nobody to tell (no
    /// coordinator, or no participant token: a LAN room).
    static func start(for admission: Admission, serverKey: [UInt8]?, timeoutSeconds: Double = 2) -> CoordinatorLeave? {
        let leave = CoordinatorLeave()
        // Sent once (a second copy would find the participant gone) and waited for over three timeouts.
        let sent = admission.request(at: admission.coordinatorEndpoint, serverKey: serverKey, timeoutSeconds: timeoutSeconds, resending: false,
                                                  delay: headStartSeconds, {
            .leaveSessionRequest(LeaveSessionRequest(sessionId: $0, participantId: $1, participantToken: $2))
        }, done: { _ in
            leave.done.withLock { $0 = true }
            leave.finished.signal()
        })
        return sent ? leave : nil
    }

    /// Whether the coordinator answered (or the attempt gave up).
    var isDone: Bool { done.withLock { $0 } }

    /// Waits at most `seconds` for the attempt to finish; true when it did.
    func wait(seconds: Double) -> Bool {
        if isDone { return true }
        guard finished.wait(timeout: .now() + seconds) == .success else { return false }
        finished.signal()  // later waits return at once too
        return true
    }
}

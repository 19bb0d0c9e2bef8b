import Foundation
import NetplayWire

extension NetplayLobby {
    /// Runs a join `ask` again while its room's host has not decided on it (AWAITING_HOST: a room
    /// hosted with ``NetplaySettings/approveJoiners``; each ask carries the same idempotency key,
    /// by which the host's side knows it), every half second, for at most
    /// ``approvalWaitSeconds``; then TIMEOUT. A refusal throws REFUSED_BY_HOST; any other answer
    /// is returned or thrown as it came.
    func askUntilDecided(_ ask: () throws -> Envelope.Body) throws -> Envelope.Body {
        let deadline = ContinuousClock.now + .milliseconds(Int(approvalWaitSeconds * 1000))
        while true {
            do {
                return try ask()
            } catch let error as NetplayError where error.code == .awaitingHost {
                guard ContinuousClock.now < deadline else {
                    throw NetplayError(.timeout, "The host did not decide on the join within \(approvalWaitSeconds) s.")
                }
                Thread.sleep(forTimeInterval: 0.5)
            }
        }
    }
}

import Foundation
import NetplayService
import NetplayWire

// NetplayMatch: what the frontend asks of a match besides ticking it (start, start now, chat,
// leave, a simulated outage) and how it ends.
extension NetplayMatch {
    /// Starts attaching to the relay.
    public func start() {
        guard phase == .idle else { return }
        phase = .attaching(attempt: 0, nextAttemptMs: nowMs, sentAtMs: nil)
        state = .connecting(to: admission.relayEndpoint, attempt: 0)
    }

    /// Host only: starts the match now, without waiting for every slot to fill (a host alone
    /// plays alone; joiners come in late). Called before the relay answered the attach, the
    /// request goes out as soon as it has.
    public func startNow() {
        guard isHost else { return }
        startRequested = true
        guard relayKnowsUs else {
            // Remembered only before the match runs: a reconnect mid-match must not start one.
            if case .none = engine { startAwaitsAttach = true }
            return
        }
        startAwaitsAttach = false
        // No participant token: it is the coordinator's credential (it renews the host's
        // tickets); the relay knows the host by its attached connection.
        link.send(.startSessionRequest(StartSessionRequest(sessionId: admission.sessionId,
                                                           participantId: admission.ticket.participantId)),
                  requestId: takeRequestId(), now: nowMs)
    }

    /// Sends a chat line to everyone in the session; false when it was not sent (empty, or the
    /// relay does not know this participant yet: connecting, reconnecting).
    @discardableResult
    public func sendChat(_ text: String) -> Bool {
        guard relayKnowsUs, !text.isEmpty else { return false }
        // At most 512 bytes of UTF-8 (the wire's limit), cut between characters: 512 characters
        // could be three times that, and the message was then dropped as invalid.
        var line = Substring(text.prefix(512))
        while line.utf8.count > 512 { line = line.dropLast() }
        link.send(.chatMessage(ChatMessage(text: String(line))), now: nowMs)
        return true
    }

    /// Leaves the match for good: detaches from the relay and, in a cluster room, tells the
    /// coordinator (`LeaveSessionRequest` with this participant's token) on a thread of its own,
    /// so the caller's game loop never waits for that round trip. The coordinator frees the
    /// place; the host leaving ends the session for everyone (its room goes, its relay closes
    /// it). Call ``waitUntilLeft(seconds:)`` before the process exits to be sure the leave went.
    /// Leaving twice does nothing more.
    public func leave() {
        if phase != .ended {
            // The relay first, the coordinator after (see CoordinatorLeave.headStartSeconds).
            if relayKnowsUs { link.send(.detach(Detach(reason: .leaving, message: "left")), now: nowMs) }
            link.flush(now: nowMs + 10_000)
        }
        if coordinatorLeave == nil { coordinatorLeave = CoordinatorLeave.start(for: admission, serverKey: options.serverKey) }
        guard phase != .ended else { return }
        finish(.left, lingerMilliseconds: 500)
    }

    /// After ``leave()``: waits at most `seconds` for the coordinator to take the leave (for a
    /// process about to exit); true when it did or there was nobody to tell. Blocks: not for
    /// a game loop that keeps running.
    @discardableResult
    public func waitUntilLeft(seconds: Double = 2) -> Bool {
        coordinatorLeave?.wait(seconds: seconds) ?? true
    }

    /// Simulates a network outage of `milliseconds` on this peer's link (tests, demos): nothing
    /// goes through either way; the match notices the silence and reconnects.
    public func simulateOutage(milliseconds: Int) {
        link.simulateOutage(untilMs: nowMs + UInt64(milliseconds))
    }

    func finish(_ reason: DisconnectReason, lingerMilliseconds: Int32 = 0) {
        phase = .ended
        relayKnowsUs = false
        link.close(lingerMilliseconds: lingerMilliseconds)
        state = .disconnected(reason)
    }

    func takeRequestId() -> UInt64 {
        nextRequestId += 1
        return nextRequestId
    }
}

import Foundation
import NetplayService
import NetplayWire

// RelaySession: chat, participants' statistics, and removing a participant.
extension RelaySession {
    // MARK: - Chat, stats, leaving

    /// A chat line: the relay fills in the sender and sends it to everyone in the session.
    func chat(_ message: ChatMessage, from participant: RelayPeer, now: UInt64) throws(ServiceError) {
        if now &- participant.chatWindowStartMs >= 1000 {
            participant.chatWindowStartMs = now
            participant.chatCount = 0
        }
        participant.chatCount += 1
        guard participant.chatCount <= 5 else {
            throw ServiceError(.rateLimited, "At most 5 chat lines per second.", retryAfterMs: 1000)
        }
        let line = ChatMessage(text: message.text, fromName: String(participant.name.prefix(64)),
                               fromSlot: UInt32(participant.slot), fromRole: participant.role,
                               sentAtUnixMs: UnixTime.nowMs())
        sendToAll(.chatMessage(line), now: now)
    }

    /// A peer's own HUD figures (rollbacks, ping) merged into the session's. Shown, never used:
    /// its reported ping is not its round trip for deadlines or time sync (the relay measures
    /// that itself, ``RelayPeer/rttMs``), or a player could stretch everyone's deadline.
    func noteStats(_ stats: PeerStats, from participant: RelayPeer) {
        participant.stats.pingMs = stats.pingMs
        participant.stats.jitterMs = stats.jitterMs
        participant.stats.frameDelay = stats.frameDelay
        participant.stats.rollbacks = stats.rollbacks
        participant.stats.rollbackFrames = stats.rollbackFrames
        participant.stats.maxRollbackFrames = stats.maxRollbackFrames
        if stats.currentFrame > participant.stats.currentFrame { participant.stats.currentFrame = stats.currentFrame }
    }

    /// After a participant detached: whether the session is over (no player holds a slot and no
    /// spectator watches). While spectators still watch after the last player left, they get
    /// every confirmed frame first (the timers end the session once they have).
    func isOverAfterDeparture(now: UInt64) -> Bool {
        guard players.allSatisfy({ $0 == nil }) else { return false }
        guard spectators.contains(where: \.isConnected) else { return true }
        playersGoneAtMs = playersGoneAtMs ?? now
        deliverConfirmed(now: now)
        return false
    }

    /// A participant leaves for good (detach, kick): its slot turns disconnected from the
    /// first frame it did not send. A kicked one (`reason` `.kicked`: the host kicked or banned
    /// it) or one that left (`.leaving`) is also refused at attach until its tickets are of no
    /// use (see ``RevocationBook``): a ticket kept after leaving must not take back the place
    /// someone else was given since.
    func remove(_ participant: RelayPeer, reason: DetachReason, detail: String, now: UInt64) {
        if reason == .kicked || reason == .leaving {
            let wallNow = UnixTime.nowMs()
            revocations.revoke(sessionId: sessionId, participantId: participant.participantId,
                               untilUnixMs: RelayCore.revocationEnd(ticketExpiresAtUnixMs: participant.ticketExpiresAtUnixMs,
                                                                    nowUnixMs: wallNow, configuration: configuration),
                               kicked: reason == .kicked, nowUnixMs: wallNow)
        }
        if participant.isPlayer {
            let index = participant.slot - 1
            guard players[index] === participant else { return }
            players[index] = nil
            if running {
                slotModes[index] = .vacant(.disconnected)
                substituting[index] = false
            }
        } else {
            spectators.removeAll { $0 === participant }
        }
        if let address = participant.address, reason != .leaving {
            transport.send(.detach(Detach(reason: reason, message: String(detail.prefix(256)))), to: address)
        }
        participant.address = nil
        // Gone for good on its own (a kick or a leave the coordinator pushed is already known
        // there; a repeat is harmless).
        if reason == .leaving { lifecycle.gone(sessionId, participantId: participant.participantId, timedOut: false) }
        let slot = participant.slot
        peerEvent(.left, participant, frame: slot > 0 ? timeline.stored(slot - 1) : timeline.confirmed,
                  detail: detail, now: now)
        transfer?.targets.removeAll { $0 === participant }
        // A state already whole goes on to its targets without its reference.
        if let transfer, transfer.reference === participant, !transfer.complete {
            abortTransfer(reason: "the reference left", now: now)
        }
        if running {
            fillVacantSlots()
            let before = timeline.confirmed
            if timeline.updateConfirmed() { confirmedMoved(from: before, now: now) }
        }
    }
}

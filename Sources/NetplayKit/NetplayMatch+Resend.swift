import Foundation
import NetplayService
import NetplayWire
import Rollback

// NetplayMatch: resending own inputs and confirmed history after a reconnect or relay restart.
extension NetplayMatch {
    // MARK: Resends (reconnect, relay restart)

    func resendOwnInputs(from frame: Int, now: UInt64) {
        guard ownNewest >= frame else { return }
        let size = Int(params.inputSize)
        var start = frame
        while start <= ownNewest {
            var bytes: [UInt8] = []
            var current = start
            while current <= ownNewest, current < start + 128, let input = ownInputs[current] {
                bytes += input
                current += 1
            }
            guard !bytes.isEmpty else { break }
            link.send(.inputBatch(InputBatch(slot: UInt32(slot), startFrame: UInt32(clamping: start), inputSize: UInt32(size), inputs: bytes,
                                             awaitedFrame: UInt32(clamping: confirmedFrames), currentFrame: UInt32(clamping: currentFrame))), now: now)
            start = current
        }
    }

    /// The first frame from which this peer holds every player's confirmed inputs up to
    /// ``confirmedFrames`` without a gap: what it can resend to a relay rebuilding the session.
    var resendableHistoryStart: Int {
        var frame = confirmedFrames
        while frame > 0, history[frame - 1] != nil { frame -= 1 }
        return frame
    }

    func resendForRecovery(_ response: AttachResponse, now: UInt64) {
        // Both travel as input traffic, which a lossy link may drop, and a rebuilt relay can
        // neither confirm past a gap in the history nor take this player's later inputs past a
        // gap in its own: sent now, then repeated until the relay's broadcasts show it arrived.
        let resend = RecoveryResend(historyTarget: confirmedFrames, relayConfirmed: Int(response.confirmedFrames),
                                    ownTarget: role == .player ? ownNewest : -1, relayAwaited: Int(response.awaitedInputFrame),
                                    nextMs: now + 250, untilMs: now + 20_000)
        sendWhatTheRelayLacks(resend, now: now)
        recoveryResend = resend.isComplete ? nil : resend
    }

    /// Repeats, every quarter second, what the rebuilt relay still lacks of this peer's history
    /// and of its own inputs, until it has them all (or 20 s passed).
    func driveRecoveryResend(now: UInt64) {
        guard var resend = recoveryResend else { return }
        if resend.isComplete || now >= resend.untilMs {
            recoveryResend = nil
            return
        }
        guard now >= resend.nextMs else { return }
        resend.nextMs = now + 250
        recoveryResend = resend
        sendWhatTheRelayLacks(resend, now: now)
    }

    /// Sends the history the relay has not confirmed, and this player's own inputs it awaits
    /// from the confirmed frames on: below them the history carries them, and as live inputs
    /// they would make frames final before the restart look played (a liar holding the match
    /// there would be spared her forfeit).
    private func sendWhatTheRelayLacks(_ resend: RecoveryResend, now: UInt64) {
        if resend.relayConfirmed < resend.historyTarget { resendHistory(from: resend.relayConfirmed, now: now) }
        let ownFrom = max(resend.relayAwaited, resend.historyTarget)
        if ownFrom <= resend.ownTarget { resendOwnInputs(from: ownFrom, now: now) }
    }

    /// Sends the relay every player's confirmed inputs from `start` to ``confirmedFrames``, 128
    /// frames per authoritative broadcast.
    private func resendHistory(from start: Int, now: UInt64) {
        let size = Int(params.inputSize)
        let slots = Int(params.maxPlayers)
        var frame = start
        let end = confirmedFrames
        while frame < end {
            var runs: [PlayerInputs] = (0 ..< slots).map { PlayerInputs(slot: UInt32($0 + 1), startFrame: UInt32(clamping: frame)) }
            var current = frame
            while current < end, current < frame + 128, let row = history[current] {
                for player in 0 ..< slots {
                    runs[player].inputs += row.inputs[player * size ..< player * size + size]
                    runs[player].status.append(row.statuses[player])
                }
                current += 1
            }
            guard current > frame else { break }
            link.send(.inputBroadcast(InputBroadcast(authoritative: true, inputSize: UInt32(size), players: runs,
                                                     confirmedFrames: UInt32(clamping: current))), now: now)
            frame = current
        }
    }
}

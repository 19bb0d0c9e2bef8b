import Foundation
import NetplayService
import NetplayWire

// RelaySession: answering an attach, placing a participant's cursor, and starting the match.
extension RelaySession {
    // MARK: - Attach and start

    /// The reply to an attach, after the participant was placed.
    func welcome(_ participant: RelayPeer, transferFollows: UInt32?) -> AttachResponse {
        let slot = participant.slot
        return AttachResponse(
            sessionId: sessionId, role: participant.role, slot: UInt32(slot), params: params,
            startFrame: UInt32(participant.firstFrame), confirmedFrames: UInt32(timeline.confirmed),
            peers: Array(participants.map(\.info).prefix(72)), stateFollows: transferFollows != nil,
            relayId: configuration.relayId, running: running,
            awaitedInputFrame: slot > 0 ? UInt32(timeline.stored(slot - 1)) : 0,
            recovering: recovering, transferId: transferFollows ?? 0)
    }

    /// Decides where a participant joining a running match starts: from `holds` (the frames it
    /// already has) when those inputs are still here and few enough, else from a state transfer.
    /// Returns true when a transfer is needed.
    func placeCursor(_ participant: RelayPeer, holds: Int) -> Bool {
        participant.rttProbe = nil
        guard running else {
            participant.sentFrames = 0
            participant.awaitedFrame = 0
            participant.firstFrame = 0
            return false
        }
        let replayable = holds >= timeline.oldest && holds >= timeline.origin
            && (holds > 0 || timeline.confirmed <= configuration.lateJoinReplayLimit)
        if replayable {
            participant.sentFrames = holds
            participant.awaitedFrame = holds
            participant.firstFrame = holds
            return false
        }
        participant.awaitingTransfer = 0
        participant.awaitingReason = holds > 0 ? .reconnect : .lateJoin
        return true
    }

    /// Starts the match once every slot has its player attached.
    func startIfReady(now: UInt64) {
        guard !running else { return }
        for player in players where player?.isConnected != true { return }
        start(now: now)
    }

    /// Starts the match now; slots nobody holds stay empty.
    func start(now: UInt64) {
        guard !running else { return }
        running = true
        startedAtMs = now
        substitutionHoldUntilMs = now + 500
        for (index, player) in players.enumerated() {
            if let player {
                player.reportedAtMs = now
                player.sentFrames = 0
                player.awaitedFrame = 0
                player.rttProbe = nil
            } else {
                slotModes[index] = .vacant(.empty)
            }
        }
        openReplay(now: now)
        for participant in participants where participant.isConnected {
            send(.attachResponse(welcome(participant, transferFollows: nil)), to: participant, now: now)
        }
        transport.publish(topic: "sync.session_started", .eventRecord(EventRecord()), severity: .info,
                          message: "session \(sessionId) started with \(players.compactMap { $0 }.count) players",
                          sessionId: sessionId)
    }
}

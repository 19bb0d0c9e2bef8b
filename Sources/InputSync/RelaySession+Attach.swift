import Foundation
import NetplayService
import NetplayWire

// RelaySession: answering an attach, placing a participant's cursor, and starting the match.
extension RelaySession {
    // MARK: - Attach and start

    /// The reply to an attach, after the participant was placed.
    func welcome(_ participant: RelayPeer, transferFollows: UInt32?, startDelayUs: UInt32 = 0) -> AttachResponse {
        let slot = participant.slot
        return AttachResponse(
            sessionId: sessionId, role: participant.role, slot: UInt32(slot), params: params,
            startFrame: UInt32(participant.firstFrame), confirmedFrames: UInt32(timeline.confirmed),
            peers: Array(participants.map(\.info).prefix(72)), stateFollows: transferFollows != nil,
            relayId: configuration.relayId, running: running,
            awaitedInputFrame: slot > 0 ? UInt32(timeline.stored(slot - 1)) : 0,
            recovering: recovering, transferId: transferFollows ?? 0, startDelayUs: startDelayUs)
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

    /// Starts the match once every slot has its player attached (after measuring their round
    /// trips, see ``requestStart(now:forced:)``).
    func startIfReady(now: UInt64) {
        guard !running else { return }
        for player in players where player?.isConnected != true { return }
        requestStart(now: now)
    }

    /// Starts the match as soon as the relay knows every attached player's round trip
    /// (``RelayConfiguration/startSyncSamples`` pings each, at most
    /// ``RelayConfiguration/startSyncTimeoutMs``): deadlines, time sync, the input delay and the
    /// start itself then fit the real path from the first frame. `forced`: the host's start
    /// (empty slots stay empty).
    func requestStart(now: UInt64, forced: Bool = false) {
        guard !running else { return }
        startForced = startForced || forced
        if startSyncSinceMs == nil { startSyncSinceMs = now }
        driveStartSync(now: now)
    }

    /// Pings players whose round trip is not measured yet; starts when all are (or on timeout).
    func driveStartSync(now: UInt64) {
        guard !running, let since = startSyncSinceMs else { return }
        if !startForced, players.contains(where: { $0?.isConnected != true }) {
            startSyncSinceMs = nil  // someone left meanwhile: wait for every slot again
            return
        }
        var measured = true
        for player in players {
            guard let player, player.isConnected, player.pingSamples < configuration.startSyncSamples else { continue }
            measured = false
            // One ping in flight at a time; one lost (or a peer that does not answer) is replaced.
            if player.pingInFlight == nil || now &- player.lastPingMs >= 500 { ping(player, now: now) }
        }
        if measured || now &- since >= UInt64(configuration.startSyncTimeoutMs) { start(now: now) }
    }

    /// Sends the relay's own ping (answered with a Pong echoing its nonce).
    func ping(_ player: RelayPeer, now: UInt64) {
        let nonce = UInt64.random(in: 1 ... .max)
        player.pingInFlight = (nonce, now)
        player.lastPingMs = now
        send(.ping(Ping(nonce: nonce, sentAtUs: now &* 1000)), to: player, now: now)
    }

    /// A peer's answer to the relay's ping: a round-trip sample when it echoes the ping in flight.
    func receive(_ pong: Pong, from participant: RelayPeer, now: UInt64) {
        guard let inFlight = participant.pingInFlight, pong.nonce == inFlight.nonce, now >= inFlight.sentAtMs else { return }
        participant.pingInFlight = nil
        participant.pingSamples += 1
        participant.shortestPingMs = min(participant.shortestPingMs, Int(now - inFlight.sentAtMs))
        noteRoundTrip(participant, sample: Double(now - inFlight.sentAtMs))
    }

    /// Starts the match now; slots nobody holds stay empty. Each player is told to wait so that
    /// all begin at the same moment: the farthest player's half round trip after this send.
    func start(now: UInt64) {
        guard !running else { return }
        running = true
        startedAtMs = now
        startSyncSinceMs = nil
        // The stagger uses each player's shortest ping: on a lossy path one retransmitted sample
        // inflates the average, and a player told to wait too long starts behind the others.
        func halfTrip(_ player: RelayPeer) -> Int { (player.shortestPingMs == .max ? player.rttMs : player.shortestPingMs) / 2 }
        var farthestHalfTripMs = 0
        for player in players { if let player, player.isConnected { farthestHalfTripMs = max(farthestHalfTripMs, halfTrip(player)) } }
        if params.frameDelayAuto { params.frameDelay = UInt32(recommendedFrameDelay(keepingCurrent: false) ?? Int(params.frameDelay)) }
        substitutionHoldUntilMs = now + UInt64(2 * farthestHalfTripMs) + 500
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
            let delayMs = participant.isPlayer ? farthestHalfTripMs - halfTrip(participant) : 0
            let start = Envelope.Body.attachResponse(welcome(participant, transferFollows: nil,
                                                             startDelayUs: UInt32(max(delayMs, 0) * 1000)))
            send(start, to: participant, now: now)
            // On every path too: a start held back by a lost segment would start that player late.
            for path in participant.extraPaths { transport.send(start, to: path) }
        }
        transport.publish(topic: "sync.session_started", .eventRecord(EventRecord()), severity: .info,
                          message: "session \(sessionId) started with \(players.compactMap { $0 }.count) players",
                          sessionId: sessionId)
    }
}

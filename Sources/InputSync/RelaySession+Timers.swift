import Foundation
import NetplayService
import NetplayWire

// RelaySession: the time-driven work: silence, substitution, resends, acknowledgements,
// hints, statistics.
extension RelaySession {
    // MARK: - Timers

    /// Everything time-driven: silence, substitution, resends, acknowledgements, hints,
    /// statistics, checksum judgement, transfers.
    func tick(now: UInt64) {
        if now >= nextSilenceCheckMs {
            nextSilenceCheckMs = now + 100
            checkSilence(now: now)
        }
        guard running else {
            // A start-state transfer is watched here too while the start does not wait (the host away).
            if let transfer { checkProgress(of: transfer, now: now) }
            if startSyncSinceMs != nil { driveStartSync(now: now) } else { pingWaitingPlayers(now: now) }
            return
        }
        endRecoveryIfDue(now: now)
        noteRebuildProgress(now: now)
        if recovering {
            forfeitHistoryNotSent(now: now)
            skipFramesNobodyCanSend(now: now)
        }
        if !heldForwards.isEmpty { releaseHeldForwards(now: now) }
        if timeline.newest > timeline.confirmed { substituteLateInputs(now: now) }
        if vacantSlots > 0 { fillVacantSlots() }
        let before = timeline.confirmed
        if timeline.updateConfirmed() {
            recordConfirmed(from: before)
            deliverConfirmed(now: now, includingDeferred: false)
        }
        resendAndAcknowledge(now: now)
        if Self.due(&lastHintsMs, every: configuration.hintIntervalMs, now: now) { sendHints(now: now) }
        if Self.due(&lastStatsMs, every: configuration.statsIntervalMs, now: now) { sendStats(now: now) }
        if !checksums.pending.isEmpty { judgeChecksums(now: now) }
        if transfer != nil || awaitingTransfers { driveTransfers(now: now) }
    }

    /// Whether a participant waits for a state transfer.
    private var awaitingTransfers: Bool {
        let list = participants
        for index in 0 ..< list.count where list[index].awaitingTransfer != nil { return true }
        return false
    }

    private var vacantSlots: Int {
        var count = 0
        for mode in slotModes where mode != .active { count += 1 }
        return count
    }

    private func checkSilence(now: UInt64) {
        let list = participants
        let silenceTimeoutMs = UInt64(configuration.silenceTimeoutMs)
        for index in 0 ..< list.count {
            let participant = list[index]
            guard participant.isConnected, now &- participant.lastHeardMs >= silenceTimeoutMs else { continue }
            if let address = participant.address {
                transport.send(.detach(Detach(reason: .timeout, message: "Nothing heard for \(configuration.silenceTimeoutMs) ms.")),
                               to: address)
            }
            participant.address = nil
            participant.disconnectedSinceMs = now
            peerEvent(.disconnected, participant, frame: timeline.confirmed, detail: "silent; may come back", now: now)
        }
        if spectators.contains(where: { !$0.isConnected }) { spectators.removeAll { !$0.isConnected } }
        if connectedCount > 0 { lastConnectedMs = now }
        guard running else { return }
        for (index, player) in players.enumerated() {
            if player == nil, let rebuilt = rebuiltAtMs, slotModes[index] == .active,
               now &- rebuilt >= UInt64(configuration.disconnectGraceMs) {
                // Rebuilt after a restart, and nobody came back to this slot within the grace.
                slotModes[index] = .vacant(.disconnected)
                substituting[index] = false
                continue
            }
            guard let player, !player.isConnected, let since = player.disconnectedSinceMs,
                  slotModes[index] == .active,
                  now &- since >= UInt64(configuration.disconnectGraceMs) else { continue }
            slotModes[index] = .vacant(.disconnected)
            substituting[index] = false
            peerEvent(.left, player, frame: timeline.stored(index), detail: "did not come back; slot disconnected", now: now)
            lifecycle.gone(sessionId, participantId: player.participantId, timedOut: true)
        }
    }

    /// Substitutes (repeats the last input of) every active slot whose input for a frame is
    /// later than the lag tolerance: a frame's deadline for a slot is when the earliest player
    /// sent that frame (its arrival minus half its round trip) plus the slot's half round trip
    /// plus the tolerance. So one weak client never stalls everyone, and nothing depends on the
    /// nominal frame rate (a session slowed down by latency does not look like lag). Round trips
    /// are the relay's own measurements, capped (``RelayConfiguration/maxCountedRttMs``): no
    /// player's word, and no player however slow, pushes a deadline past tolerance + half the cap.
    /// In a session rebuilt after a restart, frames final before it are not substituted while
    /// their history may still come (``historyOnlyBelow(now:)``), and once its history window is
    /// over, those that no live input arrived for are timed from the window's end while the
    /// match is held there (``substitutionTimeForFramesFinalBeforeTheRestart(_:)``).
    func substituteLateInputs(now: UInt64) {
        guard now >= substitutionHoldUntilMs else { return }
        var frame = timeline.confirmed
        let historyBelow = recovering ? historyOnlyBelow(now: now) : 0
        while frame < timeline.newest, frame >= historyBelow {
            let arrived = arrivals.sendEstimate(frame: frame)
            guard let sent = arrived ?? substitutionTimeForFramesFinalBeforeTheRestart(frame) else { return }
            var blocked = false
            for slot in 0 ..< slotCount where slotModes[slot] == .active && timeline.stored(slot) == frame {
                if arrived == nil && waitsForAnother(slot, at: frame, now: now) {
                    blocked = true
                    continue
                }
                // Half its round trip, and as much again as its round trips vary (4 mean
                // deviations, as TCP's retransmission timeout): a lossy link's retransmitted
                // segments are late, not lagging. Both measured by the relay, both capped.
                let player = players[slot]
                let halfTrip = UInt64((player?.rttMs ?? 0) / 2)
                let variation = UInt64(min(4 * (player?.rttDeviationMs ?? 0), Double(configuration.maxCountedRttMs) / 2))
                guard now >= sent + halfTrip + variation + lagToleranceMs else {
                    blocked = true
                    continue
                }
                if !substituting[slot] {
                    substituting[slot] = true
                    if let player = players[slot] {
                        peerEvent(.substituting, player, frame: frame,
                                  detail: "input \(now - sent) ms after the first sender (half trip \(halfTrip) ms)", now: now)
                    }
                }
                timeline.appendSubstitute(slot: slot)
                caughtUpFrom[slot] = nil
                substitutedFrames[slot] += 1
                players[slot]?.stats.substitutedFrames = UInt64(substitutedFrames[slot])
            }
            if blocked { return }
            frame += 1
        }
    }

    private func resendAndAcknowledge(now: UInt64) {
        var resent = false
        forEachParticipant { participant in
            guard participant.isConnected && participant.awaitingTransfer == nil else { return }
            if let since = participant.deferredSinceMs, now &- since >= confirmationDeferMs { resent = true }
            // Its acknowledgement comes with its next batch, up to a frame after ours arrived:
            // without that frame, a loaded link (queues of tens of ms) looks lossy, and each
            // needless resend costs a message and 10 s of redundant broadcasts. Nor earlier than
            // its acknowledgements usually take (smoothed delay + 4 deviations, as TCP's RTO):
            // a relay behind on its own queue reads acknowledgements late, and resending then
            // only adds work (at 1,000 sessions that tipped a busy relay into a backlog it
            // never left). Each resend without an answer doubles the wait, up to 8 times.
            let usual = UInt64((participant.ackDelayMs + 4 * participant.ackDelayDeviationMs).rounded(.up))
            let timeout = (max(UInt64(max(configuration.resendIntervalMs, participant.rttMs + 20)), usual) + frameIntervalMs)
                * participant.resendBackoff
            if participant.awaitedFrame < participant.sentFrames,
               now &- participant.lastAuthoritativeSendMs >= timeout {
                participant.sentFrames = participant.awaitedFrame
                participant.rttProbe = nil
                participant.lastAuthoritativeSendMs = now
                participant.redundantUntilMs = now + 10_000
                participant.resentSinceProgress = true
                participant.resends += 1
                participant.resendBackoff = min(participant.resendBackoff * 2, 8)
                resent = true
            } else if participant.isPlayer,
                      participant.toldAwaitedInput != timeline.stored(participant.slot - 1),
                      now &- participant.lastSendMs >= UInt64(configuration.resendIntervalMs) {
                // The player's inputs arrived but nothing carried the acknowledgement back.
                let awaited = timeline.stored(participant.slot - 1)
                participant.toldAwaitedInput = awaited
                let frame = RelayWire.inputBroadcast(packer, authoritative: true, timeline: timeline, players: nil,
                                                     provisional: [], forwarded: [], confirmedFrames: timeline.confirmed,
                                                     awaitedInputFrame: awaited)
                sendPacked(frame, to: participant, now: now)
            }
        }
        // Spectators' delayed frames and resends go out here.
        if resent || spectatorDelay > 0 || !spectators.isEmpty { deliverConfirmed(now: now) }
    }

    /// Players waiting for the match to start are pinged now and then, so their round trips are
    /// known when it starts (the start then waits only for the last one to attach).
    private func pingWaitingPlayers(now: UInt64) {
        guard configuration.startSyncSamples > 0 else { return }
        let interval = UInt64(configuration.lobbyPingIntervalMs)
        for player in players {
            guard let player, player.isConnected, now &- player.lastPingMs >= interval else { continue }
            ping(player, now: now)
        }
    }

    /// The input delay the measured round trips call for: half the longest player-to-player
    /// path through the relay (the two largest round trips, halved and added), in frames,
    /// rounded, 1 ... 8. Half the path is hidden by the delay, the other half predicted (and
    /// rolled back when wrong). Each round trip counts half a frame less: a peer answers on its
    /// next tick, half a frame later on average, which is not path. Nil while no player's round
    /// trip is known. Near a boundary the current delay stays (a value must be 0.65 frames
    /// away from it to replace it), so a path hovering between two values does not flap.
    /// `keepingCurrent: false` (the start): the nearest value, whatever the current one.
    func recommendedFrameDelay(keepingCurrent: Bool = true) -> Int? {
        guard let exact = exactFrameDelay() else { return nil }
        if keepingCurrent && abs(exact - Double(params.frameDelay)) <= 0.65 { return Int(params.frameDelay) }
        return min(8, max(1, Int(exact.rounded())))
    }

    private func exactFrameDelay() -> Double? {
        var largest = -1, second = -1
        for (index, player) in players.enumerated() {
            guard let player, player.isConnected, slotModes[index] == .active, player.smoothedRttMs > 0 else { continue }
            let rtt = player.rttMs
            if rtt > largest { second = largest; largest = rtt } else if rtt > second { second = rtt }
        }
        guard largest >= 0 else { return nil }
        let frameMs = 1000 / framesPerSecond
        let pathMs = max(0, Double(largest + max(second, 0)) / 2 - frameMs / 2)
        return pathMs / frameMs / 2
    }

    /// With `frameDelayAuto`: adopts the delay the round trips call for once they have called for
    /// it for ``RelayConfiguration/frameDelayHoldMs`` (a passing spike changes nothing). Returns
    /// whether the delay changed.
    private func updateFrameDelay(now: UInt64) -> Bool {
        guard params.frameDelayAuto, let wanted = recommendedFrameDelay() else { return false }
        guard wanted != Int(params.frameDelay) else {
            proposedFrameDelay = nil
            return false
        }
        if proposedFrameDelay?.frames != wanted { proposedFrameDelay = (wanted, now) }
        guard now &- proposedFrameDelay!.sinceMs >= UInt64(configuration.frameDelayHoldMs) else { return false }
        params.frameDelay = UInt32(wanted)
        proposedFrameDelay = nil
        return true
    }

    /// Time sync: how far each player runs ahead of the others, from when their inputs for the
    /// same frames were sent (arrival minus half the round trip, averaged). Every player hears
    /// its offset from the session's mean (`ahead_us`; they sum to zero), so each moves half
    /// way and all converge on the same frame at the same moment: equal rollbacks for everyone.
    /// `frames_ahead` stays the lead over the slowest player (the HUD's figure). A player being
    /// substituted is told how far it trails the confirmed frame.
    private func sendHints(now: UInt64) {
        let delayChanged = updateFrameDelay(now: now)
        var slowest = -Double.infinity
        var leading = 0
        for (index, player) in players.enumerated() {
            guard let player, player.isConnected, slotModes[index] == .active else { continue }
            leading = max(leading, player.reportedFrame)
            guard !substituting[index], player.awaitingTransfer == nil, arrivals.hasOffset(slot: index) else { continue }
            slowest = max(slowest, arrivals.offset(slot: index))
        }
        let frameMs = 1000 / framesPerSecond
        for (index, player) in players.enumerated() {
            guard let player, player.isConnected, player.reportedFrame >= 0 else { continue }
            var ahead: Int32 = 0
            if substituting[index] || slotModes[index] != .active {
                ahead = Int32(clamping: min(0, player.reportedFrame - timeline.confirmed))
            } else if slowest.isFinite, arrivals.hasOffset(slot: index) {
                ahead = Int32(clamping: Int(((slowest - arrivals.offset(slot: index)) / frameMs).rounded()))
            }
            player.framesAhead = Int(ahead)
            player.stats.framesAhead = ahead
            var aheadUs: Int32 = 0
            if substituting[index] || slotModes[index] != .active {
                aheadUs = Int32(clamping: Int(Double(ahead) * frameMs * 1000))
            } else if arrivals.hasOffset(slot: index) {
                aheadUs = Int32(clamping: Int((-arrivals.offset(slot: index) * 1000).rounded()))
            }
            // Level players (within 2 ms of the mean) hear it only now and then; a change is
            // told at once.
            let level = abs(aheadUs) < 2_000
            if level && player.lastHintAhead == 0 && !delayChanged && now &- player.lastHintMs < 2_000 { continue }
            player.lastHintAhead = level ? 0 : Int(aheadUs)
            player.lastHintMs = now
            let wait = ahead >= 2 ? UInt32(min(Int(ahead) / 2, 600)) : 0
            send(.timeSyncHint(TimeSyncHint(framesAhead: ahead, recommendedWaitFrames: wait,
                                            rttUs: UInt32(clamping: player.rttMs * 1000),
                                            leadingFrame: UInt32(clamping: max(leading, 0)), aheadUs: aheadUs,
                                            frameDelay: params.frameDelayAuto ? params.frameDelay : 0)), to: player, now: now)
        }
    }

    /// The session's HUD figures.
    func sessionStats() -> SessionStats {
        var peers: [PeerStats] = []
        for participant in participants.prefix(72) {
            var stats = participant.stats
            stats.slot = UInt32(participant.slot)
            stats.name = String(participant.name.prefix(64))
            stats.role = participant.role
            stats.connected = participant.isConnected
            stats.framesAhead = Int32(clamping: participant.framesAhead)
            if participant.slot > 0 { stats.substitutedFrames = UInt64(substitutedFrames[participant.slot - 1]) }
            peers.append(stats)
        }
        return SessionStats(sessionId: sessionId, relayId: configuration.relayId,
                            confirmedFrame: UInt32(clamping: max(timeline.confirmed - 1, 0)), peers: peers,
                            timestampUnixMs: UnixTime.nowMs(), desyncs: UInt32(clamping: desyncs),
                            resyncs: UInt32(clamping: resyncs))
    }

    /// Sends the statistics to every peer, with a fresh progress proof of the confirmed frames
    /// (kept to resume with, see ``ResumeClaim``), and pushes them to telemetry.
    private func sendStats(now: UInt64) {
        var stats = sessionStats()
        transport.pushStats(stats)
        stats.progress = progressProofs?.proof(sessionId: sessionId, confirmedFrames: UInt32(clamping: timeline.confirmed))
        sendToAll(.sessionStats(stats), now: now)
    }
}

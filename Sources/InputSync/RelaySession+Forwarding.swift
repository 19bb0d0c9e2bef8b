import Foundation
import NetplayService
import NetplayWire

// RelaySession: forwarding inputs coalesced per read batch, acknowledgements, round trips,
// vacant slots and delivery of confirmed frames.
extension RelaySession {
    // MARK: - Forwarding, coalesced per read batch

    var hasQueuedForwards: Bool { !queuedForwards.isEmpty }

    /// Queues forwarding to `other` (players: `run`, another player's new inputs not confirmed
    /// yet; everyone: the confirmed frames it lacks) until ``flushForwards(now:)``: inputs read in
    /// one batch then reach `other` in one message, one run per player, instead of one message
    /// each. A relay that keeps up reads one input at a time and sends as before; one that fell
    /// behind reads several per player and sends fewer, larger messages, so its sending catches up
    /// instead of holding it behind.
    func queueForward(to other: RelayPeer, run: RelayWire.Run?, now: UInt64) {
        if let run {
            if let index = other.queuedRuns.firstIndex(where: { $0.slot == run.slot }) {
                let queued = other.queuedRuns[index]
                let merged = RelayWire.Run(slot: run.slot, from: min(queued.from, run.from), to: max(queued.to, run.to))
                if run.from <= queued.to && queued.from <= run.to && merged.to - merged.from <= 128 {
                    other.queuedRuns[index] = merged
                } else {
                    // Not one run of at most 128 frames without a gap (a gap: the slot changed
                    // hands meanwhile): what is queued goes now.
                    sendQueued(to: other, now: now)
                    other.queuedRuns.append(run)
                }
            } else {
                other.queuedRuns.append(run)
            }
        }
        if !other.forwardQueued {
            other.forwardQueued = true
            queuedForwards.append(other)
        }
    }

    /// Sends everything queued by ``queueForward(to:run:now:)``: one message per participant
    /// (more only past what one message carries). Participants that left, or wait for a state,
    /// meanwhile get nothing (as they would have got nothing then).
    func flushForwards(now: UInt64) {
        guard !queuedForwards.isEmpty else { return }
        let list = queuedForwards
        queuedForwards.removeAll(keepingCapacity: true)
        for index in 0 ..< list.count {
            Unmanaged.passUnretained(list[index])._withUnsafeGuaranteedRef { other in
                other.forwardQueued = false
                guard !ended, other.isConnected, other.awaitingTransfer == nil else {
                    other.heldSinceMs = nil
                    other.queuedRuns.removeAll(keepingCapacity: true)
                    return
                }
                if waitsForPartners(other, now: now) {
                    // Its runs stay queued: the partners' next inputs extend them (and queue it
                    // again), and the timers send them when the wait is over.
                    if other.heldSinceMs == nil { other.heldSinceMs = now }
                    if !heldForwards.contains(where: { $0 === other }) { heldForwards.append(other) }
                    return
                }
                other.heldSinceMs = nil
                sendQueued(to: other, now: now)
            }
        }
    }

    /// Sends the held forwarding whose wait is over (the timers; see ``waitsForPartners(_:now:)``).
    func releaseHeldForwards(now: UInt64) {
        let list = heldForwards
        heldForwards.removeAll(keepingCapacity: true)
        for other in list where other.heldSinceMs != nil { queueForward(to: other, run: nil, now: now) }
        flushForwards(now: now)
    }

    /// Whether forwarding to `other` waits for more partners' inputs of the frame it would carry:
    /// `other` is on several paths (a message is a segment on each, and a segment lost stalls its
    /// connection for a round trip), it waits for at least two partners, one of them has not
    /// sent the newest frame queued, and the wait began less than ``RelayConfiguration/partnerHoldMs``
    /// ago.
    private func waitsForPartners(_ other: RelayPeer, now: UInt64) -> Bool {
        let hold = configuration.partnerHoldMs
        guard hold > 0, other.hasExtraPaths, other.isPlayer, !other.queuedRuns.isEmpty else { return false }
        if let since = other.heldSinceMs, now &- since >= UInt64(hold) { return false }
        var newest = 0
        for run in other.queuedRuns { newest = max(newest, run.to) }
        var partners = 0, missing = false
        for slot in 0 ..< slotCount where slot != other.slot - 1 && slotModes[slot] == .active {
            partners += 1
            if !substituting[slot], timeline.stored(slot) < newest { missing = true }
        }
        return partners >= 2 && missing
    }

    /// Sends `other` the confirmed frames it lacks and its queued runs (what of them is still
    /// unconfirmed and held): together in one message when they fit. Empties the queue.
    private func sendQueued(to other: RelayPeer, now: UInt64) {
        // Frames confirmed since a run was queued go with the confirmed ones.
        var kept = 0
        for index in 0 ..< other.queuedRuns.count {
            let run = other.queuedRuns[index]
            let from = max(run.from, timeline.confirmed, timeline.oldest)
            let to = min(run.to, timeline.stored(run.slot))
            if from < to {
                other.queuedRuns[kept] = RelayWire.Run(slot: run.slot, from: from, to: to)
                kept += 1
            }
        }
        other.queuedRuns.removeLast(other.queuedRuns.count - kept)
        defer { other.queuedRuns.removeAll(keepingCapacity: true) }
        guard other.isPlayer else {
            deliver(to: other, now: now)
            return
        }
        // Confirmed and forwarded inputs together in one message when they fit. (The queue is
        // read in place, not copied, so emptying it keeps its storage.)
        if compose(other, forwarded: other.queuedRuns, now: now) { return }
        if other.sentFrames < limit(for: other) { deliver(to: other, now: now) }
        if !other.queuedRuns.isEmpty {
            let awaited = timeline.stored(other.slot - 1)
            other.toldAwaitedInput = awaited
            let frame = RelayWire.inputBroadcast(packer, authoritative: false, timeline: timeline, players: nil,
                                                 provisional: other.queuedRuns, forwarded: [],
                                                 confirmedFrames: timeline.confirmed, awaitedInputFrame: awaited)
            sendPacked(frame, to: other, now: now)
        }
    }

    func noteAcknowledgement(_ participant: RelayPeer, _ awaited: UInt32) {
        let value = min(Int(awaited), participant.sentFrames)
        if value > participant.awaitedFrame {
            participant.awaitedFrame = value
            let now = participant.lastHeardMs
            if let probe = participant.rttProbe, value >= probe.frames {
                participant.rttProbe = nil
                // After a resend, which send this answers is unknown: no sample (Karn's rule).
                if !participant.resentSinceProgress, now >= probe.sentAtMs {
                    noteRoundTrip(participant, sample: Double(now - probe.sentAtMs))
                }
            }
            if participant.resentSinceProgress {
                // Which send this answers is unknown: no sample, and the backed-off wait stays
                // until a clean one (Karn's rule; else a wait shorter than the usual delay
                // would never learn it).
                participant.resentSinceProgress = false
            } else if now >= participant.lastAuthoritativeSendMs {
                participant.resendBackoff = 1
                let sample = Double(now - participant.lastAuthoritativeSendMs)
                if participant.ackDelayMs == 0 && participant.ackDelayDeviationMs == 0 {
                    participant.ackDelayMs = sample
                    participant.ackDelayDeviationMs = sample / 2
                } else {
                    participant.ackDelayDeviationMs += (abs(sample - participant.ackDelayMs) - participant.ackDelayDeviationMs) / 4
                    participant.ackDelayMs += (sample - participant.ackDelayMs) / 8
                }
            }
            // Progress: the retransmission timer restarts.
            participant.lastAuthoritativeSendMs = max(participant.lastAuthoritativeSendMs, now)
        }
    }

    /// A round trip measured on the relay's clock: smoothed (1/8 of each sample, as TCP's SRTT)
    /// and capped at `maxCountedRttMs`, so no peer stretches the substitution deadlines (which
    /// wait half a player's round trip) beyond that, however slowly it answers.
    func noteRoundTrip(_ participant: RelayPeer, sample: Double) {
        if participant.smoothedRttMs == 0 {
            participant.smoothedRttMs = sample
            participant.rttDeviationMs = sample / 2
        } else {
            participant.rttDeviationMs += (abs(sample - participant.smoothedRttMs) - participant.rttDeviationMs) / 4
            participant.smoothedRttMs += (sample - participant.smoothedRttMs) / 8
        }
        participant.rttMs = min(Int(participant.smoothedRttMs.rounded()), configuration.maxCountedRttMs)
    }

    /// Fills vacant slots up to the newest frame an active slot holds.
    func fillVacantSlots() {
        var newest = Int.min
        for slot in 0 ..< slotCount where slotModes[slot] == .active {
            newest = max(newest, timeline.stored(slot))
        }
        guard newest != .min else { return }
        for slot in 0 ..< slotCount {
            guard case .vacant(let status) = slotModes[slot] else { continue }
            while timeline.stored(slot) < newest { timeline.appendZero(slot: slot, status: status) }
        }
    }

    /// Confirmed frames moved: record them (replay) and learn the players' clock offsets.
    func recordConfirmed(from previous: Int) {
        for frame in max(previous, timeline.confirmed - 64) ..< timeline.confirmed {
            arrivals.sample(frame: frame, slots: slotCount) { slotModes[$0] == .active && !substituting[$0] }
        }
        replay?.framesConfirmed(through: timeline.confirmed, timeline: timeline)
        if let failure = replay?.failure {
            transport.publish(topic: "sync.replay_failed", .eventRecord(EventRecord()), severity: .error,
                              message: "stopped writing the replay of \(sessionId): \(failure)",
                              sessionId: sessionId)
            replay = nil
        }
    }

    /// Confirmed frames moved: record them and deliver them to everyone.
    func confirmedMoved(from previous: Int, now: UInt64) {
        recordConfirmed(from: previous)
        deliverConfirmed(now: now)
    }

    /// The newest frame `participant` may be sent (spectators trail by the delay until the
    /// players are gone).
    private func limit(for participant: RelayPeer) -> Int {
        participant.isPlayer || playersGoneAtMs != nil ? timeline.confirmed : timeline.confirmed - spectatorDelay
    }

    /// Sends an input broadcast the packer just packed to `participant`: on its primary
    /// connection and on each of its additional paths (one flag test when it has none).
    func sendPacked(_ frame: UnsafeRawBufferPointer?, to participant: RelayPeer, now: UInt64) {
        guard let frame, let address = participant.address else { return }
        participant.lastSendMs = now
        transport.sendEncoded(frame, to: address)
        if participant.hasExtraPaths { sendOnExtraPaths(frame, to: participant) }
    }

    /// The same broadcast on every additional path of `participant`.
    private func sendOnExtraPaths(_ frame: UnsafeRawBufferPointer, to participant: RelayPeer) {
        let paths = participant.extraPaths
        for index in 0 ..< paths.count { transport.sendEncoded(frame, to: paths[index]) }
    }

    /// Sends `participant` its pending confirmed frames together with `forwarded` inputs, in one
    /// message, when everything it lacks fits one (on a link that lost or reordered messages it
    /// repeats every frame not acknowledged yet, so a lost or overtaken message costs nothing but
    /// the next one). Returns whether it sent.
    @discardableResult
    private func compose(_ participant: RelayPeer, forwarded: [RelayWire.Run], now: UInt64) -> Bool {
        let limit = limit(for: participant)
        guard participant.sentFrames < limit else { return false }
        // ZeroMQ's TCP never loses or reorders; a link that did (a resend was needed) gets every
        // unacknowledged frame again in each message for a while.
        let redundant = now < participant.redundantUntilMs
        let from = max(redundant ? participant.awaitedFrame : participant.sentFrames, participant.firstFrame)
        // `from` past `limit` (a cursor left above the frames owed) sends nothing rather than
        // a reversed range, which would trap the relay.
        guard from <= limit, limit - from <= 128, from >= timeline.oldest else { return false }
        let awaited = participant.isPlayer ? timeline.stored(participant.slot - 1) : 0
        participant.toldAwaitedInput = awaited
        if participant.awaitedFrame >= participant.sentFrames { participant.lastAuthoritativeSendMs = now }
        participant.sentFrames = limit
        participant.deferredSinceMs = nil
        let frame = RelayWire.inputBroadcast(packer, authoritative: true, timeline: timeline, players: from ..< limit,
                                             provisional: [], forwarded: forwarded, confirmedFrames: timeline.confirmed,
                                             awaitedInputFrame: awaited)
        sendPacked(frame, to: participant, now: now)
        if participant.rttProbe == nil { participant.rttProbe = (limit, now) }
        return true
    }

    /// Sends `participant` the confirmed frames it was not sent yet: all unacknowledged ones in
    /// one message when they fit, else in order, 128 at a time (a participant catching up).
    private func deliver(to participant: RelayPeer, now: UInt64) {
        let limit = limit(for: participant)
        guard participant.sentFrames < limit else { return }
        if compose(participant, forwarded: [], now: now) { return }
        var from = participant.sentFrames
        var messages = 0
        while from < limit && messages < 4 {
            guard from >= timeline.oldest else {
                requestCatchUpTransfer(participant)
                return
            }
            let to = min(limit, from + 128)
            let awaited = participant.isPlayer ? timeline.stored(participant.slot - 1) : 0
            participant.toldAwaitedInput = awaited
            let frame = RelayWire.inputBroadcast(packer, authoritative: true, timeline: timeline, players: from ..< to,
                                                 provisional: [], forwarded: [], confirmedFrames: timeline.confirmed,
                                                 awaitedInputFrame: awaited)
            sendPacked(frame, to: participant, now: now)
            if participant.awaitedFrame >= participant.sentFrames { participant.lastAuthoritativeSendMs = now }
            if participant.rttProbe == nil, to > participant.sentFrames { participant.rttProbe = (to, now) }
            participant.sentFrames = max(participant.sentFrames, to)
            participant.deferredSinceMs = nil
            from = to
            messages += 1
        }
    }

    /// Sends every participant the confirmed frames it was not sent yet (a participant whose
    /// confirmation is deferred gets it once the deferral is over).
    func deliverConfirmed(now: UInt64, includingDeferred: Bool = true) {
        forEachParticipant { participant in
            guard participant.isConnected && participant.awaitingTransfer == nil else { return }
            if let since = participant.deferredSinceMs, !includingDeferred || now &- since < confirmationDeferMs { return }
            deliver(to: participant, now: now)
        }
    }

    /// A participant lacks inputs the relay no longer holds: it needs a state first.
    func requestCatchUpTransfer(_ participant: RelayPeer) {
        guard participant.awaitingTransfer == nil else { return }
        participant.awaitingTransfer = 0
        participant.awaitingReason = .reconnect
    }
}

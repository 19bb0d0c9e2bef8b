import Foundation
import NetplayService
import NetplayWire

// RelaySession: accepting a participant's input batch (acknowledgement, time sync, new inputs).
extension RelaySession {
    // MARK: - Inputs

    /// A player's (or spectator's) batch: acknowledgement, time sync, and new inputs.
    func receive(_ batch: InputBatch, from participant: RelayPeer, now: UInt64) throws(ServiceError) {
        let result = batch.inputs.withUnsafeBytes { raw in
            Result { () throws(ServiceError) in
                try receive(RelayWire.Batch(slot: batch.slot, startFrame: batch.startFrame, inputSize: batch.inputSize,
                                           inputs: raw, awaitedFrame: batch.awaitedFrame, currentFrame: batch.currentFrame),
                            from: participant, now: now)
            }
        }
        try result.get()
    }

    /// A batch read in place (the hot path): validation, acknowledgement, time sync, new inputs,
    /// confirmation, forwarding.
    func receive(_ batch: RelayWire.Batch, from participant: RelayPeer, now: UInt64) throws(ServiceError) {
        if participant.role == .spectator {
            guard batch.slot == 0, batch.inputs.isEmpty else {
                throw ServiceError(.permissionDenied, "Spectators send no inputs.", field: "InputBatch.inputs")
            }
            noteAcknowledgement(participant, batch.awaitedFrame)
            return
        }
        guard Int(batch.slot) == participant.slot else {
            throw ServiceError(.permissionDenied, "Slot \(batch.slot) is not yours; you play slot \(participant.slot).",
                               field: "InputBatch.slot")
        }
        guard Int(batch.inputSize) == inputSize else {
            throw ServiceError(.badRequest, "Inputs are \(inputSize) bytes in this session, not \(batch.inputSize).",
                               field: "InputBatch.input_size")
        }
        let count = batch.inputs.count / inputSize
        guard batch.inputs.count % inputSize == 0, count <= 128 else {
            throw ServiceError(.badRequest, "A batch holds up to 128 whole inputs of \(inputSize) bytes; got \(batch.inputs.count) bytes.",
                               field: "InputBatch.inputs")
        }
        guard running else {
            throw ServiceError(.invalidState, "The match has not started; wait for AttachResponse with running = true.")
        }
        let slot = participant.slot - 1
        let start = Int(batch.startFrame)
        let stored = timeline.stored(slot)
        guard start <= stored + configuration.maxFramesAhead else {
            throw ServiceError(.badRequest, "Frame \(start) is too far ahead: slot \(participant.slot) holds frames up to \(stored).",
                               field: "InputBatch.start_frame")
        }
        guard start + count <= Self.frameLimit else {
            throw ServiceError(.badRequest, "A match on this relay ends at frame \(Self.frameLimit).", field: "InputBatch.start_frame")
        }
        let current = Int(batch.currentFrame)
        if current > participant.reportedFrame && current <= timeline.newest + configuration.maxFramesAhead {
            participant.reportedFrame = current
            participant.reportedAtMs = now
            participant.stats.currentFrame = batch.currentFrame
        }
        noteAcknowledgement(participant, batch.awaitedFrame)

        // No slot runs more than maxFramesAhead past the confirmed frames (at most half the
        // history), so the history always holds every frame not confirmed yet: a slot run ahead
        // batch after batch overwrote the frames the others still needed, and the match froze.
        // What is cut off comes again: the sender is told the frame its slot awaits.
        // A player back at a rebuilt relay may hold its own inputs up to the claim its history
        // carries (``historyEnd(slot:from:)``), past the rebuilt timeline's confirmed frames.
        let resumedOwn = participant.resumedHolding > 0 ? min(participant.resumedHolding, recoveryFrameLimit) : 0
        let ceiling = min(max(timeline.confirmed, resumedOwn) + configuration.maxFramesAhead,
                          timeline.confirmed + configuration.historyFrames - configuration.maxFramesAhead)
        guard slotModes[slot] == .active, count > 0, start + count > stored, start <= stored, stored < ceiling else { return }
        let first = stored
        let last = min(start + count, first + configuration.maxFramesAhead, ceiling)
        var frame = first
        while frame < last {
            let offset = (frame - start) * inputSize
            timeline.append(slot: slot, from: UnsafeRawBufferPointer(rebasing: batch.inputs[offset ..< offset + inputSize]),
                            status: .received)
            frame += 1
        }
        inputsAccepted += last - first
        if substituting[slot] {
            // Caught up only after a lag tolerance's worth of its own inputs in a row.
            caughtUpFrom[slot] = caughtUpFrom[slot] ?? first
        }
        // Below what a returning player said was confirmed before the restart, its inputs are
        // not play (its history carries them): noted, they would spare a player holding the
        // rebuilt match there its forfeit (``forfeitHistoryNotSent(now:)``).
        let sentAt = now &- UInt64(participant.rttMs / 2)
        for frame in max(first, participant.resumedHolding) ..< max(last, participant.resumedHolding) {
            arrivals.note(frame: frame, slot: slot, sentAt: sentAt)
        }
        if substituting[slot], let from = caughtUpFrom[slot], last - from >= lagTolerance {
            substituting[slot] = false
            caughtUpFrom[slot] = nil
            peerEvent(.caughtUp, participant, frame: from, detail: "its own inputs count again", now: now)
        }
        fillVacantSlots()
        let confirmedBefore = timeline.confirmed
        let moved = timeline.updateConfirmed()
        if moved { recordConfirmed(from: confirmedBefore) }
        // Forward what is not confirmed yet to the other players at once, with whatever was
        // confirmed for them meanwhile; the sender's own confirmation waits for its next message.
        let forwardFrom = max(first, timeline.confirmed)
        let forwarded = forwardFrom < last ? RelayWire.Run(slot: slot, from: forwardFrom, to: last) : nil
        forEachParticipant { other in
            guard other.isConnected && other.awaitingTransfer == nil else { return }
            if other === participant {
                if moved, other.deferredSinceMs == nil { other.deferredSinceMs = now }
                return
            }
            if other.isPlayer || moved { queueForward(to: other, run: other.isPlayer ? forwarded : nil, now: now) }
        }
    }
}

import Foundation
import NetplayService
import NetplayWire
import Rollback

// NetplayMatch: state transfers: capturing aligned states, serving a state, loading one.
extension NetplayMatch {
    // MARK: State transfers

    func captureAlignedState(_ session: P2PSession<G>) {
        let interval = Int(params.checksumIntervalFrames)
        guard interval > 0 else { return }
        let confirmed = session.confirmedFrame + 1
        guard confirmed / interval > lastCheckedConfirmed / interval || alignedState == nil else {
            lastCheckedConfirmed = confirmed
            return
        }
        lastCheckedConfirmed = confirmed
        if let state = session.latestConfirmedState(), (state.frame + offset) % interval == 0 {
            alignedState = state
        }
    }

    /// The most chunks one served state is cut into (larger chunks for a larger state).
    static var maxChunksPerState: Int { 256 }
    /// What the relay may leave unacknowledged of what this peer sent it before a state request
    /// goes unanswered.
    static var maxUnacknowledgedBeforeServing: Int { 1 << 20 }

    func serveState(_ request: NetplayWire.StateRequest, now: UInt64) {
        statesServedAtMs.removeAll { now >= $0 + 1_000 }
        guard statesServedAtMs.count < Self.maxStatesServedPerSecond else {
            // Unanswered: the relay asks again after its transfer timeout, as after a loss.
            return
        }
        // A relay that has not taken what was sent to it (its kernel has not acknowledged over
        // 1 MiB of it) is not sent another state: one that asked and read nothing had every
        // copy queued here. Unanswered, it asks again after its transfer timeout.
        if let unacknowledged = link.unacknowledgedBytes(), unacknowledged > Self.maxUnacknowledgedBeforeServing { return }
        statesServedAtMs.append(now)
        if case .none = engine, request.reason == .matchStart, role == .player {
            // Before frame 0 of a match from the host's state: the game as it is now.
            sendState(initialGame.saveState(), frame: 0, checksum: initialGame.checksum(), for: request, now: now)
            return
        }
        guard case .player(let session) = engine else {
            link.send(.stateChunk(StateChunk(transferId: request.transferId, frame: 0, totalSize: 0, last: true,
                                             reason: request.reason)), now: now)
            return
        }
        var chosen = session.latestConfirmedState()
        // A state at a checksum frame carries its checksum, which the receiver verifies after
        // loading; it must not be older than the frame asked for (a desync heals only from a
        // state after it). Any frame keeps the receiver's checksums on the match's schedule.
        if let aligned = alignedState, let latest = chosen, latest.frame - aligned.frame < 300,
           aligned.frame + offset >= Int(request.frame) {
            chosen = aligned
        }
        guard let state = chosen else { return }
        sendState(state.state, frame: state.frame + offset, checksum: state.checksum ?? 0, for: request, now: now)
    }

    /// Sends `state` (of match frame `frame`) in chunks for `request`.
    private func sendState(_ state: G.State, frame matchFrame: Int, checksum: UInt64, for request: NetplayWire.StateRequest,
                           now: UInt64) {
        let bytes = G.encode(state)
        // At least 64 bytes a chunk (a quarter of the relay's smallest transfer window): a
        // request for 1-byte chunks would send an envelope per byte of the state at once. And
        // at most 256 chunks a state: small chunks of a large state (a 16 MiB state in chunks of
        // 64 bytes, as a relay with the smallest window asks) made 262,144 copies and encodes in
        // one tick.
        let requested = Int(request.maxChunkBytes == 0 ? 65536 : min(max(request.maxChunkBytes, 64), 262_144))
        let chunkSize = min(262_144, max(requested, (bytes.count + Self.maxChunksPerState - 1) / Self.maxChunksPerState))
        let frame = UInt32(clamping: matchFrame)
        var start = 0
        repeat {
            let end = min(bytes.count, start + chunkSize)
            // A relay that does not read: once the connection's queue is full, the rest of this
            // state is not queued (the relay asks again after its transfer timeout).
            guard link.send(.stateChunk(StateChunk(transferId: request.transferId, frame: frame, offset: UInt64(start),
                                                   totalSize: UInt64(bytes.count), data: Array(bytes[start ..< end]),
                                                   checksum: checksum, last: end == bytes.count,
                                                   reason: request.reason)), now: now) else { return }
            start = end
        } while start < bytes.count
        note(.stateServed(frame: Int(frame), bytes: bytes.count))
    }

    func receiveChunk(_ chunk: StateChunk, now: UInt64) {
        // A first chunk always starts a state (a relay rebuilt since may reuse a transfer id).
        if assembly?.transferId != chunk.transferId || chunk.offset == 0 {
            guard chunk.offset == 0 else { return }
            guard Int(chunk.frame) <= Self.frameLimit else {
                refuseState(chunk, received: 0, "the state's frame \(chunk.frame) is past the frame limit", now: now)
                return
            }
            assembly = Assembly(transferId: chunk.transferId, frame: Int(chunk.frame), reason: chunk.reason,
                                checksum: chunk.checksum, totalSize: chunk.totalSize, bytes: [])
            assembly?.bytes.reserveCapacity(Int(min(chunk.totalSize, 1 << 26)))
        }
        guard let received = assembly?.bytes.count, UInt64(received) == chunk.offset else { return }
        // No larger than announced (and the wire caps what is announced): a relay sending
        // chunks without end no longer grows the state until the app is killed.
        guard let announced = assembly?.totalSize, UInt64(received + chunk.data.count) <= announced,
              !chunk.last || UInt64(received + chunk.data.count) == announced else {
            assembly = nil
            refuseState(chunk, received: received, "the state's chunks do not add up to the \(chunk.totalSize) bytes announced", now: now)
            return
        }
        assembly?.bytes.append(contentsOf: chunk.data)  // in place: each chunk used to copy the whole state so far
        guard chunk.last, let current = assembly else {
            // The relay sends the next chunks once these are acknowledged.
            if relayPacesTransfers {
                link.send(.stateTransferAck(StateTransferAck(transferId: chunk.transferId,
                                                             receivedBytes: UInt64(received + chunk.data.count))), now: now)
            }
            return
        }
        assembly = nil
        guard let state = G.decode(current.bytes) else {
            link.send(.stateTransferAck(StateTransferAck(transferId: current.transferId, receivedBytes: UInt64(current.bytes.count),
                                                         error: "the state did not decode")), now: now)
            return
        }
        if case .none = engine, phase != .awaitingState, current.reason == .matchStart {
            loadStartState(state, current, now: now)
            return
        }
        if case .none = engine {
            guard let game = gameLoading(state, transferId: current.transferId, receivedBytes: current.bytes.count, now: now) else { return }
            if current.checksum != 0, game.checksum() != current.checksum {
                link.send(.stateTransferAck(StateTransferAck(transferId: current.transferId,
                                                             receivedBytes: UInt64(current.bytes.count),
                                                             error: "checksum mismatch after loading")), now: now)
                return
            }
            do {
                try makeEngine(at: current.frame, game: game)
            } catch {
                finish(.failed("cannot start from the transferred state: \(error)"))
                return
            }
            link.send(.stateTransferAck(StateTransferAck(transferId: current.transferId, receivedBytes: UInt64(current.bytes.count),
                                                         loaded: true)), now: now)
            note(.stateLoaded(frame: current.frame, reason: current.reason))
            if phase == .awaitingState { enterPlaying() }
            return
        }
        pendingLoad = PendingLoad(transferId: current.transferId, frame: current.frame, state: state, reason: current.reason,
                                  deadlineMs: now + 1_000)
        retryPendingLoad(now: now)
    }

    /// Tells the relay the state of `chunk`'s transfer cannot be loaded, and why.
    private func refuseState(_ chunk: StateChunk, received: Int, _ why: String, now: UInt64) {
        note(.error(.malformed, why))
        link.send(.stateTransferAck(StateTransferAck(transferId: chunk.transferId, receivedBytes: UInt64(received), error: why)), now: now)
    }

    func retryPendingLoad(now: UInt64) {
        guard let pending = pendingLoad else { return }
        if let last = lastStateLoadMs, now < last + Self.minStateLoadIntervalMs { return }  // the newest waits its turn
        if case .spectator = engine {
            // The host restarted the match: a spectator starts over from its state (the relay
            // sends it the inputs from the state's frame on).
            pendingLoad = nil
            lastStateLoadMs = now
            jump(to: pending, now: now)
            return
        }
        guard case .player(let session) = engine else {
            pendingLoad = nil
            return
        }
        let local = pending.frame - offset
        // Loaded in place, the state holds only while nothing rolls back past it: an input for a
        // frame before it that is still to come (not confirmed yet) would load an older state of
        // the desynced run and re-simulate over it. So it waits for those inputs, as for the
        // frame itself, and past the deadline starts over from the state.
        if local > session.currentFrame || local > session.confirmedFrame + 1 {
            if now < pending.deadlineMs { return }  // not there yet: keep running
            // Still short of the state's frame: the relay sends inputs only from that frame on, so
            // this peer cannot run there. It starts over from the state (its own slot's inputs
            // come back from the relay as authoritative, as for any peer).
            pendingLoad = nil
            lastStateLoadMs = now
            jump(to: pending, now: now)
            return
        }
        pendingLoad = nil
        lastStateLoadMs = now
        do {
            try session.loadForeignState(pending.state, frame: local)
            // The aligned state kept for serving is of the run the load replaced.
            alignedState = nil
            if pending.reason == .desync { resyncs += 1 }
            note(.stateLoaded(frame: pending.frame, reason: pending.reason))
            link.send(.stateTransferAck(StateTransferAck(transferId: pending.transferId, loaded: true)), now: now)
        } catch {
            link.send(.stateTransferAck(StateTransferAck(transferId: pending.transferId,
                                                         error: String("cannot load at frame \(pending.frame): \(error)".prefix(256)))),
                      now: now)
        }
    }

    /// Before frame 0 of a match from the host's state: the host's state replaces this peer's
    /// game, from which its engine starts when the match does.
    private func loadStartState(_ state: G.State, _ assembled: Assembly, now: UInt64) {
        guard let game = gameLoading(state, transferId: assembled.transferId, receivedBytes: assembled.bytes.count, now: now) else { return }
        guard assembled.checksum == 0 || game.checksum() == assembled.checksum else {
            link.send(.stateTransferAck(StateTransferAck(transferId: assembled.transferId, receivedBytes: UInt64(assembled.bytes.count),
                                                         error: "checksum mismatch after loading")), now: now)
            return
        }
        initialGame = game
        note(.stateLoaded(frame: assembled.frame, reason: assembled.reason))
        link.send(.stateTransferAck(StateTransferAck(transferId: assembled.transferId, receivedBytes: UInt64(assembled.bytes.count),
                                                     loaded: true)), now: now)
    }

    /// Restarts the rollback session from a transferred state (a player: ahead of the current
    /// frame; a spectator: the host's restart).
    private func jump(to pending: PendingLoad, now: UInt64) {
        guard let game = gameLoading(pending.state, transferId: pending.transferId, receivedBytes: 0, now: now) else { return }
        do {
            try makeEngine(at: pending.frame, game: game)
        } catch {
            link.send(.stateTransferAck(StateTransferAck(transferId: pending.transferId,
                                                         error: String("cannot start from frame \(pending.frame): \(error)".prefix(256)))),
                      now: now)
            finish(.failed("cannot start from the transferred state: \(error)"))
            return
        }
        if pending.reason == .desync { resyncs += 1 }
        note(.stateLoaded(frame: pending.frame, reason: pending.reason))
        link.send(.stateTransferAck(StateTransferAck(transferId: pending.transferId, loaded: true)), now: now)
    }

    /// The initial game with a transferred state loaded, or nil when the game refuses the state
    /// (a libretro core refusing a corrupt serialization): the relay is told why, and this peer
    /// plays on as it was.
    private func gameLoading(_ state: G.State, transferId: UInt32, receivedBytes: Int, now: UInt64) -> G? {
        var game = initialGame
        do {
            try game.loadForeignState(state)
            return game
        } catch {
            let why = String("the state did not load: \(error)".prefix(256))
            note(.error(.malformed, why))
            link.send(.stateTransferAck(StateTransferAck(transferId: transferId, receivedBytes: UInt64(receivedBytes), error: why)),
                      now: now)
            return nil
        }
    }
}

import Foundation
import NetplayService
import NetplayWire

// RelaySession: rebuilding a running match after the relay restarted, from its replay and what
// its peers resend.
extension RelaySession {
    // MARK: - Restart recovery

    /// This session is rebuilt after a relay restart: the match was running, its first
    /// returning peer resumed it holding `confirmed` frames as far as its progress proof covers
    /// (a spectator: its delay behind the players). It runs from now, with substitution held
    /// back while the others return and resend, and its replay file continues. A replay that
    /// vouches for what was confirmed before seeds the timeline, and bounds what any peer's
    /// history may add.
    func beginRecovery(_ start: RecoveryStart, confirmed: Int, spectator: Bool, now: UInt64) {
        recovering = true
        rebuiltAtMs = now
        recoveryEndsAtMs = now + UInt64(configuration.recoveryHistoryMs)
        recoveryFrameCeiling = min(start.record?.confirmedBound ?? Self.frameLimit, Self.frameLimit)
        raiseRecoveryFrameLimit(provenClaim: confirmed, spectator: spectator)
        if let record = start.record { seed(from: record) }
        running = true
        startedAtMs = now
        substitutionHoldUntilMs = now + UInt64(configuration.recoveryWaitMs)
        let source = rebuiltFromReplayTo.map { "frames \(timeline.origin) ..< \($0) from its replay, the rest from its peers" }
            ?? "from its peers (no fresh replay of it here)"
        transport.publish(topic: "sync.session_rebuilt", .eventRecord(EventRecord()), severity: .notice,
                          message: "session \(sessionId) rebuilt after a relay restart from frame \(timeline.origin): \(source); "
                            + "the first returning peer's claim counted to frame \(confirmed)",
                          sessionId: sessionId)
        continueReplay(start.replay)
    }

    /// Takes the frames `record` holds from the timeline's origin on, for every slot: the dead
    /// relay's own record of what it confirmed, which no returning peer need resend, nor can
    /// contradict.
    private func seed(from record: LeftBehindReplay) {
        let first = timeline.origin
        guard first >= record.file.startFrame, first < record.end else { return }
        record.file.inputs.withUnsafeBytes { raw in
            for frame in first ..< record.end {
                for slot in 0 ..< slotCount {
                    let offset = ((frame - record.file.startFrame) * slotCount + slot) * inputSize
                    timeline.append(slot: slot, from: UnsafeRawBufferPointer(rebasing: raw[offset ..< offset + inputSize]),
                                    status: record.file.status(frame: frame, slot: slot))
                }
            }
        }
        // A slot vacant when the relay died (its player left, was kicked, never came) stays so
        // until a player attaches to it, rather than waiting each frame for a player who is gone.
        for slot in 0 ..< slotCount {
            let status = record.file.status(frame: record.end - 1, slot: slot)
            if status == .disconnected || status == .empty { slotModes[slot] = .vacant(status) }
        }
        _ = timeline.updateConfirmed()
        rebuiltFromReplayTo = record.end
    }

    /// A returning peer of a rebuilt session resends the confirmed inputs it holds; the relay
    /// adopts the frames it lacks (they were final before the restart). Only history: frames
    /// below what the sender's resumed attach said it had confirmed, and below
    /// ``recoveryFrameLimit``, within ``RelayConfiguration/recoveryHistoryMs`` of the rebuild. A
    /// player cannot write the frames other players are about to send: those are theirs. Nor,
    /// whatever it claims, another player's frames that player can resend itself (see
    /// ``historyEnd(slot:from:now:)``).
    func adoptHistory(_ history: InputBroadcast, from participant: RelayPeer, now: UInt64) throws(ServiceError) {
        endRecoveryIfDue(now: now)
        guard recovering, participant.isPlayer, history.authoritative else {
            throw ServiceError(.permissionDenied, "Peers send InputBroadcast only to rebuild a session after a relay restart.")
        }
        guard Int(history.inputSize) == inputSize else {
            throw ServiceError(.badRequest, "Inputs are \(inputSize) bytes in this session.", field: "InputBroadcast.input_size")
        }
        for run in history.players {
            let slot = Int(run.slot) - 1
            guard slot >= 0, slot < slotCount else {
                throw ServiceError(.badRequest, "Slot \(run.slot) does not exist.", field: "PlayerInputs.slot")
            }
            let count = run.inputs.count / inputSize
            guard run.inputs.count % inputSize == 0, count <= 128,
                  run.status.isEmpty || run.status.count == count else {
                throw ServiceError(.badRequest, "A history run holds whole inputs with one status each.", field: "PlayerInputs.inputs")
            }
            let start = Int(run.startFrame)
            guard start + count <= Self.frameLimit else {
                throw ServiceError(.badRequest, "A match on this relay ends at frame \(Self.frameLimit).", field: "PlayerInputs.start_frame")
            }
            guard let end = historyEnd(slot: slot, from: participant, now: now) else { continue }
            var frame = timeline.stored(slot)
            let last = min(start + count, end)
            guard frame >= start, frame < last else { continue }
            run.inputs.withUnsafeBytes { raw in
                while frame < last {
                    let offset = (frame - start) * inputSize
                    timeline.append(slot: slot,
                                    from: UnsafeRawBufferPointer(rebasing: raw[offset ..< offset + inputSize]),
                                    status: run.status.isEmpty ? .received : run.status[frame - start])
                    frame += 1
                }
            }
        }
        let before = timeline.confirmed
        if timeline.updateConfirmed() { confirmedMoved(from: before, now: now) }
    }

    /// History may reach two seconds of frames past a returning peer's proven claim (what the
    /// dead relay may have confirmed that this peer had not seen yet), the highest such claim
    /// so far, at most ``recoveryFrameCeiling``.
    func raiseRecoveryFrameLimit(provenClaim: Int, spectator: Bool) {
        let playersConfirmed = provenClaim + (spectator ? spectatorDelay : 0)
        let limit = min(playersConfirmed + 2 * Int(framesPerSecond.rounded(.up)), recoveryFrameCeiling)
        recoveryFrameLimit = max(recoveryFrameLimit, limit)
    }

    /// Where `participant`'s resent history for `slot` stops (exclusive), or nil for not now.
    ///
    /// Its own slot: at what its resumed attach said it had confirmed (its own inputs). Another
    /// player's slot is that player's to resend while it is back (resumed and connected), and a
    /// liar who returned first with an inflated claim could otherwise write it (play for that
    /// player) up to the claim: from the others only the frames below the owner's own history
    /// (which it cannot resend) are taken. Until the owner is back, and while the wait for the
    /// returning players lasts, nothing (the sender repeats its history); after that wait, an
    /// absent owner's frames up to as much of the sender's claim as its progress proof covers
    /// (the others hold them confirmed; a substitute there would contradict them). An owner that
    /// held the match up with frames it said it had and did not send counts as not back below
    /// ``forfeitableEnd(slot:besides:)`` (``historyForfeited``).
    func historyEnd(slot: Int, from participant: RelayPeer, now: UInt64) -> Int? {
        if participant.slot - 1 == slot { return min(participant.resumedHolding, recoveryFrameLimit) }
        let end = min(participant.resumedProven, recoveryFrameLimit)
        if let ownerHistory = ownersOwnHistoryStart(slot: slot) { return min(end, ownerHistory) }
        guard now >= substitutionHoldUntilMs else { return nil }
        return end
    }

    /// While the rebuild takes history, the frame below which no slot is substituted: the
    /// highest confirmed frame a connected player's resumed attach claimed, at most
    /// ``recoveryFrameLimit`` (0 otherwise). Those frames were final before the restart, and a
    /// returning player's history for them may still be on its way (NetplayKit repeats it every
    /// 250 ms): a substitute there would contradict what that player confirmed. Only for
    /// ``historyGraceMs`` past the wait for returning players: a claim whose frames never come
    /// (a liar's) holds the match no longer.
    func historyOnlyBelow(now: UInt64) -> Int {
        endRecoveryIfDue(now: now)
        guard recovering, now < substitutionHoldUntilMs &+ Self.historyGraceMs else { return 0 }
        var highest = 0
        for case let player? in players where player.isConnected && player.resumedHistoryFrom != nil {
            highest = max(highest, player.resumedProven)
        }
        return min(highest, recoveryFrameLimit)
    }

    /// Where `slot`'s player, back and connected, resends its own history from (the others'
    /// history for the slot counts below it only), or nil: not back, or back without saying.
    /// Where it forfeited its history (``historyForfeited``), no lower than
    /// ``forfeitableEnd(slot:besides:)`` up to the forfeit's cap.
    private func ownersOwnHistoryStart(slot: Int) -> Int? {
        guard let owner = players[slot], owner.isConnected, let from = owner.resumedHistoryFrom else { return nil }
        guard let forfeit = historyForfeited[slot] else { return from }
        return max(from, min(forfeitableEnd(slot: slot, besides: forfeitedSlots), forfeit.cap))
    }

    /// The slots in ``historyForfeited``, one bit each (slot `n`: bit `n`).
    private var forfeitedSlots: Int {
        historyForfeited.keys.reduce(0) { $0 | 1 << $1 }
    }

    /// How far the others' history may stand in for `slot`'s player once it forfeited its own:
    /// to the frames every other active slot holds (never its player's next moves), and no
    /// further than another returning player's history can reach (what its proof covers), so
    /// that frames only its player can send stay its own. The slots in `forfeiting` (one bit
    /// each; its own included or not) count as not back: players holding the match together do
    /// not count for each other.
    private func forfeitableEnd(slot: Int, besides forfeiting: Int) -> Int {
        let besides = forfeiting | 1 << slot
        guard let held = framesEveryOtherSlotHolds(besides: besides) else { return 0 }
        var reach = 0
        for case let player? in players where besides & 1 << (player.slot - 1) == 0
            && player.isConnected && player.resumedHistoryFrom != nil {
            reach = max(reach, min(player.resumedProven, recoveryFrameLimit))
        }
        return min(held, reach)
    }

    /// The frames every active slot not in `slots` (one bit each) holds (nil: there is no other
    /// active slot).
    private func framesEveryOtherSlotHolds(besides slots: Int) -> Int? {
        var held: Int?
        for other in 0 ..< slotCount where slots & 1 << other == 0 && slotModes[other] == .active {
            held = min(held ?? .max, timeline.stored(other))
        }
        return held
    }

    /// A returning player says it holds its own inputs from its `history_from_frame`, and while
    /// it is back nobody else may write them. One that returned first with a low claim on
    /// purpose, and sends none (or one now and then), would hold the rebuilt match for good
    /// (frames final before the restart get no substitution deadline: no live input arrives
    /// for them). So once the wait for returning players and its grace are over, and the player
    /// has had that grace since its first resumed attach (NetplayKit repeats its history every
    /// 250 ms), a slot that holds the match at a frame its player said it holds, while the
    /// match is held there (``matchHeld(at:)``) and no live input arrived for that frame, is
    /// taken from the others' history as if that player were not back, as far as
    /// ``forfeitableEnd(slot:besides:)`` (event `sync.history_forfeited`); where the match
    /// stands below ``framesProvenFinal``, no further than that: past it may come that player's
    /// next moves, and another's history reaches up to 3 s past its own proof. A player that
    /// forfeited so is not forfeited further while it plays on
    /// (``HistoryForfeit/notePlay(of:quarterSecond:now:)``): its frames were taken ahead
    /// of where it played, and the match stands still while it catches up. The others repeat
    /// their history too; their copies are the inputs confirmed before the restart. Players
    /// holding the match so together (at one frame, or one frame apart) forfeit together: the
    /// holding and the forfeited slots count as not back for each other's reach, or each would
    /// wait on the other for good.
    func forfeitHistoryNotSent(now: UInt64) {
        let frame = timeline.confirmed
        guard now >= substitutionHoldUntilMs &+ Self.historyGraceMs, matchHeld(at: frame) else { return }
        let cap = frame < framesProvenFinal ? framesProvenFinal : .max
        var holding: [(slot: Int, from: Int)] = []
        for slot in 0 ..< slotCount where slotModes[slot] == .active && historyForfeited[slot]?.cap ?? .min < cap {
            guard timeline.stored(slot) == frame, let owner = players[slot], let from = ownersOwnHistoryStart(slot: slot),
                  from <= frame, now &- owner.firstResumedAtMs >= Self.historyGraceMs,
                  arrivals.sendEstimate(frame: frame) == nil else { continue }
            if historyForfeited[slot] != nil {
                historyForfeited[slot]?.notePlay(of: owner, quarterSecond: quarterSecondOfFrames, now: now)
                if historyForfeited[slot]?.playsOn == true { continue }
            }
            holding.append((slot, from))
        }
        guard !holding.isEmpty else { return }
        let together = holding.reduce(forfeitedSlots) { $0 | 1 << $1.slot }
        for (slot, from) in holding {
            let end = min(forfeitableEnd(slot: slot, besides: together), cap)
            guard end > frame else { continue }
            historyForfeited[slot] = HistoryForfeit(cap: cap, owner: players[slot], now: now)
            transport.publish(topic: "sync.history_forfeited", .eventRecord(EventRecord()), severity: .warning,
                              message: "session \(sessionId): the player in slot \(slot + 1) said it holds its inputs from frame \(from) "
                                + "and had not sent frame \(frame), which the others hold; its frames to \(end) are taken from their history",
                              sessionId: sessionId)
        }
    }

    /// Whether a rebuilt match at `frame` is held rather than played: its confirmed frame moved
    /// less than a quarter second of frames in the last second (``rebuildHeld``), or `frame` is
    /// below what a returning peer's progress proof says the dead relay confirmed
    /// (``framesProvenFinal``): final there for every slot, so a slot moving there at any pace
    /// is not being played live.
    func matchHeld(at frame: Int) -> Bool {
        rebuildHeld || frame < framesProvenFinal
    }

    /// A quarter second of the match's frames, rounded up: the least a match played (however
    /// slowly) moves in a second.
    var quarterSecondOfFrames: Int {
        Int((framesPerSecond / 4).rounded(.up))
    }

    /// In a rebuilt session whose confirmed frame is below ``recoveryFrameLimit`` (frames that
    /// may have been final before the restart), notes once a second whether the match is held:
    /// its confirmed frame moved less than a quarter second of frames in the last second. A
    /// match played, even slowly, is not; one whose player sends a frame now and then is.
    /// Moving a quarter second of frames within the second clears it at once.
    func noteRebuildProgress(now: UInt64) {
        guard rebuiltAtMs != nil else { return }
        guard timeline.confirmed < recoveryFrameLimit else {
            rebuildHeld = false
            rebuildProgressMark = (0, 0)
            return
        }
        let quarterSecond = quarterSecondOfFrames
        if rebuildProgressMark.atMs == 0 {
            rebuildProgressMark = (timeline.confirmed, now)
        } else if now &- rebuildProgressMark.atMs >= 1_000 {
            rebuildHeld = timeline.confirmed - rebuildProgressMark.frame < quarterSecond
            rebuildProgressMark = (timeline.confirmed, now)
        } else if rebuildHeld, timeline.confirmed - rebuildProgressMark.frame >= quarterSecond {
            rebuildHeld = false
        }
    }

    /// A rebuilt timeline can start below every frame its returning players can send for a slot
    /// (the first player back loaded a state in the second before its proof and nobody else back
    /// holds the frames before it). Nobody substitutes those frames (substitution waits for
    /// later arrivals), so the match would stay there. Once the wait for returning players and
    /// its grace are over, and the confirmed frame has not moved for a second, each slot held
    /// up at a frame nobody connected can send moves on, without data (status `empty`), to the
    /// first frame someone can: those frames are below what every connected peer holds, so
    /// none is sent them. A peer returning later that needs them replays empty inputs there,
    /// disagrees at the next checksum, and gets a state.
    func skipFramesNobodyCanSend(now: UInt64) {
        if timeline.confirmed != recoveryConfirmedSeen || recoveryConfirmedMovedMs == 0 {
            recoveryConfirmedSeen = timeline.confirmed
            recoveryConfirmedMovedMs = now
            return
        }
        guard now >= substitutionHoldUntilMs &+ Self.historyGraceMs, now &- recoveryConfirmedMovedMs >= 1_000 else { return }
        var skipped: [String] = []
        for slot in 0 ..< slotCount where timeline.stored(slot) == timeline.confirmed {
            let frame = timeline.stored(slot)
            guard let next = firstSendable(slot: slot, from: frame), next > frame,
                  next - frame <= configuration.historyFrames / 2 else { continue }
            timeline.skip(slot: slot, to: next)
            skipped.append("slot \(slot + 1): \(frame) ..< \(next)")
        }
        guard !skipped.isEmpty else { return }
        transport.publish(topic: "sync.frames_skipped", .eventRecord(EventRecord()), severity: .warning,
                          message: "session \(sessionId): no returning peer can send frames \(skipped.joined(separator: ", ")); moved on without them",
                          sessionId: sessionId)
        let before = timeline.confirmed
        if timeline.updateConfirmed() { confirmedMoved(from: before, now: now) }
    }

    /// The first frame from `frame` on that a connected player can still send for `slot` (its
    /// owner: history from its `history_from_frame`, or from what it forfeited, then live
    /// inputs; another player: its history below its proven claim and below what the owner,
    /// when back, resends itself), or nil when none can or one attached without resuming (what
    /// it holds is not known).
    func firstSendable(slot: Int, from frame: Int) -> Int? {
        var first: Int?
        for case let player? in players where player.isConnected {
            guard var from = player.resumedHistoryFrom else { return nil }
            var end = Int.max
            if player.slot - 1 == slot {
                from = ownersOwnHistoryStart(slot: slot) ?? from
            } else {
                end = min(player.resumedProven, recoveryFrameLimit)
                if let ownerFrom = ownersOwnHistoryStart(slot: slot) { end = min(end, ownerFrom) }
            }
            let start = max(from, frame)
            if start < end { first = min(first ?? start, start) }
        }
        return first
    }

    /// When a rebuilt session's history window is over, nothing can fill frames final before the
    /// restart but their own players' live inputs, and no live input of anyone's arrived for
    /// them to time a substitution by. While the match is held there (``matchHeld(at:)``) on
    /// such a frame (below ``recoveryFrameLimit``), substitution times its deadline from the
    /// window's end instead, for a slot that does not wait for another there
    /// (``waitsForAnother(_:at:now:)``: every other active slot is past it, or the disconnect
    /// grace past the window is over): a player that sent nothing there by then is lagging.
    func substitutionTimeForFramesFinalBeforeTheRestart(_ frame: Int) -> UInt64? {
        guard rebuiltAtMs != nil, !recovering, frame < recoveryFrameLimit, matchHeld(at: frame) else { return nil }
        return recoveryEndsAtMs
    }

    /// Whether `slot`, at a frame final before the restart that no live input arrived for,
    /// waits for another slot rather than holds the match: some other active slot is not past
    /// `frame` either (an honest player played up to where the one holding the match is, and
    /// its prediction window stops it there). Only until the disconnect grace past the history
    /// window: two players holding the match together at one frame each wait for the other, and
    /// are substituted from then on, as a player gone that long would be. Never a slot that
    /// forfeited its history (``historyForfeited``): it has held the match before.
    func waitsForAnother(_ slot: Int, at frame: Int, now: UInt64) -> Bool {
        guard historyForfeited[slot] == nil, now < recoveryEndsAtMs &+ UInt64(configuration.disconnectGraceMs) else { return false }
        return framesEveryOtherSlotHolds(besides: 1 << slot).map { $0 <= frame } ?? false
    }

    /// How long past the wait for returning players substitution still spares the frames their
    /// claims say were final (eight of NetplayKit's history repeats).
    static let historyGraceMs: UInt64 = 2_000

    /// Ends the rebuild's history window once it is over (later attaches are told the session
    /// is not recovering, and resent history is refused).
    func endRecoveryIfDue(now: UInt64) {
        if recovering, now >= recoveryEndsAtMs { recovering = false }
    }
}

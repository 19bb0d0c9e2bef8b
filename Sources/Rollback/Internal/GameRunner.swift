/// The generic part of every session: the game and its saved-state ring. It saves, loads
/// and simulates frames; inputs come from an ``InputSet``.
///
/// Everything here is `@inlinable` so that it is specialised for the caller's game type:
/// saving and loading then copy the game's state directly instead of going through generic
/// value witnesses, which is what keeps the engine's overhead per frame small.
@usableFromInline
struct GameRunner<G: Game> {
    @usableFromInline var game: G
    @usableFromInline var ring: StateRing<G.State>
    /// The next frame to simulate.
    @usableFromInline var currentFrame: Frame = 0
    @usableFromInline var stats = SessionStats()
    @usableFromInline let sparseSaving: Bool
    /// Sparse mode saves at least once per this many frames.
    @usableFromInline let sparseInterval: Int
    /// Whether states are saved at all (a spectator never rolls back).
    @usableFromInline var savingEnabled = true

    /// A runner at frame 0; records frame 0's checksum into `inputs`.
    @usableFromInline
    init(game: G, configuration: SessionConfiguration, inputs: inout InputSet) {
        self.game = game
        ring = StateRing(capacity: configuration.stateRingCapacity, filler: game.saveState())
        sparseSaving = configuration.sparseSaving
        sparseInterval = max(1, configuration.predictionWindow)
        ring.save(self.game.saveState(), frame: 0)
        stats.statesSaved += 1
        if inputs.checksums.isChecksumFrame(0) { inputs.checksums.record(frame: 0, checksum: self.game.checksum()) }
    }

    /// Simulates the current frame (saving its starting state first if asked) and moves on.
    /// `filled`: its input row is filled already (see ``InputSet/fillRows(from:through:)``).
    @inlinable @inline(__always)
    mutating func simulate(save: Bool, inputs: inout InputSet, filled: Bool = false, resimulating: Bool = false) {
        let frame = currentFrame
        if save {
            let slot = ring.claim(frame)
            ring.state(inSlot: slot).pointee = game.saveState()
            stats.statesSaved &+= 1
        }
        if filled {
            inputs.select(frame: frame)
        } else {
            inputs.gather(frame: frame)
        }
        inputs.current.resimulating = resimulating
        game.advanceFrame(inputs.current)
        currentFrame = frame + 1
        if inputs.checksums.due(atReaching: frame + 1) {
            inputs.checksums.record(frame: frame + 1, checksum: game.checksum())
        }
    }

    /// Whether sparse saving keeps the state at the start of `frame`: states that depend only
    /// on known inputs, the newest such one during a re-simulation, and one every
    /// `sparseInterval` frames so rollbacks never reach too far back.
    @inlinable
    func sparseSaves(_ frame: Frame, known: Frame, resimulatingTo end: Frame?) -> Bool {
        if let end { return frame == min(end, known == .max ? end : known + 1) }
        return frame <= known || frame - 1 == known || frame - ring.newestFrame >= sparseInterval
    }

    /// Simulates the current frame for the first time. `filled`: its input row is filled
    /// already (by the rollback just before, with no input added since).
    @inlinable
    mutating func advance(inputs: inout InputSet, filled: Bool = false) {
        let save = savingEnabled
            && (!sparseSaving || sparseSaves(currentFrame, known: inputs.knownFrame, resimulatingTo: nil))
        simulate(save: save, inputs: &inputs, filled: filled)
        stats.framesAdvanced += 1
    }

    /// Restores the newest saved state at or before `target`, re-simulates up to the current
    /// frame, then simulates the current frame for the first time (as ``advance(inputs:filled:)``).
    /// Returns the number of frames re-simulated (0 when `target` is not before the current
    /// frame: nothing to roll back).
    @inlinable
    mutating func rollbackAndAdvance(to target: Frame, inputs: inout InputSet) -> Int {
        let end = currentFrame
        guard target < end else {
            inputs.clearIncorrect()
            advance(inputs: &inputs)
            return 0
        }
        // Dense saving holds the state of every frame back to the confirmed one, so the state
        // at `target` itself is there: one comparison instead of a search.
        let loadFrame: Frame
        if target >= 0 && ring.frames[target & ring.mask] == target {
            loadFrame = target
        } else if let newest = ring.newestSaved(atOrBefore: target) {
            loadFrame = newest
        } else {
            preconditionFailure("rollback to frame \(target): no saved state (ring too small for the confirmation lag)")
        }
        game.loadState(ring.state(inSlot: loadFrame & ring.mask).pointee)
        currentFrame = loadFrame
        let length = end &- loadFrame
        stats.statesLoaded &+= 1
        stats.framesResimulated &+= length
        stats.rollbackHistogram.record(length: length)
        // Every input row of the re-simulation and of the frame after it at once (the ring
        // never reaches back further than the table holds; the check only guards that).
        let filled = length < inputs.rowCount
        if filled {
            inputs.fillRowsClearingIncorrect(from: loadFrame, through: end)
        } else {
            inputs.clearIncorrect()
        }
        if filled && !sparseSaving && savingEnabled {
            resimulateDenseAndAdvance(from: loadFrame, through: end, inputs: &inputs)
            return length
        }
        if sparseSaving { ring.discard(after: loadFrame) }
        let known = inputs.knownFrame
        simulate(save: false, inputs: &inputs, filled: filled, resimulating: true)
        while currentFrame < end {
            let save = !sparseSaving || sparseSaves(currentFrame, known: known, resimulatingTo: end)
            simulate(save: save, inputs: &inputs, filled: filled, resimulating: true)
        }
        advance(inputs: &inputs, filled: filled)
        return length
    }

    /// The common rollback: dense saving, every input row filled. Re-simulates `start ..< end`
    /// and simulates `end` for the first time in one tight loop whose counters (frame, next
    /// checksum frame, ring and table geometry) are locals kept across the game's calls instead
    /// of fields re-read from the runner and the input set after each call. Every frame after
    /// `start` is saved again before anything can read it, so the stale states need no
    /// discarding.
    @inlinable @inline(__always)
    mutating func resimulateDenseAndAdvance(from start: Frame, through end: Frame, inputs: inout InputSet) {
        let mask = ring.mask, frames = ring.frames, states = ring.states, slotStride = ring.slotStride
        let interval = inputs.checksums.interval
        var nextChecksum = inputs.checksums.nextChecksumFrame(after: start)
        var frame = start
        while true {
            inputs.select(frame: frame)
            inputs.current.resimulating = frame != end
            game.advanceFrame(inputs.current)
            frame &+= 1
            if frame == nextChecksum {
                inputs.checksums.record(frame: frame, checksum: game.checksum())
                nextChecksum &+= interval
            }
            if frame > end { break }
            let slot = frame & mask
            frames[slot] = frame
            (states + slot &* slotStride).assumingMemoryBound(to: G.State.self).pointee = game.saveState()
        }
        // The schedule continues from the first checksum frame after the one reached.
        inputs.checksums.nextFrame = nextChecksum
        if end > ring.newestFrame { ring.newestFrame = end }
        stats.statesSaved &+= end &- start
        stats.framesAdvanced &+= 1
        currentFrame = frame
    }

    /// Replaces the state at `frame` (a transferred confirmed state) and re-simulates from it.
    /// The game loads it first, with `load`: a state it refuses (rethrown) changes nothing.
    @inlinable
    mutating func install(_ state: G.State, at frame: Frame, inputs: inout InputSet,
                          load: (inout G, G.State) throws -> Void) rethrows {
        precondition(frame <= currentFrame)
        try load(&game, state)
        ring.discard(after: frame - 1)
        ring.save(state, frame: frame)
        let end = currentFrame
        stats.statesLoaded += 1
        currentFrame = frame
        if inputs.checksums.isChecksumFrame(frame) {
            inputs.checksums.record(frame: frame, checksum: game.checksum())
        }
        inputs.clearIncorrect()
        while currentFrame < end {
            simulate(save: !sparseSaving || currentFrame == end - 1, inputs: &inputs, resimulating: true)
        }
    }

    /// Loads the saved state at exactly `frame` (sync test).
    @inlinable
    mutating func load(frame: Frame) -> Bool {
        guard let slot = ring.slot(of: frame) else { return false }
        game.loadState(ring.state(inSlot: slot).pointee)
        stats.statesLoaded += 1
        currentFrame = frame
        return true
    }

    /// Re-simulates one frame, saving first (sync test).
    @inlinable
    mutating func resimulateOne(inputs: inout InputSet) {
        simulate(save: true, inputs: &inputs, resimulating: true)
        stats.framesResimulated += 1
    }

    /// The oldest saved state rollbacks may still need, given inputs final up to `confirmedFrame`.
    @inlinable
    func oldestNeededState(confirmedFrame: Frame) -> Frame {
        ring.newestSaved(atOrBefore: min(confirmedFrame + 1, currentFrame)) ?? 0
    }
}

/// The heart of every session: the game, every player's input queue and the saved-state
/// ring. It simulates frames, rolls back to the first incorrect frame and re-simulates.
/// Sessions add networking, confirmation and events around it.
final class SyncLayer<G: Game> {
    private(set) var game: G
    var queues: [InputQueue]
    private(set) var ring: StateRing<G.State>
    let playerCount: Int
    let predictor: any InputPredictor
    let sparseSaving: Bool
    /// Sparse mode saves at least once per this many frames.
    let sparseInterval: Int
    /// Whether states are saved at all (a spectator never rolls back).
    var savingEnabled = true
    /// The next frame to simulate.
    private(set) var currentFrame: Frame = 0
    var stats = SessionStats()
    /// Called with (frame, checksum) whenever a checksum frame is reached.
    var checksums: ChecksumHistory?
    private var inputs: [GameInput]
    private var statuses: [InputStatus]

    init(game: G, configuration: SessionConfiguration) {
        self.game = game
        self.playerCount = configuration.playerCount
        self.queues = (0 ..< configuration.playerCount).map { InputQueue(player: $0, history: configuration.inputHistory) }
        self.ring = StateRing(capacity: configuration.stateRingCapacity)
        self.predictor = configuration.prediction
        self.sparseSaving = configuration.sparseSaving
        self.sparseInterval = max(1, configuration.predictionWindow)
        self.inputs = Array(repeating: .zero, count: configuration.playerCount)
        self.statuses = Array(repeating: .confirmed, count: configuration.playerCount)
        if configuration.checksumInterval > 0 {
            checksums = ChecksumHistory(interval: configuration.checksumInterval)
        }
        ring.save(self.game.saveState(), frame: 0)
        stats.statesSaved += 1
        checksums?.record(frame: 0, checksum: self.game.checksum())
    }

    /// The newest frame for which every player's input is known (predictions not needed).
    var knownFrame: Frame {
        var known = Frame.max
        for index in 0 ..< playerCount {
            let frame = queues[index].knownFrame
            if frame < known { known = frame }
        }
        return known
    }

    /// The earliest frame that was simulated with an input that has changed, or nil.
    var firstIncorrectFrame: Frame? {
        var first = Frame.max
        for index in 0 ..< playerCount {
            let frame = queues[index].firstIncorrectFrame
            if frame < first { first = frame }
        }
        return first == .max ? nil : first
    }

    /// The player whose input change caused the earliest incorrect frame.
    var firstIncorrectPlayer: PlayerHandle? {
        var first = Frame.max
        var player: PlayerHandle?
        for index in 0 ..< playerCount where queues[index].firstIncorrectFrame < first {
            first = queues[index].firstIncorrectFrame
            player = index
        }
        return player
    }

    /// Whether the state at the start of `frame` should be saved under the saving policy.
    @inline(__always)
    private func shouldSave(_ frame: Frame, known: Frame, resimulating: Bool, end: Frame) -> Bool {
        guard sparseSaving else { return true }
        if resimulating {
            return frame == min(end, known == .max ? end : known + 1)
        }
        return frame <= known + 1 || frame - ring.newestFrame >= sparseInterval
    }

    /// Simulates the current frame and moves to the next.
    @inline(__always)
    private func simulate(save: Bool) {
        let frame = currentFrame
        if save {
            ring.save(game.saveState(), frame: frame)
            stats.statesSaved += 1
        }
        for player in 0 ..< playerCount {
            let (input, status) = queues[player].simulationInput(frame: frame, predictor: predictor)
            inputs[player] = input
            statuses[player] = status
        }
        game.advanceFrame(FrameInputs(frame: frame, inputs: inputs, statuses: statuses))
        currentFrame = frame + 1
        if let history = checksums, history.isChecksumFrame(frame + 1) {
            checksums!.record(frame: frame + 1, checksum: game.checksum())
        }
    }

    /// Simulates the current frame for the first time.
    func advance() {
        let save = savingEnabled
            && (!sparseSaving || shouldSave(currentFrame, known: knownFrame, resimulating: false, end: currentFrame))
        simulate(save: save)
        stats.framesAdvanced += 1
    }

    /// Restores the newest saved state at or before `target` and re-simulates up to the
    /// current frame. Returns the number of frames re-simulated.
    @discardableResult
    func rollback(to target: Frame) -> Int {
        let end = currentFrame
        guard target < end else {
            for index in 0 ..< playerCount { queues[index].clearIncorrect() }
            return 0
        }
        guard let loadFrame = ring.newestSaved(atOrBefore: target), let state = ring.state(at: loadFrame) else {
            preconditionFailure("rollback to frame \(target): no saved state (ring too small for the confirmation lag)")
        }
        game.loadState(state)
        stats.statesLoaded += 1
        ring.discard(after: loadFrame)
        currentFrame = loadFrame
        for index in 0 ..< playerCount { queues[index].clearIncorrect() }
        let known = sparseSaving ? knownFrame : .max
        if currentFrame < end {
            simulate(save: false)
        }
        while currentFrame < end {
            simulate(save: shouldSave(currentFrame, known: known, resimulating: true, end: end))
        }
        let length = end - loadFrame
        stats.framesResimulated += length
        stats.rollbackHistogram.record(length: length)
        return length
    }

    /// Replaces the state at `frame` (a transferred confirmed state) and re-simulates from it.
    func install(_ state: G.State, at frame: Frame) {
        precondition(frame <= currentFrame)
        ring.discard(after: frame - 1)
        ring.save(state, frame: frame)
        let end = currentFrame
        game.loadState(state)
        stats.statesLoaded += 1
        currentFrame = frame
        if let history = checksums, history.isChecksumFrame(frame) {
            checksums!.record(frame: frame, checksum: game.checksum())
        }
        for index in 0 ..< playerCount { queues[index].clearIncorrect() }
        while currentFrame < end { simulate(save: !sparseSaving || currentFrame == end - 1) }
    }

    /// Loads the saved state at exactly `frame` (sync test).
    func load(frame: Frame) -> Bool {
        guard let state = ring.state(at: frame) else { return false }
        game.loadState(state)
        stats.statesLoaded += 1
        currentFrame = frame
        return true
    }

    /// Re-simulates one frame, saving first (sync test).
    func resimulateOne() {
        simulate(save: true)
        stats.framesResimulated += 1
    }

    /// The frame of the oldest state that must be kept for rollbacks given that inputs up to
    /// `confirmedFrame` are final.
    func oldestNeededState(confirmedFrame: Frame) -> Frame {
        ring.newestSaved(atOrBefore: min(confirmedFrame + 1, currentFrame)) ?? 0
    }
}

/// What a session's non-generic core shares with the generic ``GameRunner``: every
/// player's input queue, the buffers a frame's inputs are gathered into, and the checksums
/// recorded as the simulation reaches checksum frames. Not generic, so it is compiled once
/// and fully optimised.
@usableFromInline
struct InputSet {
    @usableFromInline var queues: [InputQueue]
    /// The configured predictor, or nil for the default repeat-last one (called directly).
    let predictor: (any InputPredictor)?
    /// Whether ``predictor`` is set (tested first: binding the optional existential costs more).
    @usableFromInline let customPrediction: Bool
    /// Checksums of checksum frames, newest simulation wins.
    @usableFromInline var checksums: ChecksumHistory
    @usableFromInline let playerCount: Int
    /// The inputs of the frame last gathered by ``gather(frame:)``, lent to the game.
    @usableFromInline var current: FrameInputs

    init(configuration: SessionConfiguration) {
        playerCount = configuration.playerCount
        let custom = configuration.prediction is RepeatLastPrediction ? nil : configuration.prediction
        predictor = custom
        customPrediction = custom != nil
        queues = (0 ..< configuration.playerCount).map {
            InputQueue(player: $0, history: configuration.inputHistory, recordsGuesses: custom != nil)
        }
        current = FrameInputs(frame: 0, inputs: Array(repeating: .zero, count: configuration.playerCount),
                              statuses: Array(repeating: .confirmed, count: configuration.playerCount))
        checksums = ChecksumHistory(interval: configuration.checksumInterval)
    }

    /// Gathers every player's input (known or predicted) for simulating `frame`. Inlined
    /// into the caller's simulation loop: a call per simulated frame would cost more than the
    /// reads themselves.
    @inlinable @inline(__always)
    mutating func gather(frame: Frame) {
        current.storedFrame = frame
        if customPrediction {
            gatherRecordingGuesses(frame: frame)
            return
        }
        // The common case: reads only, one write per player into one buffer. The queues are
        // reached through a mutable (exclusive) access only so that reading one does not copy
        // it (a retain and release of its slots per player and frame).
        queues.withUnsafeMutableBufferPointer { queues in
            current.entries.withUnsafeMutableBufferPointer { entries in
                for player in 0 ..< entries.count {
                    let (input, status) = queues[player].input(for: frame)
                    entries[player] = FrameInputs.Entry(input: input, status: status)
                }
            }
        }
    }

    /// ``gather(frame:)`` with a custom predictor, whose guesses are recorded.
    @usableFromInline
    mutating func gatherRecordingGuesses(frame: Frame) {
        current.storedFrame = frame
        for player in 0 ..< playerCount {
            var (input, status) = queues[player].input(for: frame)
            if status == .predicted { input = queues[player].recordGuess(frame: frame, predictor: predictor!) }
            current.entries[player] = FrameInputs.Entry(input: input, status: status)
        }
    }

    /// The newest frame for which every player's input is known (predictions not needed).
    @usableFromInline
    var knownFrame: Frame {
        var known = Frame.max
        for queue in queues where queue.knownFrame < known { known = queue.knownFrame }
        return known
    }

    /// The earliest frame simulated with an input that has changed since, or nil.
    @usableFromInline
    var firstIncorrectFrame: Frame? {
        var first = Frame.max
        for queue in queues where queue.firstIncorrectFrame < first { first = queue.firstIncorrectFrame }
        return first == .max ? nil : first
    }

    /// The player whose changed input made the earliest frame incorrect.
    @usableFromInline
    var firstIncorrectPlayer: PlayerHandle? {
        var first = Frame.max
        var player: PlayerHandle?
        for queue in queues where queue.firstIncorrectFrame < first {
            first = queue.firstIncorrectFrame
            player = queue.player
        }
        return player
    }

    /// Forgets every incorrect-frame mark (after a rollback re-simulated them).
    @usableFromInline
    mutating func clearIncorrect() {
        for player in 0 ..< playerCount { queues[player].clearIncorrect() }
    }
}

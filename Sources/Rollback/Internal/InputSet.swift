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
    /// The input table: one row of `playerCount` entries per frame, row `frame & rowMask`.
    /// `current` holds it and lends the game the row of the frame being simulated.
    @usableFromInline var current: FrameInputs
    @usableFromInline let rowMask: Int

    init(configuration: SessionConfiguration) {
        playerCount = configuration.playerCount
        let custom = configuration.prediction is RepeatLastPrediction ? nil : configuration.prediction
        predictor = custom
        customPrediction = custom != nil
        queues = (0 ..< configuration.playerCount).map {
            InputQueue(player: $0, history: configuration.inputHistory, recordsGuesses: custom != nil)
        }
        // Enough rows for the longest rollback: back to the oldest state the ring holds.
        var rows = 1
        while rows < configuration.stateRingCapacity + 1 { rows <<= 1 }
        rowMask = rows - 1
        current = FrameInputs(table: Array(repeating: FrameInputs.Entry(input: .zero, status: .confirmed),
                                           count: rows * configuration.playerCount),
                              playerCount: configuration.playerCount)
        checksums = ChecksumHistory(interval: configuration.checksumInterval, matchFrameOffset: configuration.matchFrameOffset)
    }

    /// The number of frames ``fillRows(from:through:)`` can fill at once.
    @inlinable var rowCount: Int { rowMask + 1 }

    /// Gathers every player's input (known or predicted) for simulating `frame`.
    @inlinable @inline(__always)
    mutating func gather(frame: Frame) {
        fillRows(from: frame, through: frame)
        select(frame: frame)
    }

    /// Lends the game the row of `frame`, filled by ``fillRows(from:through:)``.
    @inlinable @inline(__always)
    mutating func select(frame: Frame) {
        current.storedFrame = frame
        current.base = (frame & rowMask) &* playerCount
    }

    /// Fills the rows of frames `first ... last` (at most ``rowCount`` frames) with every
    /// player's input, known or predicted. Inputs do not change while frames are simulated,
    /// so a re-simulation fills all its rows at once, player by player, instead of gathering
    /// each frame's inputs from every queue in turn.
    @usableFromInline
    mutating func fillRows(from first: Frame, through last: Frame) {
        fillRows(from: first, through: last, clearingIncorrect: false)
    }

    /// ``fillRows(from:through:)`` for a rollback, which also forgets every incorrect-frame
    /// mark (``clearIncorrect()``) in the same pass over the queues.
    @usableFromInline
    mutating func fillRowsClearingIncorrect(from first: Frame, through last: Frame) {
        fillRows(from: first, through: last, clearingIncorrect: true)
    }

    @inline(__always)
    private mutating func fillRows(from first: Frame, through last: Frame, clearingIncorrect: Bool) {
        precondition(first >= 0 && last >= first && last - first < rowCount, "input rows out of range")
        let players = playerCount, rowMask = self.rowMask
        if customPrediction {
            if clearingIncorrect { clearIncorrect() }
            for frame in first ... last { fillRowRecordingGuesses(frame: frame) }
            return
        }
        // The queues are reached through a mutable (exclusive) access only so that reading
        // one does not copy it (a retain and release of its slots).
        queues.withUnsafeMutableBufferPointer { queues in
            current.entries.withUnsafeMutableBufferPointer { table in
                for player in 0 ..< players {
                    if clearingIncorrect { queues[player].clearIncorrect() }
                    queues[player].fill(table, column: player, stride: players, rowMask: rowMask,
                                        from: first, through: last)
                }
            }
        }
    }

    /// One row with a custom predictor, whose guesses are recorded.
    private mutating func fillRowRecordingGuesses(frame: Frame) {
        let row = (frame & rowMask) * playerCount
        for player in 0 ..< playerCount {
            var (input, status) = queues[player].input(for: frame)
            if status == .predicted { input = queues[player].recordGuess(frame: frame, predictor: predictor!) }
            current.entries[row + player] = FrameInputs.Entry(input: input, status: status)
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

/// One player's inputs over time: what is known and where it came from, so that a late or
/// replaced input can name the first frame that must be re-simulated.
///
/// Every frame before the session's current frame has been simulated. What its last
/// simulation used follows from what is known now: a known frame used its value (had it
/// been simulated on a different guess, the arrival of the value already marked the frame
/// incorrect, and everything from that frame on is re-simulated anyway); a frame still
/// unknown used the prediction, which for repeat-last is the input at ``lastKnownFrame``.
/// So simulating a frame only reads the queue. Custom predictors record their guesses.
///
/// Storage is a power-of-two ring of fixed slots; nothing allocates after `init`.
@usableFromInline
struct InputQueue {
    /// Where a known input came from.
    @usableFromInline
    enum Origin: UInt8 {
        case none, local, peer, authoritative, substituted, disconnected
    }

    @usableFromInline
    struct Slot {
        @usableFromInline var frame: Frame = nullFrame
        @usableFromInline var value: GameInput = .zero
        /// A custom predictor's guess the last simulation of `frame` used (repeat-last guesses
        /// need no record: they are the input at ``lastKnownFrame``).
        @usableFromInline var guess: GameInput = .zero
        @usableFromInline var origin: Origin = .none

        @usableFromInline
        init(frame: Frame = nullFrame) { self.frame = frame }
    }

    let player: PlayerHandle
    @usableFromInline private(set) var slots: [Slot]
    @usableFromInline let mask: Int

    /// The newest frame up to which every input is known (any origin).
    @usableFromInline private(set) var lastKnownFrame: Frame = nullFrame
    /// The newest frame up to which every input came from the relay.
    private(set) var lastAuthoritativeFrame: Frame = nullFrame
    /// The earliest frame simulated with an input that has since changed; `.max` if none.
    private(set) var firstIncorrectFrame: Frame = .max
    /// Inputs from this frame on are "disconnected"; `.max` while connected.
    @usableFromInline private(set) var disconnectFrame: Frame = .max
    /// Whether ``disconnectFrame`` can no longer move.
    private(set) var disconnectIsFinal = false
    /// Predictions that turned out wrong.
    private(set) var predictionMisses = 0

    /// Whether a custom predictor's guesses are recorded per frame.
    let recordsGuesses: Bool

    init(player: PlayerHandle, history: Int, recordsGuesses: Bool) {
        var capacity = 1
        while capacity < history { capacity <<= 1 }
        self.player = player
        self.recordsGuesses = recordsGuesses
        self.slots = Array(repeating: Slot(), count: capacity)
        self.mask = capacity - 1
    }

    var capacity: Int { mask + 1 }

    /// The newest frame up to which inputs are known for simulation purposes (a disconnected
    /// player's future is known: zeros).
    var knownFrame: Frame {
        lastKnownFrame >= disconnectFrame - 1 ? .max : lastKnownFrame
    }

    /// The newest frame whose input is final: every input up to it will never change.
    /// Between peers that is the last known frame; under a relay, the last authoritative one.
    func confirmedFrame(authoritative: Bool) -> Frame {
        let base = authoritative ? lastAuthoritativeFrame : lastKnownFrame
        if disconnectFrame != .max && base >= disconnectFrame - 1 {
            return disconnectIsFinal ? .max : disconnectFrame - 1
        }
        return base
    }

    /// The known input at `frame`, if any, with its origin.
    func knownInput(at frame: Frame) -> (GameInput, Origin)? {
        if frame >= disconnectFrame { return (.zero, .disconnected) }
        guard frame >= 0, frame <= lastKnownFrame else { return nil }
        let slot = slots[frame & mask]
        guard slot.frame == frame else { return nil }
        return (slot.value, slot.origin)
    }

    /// The input at ``lastKnownFrame`` (zero before any): the repeat-last prediction.
    @inlinable @inline(__always)
    var lastKnownInput: GameInput {
        lastKnownFrame >= 0 ? slots[lastKnownFrame & mask].value : GameInput(low: 0, high: 0)
    }

    /// The input to simulate `frame` with: known, disconnected, or the repeat-last prediction
    /// (``InputStatus/predicted``; a custom predictor then replaces it via ``recordGuess(frame:predictor:)``).
    @inlinable @inline(__always)
    func input(for frame: Frame) -> (GameInput, InputStatus) {
        // `GameInput(low: 0, high: 0)`, not `.zero`: a static stored property costs a lazy
        // initialisation check per read in inlined code.
        if frame >= disconnectFrame { return (GameInput(low: 0, high: 0), .disconnected) }
        if frame <= lastKnownFrame {
            let slot = slots[frame & mask]
            switch slot.origin {
            case .substituted: return (slot.value, .substituted)
            case .disconnected: return (GameInput(low: 0, high: 0), .disconnected)
            default: return (slot.value, .confirmed)
            }
        }
        return (lastKnownInput, .predicted)
    }

    /// Writes the input to simulate each of the frames `first ... last` with (as
    /// ``input(for:)`` gives it) into column `column` of an input table whose rows are
    /// `stride` entries apart, row `frame & rowMask`.
    @inline(__always)
    func fill(_ table: UnsafeMutableBufferPointer<FrameInputs.Entry>, column: Int, stride: Int, rowMask: Int,
              from first: Frame, through last: Frame) {
        var frame = first
        let knownLast = min(last, lastKnownFrame, disconnectFrame - 1)
        while frame <= knownLast {
            let slot = slots[frame & mask]
            let entry: FrameInputs.Entry
            switch slot.origin {
            case .substituted: entry = FrameInputs.Entry(input: slot.value, status: .substituted)
            case .disconnected: entry = FrameInputs.Entry(input: GameInput(low: 0, high: 0), status: .disconnected)
            default: entry = FrameInputs.Entry(input: slot.value, status: .confirmed)
            }
            table[(frame & rowMask) &* stride &+ column] = entry
            frame += 1
        }
        let predictedLast = min(last, disconnectFrame - 1)
        if frame <= predictedLast {
            let predicted = FrameInputs.Entry(input: lastKnownInput, status: .predicted)
            while frame <= predictedLast {
                table[(frame & rowMask) &* stride &+ column] = predicted
                frame += 1
            }
        }
        let disconnected = FrameInputs.Entry(input: GameInput(low: 0, high: 0), status: .disconnected)
        while frame <= last {
            table[(frame & rowMask) &* stride &+ column] = disconnected
            frame += 1
        }
    }

    /// Asks a custom predictor for `frame` (not known yet) and records the guess.
    mutating func recordGuess(frame: Frame, predictor: any InputPredictor) -> GameInput {
        let guess = predictor.predict(PredictionContext(
            player: player, frame: frame, lastKnownFrame: lastKnownFrame, lastKnownInput: lastKnownInput))
        let index = frame & mask
        if slots[index].frame != frame { slots[index] = Slot(frame: frame) }
        slots[index].guess = guess
        return guess
    }

    /// What the last simulation of `frame` (an already simulated frame) used.
    @inline(__always)
    private func usedInput(_ frame: Frame) -> GameInput {
        if frame >= disconnectFrame { return .zero }
        let slot = slots[frame & mask]
        if frame <= lastKnownFrame { return slot.origin == .disconnected ? .zero : slot.value }
        if recordsGuesses && slot.frame == frame { return slot.guess }
        return lastKnownInput
    }

    @inline(__always)
    private mutating func store(_ frame: Frame, _ value: GameInput, _ origin: Origin, currentFrame: Frame) {
        if frame < currentFrame && usedInput(frame) != value {
            if frame < firstIncorrectFrame { firstIncorrectFrame = frame }
            if frame > lastKnownFrame { predictionMisses += 1 }
        }
        let index = frame & mask
        if slots[index].frame != frame { slots[index] = Slot(frame: frame) }
        slots[index].value = value
        slots[index].origin = origin
    }

    /// Adds a local input. Returns false when the relay already decided that frame.
    @discardableResult
    mutating func addLocal(frame: Frame, input: GameInput, currentFrame: Frame) -> Bool {
        if frame <= lastKnownFrame { return false }
        precondition(frame == lastKnownFrame + 1, "local inputs must be consecutive")
        store(frame, input, .local, currentFrame: currentFrame)
        lastKnownFrame = frame
        return true
    }

    /// Adds a peer's input. Accepted only if it continues the known inputs without a gap.
    @discardableResult
    mutating func addPeer(frame: Frame, input: GameInput, currentFrame: Frame) -> Bool {
        guard frame < disconnectFrame, frame == lastKnownFrame + 1 else { return false }
        store(frame, input, .peer, currentFrame: currentFrame)
        lastKnownFrame = frame
        return true
    }

    /// Adds the relay's input: replaces whatever was known or predicted for that frame.
    @discardableResult
    mutating func addAuthoritative(frame: Frame, input: GameInput, origin: Origin, currentFrame: Frame) -> Bool {
        guard frame == lastAuthoritativeFrame + 1 else { return false }
        lastAuthoritativeFrame = frame
        if frame >= disconnectFrame { return true }
        store(frame, origin == .disconnected ? .zero : input, origin, currentFrame: currentFrame)
        if lastKnownFrame < frame { lastKnownFrame = frame }
        return true
    }

    /// Makes inputs "disconnected" from `frame` on (it can only move earlier). Frames before
    /// `currentFrame` simulated with anything else become incorrect.
    mutating func disconnect(from frame: Frame, final: Bool, currentFrame: Frame) {
        let newFrame = max(frame, 0)
        if newFrame < disconnectFrame {
            var check = newFrame
            let end = min(disconnectFrame, currentFrame)
            while check < end {
                if usedInput(check) != .zero {
                    if check < firstIncorrectFrame { firstIncorrectFrame = check }
                    break
                }
                check += 1
            }
            disconnectFrame = newFrame
        }
        if final { disconnectIsFinal = true }
    }

    /// Forgets the incorrect-frame mark after a rollback re-simulated those frames.
    mutating func clearIncorrect() { firstIncorrectFrame = .max }
}

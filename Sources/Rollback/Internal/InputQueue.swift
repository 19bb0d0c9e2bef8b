/// One player's inputs over time: what is known, where it came from, and what the last
/// simulation of each frame used, so that a late or replaced input can name the first frame
/// that must be re-simulated.
///
/// Storage is a power-of-two ring of fixed slots; nothing allocates after `init`.
struct InputQueue {
    /// Where a known input came from.
    enum Origin: UInt8 {
        case none, local, peer, authoritative, substituted, disconnected
    }

    struct Slot {
        var frame: Frame = nullFrame
        var value: GameInput = .zero
        /// The input the last simulation of `frame` used (meaningful when `simulated`).
        var used: GameInput = .zero
        var origin: Origin = .none
        var simulated = false
        var usedPrediction = false
    }

    let player: PlayerHandle
    private var slots: [Slot]
    private let mask: Int

    /// The newest frame up to which every input is known (any origin).
    private(set) var lastKnownFrame: Frame = nullFrame
    /// The newest frame up to which every input came from the relay.
    private(set) var lastAuthoritativeFrame: Frame = nullFrame
    /// The earliest frame simulated with an input that has since changed; `.max` if none.
    private(set) var firstIncorrectFrame: Frame = .max
    /// Inputs from this frame on are "disconnected"; `.max` while connected.
    private(set) var disconnectFrame: Frame = .max
    /// Whether ``disconnectFrame`` can no longer move.
    private(set) var disconnectIsFinal = false
    /// Predictions that turned out wrong.
    private(set) var predictionMisses = 0

    init(player: PlayerHandle, history: Int) {
        var capacity = 1
        while capacity < history { capacity <<= 1 }
        self.player = player
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

    /// The input (known or predicted) to simulate `frame` with; records what was used.
    @inline(__always)
    mutating func simulationInput(frame: Frame, predictor: any InputPredictor) -> (GameInput, InputStatus) {
        let index = frame & mask
        if frame >= disconnectFrame {
            if slots[index].frame != frame { slots[index] = Slot(frame: frame) }
            slots[index].used = .zero
            slots[index].simulated = true
            slots[index].usedPrediction = false
            return (.zero, .disconnected)
        }
        if frame <= lastKnownFrame {
            let value = slots[index].value
            slots[index].used = value
            slots[index].simulated = true
            slots[index].usedPrediction = false
            switch slots[index].origin {
            case .substituted: return (value, .substituted)
            case .disconnected: return (.zero, .disconnected)
            default: return (value, .confirmed)
            }
        }
        var lastInput = GameInput.zero
        if lastKnownFrame >= 0 { lastInput = slots[lastKnownFrame & mask].value }
        let guess = predictor.predict(PredictionContext(
            player: player, frame: frame, lastKnownFrame: lastKnownFrame, lastKnownInput: lastInput))
        if slots[index].frame != frame { slots[index] = Slot(frame: frame) }
        slots[index].used = guess
        slots[index].simulated = true
        slots[index].usedPrediction = true
        return (guess, .predicted)
    }

    @inline(__always)
    private mutating func store(_ frame: Frame, _ value: GameInput, _ origin: Origin) {
        let index = frame & mask
        if slots[index].frame != frame { slots[index] = Slot(frame: frame) }
        if slots[index].simulated && slots[index].used != value {
            if frame < firstIncorrectFrame { firstIncorrectFrame = frame }
            if slots[index].usedPrediction {
                predictionMisses += 1
                slots[index].usedPrediction = false
            }
        }
        slots[index].value = value
        slots[index].origin = origin
    }

    /// Adds a local input. Returns false when the relay already decided that frame.
    @discardableResult
    mutating func addLocal(frame: Frame, input: GameInput) -> Bool {
        if frame <= lastKnownFrame { return false }
        precondition(frame == lastKnownFrame + 1, "local inputs must be consecutive")
        store(frame, input, .local)
        lastKnownFrame = frame
        return true
    }

    /// Adds a peer's input. Accepted only if it continues the known inputs without a gap.
    @discardableResult
    mutating func addPeer(frame: Frame, input: GameInput) -> Bool {
        guard frame < disconnectFrame, frame == lastKnownFrame + 1 else { return false }
        store(frame, input, .peer)
        lastKnownFrame = frame
        return true
    }

    /// Adds the relay's input: replaces whatever was known or predicted for that frame.
    @discardableResult
    mutating func addAuthoritative(frame: Frame, input: GameInput, origin: Origin) -> Bool {
        guard frame == lastAuthoritativeFrame + 1 else { return false }
        lastAuthoritativeFrame = frame
        if frame >= disconnectFrame { return true }
        store(frame, origin == .disconnected ? .zero : input, origin)
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
                let slot = slots[check & mask]
                if slot.frame == check && slot.simulated && slot.used != .zero {
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

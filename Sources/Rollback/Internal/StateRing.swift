/// Saved game states by frame, in a fixed ring. Slot `frame % capacity` holds the state at
/// the start of `frame`.
struct StateRing<State> {
    private var states: [State?]
    private var frames: [Frame]
    let capacity: Int
    /// The newest frame saved (``nullFrame`` if none).
    private(set) var newestFrame: Frame = nullFrame

    init(capacity: Int) {
        self.capacity = capacity
        self.states = Array(repeating: nil, count: capacity)
        self.frames = Array(repeating: nullFrame, count: capacity)
    }

    @inline(__always)
    mutating func save(_ state: State, frame: Frame) {
        let index = frame % capacity
        states[index] = state
        frames[index] = frame
        if frame > newestFrame { newestFrame = frame }
    }

    func contains(_ frame: Frame) -> Bool { frame >= 0 && frames[frame % capacity] == frame }

    func state(at frame: Frame) -> State? {
        guard contains(frame) else { return nil }
        return states[frame % capacity]
    }

    /// The newest saved frame at or before `frame`.
    func newestSaved(atOrBefore frame: Frame) -> Frame? {
        var candidate = min(frame, newestFrame)
        let oldest = max(0, candidate - capacity + 1)
        while candidate >= oldest {
            if frames[candidate % capacity] == candidate { return candidate }
            candidate -= 1
        }
        return nil
    }

    /// Drops states newer than `frame` (they were computed from inputs that changed).
    mutating func discard(after frame: Frame) {
        guard newestFrame > frame else { return }
        var candidate = newestFrame
        let oldest = max(frame + 1, newestFrame - capacity + 1)
        while candidate >= oldest {
            let index = candidate % capacity
            if frames[index] == candidate {
                frames[index] = nullFrame
                states[index] = nil
            }
            candidate -= 1
        }
        newestFrame = newestSaved(atOrBefore: frame) ?? nullFrame
    }
}

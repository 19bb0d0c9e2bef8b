/// Saved game states by frame, in a fixed ring. Slot `frame & mask` holds the state at the
/// start of `frame`; the slot count is the requested capacity rounded up to a power of two.
@usableFromInline
struct StateRing<State> {
    /// Every slot holds some state; `frames` says which frame's (``nullFrame``: none).
    @usableFromInline var states: [State]
    @usableFromInline var frames: [Frame]
    /// The number of frames the ring is guaranteed to hold (as configured).
    @usableFromInline let capacity: Int
    @usableFromInline let mask: Int
    /// The newest frame saved (``nullFrame`` if none).
    @usableFromInline var newestFrame: Frame = nullFrame

    /// A ring of `capacity` slots, each filled with `filler` until saved over.
    @usableFromInline
    init(capacity: Int, filler: State) {
        var slots = 1
        while slots < capacity { slots <<= 1 }
        self.capacity = capacity
        self.mask = slots - 1
        self.states = Array(repeating: filler, count: slots)
        self.frames = Array(repeating: nullFrame, count: slots)
    }

    @inlinable @inline(__always)
    mutating func save(_ state: State, frame: Frame) {
        states[claim(frame)] = state
    }

    /// Marks `frame` as saved and returns its slot, for the caller to store the state in
    /// place (`states[slot] = game.saveState()` copies the state once, not twice).
    @inlinable @inline(__always)
    mutating func claim(_ frame: Frame) -> Int {
        let index = frame & mask
        frames[index] = frame
        if frame > newestFrame { newestFrame = frame }
        return index
    }

    /// The slot holding `frame`, if saved.
    @inlinable @inline(__always)
    func slot(of frame: Frame) -> Int? {
        guard frame >= 0 else { return nil }
        let index = frame & mask
        return frames[index] == frame ? index : nil
    }

    @inlinable
    func contains(_ frame: Frame) -> Bool { frame >= 0 && frames[frame & mask] == frame }

    @inlinable
    func state(at frame: Frame) -> State? {
        guard contains(frame) else { return nil }
        return states[frame & mask]
    }

    /// The newest saved frame at or before `frame`.
    @inlinable
    func newestSaved(atOrBefore frame: Frame) -> Frame? {
        var candidate = min(frame, newestFrame)
        let oldest = max(0, candidate - capacity + 1)
        while candidate >= oldest {
            if frames[candidate & mask] == candidate { return candidate }
            candidate -= 1
        }
        return nil
    }

    /// Drops states newer than `frame` (they were computed from inputs that changed).
    @inlinable
    mutating func discard(after frame: Frame) {
        guard newestFrame > frame else { return }
        var candidate = newestFrame
        let oldest = max(frame + 1, newestFrame - capacity + 1)
        while candidate >= oldest {
            let index = candidate & mask
            if frames[index] == candidate { frames[index] = nullFrame }
            candidate -= 1
        }
        newestFrame = newestSaved(atOrBefore: frame) ?? nullFrame
    }
}

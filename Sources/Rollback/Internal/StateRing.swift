/// Saved game states by frame, in a fixed ring. Slot `frame & mask` holds the state at the
/// start of `frame`; the slot count is the requested capacity rounded up to a power of two.
///
/// The slots live in memory allocated once (``StateRingStorage``) and are reached through
/// pointers held in `let`s: saving writes the game's state straight into its slot, with no
/// copy-on-write uniqueness check and no temporary copy of the state (an array slot costs
/// both on every save). A ring belongs to one runner; copies of it share the slots.
@usableFromInline
struct StateRing<State> {
    @usableFromInline let storage: StateRingStorage<State>
    /// Every slot holds some state; `frames` says which frame's (``nullFrame``: none).
    @usableFromInline let states: UnsafeMutableRawPointer
    /// Bytes from one slot to the next: the state's stride rounded up to whole cache lines.
    @usableFromInline let slotStride: Int
    @usableFromInline let frames: UnsafeMutablePointer<Frame>
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
        storage = StateRingStorage(count: slots, filler: filler)
        states = storage.states
        slotStride = storage.slotStride
        frames = storage.frames
    }

    /// The state in `slot`.
    @inlinable @inline(__always)
    func state(inSlot slot: Int) -> UnsafeMutablePointer<State> {
        (states + slot &* slotStride).assumingMemoryBound(to: State.self)
    }

    @inlinable @inline(__always)
    mutating func save(_ state: State, frame: Frame) {
        self.state(inSlot: claim(frame)).pointee = state
    }

    /// Marks `frame` as saved and returns its slot, for the caller to store the state in
    /// place (`states[slot] = game.saveState()`).
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
        return state(inSlot: frame & mask).pointee
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

/// The memory of a ``StateRing``: `count` states and their frame numbers, allocated once and
/// freed with the ring.
@usableFromInline
final class StateRingStorage<State> {
    @usableFromInline let states: UnsafeMutableRawPointer
    @usableFromInline let slotStride: Int
    @usableFromInline let frames: UnsafeMutablePointer<Frame>
    let count: Int

    init(count: Int, filler: State) {
        self.count = count
        let line = 64
        slotStride = (MemoryLayout<State>.stride + line - 1) / line * line
        states = .allocate(byteCount: slotStride * count, alignment: max(line, MemoryLayout<State>.alignment))
        for slot in 0 ..< count {
            (states + slot * slotStride).bindMemory(to: State.self, capacity: 1).initialize(to: filler)
        }
        frames = .allocate(capacity: count)
        frames.initialize(repeating: nullFrame, count: count)
    }

    deinit {
        for slot in 0 ..< count {
            (states + slot * slotStride).assumingMemoryBound(to: State.self).deinitialize(count: 1)
        }
        states.deallocate()
        frames.deallocate()
    }
}

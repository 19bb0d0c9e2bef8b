import NetplayWire

/// The relay's record of one session's inputs: for every slot and frame, the final input and
/// how it came to be (received, substituted, disconnected, empty).
///
/// Storage is a power-of-two ring of frames, frame-major (`[frame][slot][inputSize]`), so the
/// inputs of a run of frames for one slot are `inputSize` bytes apart and a whole frame's row is
/// contiguous (the replay record layout). Nothing allocates after `init`.
///
/// Every slot fills its frames in order: frames `0 ..< stored(slot)` hold a final input. A frame
/// is *confirmed* once every slot holds it; confirmed inputs never change.
///
/// A class: the session mutates it in place on every input, and reads must not copy it. Its
/// storage is three buffers allocated once and freed in `deinit` (not arrays: every array write
/// from a class method paid a uniqueness check, an exclusivity check and a retain of the buffer
/// on the relay's per-input path). Every index is derived from a slot below `slotCount` and a
/// frame masked into the ring, so they stay in bounds; the relay only calls it on its reactor
/// thread.
final class InputTimeline {
    /// Player slots (0-based here; 1-based on the wire).
    let slotCount: Int
    /// Bytes per input.
    let inputSize: Int
    /// Frames held.
    let capacity: Int
    private let mask: Int
    /// `capacity * slotCount * inputSize` input bytes, frame-major.
    private let bytes: UnsafeMutablePointer<UInt8>
    /// `capacity * slotCount` statuses (`InputStatus` raw values).
    private let statuses: UnsafeMutablePointer<UInt8>
    /// `slotCount` cursors: frames `0 ..< storedFrames[slot]` hold a final input.
    private let storedFrames: UnsafeMutablePointer<Int>
    /// Frames `0 ..< confirmed` are final for every slot. Unchecked exclusivity: read and written
    /// only on the reactor thread, never across a call that could touch it.
    @exclusivity(unchecked) private(set) var confirmed: Int
    /// The first frame this timeline ever held (0, or later for a session rebuilt after a restart).
    private(set) var origin: Int

    /// A timeline holding `capacity` frames (rounded up to a power of two) from `origin` on.
    init(slotCount: Int, inputSize: Int, capacity: Int, origin: Int = 0) {
        var size = 64
        while size < capacity { size <<= 1 }
        self.slotCount = slotCount
        self.inputSize = inputSize
        self.capacity = size
        mask = size - 1
        bytes = .allocate(capacity: max(1, size * slotCount * inputSize))
        bytes.initialize(repeating: 0, count: max(1, size * slotCount * inputSize))
        statuses = .allocate(capacity: max(1, size * slotCount))
        statuses.initialize(repeating: 0, count: max(1, size * slotCount))
        storedFrames = .allocate(capacity: max(1, slotCount))
        storedFrames.initialize(repeating: origin, count: max(1, slotCount))
        confirmed = origin
        self.origin = origin
    }

    deinit {
        bytes.deallocate()
        statuses.deallocate()
        storedFrames.deallocate()
    }

    /// Frames `0 ..< stored(slot)` of `slot` hold a final input.
    @inline(__always)
    func stored(_ slot: Int) -> Int { storedFrames[slot] }

    /// The newest frame any slot holds, plus one.
    var newest: Int {
        var high = origin
        for slot in 0 ..< slotCount where storedFrames[slot] > high { high = storedFrames[slot] }
        return high
    }

    /// The oldest frame still held (older ones were overwritten by the ring).
    var oldest: Int { max(origin, newest - capacity) }

    /// Whether `frame` is still held for reading.
    func holds(_ frame: Int) -> Bool { frame >= oldest && frame < newest }

    @inline(__always)
    private func offset(_ frame: Int, _ slot: Int) -> Int { ((frame & mask) * slotCount + slot) * inputSize }

    /// Appends `slot`'s input for frame `stored(slot)` from `source` (exactly `inputSize` bytes).
    @inline(__always)
    func append(slot: Int, from source: UnsafeRawBufferPointer, status: NetplayWire.InputStatus) {
        let frame = storedFrames[slot]
        precondition(source.count >= inputSize)
        if let base = source.baseAddress { (bytes + offset(frame, slot)).update(from: base.assumingMemoryBound(to: UInt8.self), count: inputSize) }
        statuses[(frame & mask) * slotCount + slot] = UInt8(truncatingIfNeeded: status.rawValue)
        storedFrames[slot] = frame + 1
    }

    /// Appends a zero input (disconnected or empty slot).
    @inline(__always)
    func appendZero(slot: Int, status: NetplayWire.InputStatus) {
        let frame = storedFrames[slot]
        let start = offset(frame, slot)
        for index in 0 ..< inputSize { bytes[start + index] = 0 }
        statuses[(frame & mask) * slotCount + slot] = UInt8(truncatingIfNeeded: status.rawValue)
        storedFrames[slot] = frame + 1
    }

    /// Appends a repeat of the slot's previous final input (zero before any), marked substituted.
    func appendSubstitute(slot: Int) {
        let frame = storedFrames[slot]
        let start = offset(frame, slot)
        if frame > origin {
            let previous = offset(frame - 1, slot)
            let previousStatus = statuses[((frame - 1) & mask) * slotCount + slot]
            let zero = previousStatus == UInt8(NetplayWire.InputStatus.disconnected.rawValue)
                || previousStatus == UInt8(NetplayWire.InputStatus.empty.rawValue)
            for index in 0 ..< inputSize { bytes[start + index] = zero ? 0 : bytes[previous + index] }
        } else {
            for index in 0 ..< inputSize { bytes[start + index] = 0 }
        }
        statuses[(frame & mask) * slotCount + slot] = UInt8(truncatingIfNeeded: NetplayWire.InputStatus.substituted.rawValue)
        storedFrames[slot] = frame + 1
    }

    /// Moves a slot's cursor forward without data (a rebuilt session adopting a late joiner's
    /// starting frame); the frames skipped read as zero inputs with status `empty`.
    func skip(slot: Int, to frame: Int) {
        while storedFrames[slot] < frame { appendZero(slot: slot, status: .empty) }
    }

    /// Recomputes the confirmed frame; returns whether it moved.
    @discardableResult
    func updateConfirmed() -> Bool {
        var low = Int.max
        for slot in 0 ..< slotCount where storedFrames[slot] < low { low = storedFrames[slot] }
        guard low > confirmed else { return false }
        confirmed = low
        return true
    }

    /// The status of `slot` at `frame` (which must be held).
    @inline(__always)
    func status(slot: Int, frame: Int) -> NetplayWire.InputStatus {
        NetplayWire.InputStatus(rawValue: Int32(statuses[(frame & mask) * slotCount + slot])) ?? .received
    }

    /// The input bytes of `slot` for frames `from ..< to` (all held).
    func inputs(slot: Int, from: Int, to: Int) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity((to - from) * inputSize)
        for frame in from ..< to {
            out.append(contentsOf: UnsafeBufferPointer(start: bytes + offset(frame, slot), count: inputSize))
        }
        return out
    }

    /// Copies the input bytes of `slot` for frames `from ..< to` (all held) into `out`, which
    /// holds exactly `(to - from) * inputSize` bytes.
    func copyInputs(slot: Int, from: Int, to: Int, into out: UnsafeMutableRawBufferPointer) {
        guard let target = out.baseAddress else { return }
        precondition(out.count >= (to - from) * inputSize)
        var position = 0
        for frame in from ..< to {
            (target + position).copyMemory(from: bytes + offset(frame, slot), byteCount: inputSize)
            position += inputSize
        }
    }

    /// Whether any frame of `slot` in `from ..< to` is not `received`.
    func hasStatus(slot: Int, from: Int, to: Int) -> Bool {
        for frame in from ..< to where statuses[(frame & mask) * slotCount + slot] != 0 { return true }
        return false
    }

    /// The statuses of `slot` for frames `from ..< to`, or `[]` when every one is `received`.
    func statusRun(slot: Int, from: Int, to: Int) -> [NetplayWire.InputStatus] {
        var allReceived = true
        for frame in from ..< to where statuses[(frame & mask) * slotCount + slot] != 0 {
            allReceived = false
            break
        }
        if allReceived { return [] }
        return (from ..< to).map { status(slot: slot, frame: $0) }
    }

    /// Frame-major rows for frames `from ..< to`: every slot's input per frame (replay layout).
    func rows(from: Int, to: Int) -> (inputs: [UInt8], statuses: [NetplayWire.InputStatus]) {
        var inputs = [UInt8]()
        inputs.reserveCapacity((to - from) * slotCount * inputSize)
        var states = [NetplayWire.InputStatus]()
        var anyNotReceived = false
        for frame in from ..< to {
            for slot in 0 ..< slotCount {
                inputs.append(contentsOf: UnsafeBufferPointer(start: bytes + offset(frame, slot), count: inputSize))
                let status = self.status(slot: slot, frame: frame)
                if status != .received { anyNotReceived = true }
                states.append(status)
            }
        }
        return (inputs, anyNotReceived ? states : [])
    }
}

/// When each slot's inputs of recent frames were sent (relay arrival minus half the sender's
/// round trip): the earliest per frame sets substitution deadlines, and the per-slot average
/// offset from the frame's mean is the time sync's "how far ahead".
///
/// Its tables are buffers allocated once and freed in `deinit` (like ``InputTimeline``'s: no
/// uniqueness, exclusivity or retain work per input); slots are below `slots` and frames are
/// masked into the ring.
final class ArrivalBook {
    private static let frames = 1024
    private let slots: Int
    private let frameTags: UnsafeMutablePointer<Int>
    private let sent: UnsafeMutablePointer<UInt64>
    private let earliest: UnsafeMutablePointer<UInt64>
    private let offsets: UnsafeMutablePointer<Double>
    private let samples: UnsafeMutablePointer<Int>

    init(slots: Int) {
        self.slots = slots
        let count = max(1, slots)
        frameTags = .allocate(capacity: Self.frames)
        frameTags.initialize(repeating: -1, count: Self.frames)
        sent = .allocate(capacity: Self.frames * count)
        sent.initialize(repeating: 0, count: Self.frames * count)
        earliest = .allocate(capacity: Self.frames)
        earliest.initialize(repeating: 0, count: Self.frames)
        offsets = .allocate(capacity: count)
        offsets.initialize(repeating: 0, count: count)
        samples = .allocate(capacity: count)
        samples.initialize(repeating: 0, count: count)
    }

    deinit {
        frameTags.deallocate()
        sent.deallocate()
        earliest.deallocate()
        offsets.deallocate()
        samples.deallocate()
    }

    /// `slot`'s input for `frame` arrived; it was sent at `sentAt` (relay clock).
    @inline(__always)
    func note(frame: Int, slot: Int, sentAt: UInt64) {
        let index = frame & (Self.frames - 1)
        if frameTags[index] != frame {
            frameTags[index] = frame
            for other in 0 ..< slots { sent[index * slots + other] = 0 }
            earliest[index] = sentAt
        }
        sent[index * slots + slot] = max(sentAt, 1)
        earliest[index] = min(earliest[index], sentAt)
    }

    /// When the earliest player sent `frame`, if any input for it arrived.
    func sendEstimate(frame: Int) -> UInt64? {
        let index = frame & (Self.frames - 1)
        return frameTags[index] == frame ? earliest[index] : nil
    }

    /// Learns from a confirmed frame: every slot counted by `include` that sent its own input
    /// moves its average offset from the frame's mean send time.
    func sample(frame: Int, slots count: Int, include: (Int) -> Bool) {
        let index = frame & (Self.frames - 1)
        guard frameTags[index] == frame else { return }
        var total = 0.0, counted = 0
        for slot in 0 ..< count where include(slot) && sent[index * slots + slot] != 0 {
            total += Double(sent[index * slots + slot])
            counted += 1
        }
        guard counted >= 2 else { return }
        let mean = total / Double(counted)
        for slot in 0 ..< count where include(slot) && sent[index * slots + slot] != 0 {
            var offset = Double(sent[index * slots + slot]) - mean
            // 1/10 per frame: a correction shows within ~20 frames, jitter is averaged out.
            let weight = samples[slot] < 10 ? 1 / Double(samples[slot] + 1) : 0.1
            // One input held back by a lost segment says nothing about the player's clock: past
            // the first samples, none moves the estimate by more than 8 ms of evidence (a real
            // shift still shows, a frame's worth every ~20 frames).
            if samples[slot] >= 10 { offset = min(max(offset, offsets[slot] - 8), offsets[slot] + 8) }
            offsets[slot] += (offset - offsets[slot]) * weight
            samples[slot] += 1
        }
    }

    /// Whether `slot` has a measured offset.
    func hasOffset(slot: Int) -> Bool { samples[slot] > 0 }

    /// How much later than the others `slot` sends its inputs, milliseconds (negative: earlier).
    func offset(slot: Int) -> Double { offsets[slot] }
}

import Rollback

/// Records the state a game reached after every simulated frame (the newest simulation
/// wins), so tests can compare peers frame by frame.
final class FrameLog<State> {
    private(set) var states: [State?] = []
    private(set) var statuses: [[InputStatus]?] = []
    private(set) var inputs: [[GameInput]?] = []
    var recordInputs = false

    func record(frame: Frame, state: State, inputs frameInputs: FrameInputs) {
        while states.count <= frame + 1 {
            states.append(nil)
            statuses.append(nil)
            inputs.append(nil)
        }
        states[frame + 1] = state
        if recordInputs {
            statuses[frame] = frameInputs.allStatuses
            inputs[frame] = frameInputs.allInputs
        }
    }

    func state(at frame: Frame) -> State? { frame < states.count ? states[frame] : nil }
    func statuses(at frame: Frame) -> [InputStatus]? { frame < statuses.count ? statuses[frame] : nil }
    func inputs(at frame: Frame) -> [GameInput]? { frame < inputs.count ? inputs[frame] : nil }
}

/// Wraps a game and logs every state it reaches.
struct LoggingGame<Base: Game>: Game {
    var base: Base
    let log: FrameLog<Base.State>

    func saveState() -> Base.State { base.saveState() }
    mutating func loadState(_ state: Base.State) { base.loadState(state) }
    mutating func advanceFrame(_ inputs: FrameInputs) {
        base.advanceFrame(inputs)
        log.record(frame: inputs.frame, state: base.saveState(), inputs: inputs)
    }
    func checksum() -> UInt64 { base.checksum() }
}

/// A tiny deterministic game: every player's input is folded into a running hash. Any
/// difference in any input at any frame changes every later state.
struct HashGame: Game, Sendable {
    struct State: Equatable, Sendable {
        var frame: Int = 0
        var hash: UInt64 = 0x1234_5678
        var disconnectedMask: UInt8 = 0
    }
    var state = State()
    /// When set, this copy of the game goes wrong once on reaching that frame (a desync).
    var bias: Int?

    init(bias: Int? = nil) { self.bias = bias }
    init(state: State) { self.state = state }

    /// The state as bytes, for state transfer tests.
    static func encode(_ state: State) -> [UInt8] {
        var bytes: [UInt8] = []
        for word in [UInt64(state.frame), state.hash, UInt64(state.disconnectedMask)] {
            for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
        }
        return bytes
    }

    static func decode(_ bytes: [UInt8]) -> State? {
        guard bytes.count == 24 else { return nil }
        func word(_ index: Int) -> UInt64 {
            (0 ..< 8).reduce(0) { $0 | UInt64(bytes[index * 8 + $1]) << UInt64($1 * 8) }
        }
        return State(frame: Int(word(0)), hash: word(1), disconnectedMask: UInt8(word(2)))
    }

    func saveState() -> State { state }
    mutating func loadState(_ state: State) { self.state = state }
    mutating func advanceFrame(_ inputs: FrameInputs) {
        precondition(inputs.frame == state.frame, "simulated frame \(inputs.frame) on state \(state.frame)")
        var h = state.hash
        for player in 0 ..< inputs.count {
            let input = inputs[player]
            h = (h ^ input.low) &* 0x100_0000_01B3
            h = (h ^ input.high) &* 0x100_0000_01B3
            // Words 2 ... 7 (inputs over 16 bytes) only when set, so shorter inputs hash as they always did.
            for word in 2 ..< 8 where input.words[word] != 0 { h = (h ^ input.words[word]) &* 0x100_0000_01B3 }
            if inputs.status(of: player) == .disconnected { state.disconnectedMask |= 1 << UInt8(player) }
        }
        state.hash = h
        state.frame += 1
        if state.frame == bias { state.hash &+= 0xBAD }
    }
    func checksum() -> UInt64 { state.hash ^ UInt64(state.frame) << 48 ^ UInt64(state.disconnectedMask) << 40 }
}

/// Deliberately non-deterministic: part of what drives the simulation (`drift`) is not in
/// the saved state, so a re-simulation after a load diverges. The sync test must catch it.
struct LeakyGame: Game {
    struct State: Equatable { var value: UInt64 = 0; var frame = 0 }
    var state = State()
    /// Advances on every call and is never saved or restored.
    var drift: UInt64 = 0

    func saveState() -> State { state }
    mutating func loadState(_ state: State) { self.state = state }
    mutating func advanceFrame(_ inputs: FrameInputs) {
        drift &+= 1
        state.value = state.value &* 31 &+ inputs[0].low &+ drift
        state.frame += 1
    }
    func checksum() -> UInt64 { state.value }
}

/// A deterministic per-player input stream: holds a random input for a random number of
/// frames (like a real player), so predictions are sometimes right and sometimes wrong.
struct InputScript: Sendable {
    let seed: UInt64
    let size: Int
    var holdMax: UInt64 = 12

    func input(player: Int, frame: Frame) -> GameInput {
        // Segment boundaries depend only on (seed, player, frame / window), so any frame can
        // be computed on its own.
        let window = Int(holdMax)
        let segment = frame / window
        let segmentSeed = SeededRandom.hash(seed, UInt64(player), UInt64(segment))
        let split = Int(segmentSeed % UInt64(window))
        let part = frame % window < split ? 0 : 1
        let value = SeededRandom.hash(segmentSeed, UInt64(part))
        let rest = SeededRandom.hash(value, 2)
        return GameInput(words: SIMD8(value, value >> 7, rest, rest >> 3, rest >> 11, ~rest, rest &* 3, value ^ rest))
            .masked(toSize: size)
    }
}

import MemberwiseInit
import Rollback

/// The iterated prisoner's dilemma for two players, turn-based on top of the frame-based
/// rollback engine.
///
/// Each round both players pick *cooperate* or *defect*. A player's input byte is 0 (no
/// choice yet), 1 (cooperate) or 2 (defect); the first non-zero byte in a round locks that
/// player's choice. When both have chosen, the round resolves with the payoff matrix, the
/// choices are revealed for ``revealFrames`` frames (inputs are ignored meanwhile), and the
/// next round starts. After ``maxRounds`` rounds the game is over.
///
/// A disconnected player defects every round from then on (the same on every peer, since
/// the disconnect frame is agreed).
public struct PrisonersDilemma: SerializableGame, Sendable {
    /// One player's move.
    public enum Choice: UInt8, Sendable, Hashable {
        /// Not chosen yet.
        case none = 0
        /// Stay silent.
        case cooperate = 1
        /// Betray.
        case defect = 2
    }

    /// Points per outcome. The defaults are the classic values (T=5, R=3, P=1, S=0).
    @PublicMemberwiseInit
    public struct Payoffs: Sendable, Hashable {
        /// Both cooperate (R).
        public var reward: Int32 = 3
        /// Defecting against a cooperator (T).
        public var temptation: Int32 = 5
        /// Cooperating against a defector (S).
        public var sucker: Int32 = 0
        /// Both defect (P).
        public var punishment: Int32 = 1
        /// The classic matrix.
        public init() {}
    }

    /// Everything that changes during a match.
    public struct State: Sendable, Hashable {
        /// Frames simulated.
        public var frame: Int32 = 0
        /// Rounds completed.
        public var round: Int32 = 0
        /// This round's choices (``Choice/none`` until locked).
        public var choices: (Choice, Choice) = (.none, .none)
        /// Total scores.
        public var scores: (Int32, Int32) = (0, 0)
        /// The previous round's choices (for display).
        public var lastRound: (Choice, Choice) = (.none, .none)
        /// Frames left in the current reveal pause.
        public var revealCountdown: Int32 = 0
        /// Times each player cooperated.
        public var cooperations: (Int32, Int32) = (0, 0)

        /// A fresh match.
        public init() {}

        public static func == (lhs: State, rhs: State) -> Bool {
            lhs.frame == rhs.frame && lhs.round == rhs.round && lhs.choices == rhs.choices
                && lhs.scores == rhs.scores && lhs.lastRound == rhs.lastRound
                && lhs.revealCountdown == rhs.revealCountdown && lhs.cooperations == rhs.cooperations
        }

        public func hash(into hasher: inout Hasher) {
            hasher.combine(frame)
            hasher.combine(round)
            hasher.combine(scores.0)
            hasher.combine(scores.1)
        }
    }

    /// Input bytes per player.
    public static let inputSize = 1

    /// The input meaning `choice`.
    public static func input(_ choice: Choice) -> GameInput { GameInput(low: UInt64(choice.rawValue)) }

    /// The current state.
    public private(set) var state = State()
    /// The payoff matrix.
    public let payoffs: Payoffs
    /// Rounds per match.
    public let maxRounds: Int32
    /// Frames the result of a round stays on screen.
    public let revealFrames: Int32

    /// A new match.
    public init(payoffs: Payoffs = Payoffs(), maxRounds: Int32 = 10, revealFrames: Int32 = 30) {
        self.payoffs = payoffs
        self.maxRounds = maxRounds
        self.revealFrames = revealFrames
    }

    /// Whether all rounds are played.
    public var isOver: Bool { state.round >= maxRounds }

    /// The points each player gets for one round.
    public func score(_ a: Choice, _ b: Choice) -> (Int32, Int32) {
        switch (a, b) {
        case (.cooperate, .cooperate): return (payoffs.reward, payoffs.reward)
        case (.cooperate, .defect): return (payoffs.sucker, payoffs.temptation)
        case (.defect, .cooperate): return (payoffs.temptation, payoffs.sucker)
        default: return (payoffs.punishment, payoffs.punishment)
        }
    }

    public func saveState() -> State { state }

    public mutating func loadState(_ state: State) { self.state = state }

    /// Loads a state another peer sent, refusing one this match could not have reached: more
    /// rounds than it plays, a longer reveal pause than it shows.
    public mutating func loadForeignState(_ state: State) throws {
        guard state.round <= maxRounds else {
            throw RefusedGameState("a dilemma state at round \(state.round), this match plays \(maxRounds)")
        }
        guard state.revealCountdown <= revealFrames else {
            throw RefusedGameState("a dilemma state pausing \(state.revealCountdown) frames, this match pauses \(revealFrames)")
        }
        self.state = state
    }

    private static func choice(from input: GameInput, status: InputStatus) -> Choice {
        if status == .disconnected { return .defect }
        return Choice(rawValue: input[byte: 0]) ?? .none
    }

    public mutating func advanceFrame(_ inputs: FrameInputs) {
        precondition(inputs.count == 2, "the prisoner's dilemma has two players")
        state.frame &+= 1
        guard !isOver else { return }
        if state.revealCountdown > 0 {
            state.revealCountdown -= 1
            return
        }
        if state.choices.0 == .none { state.choices.0 = Self.choice(from: inputs[0], status: inputs.status(of: 0)) }
        if state.choices.1 == .none { state.choices.1 = Self.choice(from: inputs[1], status: inputs.status(of: 1)) }
        guard state.choices.0 != .none, state.choices.1 != .none else { return }
        let (a, b) = score(state.choices.0, state.choices.1)
        state.scores.0 &+= a
        state.scores.1 &+= b
        if state.choices.0 == .cooperate { state.cooperations.0 &+= 1 }
        if state.choices.1 == .cooperate { state.cooperations.1 &+= 1 }
        state.lastRound = state.choices
        state.choices = (.none, .none)
        state.round &+= 1
        state.revealCountdown = revealFrames
    }

    public func checksum() -> UInt64 {
        var hasher = StateHasher()
        for byte in Self.encode(state) { hasher.combine(byte: byte) }
        return hasher.value
    }

    public static func encode(_ state: State) -> [UInt8] {
        var writer = StateWriter()
        writer.write(state.frame)
        writer.write(state.round)
        writer.write(state.choices.0.rawValue)
        writer.write(state.choices.1.rawValue)
        writer.write(state.scores.0)
        writer.write(state.scores.1)
        writer.write(state.lastRound.0.rawValue)
        writer.write(state.lastRound.1.rawValue)
        writer.write(state.revealCountdown)
        writer.write(state.cooperations.0)
        writer.write(state.cooperations.1)
        return writer.bytes
    }

    /// A state from bytes (``encode(_:)``), or nil when they are not one or hold counts no
    /// match reaches (negative frames, rounds or pauses; more cooperations than rounds).
    public static func decode(_ bytes: [UInt8]) -> State? {
        var reader = StateReader(bytes)
        var state = State()
        guard let frame = reader.readInt32(), let round = reader.readInt32(),
              let c0 = reader.readUInt8().flatMap(Choice.init(rawValue:)),
              let c1 = reader.readUInt8().flatMap(Choice.init(rawValue:)),
              let s0 = reader.readInt32(), let s1 = reader.readInt32(),
              let l0 = reader.readUInt8().flatMap(Choice.init(rawValue:)),
              let l1 = reader.readUInt8().flatMap(Choice.init(rawValue:)),
              let reveal = reader.readInt32(), let k0 = reader.readInt32(), let k1 = reader.readInt32(),
              reader.isAtEnd, frame >= 0, round >= 0, reveal >= 0, (0 ... round).contains(k0), (0 ... round).contains(k1)
        else { return nil }
        state.frame = frame
        state.round = round
        state.choices = (c0, c1)
        state.scores = (s0, s1)
        state.lastRound = (l0, l1)
        state.revealCountdown = reveal
        state.cooperations = (k0, k1)
        return state
    }
}

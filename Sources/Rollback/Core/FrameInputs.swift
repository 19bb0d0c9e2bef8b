/// Every player's input and its status for the frame a game is about to simulate.
///
/// A session lends the game a window on its own input table (one row per frame, filled for a
/// whole re-simulation at once), so simulating a frame neither allocates, copies inputs nor
/// retains. Do not keep it beyond ``Game/advanceFrame(_:)``: keeping a copy is safe but
/// forces the session to copy its table the next time it writes to it.
public struct FrameInputs: Sendable {
    /// One player's input and status.
    @usableFromInline
    struct Entry: Sendable {
        @usableFromInline var input: GameInput
        @usableFromInline var status: InputStatus

        @usableFromInline
        init(input: GameInput, status: InputStatus) {
            self.input = input
            self.status = status
        }
    }

    /// The frame being simulated (the game's frame before it advances).
    @inlinable public var frame: Frame { storedFrame }
    @usableFromInline var storedFrame: Frame
    /// Player `p`'s entry is `entries[base + p]`.
    @usableFromInline var entries: [Entry]
    @usableFromInline var base: Int
    @usableFromInline var playerCount: Int
    @usableFromInline var resimulating = false

    /// Whether the engine is re-simulating this frame during a rollback (or a state transfer,
    /// or a sync test's second pass): the frame was shown once already and will be shown again
    /// as it ends up. A frontend mutes audio and skips video output for such frames; the game's
    /// state must not depend on it.
    @inlinable public var isResimulating: Bool { resimulating }

    /// Creates inputs for one frame; `inputs` and `statuses` must have one entry per player.
    public init(frame: Frame, inputs: [GameInput], statuses: [InputStatus]) {
        precondition(inputs.count == statuses.count, "one status per input")
        self.storedFrame = frame
        self.entries = zip(inputs, statuses).map { Entry(input: $0, status: $1) }
        self.base = 0
        self.playerCount = inputs.count
    }

    /// A window of `playerCount` entries of `table` (a session's input table).
    @usableFromInline
    init(table: [Entry], playerCount: Int) {
        storedFrame = 0
        entries = table
        base = 0
        self.playerCount = playerCount
    }

    /// The number of players.
    @inlinable public var count: Int { playerCount }

    /// Player `player`'s input.
    @inlinable public subscript(player: PlayerHandle) -> GameInput {
        precondition(UInt(bitPattern: player) < UInt(bitPattern: playerCount), "player out of range")
        return entries[base &+ player].input
    }

    /// The status of player `player`'s input.
    @inlinable public func status(of player: PlayerHandle) -> InputStatus {
        precondition(UInt(bitPattern: player) < UInt(bitPattern: playerCount), "player out of range")
        return entries[base &+ player].status
    }

    /// All inputs, in player order.
    public var allInputs: [GameInput] { entries[base ..< base + playerCount].map(\.input) }

    /// All statuses, in player order.
    public var allStatuses: [InputStatus] { entries[base ..< base + playerCount].map(\.status) }
}

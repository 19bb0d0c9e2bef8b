/// Every player's input and its status for the frame a game is about to simulate.
///
/// A session fills the same value in place every frame and lends it to the game, so
/// simulating a frame neither allocates nor retains. Do not keep it beyond
/// ``Game/advanceFrame(_:)``: keeping a copy is safe but forces the session to allocate fresh
/// storage for the next frame.
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
    @usableFromInline var entries: [Entry]

    /// Creates inputs for one frame; `inputs` and `statuses` must have one entry per player.
    public init(frame: Frame, inputs: [GameInput], statuses: [InputStatus]) {
        precondition(inputs.count == statuses.count, "one status per input")
        self.storedFrame = frame
        self.entries = zip(inputs, statuses).map { Entry(input: $0, status: $1) }
    }

    /// The number of players.
    @inlinable public var count: Int { entries.count }

    /// Player `player`'s input.
    @inlinable public subscript(player: PlayerHandle) -> GameInput { entries[player].input }

    /// The status of player `player`'s input.
    @inlinable public func status(of player: PlayerHandle) -> InputStatus { entries[player].status }

    /// All inputs, in player order.
    public var allInputs: [GameInput] { entries.map(\.input) }

    /// All statuses, in player order.
    public var allStatuses: [InputStatus] { entries.map(\.status) }
}

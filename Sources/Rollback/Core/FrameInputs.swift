/// Every player's input and its status for the frame a game is about to simulate.
///
/// A session reuses the same storage every frame, so building a `FrameInputs` does not
/// allocate. Do not keep it beyond ``Game/advanceFrame(_:)``: keeping a copy is safe but forces
/// the session to allocate fresh storage for the next frame.
public struct FrameInputs: Sendable {
    /// The frame being simulated (the game's frame before it advances).
    public let frame: Frame
    @usableFromInline let inputs: [GameInput]
    @usableFromInline let statuses: [InputStatus]

    /// Creates inputs for one frame; `inputs` and `statuses` must have one entry per player.
    public init(frame: Frame, inputs: [GameInput], statuses: [InputStatus]) {
        precondition(inputs.count == statuses.count, "one status per input")
        self.frame = frame
        self.inputs = inputs
        self.statuses = statuses
    }

    /// The number of players.
    @inlinable public var count: Int { inputs.count }

    /// Player `player`'s input.
    @inlinable public subscript(player: PlayerHandle) -> GameInput { inputs[player] }

    /// The status of player `player`'s input.
    @inlinable public func status(of player: PlayerHandle) -> InputStatus { statuses[player] }

    /// All inputs, in player order.
    public var allInputs: [GameInput] { inputs }

    /// All statuses, in player order.
    public var allStatuses: [InputStatus] { statuses }
}

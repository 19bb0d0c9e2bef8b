import MemberwiseInit

/// What a predictor knows when it guesses a player's input for a frame not received yet.
@PublicMemberwiseInit
public struct PredictionContext: Sendable {
    /// The player whose input is guessed.
    public var player: PlayerHandle
    /// The frame the guess is for.
    public var frame: Frame
    /// The newest frame whose input is known for this player (``nullFrame`` if none).
    public var lastKnownFrame: Frame
    /// The input at ``lastKnownFrame`` (``GameInput/zero`` if none).
    public var lastKnownInput: GameInput
}

/// Guesses inputs that have not arrived yet. Pluggable through ``SessionConfiguration/prediction``.
///
/// A prediction must be a pure function of the context: the engine may ask again for the
/// same frame during a re-simulation. A wrong guess is never harmful (the frame is
/// re-simulated when the real input arrives), only costly.
public protocol InputPredictor: Sendable {
    /// The guessed input.
    func predict(_ context: PredictionContext) -> GameInput
}

/// The default predictor: the player keeps doing what they did last (GGPO's choice).
public struct RepeatLastPrediction: InputPredictor {
    /// Creates the predictor.
    public init() {}

    @inlinable
    public func predict(_ context: PredictionContext) -> GameInput { context.lastKnownInput }
}

/// Predicts "nothing pressed"; suits inputs that are events (a shot, a menu choice) rather than held states.
public struct NeutralPrediction: InputPredictor {
    /// Creates the predictor.
    public init() {}

    @inlinable
    public func predict(_ context: PredictionContext) -> GameInput { .zero }
}

/// Repeats the last input but only the bits in `heldMask`; other bits (one-shot buttons) are predicted released.
public struct MaskedRepeatPrediction: InputPredictor {
    /// Bits that are held over from the last known input.
    public var heldMask: GameInput

    /// Creates the predictor.
    public init(heldMask: GameInput) { self.heldMask = heldMask }

    @inlinable
    public func predict(_ context: PredictionContext) -> GameInput {
        context.lastKnownInput & heldMask
    }
}

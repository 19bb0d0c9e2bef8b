/// Everything a session needs to know before it starts. All times are milliseconds of the
/// caller's clock (sessions never read a clock themselves).
public struct SessionConfiguration: Sendable {
    /// Players in the match, 1 ... 8 (2 ... 8 for a P2P session).
    public var playerCount: Int
    /// Bytes of input per player and frame, 1 ... 64.
    public var inputSize: Int
    /// How many frames may be simulated on predicted inputs; 0 means lockstep.
    public var predictionWindow: Int = 8
    /// Frames between a local input and the frame it applies to. Changeable during a match.
    public var inputDelay: Int = 0
    /// Saved states kept for rollback; also bounds how far the simulation may run ahead of
    /// frames confirmed by everyone. Must exceed `predictionWindow + 1`.
    public var stateRingCapacity: Int = 32
    /// Save only states whose inputs are all known (plus one refresh every `predictionWindow`
    /// frames), trading longer re-simulation for fewer saves. For games whose save is expensive.
    public var sparseSaving: Bool = false
    /// Frame rate, used to turn milliseconds into frames for time sync.
    public var framesPerSecond: Int = 60
    /// Exchange a checksum every this many confirmed frames; 0 turns desync detection off.
    public var checksumInterval: Int = 30
    /// The match frame this session's frame 0 stands for (a session started from a state
    /// transferred at match frame F passes F). Checksums fall on frames whose match frame is a
    /// multiple of ``checksumInterval``, the same frames as on peers that started at 0.
    public var matchFrameOffset: Int = 0
    /// Handshake round trips per endpoint before it counts as synchronized.
    public var syncRoundTrips: Int = 5
    /// Handshake retry interval.
    public var syncRetryMs: Int = 200
    /// Unacknowledged inputs are re-sent at this interval even when no new frame is simulated.
    public var resendIntervalMs: Int = 24
    /// A keep-alive goes out when nothing else was sent for this long.
    public var keepAliveIntervalMs: Int = 200
    /// Ping / time-sync report interval.
    public var qualityReportIntervalMs: Int = 200
    /// Silence after which an endpoint counts as interrupted.
    public var interruptTimeoutMs: Int = 750
    /// Silence after which an endpoint is disconnected; 0 never disconnects.
    public var disconnectTimeoutMs: Int = 3000
    /// Minimum frames between two wait recommendations.
    public var recommendationIntervalFrames: Int = 60
    /// Smallest advantage (in frames) worth a wait recommendation.
    public var minimumWaitFrames: Int = 2
    /// Largest wait recommended at once.
    public var maximumWaitFrames: Int = 10
    /// Inputs per ``InputMessage`` at most.
    public var maxInputsPerMessage: Int = 64
    /// Frames of input history per player (rounded up to a power of two). Bounds how far a
    /// spectator may lag before it is dropped.
    public var inputHistory: Int = 512
    /// Guesses inputs that have not arrived.
    public var prediction: any InputPredictor = RepeatLastPrediction()
    /// Seeds the session's own random numbers (handshake nonces). Sessions never use system randomness.
    public var seed: UInt64 = 0x5EED

    /// A configuration with defaults for everything but the player count and input size.
    public init(playerCount: Int, inputSize: Int) {
        self.playerCount = playerCount
        self.inputSize = inputSize
    }

    /// Checks the values; returns a description of the first problem, or nil.
    public func validationError() -> String? {
        if playerCount < 1 || playerCount > 8 { return "playerCount must be 1 ... 8" }
        // Upper bounds: ring and history sizes are rounded up to powers of two (past 2^62 that
        // never ended) and allocated whole; intervals are turned into unsigned times.
        if predictionWindow > 1_024 { return "predictionWindow must be <= 1024" }
        if stateRingCapacity > 4_096 { return "stateRingCapacity must be <= 4096" }
        if inputHistory > 1 << 20 { return "inputHistory must be <= 1048576" }
        if framesPerSecond > 1_000 { return "framesPerSecond must be <= 1000" }
        let intervals = [("syncRetryMs", syncRetryMs), ("resendIntervalMs", resendIntervalMs),
                         ("keepAliveIntervalMs", keepAliveIntervalMs), ("qualityReportIntervalMs", qualityReportIntervalMs),
                         ("interruptTimeoutMs", interruptTimeoutMs), ("disconnectTimeoutMs", disconnectTimeoutMs)]
        for (name, value) in intervals where value < 0 || value > 86_400_000 { return "\(name) must be 0 ... 86400000" }
        if inputSize < 1 || inputSize > GameInput.maxSize { return "inputSize must be 1 ... 64" }
        if predictionWindow < 0 { return "predictionWindow must be >= 0" }
        if inputDelay < 0 || inputDelay > 32 { return "inputDelay must be 0 ... 32" }
        if stateRingCapacity < predictionWindow + 2 { return "stateRingCapacity must be >= predictionWindow + 2" }
        if framesPerSecond < 1 { return "framesPerSecond must be >= 1" }
        if checksumInterval < 0 { return "checksumInterval must be >= 0" }
        if syncRoundTrips < 1 { return "syncRoundTrips must be >= 1" }
        if maxInputsPerMessage < 1 { return "maxInputsPerMessage must be >= 1" }
        if inputHistory < 4 * stateRingCapacity + 64 { return "inputHistory must be >= 4 * stateRingCapacity + 64" }
        return nil
    }
}

/// Errors a session reports for misuse. Network trouble is never an error: it is an event.
public enum RollbackError: Error, Sendable, Hashable {
    /// The configuration is invalid.
    case invalidConfiguration(String)
    /// The player handle is out of range or the wrong kind (e.g. a remote player given local input).
    case invalidPlayer(PlayerHandle)
    /// The operation needs a running session.
    case notRunning
    /// A state could not be loaded at that frame (too old, or in the future).
    case frameOutOfRange(Frame)
    /// Not every local player gave an input for this frame.
    case missingLocalInput(PlayerHandle)
}

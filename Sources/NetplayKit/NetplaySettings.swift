import NetplayWire

/// What a host chooses when creating a room (the frontend's "Create Room" screen).
public struct NetplaySettings: Sendable, Hashable {
    /// Room title, e.g. "JoeMatt's Room".
    public var roomName: String
    /// Player slots, 1 ... 8.
    public var maxPlayers: Int = 2
    /// Input delay in frames (0 = rollback only); with ``automaticFrameDelay``, only the value
    /// used until the relay has measured the players' round trips.
    public var frameDelay: Int = 2
    /// The relay chooses the input delay from the round trips it measures (half the slowest
    /// player-to-player path, hidden by delay; the other half predicted) and changes it during
    /// the match when they move. Every player uses the same delay, so rollbacks stay even.
    public var automaticFrameDelay: Bool = true
    /// Whether spectators may watch.
    public var allowSpectators: Bool = true
    /// Spectator places (RetroArch allows up to 11).
    public var maxSpectators: Int = 11
    /// Password to play (nil = none).
    public var password: String?
    /// Password to spectate (nil = none).
    public var spectatePassword: String?
    /// LAN only or through a relay.
    public var network: NetplayNetwork = .relay
    /// Region tag for the relay choice, e.g. "eu-west".
    public var region: String = ""
    /// Frames a peer may predict ahead (rollback window), 1 ... 32.
    public var predictionWindow: Int = 8
    /// Frames a player may lag before the relay substitutes its input.
    public var lagTolerance: Int = 12
    /// Frames spectators trail the confirmed frame.
    public var spectatorDelay: Int = 0
    /// Players report a checksum every this many frames (0 = never).
    public var checksumInterval: Int = 60
    /// Frames per second in milli-hertz (60000 = 60 Hz).
    public var frameRateMilliHertz: Int = 60_000
    /// Not listed in the lobby.
    public var unlisted: Bool = false
    /// The host admits or refuses each joiner (``HostControls/pendingJoins()``); a join waits
    /// for the decision (``NetplayLobby/approvalWaitSeconds``) and fails REFUSED_BY_HOST when refused.
    public var approveJoiners: Bool = false
    /// The slot the host plays in, 1 ... ``maxPlayers`` (the host stays the host in any slot).
    public var hostSlot: Int = 1

    /// Settings for a room called `roomName`; every other value has the default above.
    public init(roomName: String) { self.roomName = roomName }

    /// Checks the values; returns the first problem as one sentence, or nil.
    public func validationError(inputSize: Int) -> String? {
        if roomName.isEmpty || roomName.utf8.count > 128 { return "The room name must be 1 to 128 bytes." }
        if !(1 ... 8).contains(maxPlayers) { return "Max players must be 1 to 8." }
        if !(1 ... maxPlayers).contains(hostSlot) { return "The host's slot must be 1 to \(maxPlayers)." }
        if !(0 ... 15).contains(frameDelay) { return "Frame delay must be 0 to 15." }
        if !(0 ... 64).contains(maxSpectators) { return "Max spectators must be 0 to 64." }
        if !(1 ... 32).contains(predictionWindow) { return "The prediction window must be 1 to 32 frames." }
        if !(1 ... 600).contains(lagTolerance) { return "The lag tolerance must be 1 to 600 frames." }
        if !(0 ... 3600).contains(spectatorDelay) { return "The spectator delay must be 0 to 3600 frames." }
        if !(0 ... 3600).contains(checksumInterval) { return "The checksum interval must be 0 to 3600 frames." }
        if !(1000 ... 1_000_000).contains(frameRateMilliHertz) { return "The frame rate must be 1 to 1000 Hz." }
        if !(1 ... 64).contains(inputSize) { return "Inputs must be 1 to 64 bytes." }
        return nil
    }

    /// The coordinator's form of these settings for a game with `content` and `inputSize`-byte inputs.
    public func sessionSettings(content: ContentInfo, inputSize: Int, lanEndpoint: String = "") -> SessionSettings {
        var settings = SessionSettings(roomName: roomName, content: content, region: region,
                        transport: network == .lan ? .lan : .relay, lanEndpoint: lanEndpoint, unlisted: unlisted,
                        maxPlayers: UInt32(maxPlayers), frameDelay: UInt32(frameDelay), spectatorsAllowed: allowSpectators,
                        maxSpectators: UInt32(allowSpectators ? maxSpectators : 0), playPassword: password ?? "",
                        spectatePassword: spectatePassword ?? "", inputSize: UInt32(inputSize),
                        frameRateMhz: UInt32(frameRateMilliHertz), predictionWindow: UInt32(predictionWindow),
                        lagToleranceFrames: UInt32(lagTolerance), spectatorDelayFrames: UInt32(spectatorDelay),
                        checksumIntervalFrames: UInt32(checksumInterval), frameDelayAuto: automaticFrameDelay)
        settings.approveJoiners = approveJoiners
        return settings
    }
}

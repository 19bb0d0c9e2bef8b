extension SyncParams {
    /// The sync parameters of a session with `settings`: what every ticket carries, written once
    /// for the coordinator's sessions and a LAN host's room.
    public init(settings: SessionSettings, maxSpectators: UInt32) {
        self.init(inputSize: settings.inputSize, maxPlayers: settings.maxPlayers, frameDelay: settings.frameDelay,
                  frameRateMhz: settings.frameRateMhz, predictionWindow: settings.predictionWindow,
                  lagToleranceFrames: settings.lagToleranceFrames, spectatorDelayFrames: settings.spectatorDelayFrames,
                  checksumIntervalFrames: settings.checksumIntervalFrames, maxSpectators: maxSpectators,
                  frameDelayAuto: settings.frameDelayAuto)
    }

    /// Frames per second the match runs at (`frame_rate_mhz` / 1000; at least 1).
    public var framesPerSecond: Double { Double(max(frameRateMhz, 1000)) / 1000 }
}

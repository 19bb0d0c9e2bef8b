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
}

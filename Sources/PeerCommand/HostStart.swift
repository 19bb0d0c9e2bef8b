import ArgumentParser
import NetplayService
import Rollback

/// How the host starts its match: from its game's fresh boot, or mid-game from its own state
/// after playing alone for a while (`--warmup-frames`, `--start-state`); and whether it restarts
/// the match from that state later (`--restart-at`).
struct HostStart {
    /// Frames the host plays alone with its input script before hosting.
    var warmupFrames = 0
    /// Everyone starts from the host's state (sent before frame 0), not from their own boot.
    var fromHostState = false
    /// The match frame at which the host restarts the match from the state it started from.
    var restartAt: Int?

    /// From `--warmup-frames`, `--start-state` and `--restart-at` (or NETPLAY_WARMUP_FRAMES,
    /// NETPLAY_START_STATE, NETPLAY_RESTART_AT); malformed values are one-line validation errors.
    init(warmupFrames: String?, startState: String?, restartAt: String?, resolver: SettingResolver = SettingResolver()) throws {
        self.warmupFrames = try resolver.integer(warmupFrames, "NETPLAY_WARMUP_FRAMES", name: "--warmup-frames", default: 0,
                                                 range: 0 ... 1_000_000)
        let start = try resolver.choice(startState, "NETPLAY_START_STATE", name: "--start-state", default: "auto",
                                        choices: ["auto", "host", "boot"])
        fromHostState = start == "host" || (start == "auto" && self.warmupFrames > 0)
        let restart = try resolver.integer(restartAt, "NETPLAY_RESTART_AT", name: "--restart-at", default: -1,
                                           range: -1 ... Int(Int32.max))
        self.restartAt = restart >= 0 ? restart : nil
        if self.restartAt == 0 { throw ValidationError("--restart-at must be a frame after 0") }
    }

    /// A start from every peer's own boot, no restart (joiners, spectators).
    init() {}

    /// Plays ``warmupFrames`` frames of `game` alone (every slot's input from `script`), so the
    /// host is mid-game when it hosts. The frames are numbered below 0: none is a match frame.
    func warmUp<G: Game>(_ game: inout G, players: Int, script: (Int, Int) -> GameInput) {
        let statuses = Array(repeating: InputStatus.confirmed, count: players)
        for index in 0 ..< warmupFrames {
            let inputs = (1 ... players).map { script($0, index) }
            game.advanceFrame(FrameInputs(frame: index - warmupFrames, inputs: inputs, statuses: statuses))
        }
    }
}

import ArgumentParser
import Foundation
import Games
import InputSync
import Libretro
import NetplayAuth
import NetplayKit
import NetplayService
import NetplayWire
import Rollback

// The game loop every playing subcommand shares, and starting a match for a sample game or a core.

/// The common game loop: ticks the match at the session's frame rate, applies the chaos options,
/// stops at the target frame and prints the result line.
struct PeerRunner<G: SerializableGame> {
    let options: PeerSettings
    let match: NetplayMatch<G>
    /// The input of (slot, frame).
    let script: (Int, Int) -> GameInput
    let label: String
    /// Appended to the RESULT line.
    var resultSuffix = ""
    var onRunning: (() -> Void)?
    /// Seconds to keep ticking after finishing (a LAN host serves the others meanwhile).
    var lingerSeconds = 0.0
    /// The host restarts the match from this state at `HostStart.restartAt`.
    var restart: (frame: Int, state: G.State)?

    func run() throws -> Never {
        let deadline = Date().addingTimeInterval(options.timeout)
        match.start()
        var lagDone = false, outageDone = false, announced = false, restartDone = false
        var lastHud = Date()
        var nextTick = ContinuousClock.now
        var tally = MatchEventTally()
        var seenEvents = 0
        while true {
            if Date() > deadline {
                // What happened last is what explains a stuck match.
                for event in match.events.suffix(20) { log("event: \(event)") }
                fail("timed out after \(Int(options.timeout)) s in state \(match.state) at frame \(match.currentFrame)")
            }
            let frame = match.currentFrame
            if let lagAt = options.lagAt, !lagDone, frame >= lagAt {
                lagDone = true
                log("freezing \(options.lagMs) ms at frame \(frame) (a weak client)")
                usleep(UInt32(options.lagMs) * 1000)  // at most 600 s: PeerOptions' range
                nextTick = .now
            }
            if let outageAt = options.outageAt, !outageDone, frame >= outageAt {
                outageDone = true
                log("cutting the link for \(options.outageMs) ms at frame \(frame)")
                match.simulateOutage(milliseconds: options.outageMs)
            }
            if let restart = self.restart, !restartDone, frame >= restart.frame, match.isRunning {
                do {
                    try match.restart(from: restart.state)
                    restartDone = true
                    log("restarted the match from its start state at frame \(frame)")
                } catch {
                    if frame >= restart.frame + 600 { fail("could not restart: \(error)") }
                }
            }
            let slot = max(match.slot, 1)
            let firstFrameWasNear = match.firstFrameIsNear
            let tickStart = ContinuousClock.now
            let result = match.tick(input: script(slot, frame))
            // Frames are paced from the one that began the match, at the moment the relay named.
            if firstFrameWasNear && !match.firstFrameIsNear { nextTick = tickStart }
            if result.running && !announced {
                announced = true
                log("match running from frame \(match.startFrame) as \(match.role == .player ? "P\(match.slot)" : "spectator")")
                onRunning?()
            }
            if options.renderEvery > 0, result.framesAdvanced > 0, match.currentFrame % options.renderEvery < result.framesAdvanced {
                emit(Renderer.render(match.game, frame: match.currentFrame))
            }
            for event in match.events(since: seenEvents) {
                tally.count(event)
                if options.hudEvery > 0 { log("event: \(event)") }
            }
            seenEvents = match.eventCount
            if options.hudEvery > 0, Date().timeIntervalSince(lastHud) >= options.hudEvery {
                lastHud = Date()
                emit("HUD \(label): \(match.hud.line) state=\(match.state)")
            }
            if case .disconnected(let reason) = match.state { fail("disconnected: \(reason)") }
            if let checksum = finished() {
                let hud = match.hud
                let (reconnects, desyncEvents, loaded, relayMoves) = (tally.reconnects, tally.desyncs, tally.statesLoaded, tally.relayMoves)
                // The figures are the match's up to its last frame, taken before any lingering.
                let result = "RESULT frames=\(options.frames) checksum=0x\(String(checksum, radix: 16)) role=\(match.role == .player ? "player" : "spectator") "
                    + "slot=\(match.slot) start=\(match.startFrame) rollbacks=\(hud.rollbacks) substituted_seen=\(match.substitutedInputsSeen) "
                    + "max_stall_ms=\(match.longestStallMs) desync_notices=\(desyncEvents) states_loaded=\(loaded) reconnects=\(reconnects) "
                    + "rollback_frames=\(hud.rollbackFrames) max_rollback=\(hud.maxRollbackFrames) stalls_over_2=\(match.stallsOverTwoFrames) "
                    + "own_substituted=\(match.ownInputsSubstituted) frame_delay=\(hud.frameDelay) ping_ms=\(hud.pingMs) "
                    + "relay=\(match.admission.relayEndpoint) relay_moves=\(relayMoves)"
                    + " start_checksum=0x\(String(match.startChecksum ?? 0, radix: 16))"
                    + resultSuffix
                if match.role == .player {
                    // A LAN host's process is the relay: give the others time to finish first.
                    // A cluster room's host leaving ends the session for everyone: it too
                    // lets the others reach the last frame first.
                    let linger = max(lingerSeconds, match.admission.coordinatorEndpoint != nil && match.isHost ? 1 : 0)
                    if linger > 0 {
                        // Playing on as before (the script, not a sudden zero input the others
                        // would have mispredicted: a rollback as deep as they run ahead).
                        let until = Date().addingTimeInterval(linger)
                        while Date() < until {
                            match.tick(input: script(max(match.slot, 1), match.currentFrame))
                            usleep(5_000)
                        }
                    }
                }
                // Detaches from the relay and tells the coordinator (its place freed; the
                // host's leave ends the session), then waits for that before exiting.
                match.leave()
                match.waitUntilLeft(seconds: 2)
                usleep(150_000)  // let the Detach leave before the process does
                emit("HUD \(label): \(hud.line)")
                emit(result)
                exit(0)
            }
            if match.firstFrameIsNear {
                // The start and its moment are noticed within a millisecond, not a frame.
                usleep(1_000)
                nextTick = .now
                continue
            }
            nextTick = nextTick.advanced(by: .nanoseconds(Int64(1e9 / framesPerSecond * match.frameIntervalScale)))
            let now = ContinuousClock.now
            if nextTick > now { Thread.sleep(forTimeInterval: (nextTick - now) / .seconds(1)) }
            else if now - nextTick > .milliseconds(100) { nextTick = now }
        }
    }

    private var framesPerSecond: Double { match.params.framesPerSecond }

    /// The checksum at the target frame once known: players take the checksum their engine
    /// reported for it (confirmed); spectators hash their game on reaching it.
    private func finished() -> UInt64? {
        if match.role == .player { return match.reportedChecksums[options.frames] }
        return match.currentFrame >= options.frames ? match.game.checksum() : nil
    }

    func log(_ text: String) {
        FileHandle.standardError.write(Data("netplay-peer[\(label)]: \(text)\n".utf8))
    }

    func fail(_ text: String) -> Never {
        log(text)
        emit("FAILED \(text)")
        exit(1)
    }
}

/// Plays `game` in a match for `admission` with the options' chaos and inputs.
func play<G: SerializableGame>(_ base: G, script: @escaping (Int, Int) -> GameInput, admission: Admission, options: PeerSettings,
                               content: ContentInfo?, gameOptions: [UInt8], label: String, resultSuffix: String = "",
                               onRunning: (() -> Void)? = nil, lingerSeconds: Double = 0, players: Int,
                               hostStart: HostStart = HostStart()) throws -> Never {
    var game = DesyncingGame(base: base, corruptAtFrame: options.desyncAt)
    hostStart.warmUp(&game, players: players, script: script)
    var matchOptions = NetplayMatchOptions()
    matchOptions.clientVersion = "netplay-peer \(NetplayVersion.current)"
    matchOptions.conditions = options.conditions
    matchOptions.paths = options.paths
    matchOptions.pathsOnLoss = options.pathsOnLoss
    matchOptions.content = content
    matchOptions.gameOptions = gameOptions
    matchOptions.pacing = options.pacing
    matchOptions.startFromHostState = hostStart.fromHostState
    if admission.role == .spectator { matchOptions.stopAtFrame = options.frames }
    // Cluster rooms encrypt like the cluster; a LAN room's in-process relay is plain.
    if admission.coordinatorEndpoint != nil { matchOptions.serverKey = options.serverKey }
    let match = try NetplayMatch(game: game, admission: admission, options: matchOptions)
    var runner = PeerRunner(options: options, match: match, script: script, label: label)
    runner.resultSuffix = resultSuffix
    runner.onRunning = onRunning
    runner.lingerSeconds = lingerSeconds
    runner.restart = hostStart.restartAt.map { ($0, game.saveState()) }
    try runner.run()
}

/// Dispatches on the sample game (joiners learn it from the room's core id). The game holds as
/// many players as the session the ticket admits to: a room whose size the game cannot take
/// (another peer chose it) is refused with a reason.
func play(sample: SampleGame, seed: UInt64, admission: Admission, options: PeerSettings,
          host: Bool, label: String, onRunning: (() -> Void)? = nil, lingerSeconds: Double = 0,
          hostStart: HostStart = HostStart()) throws -> Never {
    let players = Int(admission.ticket.params.maxPlayers)
    try sample.checkPlayers(players)
    let gameOptions = SampleGame.options(game: sample, players: players, seed: seed)
    let content = host ? sample.content() : nil
    let kind = options.inputs
    let script = { (slot: Int, frame: Int) in InputScript(kind: kind, seed: options.inputSeed, slot: slot, game: sample).input(frame: frame) }
    switch sample {
    case .arena:
        try play(Arena(playerCount: players, seed: seed), script: script, admission: admission, options: options,
                 content: content, gameOptions: gameOptions, label: label, onRunning: onRunning, lingerSeconds: lingerSeconds,
                 players: players, hostStart: hostStart)
    case .pd:
        try play(PrisonersDilemma(maxRounds: 1_000_000), script: script, admission: admission, options: options,
                 content: content, gameOptions: gameOptions, label: label, onRunning: onRunning, lingerSeconds: lingerSeconds,
                 players: players, hostStart: hostStart)
    }
}

/// Plays a loaded libretro core in a match for `admission`.
func playCore(_ loaded: LoadedCore, players: Int, admission: Admission, options: PeerSettings, host: Bool, label: String,
              onRunning: (() -> Void)? = nil, lingerSeconds: Double = 0, hostStart: HostStart = HostStart()) throws -> Never {
    let sessionInputSize = Int(admission.ticket.params.inputSize)
    guard sessionInputSize == loaded.inputLayout.inputSize else {
        let hostLayout = LibretroInputLayout(inputSize: sessionInputSize)?.rawValue ?? "\(sessionInputSize)-byte"
        throw ValidationError("the room's core inputs are \(hostLayout) (\(sessionInputSize) bytes), not "
                              + "\(loaded.inputLayout.rawValue): pass --core-input \(hostLayout)")
    }
    let game = SerializableCoreGame(game: try LibretroGame(core: loaded.core, playerCount: players, buttonMask: loaded.buttonMask,
                                                           inputLayout: loaded.inputLayout))
    let kind = options.inputs
    let script = { (slot: Int, frame: Int) in
        CoreInputScript(kind: kind, seed: options.inputSeed, slot: slot, layout: loaded.inputLayout).input(frame: frame)
    }
    try play(game, script: script, admission: admission, options: options, content: host ? ContentInfo(loaded.content) : nil,
             gameOptions: loaded.gameOptions(players: players), label: label,
             resultSuffix: " initial=0x\(String(loaded.initialChecksum, radix: 16))", onRunning: onRunning, lingerSeconds: lingerSeconds,
             players: players, hostStart: hostStart)
}

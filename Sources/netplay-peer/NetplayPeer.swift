import ArgumentParser
import Foundation
import Games
import InputSync
import Libretro
import NetplayKit
import NetplayService
import NetplayWire
import Rollback

/// `netplay-peer`: a headless client. Hosts, joins or spectates through the cluster (or the
/// LAN) and plays a sample game, or a libretro core with its content (`--core`, `--content`),
/// under the rollback engine with scripted or random inputs and simulated network conditions;
/// or replays a relay's replay file. Ends with one line: `RESULT frames=N checksum=0x...`.
@main
struct NetplayPeer: NetplayCommand {
    static let configuration = CommandConfiguration(
        commandName: "netplay-peer",
        abstract: "Headless netplay client: host, join, spectate or replay a sample game or a libretro core.",
        discussion: """
            A libretro core (e.g. nestopia) plays like the sample games: pass --core PATH --content FILE \
            to host, join, spectate and replay (every peer needs the same core build and content; the \
            coordinator checks CRC32, MD5, core id and version). Inputs are 2-byte joypad masks; for \
            nestopia only A, B, Select, Start and the D-pad reach the core (--buttons). The host's frame \
            rate defaults to the core's. Every peer loads the core with deterministic heap contents, so \
            all start from the same state (RESULT's initial=).
            """,
        subcommands: [Host.self, Join.self, Spectate.self, Replay.self, Demo.self])

    static func main() { mainReportingOneLine() }
}

/// Options every playing subcommand takes.
struct PeerOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Discovery endpoint (env NETPLAY_DISCOVERY, default \(ServiceDefaults.discoveryEndpoint)).", valueName: "endpoint"))
    var discovery: String?
    @Option(help: ArgumentHelp("Coordinator endpoint (env NETPLAY_COORDINATOR, default \(ServiceDefaults.coordinatorEndpoint)).", valueName: "endpoint"))
    var coordinator: String?
    @OptionGroup var curve: CurveClientOptions
    @Option(help: ArgumentHelp("Connections to the relay carrying the same inputs, 1 ... 4 (env NETPLAY_PATHS, default 3).", valueName: "n"))
    var paths: String?
    @Option(help: ArgumentHelp("Connections once the link shows loss (a broadcast held back on one while another brought it), 1 ... 4 (env NETPLAY_PATHS_ON_LOSS, default 4).", valueName: "n"))
    var pathsOnLoss: String?
    @Option(help: "Display name.") var name: String?
    @Option(help: "Room name to host or to look for.") var room = "netplay-peer room"
    @Option(help: "Sample game: arena or pd (host; joiners take the host's).") var game = "arena"
    @Option(help: ArgumentHelp("A libretro core to play instead of a sample game (with --content).", valueName: "path"))
    var core: String?
    @Option(help: ArgumentHelp("The content (ROM) the core plays; every peer needs the same file.", valueName: "file"))
    var content: String?
    @Option(help: "Core buttons passed on: nes (A, B, Select, Start, D-pad; nestopia's default), all, or a hex mask.")
    var buttons: String?
    @Option(help: "Stop after this many frames (players: a multiple of the checksum interval).") var frames = 3000
    @Option(help: "Inputs: random, idle, cooperate or defect.") var inputs = "random"
    @Option(help: "Seed of the random inputs.") var inputSeed: UInt64 = 7
    @Option(help: "Simulated round trip to the relay, ms.") var rtt = 0
    @Option(help: "Simulated jitter, ms.") var jitter = 0
    @Option(help: "Simulated loss of input messages, 0 ... 1.") var loss = 0.0
    @Option(help: "Freeze this peer at this frame ...") var lagAt: Int?
    @Option(help: "... for this many ms (a weak client).") var lagMs = 1500
    @Option(help: "Cut this peer's link at this frame ...") var outageAt: Int?
    @Option(help: "... for this many ms (it reconnects).") var outageMs = 2500
    @Option(help: "Corrupt this peer's game state at this frame (an injected desync).") var desyncAt: Int?
    @Option(help: "Print the HUD every this many seconds (0 = never).") var hudEvery = 0.0
    @Option(help: "Render the game every this many frames (0 = never).") var renderEvery = 0
    @Option(help: "Give up after this many seconds.") var timeout = 300.0
    @Option(help: "Time sync: frame-rate (stretch this peer's own frame interval by up to 8 %; the default, this headless peer sets its own timing) or whole-frames (skip or double a frame now and then, as a vsync frontend does).")
    var pacing = "frame-rate"
    @Option(help: "Look on the LAN for rooms (join/spectate) listening this many ms; 0 = lobby.") var lanListenMs = 0
    @Option(help: "UDP port of LAN beacons.") var lanPort: UInt16 = LanBeacon.defaultPort

    func lobby() throws -> NetplayLobby {
        let environment = ProcessInfo.processInfo.environment
        let discovery = self.discovery ?? environment["NETPLAY_DISCOVERY"] ?? ServiceDefaults.discoveryEndpoint
        let coordinator = self.coordinator ?? environment["NETPLAY_COORDINATOR"] ?? ServiceDefaults.coordinatorEndpoint
        try EndpointValidator.validate(discovery, name: "--discovery")
        try EndpointValidator.validate(coordinator, name: "--coordinator")
        return NetplayLobby(discovery: discovery, coordinator: coordinator, lanBeaconPort: lanPort, serverKey: try curve.serverKey())
    }

    /// `--paths`, else NETPLAY_PATHS, else 3.
    func resolvedPaths() throws -> Int {
        try SettingResolver().integer(paths, "NETPLAY_PATHS", name: "--paths", default: 3, range: 1 ... NetplayMatchOptions.maxPaths)
    }

    /// `--paths-on-loss`, else NETPLAY_PATHS_ON_LOSS, else 4.
    func resolvedPathsOnLoss() throws -> Int {
        try SettingResolver().integer(pathsOnLoss, "NETPLAY_PATHS_ON_LOSS", name: "--paths-on-loss", default: 4,
                                      range: 1 ... NetplayMatchOptions.maxPaths)
    }

    func validate(player: Bool) throws {
        _ = try curve.serverKey()
        _ = try resolvedPaths()
        guard frames > 0 else { throw ValidationError("--frames must be > 0") }
        guard (0 ... 1).contains(loss) else { throw ValidationError("--loss must be between 0 and 1") }
        guard rtt >= 0, jitter >= 0 else { throw ValidationError("--rtt and --jitter must be >= 0") }
        guard pacing == "whole-frames" || pacing == "frame-rate" else { throw ValidationError("--pacing must be whole-frames or frame-rate") }
        guard InputScript.Kind(rawValue: inputs) != nil else { throw ValidationError("--inputs must be random, idle, cooperate or defect") }
        guard SampleGame(rawValue: game) != nil else { throw ValidationError("--game must be arena or pd") }
        guard (core == nil) == (content == nil) else { throw ValidationError("--core and --content go together") }
        if core != nil {
            guard inputs == "random" || inputs == "idle" else { throw ValidationError("with --core, --inputs must be random or idle") }
            guard desyncAt == nil else { throw ValidationError("--desync-at is for the sample games (it corrupts their state)") }
        }
    }

    /// Loads `--core` with `--content` for `players` players.
    func loadCore(players: Int) throws -> LoadedCore {
        guard let core, let content else { throw ValidationError("--core and --content are required") }
        let loaded = try LoadedCore.load(corePath: core, contentPath: content, players: players, buttons: buttons)
        FileHandle.standardError.write(Data("netplay-peer: \(loaded.summary)\n".utf8))
        return loaded
    }

    var conditions: NetworkConditions { NetworkConditions(rttMs: rtt, jitterMs: jitter, loss: loss, seed: inputSeed &+ 99) }

    /// Finds `room` in the lobby (or on the LAN), waiting for it to appear. Gives up at the
    /// deadline, saying why the last look failed when it did (e.g. an encrypted discovery
    /// service that does not answer without the cluster's key).
    func findRoom(_ lobby: NetplayLobby, deadline: Date) throws -> NetplayRoom {
        var lastError: Error?
        while Date() < deadline {
            do {
                let rooms = lanListenMs > 0 ? try lobby.lanRooms(listeningFor: lanListenMs)
                    : try lobby.lobbyRooms(filter: RoomFilter(includeInProgress: true))
                lastError = nil
                if let found = rooms.first(where: { $0.roomName == room }) { return found }
            } catch {
                lastError = error
            }
            usleep(200_000)
        }
        throw ValidationError("room '\(room)' not found before the timeout" + (lastError.map { ": \($0)" } ?? ""))
    }
}

/// The common game loop: ticks the match at the session's frame rate, applies the chaos options,
/// stops at the target frame and prints the result line.
struct PeerRunner<G: SerializableGame> {
    let options: PeerOptions
    let match: NetplayMatch<G>
    /// The input of (slot, frame).
    let script: (Int, Int) -> GameInput
    let label: String
    /// Appended to the RESULT line.
    var resultSuffix = ""
    var onRunning: (() -> Void)?
    /// Seconds to keep ticking after finishing (a LAN host serves the others meanwhile).
    var lingerSeconds = 0.0

    func run() throws -> Never {
        let deadline = Date().addingTimeInterval(options.timeout)
        match.start()
        var lagDone = false, outageDone = false, announced = false
        var lastHud = Date()
        var nextTick = ContinuousClock.now
        var reconnects = 0
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
                usleep(UInt32(options.lagMs) * 1000)
                nextTick = .now
            }
            if let outageAt = options.outageAt, !outageDone, frame >= outageAt {
                outageDone = true
                log("cutting the link for \(options.outageMs) ms at frame \(frame)")
                match.simulateOutage(milliseconds: options.outageMs)
            }
            let slot = max(match.slot, 1)
            let result = match.tick(input: script(slot, frame))
            if result.running && !announced {
                announced = true
                log("match running from frame \(match.startFrame) as \(match.role == .player ? "P\(match.slot)" : "spectator")")
                onRunning?()
            }
            if options.renderEvery > 0, result.framesAdvanced > 0, match.currentFrame % options.renderEvery < result.framesAdvanced {
                emit(Renderer.render(match.game, frame: match.currentFrame))
            }
            if options.hudEvery > 0, match.events.count > seenEvents {
                for event in match.events.suffix(match.events.count - seenEvents) { log("event: \(event)") }
            }
            seenEvents = match.events.count
            if options.hudEvery > 0, Date().timeIntervalSince(lastHud) >= options.hudEvery {
                lastHud = Date()
                emit("HUD \(label): \(match.hud.line) state=\(match.state)")
            }
            if case .disconnected(let reason) = match.state { fail("disconnected: \(reason)") }
            if let checksum = finished() {
                reconnects = match.events.filter { if case .reconnected = $0 { true } else { false } }.count
                let hud = match.hud
                let desyncEvents = match.events.filter { if case .desync = $0 { true } else { false } }.count
                let loaded = match.events.filter { if case .stateLoaded = $0 { true } else { false } }.count
                if match.role == .player {
                    // A LAN host's process is the relay: give the others time to finish first.
                    if lingerSeconds > 0 {
                        let until = Date().addingTimeInterval(lingerSeconds)
                        while Date() < until {
                            match.tick(input: .zero)
                            usleep(5_000)
                        }
                    }
                }
                match.leave()
                usleep(150_000)  // let the Detach leave before the process does
                emit("HUD \(label): \(hud.line)")
                emit("RESULT frames=\(options.frames) checksum=0x\(String(checksum, radix: 16)) role=\(match.role == .player ? "player" : "spectator") "
                      + "slot=\(match.slot) start=\(match.startFrame) rollbacks=\(hud.rollbacks) substituted_seen=\(match.substitutedInputsSeen) "
                      + "max_stall_ms=\(match.longestStallMs) desync_notices=\(desyncEvents) states_loaded=\(loaded) reconnects=\(reconnects) "
                      + "rollback_frames=\(hud.rollbackFrames) max_rollback=\(hud.maxRollbackFrames) stalls_over_2=\(match.stallsOverTwoFrames) "
                      + "own_substituted=\(match.ownInputsSubstituted) frame_delay=\(hud.frameDelay) ping_ms=\(hud.pingMs)"
                      + resultSuffix)
                exit(0)
            }
            nextTick = nextTick.advanced(by: .nanoseconds(Int64(1e9 / framesPerSecond * match.frameIntervalScale)))
            let now = ContinuousClock.now
            if nextTick > now { Thread.sleep(forTimeInterval: Double((nextTick - now).components.attoseconds) / 1e18) }
            else if now - nextTick > .milliseconds(100) { nextTick = now }
        }
    }

    private var framesPerSecond: Double { max(1, Double(match.params.frameRateMhz) / 1000) }

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
func play<G: SerializableGame>(_ base: G, script: @escaping (Int, Int) -> GameInput, admission: Admission, options: PeerOptions,
                               content: ContentInfo?, gameOptions: [UInt8], label: String, resultSuffix: String = "",
                               onRunning: (() -> Void)? = nil, lingerSeconds: Double = 0) throws -> Never {
    let game = DesyncingGame(base: base, corruptAtFrame: options.desyncAt)
    var matchOptions = NetplayMatchOptions()
    matchOptions.clientVersion = "netplay-peer \(NetplayVersion.current)"
    matchOptions.conditions = options.conditions
    matchOptions.paths = try options.resolvedPaths()
    matchOptions.pathsOnLoss = try options.resolvedPathsOnLoss()
    matchOptions.content = content
    matchOptions.gameOptions = gameOptions
    matchOptions.pacing = options.pacing == "frame-rate" ? .frameRate : .wholeFrames
    if admission.role == .spectator { matchOptions.stopAtFrame = options.frames }
    // Cluster rooms encrypt like the cluster; a LAN room's in-process relay is plain.
    if admission.coordinatorEndpoint != nil { matchOptions.serverKey = try options.curve.serverKey() }
    let match = try NetplayMatch(game: game, admission: admission, options: matchOptions)
    var runner = PeerRunner(options: options, match: match, script: script, label: label)
    runner.resultSuffix = resultSuffix
    runner.onRunning = onRunning
    runner.lingerSeconds = lingerSeconds
    try runner.run()
}

/// Dispatches on the sample game (joiners learn it from the room's core id).
func play(sample: SampleGame, players: Int, seed: UInt64, admission: Admission, options: PeerOptions,
          host: Bool, label: String, onRunning: (() -> Void)? = nil, lingerSeconds: Double = 0) throws -> Never {
    let gameOptions = SampleGame.options(game: sample, players: players, seed: seed)
    let content = host ? sample.content() : nil
    let kind = InputScript.Kind(rawValue: options.inputs) ?? .random
    let script = { (slot: Int, frame: Int) in InputScript(kind: kind, seed: options.inputSeed, slot: slot, game: sample).input(frame: frame) }
    switch sample {
    case .arena:
        try play(Arena(playerCount: max(players, 2), seed: seed), script: script, admission: admission, options: options,
                 content: content, gameOptions: gameOptions, label: label, onRunning: onRunning, lingerSeconds: lingerSeconds)
    case .pd:
        try play(PrisonersDilemma(maxRounds: 1_000_000), script: script, admission: admission, options: options,
                 content: content, gameOptions: gameOptions, label: label, onRunning: onRunning, lingerSeconds: lingerSeconds)
    }
}

/// Plays a loaded libretro core in a match for `admission`.
func playCore(_ loaded: LoadedCore, players: Int, admission: Admission, options: PeerOptions, host: Bool, label: String,
              onRunning: (() -> Void)? = nil, lingerSeconds: Double = 0) throws -> Never {
    let game = CoreGame(game: try LibretroGame(core: loaded.core, playerCount: players, buttonMask: loaded.buttonMask))
    let kind = InputScript.Kind(rawValue: options.inputs) ?? .random
    let script = { (slot: Int, frame: Int) in CoreInputScript(kind: kind, seed: options.inputSeed, slot: slot).input(frame: frame) }
    try play(game, script: script, admission: admission, options: options, content: host ? loaded.content : nil,
             gameOptions: loaded.gameOptions(players: players), label: label,
             resultSuffix: " initial=0x\(String(loaded.initialChecksum, radix: 16))", onRunning: onRunning, lingerSeconds: lingerSeconds)
}

struct Host: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Host a room (through the cluster, or on the LAN) and play in slot 1.")

    @OptionGroup var options: PeerOptions
    @Option(help: "Player slots (2 ... 8; the match starts when all are in).") var players = 2
    @Option(help: "Input delay: auto (the relay chooses it from the round trips it measures and changes it when they move; every player uses it) or 0 ... 15 frames.")
    var frameDelay = "auto"
    @Option(help: "Rollback window in frames.") var predictionWindow = 12
    @Option(help: "Frames a player may lag before substitution.") var lagTolerance = 12
    @Option(help: "Checksum every this many frames.") var checksumInterval = 60
    @Option(help: "Spectator delay in frames.") var spectatorDelay = 0
    @Option(help: "Spectator places (0: none).") var maxSpectators = 4
    @Option(help: "Frames per second (default: the core's rate, or 60; tests run faster).") var frameRate: Double?
    @Option(help: "Play password.") var password: String?
    @Option(help: "Game seed.") var seed: UInt64 = 1
    @Flag(help: "Host on the LAN (in-process relay announced by beacon) instead of through the cluster.") var lan = false
    @Option(help: "LAN: where beacons go (HOST or HOST:PORT).") var lanBeacon = "255.255.255.255"
    @Option(help: "LAN: the address joiners reach the relay on (default: this machine's LAN address).") var lanAddress: String?

    func validate() throws {
        try options.validate(player: true)
        if let frameRate { guard frameRate > 0 && frameRate <= 1000 else { throw ValidationError("--frame-rate must be in 0 ... 1000") } }
        guard frameDelay == "auto" || Int(frameDelay).map({ (0 ... 15).contains($0) }) == true else {
            throw ValidationError("--frame-delay must be auto or 0 ... 15, got '\(frameDelay)'")
        }
        guard (2 ... 8).contains(players) else { throw ValidationError("--players must be 2 ... 8") }
        guard checksumInterval > 0, options.frames % checksumInterval == 0 else {
            throw ValidationError("--frames must be a multiple of --checksum-interval (the final checksum is a reported one)")
        }
        if options.game == "pd" && players != 2 { throw ValidationError("the prisoner's dilemma takes exactly 2 players") }
    }

    func run() throws {
        let sample = SampleGame(rawValue: options.game)!
        let name = options.name ?? "host"
        let loaded = options.core != nil ? try options.loadCore(players: players) : nil
        let content = loaded?.content ?? sample.content()
        let inputSize = loaded != nil ? LibretroGame.inputSize : sample.inputSize
        let frameRate = self.frameRate ?? loaded?.core.avInfo.framesPerSecond ?? 60
        var settings = NetplaySettings(roomName: options.room)
        settings.maxPlayers = players
        settings.automaticFrameDelay = frameDelay == "auto"
        settings.frameDelay = Int(frameDelay) ?? 2
        settings.predictionWindow = predictionWindow
        settings.lagTolerance = lagTolerance
        settings.checksumInterval = checksumInterval
        settings.spectatorDelay = spectatorDelay
        settings.allowSpectators = maxSpectators > 0
        settings.maxSpectators = maxSpectators
        settings.password = password
        settings.frameRateMilliHertz = Int(frameRate * 1000)
        settings.network = lan ? .lan : .relay
        let admission: Admission
        var lanHost: LanHost?
        let lobby = try options.lobby()
        if lan {
            let parts = lanBeacon.split(separator: ":")
            let beaconPort = parts.count > 1 ? UInt16(parts[1]) ?? options.lanPort : options.lanPort
            let host = try LanHost(settings: settings, content: content, inputSize: inputSize, hostName: name,
                                   advertiseAddress: lanAddress, beaconHost: String(parts[0]), beaconPort: beaconPort)
            lanHost = host
            admission = host.admission
            FileHandle.standardError.write(Data("netplay-peer[host]: LAN room '\(options.room)' on \(host.endpoint)\n".utf8))
        } else {
            admission = try lobby.host(settings: settings, content: content, inputSize: inputSize, hostName: name)
            FileHandle.standardError.write(Data("netplay-peer[host]: room '\(options.room)' session \(admission.sessionId) on relay \(admission.relayEndpoint)\n".utf8))
        }
        _ = lanHost
        if let loaded {
            try playCore(loaded, players: players, admission: admission, options: options, host: true, label: name,
                         onRunning: { markStartedInBackground(lobby, admission) }, lingerSeconds: lan ? 5 : 0)
        }
        try play(sample: sample, players: players, seed: seed, admission: admission, options: options, host: true,
                 label: name, onRunning: { markStartedInBackground(lobby, admission) }, lingerSeconds: lan ? 5 : 0)
    }
}

/// Tells the coordinator the match started, off the game loop: the request takes a few round
/// trips to the coordinator (a fresh connection), and the host's own inputs must not wait for it
/// (on a 110 ms path they came ~440 ms late and the relay substituted them).
func markStartedInBackground(_ lobby: NetplayLobby, _ admission: Admission) {
    Thread.detachNewThread { try? lobby.markStarted(admission) }
}

/// Finds the room and joins it in `role`; learns the game from the room.
func joinAndPlay(_ options: PeerOptions, role: Role, password: String, label: String) throws -> Never {
    let lobby = try options.lobby()
    let room = try options.findRoom(lobby, deadline: Date().addingTimeInterval(min(options.timeout, 60)))
    if room.content.coreId.hasPrefix("libretro.") {
        guard options.core != nil else {
            throw ValidationError("room '\(room.roomName)' plays \(room.content.gameName) on the libretro core "
                                  + "\(room.content.coreId.dropFirst("libretro.".count)) \(room.content.coreVersion): pass --core and --content")
        }
        let loaded = try options.loadCore(players: room.maxPlayers)
        var lastError: Error?
        for _ in 0 ..< 20 {
            do {
                let admission = try lobby.join(room, name: options.name ?? label, role: role, password: password, content: loaded.content)
                try playCore(loaded, players: room.maxPlayers, admission: admission, options: options, host: false,
                             label: options.name ?? label)
            } catch let error as NetplayError where error.code == .unavailable || error.code == .noRelay {
                lastError = error
                usleep(300_000)
            }
        }
        throw lastError ?? ValidationError("could not join")
    }
    guard let sample = SampleGame.allCases.first(where: { $0.coreId == room.content.coreId }) ?? SampleGame(rawValue: options.game) else {
        throw ValidationError("room '\(room.roomName)' plays \(room.content.coreId), not a sample game")
    }
    var lastError: Error?
    for _ in 0 ..< 20 {
        do {
            let admission = try lobby.join(room, name: options.name ?? label, role: role, password: password,
                                           content: sample.content())
            try play(sample: sample, players: room.maxPlayers, seed: 1, admission: admission, options: options,
                     host: false, label: options.name ?? label)
        } catch let error as NetplayError where error.code == .unavailable || error.code == .noRelay {
            lastError = error
            usleep(300_000)
        }
    }
    throw lastError ?? ValidationError("could not join")
}

struct Join: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Join a room as a player.")
    @OptionGroup var options: PeerOptions
    @Option(help: "Play password.") var password = ""

    func validate() throws { try options.validate(player: true) }
    func run() throws { try joinAndPlay(options, role: .player, password: password, label: "join") }
}

struct Spectate: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Watch a room (mid-match joins start from a state snapshot).")
    @OptionGroup var options: PeerOptions
    @Option(help: "Spectate password.") var password = ""

    func validate() throws { try options.validate(player: false) }
    func run() throws { try joinAndPlay(options, role: .spectator, password: password, label: "spectate") }
}

struct Replay: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Replay a relay's replay file and check its checksums.")

    @Argument(help: "The replay file (under the relay's data dir, replays/).") var file: String
    @Option(help: "Stop at this frame (default: every recorded frame).") var frames: Int?
    @Option(help: ArgumentHelp("The libretro core of a core match (with --content).", valueName: "path")) var core: String?
    @Option(help: ArgumentHelp("The content of a core match.", valueName: "file")) var content: String?

    func run() throws {
        let replay: ReplayFile
        do { replay = try ReplayFile(contentsOf: URL(fileURLWithPath: file)) } catch {
            throw ValidationError("\(error)")
        }
        if replay.header.content.coreId.hasPrefix("libretro.") || core != nil {
            try replayCore(replay)
        }
        guard let (sample, players, seed) = SampleGame.parse(options: replay.header.gameOptions,
                                                              coreId: replay.header.content.coreId) else {
            throw ValidationError("the replay's game options do not name a sample game")
        }
        guard replay.startFrame == 0 else { throw ValidationError("the replay starts at frame \(replay.startFrame), not 0") }
        let end = min(frames ?? replay.frameCount, replay.frameCount)
        switch sample {
        case .arena: try replayGame(Arena(playerCount: max(players, 2), seed: seed), replay, end: end)
        case .pd: try replayGame(PrisonersDilemma(maxRounds: 1_000_000), replay, end: end)
        }
    }

    /// A core match: the same core and content, loaded like the players loaded them, start
    /// from the same state (checked against the initial checksum the host recorded).
    func replayCore(_ replay: ReplayFile) throws -> Never {
        guard let core, let content else { throw ValidationError("this replay is of a libretro core: pass --core and --content") }
        guard let (players, buttons, initial) = LoadedCore.parse(options: replay.header.gameOptions) else {
            throw ValidationError("the replay's game options do not describe a libretro match")
        }
        guard replay.startFrame == 0 else { throw ValidationError("the replay starts at frame \(replay.startFrame), not 0") }
        let loaded = try LoadedCore.load(corePath: core, contentPath: content, players: players, buttons: String(buttons, radix: 16))
        let recorded = replay.header.content
        guard loaded.content.crc32 == recorded.crc32, loaded.content.coreId == recorded.coreId,
              loaded.content.coreVersion == recorded.coreVersion else {
            throw ValidationError("the replay was recorded with \(recorded.coreId) \(recorded.coreVersion) and content CRC32 "
                                  + String(format: "%08X", recorded.crc32) + ", not \(loaded.content.coreId) \(loaded.content.coreVersion) and "
                                  + String(format: "%08X", loaded.content.crc32))
        }
        guard loaded.initialChecksum == initial else {
            throw ValidationError("the core starts in state 0x\(String(loaded.initialChecksum, radix: 16)), the match started in "
                                  + "0x\(String(initial, radix: 16)): another core build or options")
        }
        let end = min(frames ?? replay.frameCount, replay.frameCount)
        try replayGame(try LibretroGame(core: loaded.core, playerCount: players, buttonMask: JoypadButtons(rawValue: buttons)), replay, end: end)
    }

    func replayGame<G: Game>(_ start: G, _ replay: ReplayFile, end: Int) throws -> Never {
        var game = start
        var checked = 0, mismatches: [Int] = []
        let slots = replay.slotCount
        for frame in 0 ..< end {
            if let expected = replay.checksums[frame] {
                checked += 1
                if game.checksum() != expected { mismatches.append(frame) }
            }
            var inputs: [GameInput] = []
            var statuses: [Rollback.InputStatus] = []
            for slot in 0 ..< slots {
                let status = replay.status(frame: frame, slot: slot)
                switch status {
                case .disconnected, .empty:
                    inputs.append(.zero)
                    statuses.append(.disconnected)
                case .substituted:
                    inputs.append(GameInput(bytes: replay.input(frame: frame, slot: slot)))
                    statuses.append(.substituted)
                default:
                    inputs.append(GameInput(bytes: replay.input(frame: frame, slot: slot)))
                    statuses.append(.confirmed)
                }
            }
            game.advanceFrame(FrameInputs(frame: frame, inputs: inputs, statuses: statuses))
        }
        if let expected = replay.checksums[end] {
            checked += 1
            if game.checksum() != expected { mismatches.append(end) }
        }
        let checksum = game.checksum()
        if !mismatches.isEmpty {
            emit("FAILED replay checksums differ at frames \(mismatches.prefix(10))")
            Foundation.exit(1)
        }
        emit("RESULT frames=\(end) checksum=0x\(String(checksum, radix: 16)) role=replay checked_checksums=\(checked) recorded_frames=\(replay.frameCount)")
        Foundation.exit(0)
    }
}

/// Writes one line to standard output at once (unbuffered, so test harnesses see it).
func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

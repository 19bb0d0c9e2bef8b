import ArgumentParser
import Foundation
import Games
import InputSync
import Libretro
import NetplayKit
import NetplayService
import NetplayWire
import Rollback

// The playing subcommands: host, join and spectate a room.

struct Host: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Host a room (through the cluster, or on the LAN) and play in slot 1.")

    @OptionGroup var options: PeerOptions
    @Option(help: ArgumentHelp("Player slots, 2 ... 8; the match starts when all are in (env NETPLAY_PLAYERS, default 2).", valueName: "n"))
    var players: String?
    @Option(help: ArgumentHelp("Input delay: auto (the relay chooses it from the round trips it measures and changes it when they move; every player uses it) or 0 ... 15 frames (env NETPLAY_FRAME_DELAY, default auto).", valueName: "auto|frames"))
    var frameDelay: String?
    @Option(help: ArgumentHelp("Rollback window, 1 ... 32 frames (env NETPLAY_PREDICTION_WINDOW, default 12).", valueName: "frames"))
    var predictionWindow: String?
    @Option(help: ArgumentHelp("Frames a player may lag before substitution, 1 ... 600 (env NETPLAY_LAG_TOLERANCE, default 12).", valueName: "frames"))
    var lagTolerance: String?
    @Option(help: ArgumentHelp("Checksum every this many frames, 1 ... 3600 (env NETPLAY_CHECKSUM_INTERVAL, default 60).", valueName: "frames"))
    var checksumInterval: String?
    @Option(help: ArgumentHelp("Spectator delay, 0 ... 3600 frames (env NETPLAY_SPECTATOR_DELAY, default 0).", valueName: "frames"))
    var spectatorDelay: String?
    @Option(help: ArgumentHelp("Spectator places, 0 (none) ... 64 (env NETPLAY_MAX_SPECTATORS, default 4).", valueName: "n"))
    var maxSpectators: String?
    @Option(help: ArgumentHelp("Frames per second, up to 1000; tests run faster (env NETPLAY_FRAME_RATE; default: the core's rate, or 60).", valueName: "hz"))
    var frameRate: String?
    @Option(help: ArgumentHelp("Play password (env NETPLAY_PASSWORD; default none).", valueName: "password"))
    var password: String?
    @Option(help: ArgumentHelp("Game seed (env NETPLAY_SEED, default 1).", valueName: "n"))
    var seed: String?
    @Flag(help: "Host on the LAN (in-process relay announced by beacon) instead of through the cluster (env NETPLAY_LAN=1).")
    var lan = false
    @Option(help: ArgumentHelp("LAN: where beacons go, HOST or HOST:PORT (env NETPLAY_LAN_BEACON, default 255.255.255.255).", valueName: "address"))
    var lanBeacon: String?
    @Option(help: ArgumentHelp("LAN: the address joiners reach the relay on (env NETPLAY_LAN_ADDRESS; default: this machine's LAN address).", valueName: "address"))
    var lanAddress: String?
    @Option(help: ArgumentHelp("Play this many frames alone with the input script before hosting, so the match starts mid-game (env NETPLAY_WARMUP_FRAMES, default 0).", valueName: "n"))
    var warmupFrames: String?
    @Option(help: ArgumentHelp("Where everyone starts: host (the host's game as it is, sent to every joiner and spectator before frame 0; the host's state wins desync votes), boot (each peer's own fresh boot) or auto (host after --warmup-frames, else boot) (env NETPLAY_START_STATE, default auto).", valueName: "auto|host|boot"))
    var startState: String?
    @Option(help: ArgumentHelp("At this match frame, restart the match for everyone from the state it started from (env NETPLAY_RESTART_AT; default never).", valueName: "frame"))
    var restartAt: String?

    /// What the host runs with: the peer's settings and the room's.
    struct Resolved {
        var peer: PeerSettings
        var players = 2
        /// nil: automatic.
        var frameDelay: Int?
        var predictionWindow = 12
        var lagTolerance = 12
        var checksumInterval = 60
        var spectatorDelay = 0
        var maxSpectators = 4
        /// nil: the core's rate, or 60.
        var frameRate: Double?
        var password: String?
        var seed: UInt64 = 1
        var lan = false
        var beaconHost = "255.255.255.255"
        var beaconPort = LanBeacon.defaultPort
        var lanAddress: String?
        var start: HostStart
    }

    /// The flags, else their variables, else the defaults, checked together (a prisoner's
    /// dilemma for two, a final checksum that is a reported one).
    func resolve(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Resolved {
        let setting = SettingResolver(environment: environment)
        var host = Resolved(peer: try options.resolve(environment: environment),
                            start: try HostStart(warmupFrames: warmupFrames, startState: startState, restartAt: restartAt, resolver: setting))
        host.players = try setting.integer(players, "NETPLAY_PLAYERS", name: "--players", default: 2, range: 2 ... 8)
        let delay = setting.text(frameDelay, "NETPLAY_FRAME_DELAY", default: "auto")
        if delay.lowercased() != "auto" {
            guard let frames = Int(delay), (0 ... 15).contains(frames) else {
                throw ValidationError("--frame-delay must be auto or 0 ... 15, got '\(delay)'")
            }
            host.frameDelay = frames
        }
        host.predictionWindow = try setting.integer(predictionWindow, "NETPLAY_PREDICTION_WINDOW", name: "--prediction-window",
                                                    default: 12, range: 1 ... 32)
        host.lagTolerance = try setting.integer(lagTolerance, "NETPLAY_LAG_TOLERANCE", name: "--lag-tolerance", default: 12, range: 1 ... 600)
        host.checksumInterval = try setting.integer(checksumInterval, "NETPLAY_CHECKSUM_INTERVAL", name: "--checksum-interval",
                                                    default: 60, range: 1 ... 3600)
        host.spectatorDelay = try setting.integer(spectatorDelay, "NETPLAY_SPECTATOR_DELAY", name: "--spectator-delay", default: 0,
                                                  range: 0 ... 3600)
        host.maxSpectators = try setting.integer(maxSpectators, "NETPLAY_MAX_SPECTATORS", name: "--max-spectators", default: 4, range: 0 ... 64)
        if setting.text(frameRate, "NETPLAY_FRAME_RATE") != nil {
            host.frameRate = try setting.number(frameRate, "NETPLAY_FRAME_RATE", name: "--frame-rate", default: 60, range: 1 ... 1000)
        }
        host.password = setting.text(password, "NETPLAY_PASSWORD")
        host.seed = UInt64(try setting.integer(seed, "NETPLAY_SEED", name: "--seed", default: 1, range: 0 ... Int.max))
        host.lan = try setting.isOn(lan, "NETPLAY_LAN")
        let beacon = setting.text(lanBeacon, "NETPLAY_LAN_BEACON", default: "255.255.255.255")
        let parts = beacon.split(separator: ":", omittingEmptySubsequences: false)
        host.beaconHost = String(parts[0])
        host.beaconPort = host.peer.lanPort
        if parts.count == 2, let port = UInt16(parts[1]), port > 0 {
            host.beaconPort = port
        } else if parts.count != 1 || host.beaconHost.isEmpty {
            throw ValidationError("--lan-beacon must be HOST or HOST:PORT, got '\(beacon)'")
        }
        host.lanAddress = setting.text(lanAddress, "NETPLAY_LAN_ADDRESS")
        guard host.peer.frames % host.checksumInterval == 0 else {
            throw ValidationError("--frames must be a multiple of --checksum-interval (the final checksum is a reported one)")
        }
        if host.peer.game == .pd && host.players != 2 { throw ValidationError("the prisoner's dilemma takes exactly 2 players") }
        return host
    }

    func run() throws {
        let host = try resolve()
        let options = host.peer
        let name = options.name ?? "host"
        let loaded = options.core != nil ? try options.loadCore(players: host.players) : nil
        let content = loaded.map { ContentInfo($0.content) } ?? options.game.content()
        let inputSize = loaded?.inputLayout.inputSize ?? options.game.inputSize
        let frameRate = host.frameRate ?? loaded?.core.avInfo.framesPerSecond ?? 60
        var settings = NetplaySettings(roomName: options.room)
        settings.maxPlayers = host.players
        settings.automaticFrameDelay = host.frameDelay == nil
        settings.frameDelay = host.frameDelay ?? 2
        settings.predictionWindow = host.predictionWindow
        settings.lagTolerance = host.lagTolerance
        settings.checksumInterval = host.checksumInterval
        settings.spectatorDelay = host.spectatorDelay
        settings.allowSpectators = host.maxSpectators > 0
        settings.maxSpectators = host.maxSpectators
        settings.password = host.password
        settings.frameRateMilliHertz = Int(frameRate * 1000)
        settings.network = host.lan ? .lan : .relay
        let admission: Admission
        var lanHost: LanHost?
        let lobby = options.lobby()
        if host.lan {
            let lan = try LanHost(settings: settings, content: content, inputSize: inputSize, hostName: name,
                                  advertiseAddress: host.lanAddress, beaconHost: host.beaconHost, beaconPort: host.beaconPort)
            lanHost = lan
            admission = lan.admission
            FileHandle.standardError.write(Data("netplay-peer[host]: LAN room '\(options.room)' on \(lan.endpoint)\n".utf8))
            emit("LINK " + NetplayInvite(lanSessionId: admission.sessionId, roomName: options.room, endpoint: lan.endpoint).url)
        } else {
            admission = try lobby.host(settings: settings, content: content, inputSize: inputSize, hostName: name)
            FileHandle.standardError.write(Data("netplay-peer[host]: room '\(options.room)' session \(admission.sessionId) on relay \(admission.relayEndpoint)\n".utf8))
            if let coordinator = lobby.coordinatorEndpoint {
                emit("LINK " + NetplayInvite(sessionId: admission.sessionId, roomName: options.room, discovery: lobby.discoveryEndpoint,
                                             coordinator: coordinator, serverKey: lobby.serverKey).url)
            }
        }
        _ = lanHost
        if let loaded {
            try playCore(loaded, players: host.players, admission: admission, options: options, host: true, label: name,
                         onRunning: { markStartedInBackground(lobby, admission) }, lingerSeconds: host.lan ? 5 : 0,
                         hostStart: host.start)
        }
        try play(sample: options.game, seed: host.seed, admission: admission, options: options, host: true,
                 label: name, onRunning: { markStartedInBackground(lobby, admission) }, lingerSeconds: host.lan ? 5 : 0,
                 hostStart: host.start)
    }
}

/// Tells the coordinator the match started, off the game loop: the request takes a round trip
/// to the coordinator at least (a lossy path can hold it for seconds), and the host's own inputs must not wait for it
/// (on a 110 ms path they came ~440 ms late and the relay substituted them).
func markStartedInBackground(_ lobby: NetplayLobby, _ admission: Admission) {
    Thread.detachNewThread { try? lobby.markStarted(admission) }
}

/// Finds the room (by `--room`, or the invite `link` names) and joins it in `role`; learns the
/// game from the room.
func joinAndPlay(_ options: PeerSettings, role: Role, password: String, label: String, link: String?) throws -> Never {
    var options = options
    let deadline = Date().addingTimeInterval(min(options.timeout, 60))
    let lobby: NetplayLobby, room: NetplayRoom
    if let link {
        let invite: NetplayInvite
        (invite, lobby, room) = try options.findRoom(link: link, deadline: deadline)
        // The match encrypts like the invite's cluster.
        if let key = invite.serverKeyZ85 { try options.useServerKey(key) }
    } else {
        lobby = options.lobby()
        room = try options.findRoom(lobby, deadline: deadline)
    }
    // A room known only from a LAN link (no beacon heard) does not say its size: the ticket does.
    func players(_ admission: Admission) -> Int { room.maxPlayers > 0 ? room.maxPlayers : Int(admission.ticket.params.maxPlayers) }
    if room.content.coreId.hasPrefix("libretro.") || (room.content.coreId.isEmpty && options.core != nil) {
        guard options.core != nil else {
            throw ValidationError("room '\(room.roomName)' plays \(room.content.gameName) on the libretro core "
                                  + "\(room.content.coreId.dropFirst("libretro.".count)) \(room.content.coreVersion): pass --core and --content")
        }
        let loaded = try options.loadCore(players: max(room.maxPlayers, 2))
        var lastError: Error?
        for _ in 0 ..< 20 {
            do {
                let admission = try lobby.join(room, name: options.name ?? label, role: role, password: password, content: ContentInfo(loaded.content))
                try playCore(loaded, players: players(admission), admission: admission, options: options, host: false,
                             label: options.name ?? label)
            } catch let error as NetplayError where error.code == .unavailable || error.code == .noRelay {
                lastError = error
                usleep(300_000)
            }
        }
        throw lastError ?? ValidationError("could not join")
    }
    guard let sample = SampleGame.allCases.first(where: { $0.coreId == room.content.coreId }) ?? Optional(options.game) else {
        throw ValidationError("room '\(room.roomName)' plays \(room.content.coreId), not a sample game")
    }
    var lastError: Error?
    for _ in 0 ..< 20 {
        do {
            let admission = try lobby.join(room, name: options.name ?? label, role: role, password: password,
                                           content: sample.content())
            try play(sample: sample, seed: 1, admission: admission, options: options,
                     host: false, label: options.name ?? label)
        } catch let error as NetplayError where error.code == .unavailable || error.code == .noRelay {
            lastError = error
            usleep(300_000)
        }
    }
    throw lastError ?? ValidationError("could not join")
}

/// `--link`: join through an invite instead of looking a room up by name.
struct InviteOption: ParsableArguments {
    @Option(help: ArgumentHelp("An invite link (netplay://join?..., as `host` prints on its LINK line) naming the room and its cluster; overrides --room, --discovery, --coordinator and --lan-listen-ms (env NETPLAY_JOIN_LINK).", valueName: "url"))
    var link: String?

    /// `--link`, else NETPLAY_JOIN_LINK, else nil (checked: a malformed link is a usage error).
    func resolved(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> String? {
        guard let text = SettingResolver(environment: environment).text(link, "NETPLAY_JOIN_LINK") else { return nil }
        do { _ = try NetplayInvite(url: text) } catch {
            throw ValidationError("\(link == nil ? "NETPLAY_JOIN_LINK" : "--link"): \(error)")
        }
        return text
    }
}

/// The room `join` and `spectate` enter: the peer's options and, instead of `--room`, an invite.
struct RoomEntryOptions: ParsableArguments {
    @OptionGroup var options: PeerOptions
    @OptionGroup var invite: InviteOption
}

/// What `join` and `spectate` share: a room found by `--room` or an invite link, its password,
/// and the same checks and loop; they differ in the role asked for.
protocol RoomEntryCommand: ParsableCommand {
    /// The role asked for.
    static var role: Role { get }
    /// The variable a password comes from when no flag gives one.
    static var passwordVariable: String { get }
    var entry: RoomEntryOptions { get }
    var password: String? { get }
}

extension RoomEntryCommand {
    /// The peer's settings, the password from its flag, else ``passwordVariable``, and the
    /// invite link (`--link`, else NETPLAY_JOIN_LINK), if any.
    func resolve(environment: [String: String] = ProcessInfo.processInfo.environment)
        throws -> (PeerSettings, password: String, link: String?) {
        let peer = try entry.options.resolve(environment: environment)
        return (peer, SettingResolver(environment: environment).text(password, Self.passwordVariable, default: ""),
                try entry.invite.resolved(environment: environment))
    }

    func run() throws {
        let (peer, password, link) = try resolve()
        try joinAndPlay(peer, role: Self.role, password: password, label: Self.role == .player ? "join" : "spectate", link: link)
    }
}

struct Join: RoomEntryCommand {
    static let configuration = CommandConfiguration(abstract: "Join a room as a player (found by --room, or through an invite --link).")
    static let role = Role.player
    static let passwordVariable = "NETPLAY_PASSWORD"
    @OptionGroup var entry: RoomEntryOptions
    @Option(help: ArgumentHelp("Play password (env NETPLAY_PASSWORD; default none).", valueName: "password"))
    var password: String?
}

struct Spectate: RoomEntryCommand {
    static let configuration = CommandConfiguration(abstract: "Watch a room (mid-match joins start from a state snapshot); found by --room, or through an invite --link.")
    static let role = Role.spectator
    static let passwordVariable = "NETPLAY_SPECTATE_PASSWORD"
    @OptionGroup var entry: RoomEntryOptions
    @Option(help: ArgumentHelp("Spectate password (env NETPLAY_SPECTATE_PASSWORD; default none).", valueName: "password"))
    var password: String?
}

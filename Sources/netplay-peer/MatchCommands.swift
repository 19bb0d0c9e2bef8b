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
    @Option(help: ArgumentHelp("Play this many frames alone with the input script before hosting, so the match starts mid-game (env NETPLAY_WARMUP_FRAMES, default 0).", valueName: "n"))
    var warmupFrames: String?
    @Option(help: ArgumentHelp("Where everyone starts: host (the host's game as it is, sent to every joiner and spectator before frame 0; the host's state wins desync votes), boot (each peer's own fresh boot) or auto (host after --warmup-frames, else boot) (env NETPLAY_START_STATE, default auto).", valueName: "auto|host|boot"))
    var startState: String?
    @Option(help: ArgumentHelp("At this match frame, restart the match for everyone from the state it started from (env NETPLAY_RESTART_AT; default never).", valueName: "frame"))
    var restartAt: String?

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
        _ = try hostStart()
    }

    func hostStart() throws -> HostStart {
        try HostStart(warmupFrames: warmupFrames, startState: startState, restartAt: restartAt)
    }

    func run() throws {
        let sample = SampleGame(rawValue: options.game)!
        let name = options.name ?? "host"
        let loaded = options.core != nil ? try options.loadCore(players: players) : nil
        let content = loaded.map { ContentInfo($0.content) } ?? sample.content()
        let inputSize = loaded?.inputLayout.inputSize ?? sample.inputSize
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
            emit("LINK " + NetplayInvite(lanSessionId: admission.sessionId, roomName: options.room, endpoint: host.endpoint).url)
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
            try playCore(loaded, players: players, admission: admission, options: options, host: true, label: name,
                         onRunning: { markStartedInBackground(lobby, admission) }, lingerSeconds: lan ? 5 : 0,
                         hostStart: try hostStart())
        }
        try play(sample: sample, players: players, seed: seed, admission: admission, options: options, host: true,
                 label: name, onRunning: { markStartedInBackground(lobby, admission) }, lingerSeconds: lan ? 5 : 0,
                 hostStart: try hostStart())
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
func joinAndPlay(_ options: PeerOptions, role: Role, password: String, label: String, link: String?) throws -> Never {
    var options = options
    let deadline = Date().addingTimeInterval(min(options.timeout, 60))
    let lobby: NetplayLobby, room: NetplayRoom
    if let link {
        let invite: NetplayInvite
        (invite, lobby, room) = try options.findRoom(link: link, deadline: deadline)
        // The match encrypts like the invite's cluster.
        if let key = invite.serverKeyZ85 { options.curve.curveServerKey = key }
    } else {
        lobby = try options.lobby()
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
    guard let sample = SampleGame.allCases.first(where: { $0.coreId == room.content.coreId }) ?? SampleGame(rawValue: options.game) else {
        throw ValidationError("room '\(room.roomName)' plays \(room.content.coreId), not a sample game")
    }
    var lastError: Error?
    for _ in 0 ..< 20 {
        do {
            let admission = try lobby.join(room, name: options.name ?? label, role: role, password: password,
                                           content: sample.content())
            try play(sample: sample, players: players(admission), seed: 1, admission: admission, options: options,
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
    var entry: RoomEntryOptions { get }
    var password: String { get }
}

extension RoomEntryCommand {
    func validate() throws {
        try entry.options.validate(player: Self.role == .player)
        _ = try entry.invite.resolved()
    }

    func run() throws {
        try joinAndPlay(entry.options, role: Self.role, password: password, label: Self.role == .player ? "join" : "spectate",
                        link: try entry.invite.resolved())
    }
}

struct Join: RoomEntryCommand {
    static let configuration = CommandConfiguration(abstract: "Join a room as a player (found by --room, or through an invite --link).")
    static let role = Role.player
    @OptionGroup var entry: RoomEntryOptions
    @Option(help: "Play password.") var password = ""
}

struct Spectate: RoomEntryCommand {
    static let configuration = CommandConfiguration(abstract: "Watch a room (mid-match joins start from a state snapshot); found by --room, or through an invite --link.")
    static let role = Role.spectator
    @OptionGroup var entry: RoomEntryOptions
    @Option(help: "Spectate password.") var password = ""
}

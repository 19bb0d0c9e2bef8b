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
    @Option(help: ArgumentHelp("Measure the round trip to every relay before hosting or joining and report it, so the coordinator picks the relay nearest the players: on or off (env NETPLAY_MEASURE_RELAYS, default on).", valueName: "on|off"))
    var measureRelays: String?
    @Option(help: "Display name.") var name: String?
    @Option(help: "Room name to host or to look for.") var room = "netplay-peer room"
    @Option(help: "Sample game: arena or pd (host; joiners take the host's).") var game = "arena"
    @Option(help: ArgumentHelp("A libretro core to play instead of a sample game (with --content).", valueName: "path"))
    var core: String?
    @Option(help: ArgumentHelp("The content (ROM) the core plays; every peer needs the same file.", valueName: "file"))
    var content: String?
    @Option(help: "Core buttons passed on: nes (A, B, Select, Start, D-pad; nestopia's default), all, or a hex mask.")
    var buttons: String?
    @Option(help: ArgumentHelp("What a core's inputs carry: joypad (2 bytes, buttons) or analog (10 bytes: buttons and two analog sticks, ports set to RETRO_DEVICE_ANALOG); every peer of the room must use the same (env NETPLAY_CORE_INPUT, default joypad).", valueName: "joypad|analog"))
    var coreInput: String?
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
        let setting = SettingResolver()
        let discovery = setting.text(self.discovery, "NETPLAY_DISCOVERY") ?? ServiceDefaults.discoveryEndpoint
        let coordinator = setting.text(self.coordinator, "NETPLAY_COORDINATOR") ?? ServiceDefaults.coordinatorEndpoint
        try EndpointValidator.validate(discovery, name: "--discovery")
        try EndpointValidator.validate(coordinator, name: "--coordinator")
        var lobby = NetplayLobby(discovery: discovery, coordinator: coordinator, lanBeaconPort: lanPort, serverKey: try curve.serverKey())
        lobby.measuresRelays = try SettingResolver().choice(measureRelays, "NETPLAY_MEASURE_RELAYS", name: "--measure-relays",
                                                            default: "on", choices: ["on", "off"]) == "on"
        return lobby
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
        _ = try lobby()
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

    /// ``LoadedCore/load(corePath:contentPath:players:buttons:)`` with its failures as one-line
    /// validation errors (`--buttons` named as the flag).
    static func load(core: String, content: String, players: Int, buttons: String?,
                     inputLayout: LibretroInputLayout = .joypad) throws -> LoadedCore {
        do {
            return try LoadedCore.load(corePath: core, contentPath: content, players: players, buttons: buttons,
                                       inputLayout: inputLayout)
        } catch .invalidOptions(let problem) {
            throw ValidationError("--\(problem)")
        } catch {
            throw ValidationError("\(error)")
        }
    }

    /// Loads `--core` with `--content` for `players` players.
    func loadCore(players: Int) throws -> LoadedCore {
        guard let core, let content else { throw ValidationError("--core and --content are required") }
        let layout = try SettingResolver().choice(coreInput, "NETPLAY_CORE_INPUT", name: "--core-input", default: "joypad",
                                                  choices: LibretroInputLayout.allCases.map(\.rawValue))
        let loaded = try Self.load(core: core, content: content, players: players, buttons: buttons,
                                   inputLayout: LibretroInputLayout(rawValue: layout)!)
        FileHandle.standardError.write(Data("netplay-peer: \(loaded.summary)\n".utf8))
        return loaded
    }

    var conditions: NetworkConditions { NetworkConditions(rttMs: rtt, jitterMs: jitter, loss: loss, seed: inputSeed &+ 99) }

    /// The lobby and room an invite `link` names: its cluster (encrypted with its key, else with
    /// `--curve-server-key`'s), the room looked up in its discovery (or heard on the LAN), waiting
    /// for it to be listed until the deadline.
    func findRoom(link: String, deadline: Date) throws -> (NetplayInvite, NetplayLobby, NetplayRoom) {
        let invite: NetplayInvite
        do { invite = try NetplayInvite(url: link) } catch { throw ValidationError("--link: \(error)") }
        var lobby = invite.lobby()
        lobby.lanBeaconPort = lanPort
        let flagKey = invite.isLAN ? nil : try curve.serverKey()
        lobby.serverKey = invite.serverKey ?? flagKey
        lobby.measuresRelays = try self.lobby().measuresRelays
        var lastError: Error?
        while Date() < deadline {
            do {
                return (invite, lobby, try invite.room(through: lobby))
            } catch {
                lastError = error
            }
            usleep(200_000)
        }
        throw ValidationError("the invite's room \(invite.sessionId) was not found before the timeout" + (lastError.map { ": \($0)" } ?? ""))
    }

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

/// Writes one line to standard output at once (unbuffered, so test harnesses see it).
func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

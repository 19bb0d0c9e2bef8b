import ArgumentParser
import Foundation
import Games
import Libretro
import NetplayKit
import NetplayService
import NetplayWire

/// What a playing subcommand runs with: ``PeerOptions`` resolved (flag, then `NETPLAY_*`
/// variable, then default) and checked. The defaults are those `--help` states.
struct PeerSettings {
    /// Where the cluster's discovery and coordinator answer.
    var discovery = ServiceDefaults.discoveryEndpoint
    var coordinator = ServiceDefaults.coordinatorEndpoint
    /// The cluster's public key (`--curve-server-key`, or from the environment); nil: unencrypted.
    var serverKey: [UInt8]?
    var paths = 3
    var pathsOnLoss = 4
    var measuresRelays = true
    /// nil: the role's name.
    var name: String?
    var room = "netplay-peer room"
    var game = SampleGame.arena
    /// A libretro core and its content, both or neither.
    var core: String?
    var content: String?
    var buttons: String?
    var coreInput = LibretroInputLayout.joypad
    var frames = 3000
    var inputs = InputScript.Kind.random
    var inputSeed: UInt64 = 7
    var rtt = 0
    var jitter = 0
    var loss = 0.0
    var lagAt: Int?
    var lagMs = 1500
    var outageAt: Int?
    var outageMs = 2500
    var desyncAt: Int?
    var hudEvery = 0.0
    var renderEvery = 0
    var timeout = 300.0
    var pacing = NetplayPacing.frameRate
    var lanListenMs = 0
    var lanPort = LanBeacon.defaultPort

    /// The lobby of the cluster these settings name.
    func lobby() -> NetplayLobby {
        var lobby = NetplayLobby(discovery: discovery, coordinator: coordinator, lanBeaconPort: lanPort, serverKey: serverKey)
        lobby.measuresRelays = measuresRelays
        return lobby
    }

    /// A joiner that came through an invite encrypts like the invite's cluster.
    mutating func useServerKey(_ z85: String) throws {
        serverKey = try CurveClientOptions.serverKey(flag: z85, environment: [:])
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
        let loaded = try Self.load(core: core, content: content, players: players, buttons: buttons, inputLayout: coreInput)
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
        lobby.serverKey = invite.serverKey ?? (invite.isLAN ? nil : serverKey)
        lobby.measuresRelays = measuresRelays
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

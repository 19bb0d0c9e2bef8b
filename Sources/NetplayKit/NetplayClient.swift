import Foundation
import Rollback
import NetplayWire

/// The SDK's front door for a frontend: browse rooms, host (LAN or relay), join, spectate.
/// Each of host/join/spectate returns a ``NetplayMatch`` to drive from the game loop; the match
/// publishes the state stream, HUD figures and chat, and reconnects on its own.
///
/// ```swift
/// let client = NetplayClient(name: "JoeMatt")
/// let rooms = await client.lobby.browse()
/// let match = try client.join(rooms[0], game: MyCore(), content: rom)
/// match.start()
/// // every frame: match.tick(input: pad); render(match.game)
/// ```
public final class NetplayClient: Sendable {
    /// The player's display name.
    public let name: String
    /// Lobby, LAN and coordinator access.
    public let lobby: NetplayLobby
    /// Options every match gets (network simulation, timeouts).
    public let matchOptions: MatchOptionsBox

    /// A client for the cluster `lobby` points at.
    public init(name: String, lobby: NetplayLobby = NetplayLobby(), matchOptions: MatchOptionsBox = MatchOptionsBox()) {
        self.name = name
        self.lobby = lobby
        self.matchOptions = matchOptions
    }

    /// Hosts a room for `game` with `settings`. LAN rooms start an in-process relay announced by
    /// the LAN beacon (returned so the caller can stop it); relay rooms go through the coordinator.
    /// `startFromHostState`: `game` is mid-game and everyone starts from its state (see
    /// ``NetplayMatchOptions/startFromHostState``); otherwise every peer starts from its own boot.
    public func host<G: SerializableGame>(game: G, inputSize: Int, settings: NetplaySettings, content: ContentInfo,
                                          gameOptions: [UInt8] = [], lanBeaconHost: String = "255.255.255.255",
                                          lanAdvertiseAddress: String? = nil,
                                          startFromHostState: Bool = false) throws -> (match: NetplayMatch<G>, lanHost: LanHost?) {
        var options = matchOptions.options
        options.content = content
        options.gameOptions = gameOptions
        options.startFromHostState = startFromHostState
        if settings.network == .lan {
            let host = try LanHost(settings: settings, content: content, inputSize: inputSize, hostName: name,
                                   advertiseAddress: lanAdvertiseAddress, beaconHost: lanBeaconHost,
                                   beaconPort: lobby.lanBeaconPort)
            do {
                let match = try NetplayMatch(game: game, admission: host.admission, options: options)
                match.lanHostControls = HostControls(lan: host)
                return (match, host)
            } catch {
                host.stop()
                throw error
            }
        }
        let admission = try lobby.host(settings: settings, content: content, inputSize: inputSize, hostName: name)
        options.serverKey = serverKey(for: admission)
        return (try matchOrLeave(game: game, admission: admission, options: options), nil)
    }

    /// The match for `admission`; when it cannot be made (a relay endpoint it cannot connect to,
    /// no file descriptor left), a coordinator's seat is given back: it stayed taken (a hosted
    /// room listed) until the coordinator expired it, and a retry made a second room. (A LAN
    /// host's place is freed by its pending-join timeout: there is no coordinator to tell.)
    private func matchOrLeave<G: SerializableGame>(game: G, admission: Admission, options: NetplayMatchOptions) throws -> NetplayMatch<G> {
        do {
            return try NetplayMatch(game: game, admission: admission, options: options)
        } catch {
            try? lobby.leave(admission)
            throw error
        }
    }

    /// Joins `room` as a player.
    public func join<G: SerializableGame>(_ room: NetplayRoom, game: G, content: ContentInfo, password: String = "",
                                          preferredSlot: Int = 0) throws -> NetplayMatch<G> {
        let admission = try lobby.join(room, name: name, role: .player, password: password, content: content,
                                       preferredSlot: preferredSlot)
        return try matchOrLeave(game: game, admission: admission, options: options(for: admission))
    }

    /// Watches `room` as a spectator (mid-match joins start from a state snapshot).
    public func spectate<G: SerializableGame>(_ room: NetplayRoom, game: G, password: String = "") throws -> NetplayMatch<G> {
        let admission = try lobby.join(room, name: name, role: .spectator, password: password)
        return try matchOrLeave(game: game, admission: admission, options: options(for: admission))
    }

    /// The lobby's CurveZMQ key for a cluster admission (its relay and coordinator encrypt like
    /// the lobby's services); nil for a LAN room, whose host relay is plain.
    private func serverKey(for admission: Admission) -> [UInt8]? {
        admission.coordinatorEndpoint == nil ? nil : lobby.serverKey
    }

    private func options(for admission: Admission) -> NetplayMatchOptions {
        var options = matchOptions.options
        options.serverKey = serverKey(for: admission)
        return options
    }
}

/// Match options shared by a client's matches (a box so the client stays `Sendable`).
public struct MatchOptionsBox: Sendable {
    /// Network simulation and timeouts applied to every match.
    public var conditions = NetworkConditions()
    /// Nothing heard from the relay this long: reconnect.
    public var silenceTimeoutMs = 1_500

    /// Defaults.
    public init() {}

    var options: NetplayMatchOptions {
        var options = NetplayMatchOptions()
        options.conditions = conditions
        options.silenceTimeoutMs = silenceTimeoutMs
        return options
    }
}

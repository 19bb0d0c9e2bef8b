import Foundation
import NetplayService
import NetplayWire
import ZeroMQ

/// A shareable invite to a room: everything a friend's client needs to join without browsing,
/// as a `netplay://join?...` link. Lobby rooms carry the session id, the cluster's discovery and
/// coordinator endpoints and, for an encrypted cluster, its CurveZMQ public key (Z85); LAN rooms
/// carry their session id and the host's relay endpoint. The room name rides along for the
/// prompt. A link never carries a password: ask for it when ``NetplayRoom/hasPassword`` says so.
///
/// ```
/// netplay://join?session=s-4f2a&coordinator=tcp%3A%2F%2F203.0.113.5%3A7200&discovery=...&room=Joe%27s%20Room
/// ```
public struct NetplayInvite: Sendable, Hashable {
    /// The link's scheme.
    public static let scheme = "netplay"

    /// The session to join (a lobby session id, or a LAN room's session).
    public var sessionId: String
    /// The room's title, for the "join Joe's Room?" prompt ("" when not given).
    public var roomName: String
    /// Whether this is a LAN room (joined through its host's relay at ``endpoint``).
    public var isLAN: Bool
    /// Lobby rooms: the cluster's discovery service (nil when not given).
    public var discoveryEndpoint: String?
    /// Lobby rooms: the cluster's coordinator, which admits the joiner.
    public var coordinatorEndpoint: String?
    /// LAN rooms: the host's in-process relay.
    public var endpoint: String?
    /// The cluster's CurveZMQ public key (32 bytes) when it encrypts; nil for a plain cluster.
    public var serverKey: [UInt8]?

    /// ``serverKey`` in Z85, as `--curve-server-key` takes it (nil for a plain cluster).
    public var serverKeyZ85: String? { serverKey.flatMap { Z85.encode($0) } }

    /// A lobby room's invite.
    public init(sessionId: String, roomName: String = "", discovery: String?, coordinator: String, serverKey: [UInt8]? = nil) {
        self.sessionId = sessionId
        self.roomName = roomName
        isLAN = false
        discoveryEndpoint = discovery
        coordinatorEndpoint = coordinator
        endpoint = nil
        self.serverKey = serverKey
    }

    /// A LAN room's invite (LAN hosts never encrypt).
    public init(lanSessionId sessionId: String, roomName: String = "", endpoint: String) {
        self.sessionId = sessionId
        self.roomName = roomName
        isLAN = true
        discoveryEndpoint = nil
        coordinatorEndpoint = nil
        self.endpoint = endpoint
        serverKey = nil
    }

    /// The invite to `room` through `lobby`'s cluster (its endpoints and key; LAN rooms: the
    /// host's endpoint only).
    public init(room: NetplayRoom, lobby: NetplayLobby) throws(InviteError) {
        if room.isLAN {
            self.init(lanSessionId: room.sessionId, roomName: room.roomName, endpoint: room.endpoint)
        } else {
            guard let coordinator = lobby.coordinatorEndpoint else { throw .missing("coordinator") }
            self.init(sessionId: room.sessionId, roomName: room.roomName, discovery: lobby.discoveryEndpoint,
                      coordinator: coordinator, serverKey: lobby.serverKey)
        }
        try validate()
    }

    /// Why a link was refused.
    public enum InviteError: Error, Sendable, Hashable, CustomStringConvertible {
        /// Not a `netplay://join` link.
        case badScheme(String)
        /// The link does not say `join` (e.g. `netplay://host?...`).
        case notAJoinLink(String)
        /// A parameter the link must carry is absent or empty (`session`, `coordinator` for
        /// lobby rooms, `endpoint` for LAN rooms).
        case missing(String)
        /// A parameter's value is malformed (bad percent-encoding, too long, not an endpoint...).
        case badValue(parameter: String, reason: String)
        /// The key is not 40 characters long (a Z85 CurveZMQ public key is).
        case badKeyLength(Int)
        /// The key is 40 characters but not Z85.
        case badKeyEncoding
        /// The link names a password: invites never carry one.
        case passwordInLink
        /// The same parameter twice, or one this version does not know.
        case badParameter(String)

        public var description: String {
            switch self {
            case .badScheme(let scheme): "Not a netplay invite: the link starts with '\(scheme):', not 'netplay://'."
            case .notAJoinLink(let what): "Not a join link: 'netplay://\(what)' (expected netplay://join?...)."
            case .missing(let name): "The invite has no \(name)."
            case .badValue(let name, let reason): "The invite's \(name) is not valid: \(reason)."
            case .badKeyLength(let count):
                "The invite's key must be a 40-character Z85 CurveZMQ public key (32 bytes), got \(count) characters."
            case .badKeyEncoding: "The invite's key is not Z85 (ZeroMQ's key encoding)."
            case .passwordInLink: "Invite links never carry a password; leave it out and give it when joining."
            case .badParameter(let name): "The invite has an unknown or repeated parameter '\(name)'."
            }
        }
    }

    /// The link: `netplay://join?` with every value percent-encoded (only unreserved characters
    /// stay as they are, so Z85 keys and endpoints survive chat apps and shells).
    public var url: String {
        var items: [(String, String)] = [("session", sessionId)]
        if isLAN {
            items.append(("lan", "1"))
            if let endpoint { items.append(("endpoint", endpoint)) }
        } else {
            if let coordinatorEndpoint { items.append(("coordinator", coordinatorEndpoint)) }
            if let discoveryEndpoint { items.append(("discovery", discoveryEndpoint)) }
            if let serverKeyZ85 { items.append(("key", serverKeyZ85)) }
        }
        if !roomName.isEmpty { items.append(("room", roomName)) }
        return "\(Self.scheme)://join?" + items.map { "\($0)=\(Self.percentEncode($1))" }.joined(separator: "&")
    }

    /// Parses a link made by ``url`` (or by hand); every problem is a clear ``InviteError``.
    public init(url text: String) throws(InviteError) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let colon = trimmed.firstIndex(of: ":") else { throw .badScheme(String(trimmed.prefix(16))) }
        let scheme = String(trimmed[..<colon])
        guard scheme.lowercased() == Self.scheme, trimmed[colon...].hasPrefix("://") else { throw .badScheme(String(scheme.prefix(16))) }
        let rest = trimmed[trimmed.index(colon, offsetBy: 3)...]
        let question = rest.firstIndex(of: "?") ?? rest.endIndex
        let action = rest[..<question].trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        guard action == "join" else { throw .notAJoinLink(String(action.prefix(32))) }
        var values: [String: String] = [:]
        let query = question < rest.endIndex ? rest[rest.index(after: question)...] : ""
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            guard let value = (parts.count > 1 ? String(parts[1]) : "").removingPercentEncoding else {
                throw .badValue(parameter: String(name.prefix(32)), reason: "bad percent-encoding")
            }
            if name == "password" || name == "spectate_password" { throw .passwordInLink }
            guard Self.parameters.contains(name), values[name] == nil else { throw .badParameter(String(name.prefix(32))) }
            values[name] = value
        }
        guard let session = values["session"], !session.isEmpty else { throw .missing("session") }
        sessionId = session
        roomName = values["room"] ?? ""
        switch values["lan"] {
        case nil, "0": isLAN = false
        case "1": isLAN = true
        case let other?: throw .badValue(parameter: "lan", reason: "'\(other.prefix(16))' is not 0 or 1")
        }
        discoveryEndpoint = values["discovery"]
        coordinatorEndpoint = values["coordinator"]
        endpoint = values["endpoint"]
        if let key = values["key"] {
            guard key.count == 40 else { throw .badKeyLength(key.count) }
            guard let bytes = Z85.decode(key), bytes.count == 32 else { throw .badKeyEncoding }
            serverKey = bytes
        } else {
            serverKey = nil
        }
        try validate()
    }

    /// The rules both directions keep: a session id of at most 64 characters, the endpoints a
    /// join needs, every endpoint a ZeroMQ transport endpoint, a LAN room without cluster parts.
    private func validate() throws(InviteError) {
        guard !sessionId.isEmpty else { throw .missing("session") }
        guard sessionId.count <= 64 else { throw .badValue(parameter: "session", reason: "longer than 64 characters") }
        guard roomName.count <= 128 else { throw .badValue(parameter: "room", reason: "longer than 128 characters") }
        if isLAN {
            guard endpoint?.isEmpty == false else { throw .missing("endpoint (the LAN host's relay)") }
            guard coordinatorEndpoint == nil, discoveryEndpoint == nil, serverKey == nil else {
                throw .badValue(parameter: "lan", reason: "a LAN room has no coordinator, discovery or key")
            }
        } else {
            guard coordinatorEndpoint?.isEmpty == false else { throw .missing("coordinator") }
            guard endpoint == nil else { throw .badValue(parameter: "endpoint", reason: "only LAN rooms name their host's relay") }
        }
        for (name, value) in [("coordinator", coordinatorEndpoint), ("discovery", discoveryEndpoint), ("endpoint", endpoint)] {
            guard let value else { continue }
            do { try EndpointValidator.validate(value, name: name) } catch {
                throw .badValue(parameter: name, reason: "'\(value.prefix(64))' is not a ZeroMQ endpoint such as tcp://HOST:PORT")
            }
        }
    }

    private static let parameters: Set<String> = ["session", "room", "lan", "discovery", "coordinator", "endpoint", "key"]

    private static func percentEncode(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: unreserved) ?? value
    }

    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
}

extension NetplayInvite {
    /// A lobby over the invite's cluster (LAN rooms: none, their host admits), encrypted with the
    /// invite's key.
    public func lobby(timeout: Double = 2) -> NetplayLobby {
        NetplayLobby(discovery: discoveryEndpoint, coordinator: coordinatorEndpoint, timeout: timeout, serverKey: serverKey)
    }

    /// The room as far as the link describes it (session, name, LAN endpoint; no content).
    public var room: NetplayRoom {
        var room = NetplayRoom(Room(roomId: sessionId, sessionId: sessionId, roomName: roomName,
                                    transport: isLAN ? .lan : .relay, hostEndpoint: isLAN ? endpoint ?? "" : ""))
        room.isLAN = isLAN
        return room
    }

    /// The room the invite names, in full (content, slots, password flags): a lobby room from
    /// `lobby`'s discovery (NOT_FOUND when it does not list it: ended, or unlisted); a LAN room
    /// from its host's beacon when heard within `lanMilliseconds` on ``NetplayLobby/lanBeaconPort``.
    /// Without a discovery, or no beacon heard, the room as far as the link says.
    public func room(through lobby: NetplayLobby, lanMilliseconds: Int = 1_500) throws -> NetplayRoom {
        if isLAN {
            let heard = (try? lobby.lanRooms(listeningFor: lanMilliseconds)) ?? []
            return heard.first { $0.sessionId == sessionId && $0.endpoint == endpoint } ?? room
        }
        guard lobby.discoveryEndpoint != nil else { return room }
        // The invite names a lobby session of its cluster: whatever discovery says must be that
        // room, joined through the coordinator. A LAN room in its place would send the join,
        // password and all, in plain text to an endpoint discovery chose.
        let found = try lobby.lobbyRoom(id: sessionId)
        guard found.sessionId == sessionId, !found.isLAN else {
            throw NetplayError(.internal, "The discovery service described the invite's lobby room \(sessionId) as another room (\(found.isLAN ? "a LAN room at \(found.endpoint)" : "session \(found.sessionId)")).")
        }
        return found
    }

    /// Joins the invite's room through its own cluster (or LAN host): what a "join" button on a
    /// received link does. Give the password when the room asks for one.
    public func join(name: String, role: Role = .player, password: String = "", content: ContentInfo = ContentInfo(),
                     preferredSlot: Int = 0, timeout: Double = 2) throws -> Admission {
        try lobby(timeout: timeout).join(room, name: name, role: role, password: password, content: content, preferredSlot: preferredSlot)
    }
}

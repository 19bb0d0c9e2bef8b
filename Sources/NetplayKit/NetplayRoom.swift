import MemberwiseInit
import NetplayWire

/// A joinable room, from the lobby or heard on the LAN (the frontend's room browser row): every
/// field of the wire's `Room` a browser shows, with a per-slot view.
public struct NetplayRoom: Identifiable, Sendable, Hashable {
    /// The room id (the session id for lobby rooms).
    public var id: String
    /// The coordinator session ("" for LAN rooms, which name their session in `lanSessionId`).
    public var sessionId: String
    /// The host's display name.
    public var hostName: String
    /// The room's title.
    public var roomName: String
    /// The game: name, CRC32/MD5, core id and version.
    public var content: ContentInfo
    /// Player slots.
    public var maxPlayers: Int
    /// Players in.
    public var currentPlayers: Int
    /// Whether spectators may join, and how many are in.
    public var spectatorsAllowed: Bool
    /// Spectator places (0 when spectators are not allowed, or the announcer does not say).
    public var maxSpectators: Int
    /// Spectators watching.
    public var currentSpectators: Int
    /// A password is needed to play.
    public var hasPassword: Bool
    /// A (separate) password is needed to spectate.
    public var hasSpectatePassword: Bool
    /// The match already runs (late joiners come in from a state snapshot).
    public var inProgress: Bool
    /// The host's input delay.
    public var frameDelay: Int
    /// Heard on the LAN (the host runs the relay) rather than listed in the lobby.
    public var isLAN: Bool
    /// LAN rooms: the host's in-process relay; lobby rooms: the assigned relay.
    public var endpoint: String
    /// The region tag the host chose, e.g. "eu-west" ("" when none).
    public var region: String
    /// Where the room was heard of: the lobby, a LAN beacon, a RetroArch host on the LAN or
    /// behind a relay.
    public var source: RoomSource
    /// The protocol or frontend version the host runs ("" when unknown).
    public var hostVersion: String
    /// The player slots, 1 ... ``maxPlayers``: who holds each. When the announcer names no
    /// holders (LAN beacons, RetroArch rooms) every slot's holder is ``Slot/Holder/unknown``.
    public var slots: [Slot]
    /// Round trip to the host or relay, when measured.
    public var pingMs: Int?

    /// One player slot, for a "join as player 2?" prompt.
    @PublicMemberwiseInit
    public struct Slot: Sendable, Hashable {
        /// Who holds a slot.
        public enum Holder: Sendable, Hashable {
            /// Nobody: a player may take it.
            case free
            /// A player, by display name.
            case player(name: String)
            /// The announcer does not say (only the room's counts are known).
            case unknown
        }

        /// The slot number, 1-based (the controller port).
        public var number: Int
        /// Who holds it.
        public var holder: Holder
        /// Whether the holder is attached to the relay now; nil when unknown (free slots, rooms
        /// that do not say).
        public var connected: Bool? = nil

        /// Whether a player may take this slot (false when it is held or unknown).
        public var isFree: Bool { holder == .free }
    }

    /// A room from its wire form.
    public init(_ room: Room) {
        id = room.roomId
        sessionId = room.sessionId.isEmpty ? room.roomId : room.sessionId
        hostName = room.hostName
        roomName = room.roomName
        content = room.content ?? ContentInfo()
        maxPlayers = Int(room.maxPlayers)
        currentPlayers = Int(room.currentPlayers)
        spectatorsAllowed = room.spectatorsAllowed
        maxSpectators = Int(room.maxSpectators)
        currentSpectators = Int(room.currentSpectators)
        hasPassword = room.hasPassword
        hasSpectatePassword = room.hasSpectatePassword
        inProgress = room.inProgress
        frameDelay = Int(room.frameDelay)
        isLAN = room.transport == .lan
        endpoint = room.transport == .lan ? room.hostEndpoint : room.relayEndpoint
        region = room.region
        source = room.source
        hostVersion = room.hostVersion
        slots = Self.slots(of: room)
        pingMs = nil
    }

    /// The wire's slots in slot order, one for each of 1 ... max players (the announcer's
    /// entries outside that range dropped, missing ones unknown); all unknown when it sent none.
    static func slots(of room: Room) -> [Slot] {
        let count = Int(min(room.maxPlayers, 8))
        guard count > 0 else { return [] }
        let given = Dictionary(room.slots.map { (Int($0.slot), $0) }, uniquingKeysWith: { first, _ in first })
        return (1...count).map { number in
            guard let slot = given[number] else { return Slot(number: number, holder: .unknown) }
            guard slot.occupied else { return Slot(number: number, holder: .free) }
            return Slot(number: number, holder: .player(name: slot.playerName), connected: slot.connected)
        }
    }

    /// Whether a player slot is free.
    public var hasFreeSlot: Bool { currentPlayers < maxPlayers }

    /// Whether a spectator place is free (the coordinator's rule: spectators allowed and fewer
    /// in than the places).
    public var hasSpectatorPlace: Bool { spectatorsAllowed && currentSpectators < maxSpectators }
}

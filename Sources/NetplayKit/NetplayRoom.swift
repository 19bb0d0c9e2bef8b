import NetplayWire

/// A joinable room, from the lobby or heard on the LAN (the frontend's room browser row).
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
    /// Spectators watching.
    public var currentSpectators: Int
    /// A password is needed to play.
    public var hasPassword: Bool
    /// The match already runs (late joiners come in from a state snapshot).
    public var inProgress: Bool
    /// The host's input delay.
    public var frameDelay: Int
    /// Heard on the LAN (the host runs the relay) rather than listed in the lobby.
    public var isLAN: Bool
    /// LAN rooms: the host's in-process relay; lobby rooms: the assigned relay.
    public var endpoint: String
    /// Round trip to the host or relay, when measured.
    public var pingMs: Int?

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
        currentSpectators = Int(room.currentSpectators)
        hasPassword = room.hasPassword
        inProgress = room.inProgress
        frameDelay = Int(room.frameDelay)
        isLAN = room.transport == .lan
        endpoint = room.transport == .lan ? room.hostEndpoint : room.relayEndpoint
        pingMs = nil
    }

    /// Whether a player slot is free.
    public var hasFreeSlot: Bool { currentPlayers < maxPlayers }
}

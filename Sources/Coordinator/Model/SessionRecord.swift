import MemberwiseInit
import NetplayAuth
import NetplayWire

/// Someone in a session, as the coordinator stores them.
@PublicMemberwiseInit
public struct ParticipantRecord: Sendable, Equatable {
    /// Opaque id, unique in the session.
    public var participantId: String
    /// Display name.
    public var name: String
    /// Player or spectator.
    public var role: Role
    /// Controller slot, 1-based (0 for spectators).
    public var slot: UInt32
    /// The host.
    public var isHost: Bool = false
    /// May take a controller slot (joined with the play password, or none is set).
    public var mayPlay: Bool = true
    /// Attached to the relay (as last reported).
    public var connected: Bool = false
    /// When they joined.
    public var joinedAtUnixMs: UInt64
    /// The join's idempotency key ("" = none).
    public var idempotencyKey: String = ""
    /// The keyed join's ``RequestFingerprints`` fingerprint: only that same join is replayed
    /// under its key (nil = unkeyed, or stored before fingerprints: no replay).
    public var requestFingerprint: [UInt8]? = nil
    /// The network address they joined from (`Request.source`; "" = unknown): what a ban binds to.
    public var source: String = ""

    /// The wire form.
    public var info: Participant {
        Participant(participantId: participantId, name: name, role: role, slot: slot, connected: connected, isHost: isHost,
                    joinedAtUnixMs: joinedAtUnixMs)
    }
}

/// A session as the coordinator stores it: settings without passwords, the passwords' salted
/// hashes, participants, bans, relay and lifecycle times.
public struct SessionRecord: Sendable, Equatable {
    /// Session id (also the lobby room id).
    public var sessionId: String
    /// Lifecycle state.
    public var state: SessionState
    /// The host's settings with both passwords blanked.
    public var settings: SessionSettings
    /// Argon2id hash of the play password (nil = none).
    public var playPasswordHash: String?
    /// Argon2id hash of the spectate password (nil = none).
    public var spectatePasswordHash: String?
    /// The host's participant id.
    public var hostParticipantId: String
    /// The assigned relay ("" = none/LAN).
    public var relayId: String
    /// That relay's peer endpoint.
    public var relayEndpoint: String
    /// When it was created, started, ended (0 = not yet).
    public var createdAtUnixMs: UInt64
    /// When it started.
    public var startedAtUnixMs: UInt64 = 0
    /// When it ended.
    public var endedAtUnixMs: UInt64 = 0
    /// Increments on every change.
    public var version: UInt64 = 1
    /// The create request's idempotency key ("" = none).
    public var idempotencyKey: String
    /// The keyed create's ``RequestFingerprints`` fingerprint: only that same create is replayed
    /// under its key (nil = unkeyed, or stored before fingerprints: no replay).
    public var requestFingerprint: [UInt8]?
    /// Everyone in the session, in join order.
    public var participants: [ParticipantRecord]
    /// Who a kick with ban refused: names, source addresses, participant ids.
    public var bans = AdmissionBans()

    /// Creates a record.
    public init(sessionId: String, state: SessionState, settings: SessionSettings, playPasswordHash: String?,
                spectatePasswordHash: String?, hostParticipantId: String, relayId: String, relayEndpoint: String,
                createdAtUnixMs: UInt64, idempotencyKey: String, participants: [ParticipantRecord]) {
        self.sessionId = sessionId
        self.state = state
        self.settings = settings
        self.playPasswordHash = playPasswordHash
        self.spectatePasswordHash = spectatePasswordHash
        self.hostParticipantId = hostParticipantId
        self.relayId = relayId
        self.relayEndpoint = relayEndpoint
        self.createdAtUnixMs = createdAtUnixMs
        self.idempotencyKey = idempotencyKey
        self.participants = participants
    }

    /// Players (slot holders).
    public var players: [ParticipantRecord] { participants.filter { $0.role == .player } }
    /// Spectators.
    public var spectators: [ParticipantRecord] { participants.filter { $0.role == .spectator } }
    /// The participant with this id.
    public func participant(_ id: String) -> ParticipantRecord? { participants.first { $0.participantId == id } }
    /// Index of the participant with this id.
    public func index(of id: String) -> Int? { participants.firstIndex { $0.participantId == id } }
    /// Who holds `slot`.
    public func holder(of slot: UInt32) -> ParticipantRecord? { participants.first { $0.role == .player && $0.slot == slot } }
    /// The lowest free slot, if any.
    public var firstFreeSlot: UInt32? {
        (1...max(1, settings.maxPlayers)).first { holder(of: $0) == nil }
    }
    /// Listed in the lobby.
    public var isListed: Bool { !settings.unlisted }
    /// Lobby or running.
    public var isActive: Bool { state == .lobby || state == .running }
    /// The host's record.
    public var host: ParticipantRecord? { participant(hostParticipantId) }

    /// The session as the shared admission rules see it.
    public var admissionRoom: AdmissionRoom {
        AdmissionRoom(sessionId: sessionId, content: settings.content, maxPlayers: settings.maxPlayers,
                      takenSlots: Set(players.map(\.slot)), spectatorsAllowed: settings.spectatorsAllowed,
                      maxSpectators: settings.maxSpectators, spectators: spectators.count,
                      hasPlayPassword: playPasswordHash != nil, hasSpectatePassword: spectatePasswordHash != nil, bans: bans)
    }

    /// The sync parameters every ticket carries.
    public var syncParams: SyncParams {
        SyncParams(settings: settings, maxSpectators: settings.maxSpectators)
    }

    /// The wire form (passwords never included).
    public var info: SessionInfo {
        let slots = (1...max(1, settings.maxPlayers)).map { slot in Slot(slot: slot, participant: holder(of: slot)?.info) }
        return SessionInfo(sessionId: sessionId, state: state, settings: settings, hasPassword: playPasswordHash != nil,
                           hasSpectatePassword: spectatePasswordHash != nil, slots: slots,
                           spectators: spectators.map(\.info), hostParticipantId: hostParticipantId, relayId: relayId,
                           relayEndpoint: relayEndpoint, roomId: isListed ? sessionId : "", createdAtUnixMs: createdAtUnixMs,
                           startedAtUnixMs: startedAtUnixMs, endedAtUnixMs: endedAtUnixMs, version: version)
    }

    /// The lobby room for this session (nil when it should not be listed), slots included.
    public func room(hostVersion: String) -> Room? {
        guard isListed, isActive else { return nil }
        return Room(roomId: sessionId, sessionId: sessionId, hostName: host?.name ?? "", roomName: settings.roomName,
                    content: settings.content, maxPlayers: settings.maxPlayers, currentPlayers: UInt32(players.count),
                    spectatorsAllowed: settings.spectatorsAllowed, maxSpectators: settings.maxSpectators,
                    currentSpectators: UInt32(spectators.count), hasPassword: playPasswordHash != nil,
                    hasSpectatePassword: spectatePasswordHash != nil, inProgress: state == .running,
                    frameDelay: settings.frameDelay, transport: settings.transport == .lan ? .lan : .relay,
                    hostEndpoint: settings.transport == .lan ? settings.lanEndpoint : "",
                    relayEndpoint: settings.transport == .lan ? "" : relayEndpoint, region: settings.region,
                    source: .lobby, hostVersion: hostVersion, slots: roomSlots)
    }

    /// Every player slot with its holder's name and presence (what a browser's "join as player
    /// 2?" prompt shows).
    var roomSlots: [RoomSlot] {
        (1...max(1, settings.maxPlayers)).map { slot in
            let holder = holder(of: slot)
            return RoomSlot(slot: slot, occupied: holder != nil, playerName: holder?.name ?? "", connected: holder?.connected ?? false)
        }
    }
}

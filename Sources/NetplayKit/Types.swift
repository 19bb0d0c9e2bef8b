import Foundation
import NetplayWire

/// Where a hosted room's peers meet.
public enum NetplayNetwork: String, Sendable, Hashable, CaseIterable {
    /// On the local network: this host runs the relay in-process and announces it by LAN beacon.
    case lan
    /// Over the internet, through a relay of the cluster (assigned by the coordinator).
    case relay
}

/// What a host chooses when creating a room (the frontend's "Create Room" screen).
public struct NetplaySettings: Sendable, Hashable {
    /// Room title, e.g. "JoeMatt's Room".
    public var roomName: String
    /// Player slots, 1 ... 8.
    public var maxPlayers: Int = 2
    /// Input delay in frames (0 = rollback only).
    public var frameDelay: Int = 0
    /// Whether spectators may watch.
    public var allowSpectators: Bool = true
    /// Spectator places (RetroArch allows up to 11).
    public var maxSpectators: Int = 11
    /// Password to play (nil = none).
    public var password: String?
    /// Password to spectate (nil = none).
    public var spectatePassword: String?
    /// LAN only or through a relay.
    public var network: NetplayNetwork = .relay
    /// Region tag for the relay choice, e.g. "eu-west".
    public var region: String = ""
    /// Frames a peer may predict ahead (rollback window), 1 ... 32.
    public var predictionWindow: Int = 8
    /// Frames a player may lag before the relay substitutes its input.
    public var lagTolerance: Int = 12
    /// Frames spectators trail the confirmed frame.
    public var spectatorDelay: Int = 0
    /// Players report a checksum every this many frames (0 = never).
    public var checksumInterval: Int = 60
    /// Frames per second in milli-hertz (60000 = 60 Hz).
    public var frameRateMilliHertz: Int = 60_000
    /// Not listed in the lobby.
    public var unlisted: Bool = false

    /// Settings for a room called `roomName`; every other value has the default above.
    public init(roomName: String) { self.roomName = roomName }

    /// Checks the values; returns the first problem as one sentence, or nil.
    public func validationError(inputSize: Int) -> String? {
        if roomName.isEmpty || roomName.utf8.count > 128 { return "The room name must be 1 to 128 bytes." }
        if !(1 ... 8).contains(maxPlayers) { return "Max players must be 1 to 8." }
        if !(0 ... 15).contains(frameDelay) { return "Frame delay must be 0 to 15." }
        if !(0 ... 64).contains(maxSpectators) { return "Max spectators must be 0 to 64." }
        if !(1 ... 32).contains(predictionWindow) { return "The prediction window must be 1 to 32 frames." }
        if !(1 ... 600).contains(lagTolerance) { return "The lag tolerance must be 1 to 600 frames." }
        if !(0 ... 3600).contains(spectatorDelay) { return "The spectator delay must be 0 to 3600 frames." }
        if !(0 ... 3600).contains(checksumInterval) { return "The checksum interval must be 0 to 3600 frames." }
        if !(1000 ... 1_000_000).contains(frameRateMilliHertz) { return "The frame rate must be 1 to 1000 Hz." }
        if !(1 ... 16).contains(inputSize) { return "Inputs must be 1 to 16 bytes." }
        return nil
    }

    /// The coordinator's form of these settings for a game with `content` and `inputSize`-byte inputs.
    public func sessionSettings(content: ContentInfo, inputSize: Int, lanEndpoint: String = "") -> SessionSettings {
        SessionSettings(roomName: roomName, content: content, region: region,
                        transport: network == .lan ? .lan : .relay, lanEndpoint: lanEndpoint, unlisted: unlisted,
                        maxPlayers: UInt32(maxPlayers), frameDelay: UInt32(frameDelay), spectatorsAllowed: allowSpectators,
                        maxSpectators: UInt32(allowSpectators ? maxSpectators : 0), playPassword: password ?? "",
                        spectatePassword: spectatePassword ?? "", inputSize: UInt32(inputSize),
                        frameRateMhz: UInt32(frameRateMilliHertz), predictionWindow: UInt32(predictionWindow),
                        lagToleranceFrames: UInt32(lagTolerance), spectatorDelayFrames: UInt32(spectatorDelay),
                        checksumIntervalFrames: UInt32(checksumInterval))
    }
}

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

/// Why a match ended or could not continue.
public enum DisconnectReason: Sendable, Hashable, CustomStringConvertible {
    /// This side left.
    case left
    /// The host kicked this peer.
    case kicked(String)
    /// The host ended the session, or everyone left.
    case sessionEnded(String)
    /// The relay was unreachable for too long (reconnection gave up).
    case relayLost(String)
    /// The relay refused the ticket (forged, expired, wrong relay) or the join was refused.
    case refused(ErrorCode, String)
    /// Another connection took this participant's place.
    case replaced
    /// Anything else.
    case failed(String)

    public var description: String {
        switch self {
        case .left: "left"
        case .kicked(let why): "kicked: \(why)"
        case .sessionEnded(let why): "session ended: \(why)"
        case .relayLost(let why): "relay lost: \(why)"
        case .refused(let code, let why): "refused (\(code.protoName)): \(why)"
        case .replaced: "replaced by another connection"
        case .failed(let why): "failed: \(why)"
        }
    }
}

/// The match as the frontend shows it: the state stream's values.
public enum NetplayState: Sendable, Hashable, CustomStringConvertible {
    /// Nothing started.
    case idle
    /// Hosting: attached to the relay, waiting for players (the "Waiting for Players" screen).
    case hosting(roomName: String, players: Int, maxPlayers: Int)
    /// Attaching, waiting for a state snapshot, or reconnecting (with the attempt number).
    case connecting(to: String, attempt: Int)
    /// Playing or spectating.
    case connected(slot: Int, players: Int)
    /// Over, with the reason.
    case disconnected(DisconnectReason)

    public var description: String {
        switch self {
        case .idle: "idle"
        case .hosting(let room, let players, let max): "hosting \(room) (\(players)/\(max))"
        case .connecting(let to, let attempt): attempt > 0 ? "reconnecting to \(to) (attempt \(attempt))" : "connecting to \(to)"
        case .connected(let slot, let players): slot > 0 ? "connected as P\(slot) (\(players) players)" : "spectating (\(players) players)"
        case .disconnected(let reason): "disconnected: \(reason)"
        }
    }
}

/// One row of the expanded HUD: a participant and its link.
public struct PlayerHUD: Sendable, Hashable {
    /// 1-based slot; 0 for spectators.
    public var slot: Int
    /// Display name.
    public var name: String
    /// Attached now.
    public var connected: Bool
    /// Round trip to the relay in milliseconds.
    public var pingMs: Int
    /// Frames of its input the relay substituted.
    public var substitutedFrames: Int
    /// This row is the local peer.
    public var isLocal: Bool
}

/// The in-game overlay's figures (`[NET] P2 ████░ 18ms ⊠` and its expanded view).
public struct HUDStats: Sendable, Hashable {
    /// Round trip to the relay, milliseconds.
    public var pingMs = 0
    /// Round-trip jitter, milliseconds.
    public var jitterMs = 0
    /// Input delay in frames.
    public var frameDelay = 0
    /// Rollbacks so far and the frames they re-simulated.
    public var rollbacks = 0
    /// Frames re-simulated by rollbacks.
    public var rollbackFrames = 0
    /// Longest rollback in frames.
    public var maxRollbackFrames = 0
    /// How many frames this peer runs ahead of the slowest player (negative: behind).
    public var framesAhead = 0
    /// The frame simulated now (match numbering).
    public var currentFrame = 0
    /// Frames confirmed for everyone.
    public var confirmedFrame = 0
    /// Desyncs the relay detected, and resyncs completed.
    public var desyncs = 0
    /// Resyncs completed.
    public var resyncs = 0
    /// Everyone in the session.
    public var players: [PlayerHUD] = []

    /// Creates empty figures.
    public init() {}

    /// One line for logs and the collapsed overlay.
    public var line: String {
        var text = "frame=\(currentFrame) ping=\(pingMs)ms jitter=\(jitterMs)ms delay=\(frameDelay) rollbacks=\(rollbacks) "
            + "(\(rollbackFrames) frames, max \(maxRollbackFrames)) ahead=\(framesAhead) desyncs=\(desyncs) resyncs=\(resyncs)"
        let rows = players.filter { $0.slot > 0 }.sorted { $0.slot < $1.slot }
        if !rows.isEmpty {
            text += " players=[" + rows.map { row in
                "P\(row.slot) \(row.connected ? "\(row.pingMs)ms" : "away")" + (row.substitutedFrames > 0 ? " subst \(row.substitutedFrames)" : "")
            }.joined(separator: ", ") + "]"
        }
        return text
    }
}

/// A chat line received in a session.
public struct ChatLine: Sendable, Hashable {
    /// Sender's display name.
    public var from: String
    /// Sender's slot (0: spectator).
    public var slot: Int
    /// The text.
    public var text: String
    /// When the relay received it (Unix milliseconds).
    public var sentAtUnixMs: UInt64
}

/// Something NetplayKit could not do, with the wire error code when a service refused.
public struct NetplayError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The service's error code (`.unspecified` for local failures).
    public var code: ErrorCode
    /// One sentence.
    public var message: String

    /// Creates an error.
    public init(_ code: ErrorCode = .unspecified, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { code == .unspecified ? message : "\(code.protoName): \(message)" }
}

/// A seat in a session: the signed ticket the relay admits, and the credentials to renew it.
public struct Admission: Sendable, Hashable {
    /// The join ticket (names session, participant, role, slot, relay and sync parameters).
    public var ticket: JoinTicket
    /// Where to attach.
    public var relayEndpoint: String
    /// The participant's secret for later coordinator requests (empty for LAN rooms).
    public var participantToken: [UInt8]
    /// The coordinator that issued the ticket (nil for LAN rooms).
    public var coordinatorEndpoint: String?

    /// Creates an admission.
    public init(ticket: JoinTicket, relayEndpoint: String, participantToken: [UInt8] = [], coordinatorEndpoint: String? = nil) {
        self.ticket = ticket
        self.relayEndpoint = relayEndpoint.isEmpty ? ticket.relayEndpoint : relayEndpoint
        self.participantToken = participantToken
        self.coordinatorEndpoint = coordinatorEndpoint
    }

    /// The session id.
    public var sessionId: String { ticket.sessionId }
    /// 1-based slot; 0 for spectators.
    public var slot: Int { Int(ticket.slot) }
    /// Player or spectator.
    public var role: Role { ticket.role }
}

/// Simulated network conditions on this peer's link to the relay (tests, demos, chaos runs):
/// applied to what it sends and what it receives.
public struct NetworkConditions: Sendable, Hashable {
    /// Round trip added to the link, milliseconds (half on each direction).
    public var rttMs: Int = 0
    /// Extra delay per message drawn from `0 ... jitterMs` (input traffic only: it may reorder).
    public var jitterMs: Int = 0
    /// Probability that an input message (inputs, acknowledgements, pings) is lost.
    public var loss: Double = 0
    /// Seeds the loss and jitter draws.
    public var seed: UInt64 = 1

    /// A perfect link.
    public init(rttMs: Int = 0, jitterMs: Int = 0, loss: Double = 0, seed: UInt64 = 1) {
        self.rttMs = rttMs
        self.jitterMs = jitterMs
        self.loss = loss
        self.seed = seed
    }

    /// Whether anything is simulated.
    public var isPerfect: Bool { rttMs == 0 && jitterMs == 0 && loss == 0 }
}
